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
read -r -a buckets <<< "${BUCKETS:-1024 64 16}"
read -r -a mpirun_flags <<< "${MPIRUN_FLAGS:-}"
mpirun=(mpirun --oversubscribe "${mpirun_flags[@]}")
prog=$build/train_charlm
[[ -x $prog ]] || { echo "dist_bench: no $prog (build the examples first)" >&2; exit 2; }
command -v mpirun > /dev/null || { echo "dist_bench: mpirun not on PATH (openmpi-bin)" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 # Open MPI's switches, for root
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

common=(--steps "$steps" --threads 1 --quiet "${extra[@]}")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# The configurations, one per row: a label and the command (arguments separated by |).
labels=() commands=()
config() {
  labels+=("$1")
  commands+=("$2")
}
IFS='|'
config "one process, no --dist" "$prog|${common[*]}"
config "one process, no --dist, --threads 2" "$prog|${common[*]}|--threads|2"
config "np 1 --dist" "${mpirun[*]}|-np|1|$prog|--dist|${common[*]}"
for kb in "${buckets[@]}"; do
  config "np 2 --dist --bucket-kb $kb" "${mpirun[*]}|-np|2|$prog|--dist|--bucket-kb|$kb|${common[*]}"
done
config "np 2 --dist --no-overlap" "${mpirun[*]}|-np|2|$prog|--dist|--no-overlap|${common[*]}"
unset IFS

# Round after round, every configuration once per round: a busy spell on the machine then
# slows every row a little instead of one row a lot. Each run appends its numbers to
# $dir/<row>: steps/s, and for --dist allreduce ms, exposed ms, hidden %, buckets.
for ((r = 0; r < rounds; r++)); do
  for i in "${!labels[@]}"; do
    IFS='|' read -r -a cmd <<< "${commands[$i]}"
    if ! "${cmd[@]}" > "$dir/log" 2>&1; then
      echo "dist_bench: ${labels[$i]} failed:" >&2
      cat "$dir/log" >&2
      exit 1
    fi
    # "fused: T tokens/s (S steps of K tokens in ...)": steps/s = T / K; the ddp: line
    awk '/ tokens\/s \(/ && !sps { sps = $2 / $7 }
         /^ddp: / { nb = $2
                    for (k = 1; k <= NF; k++) {
                      if ($k == "allreduce") ar = $(k + 1)
                      if ($k == "exposed") ex = $(k + 1)
                      if ($k == "hidden") { hid = $(k + 1); sub(/%,?/, "", hid) } } }
         END { print sps, ar, ex, hid, nb }' "$dir/log" >> "$dir/$i"
  done
done

# The median of column c of file f.
median() {
  cut -d' ' -f"$2" "$1" | sort -g |
    awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

echo "train_charlm, $steps steps, one thread per process, medians of $rounds runs ($(nproc) cores)"
echo "options: ${common[*]}; ${mpirun[*]}; load average before: $load_before, after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| run | steps/s | each run | buckets | allreduce ms/step | exposed ms/step | hidden |"
echo "|---|---|---|---|---|---|---|"
for i in "${!labels[@]}"; do
  f=$dir/$i
  each=$(cut -d' ' -f1 "$f" | xargs printf '%.0f ')
  nb=$(head -n1 "$f" | cut -d' ' -f5)
  if [[ -n $nb ]]; then
    printf '| %s | %.1f | %s| %s | %.3f | %.3f | %.0f%% |\n' "${labels[$i]}" "$(median "$f" 1)" \
      "$each" "$nb" "$(median "$f" 2)" "$(median "$f" 3)" "$(median "$f" 4)"
  else
    printf '| %s | %.1f | %s| | | | |\n' "${labels[$i]}" "$(median "$f" 1)" "$each"
  fi
done
