#!/usr/bin/env bash
# Keeps docs/design.md's "Layers" true: every `#include "..."` of a file under src/ must
# point along the stated direction
#
#   tensor  <-  autograd  <-  ops  <-  io  <-  nn     (a layer includes only layers to its left)
#                              ops  <-  ext
#               ops/cpu, ops/cuda: backends, reached by ops only through the vtable
#                                  (ops/backend.h); they include tensor/ and ops/ headers
#
# Usage: scripts/check-layers.sh [SRC_DIR]   (default: the src/ next to this script).
#        scripts/check-layers.sh --objects OBJ...
# The first form checks includes; the second the calls: no symbol an object file needs may
# be defined by an object of a layer it may not include (a call through the public API
# shows only here). Each prints what goes against the direction and exits 1 if anything
# does. ctest runs both (check_layers, check_layers_symbols).
set -u

# The folder (layer) of a path relative to src/.
layer_of() {
  case $1 in
  tensor/*) echo tensor ;;
  autograd/*) echo autograd ;;
  ops/cpu/*) echo ops/cpu ;;
  ops/cuda/*) echo ops/cuda ;; # emu/ included: the emulated runtime is part of the backend
  ops/*) echo ops ;;
  io/*) echo io ;;
  nn/*) echo nn ;;
  ext/*) echo ext ;;
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
  io) echo "tensor autograd ops io" ;;
  nn) echo "tensor autograd ops io nn" ;;
  ext) echo "tensor autograd ops ext" ;;
  esac
}

# Whether layer $1 may use layer $2, or "$3" is a listed exception (in list $4...).
may_use() {
  local from=$1 to=$2 what=$3 l e
  shift 3
  for l in $(allowed "$from"); do [ "$l" = "$to" ] && return 0; done
  for e in "$@"; do [ "$e" = "$what" ] && return 0; done
  return 1
}

# Known exceptions, "file -> header" and "file -> symbol" (relative to src/), each with
# its reason. None today: keep it that way.
exceptions=()
symbol_exceptions=()

# --objects: OBJ paths contain /src/<folder>/<file>.o (CMake's object layout).
check_objects() {
  local bad=0 obj rel from to sym defs
  defs=$(mktemp)
  for obj in "$@"; do
    rel=${obj##*/src/}
    nm --defined-only -g "$obj" | awk -v f="${rel%.o}" 'NF == 3 {print $3, f}'
  done | sort > "$defs"
  for obj in "$@"; do
    rel=${obj##*/src/}
    rel=${rel%.o}
    from=$(layer_of "$rel")
    while read -r sym; do
      to=$(awk -v s="$sym" '$1 == s {print $2; exit}' "$defs")
      [ -n "$to" ] || continue
      to=$(layer_of "$to")
      if ! may_use "$from" "$to" "$rel -> $sym" ${symbol_exceptions[@]+"${symbol_exceptions[@]}"}; then
        echo "src/$rel ($from) uses $sym from $to: against the layer direction"
        bad=1
      fi
    done < <(nm -u "$obj" | awk 'NF == 2 {print $2}')
  done
  rm -f "$defs"
  [ $bad = 0 ] && echo "layers: every call follows tensor <- autograd <- ops <- io <- nn, and ops <- ext"
  return $bad
}

if [ "${1:-}" = --objects ]; then
  shift
  objects=()
  for arg in "$@"; do # ctest may pass CMake's list (a;b;c) as one argument
    IFS=';' read -ra parts <<< "$arg"
    objects+=("${parts[@]}")
  done
  check_objects "${objects[@]}"
  exit $?
fi

src=${1:-$(cd "$(dirname "$0")/.." && pwd)/src}
cd "$src" || exit 2

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
    if ! may_use "$from" "$to" "$file -> $target" ${exceptions[@]+"${exceptions[@]}"}; then
      echo "src/$file ($from) includes $target ($to): against the layer direction"
      bad=1
    fi
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$file")
done < <(find $(for d in tensor autograd ops nn; do [ -d $d ] && echo $d; done) -type f \
           \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name '*.cpp' \
              -o -name '*.def' \) | sort)

if [ $bad = 0 ]; then echo "layers: every include follows tensor <- autograd <- ops <- io <- nn, and ops <- ext"; fi
exit $bad
