#!/usr/bin/env bash
# Builds the threading tests with ThreadSanitizer into build-tsan/ and runs them, from any
# directory. Fails on a failed test and on any ThreadSanitizer report.
#   - TG_SANITIZE=thread, CPU only (TG_CUDA=OFF), no examples; only the programs named in
#     TSAN_TESTS are built and run (default: threads_standalone, thread_pool_standalone and
#     gemm_shapes_threads: tests/autograd/test_threads.c and tests/ops/test_thread_pool.c built
#     without Criterion, and tests/ops/gemm_shapes_threads.c:
#     Criterion's runner cannot start under TSan, its shared arena wants address space that
#     TSan reserves).
#   - OMP_NUM_THREADS=1 and BLIS_NUM_THREADS=1: libgomp and Debian's BLIS are not built with
#     TSan, so their worker threads' synchronisation is invisible to it and every parallel
#     GEMM would be a false report. TG_NUM_THREADS=2: tg's own pool (thread_pool.c) is
#     instrumented, so its loops run on two threads. The other threads under test are the
#     tests' own pthreads.
#   - Reports go to one file per process; any non-empty report file fails the run.
# Options: --runs=N runs the tests N times (default 3): races are timing-dependent.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# shellcheck source=scripts/check_reports.sh
. scripts/check_reports.sh

runs=3
for arg in "$@"; do
  case $arg in
    --runs=*) runs=${arg#--runs=} ;;
    -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "usage: $0 [--runs=N]" >&2; exit 2 ;;
  esac
done
tests=${TSAN_TESTS:-threads_standalone thread_pool_standalone gemm_shapes_threads}
jobs=$(nproc 2>/dev/null || echo 2)

cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER="${CC:-gcc}" \
  -DTG_SANITIZE=thread -DTG_CUDA=OFF -DTG_WERROR=ON -DTG_BUILD_TESTS=ON \
  -DTG_BUILD_EXAMPLES=OFF >/dev/null
# shellcheck disable=SC2086  # TSAN_TESTS is a space-separated list
cmake --build build-tsan -j"$jobs" --target $tests

logs=$root/build-tsan/tsan-logs
rm -rf "$logs" && mkdir -p "$logs"
export OMP_NUM_THREADS=1 BLIS_NUM_THREADS=1 TG_NUM_THREADS=2
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:log_path=$logs/tsan${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
status=0
for run in $(seq 1 "$runs"); do
  for t in $tests; do
    echo "test-tsan.sh: $t, run $run of $runs"
    TG_GEMM_ENGINE=builtin build-tsan/tests/"$t" || status=1
  done
done

check_reports "$logs" "ThreadSanitizer" || status=1
[ "$status" -eq 0 ] && echo "test-tsan.sh: $tests passed $runs run(s) with no ThreadSanitizer report"
exit "$status"
