# Sourced by scripts/test.sh and scripts/test-tsan.sh. check_reports DIR WHAT prints and
# counts the non-empty sanitizer or valgrind report files in DIR; fails if there are any.
# A process killed by a signal (a Criterion test that expects the crash; an unexpected one
# fails its test anyway) counts only for errors other than the leaks it leaves behind.
check_reports() {
  local dir=$1 what=$2 n=0 f
  for f in "$dir"/*; do
    [ -s "$f" ] || continue
    if grep -q 'Process terminating with default action of signal' "$f" &&
      ! grep -qE 'Invalid (read|write|free)|uninitialised|Mismatched free|overlap|Syscall param' "$f"; then
      continue
    fi
    n=$((n + 1))
    echo "---- $f"
    cat "$f"
  done
  if [ "$n" -gt 0 ]; then
    echo "$(basename "$0"): $n process(es) reported $what errors (above)" >&2
    return 1
  fi
}

