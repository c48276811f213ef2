#!/usr/bin/env bash
# Installs what tg needs to build and test on Debian/Ubuntu, and only what is missing:
# compiler, CMake, pkg-config, BLIS, Criterion, valgrind (gcc's libgomp provides OpenMP), and
# for scripts/fuzz-smoke.sh clang 14 with its libFuzzer/sanitizer runtimes and libomp.
# Silent when everything is present. Runs apt-get as root, or through sudo.
set -euo pipefail
packages=(build-essential cmake pkg-config libblis-dev libcriterion-dev valgrind
  clang libclang-rt-14-dev libomp-14-dev)

if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "deps: not a Debian system; install by hand: ${packages[*]}" >&2
  exit 0
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
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
"${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
