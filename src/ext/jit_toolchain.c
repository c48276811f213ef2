/* What tg_extension_jit compiles with: the running libtg.so (found with dladdr, so that the
 * extension links exactly the tg that loads it), tg's headers, $CC and $NVCC. */
#define _GNU_SOURCE /* dladdr, realpath */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ext/jit.h"
#include "ext/jit_config.h"
#include "ops/backend.h"
#include "tensor/host_memory.h"
#include "tg/cuda.h"

/* An address inside whichever file holds tg's code: libtg.so, or a program with tg linked
 * in statically. */
static const char tg_jit_anchor = 0;

static tg_status find_libtg(tg__jit_toolchain *tc, const char *fn) {
  Dl_info info;
  if (!dladdr(&tg_jit_anchor, &info) || !info.dli_fname)
    return tg_set_error(TG_ERR_EXTENSION, "%s: cannot tell which file tg was loaded from", fn);
  const char *slash = strrchr(info.dli_fname, '/');
  const char *base = slash ? slash + 1 : info.dli_fname;
  /* A program with tg inside would hold a second copy of it beside the libtg.so an
   * extension links: their registries would differ. */
  if (strncmp(base, "libtg.so", strlen("libtg.so")) != 0 &&
      strncmp(base, "libtg_emu.so", strlen("libtg_emu.so")) != 0) /* the tests' emulation */
    return tg_set_error(TG_ERR_EXTENSION,
                        "%s: tg is linked statically into '%s': link libtg.so to load extensions",
                        fn, info.dli_fname[0] ? info.dli_fname : "the program");
  if (!realpath(info.dli_fname, tc->libtg))
    return tg_set_error(TG_ERR_EXTENSION, "%s: cannot resolve tg's library '%s'", fn,
                        info.dli_fname);
  memcpy(tc->libdir, tc->libtg, sizeof tc->libdir);
  *strrchr(tc->libdir, '/') = '\0'; /* realpath gave an absolute path */
  return TG_OK;
}

static bool has_tg_headers(const char *dir) {
  char header[PATH_MAX];
  int n = snprintf(header, sizeof header, "%s/tg/extension.h", dir);
  return n > 0 && (size_t)n < sizeof header && access(header, R_OK) == 0;
}

/* An installed tg has its headers in <libdir>/../include; a tg running from its build tree
 * uses the source tree's, baked in at configure time. */
static tg_status find_headers(tg__jit_toolchain *tc, const char *fn) {
  char installed[PATH_MAX];
  tg_status st = tg__jit_path(fn, installed, sizeof installed, "%s/../include", tc->libdir);
  if (st) return st;
  if (has_tg_headers(installed) && realpath(installed, tc->include_dir)) return TG_OK;
  if (has_tg_headers(TG_JIT_SOURCE_INCLUDE_DIR))
    return tg__jit_path(fn, tc->include_dir, sizeof tc->include_dir, "%s",
                        TG_JIT_SOURCE_INCLUDE_DIR);
  return tg_set_error(TG_ERR_EXTENSION,
                      "%s: cannot find tg's headers (no tg/extension.h in %s or %s)", fn, installed,
                      TG_JIT_SOURCE_INCLUDE_DIR);
}

static bool is_blank(char c) { return c == ' ' || c == '\t'; }

/* $CC may hold words ("ccache cc"): split at blanks, no quoting. */
static tg_status split_cc(tg__jit_toolchain *tc, const char *fn) {
  const char *cc = getenv("CC");
  while (cc && is_blank(*cc)) cc++;
  if (!cc || !*cc) cc = "cc";
  size_t len = strlen(cc);
  tc->cc_text = tg__host_malloc(len + 1);
  tc->cc = tg__host_calloc(len / 2 + 2, sizeof *tc->cc); /* at most (len+1)/2 words, and NULL */
  if (!tc->cc_text || !tc->cc)
    return tg_set_error(TG_ERR_MEMORY, "%s: out of memory for the compiler's name", fn);
  memcpy(tc->cc_text, cc, len + 1);
  tc->n_cc = 0;
  for (char *p = tc->cc_text; *p;) {
    while (is_blank(*p)) *p++ = '\0';
    if (!*p) break;
    tc->cc[tc->n_cc++] = p;
    while (*p && !is_blank(*p)) p++;
  }
  return TG_OK;
}

tg_status tg__jit_check_cuda(const char *fn, const char *source) {
  if (!tg_cuda_is_built())
    return tg_set_error(TG_ERR_EXTENSION, "%s: '%s' is CUDA, but this tg was built without CUDA",
                        fn, source);
  if (tg__cuda_is_emulated()) return TG_OK; /* compiled as C++ for the emulation */
  if (!TG_JIT_HAVE_NVCC)
    return tg_set_error(TG_ERR_EXTENSION, "%s: '%s' is CUDA, but this tg was built without nvcc",
                        fn, source);
  return TG_OK;
}

tg_status tg__jit_toolchain_init(tg__jit_toolchain *tc, const char *fn) {
  *tc = (tg__jit_toolchain){0};
  tg_status st = split_cc(tc, fn);
  if (!st) st = find_libtg(tc, fn);
  if (!st) st = find_headers(tc, fn);
  /* $NVCC, else the nvcc tg itself was built with, else whichever is on PATH. */
  const char *nvcc = getenv("NVCC");
  tc->nvcc = nvcc && *nvcc ? nvcc : TG_JIT_HAVE_NVCC ? TG_JIT_NVCC : "nvcc";
  tc->cuda_include_dir = TG_JIT_CUDA_INCLUDE_DIR;
  tc->cuda_library_dir = TG_JIT_CUDA_LIBRARY_DIR;
  tc->emulated = tg__cuda_is_emulated();
  const char *cxx = getenv("CXX");
  tc->cxx = cxx && *cxx ? cxx : "c++";
  tc->emulation_src_dir = TG_JIT_SOURCE_SRC_DIR;
  if (st) tg__jit_toolchain_free(tc);
  return st;
}

void tg__jit_toolchain_free(tg__jit_toolchain *tc) {
  tg__host_free(tc->cc_text);
  tg__host_free(tc->cc);
  tc->cc_text = NULL;
  tc->cc = NULL;
  tc->n_cc = 0;
}

const char *const *tg__jit_nvcc_arch_flags(void) {
  static const char *const flags[] = {TG_JIT_NVCC_ARCH_FLAGS NULL};
  return flags;
}
