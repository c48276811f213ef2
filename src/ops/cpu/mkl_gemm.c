/* MKL as an optional GEMM engine, loaded at run time: never required, never linked.
 *
 * Where it is found (TG_MKL_LIBRARY, a path; else libmkl_rt.so.3 or .2 on the loader's path,
 * as Debian's libmkl-rt installs it; else in $VIRTUAL_ENV/lib, where PyPI's `mkl` puts it),
 * its cblas_sgemm/dgemm join the engines calibration measures. It runs on GNU OpenMP (the
 * runtime BLIS uses) unless MKL_THREADING_LAYER says otherwise: two OpenMP runtimes in one
 * process would each keep their own spinning threads. */
#define _GNU_SOURCE /* RTLD_* */
#include <dlfcn.h>
#include <limits.h>
#include <stdint.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cpu/cblas_call.h"
#include "ops/cpu/gemm_engine.h"

enum { MKL_THREADING_GNU = 3 }; /* MKL_Set_Threading_Layer's value for GNU OpenMP */

typedef int (*set_threads_local_fn)(int);
typedef int (*set_threading_layer_fn)(int);
typedef void (*version_fn)(char *, int);

static struct {
  pthread_once_t once;
  void *lib;
  tg_cblas_sgemm_fn sgemm;
  tg_cblas_dgemm_fn dgemm;
  set_threads_local_fn set_threads_local;
  char version[96];
} mkl = {PTHREAD_ONCE_INIT, NULL, NULL, NULL, NULL, ""};

static void *open_first(void) {
  const char *pinned = getenv("TG_MKL_LIBRARY");
  if (pinned) return pinned[0] && strcmp(pinned, "off") != 0 ? dlopen(pinned, RTLD_NOW) : NULL;
  void *lib = dlopen("libmkl_rt.so.3", RTLD_NOW);
  if (!lib) lib = dlopen("libmkl_rt.so.2", RTLD_NOW);
  const char *venv = getenv("VIRTUAL_ENV");
  for (int v = 3; !lib && venv && venv[0] && v >= 2; v--) {
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/lib/libmkl_rt.so.%d", venv, v) < (int)sizeof path)
      lib = dlopen(path, RTLD_NOW);
  }
  return lib;
}

static void load_once(void) {
  void *lib = open_first();
  if (!lib) return;
  tg_cblas_sgemm_fn s = (tg_cblas_sgemm_fn)(uintptr_t)dlsym(lib, "cblas_sgemm");
  tg_cblas_dgemm_fn d = (tg_cblas_dgemm_fn)(uintptr_t)dlsym(lib, "cblas_dgemm");
  set_threads_local_fn t = (set_threads_local_fn)(uintptr_t)dlsym(lib, "MKL_Set_Num_Threads_Local");
  set_threading_layer_fn layer =
      (set_threading_layer_fn)(uintptr_t)dlsym(lib, "MKL_Set_Threading_Layer");
  version_fn version = (version_fn)(uintptr_t)dlsym(lib, "MKL_Get_Version_String");
  if (!s || !d || !t) { /* not an MKL runtime library */
    dlclose(lib);
    return;
  }
  if (layer && !getenv("MKL_THREADING_LAYER")) layer(MKL_THREADING_GNU);
  if (version) {
    char text[256] = "";
    version(text, (int)sizeof text);
    /* "Intel(R) oneAPI Math Kernel Library Version 2025.2-Product Build ...": the number. */
    const char *v = strstr(text, "Version ");
    v = v ? v + 8 : text;
    size_t n = strcspn(v, "- ");
    snprintf(mkl.version, sizeof mkl.version, "%.*s", (int)n, v);
  }
  if (!mkl.version[0]) snprintf(mkl.version, sizeof mkl.version, "unknown");
  mkl.sgemm = s;
  mkl.dgemm = d;
  mkl.set_threads_local = t;
  mkl.lib = lib;
}

bool tg__mkl_available(void) {
  pthread_once(&mkl.once, load_once);
  return mkl.lib != NULL;
}

const char *tg__mkl_version(void) { return tg__mkl_available() ? mkl.version : NULL; }

bool tg__mkl_takes(const tg_gemm_problem *p) {
  tg_cblas_call call;
  return tg__mkl_available() && tg__cblas_call_of(p, &call);
}

bool tg__mkl_gemm(const tg_gemm_problem *p) {
  tg_cblas_call call;
  if (!tg__mkl_available() || !tg__cblas_call_of(p, &call)) return false;
  const int before = mkl.set_threads_local(1); /* tg's pool runs blocks in parallel */
  tg__cblas_run(p, &call, mkl.sgemm, mkl.dgemm);
  mkl.set_threads_local(before);
  return true;
}
