# Command lines of the examples, benchmarks and tg-op: --help exits 0 with the usage, and a
# bad number is refused with exit status 2 and a message naming the option and the value
# (examples/common/cli_parse.h). Each run goes through sh, which prints "exit N: <output>" on
# one line, so one regular expression checks both the status and the message.
function(tg_cli_test name target regex)
  if(NOT TARGET ${target})
    return() # examples or benchmarks not built (TG_BUILD_EXAMPLES=OFF)
  endif()
  add_test(NAME cli_${name}
           COMMAND sh -c "out=$(\"$0\" \"$@\" 2>&1); echo \"exit $?: $out\""
                   $<TARGET_FILE:${target}> ${ARGN})
  set_tests_properties(cli_${name} PROPERTIES PASS_REGULAR_EXPRESSION "${regex}")
  tg_test_labels(cli_${name} LABELS fast)
endfunction()

tg_cli_test(train_lltm_help train_lltm "^exit 0: usage: train_lltm" --help)
tg_cli_test(train_lltm_steps_word train_lltm
            "^exit 2: train_lltm: --steps: 'abc' is not an integer" --steps abc)
tg_cli_test(train_lltm_steps_junk train_lltm
            "^exit 2: train_lltm: --steps: '12x' is not an integer" --steps 12x)
tg_cli_test(train_lltm_steps_negative train_lltm
            "^exit 2: train_lltm: --steps: '-3' is out of range \\(1\\.\\.1000000\\)" --steps -3)
tg_cli_test(train_lltm_steps_overflow train_lltm
            "^exit 2: train_lltm: --steps: '99999999999999999999' is out of range" --steps
            99999999999999999999)
tg_cli_test(train_lltm_steps_empty train_lltm
            "^exit 2: train_lltm: --steps: '' is not an integer" --steps=)
tg_cli_test(train_lltm_steps_missing train_lltm "^exit 2: .*'--steps' requires an argument"
            --steps)
tg_cli_test(train_lltm_unknown train_lltm "^exit 2: .*unrecognized option '--stepz'" --stepz 3)

tg_cli_test(tg_lltm_help tg-lltm "^exit 0: usage: tg-lltm" --help)
tg_cli_test(tg_lltm_batch_word tg-lltm "^exit 2: tg-lltm: --batch: 'many' is not an integer"
            --batch many)
tg_cli_test(tg_lltm_iters_zero tg-lltm "^exit 2: tg-lltm: --iters: '0' is out of range" --iters 0)
tg_cli_test(tg_lltm_state_space tg-lltm "^exit 2: tg-lltm: --state: ' 8' is not an integer"
            --state " 8")

tg_cli_test(custom_op_help custom_op "^exit 0: usage: custom_op" --help)
tg_cli_test(custom_op_argument custom_op "^exit 2: custom_op: unexpected argument '3'" 3)

tg_cli_test(lltm_bench_help lltm_bench "^exit 0: usage: lltm_bench" --help)
tg_cli_test(lltm_bench_iters_junk lltm_bench "^exit 2: lltm_bench: --iters: '2x' is not an integer"
            --iters 2x)
tg_cli_test(lltm_bench_threads_item lltm_bench
            "^exit 2: lltm_bench: --threads: 'two' is not an integer" --threads 1,two)
tg_cli_test(lltm_bench_threads_empty lltm_bench
            "^exit 2: lltm_bench: --threads: '1,,2' has an empty item" --threads 1,,2)
tg_cli_test(lltm_bench_sizes_short lltm_bench
            "^exit 2: lltm_bench: --sizes: '4x4' is not 3 integers joined by 'x'" --sizes 4x4)
tg_cli_test(lltm_bench_sizes_overflow lltm_bench
            "^exit 2: lltm_bench: --sizes: '4x4x99999999999999999999': size 99999999999999999999 is out of range"
            --sizes 4x4x99999999999999999999)

tg_cli_test(gemm_engines_help gemm_engines "^exit 0: usage: gemm_engines" --help)
tg_cli_test(gemm_engines_rounds_junk gemm_engines
            "^exit 2: gemm_engines: --rounds: '3x' is not an integer" --rounds 3x)
tg_cli_test(gemm_engines_threads_negative gemm_engines
            "^exit 2: gemm_engines: --threads: '-2' is out of range" --threads -2)
tg_cli_test(gemm_engines_sizes_word gemm_engines
            "^exit 2: gemm_engines: --sizes: 'axbxc' is not 3 integers" --sizes axbxc)

tg_cli_test(parallel_thresholds_help parallel_thresholds "^exit 0: usage: parallel_thresholds"
            --help)
tg_cli_test(parallel_thresholds_gap_word parallel_thresholds
            "^exit 2: parallel_thresholds: --gap: 'abc' is not a number" --gap abc)
tg_cli_test(parallel_thresholds_gap_negative parallel_thresholds
            "^exit 2: parallel_thresholds: --gap: '-1' is out of range" --gap -1)
tg_cli_test(parallel_thresholds_threads_one parallel_thresholds
            "^exit 2: parallel_thresholds: --threads: '1' is out of range \\(2\\.\\.4096\\)"
            --threads 1)
tg_cli_test(parallel_thresholds_iters_overflow parallel_thresholds
            "^exit 2: parallel_thresholds: --iters: '99999999999999999999' is out of range"
            --iters 99999999999999999999)

tg_cli_test(tg_op_help tg_op "^exit 0: usage: tg-op" --help)
tg_cli_test(tg_op_iters_space tg_op "^exit 2: tg-op: --iters: ' 5' is not an integer" bench lltm
            --iters " 5")
tg_cli_test(tg_op_seed_junk tg_op "^exit 2: tg-op: --seed: '7x' is not an integer" list --seed 7x)
