#!/usr/bin/env bash
# Installs what tg needs to build and test on Debian/Ubuntu, and only what is missing:
# compiler, CMake, pkg-config, BLIS, Criterion, valgrind (gcc's libgomp provides OpenMP),
# python3 and clang-format for the doc and format tests (ctest api_doc_current, doc_paths,
# format), and for scripts/fuzz-smoke.sh clang 14 with its libFuzzer/sanitizer runtimes and
# libomp; libcjson (safetensors headers) and libdlpack (the DLPack header); NumPy for the .npy
# and safetensors interop tests; Open MPI (libopenmpi-dev, openmpi-bin: tg_dist's data-parallel
# training and its multi-process tests; tg builds without it, TG_MPI=AUTO); libxsmm (small
# GEMMs faster than BLIS; optional: tg builds without it); libdnnl-dev (oneDNN 2.6: the CPU's
# convolutions, 1.2-1.6x tg's im2col + GEMM; optional, loaded at run time); dataset-fashion-mnist (the images
# examples/train_cnn.c trains on; its ctests skip without it; optional, so that a release
# that does not ship it still gets the rest. The .gz files are read through gzip, which every
# Debian system has, so no zlib headers are needed).
# Silent when everything is present. Runs apt-get as root, or through sudo.
set -euo pipefail
packages=(build-essential cmake pkg-config libblis-dev libcriterion-dev valgrind python3
  clang-format clang libomp-14-dev libcjson-dev libdlpack-dev python3-numpy libopenmpi-dev
  openmpi-bin)
# libFuzzer and the sanitizer runtimes have had their own package since LLVM 14.0.6 (Debian 12,
# Ubuntu 24.04); Ubuntu 22.04 ships them in libclang-common-14-dev, which clang pulls in. So
# this one is installed only where apt knows it.
optional=(libclang-rt-14-dev libxsmm-dev libdnnl-dev dataset-fashion-mnist)

if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "deps: not a Debian system; install by hand: ${packages[*]}" >&2
  exit 0
fi
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
known() { [ -n "$(apt-cache policy "$1" 2>/dev/null | sed -n 's/^ *Candidate: //p' | grep -v '(none)')" ]; }
missing=()
for p in "${packages[@]}"; do installed "$p" || missing+=("$p"); done
for p in "${optional[@]}"; do installed "$p" || ! known "$p" || missing+=("$p"); done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo)
else
  echo "deps: missing ${missing[*]}, and neither root nor sudo is available" >&2
  exit 1
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq
for p in "${optional[@]}"; do # the lists are fresh now
  installed "$p" || ! known "$p" || [[ " ${missing[*]} " == *" $p "* ]] || missing+=("$p")
done
"${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
