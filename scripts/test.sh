#!/usr/bin/env bash
# Builds and tests tg, from any directory:
#   1. build-test/: Release with TG_WERROR=ON, every Criterion test through ctest;
#   2. build-asan/: ASan+UBSan (TG_SANITIZE=ON), the same tests, then the GEMM suites (label
#      gemm) again with BLIS's haswell and (on AVX-512 CPUs) skx kernels. UBSan errors fail
#      their test.
#      ASan reports, leaks included, go to files that are checked and printed here: Criterion
#      ignores a worker's exit status once its test has passed, so a leak alone fails nothing;
#   3. build-tsan/: the threading tests under ThreadSanitizer (scripts/test-tsan.sh);
#   4. build-fuzz/: each libFuzzer target in fuzz/ for TG_FUZZ_SECONDS (default 20) from its
#      checked-in corpus (scripts/fuzz-smoke.sh);
#   5. tests/install/check_install.sh: install, then consume with find_package and pkg-config.
# Options:
#   --quick             skip the sanitizer, ThreadSanitizer and fuzzer passes
#   --valgrind[=NAMES]  also run build-test/'s test binaries under valgrind memcheck: all
#                       (but the real CUDA device's), or the comma-separated NAMES
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; }
quick=0
valgrind=""
for arg in "$@"; do
  case $arg in
    --quick) quick=1 ;;
    --valgrind) valgrind=all ;;
    --valgrind=*) valgrind=${arg#--valgrind=} ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
  esac
done
jobs=$(nproc 2>/dev/null || echo 2)
start=$(date +%s)
step() { printf '\n==== test.sh: %s (at %ds)\n' "$*" $(($(date +%s) - start)); }

# shellcheck source=scripts/check_reports.sh
. scripts/check_reports.sh

scripts/deps.sh

# Without a GPU nothing here runs libtg_cuda.so: sm_90 machine code alone checks that nvcc and
# ptxas take every kernel (the default's three passes per .cu file cost CI ~30 s on 2 cores).
# With one, -U brings back cmake/TgCuda.cmake's default architectures.
cuda_archs=-UTG_CUDA_ARCHITECTURES
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 ||
  cuda_archs=-DTG_CUDA_ARCHITECTURES=90-real

step "build-test/ (Release, TG_WERROR=ON)"
cmake -S . -B build-test -DCMAKE_BUILD_TYPE=Release -DTG_WERROR=ON -DTG_BUILD_TESTS=ON \
  "$cuda_archs" >/dev/null
cmake --build build-test -j"$jobs"
(cd build-test && ctest --output-on-failure --no-tests=error -j"$jobs")

# Checks of the sources themselves (format, layers, docs): the Release pass runs them; a
# sanitizer adds nothing to them.
static_checks='^(format|check_layers.*|api_doc_current|doc_paths.*)$'
# ... and test_blis_guard, whose guard pages catch an over-read by BLIS's kernels (not
# instrumented by ASan) in the Release pass as well: under ASan it was the longest test
# (54 s of the pass's 336 s on 2 cores) and checked nothing more there.
asan_skips='^(format|check_layers.*|api_doc_current|doc_paths.*|test_blis_guard)$'

if [ "$quick" -eq 0 ]; then
  step "build-asan/ (ASan + UBSan)"
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTG_SANITIZE=ON \
    -DTG_WERROR=ON -DTG_BUILD_TESTS=ON -DTG_BUILD_EXAMPLES=OFF >/dev/null
  cmake --build build-asan -j"$jobs"
  logs=$root/build-asan/sanitizer-logs
  rm -rf "$logs" && mkdir -p "$logs"
  status=0
  (cd build-asan &&
    ASAN_OPTIONS="detect_leaks=1:log_path=$logs/asan${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
    UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}" \
    ctest --output-on-failure --no-tests=error -j"$jobs" -E "$asan_skips") || status=$?
  # The suites whose ops run GEMMs (label gemm) again on the other BLIS kernel sets this CPU
  # runs; test_blis_guard and test_blis_kernels already sweep every set and engine
  # themselves, and the rest of the suite runs no BLIS kernel. BLIS_ARCH_TYPE takes numbers
  # only.
  flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)
  sets=()
  [[ " $flags " == *" avx2 "* && " $flags " == *" fma "* ]] && sets+=("3 haswell")
  [[ " $flags " == *" avx512f "* && " $flags " == *" avx512dq "* && " $flags " == *" avx512bw "* &&
    " $flags " == *" avx512vl "* ]] && sets+=("0 skx")
  for set in "${sets[@]}"; do
    [ "$status" -eq 0 ] || break
    step "build-asan/ with BLIS_ARCH_TYPE=${set% *} (${set#* } kernels)"
    (cd build-asan &&
      BLIS_ARCH_TYPE=${set% *} \
      ASAN_OPTIONS="detect_leaks=1:log_path=$logs/asan-${set#* }${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
      UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}" \
      ctest --output-on-failure --no-tests=error -j"$jobs" -L gemm) ||
      status=$?
  done
  check_reports "$logs" "sanitizer" || status=1
  [ "$status" -eq 0 ] || exit "$status"
fi

if [ "$quick" -eq 0 ]; then
  step "build-tsan/ (ThreadSanitizer): tests/autograd/test_threads.c"
  scripts/test-tsan.sh
  step "build-fuzz/ (libFuzzer, clang): fuzz/ targets for ${TG_FUZZ_SECONDS:-20} s each"
  scripts/fuzz-smoke.sh "${TG_FUZZ_SECONDS:-20}"
fi

if [ -n "$valgrind" ]; then
  # build-test/'s Release binaries: tg's libraries are linked in statically and load the CUDA
  # module only when a test asks for a CUDA device, so the CPU suites run without cuBLAS (which
  # makes valgrind ten times slower and reports ld.so false positives from its dlopen). A
  # build of their own (RelWithDebInfo) cost CI ~35 s; rebuild RelWithDebInfo for line numbers
  # in a report. The real CUDA device's suites (*_gpu) skip.
  step "valgrind memcheck over build-test/'s binaries: $valgrind"
  mapfile -t bins < <(find build-test/tests -maxdepth 2 -type f -name 'test_*' -perm -u+x \
    ! -name '*_gpu' | sort)
  logs=$root/build-test/valgrind-logs
  rm -rf "$logs" && mkdir -p "$logs"
  # One binary per core at a time, each with its own log folder; checked as each ends. A
  # failure leaves NAME.failed: wait -n only throttles, since a job that ends while another
  # is waited for is no longer "running" and its status would be lost.
  run_valgrind() {
    local bin=$1 name dir status=0
    name=$(basename "$bin")
    dir=$logs/$name
    mkdir -p "$dir"
    SECONDS=0
    # As under ctest (tests/cmake/TgTest.cmake): tg's fixed GEMM engine rules, no calibration;
    # TG_TEST_UNDER_VALGRIND shortens what would take minutes there (test_autograd's chains).
    TG_GEMM_ENGINE=builtin TG_TEST_UNDER_VALGRIND=1 valgrind -q --trace-children=yes --error-exitcode=1 --leak-check=full \
      --errors-for-leak-kinds=definite,indirect --show-leak-kinds=definite,indirect \
      --log-file="$dir/%p.log" "$bin" --jobs 1 >"$dir.out" 2>&1 || status=$?
    cat "$dir.out"
    echo "valgrind: $name took ${SECONDS}s"
    check_reports "$dir" "valgrind" || status=1
    return "$status"
  }
  ran=0
  status=0
  for bin in "${bins[@]}"; do
    name=$(basename "$bin")
    [ "$valgrind" = all ] || [[ ",$valgrind," == *",$name,"* ]] || continue
    ran=$((ran + 1))
    echo "valgrind: $name"
    { run_valgrind "$bin" || touch "$logs/$name.failed"; } &
    if [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; then wait -n || true; fi
  done
  wait
  for f in "$logs"/*.failed; do
    [ -e "$f" ] || continue
    echo "valgrind: $(basename "$f" .failed) failed" >&2
    status=1
  done
  [ "$status" -eq 0 ] || exit "$status"
  [ "$ran" -gt 0 ] || { echo "test.sh: no test binary matched --valgrind=$valgrind" >&2; exit 1; }
fi

step "install check"
tests/install/check_install.sh build-test

step "all passed"
