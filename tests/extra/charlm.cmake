# examples/train_charlm.c in the suite: a short run must learn (its --check: the validation
# loss ends 0.5 nats below the text's unigram entropy), a run resumed from a checkpoint must
# end exactly where the uninterrupted run ends, and its command line refuses bad values.
#
# The same file is the resume test's script: `cmake -DPROG=... -DDIR=... -P charlm.cmake`
# runs the program three times (200 steps; 100 steps with a checkpoint; --resume to 200) and
# compares the final losses, printed with %.17g, as strings.

# Small sizes: a few seconds per run on 2 cores (Release).
set(CHARLM_SMALL --batch 16 --seq-len 32 --hidden 64 --embed 16 --lr 0.01 --quiet)

if(CMAKE_SCRIPT_MODE_FILE) # ---- the resume test ----
  include(${CMAKE_CURRENT_LIST_DIR}/../charlm_runs.cmake)
  file(REMOVE_RECURSE ${DIR})
  file(MAKE_DIRECTORY ${DIR})
  function(charlm_run out)
    execute_process(COMMAND ${PROG} ${CHARLM_SMALL} ${ARGN} OUTPUT_VARIABLE text
                    ERROR_VARIABLE err RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "train_charlm ${ARGN}: exit ${rc}\n${text}${err}")
    endif()
    set(${out} "${text}" PARENT_SCOPE)
  endfunction()

  # One thread: on two, tg goes one-threaded for a while when the cores are contended
  # (src/ops/cpu/cpu_contention.c), and a GEMM on one thread rounds differently.
  set(one --threads 1)
  charlm_run(straight --steps 200 ${one})
  charlm_run(first_half --steps 100 --checkpoint ${DIR}/charlm.ckpt --checkpoint-every 50 ${one})
  charlm_run(resumed --steps 200 --checkpoint ${DIR}/charlm.ckpt --resume ${one})
  charlm_expect_resumed_equal("${straight}" "${resumed}" "" 100)
  file(REMOVE_RECURSE ${DIR})
  return()
endif()

if(NOT TARGET train_charlm)
  return() # examples not built (TG_BUILD_EXAMPLES=OFF)
endif()

# Learns: 300 steps, fused and composed side by side, --check on both.
add_test(NAME charlm_learns COMMAND train_charlm --steps 300 --both --check ${CHARLM_SMALL})
set_tests_properties(charlm_learns PROPERTIES PASS_REGULAR_EXPRESSION "check passed" TIMEOUT 120)
tg_test_labels(charlm_learns LABELS slow)

add_test(NAME charlm_resume_bit_identical
         COMMAND ${CMAKE_COMMAND} -DPROG=$<TARGET_FILE:train_charlm>
                 -DDIR=${CMAKE_CURRENT_BINARY_DIR}/charlm_resume -P ${CMAKE_CURRENT_LIST_FILE})
set_tests_properties(charlm_resume_bit_identical PROPERTIES TIMEOUT 120)
tg_test_labels(charlm_resume_bit_identical LABELS slow)

# Sampling and the CSV run through (a few steps; the output is not checked for sense).
add_test(NAME charlm_sample_and_csv
         COMMAND train_charlm --steps 5 --sample 40 --csv ${CMAKE_CURRENT_BINARY_DIR}/charlm.csv
                 ${CHARLM_SMALL})
set_tests_properties(charlm_sample_and_csv PROPERTIES
  PASS_REGULAR_EXPRESSION "--- sample \\(40 characters, temperature 0.8\\) ---\nThe .*--- end of sample ---")
tg_test_labels(charlm_sample_and_csv LABELS slow)

# Without gnuplot on PATH the plot is skipped with a note, and the run still succeeds.
add_test(NAME charlm_plot_without_gnuplot
         COMMAND ${CMAKE_COMMAND} -E env PATH=/nonexistent $<TARGET_FILE:train_charlm> --steps 2
                 --plot ${CMAKE_CURRENT_BINARY_DIR}/charlm.png ${CHARLM_SMALL})
set_tests_properties(charlm_plot_without_gnuplot PROPERTIES
  PASS_REGULAR_EXPRESSION "note: gnuplot is not on PATH, so no plot")
tg_test_labels(charlm_plot_without_gnuplot LABELS slow)

# Bad values: exit 2 and a message naming the option and the value (examples/common/cli_parse.h).
function(charlm_cli_test name regex)
  add_test(NAME charlm_cli_${name}
           COMMAND sh -c "out=$(\"$0\" \"$@\" 2>&1); echo \"exit $?: $out\""
                   $<TARGET_FILE:train_charlm> ${ARGN})
  set_tests_properties(charlm_cli_${name} PROPERTIES PASS_REGULAR_EXPRESSION "${regex}")
  tg_test_labels(charlm_cli_${name} LABELS fast)
endfunction()
charlm_cli_test(help "^exit 0: usage: train_charlm" --help)
charlm_cli_test(steps_word "^exit 2: train_charlm: --steps: 'abc' is not an integer" --steps abc)
charlm_cli_test(lr_zero "^exit 2: train_charlm: --lr: '0' is out of range" --lr 0)
charlm_cli_test(batch_junk "^exit 2: train_charlm: --batch: '8x' is not an integer" --batch 8x)
charlm_cli_test(temperature_word
                "^exit 2: train_charlm: --temperature: 'hot' is not a number" --temperature hot)
charlm_cli_test(resume_alone "^exit 2: train_charlm: --resume and --checkpoint-every need" --resume)
charlm_cli_test(two_impls "^exit 2: train_charlm: give one of --fused, --composed, --both" --fused
                --both)
# A check that cannot pass fails the run with exit 1: --expect-below is not decoration.
charlm_cli_test(expect_below_fails
                "^exit 1: .*CHECK FAILED: fused validation loss [.0-9]+ is not below 0.01"
                --steps 2 --expect-below 0.01 ${CHARLM_SMALL})
charlm_cli_test(missing_text "^exit 1: train_charlm: cannot open '/nonexistent/text'" --text
                /nonexistent/text)
