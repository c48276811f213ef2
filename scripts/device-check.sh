#!/bin/bash
# The GPU checks of a session that is lent a device machine (/work/.library/device), prepared
# so that they run as one call within its few minutes: the CUDA suites, the examples trained
# on CUDA against the CPU, and the CUDA benchmarks against PyTorch CUDA where the machine has
# torch with CUDA.
#
#   scripts/device-check.sh pack [BUILD]     here: BUILD's CUDA programs and libraries
#                                            (default build-test) into .devrun/, stripped,
#                                            the suites xz-packed (ignored by git: give
#                                            .devrun as the device tool's carry)
#   scripts/device-check.sh run [--quick] [--module PATH] [--python PY] [--out DIR]
#                                            there: runs what pack gathered, each step under
#                                            a time limit, and writes DIR/report.md (default
#                                            $OUT, else .devrun/out) with every step's output
#                                            (pack again before a device call: the carry is
#                                            64 MiB, pack's folder about 25)
#
# run needs the machine's CUDA driver, and its Python only for the PyTorch columns (found:
# --python, else the first python3 on PATH that imports torch with CUDA). --module names the
# CUDA module to load (default .devrun/lib/libtg_cuda.so); with build-test/libtg_cuda_emu.so
# and --quick (tiny sizes) the whole script runs here on the emulation, as ctest
# device_check_emu does. Exit status: 0 when every suite and check passed (benchmarks only
# report), 1 otherwise, 2 on bad usage.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEV=$ROOT/.devrun

usage() {
  sed -n '9,14p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

pack() {
  local build=${1:-$ROOT/build-test}
  [ -f "$build/libtg_cuda.so" ] || { echo "device-check: $build/libtg_cuda.so not built (nvcc)" >&2; exit 1; }
  rm -rf "$DEV"
  mkdir -p "$DEV/lib" "$DEV/tests" "$DEV/bin" "$DEV/bench"
  cp -L "$build/libtg.so.0" "$build/libtg_cuda.so" "$DEV/lib/"
  cp "$build"/tests/cuda/*_gpu "$DEV/tests/"
  local prog
  for prog in train_gpt train_cnn tg-lltm; do cp "$build/$prog" "$DEV/bin/"; done
  for prog in lltm_bench conv_bench attention_bench; do cp "$build/bench/$prog" "$DEV/bench/"; done
  cp "$ROOT"/bench/{compare,pytorch_lltm,conv_compare,pytorch_conv,gpt_compare,gpt_torch,cnn_compare}.py \
    "$DEV/bench/"
  strip --strip-unneeded "$DEV"/lib/* 2>/dev/null
  strip "$DEV"/tests/* "$DEV"/bin/* "$DEV"/bench/*_bench 2>/dev/null
  # One stream with a dictionary larger than the suites together: each links libtg statically,
  # and so packs as a reference to the one before (7 MB instead of 54 with xz -6 -T2).
  (cd "$DEV" && tar -cf - tests | xz -T1 --lzma2=preset=1,dict=256MiB >tests.tar.xz && rm -rf tests)
  # The programs find libtg.so.0 next to them (a build tree's rpath is gone after strip).
  du -sh "$DEV"
}

# step NAME LIMIT_S CMD...: runs CMD under a limit, its output into the report.
step() {
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS rc
  {
    echo "### $name"
    echo
    echo '```'
    timeout "$limit" "$@" 2>&1 | tail -n 60
    rc=${PIPESTATUS[0]}
    echo '```'
    echo "exit $rc, $((SECONDS - t0)) s"
    echo
  } >>"$REPORT"
  echo "device-check: $name: exit $rc ($((SECONDS - t0)) s)"
  return "$rc"
}

find_torch_python() {
  local py
  for py in ${PYTHON:-} python3 /tmp/torchvenv/bin/python; do
    command -v "$py" >/dev/null 2>&1 || continue
    "$py" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null &&
      { echo "$py"; return; }
  done
}

run() {
  local quick=0 out=${OUT:-$DEV/out}
  MODULE=$DEV/lib/libtg_cuda.so
  PYTHON=
  while [ $# -gt 0 ]; do
    case $1 in
    --quick) quick=1 ;;
    --module) MODULE=$2; shift ;;
    --python) PYTHON=$2; shift ;;
    --out) out=$2; shift ;;
    *) usage ;;
    esac
    shift
  done
  [ -f "$DEV/tests.tar.xz" ] || { echo "device-check: run 'pack' first" >&2; exit 1; }
  mkdir -p "$out"
  REPORT=$out/report.md
  export TG_CUDA_MODULE=$MODULE LD_LIBRARY_PATH=$DEV/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  local fails=0 work
  work=$(mktemp -d) || exit 1
  trap 'rm -rf "$work"' EXIT
  {
    echo "# device-check on $(hostname), $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    local gpu
    gpu=$(nvidia-smi -L 2>/dev/null | head -1)
    echo "- GPU: ${gpu:-none (nvidia-smi -L)}"
    echo "- CPU: $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1), $(nproc) CPUs"
    echo "- CUDA module: $MODULE"
    echo
  } >"$REPORT"
  (cd "$work" && xz -dc "$DEV/tests.tar.xz" | tar -xf -)

  # 1. The CUDA suites (Criterion), each under a minute.
  local t
  for t in "$work"/tests/*_gpu; do
    step "suite $(basename "$t")" 120 "$t" -j2 || fails=$((fails + 1))
  done

  # 2. The examples on CUDA against the CPU: F64 losses after a few steps.
  local gpt="--layers 1 --heads 2 --channels 32 --seq 16 --batch 4 --steps 5 --f64 --quiet --threads 1"
  local cpu dev
  cpu=$("$DEV/bin/train_gpt" $gpt | sed -n 's/^final val loss \([0-9.]*\).*/\1/p')
  dev=$("$DEV/bin/train_gpt" $gpt --device cuda | sed -n 's/^final val loss \([0-9.]*\).*/\1/p')
  if [ -n "$cpu" ] && [ "${cpu:0:13}" = "${dev:0:13}" ]; then
    echo "train_gpt F64 val loss: cpu $cpu, cuda $dev: agree" | tee -a "$REPORT"
  else
    echo "train_gpt F64 val loss: cpu '$cpu', cuda '$dev': DIFFER" | tee -a "$REPORT"
    fails=$((fails + 1))
  fi

  # 3. Benchmarks (they report; the goals are read from the tables).
  local py
  py=$(find_torch_python)
  echo "- PyTorch with CUDA: ${py:-none}" >>"$REPORT"
  if [ "$quick" = 1 ]; then
    step "lltm_bench cuda" 120 "$DEV/bench/lltm_bench" --device cuda --iters 2 --sizes 4x8x8 --threads 1
    step "conv_bench cuda" 120 "$DEV/bench/conv_bench" --device cuda --iters 1 --threads 1 --shapes 2x3x5
    step "train_gpt cuda" 120 "$DEV/bin/train_gpt" --device cuda --layers 1 --channels 32 --seq 16 \
      --batch 4 --steps 3 --quiet --random-tokens 5000
  else
    step "lltm_bench cuda" 240 "$DEV/bench/lltm_bench" --device cuda --iters 200 --threads 1
    local peer=()
    [ -n "$py" ] && peer=(--python "$py")
    step "conv_compare cuda" 300 python3 "$DEV/bench/conv_compare.py" --build "$DEV" --device cuda \
      --threads 1 --iters 10 --rounds 2 --shapes 8x64x56,8x128x28,8x256x14,64x32x32x32,64x32x64x16 \
      "${peer[@]}"
    if [ -n "$py" ]; then
      step "gpt_compare cuda" 400 python3 "$DEV/bench/gpt_compare.py" --build "$DEV/bin" \
        --python "$py" --device cuda --rounds 2 --steps 6
      step "cnn_compare cuda" 300 python3 "$DEV/bench/cnn_compare.py" --build "$DEV/bin" \
        --python "$py" --device cuda --threads 1 --rounds 2 --steps 100
    else
      step "train_gpt cuda (small)" 300 "$DEV/bin/train_gpt" --device cuda --layers 4 --heads 4 \
        --channels 256 --seq 256 --batch 8 --vocab 256 --random-tokens 20000 --steps 6 --quiet
    fi
  fi
  echo "device-check: $fails failed; report: $REPORT"
  [ "$fails" = 0 ]
}

case ${1:-} in
pack) shift; pack "$@" ;;
run) shift; run "$@" ;;
*) usage ;;
esac
