/* The compiler command lines of a JIT build, as argv arrays (no shell ever parses them):
 *
 *   nvcc -c -O2 -Xcompiler -fPIC -DTG_EXTENSION_CUDA=1 -I<tg> <arch flags> <cflags> <src>.cu
 *        -o <entry>/<name>_cuda0.o
 *   ...one per .cu source, then the link of everything into the library:
 *   cc -std=c11 -O2 -Werror=implicit-function-declaration -Werror=int-conversion -fPIC -shared
 *      [-DTG_EXTENSION_CUDA=1] -I<tg> <cflags> <src>.c ... <objects>
 *      -o <entry>/lib<name>.so.tmp
 *      <libtg.so> [-L<cuda> -lcudart -lstdc++ <rpath cuda>] <rpath libdir> <ldflags>
 *   (<rpath dir> is -Xlinker -rpath -Xlinker <dir>)
 *
 * For a tg whose CUDA device is the CPU emulation (the tests' tg_emu), a .cu source is
 * compiled as C++ instead: $CXX -x c++ -std=c++17 -c -O2 -fPIC -DTG_CUDA_EMULATION
 * -DTG_EXTENSION_CUDA=1 -I<tg> -I<tg's src/> <cflags> <src>.cu, and linked without cudart.
 *
 * With .cu sources every compile gets TG_EXTENSION_CUDA=1, as tg_add_extension gives it
 * (cmake/TgExtension.cmake): the C side registers its CUDA kernels under it.
 * The extension links the running libtg.so by its full path, with an rpath to its
 * directory, so that it finds that same library when loaded (and tg refuses a second copy). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ext/jit.h"
#include "tensor/host_memory.h"

static tg_status out_of_memory(void) {
  return tg_set_error(TG_ERR_MEMORY, "tg_extension_jit: out of memory for a command line");
}

static tg_status push_owned(tg__jit_argv *a, char *s) {
  if (a->n + 2 > a->cap) {
    int cap = a->cap ? 2 * a->cap : 32;
    char **grown = tg__host_realloc(a->arg, (size_t)cap * sizeof *grown);
    if (!grown) {
      tg__host_free(s);
      return out_of_memory();
    }
    a->arg = grown;
    a->cap = cap;
  }
  a->arg[a->n++] = s;
  a->arg[a->n] = NULL;
  return TG_OK;
}

tg_status tg__jit_argv_push(tg__jit_argv *a, const char *s) {
  char *copy = tg__host_strdup(s);
  if (!copy) return out_of_memory();
  return push_owned(a, copy);
}

tg_status tg__jit_argv_pushf(tg__jit_argv *a, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int len = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (len < 0) return tg_set_error(TG_ERR_ARGUMENT, "tg_extension_jit: bad command argument");
  char *s = tg__host_malloc((size_t)len + 1);
  if (!s) return out_of_memory();
  va_start(ap, fmt);
  vsnprintf(s, (size_t)len + 1, fmt, ap);
  va_end(ap);
  return push_owned(a, s);
}

void tg__jit_argv_free(tg__jit_argv *a) {
  for (int i = 0; i < a->n; i++) tg__host_free(a->arg[i]);
  tg__host_free(a->arg);
  *a = (tg__jit_argv){0};
}

tg_status tg__jit_source_path(const tg__jit_request *rq, int index, const char *entry, char *buf,
                              size_t size) {
  if (rq->inline_sources) /* written into the entry: <entry>/<name>.c */
    return tg__jit_path(rq->fn, buf, size, "%s/%s", entry, rq->sources[index].name);
  return tg__jit_path(rq->fn, buf, size, "%s", rq->sources[index].name);
}

static tg_status push_flags(tg__jit_argv *a, int n, const char *const *flags) {
  tg_status st = TG_OK;
  for (int i = 0; i < n && !st; i++) st = tg__jit_argv_push(a, flags[i]);
  return st;
}

static tg_status push_source(tg__jit_argv *a, const tg__jit_request *rq, int index,
                             const char *entry) {
  char path[PATH_MAX];
  tg_status st = tg__jit_source_path(rq, index, entry, path, sizeof path);
  return st ? st : tg__jit_argv_push(a, path);
}

/* -Xlinker rather than -Wl,-rpath,<dir>: -Wl would split a directory at its commas. */
static tg_status push_rpath(tg__jit_argv *a, const char *dir) {
  tg_status st = tg__jit_argv_push(a, "-Xlinker");
  if (!st) st = tg__jit_argv_push(a, "-rpath");
  if (!st) st = tg__jit_argv_push(a, "-Xlinker");
  return st ? st : tg__jit_argv_push(a, dir);
}

static bool has_cuda_sources(const tg__jit_request *rq) {
  for (int i = 0; i < rq->n_sources; i++)
    if (rq->sources[i].cuda) return true;
  return false;
}

/* A .cu source for tg's CPU emulation of CUDA: plain C++ against the emulated runtime,
 * which tg/cuda_ext.cuh includes from tg's source tree under TG_CUDA_EMULATION. */
static tg_status emulated_cuda_compile_flags(tg__jit_argv *a, const tg__jit_toolchain *tc) {
  const char *const fixed[] = {"-x",  "c++",   "-std=c++17",          "-c",
                               "-O2", "-fPIC", "-DTG_CUDA_EMULATION", "-DTG_EXTENSION_CUDA=1"};
  tg_status st = tg__jit_argv_push(a, tc->cxx);
  for (size_t i = 0; i < sizeof fixed / sizeof *fixed && !st; i++)
    st = tg__jit_argv_push(a, fixed[i]);
  if (!st) st = tg__jit_argv_pushf(a, "-I%s", tc->include_dir);
  if (!st) st = tg__jit_argv_pushf(a, "-I%s", tc->emulation_src_dir);
  return st;
}

static tg_status nvcc_compile_flags(tg__jit_argv *a, const tg__jit_toolchain *tc) {
  const char *const fixed[] = {"-c", "-O2", "-Xcompiler", "-fPIC", "-DTG_EXTENSION_CUDA=1"};
  tg_status st = tg__jit_argv_push(a, tc->nvcc);
  for (size_t i = 0; i < sizeof fixed / sizeof *fixed && !st; i++)
    st = tg__jit_argv_push(a, fixed[i]);
  if (!st) st = tg__jit_argv_pushf(a, "-I%s", tc->include_dir);
  for (const char *const *arch = tg__jit_nvcc_arch_flags(); *arch && !st; arch++)
    st = tg__jit_argv_push(a, *arch);
  return st;
}

static tg_status cuda_compile(tg__jit_argv *a, const tg__jit_request *rq,
                              const tg__jit_toolchain *tc, int index, const char *entry) {
  tg_status st = tc->emulated ? emulated_cuda_compile_flags(a, tc) : nvcc_compile_flags(a, tc);
  if (!st) st = push_flags(a, rq->opts.n_cflags, rq->opts.cflags);
  if (!st) st = push_source(a, rq, index, entry);
  if (!st) st = tg__jit_argv_push(a, "-o");
  if (!st) st = tg__jit_argv_pushf(a, "%s/%s_cuda%d.o", entry, rq->name, index);
  return st;
}

static tg_status link_library(tg__jit_argv *a, const tg__jit_request *rq,
                              const tg__jit_toolchain *tc, const char *entry) {
  /* An extension that forgets an #include would otherwise build with a warning, load, and
   * crash on its first call: an undeclared tg_ function returns int, its pointer cut. */
  const char *const fixed[] = {
      "-std=c11", "-O2",    "-Werror=implicit-function-declaration", "-Werror=int-conversion",
      "-fPIC",    "-shared"};
  tg_status st = TG_OK;
  bool cuda = false;
  for (int i = 0; i < tc->n_cc && !st; i++) st = tg__jit_argv_push(a, tc->cc[i]);
  for (size_t i = 0; i < sizeof fixed / sizeof *fixed && !st; i++)
    st = tg__jit_argv_push(a, fixed[i]);
  if (!st && has_cuda_sources(rq)) st = tg__jit_argv_push(a, "-DTG_EXTENSION_CUDA=1");
  if (!st) st = tg__jit_argv_pushf(a, "-I%s", tc->include_dir);
  if (!st) st = push_flags(a, rq->opts.n_cflags, rq->opts.cflags);
  for (int i = 0; i < rq->n_sources && !st; i++)
    if (!rq->sources[i].cuda) st = push_source(a, rq, i, entry);
  for (int i = 0; i < rq->n_sources && !st; i++)
    if (rq->sources[i].cuda) {
      cuda = true;
      st = tg__jit_argv_pushf(a, "%s/%s_cuda%d.o", entry, rq->name, i);
    }
  if (!st) st = tg__jit_argv_push(a, "-o");
  if (!st) st = tg__jit_argv_pushf(a, "%s/lib%s.so.tmp", entry, rq->name);
  if (!st) st = tg__jit_argv_push(a, tc->libtg);
  bool cudart = cuda && !tc->emulated; /* the emulated runtime is in tg's library */
  if (!st && cudart) st = tg__jit_argv_pushf(a, "-L%s", tc->cuda_library_dir);
  if (!st && cudart) st = tg__jit_argv_push(a, "-lcudart");
  if (!st && cuda) st = tg__jit_argv_push(a, "-lstdc++"); /* the .cu side is C++ */
  if (!st && cudart) st = push_rpath(a, tc->cuda_library_dir);
  if (!st) st = push_rpath(a, tc->libdir);
  if (!st) st = push_flags(a, rq->opts.n_ldflags, rq->opts.ldflags);
  return st;
}

tg_status tg__jit_commands_make(const tg__jit_request *rq, const tg__jit_toolchain *tc,
                                const char *entry, tg__jit_commands *out) {
  int n_cuda = 0;
  for (int i = 0; i < rq->n_sources; i++) n_cuda += rq->sources[i].cuda;
  *out = (tg__jit_commands){0};
  out->cmd = tg__host_calloc((size_t)n_cuda + 1, sizeof *out->cmd);
  if (!out->cmd) return out_of_memory();
  out->n = n_cuda + 1;
  tg_status st = TG_OK;
  int k = 0;
  for (int i = 0; i < rq->n_sources && !st; i++)
    if (rq->sources[i].cuda) st = cuda_compile(&out->cmd[k++], rq, tc, i, entry);
  if (!st) st = link_library(&out->cmd[k], rq, tc, entry);
  if (st) tg__jit_commands_free(out);
  return st;
}

void tg__jit_commands_free(tg__jit_commands *c) {
  for (int i = 0; i < c->n; i++) tg__jit_argv_free(&c->cmd[i]);
  tg__host_free(c->cmd);
  *c = (tg__jit_commands){0};
}
