#!/usr/bin/env bash
# Keeps docs/design.md's "Layers" true: every `#include "..."` of a file under src/ must
# point along the stated direction
#
#   tensor  <-  autograd  <-  ops  <-  nn          (a layer includes only layers to its left)
#               ops/cpu, ops/cuda: backends, reached by ops only through the vtable
#                                  (ops/backend.h); they include tensor/ and ops/ headers
#
# Usage: scripts/check-layers.sh [SRC_DIR]   (default: the src/ next to this script).
# Prints each include against the direction and exits 1 if there is any. ctest runs it
# (test check_layers).
set -u
src=${1:-$(cd "$(dirname "$0")/.." && pwd)/src}
cd "$src" || exit 2

# The folder (layer) of a path relative to src/.
layer_of() {
  case $1 in
  tensor/*) echo tensor ;;
  autograd/*) echo autograd ;;
  ops/cpu/*) echo ops/cpu ;;
  ops/cuda/*) echo ops/cuda ;; # emu/ included: the emulated runtime is part of the backend
  ops/*) echo ops ;;
  nn/*) echo nn ;;
  *) echo other ;;
  esac
}

# What each layer may include (besides tg/ public headers and system headers).
allowed() {
  case $1 in
  tensor) echo "tensor" ;;
  autograd) echo "tensor autograd" ;;
  ops) echo "tensor autograd ops" ;;
  ops/cpu) echo "tensor ops ops/cpu" ;;
  ops/cuda) echo "tensor ops ops/cuda" ;;
  nn) echo "tensor autograd ops nn" ;;
  esac
}

# Known exceptions, "file -> header" (both relative to src/), each with its reason. The
# LLTM rewrite (issue 9, item 1) removes these two: the fused LLTM's device passes become
# backend entries, and src/ops/lltm.c stops calling CUDA directly.
exceptions=(
  "ops/lltm.c -> ops/cuda/lltm_cuda.h"
  "ops/lltm_cpu.c -> ops/cpu/cpu_internal.h"
)

bad=0
while IFS= read -r file; do
  from=$(layer_of "$file")
  [ "$from" = other ] && continue
  dir=$(dirname "$file")
  while IFS= read -r inc; do
    case $inc in tg/*) continue ;; esac
    # Resolve like the compiler: next to the file first, then from src/.
    if [ -e "$dir/$inc" ]; then
      target=$(realpath -m --relative-to=. "$dir/$inc")
    else
      target=$(realpath -m --relative-to=. "$inc")
    fi
    to=$(layer_of "$target")
    ok=0
    for l in $(allowed "$from"); do [ "$l" = "$to" ] && ok=1; done
    for e in "${exceptions[@]}"; do [ "$e" = "$file -> $target" ] && ok=1; done
    if [ $ok = 0 ]; then
      echo "src/$file ($from) includes $target ($to): against the layer direction"
      bad=1
    fi
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$file")
done < <(find $(for d in tensor autograd ops nn; do [ -d $d ] && echo $d; done) -type f \
           \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name '*.cpp' \
              -o -name '*.def' \) | sort)

if [ $bad = 0 ]; then echo "layers: every include follows tensor <- autograd <- ops <- nn"; fi
exit $bad
