#!/usr/bin/env bash
# Installs tg into a temporary prefix, moves the prefix (the install must be relocatable),
# and builds and runs tests/install/consumer.c against it three ways: CMake find_package
# (tg::tg and tg::tg_shared), pkg-config (shared) and pkg-config --static; consumer_dist.c
# against tg::tg_dist (one process, no mpirun); builds an extension
# with tg_add_extension and with one cc line from pkg-config, and loads each; and checks that
# the installed libtg.so exports only what the installed headers declare (check_exports.sh).
#   tests/install/check_install.sh [BUILD_DIR]
# With BUILD_DIR (already built) it installs from there; otherwise it builds the library
# alone in a temporary directory first.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tg-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
say() { echo "check_install: $*"; }
jobs=$(nproc 2>/dev/null || echo 2)

if [ $# -ge 1 ]; then
  build=$(cd "$1" && pwd)
else
  build=$tmp/build
  say "building the library in $build"
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DTG_BUILD_TESTS=OFF \
    -DTG_BUILD_EXAMPLES=OFF >"$tmp/configure.log" || { cat "$tmp/configure.log"; exit 1; }
  cmake --build "$build" -j"$jobs" >"$tmp/build.log" || { cat "$tmp/build.log"; exit 1; }
fi

cmake --install "$build" --prefix "$tmp/stage" >"$tmp/install.log" ||
  { cat "$tmp/install.log"; exit 1; }
mv "$tmp/stage" "$tmp/prefix"
prefix=$tmp/prefix
config=$(find "$prefix" -name tgConfig.cmake -print -quit)
[ -n "$config" ] || { say "no tgConfig.cmake under the prefix"; exit 1; }
libdir=$(dirname "$(dirname "$(dirname "$config")")")
say "installed and moved to $prefix (libdir ${libdir#"$prefix"/})"
for f in include/tg/tg.h include/tg/dist.h "${libdir#"$prefix"/}"/libtg.a \
  "${libdir#"$prefix"/}"/libtg.so "${libdir#"$prefix"/}"/libtg_dist.so \
  "${libdir#"$prefix"/}"/pkgconfig/tg.pc; do
  [ -e "$prefix/$f" ] || { say "missing $f"; exit 1; }
done
# The CUDA device module, when built, sits beside libtg (where libtg looks for it).
if [ -e "$build/libtg_cuda.so" ] && [ ! -e "$libdir/libtg_cuda.so" ]; then
  say "missing ${libdir#"$prefix"/}/libtg_cuda.so (the CUDA device module)"
  exit 1
fi
for f in tgConfig.cmake tgConfigVersion.cmake tgTargets.cmake FindBLIS.cmake; do
  [ -e "$(dirname "$config")/$f" ] || { say "missing $f beside tgConfig.cmake"; exit 1; }
done

# The installed library exports exactly what the installed headers declare.
"$root/tests/check_exports.sh" "$libdir/libtg.so" "$prefix/include"

# ---- CMake: find_package(tg) ----
cmake -S "$root/tests/install" -B "$tmp/consumer" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" >"$tmp/consumer.log" || { cat "$tmp/consumer.log"; exit 1; }
cmake --build "$tmp/consumer" -j"$jobs" >>"$tmp/consumer.log" || { cat "$tmp/consumer.log"; exit 1; }
for exe in consumer_static consumer_shared; do
  say "find_package(tg): $exe"
  "$tmp/consumer/$exe"
done
say "find_package(tg): consumer_dist (tg::tg_dist)"
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "$tmp/consumer/consumer_dist"
say "find_package(tg): tg_add_extension(install_cube), loaded by load_ext"
"$tmp/consumer/load_ext" "$tmp/consumer/libinstall_cube.so"
# The JIT of an installed tg compiles against the installed headers and libtg.so.
say "tg_extension_jit against the installed tg"
"$tmp/consumer/load_ext" "$root/tests/install/consumer_ext.c" "$tmp/jit-cache" 2>"$tmp/jit.log" ||
  { cat "$tmp/jit.log"; exit 1; }
grep -q -- "-I$prefix/include" "$tmp/jit.log" ||
  { say "the JIT did not compile against $prefix/include:"; cat "$tmp/jit.log"; exit 1; }

# ---- the LLTM extension example, built outside tg and checked by the installed tg-op ----
if [ -x "$prefix/bin/tg-op" ]; then
  cmake -S "$root/examples/extension" -B "$tmp/lltm_ext" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$prefix" >"$tmp/lltm_ext.log" || { cat "$tmp/lltm_ext.log"; exit 1; }
  cmake --build "$tmp/lltm_ext" -j"$jobs" >>"$tmp/lltm_ext.log" || { cat "$tmp/lltm_ext.log"; exit 1; }
  say "examples/extension built with find_package(tg); tg-op gradcheck and bench of lltm_ext"
  "$prefix/bin/tg-op" --load "$tmp/lltm_ext/liblltm_ext.so" gradcheck lltm_ext --no-cuda
  "$prefix/bin/tg-op" --load "$tmp/lltm_ext/liblltm_ext.so" bench lltm_ext lltm lltm_composed \
    --iters 3 --warmup 1 >/dev/null
else
  say "no tg-op installed (built without examples): the LLTM extension example is skipped"
fi

# ---- pkg-config ----
export PKG_CONFIG_PATH=$libdir/pkgconfig
cc=${CC:-cc}
cflags=(-std=c11 -Wall -Wextra -Werror)
say "pkg-config tg $(pkg-config --modversion tg): $(pkg-config --cflags --libs tg)"
# README.md's own command line, found by its start, with app.c and cc replaced: what a user
# copies must build a program that runs as it is (no LD_LIBRARY_PATH).
readme_cc() {
  local line
  line=$(grep -F -m1 -- "$1" "$root/README.md") || { say "README.md has no line '$1...'" >&2; exit 1; }
  printf '%s' "${line#cc app.c}"
}
readme_shared=$(readme_cc 'cc app.c $(pkg-config --cflags --libs tg)')
say "README's shared line: cc app.c$readme_shared"
eval "\"\$cc\" \"\${cflags[@]}\" \"\$root/tests/install/consumer.c\" -o \"\$tmp/consumer_pc\" $readme_shared"
env -u LD_LIBRARY_PATH "$tmp/consumer_pc"
# An extension in one line (docs/extensions.md), loaded by a pkg-config-built program.
# shellcheck disable=SC2046
"$cc" "${cflags[@]}" -shared -fPIC "$root/tests/install/consumer_ext.c" \
  -o "$tmp/libinstall_cube_pc.so" $(pkg-config --cflags --libs tg)
# shellcheck disable=SC2046
"$cc" "${cflags[@]}" "$root/tests/install/load_ext.c" -o "$tmp/load_ext_pc" \
  $(pkg-config --cflags --libs tg) -Wl,-rpath,"$(pkg-config --variable=libdir tg)"
say "pkg-config: cc -shared extension, loaded by load_ext (the extension needs no rpath: it"
say "  gets the libtg.so.0 its loader has)"
env -u LD_LIBRARY_PATH "$tmp/load_ext_pc" "$tmp/libinstall_cube_pc.so"
# Static: libtg.a plus exactly what Libs.private lists (README's line again).
readme_static=$(readme_cc 'cc app.c $(pkg-config --cflags tg) $(pkg-config --static --libs tg')
say "README's static line: cc app.c$readme_static"
eval "\"\$cc\" \"\${cflags[@]}\" \"\$root/tests/install/consumer.c\" -o \"\$tmp/consumer_pc_static\" $readme_static"
if readelf -d "$tmp/consumer_pc_static" | grep -q 'libtg\.so'; then
  say "the static consumer links libtg.so"; exit 1
fi
env -u LD_LIBRARY_PATH "$tmp/consumer_pc_static"
say "OK"
