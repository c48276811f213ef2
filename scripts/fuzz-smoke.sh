#!/usr/bin/env bash
# Builds the libFuzzer targets in fuzz/ with clang into build-fuzz/ (TG_FUZZ=ON: tg itself is
# compiled with ASan, UBSan and fuzzer coverage) and runs them all at once, each for a bounded
# time, starting from its checked-in corpus fuzz/corpus/<name>/. Fails on any crash, sanitizer
# report, leak or disagreement with the fuzzer's reference; the failing input is kept in
# build-fuzz/artifacts/.
#
# Usage: scripts/fuzz-smoke.sh [SECONDS]   (default 60 per target; also bounded by -runs)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
seconds=${1:-60}
runs=${FUZZ_RUNS:-5000000}
build="$root/build-fuzz"

"$root/scripts/deps.sh"
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -DTG_FUZZ=ON -DTG_CUDA=OFF \
  -DTG_BUILD_TESTS=OFF -DTG_BUILD_EXAMPLES=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
names=()
for src in "$root"/fuzz/fuzz_*.c; do
  name=${src##*/fuzz_}
  names+=("${name%.c}")
done
cmake --build "$build" -j"$(nproc)" --target "${names[@]/#/fuzz_}" >/dev/null

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$build/artifacts"
# The targets run side by side (each is one thread): the time bound is per target, so the
# whole run takes about SECONDS however many targets there are.
pids=()
for name in "${names[@]}"; do
  # New inputs go to a scratch corpus; the checked-in seeds are only read.
  mkdir -p "$scratch/$name"
  echo "fuzz-smoke: fuzz_$name for ${seconds}s (at most $runs runs)"
  OMP_NUM_THREADS=1 \
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$build/fuzz/fuzz_$name" -max_total_time="$seconds" -runs="$runs" -timeout=20 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$build/artifacts/$name-" \
    "$scratch/$name" "$root/fuzz/corpus/$name" >"$scratch/$name.log" 2>&1 &
  pids+=($!)
done
failed=0
for k in "${!names[@]}"; do
  name=${names[$k]}
  status=0
  wait "${pids[$k]}" || status=$?
  echo "---- fuzz_$name"
  tail -n 40 "$scratch/$name.log"
  if [ "$status" -ne 0 ]; then
    echo "fuzz-smoke: fuzz_$name failed (exit $status); the input is in $build/artifacts/" >&2
    failed=1
  fi
done
[ "$failed" -eq 0 ] || exit 1
echo "fuzz-smoke: ok"
