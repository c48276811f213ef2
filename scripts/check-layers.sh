#!/usr/bin/env bash
# Keeps docs/design.md's "Layers" true: every `#include` of a file under src/ must point
# along the stated direction
#
#   tensor  <-  autograd  <-  ops  <-  io  <-  nn  <-  distributed   (a layer includes only
#                              ops  <-  ext                            layers to its left)
#                              ops  <-  testing
#               ops/cpu, ops/cuda: backends, reached by ops only through the vtable
#                                  (ops/backend.h); they include tensor/ and ops/ headers
#
# `#include "tg/X.h"` counts as an include of X.h's home folder (public_layer below, the
# table in docs/design.md): a lower layer must not include a higher layer's public header,
# and no layer includes the umbrella tg/tg.h (it includes them all).
#
# Usage: scripts/check-layers.sh [SRC_DIR]   (default: the src/ next to this script).
#        scripts/check-layers.sh --objects OBJ...
# The first form checks includes; the second the calls: no symbol an object file needs may
# be defined by an object of a layer it may not include (a call through the public API
# shows only here). Pass every library's objects (tg_core, the backend registry, the CUDA
# device or its emulation, tg_dist). Each prints what goes against the direction and exits
# 1 if anything does. ctest runs both (check_layers, check_layers_symbols).
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
  testing/*) echo testing ;;
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
  testing) echo "tensor autograd ops testing" ;;
  distributed) echo "tensor autograd ops io nn distributed" ;;
  esac
}

# The layer of a public header (include/tg/): its home folder (docs/design.md, "Public
# headers and their folders"). "umbrella" for tg.h, which no layer may include.
public_layer() {
  case $1 in
  tg/export.h | tg/types.h | tg/tensor.h | tg/dispatch.h) echo tensor ;;
  tg/autograd.h) echo autograd ;;
  tg/ops.h | tg/tensor_ops.h | tg/lltm.h | tg/cuda.h | tg/device.h) echo ops ;;
  tg/cpu.h) echo ops/cpu ;;
  tg/cuda_ext.cuh) echo ops/cuda ;;
  tg/testing.h) echo testing ;;
  tg/io.h | tg/dlpack.h) echo io ;;
  tg/module.h | tg/nn.h) echo nn ;;
  tg/extension.h) echo ext ;;
  tg/dist.h) echo distributed ;;
  # pooling and padding (issue 24, helper "pool")
  tg/pool.h) echo ops ;;
  tg/tg.h) echo umbrella ;;
  tg/conv.h) echo ops ;; # the convolution family
  tg/norm.h) echo ops ;; # issue 24, normalization family (helper norm)
  tg/conv_bn.h) echo ops ;; # the fused Conv2d + BatchNorm2d (issue 24)
  tg/conv_bn_layer.h) echo nn ;; # its layer
  tg/optim.h) echo nn ;; # AdamW, param groups, clipping, LR schedules (issue 25, helper optim)
  tg/index.h) echo ops ;; # indexing along a dim (issue 25, helper "index")
  tg/attention.h) echo ops ;; # issue 25, fused attention (helper "attn")
  *) echo unknown ;;
  esac
}

# Whether layer $1 may use layer $2, or "$3" is a listed exception (in list $4...).
may_use() {
  local from=$1 to=$2 what=$3 l e
  shift 3
  for l in $(allowed "$from"); do [ "$l" = "$to" ] && return 0; done
  for e in "$@"; do [[ $what == $e ]] && return 0; done # an exception may be a glob
  return 1
}

# Known exceptions, "file -> header" and "file -> symbol" (relative to src/, globs allowed),
# each with its reason. Keep them few.
exceptions=()
symbol_exceptions=(
  # The registry's list entries name each op's sample inputs (tg_op_desc.sample_inputs),
  # which live with the other testing tools in src/testing/samples/.
  'ops/registry.c -> tg__samples_*'
  # The one place that names the built-in devices' tables (docs/design.md, "Three seams", 1).
  'ops/backend.c -> tg_*_device'
)

# --objects: OBJ paths contain /src/<folder>/<file>.o (CMake's object layout).
check_objects() {
  local bad=0 rel from to sym defs
  defs=$(mktemp)
  # nm -A names the object on every line: one nm for all objects, not one each.
  nm -A --defined-only -g "$@" | awk 'function rel(p) { sub(/:[0-9a-f]*$/, "", p); if (p ~ /\/tg_emu\/[^\/]*\.cu\.cpp\.o$/) { sub(/^.*\/tg_emu\//, "ops/cuda/", p); sub(/\.cpp\.o$/, "", p); return p } sub(/^.*\/src\//, "", p); sub(/\.o$/, "", p); return p } NF == 3 {print $3, rel($1)}' |
    sort >"$defs"
  # Each (user, symbol, definer) in one pass (thousands of awk processes took ~10 s), for
  # every definer: a symbol two libraries define differently (tg/cuda.h's functions: the
  # CUDA device's, or backend.c's answers without it) is checked as each library links it.
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
  done < <(nm -A -u "$@" | awk 'function rel(p) { sub(/:[0-9a-f]*$/, "", p); if (p ~ /\/tg_emu\/[^\/]*\.cu\.cpp\.o$/) { sub(/^.*\/tg_emu\//, "ops/cuda/", p); sub(/\.cpp\.o$/, "", p); return p } sub(/^.*\/src\//, "", p); sub(/\.o$/, "", p); return p } NF == 3 {print rel($1), $3}' |
    awk 'NR == FNR { def[$1] = def[$1] " " $2; next }
         ($2 in def) { n = split(def[$2], d, " "); for (i = 1; i <= n; i++) print $1, $2, d[i] }' "$defs" - |
    sort -u) # a source built into several libraries (backend.c, tg_dist's) speaks once
  rm -f "$defs"
  [ $bad = 0 ] && echo "layers: every call follows tensor <- autograd <- ops <- io <- nn <- distributed, ops <- ext, ops <- testing"
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
    case $inc in
    tg/*)
      to=$(public_layer "$inc")
      if [ "$to" = umbrella ]; then
        echo "src/$file ($from) includes $inc: the umbrella header includes every layer; include the headers it needs"
        bad=1
      elif ! may_use "$from" "$to" "$file -> $inc" ${exceptions[@]+"${exceptions[@]}"}; then
        echo "src/$file ($from) includes $inc (public header of $to): against the layer direction"
        bad=1
      fi
      continue
      ;;
    esac
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
done < <(find $(for d in tensor autograd ops io nn ext testing distributed; do [ -d $d ] && echo $d; done) -type f \
           \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name '*.cpp' \
              -o -name '*.def' \) | sort)

if [ $bad = 0 ]; then echo "layers: every include follows tensor <- autograd <- ops <- io <- nn <- distributed, ops <- ext, ops <- testing"; fi
exit $bad
