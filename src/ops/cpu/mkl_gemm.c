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
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cpu/gemm_engine.h"

enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };
enum { MKL_THREADING_GNU = 3 }; /* MKL_Set_Threading_Layer's value for GNU OpenMP */

typedef void (*sgemm_fn)(int, int, int, int, int, int, float, const float *, int, const float *,
                         int, float, float *, int);
typedef void (*dgemm_fn)(int, int, int, int, int, int, double, const double *, int, const double *,
                         int, double, double *, int);
typedef int (*set_threads_local_fn)(int);
typedef int (*set_threading_layer_fn)(int);
typedef void (*version_fn)(char *, int);

static struct {
  pthread_once_t once;
  void *lib;
  sgemm_fn sgemm;
  dgemm_fn dgemm;
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
  sgemm_fn s = (sgemm_fn)(uintptr_t)dlsym(lib, "cblas_sgemm");
  dgemm_fn d = (dgemm_fn)(uintptr_t)dlsym(lib, "cblas_dgemm");
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

static bool fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

/* A row-major operand (unit column stride) or a transposed one (unit row stride). */
static bool blas_layout(int64_t rs, int64_t cs, int64_t cols, int64_t rows, int *trans,
                        int64_t *ld) {
  if (cs == 1 && rs >= cols) {
    *trans = CBLAS_NO_TRANS;
    *ld = rs > 1 ? rs : (cols > 1 ? cols : 1);
  } else if (rs == 1 && cs >= rows) {
    *trans = CBLAS_TRANS;
    *ld = cs > 1 ? cs : (rows > 1 ? rows : 1);
  } else {
    return false;
  }
  return fits_int(*ld);
}

/* p as a row-major problem MKL's cblas takes (a column-major out transposed); false if none. */
static bool as_row_major(const tg_gemm_problem *p, tg_gemm_problem *out, int *ta, int *tb,
                         int64_t *lda, int64_t *ldb) {
  tg_gemm_problem q = *p;
  if (q.c_cs != 1) { /* a column-major out: out^T = b^T @ a^T, row-major */
    if (p->c_rs != 1) return false;
    q.m = p->n, q.n = p->m;
    q.c_rs = p->c_cs, q.c_cs = 1;
    q.a = p->b, q.a_rs = p->b_cs, q.a_cs = p->b_rs;
    q.b = p->a, q.b_rs = p->a_cs, q.b_cs = p->a_rs;
  }
  if (!fits_int(q.m) || !fits_int(q.n) || !fits_int(q.k) || !fits_int(q.c_rs) ||
      !blas_layout(q.a_rs, q.a_cs, q.k, q.m, ta, lda) ||
      !blas_layout(q.b_rs, q.b_cs, q.n, q.k, tb, ldb))
    return false;
  *out = q;
  return true;
}

bool tg__mkl_takes(const tg_gemm_problem *p) {
  tg_gemm_problem q;
  int ta, tb;
  int64_t lda, ldb;
  return tg__mkl_available() && as_row_major(p, &q, &ta, &tb, &lda, &ldb);
}

bool tg__mkl_gemm(const tg_gemm_problem *p) {
  tg_gemm_problem q;
  int ta, tb;
  int64_t lda, ldb;
  if (!tg__mkl_available() || !as_row_major(p, &q, &ta, &tb, &lda, &ldb)) return false;
  const int ldc = (int)(q.c_rs >= q.n ? q.c_rs : q.n);
  const int before = mkl.set_threads_local(1); /* tg's pool runs blocks in parallel */
  if (q.dtype == TG_F32)
    mkl.sgemm(CBLAS_ROW_MAJOR, ta, tb, (int)q.m, (int)q.n, (int)q.k, (float)q.alpha,
              (const float *)q.a, (int)lda, (const float *)q.b, (int)ldb, (float)q.beta,
              (float *)q.c, ldc);
  else
    mkl.dgemm(CBLAS_ROW_MAJOR, ta, tb, (int)q.m, (int)q.n, (int)q.k, q.alpha, (const double *)q.a,
              (int)lda, (const double *)q.b, (int)ldb, q.beta, (double *)q.c, ldc);
  mkl.set_threads_local(before);
  return true;
}
