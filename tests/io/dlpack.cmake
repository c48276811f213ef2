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

# PyTorch through ctypes, run by TG_TORCH_PYTHON: a Python that can import torch (a venv's
# bin/python, say). -DTG_TORCH_PYTHON=... sets it, and so does the environment variable
# TG_TORCH_PYTHON at configure time (it wins over the cache, so that exporting it and
# configuring again is enough). Default: the system's /usr/bin/python3 (a pyenv python3 on
# PATH may lack torch). Without that Python, or without torch in it, the test says so and
# skips (77).
set(TG_TORCH_PYTHON /usr/bin/python3 CACHE FILEPATH
    "The Python (with PyTorch) that runs ctest dlpack_torch; env TG_TORCH_PYTHON overrides it")
if(DEFINED ENV{TG_TORCH_PYTHON} AND NOT "$ENV{TG_TORCH_PYTHON}" STREQUAL "")
  set(TG_TORCH_PYTHON "$ENV{TG_TORCH_PYTHON}" CACHE FILEPATH
      "The Python (with PyTorch) that runs ctest dlpack_torch; env TG_TORCH_PYTHON overrides it"
      FORCE)
endif()
set(TG_DLPACK_PYTHON ${TG_TORCH_PYTHON})
set(_tg_dlpack_script ${CMAKE_CURRENT_SOURCE_DIR}/python/dlpack_torch.py)
if(TG_SANITIZE STREQUAL "thread")
  add_test(NAME dlpack_torch COMMAND sh -c
           "echo 'SKIP: libtg.so is built with ThreadSanitizer, which Python cannot load'; exit 77")
elseif(NOT EXISTS ${TG_DLPACK_PYTHON})
  add_test(NAME dlpack_torch COMMAND sh -c "echo 'SKIP: ${TG_DLPACK_PYTHON} not found'; exit 77")
else()
  add_test(NAME dlpack_torch COMMAND ${TG_DLPACK_PYTHON} ${_tg_dlpack_script}
                                     $<TARGET_FILE:tg_shared>)
  if(TG_SANITIZE)
    # libtg.so needs the ASan runtime loaded first; Python's own allocations at exit are not
    # tg's leaks.
    execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libasan.so
                    OUTPUT_VARIABLE _tg_libasan OUTPUT_STRIP_TRAILING_WHITESPACE)
    set_tests_properties(dlpack_torch PROPERTIES ENVIRONMENT
                         "LD_PRELOAD=${_tg_libasan};ASAN_OPTIONS=detect_leaks=0")
  endif()
endif()
set_tests_properties(dlpack_torch PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)
