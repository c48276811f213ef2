# examples/train_charlm.c --dist (tg_dist, docs/distributed.md) in the suite, when tg_dist is
# built with MPI: np 2 and np 1 follow the single-process run on the same global batch, rank 0
# alone prints, a np 2 checkpoint resumes at np 2, and the errors are clear. Without MPI: --dist
# says so.
#
# The same file is the script of the two multi-run tests: `cmake -DMODE=equal|resume
# -DPROG=... -DMPIEXEC=... -DNP_FLAG=... -DDIR=... -P charlm_dist.cmake`.

# Small sizes (a second or two per run); one thread per rank: every run does the same GEMMs.
set(CHARLM_DIST_SMALL --batch 16 --seq-len 32 --hidden 64 --embed 16 --lr 0.01 --threads 1)
# Per-step training loss and final validation loss, |dist - single| at most this. The
# gradients differ only in the order of the additions (each rank's mean over its half of the
# batch, then the mean of the two, against one mean over the whole batch): measured 2.4e-7
# (training) and 7e-8 (validation) at np 2 over these 30 steps (F32), 0 at np 1; the bound
# leaves a margin of 400x. (Rounding differences grow as training goes on, as any change in
# the order of additions does: 3e-3 by step 100 of the default model, docs/distributed.md.)
set(CHARLM_DIST_BOUND 1e-4)

if(CMAKE_SCRIPT_MODE_FILE)
  include(${CMAKE_CURRENT_LIST_DIR}/../charlm_runs.cmake)
  file(REMOVE_RECURSE ${DIR})
  file(MAKE_DIRECTORY ${DIR})
  # np 0: the program alone, no mpirun.
  function(charlm_run np out)
    if(np EQUAL 0)
      set(cmd ${PROG})
    else()
      set(cmd ${MPIEXEC} --oversubscribe ${NP_FLAG} ${np} ${PROG} --dist)
    endif()
    execute_process(COMMAND ${cmd} ${CHARLM_DIST_SMALL} --quiet ${ARGN} OUTPUT_VARIABLE text
                    ERROR_VARIABLE err RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "np ${np}: train_charlm ${ARGN}: exit ${rc}\n${text}${err}")
    endif()
    set(${out} "${text}" PARENT_SCOPE)
  endfunction()

  if(MODE STREQUAL "equal")
    set(steps --steps 30)
    charlm_run(0 single ${steps} --csv ${DIR}/single.csv)
    foreach(np 1 2)
      charlm_run(${np} out ${steps} --csv ${DIR}/np${np}.csv)
      # Column 3 is the step's loss, column 6 the validation loss (where measured); awk
      # does the arithmetic CMake cannot, and prints the largest differences.
      execute_process(
        COMMAND
          awk -F, -v bound=${CHARLM_DIST_BOUND} [[
            function abs(x) { return x < 0 ? -x : x }
            FNR == 1 { next }
            NR == FNR { loss[$1] = $3; val[$1] = $6; n++; next }
            { m++
              if (!($1 in loss)) { print "step " $1 " only in the --dist CSV"; bad = 1; next }
              d = abs($3 - loss[$1]); if (d > dl) dl = d
              if ((val[$1] == "") != ($6 == "")) { print "step " $1 ": validation in one CSV only"; bad = 1 }
              else if ($6 != "") { d = abs($6 - val[$1]); if (d > dv) dv = d } }
            END { printf "max |loss difference| %.3g (training, %d steps), %.3g (validation); bound %g\n", dl, m, dv, bound
                  if (m != n || m == 0) { print "the CSVs have " n " and " m " steps"; bad = 1 }
                  if (dl > bound || dv > bound) bad = 1
                  exit bad }]]
          ${DIR}/single.csv ${DIR}/np${np}.csv
        OUTPUT_VARIABLE cmp RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE)
      message(STATUS "np ${np} against one process: ${cmp}")
      if(NOT rc EQUAL 0)
        message(FATAL_ERROR "np ${np} --dist does not follow the single-process run")
      endif()
    endforeach()
  elseif(MODE STREQUAL "resume")
    # 20 steps straight; 10 with a checkpoint, then --resume to 20: same final losses, bit
    # for bit (same thread count, same ranks, the same reductions in the same order).
    set(ckpt --checkpoint ${DIR}/charlm.ckpt)
    charlm_run(2 straight --steps 20)
    charlm_run(2 first_half --steps 10 ${ckpt} --checkpoint-every 5)
    charlm_run(2 resumed --steps 20 ${ckpt} --resume)
    charlm_expect_resumed_equal("${straight}" "${resumed}" "np 2, " 10)
  else()
    message(FATAL_ERROR "MODE must be equal or resume (got '${MODE}')")
  endif()
  file(REMOVE_RECURSE ${DIR})
  return()
endif()

if(NOT TARGET train_charlm OR NOT TARGET tg_dist_shared)
  return() # examples not built
endif()

# The DDP's options need --dist; --dist trains one model (not --both). Exit 2, with or without
# MPI (the command line is read before tg_dist starts).
function(charlm_dist_cli_test name regex)
  add_test(NAME charlm_dist_cli_${name}
           COMMAND sh -c "out=$(\"$0\" \"$@\" 2>&1); echo \"exit $?: $out\""
                   $<TARGET_FILE:train_charlm> ${ARGN})
  set_tests_properties(charlm_dist_cli_${name} PROPERTIES PASS_REGULAR_EXPRESSION "${regex}")
  tg_test_labels(charlm_dist_cli_${name} LABELS fast)
endfunction()
charlm_dist_cli_test(bucket_without_dist
  "^exit 2: train_charlm: --bucket-kb and --no-overlap need --dist" --bucket-kb 64)
charlm_dist_cli_test(no_overlap_without_dist
  "^exit 2: train_charlm: --bucket-kb and --no-overlap need --dist" --no-overlap)
charlm_dist_cli_test(bucket_zero "^exit 2: train_charlm: --bucket-kb: '0' is out of range"
  --dist --bucket-kb 0)
charlm_dist_cli_test(with_both "^exit 2: train_charlm: --dist trains one model: not with --both"
  --dist --both)

if(NOT TG_HAVE_MPI)
  # Built without MPI: --dist is refused with the reason, exit 1.
  add_test(NAME charlm_dist_without_mpi
           COMMAND sh -c "out=$(\"$0\" \"$@\" 2>&1); echo \"exit $?: $out\""
                   $<TARGET_FILE:train_charlm> --dist --steps 1)
  set_tests_properties(charlm_dist_without_mpi PROPERTIES PASS_REGULAR_EXPRESSION
    "^exit 1: train_charlm: --dist: this tg_dist was built without MPI")
  tg_test_labels(charlm_dist_without_mpi LABELS fast)
  return()
endif()

# Every run: Open MPI's switches for root (CI), a rank out of step fails within 30 s rather
# than tg_dist's 300, and under a sanitizer build what Open MPI keeps until exit is not a
# leak (tests/distributed/lsan.supp, as tests/distributed/CMakeLists.txt does).
set(_charlm_env ${CMAKE_COMMAND} -E env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    TG_DIST_TIMEOUT=30
    LSAN_OPTIONS=suppressions=${PROJECT_SOURCE_DIR}/tests/distributed/lsan.supp:print_suppressions=0:fast_unwind_on_malloc=0)
set(_charlm_script ${_charlm_env} ${CMAKE_COMMAND} -DPROG=$<TARGET_FILE:train_charlm>
    -DMPIEXEC=${MPIEXEC_EXECUTABLE} -DNP_FLAG=${MPIEXEC_NUMPROC_FLAG})
add_test(NAME charlm_dist_equals_single
         COMMAND ${_charlm_script} -DMODE=equal -DDIR=${CMAKE_CURRENT_BINARY_DIR}/charlm_dist_eq
                 -P ${CMAKE_CURRENT_LIST_FILE})
add_test(NAME charlm_dist_resume_np2
         COMMAND ${_charlm_script} -DMODE=resume
                 -DDIR=${CMAKE_CURRENT_BINARY_DIR}/charlm_dist_resume -P ${CMAKE_CURRENT_LIST_FILE})
set_tests_properties(charlm_dist_equals_single charlm_dist_resume_np2 PROPERTIES TIMEOUT 180
                                                                          LABELS dist)
tg_test_labels(charlm_dist_equals_single charlm_dist_resume_np2 LABELS slow mpi)

# mpirun -np N train_charlm --dist ARGS... (with the variables ENV); the test sees "exit S: OUTPUT" (stdout and
# stderr of every rank) and passes when it matches PASS and matches none of FAIL.
function(charlm_dist_test name np)
  cmake_parse_arguments(T "" "PASS" "FAIL;ARGS;ENV" ${ARGN})
  add_test(NAME charlm_dist_${name}
           COMMAND ${_charlm_env} ${T_ENV} sh -c "out=$(\"$0\" \"$@\" 2>&1); echo \"exit $?: $out\"" ${MPIEXEC_EXECUTABLE}
                   --oversubscribe ${MPIEXEC_NUMPROC_FLAG} ${np} $<TARGET_FILE:train_charlm> --dist
                   ${T_ARGS})
  set_tests_properties(charlm_dist_${name} PROPERTIES PASS_REGULAR_EXPRESSION "${T_PASS}"
                                                      TIMEOUT 120 LABELS dist)
  tg_test_labels(charlm_dist_${name} LABELS slow mpi)
  if(T_FAIL)
    set_tests_properties(charlm_dist_${name} PROPERTIES FAIL_REGULAR_EXPRESSION "${T_FAIL}")
  endif()
endfunction()

# Rank 0 alone prints: the header and the summary, with the ranks and the DDP's numbers, once.
charlm_dist_test(rank0_prints 2
  PASS "^exit 0: .*training: [^\n]* 2 ranks of batch 8 \\(--dist\\).*\ndist: 2 ranks, [.0-9]+ steps/s, batch 8 per rank\nddp: [0-9]+ buckets [^\n]*hidden"
  FAIL "unigram entropy:(.|\n)*unigram entropy:" "final val loss(.|\n)*final val loss"
       "ddp:(.|\n)*ddp:"
  ARGS --steps 3 ${CHARLM_DIST_SMALL})
# The global batch must divide among the ranks: exit 2 on every rank, said once (rank 0).
charlm_dist_test(batch_not_divisible 2
  PASS "^exit [1-9][0-9]*: .*train_charlm: --batch 15 is the global batch and must divide among the 2 ranks \\(give a multiple of 2\\)"
  FAIL "must divide(.|\n)*must divide"
  ARGS --batch 15 --steps 1)
# A failure on one rank (rank 0 alone writes the CSV) ends the whole job through
# tg_dist_abort, naming the rank and why, instead of leaving rank 1 waiting for it.
charlm_dist_test(rank_failure_aborts 2
  PASS "^exit [1-9][0-9]*: .*tg_dist: rank 0: train_charlm: cannot write '/nonexistent/x.csv'"
  ARGS --csv /nonexistent/x.csv --steps 3 ${CHARLM_DIST_SMALL})
# tg_dist_init's error (a bad TG_DIST_TIMEOUT) is train_charlm's, exit 1 on every rank.
charlm_dist_test(bad_timeout 2
  PASS "^exit [1-9][0-9]*: .*train_charlm: --dist: tg_dist_init: TG_DIST_TIMEOUT='soon' is not"
  ENV TG_DIST_TIMEOUT=soon ARGS --steps 1)
# A text no rank can read: each says why and the job ends through tg_dist_abort.
charlm_dist_test(missing_text 2
  PASS "^exit [1-9][0-9]*: .*cannot open '/nonexistent/text'.*tg_dist: rank [01]: train_charlm: no usable text"
  ARGS --text /nonexistent/text --steps 1)
# A check that fails (rank 0's) fails the job, said once.
charlm_dist_test(expect_below_fails 2
  PASS "^exit [1-9][0-9]*: .*CHECK FAILED: fused validation loss [.0-9]+ is not below 0.01"
  FAIL "CHECK FAILED(.|\n)*CHECK FAILED"
  ARGS --steps 2 --expect-below 0.01 ${CHARLM_DIST_SMALL})
