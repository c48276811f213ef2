#!/usr/bin/env bash
# tg_dist's fault behaviour: a job whose rank 1 stops, dies or aborts must end, non-zero,
# within a bound, with the reason on the survivor's side. Not a timing measurement: the
# bound only says "it ended instead of hanging".
#   faults.sh MODE MPIEXEC DIST_FAULT   (MODE: stop, kill, abort, finalize; see dist_fault.c)
# TG_DIST_TIMEOUT is 3 s here. The bound, 30 s, is that timeout plus the launcher's start
# and teardown with a wide margin (the job needs about 4 s on a 2-core machine); a hang would
# go to 60 s, where `timeout` kills it (and fail the bound).
set -u
mode=${1:?mode} mpiexec=${2:?mpiexec} prog=${3:?program}
bound=30
export TG_DIST_TIMEOUT=3 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=$(mktemp)
trap 'rm -f "$out"' EXIT
start=$(date +%s%N) # nanoseconds: bash arithmetic, no bc
timeout -s KILL 60 "$mpiexec" -np 2 --oversubscribe "$prog" "$mode" >"$out" 2>&1
rc=$?
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
elapsed=$(printf "%d.%03d" $((elapsed_ms / 1000)) $((elapsed_ms % 1000)))
cat "$out"
echo "faults.sh: $mode: exit status $rc after ${elapsed} s (bound ${bound} s)"
fail() { echo "faults.sh: $mode: FAILED: $*"; exit 1; }
# No rank may outlive the job (a stopped one least of all): kill any survivor, then fail.
sleep 1
for pid in $(sed -n 's/^rank [0-9]*: pid \([0-9]*\)$/\1/p' "$out"); do
  if kill -0 "$pid" 2>/dev/null && grep -q dist_fault "/proc/$pid/cmdline" 2>/dev/null; then
    kill -KILL "$pid"
    fail "rank process $pid outlived the job"
  fi
done
[ "$(grep -c '^rank [0-9]*: pid ' "$out")" -eq 2 ] || fail "not both ranks started"
[ "$rc" -ne 0 ] || fail "the job exited 0"
[ "$elapsed_ms" -lt $((bound * 1000)) ] || fail "took ${elapsed} s, more than ${bound} s"
need() { grep -qF -- "$1" "$out" || fail "the output lacks \"$1\""; }
case $mode in
stop)
  need "rank 0: step 2: TG_ERR_DIST: tg_dist_all_reduce: rank 0 of 2 waited"
  need "a rank died, hangs, or called a different collective"
  need "rank 0: then tg_dist_barrier: TG_ERR_DIST: tg_dist_barrier: an earlier collective failed"
  need "tg_dist: rank 0: a collective failed: ending the whole job (MPI_Abort)"
  ;;
kill)
  need "rank 1: step 2 done"
  if grep -q "rank 1: step 3 done" "$out"; then fail "rank 1 went on after SIGKILL"; fi
  ;;
abort)
  need "tg_dist: rank 1: step 2 failed: the loss is not finite"
  [ "$rc" -eq 3 ] || fail "exit status $rc, not tg_dist_abort's 3"
  ;;
finalize)
  # The mismatch (rank 1's barrier against rank 0's all-reduce) comes back from MPI as an
  # error code on whichever rank sees it first: a tg_dist line, then tg_dist ends the job;
  # not Open MPI's MPI_ERRORS_ARE_FATAL abort with no word from tg_dist.
  grep -qE "^tg_dist: rank [01]: .* failed on rank [01] of 2: " "$out" ||
    fail "no tg_dist line with the failed MPI call"
  need "a collective failed: ending the whole job (MPI_Abort)"
  if grep -q "MPI_ERRORS_ARE_FATAL" "$out"; then fail "MPI's own abort, not tg_dist's error"; fi
  if grep -q "rank 1: tg_dist_finalize at step 2" "$out"; then
    fail "tg_dist_finalize returned while rank 0 was in a collective"
  fi
  ;;
*) fail "unknown mode" ;;
esac
if grep -q "tg_dist_finalize returned after a failure" "$out"; then
  fail "tg_dist_finalize returned after a failed collective instead of ending the job"
fi
echo "faults.sh: $mode: passed"
