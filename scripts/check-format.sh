#!/usr/bin/env bash
# Fails when a tracked C/C++/CUDA source differs from what clang-format makes of it with the
# repo's .clang-format. Run from anywhere; ctest runs it as `format` when clang-format 14 (the
# version the tree is formatted with: other versions place some breaks differently) is found.
# Fix: clang-format -i FILE.
set -euo pipefail
cd "$(dirname "$0")/.."
format=${CLANG_FORMAT:-clang-format}
mapfile -t files < <(git ls-files '*.c' '*.h' '*.cu' '*.cuh' '*.cpp' |
  grep -v -e '^tests/layers_fixture/' -e '^tests/doc_paths_fixture/')
bad=0
# One clang-format for all files (one process per file took ~10 s); only when it finds
# something is each file asked again, to name it.
if ! "$format" --dry-run --Werror "${files[@]}" >/dev/null 2>&1; then
  for f in "${files[@]}"; do
    if ! "$format" --dry-run --Werror "$f" >/dev/null 2>&1; then
      echo "check-format: $f is not clang-format clean (clang-format -i $f)" >&2
      bad=1
    fi
  done
  [ "$bad" -eq 1 ] || { echo "check-format: $format failed on the whole list" >&2; bad=1; }
fi
[ "$bad" -eq 0 ] && echo "check-format: ${#files[@]} files clean"
exit "$bad"
