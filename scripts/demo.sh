#!/usr/bin/env bash
# Installs missing dependencies, builds tg (Release) into build/ and runs the LLTM demo,
# build/tg-lltm, with this script's arguments. Works from any directory.
set -euo pipefail
here=$PWD
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DTG_BUILD_TESTS=OFF >/dev/null
cmake --build build -j"$(nproc 2>/dev/null || echo 2)"

demo=$root/build/tg-lltm
if [ ! -x "$demo" ]; then
  echo "demo.sh: $demo was not built (examples/tg-lltm.c does not exist yet)." >&2
  echo "demo.sh: programs in build/: $(find build -maxdepth 1 -type f -perm -u+x -printf '%f ' 2>/dev/null)" >&2
  exit 1
fi
cd "$here"
exec "$demo" "$@"
