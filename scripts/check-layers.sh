#!/usr/bin/env bash
# Keeps docs/design.md's "Layers" true: every `#include "..."` of a file under src/ must
# point along the stated direction
#
#   tensor  <-  autograd  <-  ops  <-  io  <-  nn  <-  distributed (a layer includes only layers to
#                              ops  <-  ext                       its left)
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
  distributed/*) echo distributed ;;
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
  distributed) echo "tensor autograd ops io nn distributed" ;;
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
  local bad=0 rel from to sym defs
  defs=$(mktemp)
  # nm -A names the object on every line: one nm for all objects, not one each.
  nm -A --defined-only -g "$@" | awk 'function rel(p) { sub(/:[0-9a-f]*$/, "", p); sub(/^.*\/src\//, "", p); sub(/\.o$/, "", p); return p } NF == 3 {print $3, rel($1)}' |
    sort >"$defs"
  # Each (user, symbol, definer) in one pass: the first definer in sorted order, as a lookup
  # per symbol would find (thousands of awk processes took ~10 s).
  local -A layer verdict # per file and per layer pair: bash subshells are slow by thousands
  while read -r rel sym to; do
    [ -n "${layer[$rel]:-}" ] || layer[$rel]=$(layer_of "$rel")
    [ -n "${layer[$to]:-}" ] || layer[$to]=$(layer_of "$to")
    from=${layer[$rel]}
    to=${layer[$to]}
    if [ -z "${verdict[$from:$to]:-}" ]; then
      verdict[$from:$to]=bad
      may_use "$from" "$to" "" && verdict[$from:$to]=ok
    fi
    [ "${verdict[$from:$to]}" = ok ] && continue
    if ! may_use "$from" "$to" "$rel -> $sym" ${symbol_exceptions[@]+"${symbol_exceptions[@]}"}; then
      echo "src/$rel ($from) uses $sym from $to: against the layer direction"
      bad=1
    fi
  done < <(nm -A -u "$@" | awk 'function rel(p) { sub(/:[0-9a-f]*$/, "", p); sub(/^.*\/src\//, "", p); sub(/\.o$/, "", p); return p } NF == 3 {print rel($1), $3}' |
    awk 'NR == FNR { if (!($1 in def)) def[$1] = $2; next } ($2 in def) {print $1, $2, def[$2]}' "$defs" -)
  rm -f "$defs"
  [ $bad = 0 ] && echo "layers: every call follows tensor <- autograd <- ops <- io <- nn <- distributed, and ops <- ext"
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
done < <(find $(for d in tensor autograd ops io nn ext distributed; do [ -d $d ] && echo $d; done) -type f \
           \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name '*.cpp' \
              -o -name '*.def' \) | sort)

if [ $bad = 0 ]; then echo "layers: every include follows tensor <- autograd <- ops <- io <- nn <- distributed, and ops <- ext"; fi
exit $bad
