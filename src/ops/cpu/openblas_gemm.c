/* OpenBLAS as an optional GEMM engine, loaded at run time: never required, never linked.
 *
 * Where it is found (TG_OPENBLAS_LIBRARY, a path, "off": never; else Debian's serial build,
 * libopenblas0-serial, then whichever libopenblas.so.0 the loader finds), its
 * cblas_sgemm/dgemm join the engines calibration measures. Measured on an Intel Xeon
 * (Emerald Rapids, 1 thread, bench/gemm_engines.c): OpenBLAS 0.3.21 was the fastest engine at
 * 8 of the LLTM's 20 products, 1.47x BLIS at 64 x 1024 x 128's forward.
 *
 * It takes one-thread products only, one call at a time (a lock): Debian's serial build is
 * not safe for concurrent calls. With two of tg's pool threads each running a block of one
 * product, test_blis_guard's engine_openblas got wrong elements (33 x 386 @ 386 x 330:
 * 6.52 where 14.26 is right). A threaded build is set to one thread when loaded. */
#define _GNU_SOURCE /* RTLD_* */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cpu/cblas_call.h"
#include "ops/cpu/gemm_engine.h"

typedef void (*set_num_threads_fn)(int);
typedef char *(*get_config_fn)(void);

static struct {
  pthread_once_t once;
  void *lib;
  tg_cblas_sgemm_fn sgemm;
  tg_cblas_dgemm_fn dgemm;
  char version[32];
  pthread_mutex_t lock;
} openblas = {PTHREAD_ONCE_INIT, NULL, NULL, NULL, "", PTHREAD_MUTEX_INITIALIZER};

static void *open_first(void) {
  const char *pinned = getenv("TG_OPENBLAS_LIBRARY");
  if (pinned) return pinned[0] && strcmp(pinned, "off") != 0 ? dlopen(pinned, RTLD_NOW) : NULL;
  void *lib = dlopen("/usr/lib/x86_64-linux-gnu/openblas-serial/libopenblas.so.0", RTLD_NOW);
  return lib ? lib : dlopen("libopenblas.so.0", RTLD_NOW);
}

static void load_once(void) {
  void *lib = open_first();
  if (!lib) return;
  tg_cblas_sgemm_fn s = (tg_cblas_sgemm_fn)(uintptr_t)dlsym(lib, "cblas_sgemm");
  tg_cblas_dgemm_fn d = (tg_cblas_dgemm_fn)(uintptr_t)dlsym(lib, "cblas_dgemm");
  get_config_fn config = (get_config_fn)(uintptr_t)dlsym(lib, "openblas_get_config");
  set_num_threads_fn threads =
      (set_num_threads_fn)(uintptr_t)dlsym(lib, "openblas_set_num_threads");
  if (!s || !d || !config || !threads) { /* not an OpenBLAS library */
    dlclose(lib);
    return;
  }
  threads(1);
  /* "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Zen MAX_THREADS=64": the number. */
  const char *text = config();
  const char *v = text && strncmp(text, "OpenBLAS ", 9) == 0 ? text + 9 : "unknown";
  snprintf(openblas.version, sizeof openblas.version, "%.*s", (int)strcspn(v, " "), v);
  openblas.sgemm = s;
  openblas.dgemm = d;
  openblas.lib = lib;
}

bool tg__openblas_available(void) {
  pthread_once(&openblas.once, load_once);
  return openblas.lib != NULL;
}

const char *tg__openblas_version(void) {
  return tg__openblas_available() ? openblas.version : NULL;
}

bool tg__openblas_takes(const tg_gemm_problem *p) {
  tg_cblas_call call;
  return p->threads <= 1 && tg__openblas_available() && tg__cblas_call_of(p, &call);
}

bool tg__openblas_gemm(const tg_gemm_problem *p) {
  tg_cblas_call call;
  if (!tg__openblas_available() || !tg__cblas_call_of(p, &call)) return false;
  pthread_mutex_lock(&openblas.lock);
  tg__cblas_run(p, &call, openblas.sgemm, openblas.dgemm);
  pthread_mutex_unlock(&openblas.lock);
  return true;
}
