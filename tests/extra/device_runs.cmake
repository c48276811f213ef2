# What the examples' "trains on CUDA as on the CPU" tests share (tests/extra/gpt.cmake and
# cnn.cmake). Included, never run on its own.

# In a test script (cmake -P): fails with "SKIP: no GPU here", which the test's
# SKIP_REGULAR_EXPRESSION reads as a skip, when PROG ARGS... --device DEVICE says the machine
# has no CUDA device (the real module on a machine without a GPU).
function(tg_skip_without_gpu)
  execute_process(COMMAND ${PROG} ${ARGN} --device ${DEVICE} OUTPUT_QUIET ERROR_VARIABLE err
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 AND err MATCHES "no CUDA device is available")
    message(FATAL_ERROR "SKIP: no GPU here")
  endif()
endfunction()

# In a CMakeLists: tests <name>_emu (the emulated CUDA module, tests/cuda) and, where the real
# module is built, <name>_gpu, each running SCRIPT with -DPROG=<program> -DDEVICE=cuda
# -DDIR=<a folder of its own> and TG_CUDA_MODULE naming the module. WRAP: words before the
# command (a check that skips without a data set).
function(tg_device_run_tests name program script)
  cmake_parse_arguments(ARG "" "" "WRAP" ${ARGN})
  set(modules)
  if(TARGET tg_cuda_emu)
    list(APPEND modules emu tg_cuda_emu)
  endif()
  if(TG_HAVE_CUDA)
    list(APPEND modules gpu tg_cuda)
  endif()
  while(modules)
    list(POP_FRONT modules variant module)
    add_test(NAME ${name}_${variant}
             COMMAND ${ARG_WRAP} ${CMAKE_COMMAND} -E env TG_CUDA_MODULE=$<TARGET_FILE:${module}>
                     ${CMAKE_COMMAND} -DPROG=$<TARGET_FILE:${program}> -DDEVICE=cuda
                     -DDIR=${CMAKE_CURRENT_BINARY_DIR}/${name}_${variant} -P ${script})
    set_tests_properties(${name}_${variant} PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77
                         SKIP_REGULAR_EXPRESSION "SKIP: no GPU here")
    tg_test_labels(${name}_${variant} LABELS slow)
  endwhile()
endfunction()

# In a test script: fails unless values a and b (as printed, %.17g) agree in their first
# `chars` characters; says so either way, with the label.
function(tg_expect_same_start a b chars label)
  string(SUBSTRING "${a}" 0 ${chars} a_start)
  string(SUBSTRING "${b}" 0 ${chars} b_start)
  if(NOT a_start STREQUAL b_start)
    message(FATAL_ERROR "${label}: ${a} and ${b} differ in their first ${chars} characters")
  endif()
  message(STATUS "${label}: ${a} and ${b}")
endfunction()

# In a test script: fails unless a run's output reports device memory used (the summary's
# "peak CUDA memory in use", not 0.0 MB): the run really ran on the device.
function(tg_expect_device_memory text)
  if(NOT text MATCHES "peak CUDA memory in use [0-9.]+ MB" OR text MATCHES "in use 0\\.0 MB")
    message(FATAL_ERROR "the ${DEVICE} run used no device memory:\n${text}")
  endif()
endfunction()
