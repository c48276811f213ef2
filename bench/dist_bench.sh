#!/usr/bin/env bash
# Data-parallel training speed: build/train_charlm on one process, and under mpirun --dist at
# np 1 and np 2, one thread per rank, on the same global batch. Prints, as a markdown table,
# the medians over ROUNDS runs of steps/s and of the DDP's numbers that train_charlm --dist
# prints at the end ("ddp: ... allreduce X ms/step, exposed Y ms/step, hidden Z% ..."):
# allreduce is the time buckets spent being all-reduced, exposed the part of it the training
# step waited for after backward; hidden = 1 - exposed / allreduce.
#
#   bench/dist_bench.sh [BUILD_DIR] [-- more train_charlm options]
#   STEPS=300 ROUNDS=3 BUCKETS="1024 64 16" MPIRUN_FLAGS="--bind-to none" bench/dist_bench.sh build
#
# BUCKETS: the --bucket-kb values tried at np 2 (1024 is tg_dist's default; the default model
# has 296 KiB of parameters, so 1024 makes one bucket, reduced only after backward), plus one
# --no-overlap run. One more row: one process on 2 threads, what one process makes of two
# cores. Open MPI binds each rank to a core (at most 2 ranks), so the DDP's communication
# thread shares its rank's core; MPIRUN_FLAGS="--bind-to none" lets it float. Needs tg_dist
# built with MPI (Open MPI's mpirun). Time it on an otherwise idle machine: the load average
# is printed before and after.
set -euo pipefail

build=build
if [[ $# -gt 0 && $1 != -- ]]; then
  build=$1
  shift
fi
[[ ${1-} == -- ]] && shift
extra=("$@")
steps=${STEPS:-300}
rounds=${ROUNDS:-3}
buckets=${BUCKETS:-"1024 64 16"}
read -r -a mpirun_flags <<< "${MPIRUN_FLAGS:-}"
mpirun=(mpirun --oversubscribe "${mpirun_flags[@]}")
prog=$build/train_charlm
[[ -x $prog ]] || { echo "dist_bench: no $prog (build the examples first)" >&2; exit 2; }
command -v mpirun > /dev/null || { echo "dist_bench: mpirun not on PATH (openmpi-bin)" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 # Open MPI's switches, for root

common=(--steps "$steps" --threads 1 --quiet "${extra[@]}")
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# The median of the numbers on stdin.
median() { sort -g | awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# run LABEL COMMAND...: ROUNDS runs, one table row of medians.
run() {
  local label=$1
  shift
  local sps=() ar=() ex=() hid=() nb=
  for ((i = 0; i < rounds; i++)); do
    if ! "$@" > "$log" 2>&1; then
      echo "dist_bench: $label failed:" >&2
      cat "$log" >&2
      exit 1
    fi
    # "fused: T tokens/s (S steps of K tokens in ...)": steps/s = T / K
    sps+=("$(awk '/ tokens\/s \(/ { print $2 / $7; exit }' "$log")")
    if grep -q '^ddp: ' "$log"; then
      ar+=("$(sed -n 's/^ddp: .*allreduce \([0-9.]*\) ms\/step.*/\1/p' "$log")")
      ex+=("$(sed -n 's/^ddp: .*exposed \([0-9.]*\) ms\/step.*/\1/p' "$log")")
      hid+=("$(sed -n 's/^ddp: .*hidden \([-0-9.]*\)%.*/\1/p' "$log")")
      nb=$(sed -n 's/^ddp: \([0-9]*\) buckets.*/\1/p' "$log")
    fi
  done
  local m_sps each
  m_sps=$(printf '%s\n' "${sps[@]}" | median)
  each=$(printf '%.0f ' "${sps[@]}")
  if [[ -n $nb ]]; then
    printf '| %s | %.1f | %s| %s | %.3f | %.3f | %.0f%% |\n' "$label" "$m_sps" "$each" "$nb" \
      "$(printf '%s\n' "${ar[@]}" | median)" "$(printf '%s\n' "${ex[@]}" | median)" \
      "$(printf '%s\n' "${hid[@]}" | median)"
  else
    printf '| %s | %.1f | %s| | | | |\n' "$label" "$m_sps" "$each"
  fi
}

echo "train_charlm, $steps steps, one thread per process, medians of $rounds runs ($(nproc) cores)"
echo "options: ${common[*]}; ${mpirun[*]}; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| run | steps/s | each run | buckets | allreduce ms/step | exposed ms/step | hidden |"
echo "|---|---|---|---|---|---|---|"
run "one process, no --dist" "$prog" "${common[@]}"
run "one process, no --dist, --threads 2" "$prog" "${common[@]}" --threads 2
run "np 1 --dist" "${mpirun[@]}" -np 1 "$prog" --dist "${common[@]}"
for kb in $buckets; do
  run "np 2 --dist --bucket-kb $kb" "${mpirun[@]}" -np 2 "$prog" --dist --bucket-kb "$kb" \
    "${common[@]}"
done
run "np 2 --dist --no-overlap" "${mpirun[@]}" -np 2 "$prog" --dist --no-overlap "${common[@]}"
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
