# examples/train_cnn.c in the suite: a short run on Fashion-MNIST must learn (the training
# loss falls and the test accuracy reaches CNN_ACCURACY_BAR), a run resumed from a checkpoint
# must end exactly where the uninterrupted run ends, its command line refuses bad values, and
# on the CUDA device (emulated, and on a GPU where there is one) it trains as on the CPU
# (cnn_cuda_matches_cpu_*).
# The runs need the data set (Debian's dataset-fashion-mnist, scripts/deps.sh installs it):
# without it they skip visibly (exit 77, "SKIP: ..."), as tests that need torch do.
#
# The same file is the resume test's script: `cmake -DPROG=... -DDIR=... -P cnn.cmake` runs
# the program three times (60 steps; 30 steps with a checkpoint; --resume to 60) and compares
# the final train loss, test loss and test accuracy, printed with %.17g, as strings.

set(CNN_DATA /usr/share/datasets/fashion-mnist)
# 300 SGD steps of batch 64 on 10,000 training images reach 0.83 on 2,000 test images
# (docs/cnn.md); the bar leaves room for other seeds, thread counts and BLAS builds.
set(CNN_ACCURACY_BAR 0.75)
set(CNN_SMALL --train-size 10000 --test-size 2000 --quiet)
include(${CMAKE_CURRENT_LIST_DIR}/device_runs.cmake)

if(CMAKE_SCRIPT_MODE_FILE) # ---- the resume test ----
  include(${CMAKE_CURRENT_LIST_DIR}/../charlm_runs.cmake) # run_value
  file(REMOVE_RECURSE ${DIR})
  file(MAKE_DIRECTORY ${DIR})
  function(cnn_run out)
    execute_process(COMMAND ${PROG} --train-size 2000 --test-size 500 --batch 32 --quiet
                            --threads 1 ${ARGN}
                    OUTPUT_VARIABLE text ERROR_VARIABLE err RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "train_cnn ${ARGN}: exit ${rc}\n${text}${err}")
    endif()
    set(${out} "${text}" PARENT_SCOPE)
  endfunction()
  # The whats of the resumed run's output equal the uninterrupted run's, as strings.
  function(cnn_expect_resumed straight resumed label)
    foreach(what ${ARGN})
      run_value("${straight}" "${what}" a)
      run_value("${resumed}" "${what}" b)
      if(NOT a STREQUAL b)
        message(FATAL_ERROR "${label}: ${what} ${b} resumed, ${a} uninterrupted")
      endif()
      message(STATUS "${label}: ${what} ${a}: resumed == uninterrupted")
    endforeach()
  endfunction()
  if(DEVICE) # ---- --device ${DEVICE} trains as the CPU does ----
    # train_cnn is F32 only, and the device's convolutions and GEMMs sum in other orders than
    # oneDNN's and BLIS's: 3 steps and 4 digits, as the fused/composed check allows. Then a run
    # resumed on the device ends bit for bit where the uninterrupted device run ends.
    set(tiny --train-size 200 --test-size 40 --batch 8 --c1 4 --c2 4)
    tg_skip_without_gpu(${tiny} --steps 1 --quiet)
    foreach(impl fused composed)
      cnn_run(cpu ${tiny} --steps 3 --${impl})
      cnn_run(dev ${tiny} --steps 3 --${impl} --device ${DEVICE})
      tg_expect_device_memory("${dev}")
      foreach(what "final train loss" "final test loss")
        run_value("${cpu}" "${what}" a)
        run_value("${dev}" "${what}" b)
        tg_expect_same_start("${a}" "${b}" 5 "${impl}: ${what}, cpu and ${DEVICE}")
      endforeach()
    endforeach()
    cnn_run(straight ${tiny} --steps 4 --device ${DEVICE} --optimizer adam
            --checkpoint ${DIR}/straight.ckpt)
    cnn_run(first_half ${tiny} --steps 2 --device ${DEVICE} --optimizer adam
            --checkpoint ${DIR}/cnn.ckpt)
    cnn_run(resumed ${tiny} --steps 4 --device ${DEVICE} --optimizer adam
            --checkpoint ${DIR}/cnn.ckpt --resume)
    cnn_expect_resumed("${straight}" "${resumed}" ${DEVICE} "final train loss" "final test loss")
    file(REMOVE_RECURSE ${DIR})
    return()
  endif()
  if(FUSED_VS_COMPOSED) # ---- fused and composed conv+BN train alike ----
    # Same seed, same batches: the two graphs compute the same function, so the losses differ
    # only by F32 rounding carried through training: 1e-7 relative after 20 steps (measured),
    # but it grows chaotically (1e-3 after 40), so 20 steps and 4 digits. Both on the direct
    # convolution: Winograd's, chosen per shape by timing in each process, rounds otherwise
    # (5e-2 apart after 20 steps when one run took it and the other not).
    set(ENV{TG_CONV_WINOGRAD} off)
    foreach(impl fused composed)
      cnn_run(${impl} --steps 20 --${impl})
    endforeach()
    foreach(what "final train loss" "final test loss")
      run_value("${fused}" "${what}" a)
      run_value("${composed}" "${what}" b)
      tg_expect_same_start("${a}" "${b}" 6 "${what}, fused and composed")
    endforeach()
    file(REMOVE_RECURSE ${DIR})
    return()
  endif()
  # One thread, as charlm.cmake: the runs must round alike on a contended machine. The
  # uninterrupted run keeps a checkpoint of its own: a checkpointed run is deterministic
  # (train_run.h), so both take the same convolution and GEMM engines whatever the timing
  # (a run without one may take Winograd's convolution where its first call measured faster).
  foreach(opt sgd adam)
    cnn_run(straight --steps 60 --optimizer ${opt} --checkpoint ${DIR}/straight.ckpt)
    cnn_run(first_half --steps 30 --optimizer ${opt} --checkpoint ${DIR}/cnn.ckpt
            --checkpoint-every 15)
    cnn_run(resumed --steps 60 --optimizer ${opt} --checkpoint ${DIR}/cnn.ckpt --resume)
    cnn_expect_resumed("${straight}" "${resumed}" "${opt}, resumed at step 30" "final train loss"
                       "final test loss" "test accuracy")
  endforeach()
  file(REMOVE_RECURSE ${DIR})
  return()
endif()

if(NOT TARGET train_cnn)
  return() # examples not built (TG_BUILD_EXAMPLES=OFF)
endif()

# Runs COMMAND... when the data set is installed, else says SKIP and exits 77.
set(CNN_IF_DATA sh -c "test -r '${CNN_DATA}/train-images-idx3-ubyte.gz' && exec \"$@\" || \
(echo 'SKIP: ${CNN_DATA} is missing (Debian: apt install dataset-fashion-mnist, or \
scripts/deps.sh)' && exit 77)" sh)

# Learns: 300 steps on 2 threads (about 10 s), --check (the loss falls) and the bar.
add_test(NAME cnn_learns
         COMMAND ${CNN_IF_DATA} $<TARGET_FILE:train_cnn> --steps 300 --threads 2 --check
                 --expect-accuracy ${CNN_ACCURACY_BAR} ${CNN_SMALL})
set_tests_properties(cnn_learns PROPERTIES PASS_REGULAR_EXPRESSION "check passed"
                                           SKIP_RETURN_CODE 77 TIMEOUT 120)
tg_test_labels(cnn_learns LABELS slow)

add_test(NAME cnn_resume_bit_identical
         COMMAND ${CNN_IF_DATA} ${CMAKE_COMMAND} -DPROG=$<TARGET_FILE:train_cnn>
                 -DDIR=${CMAKE_CURRENT_BINARY_DIR}/cnn_resume -P ${CMAKE_CURRENT_LIST_FILE})
set_tests_properties(cnn_resume_bit_identical PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)
tg_test_labels(cnn_resume_bit_identical LABELS slow)

# The CSV and the plot's fallback run through (a few steps).
add_test(NAME cnn_csv_and_plot_without_gnuplot
         COMMAND ${CNN_IF_DATA} ${CMAKE_COMMAND} -E env PATH=/nonexistent:/usr/bin:/bin
                 $<TARGET_FILE:train_cnn> --steps 3 --csv ${CMAKE_CURRENT_BINARY_DIR}/cnn.csv
                 --plot ${CMAKE_CURRENT_BINARY_DIR}/cnn.png --train-size 500 --test-size 100)
set_tests_properties(cnn_csv_and_plot_without_gnuplot PROPERTIES SKIP_RETURN_CODE 77)
tg_test_labels(cnn_csv_and_plot_without_gnuplot LABELS slow)

# Bad values: exit 2 and a message naming the option and the value; a check that cannot
# pass and a missing data set: exit 1.
function(cnn_cli_test name regex)
  add_test(NAME cnn_cli_${name}
           COMMAND sh -c "out=$(\"$0\" \"$@\" 2>&1); echo \"exit $?: $out\""
                   $<TARGET_FILE:train_cnn> ${ARGN})
  set_tests_properties(cnn_cli_${name} PROPERTIES PASS_REGULAR_EXPRESSION "${regex}")
  tg_test_labels(cnn_cli_${name} LABELS fast)
endfunction()
cnn_cli_test(help "^exit 0: usage: train_cnn" --help)
cnn_cli_test(steps_word "^exit 2: train_cnn: --steps: 'abc' is not an integer" --steps abc)
cnn_cli_test(optimizer "^exit 2: train_cnn: --optimizer: 'rmsprop' is not sgd or adam"
             --optimizer rmsprop)
cnn_cli_test(accuracy_range "^exit 2: train_cnn: --expect-accuracy: '1.5' is out of range"
             --expect-accuracy 1.5)
cnn_cli_test(resume_alone "^exit 2: train_cnn: --resume and --checkpoint-every need" --resume)
cnn_cli_test(two_impls "^exit 2: train_cnn: give one of --fused, --composed" --fused --composed)
cnn_cli_test(missing_data "^exit 1: train_cnn: cannot open '/nonexistent/train-images-idx3-ubyte'"
             --data /nonexistent)
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/cnn_bad_data/train-images-idx3-ubyte "not an IDX file")
cnn_cli_test(malformed_data
             "^exit 1: train_cnn: '[^']*/cnn_bad_data/train-images-idx3-ubyte' is not an IDX file of 3"
             --data ${CMAKE_CURRENT_BINARY_DIR}/cnn_bad_data)
# A check that cannot pass fails the run with exit 1 (with the data set: else a skip).
add_test(NAME cnn_cli_expect_accuracy_fails
         COMMAND sh -c "test -r '${CNN_DATA}/train-images-idx3-ubyte.gz' || \
(echo 'SKIP: ${CNN_DATA} is missing' && exit 77) || exit 77
out=$(\"$0\" \"$@\" 2>&1)
echo \"exit $?: $out\"" $<TARGET_FILE:train_cnn> --steps 2 --expect-accuracy 0.99
                 --train-size 200 --test-size 100 --quiet)
set_tests_properties(cnn_cli_expect_accuracy_fails PROPERTIES
  PASS_REGULAR_EXPRESSION "^exit 1: .*CHECK FAILED: test accuracy [.0-9]+ is below 0.99"
  SKIP_RETURN_CODE 77)
tg_test_labels(cnn_cli_expect_accuracy_fails LABELS fast)

# --fused: the fused conv+batch norm op (tg/conv_bn.h) learns as the composed path does, and
# both train to the same losses from the same seed.
add_test(NAME cnn_learns_fused
         COMMAND ${CNN_IF_DATA} $<TARGET_FILE:train_cnn> --fused --steps 300 --threads 2
                 --check --expect-accuracy ${CNN_ACCURACY_BAR} ${CNN_SMALL})
set_tests_properties(cnn_learns_fused PROPERTIES PASS_REGULAR_EXPRESSION "check passed"
                                                 SKIP_RETURN_CODE 77 TIMEOUT 120)
tg_test_labels(cnn_learns_fused LABELS slow)
add_test(NAME cnn_fused_matches_composed
         COMMAND ${CNN_IF_DATA} ${CMAKE_COMMAND} -DPROG=$<TARGET_FILE:train_cnn>
                 -DFUSED_VS_COMPOSED=ON -DDIR=${CMAKE_CURRENT_BINARY_DIR}/cnn_fused
                 -P ${CMAKE_CURRENT_LIST_FILE})
set_tests_properties(cnn_fused_matches_composed PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)
tg_test_labels(cnn_fused_matches_composed LABELS slow)

# On the CUDA device: the emulation (tests/cuda) and, where the real module is built, a GPU
# (skipped where the machine has none).
tg_device_run_tests(cnn_cuda_matches_cpu train_cnn ${CMAKE_CURRENT_LIST_FILE} WRAP ${CNN_IF_DATA})
cnn_cli_test(device_unknown "^exit 2: train_cnn: --device tpu: tg_device_parse: 'tpu' names no device type"
             --device tpu)
