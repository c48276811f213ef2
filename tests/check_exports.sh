#!/usr/bin/env bash
# Checks that libtg.so exports the public API and nothing else: every defined dynamic symbol
# must be a function or object declared in include/tg/*.h, and no internal name (tg__*, and
# the backends' tg_cpu_* and tg_cuda_* that no public header declares) may leave the library.
# libtg_dist.so (tg_dist, its own library) is checked the same way against tg/dist.h, the
# one header it carries; libtg.so against the others.
#   tests/check_exports.sh LIBTG_SO [INCLUDE_DIR]
# Toolchain symbols that instrumented builds add (sanitizers, fuzzing coverage, the ELF
# markers) are not tg's and are ignored. Prints the counts; exits 1 listing what is wrong.
set -euo pipefail
lib=${1:?usage: check_exports.sh LIBTG_SO [INCLUDE_DIR]}
root=$(cd "$(dirname "$0")/.." && pwd)
incdir=${2:-$root/include}
say() { echo "check_exports: $*"; }

# The headers with comments and #define bodies removed, so that neither a comment nor a
# macro declares anything (TG_EXTENSION defines an extension's entry point, not tg's).
case $(basename "$lib") in
libtg_dist.*) api_headers=("$incdir"/tg/dist.h) ;;
*) api_headers=() && for h in "$incdir"/tg/*.h; do [ "${h##*/}" = dist.h ] || api_headers+=("$h"); done ;;
esac
headers=$(cat "${api_headers[@]}" | perl -0777 -pe 's{/\*.*?\*/}{ }gs; s{//[^\n]*}{}g;
  s{^[ \t]*#[ \t]*define(?:[^\n]*\\\n)*[^\n]*}{}gm')
# Declared names: a tg identifier followed by "(" (functions, plus return types of function
# pointers and calls in macros: a superset) or ending an extern declaration (data).
declared=$(perl -ne 'print "$1\n" while /\b(tg_[A-Za-z0-9_]+)\s*\(/g;
            print "$1\n" if /^\s*extern\b(?!\s*"C").*?\b(tg_[A-Za-z0-9_]+)\s*(\[[^\]]*\])?\s*;/' \
  <<<"$headers" | sort -u)
[ -n "$declared" ] || { say "no declarations found in ${api_headers[*]}"; exit 1; }
# Type names (typedef ... tg_x; and } tg_x;), to leave out of the superset above.
# Function pointer types too (typedef R (*tg_x)(...);), which may return another such type.
types=$(perl -0777 -ne 'print "$1\n" while /(?:\}\s*|typedef\s[^;{}]*?\b)(tg_[A-Za-z0-9_]+)\s*;/g;
                        print "$1\n" while /typedef\s[^;{}]*?\(\s*\*\s*(tg_[A-Za-z0-9_]+)\s*\)/g' \
  <<<"$headers" | sort -u)

exported=$("${NM:-nm}" -D --defined-only "$lib" | awk 'NF >= 3 { sub(/@.*/, "", $3); print $3 }' | sort -u)
toolchain='^(_init|_fini|_edata|_end|__bss_start|__(asan|odr_asan|ubsan|tsan|sancov|lsan)[A-Za-z0-9_]*|___asan[A-Za-z0-9_]*)$'

bad=""
while IFS= read -r sym; do
  [ -n "$sym" ] || continue
  [[ $sym =~ $toolchain ]] && continue
  if [[ $sym == tg__* || $sym == tg_cpu_* ]]; then
    bad+="$sym (internal name)"$'\n'
  elif ! grep -qxF -- "$sym" <<<"$declared"; then
    bad+="$sym (not declared in include/tg/*.h)"$'\n'
  fi
done <<<"$exported"

n_exported=$(grep -c . <<<"$exported" || true)
n_bad=$(grep -c . <<<"$bad" || true)
say "$lib: $n_exported defined dynamic symbols, $n_bad outside the public API"
if [ "$n_bad" -ne 0 ]; then
  printf '%s' "$bad" | sed 's/^/  /'
  exit 1
fi
# And the other way: a function defined in a file that does not include its public header
# would be hidden, and a user's link would fail.
missing=$(comm -23 <(comm -23 <(echo "$declared") <(echo "$types")) <(echo "$exported"))
if [ -n "$missing" ]; then
  say "declared in ${api_headers[*]##*/} but not exported:"
  sed 's/^/  /' <<<"$missing"
  exit 1
fi
say "OK"
