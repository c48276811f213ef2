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
#                                            64 MiB, pack's folder about 15, 56 with MKL)
#   scripts/device-check.sh host [--cpus 0,1] [--parts gemm,lltm,gpt,gpt2] [--quick]
#                                [--python PY] [--out DIR]
#                                            there: the CPU benchmarks on the device
#                                            machine's own processor (an Intel Xeon so far),
#                                            pinned to two of its cores as CI's machines
#                                            have: GEMM engines, the LLTM grid, the GPT step
#                                            against PyTorch; DIR/host.md. Runs beside `run`
#                                            (give run the other cores with taskset)
#   pack's MKL=DIR (PyPI's mkl: a venv's lib/) adds MKL's runtime to the host benchmarks
#
# run needs the machine's CUDA driver, and its Python only for the PyTorch columns (found:
# --python, else the first python3 on PATH that imports torch with CUDA). --module names the
# CUDA module to load (default .devrun/lib/libtg_cuda.so); with build-test/libtg_cuda_emu.so
# and --quick (tiny sizes) the whole script runs here on the emulation: try it (and host
# --quick) before a device call, whose minutes are few (no ctest runs it: pack alone takes a
# minute). Unpacking leaves lib/, testlib/, mkl/ and bench/gemm_engines in .devrun: pack again
# before the call, or the carry is over its limit. Exit status: 0 when every suite and check
# passed (benchmarks only report), 1 otherwise, 2 on bad usage.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEV=$ROOT/.devrun

usage() {
  sed -n '9,23p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

# copy_deps FILE DIR: the libraries FILE loads, glibc's apart, into DIR.
copy_deps() {
  mkdir -p "$2"
  ldd "$1" | awk '$3 ~ /^\// {print $1, $3}' | while read -r name path; do
    case $name in
    libc.so.* | libm.so.* | libresolv.so.* | libpthread.so.* | libdl.so.* | librt.so.*) ;;
    *) cp -L "$path" "$2/$name" ;;
    esac
  done
}

pack() {
  local build=${1:-$ROOT/build-test}
  [ -f "$build/libtg_cuda.so" ] || { echo "device-check: $build/libtg_cuda.so not built (nvcc)" >&2; exit 1; }
  rm -rf "$DEV"
  mkdir -p "$DEV/lib" "$DEV/tests" "$DEV/bin" "$DEV/bench"
  cp -L "$build/libtg.so.0" "$build/libtg_cuda.so" "$DEV/lib/"
  # libtg's own dependencies, which the device machine's image may lack (it is not Debian).
  copy_deps "$build/libtg.so.0" "$DEV/lib"
  cp "$build"/tests/cuda/*_gpu "$DEV/tests/"
  # The suites' own: Criterion and what it loads (testlib: the suites alone run with it, so
  # that no library of this Debian shadows the device machine's own elsewhere).
  copy_deps "$build/tests/cuda/test_cuda_ops_gpu" "$DEV/testlib"
  # A part of Fashion-MNIST for train_cnn (cnn_compare --data): 4000 training images, 100 test.
  local fm=/usr/share/datasets/fashion-mnist
  if [ -d "$fm" ]; then
    mkdir -p "$DEV/data"
    python3 - "$fm" "$DEV/data" <<'PY' || exit 1
import gzip, struct, sys
src, dst = sys.argv[1:]
for prefix, n in (("train", 4000), ("t10k", 100)):
    for kind, item in (("images-idx3", 28 * 28), ("labels-idx1", 1)):
        name = "%s-%s-ubyte.gz" % (prefix, kind)
        with gzip.open("%s/%s" % (src, name)) as f:
            data = f.read()
        dims = data[3]
        head = bytearray(data[:4 + 4 * dims])
        struct.pack_into(">I", head, 4, n)
        with gzip.open("%s/%s" % (dst, name), "wb", compresslevel=9) as f:
            f.write(bytes(head) + data[4 + 4 * dims:4 + 4 * dims + n * item])
PY
  fi
  local prog
  for prog in train_gpt train_cnn tg-lltm; do cp "$build/$prog" "$DEV/bin/"; done
  for prog in lltm_bench conv_bench attention_bench gemm_engines small_models; do
    cp "$build/bench/$prog" "$DEV/bench/"
  done
  cp "$ROOT"/bench/{compare,pytorch_lltm,conv_compare,pytorch_conv,gpt_compare,gpt_torch,cnn_compare}.py \
    "$DEV/bench/"
  strip --strip-unneeded "$DEV"/lib/* 2>/dev/null
  strip "$DEV"/tests/* "$DEV"/bin/* "$DEV"/bench/*_bench "$DEV"/bench/gemm_engines \
    "$DEV"/bench/small_models 2>/dev/null
  # gemm_engines links libtg statically: in one stream with libtg it packs as a reference.
  strip --strip-unneeded "$DEV"/testlib/* 2>/dev/null
  (cd "$DEV" && tar -cf - lib testlib bench/gemm_engines |
    xz -T1 --lzma2=preset=6,dict=64MiB >lib.tar.xz && rm -rf lib testlib bench/gemm_engines)
  # MKL's runtime for the host benchmarks: GNU OpenMP threading (as tg loads it) and the
  # AVX-512 kernels (the Xeons lent so far), about 37 MB packed.
  if [ -n "${MKL:-}" ]; then
    (cd "$MKL" && tar -cf - libmkl_rt.so.[23] libmkl_core.so.[23] libmkl_gnu_thread.so.[23] \
      libmkl_intel_lp64.so.[23] libmkl_avx512.so.[23] | xz -T2 -6 >"$DEV/mkl.tar.xz") || exit 1
  fi
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

# The libraries pack compressed (lib.tar.xz, mkl.tar.xz), unpacked once in place: run and host
# may start together.
unpack_libs() {
  local lock=$DEV/.unpack.lock
  (
    flock 9
    if [ -f "$DEV/lib.tar.xz" ] && [ ! -f "$DEV/lib/libtg.so.0" ]; then
      (cd "$DEV" && xz -dc lib.tar.xz | tar -xf -)
    fi
    if [ -f "$DEV/mkl.tar.xz" ] && [ ! -d "$DEV/mkl" ]; then
      mkdir -p "$DEV/mkl.part" && (cd "$DEV/mkl.part" && xz -dc ../mkl.tar.xz | tar -xf -) &&
        mv "$DEV/mkl.part" "$DEV/mkl"
    fi
  ) 9>"$lock"
}

# find_torch_python [cpu]: a Python whose torch has CUDA (with cpu: any torch).
find_torch_python() {
  local py need='torch.cuda.is_available()'
  [ "${1:-}" = cpu ] && need=True
  for py in ${PYTHON:-} python3 /tmp/torchvenv/bin/python; do
    command -v "$py" >/dev/null 2>&1 || continue
    "$py" -c "import sys, torch; sys.exit(0 if $need else 1)" 2>/dev/null &&
      { command -v "$py"; return; } # a path: the benches' own searches test it as a file
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
  unpack_libs
  mkdir -p "$out"
  REPORT=$out/report.md
  export TG_CUDA_MODULE=$MODULE LD_LIBRARY_PATH=$DEV/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  local fails=0 work
  work=$(mktemp -d) || exit 1
  trap "rm -rf '$work'" EXIT
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
    step "suite $(basename "$t")" 120 env LD_LIBRARY_PATH="$DEV/testlib:$LD_LIBRARY_PATH" "$t" -j2 ||
      fails=$((fails + 1))
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
    # The newest first: a run cut short keeps what was never measured on a GPU before.
    local peer=()
    [ -n "$py" ] && peer=(--python "$py")
    if [ -n "$py" ]; then
      step "gpt_compare cuda" 200 python3 "$DEV/bench/gpt_compare.py" --build "$DEV/bin" \
        --python "$py" --device cuda --rounds 2 --steps 6
      local data=()
      [ -d "$DEV/data" ] && data=(--data "$DEV/data" --train-size 4000)
      # Where the GPU step goes, op by op (each op waits for the device: tg_profile_start).
      step "train_gpt cuda --profile" 90 "$DEV/bin/train_gpt" --device cuda --layers 4 --heads 4 \
        --channels 256 --seq 256 --batch 8 --vocab 256 --random-tokens 20000 --steps 4 \
        --val-windows 1 --quiet --profile 30
      step "cnn_compare cuda" 150 python3 "$DEV/bench/cnn_compare.py" --build "$DEV/bin" \
        --python "$py" --device cuda --threads 1 --rounds 2 --steps 100 "${data[@]}"
    else
      step "train_gpt cuda (small)" 150 "$DEV/bin/train_gpt" --device cuda --layers 4 --heads 4 \
        --channels 256 --seq 256 --batch 8 --vocab 256 --random-tokens 20000 --steps 6 --quiet
    fi
    step "conv_compare cuda" 150 python3 "$DEV/bench/conv_compare.py" --build "$DEV" --device cuda \
      --threads 1 --iters 10 --rounds 2 --shapes 8x64x56,8x128x28,8x256x14,64x32x32x32,64x32x64x16 \
      "${peer[@]}"
    step "lltm_bench cuda" 90 "$DEV/bench/lltm_bench" --device cuda --iters 100 --threads 1
    # The kernels newest on a GPU under compute-sanitizer's memcheck, where it is found.
    if command -v compute-sanitizer >/dev/null 2>&1; then
      for t in attention conv; do
        [ -x "$work/tests/test_cuda_${t}_gpu" ] || continue
        step "memcheck test_cuda_${t}_gpu" 90 env LD_LIBRARY_PATH="$DEV/testlib:$LD_LIBRARY_PATH" \
          compute-sanitizer --tool memcheck --error-exitcode 9 "$work/tests/test_cuda_${t}_gpu" -j2 ||
          fails=$((fails + 1))
      done
    fi
  fi
  echo "device-check: $fails failed; report: $REPORT"
  [ "$fails" = 0 ]
}

# host: the CPU benchmarks on the device machine's processor, on two pinned cores.
host() {
  local cpus=0,1 quick=0 out=${OUT:-$DEV/out} parts=gemm,lltm,gpt,gpt2
  PYTHON=
  while [ $# -gt 0 ]; do
    case $1 in
    --cpus) cpus=$2; shift ;;
    --parts) parts=$2; shift ;;
    --quick) quick=1 ;;
    --python) PYTHON=$2; shift ;;
    --out) out=$2; shift ;;
    *) usage ;;
    esac
    shift
  done
  [ -f "$DEV/lib.tar.xz" ] || [ -d "$DEV/lib" ] || { echo "device-check: run 'pack' first" >&2; exit 1; }
  unpack_libs
  mkdir -p "$out"
  REPORT=$out/host.md
  export LD_LIBRARY_PATH=$DEV/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  # MKL where packed (tg finds it by TG_MKL_LIBRARY; its runtime loads the rest from there).
  if [ -d "$DEV/mkl" ]; then
    export TG_MKL_LIBRARY=$(ls "$DEV"/mkl/libmkl_rt.so.* | head -1)
    export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$DEV/mkl
  fi
  # A cache of this run's own: the calibration is measured on these cores, here.
  export XDG_CACHE_HOME=$out/cache
  local pin=(taskset -c "$cpus")
  # MKL exits the process when a CPU-specific library of its own is missing (only the AVX-512
  # one is packed): then the benchmarks run without it.
  if [ -n "${TG_MKL_LIBRARY:-}" ] && ! TG_GEMM_ENGINE=mkl "$DEV/bench/lltm_bench" --iters 1 \
    --threads 1 --sizes 4x8x8 --modes all >"$out/mkl-probe.txt" 2>&1; then
    echo "device-check host: MKL did not load here ($(tail -1 "$out/mkl-probe.txt")): without it"
    export TG_MKL_LIBRARY=off
  fi
  {
    echo "# device-check host on $(hostname), $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "- CPU: $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1), $(nproc) CPUs; pinned to $cpus"
    echo "- $(grep -m1 '^cpu family' /proc/cpuinfo | tr -s '\t ' ' '), $(grep -m1 '^model[[:space:]]*:' /proc/cpuinfo | tr -s '\t ' ' ')"
    echo "- flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx512f|avx512_bf16|amx_tile|avx2|avx10)' | tr '\n' ' ')"
    echo "- MKL: ${TG_MKL_LIBRARY:-none}"
    echo
    echo '```'
    lscpu -e 2>/dev/null | head -20
    echo '```'
    echo
  } >"$REPORT"
  local py
  py=$(find_torch_python cpu)
  echo "- PyTorch: ${py:-none} ($("${py:-false}" -c 'import torch; print(torch.__version__)' 2>/dev/null))" >>"$REPORT"
  local peer=()
  [ -n "$py" ] && peer=(--python "$py")
  if [ "$quick" = 1 ]; then
    step "gemm_engines" 120 "${pin[@]}" "$DEV/bench/gemm_engines" --sizes 4x8x8 --iters 1 --rounds 1
    step "LLTM grid" 200 "${pin[@]}" python3 "$DEV/bench/compare.py" --build "$DEV" --iters 2 \
      --rounds 1 --threads 1,2 --sizes 4x8x8 --modes all --markdown "${peer[@]}"
    return 0
  fi
  want() { [[ ",$parts," == *",$1,"* ]]; }
  want gemm && step "GEMM engines (1 thread; calibration first)" 150 "${pin[@]}" \
    "$DEV/bench/gemm_engines" --sizes 128x256x512,256x1024x1024 --iters 5 --rounds 2 --threads 1
  # Every result line also into DIR as it comes: torch.compile took minutes on two of the Xeon's
  # cores, and the first try here was stopped with its rounds done but no table.
  want lltm && step "LLTM grid" 300 "${pin[@]}" python3 "$DEV/bench/compare.py" --build "$DEV" --iters 5 \
    --rounds 2 --threads 1,2 --sizes 128x256x512,256x1024x1024 --modes all --markdown \
    --jsonl "$out/lltm.jsonl" "${peer[@]}"
  if [ -n "$py" ]; then
    want gpt && step "GPT small step (CPU)" 200 "${pin[@]}" python3 "$DEV/bench/gpt_compare.py" \
      --build "$DEV/bin" --python "$py" --configs small --threads 1,2 --rounds 2 --steps 4
    want gpt2 && step "GPT-2 small step (CPU)" 200 "${pin[@]}" python3 "$DEV/bench/gpt_compare.py" \
      --build "$DEV/bin" --python "$py" --configs gpt2-small --threads 1,2 --rounds 1 --steps 4
  fi
  echo "device-check host: report: $REPORT"
}

case ${1:-} in
pack) shift; pack "$@" ;;
run) shift; run "$@" ;;
host) shift; host "$@" ;;
*) usage ;;
esac
