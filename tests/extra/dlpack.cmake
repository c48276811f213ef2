# DLPack (src/io/dlpack.c): the C tests again against the emulated CUDA build, where their
# CUDA half runs, and the exchange with PyTorch through ctypes (tests/python/dlpack_torch.py).
# Included from tests/CMakeLists.txt after test_dlpack is defined.
target_include_directories(test_dlpack PRIVATE ${TG_DLPACK_INCLUDE_DIR})

if(TARGET tg_emu)
  add_library(tg_dlpack_testutil_emu STATIC ${CMAKE_CURRENT_SOURCE_DIR}/testutil.c)
  target_include_directories(tg_dlpack_testutil_emu PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}
                             ${PROJECT_SOURCE_DIR}/src ${CRITERION_INCLUDE_DIR} ${TG_DLPACK_INCLUDE_DIR})
  target_compile_definitions(tg_dlpack_testutil_emu PUBLIC TG_CUDA_EMULATION)
  target_link_libraries(tg_dlpack_testutil_emu PUBLIC tg_emu ${CRITERION_LIBRARY})
  add_executable(test_dlpack_cuda_emu ${CMAKE_CURRENT_SOURCE_DIR}/test_dlpack.c)
  target_compile_options(test_dlpack_cuda_emu PRIVATE ${TG_WARNINGS})
  target_link_libraries(test_dlpack_cuda_emu PRIVATE tg_dlpack_testutil_emu)
  add_test(NAME test_dlpack_cuda_emu COMMAND test_dlpack_cuda_emu --jobs 1)
  set_tests_properties(test_dlpack_cuda_emu PROPERTIES TIMEOUT 300)
endif()
