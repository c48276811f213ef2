# tg_ddp's tests (src/distributed/ddp*.c), at np 1 (with the allocation sweep) and np 2. Included
# from tests/distributed/CMakeLists.txt once tg_dist_program and tg_dist_test exist (MPI found).
tg_dist_program(test_ddp test_ddp.c)
tg_dist_test(NAME dist_ddp_np1 NP 1 COMMAND $<TARGET_FILE:test_ddp>)
tg_dist_test(NAME dist_ddp_np2 NP 2 COMMAND $<TARGET_FILE:test_ddp>)

# A peer that never joins: rank 0's communication thread times out (TG_DIST_TIMEOUT=3) and
# the error reaches the caller. The job then ends through MPI_Abort (non-zero), so the test
# passes on the line the program prints when every check held.
tg_dist_program(test_ddp_fault test_ddp_fault.c)
tg_dist_test(NAME dist_ddp_fault NP 2 COMMAND $<TARGET_FILE:test_ddp_fault>
             ENV TG_DIST_TIMEOUT=3 TIMEOUT 60)
set_tests_properties(dist_ddp_fault PROPERTIES PASS_REGULAR_EXPRESSION "ddp fault: ok")

# CUDA parameters: on the CPU emulation of CUDA at np 1 and 2 (tg_dist_emu: no NCCL, so the
# host copy), and where tg has real CUDA on the GPU at np 1 (NCCL when found; skipped, exit
# 77, without a GPU).
function(tg_ddp_cuda_program name lib)
  add_executable(${name} test_ddp_cuda.c)
  target_compile_options(${name} PRIVATE ${TG_WARNINGS})
  target_link_libraries(${name} PRIVATE ${lib})
  target_include_directories(${name} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/src)
endfunction()
if(TARGET tg_dist_emu)
  tg_ddp_cuda_program(test_ddp_cuda_emu tg_dist_emu)
  tg_dist_test(NAME dist_ddp_cuda_emu_np1 NP 1 COMMAND $<TARGET_FILE:test_ddp_cuda_emu>)
  tg_dist_test(NAME dist_ddp_cuda_emu_np2 NP 2 COMMAND $<TARGET_FILE:test_ddp_cuda_emu>)
  tg_test_labels(dist_ddp_cuda_emu_np1 dist_ddp_cuda_emu_np2 LABELS cuda)
endif()
if(TG_HAVE_CUDA)
  tg_ddp_cuda_program(test_ddp_cuda_gpu tg_dist)
  tg_dist_test(NAME dist_ddp_cuda_gpu_np1 NP 1 COMMAND $<TARGET_FILE:test_ddp_cuda_gpu>)
  set_tests_properties(dist_ddp_cuda_gpu_np1 PROPERTIES SKIP_RETURN_CODE 77
                       ENVIRONMENT "TG_CUDA_MODULE=$<TARGET_FILE:tg_cuda>")
  tg_test_labels(dist_ddp_cuda_gpu_np1 LABELS cuda)
endif()
