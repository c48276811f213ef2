/* The GEMM engines this process can run, listed once: BLIS's own kernel set, the other BLIS
 * sets worth trying that the CPU executes (through their contexts: needs BLIS linked
 * statically, blis_kernels.c), each of those sets again with its products always packed,
 * libxsmm (when tg is built with it), MKL and OpenBLAS (when found at run time). Each takes a
 * tg_gemm_problem or says it does not.
 *
 * Why packed twins: BLIS 0.9 sends a product with a dimension under its thresholds to its
 * small/unpacked ("sup") kernels, which win for skinny products and lose up to 2.5x for others.
 * Measured on the Zen 3 guest, one thread, all four layouts, 876 shapes from 32 to 2048 a side:
 * sup 0.5x-0.6x the packed time where m or n is 32, 2.0x-2.5x at 1024 x 1024 x 64 and
 * 256 x 1024 x 256, and no rule on m, n and k separated the two (layout mattered as much). GPT's
 * weight gradients (256 x 1024 x 2048, a^T b) ran at 41 GF/s in sup and 77 packed (two runs,
 * OpenBLAS at 86 and 78 in them: README "GEMM engines chosen per CPU"). So
 * whether a set packs is measured like everything else: its twin is another engine. */
#include <blis.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "ops/cpu/blis_kernels.h"
#include "ops/cpu/cpu_internal.h"
#include "ops/cpu/gemm_engine.h"
#include "ops/cpu/thread_pool.h"

#if TG_WITH_XSMM
#include <libxsmm.h>
#endif

static struct {
  pthread_once_t once;
  int count;
  tg_gemm_engine list[TG_GEMM_MAX_ENGINES];
} engines = {PTHREAD_ONCE_INIT, 0, {{{0}, 0, NULL, false}}};

static void add(const char *name, tg_gemm_engine_kind kind, void *cntx, bool packed) {
  if (engines.count == TG_GEMM_MAX_ENGINES) return;
  tg_gemm_engine *e = &engines.list[engines.count++];
  snprintf(e->name, sizeof e->name, "%s", name);
  e->kind = kind;
  e->blis_cntx = cntx;
  e->blis_packed = packed;
}

/* The BLIS sets with fast x86-64 kernels; the older ones (sandybridge, penryn, the FMA4
 * families) lose to these wherever these run. */
static const char *const blis_candidates[] = {"haswell", "zen3", "skx"};

static void list_once(void) {
  char name[24];
  const char *own = tg_blis_kernels(); /* after tg_cpu_blis_ready: never NULL here */
  snprintf(name, sizeof name, "blis-%s", own ? own : "?");
  add(name, TG_GEMM_ENGINE_BLIS, NULL, false);
  if (!tg_cpu_blis_pinned()) { /* a pinned BLIS_ARCH_TYPE means that set, alone */
    const tg_cpu_features f = tg_cpu_features_read();
    for (size_t i = 0; i < sizeof blis_candidates / sizeof blis_candidates[0]; i++) {
      if ((own && strcmp(own, blis_candidates[i]) == 0) ||
          !tg__blis_can_run(&f, blis_candidates[i]))
        continue;
      void *cntx = tg__blis_context_named(blis_candidates[i]);
      snprintf(name, sizeof name, "blis-%s", blis_candidates[i]);
      if (cntx) add(name, TG_GEMM_ENGINE_BLIS, cntx, false);
    }
    const int sets = engines.count;
    for (int i = 0; i < sets; i++) {
      snprintf(name, sizeof name, "%s-packed", engines.list[i].name);
      add(name, TG_GEMM_ENGINE_BLIS, engines.list[i].blis_cntx, true);
    }
#if TG_WITH_XSMM
    add("libxsmm", TG_GEMM_ENGINE_XSMM, NULL, false);
#endif
    if (tg__mkl_available()) add("mkl", TG_GEMM_ENGINE_MKL, NULL, false);
    if (tg__openblas_available()) add("openblas", TG_GEMM_ENGINE_OPENBLAS, NULL, false);
  }
}

static void ensure_listed(void) { pthread_once(&engines.once, list_once); }

int tg__gemm_engine_count(void) {
  ensure_listed();
  return engines.count;
}

const tg_gemm_engine *tg__gemm_engine_at(int index) {
  ensure_listed();
  return index >= 0 && index < engines.count ? &engines.list[index] : NULL;
}

int tg__gemm_engine_named(const char *name) {
  ensure_listed();
  for (int i = 0; i < engines.count; i++)
    if (strcmp(engines.list[i].name, name) == 0) return i;
  return -1;
}

static void run_blis(void *cntx, bool packed, const tg_gemm_problem *p) {
  rntm_t rntm = BLIS_RNTM_INITIALIZER;
  bli_rntm_set_num_threads(1, &rntm);
  if (packed) bli_rntm_disable_l3_sup(&rntm);
  if (p->dtype == TG_F32) {
    float al = (float)p->alpha, be = (float)p->beta;
    bli_sgemm_ex(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, p->m, p->n, p->k, &al, (float *)p->a,
                 p->a_rs, p->a_cs, (float *)p->b, p->b_rs, p->b_cs, &be, (float *)p->c, p->c_rs,
                 p->c_cs, cntx, &rntm);
  } else {
    double al = p->alpha, be = p->beta;
    bli_dgemm_ex(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, p->m, p->n, p->k, &al, (double *)p->a,
                 p->a_rs, p->a_cs, (double *)p->b, p->b_rs, p->b_cs, &be, (double *)p->c, p->c_rs,
                 p->c_cs, cntx, &rntm);
  }
}

/* libxsmm (1.17, Debian's libxsmm-dev), where tg is built with it. Measured on Zen 4, 1 thread
 * (bench/gemm_engines.c): the LLTM's backward products at 16 x 32 x 128 take 16.7-17.9 us
 * against BLIS haswell's 19.5-20.0; at 256 x 1024 x 1024 it falls to 32 GF/s where k is 3072
 * (no cache blocking). Its kernels run one thread.
 *
 * libxsmm is column-major and takes C = A @ op(B), A not transposed: the row-major
 * out[M, N] = a[M, K] @ b[K, N] is out^T = b^T @ a^T, so b and out need unit column stride
 * and a a unit column stride (B') or a unit row stride (TRANS_B). alpha 1, beta 0 or 1. */
static bool xsmm_takes(const tg_gemm_problem *p) {
#if TG_WITH_XSMM
  if (p->alpha != 1 || (p->beta != 0 && p->beta != 1) || p->c_cs != 1 || p->b_cs != 1) return false;
  if (p->m > INT_MAX || p->n > INT_MAX || p->k > INT_MAX || p->c_rs > INT_MAX ||
      p->b_rs > INT_MAX || p->a_rs > INT_MAX || p->a_cs > INT_MAX)
    return false;
  const bool a_rows = p->a_cs == 1 && p->a_rs >= p->k, a_cols = p->a_rs == 1 && p->a_cs >= p->m;
  return (a_rows || a_cols) && p->b_rs >= p->n && p->c_rs >= p->n;
#else
  (void)p;
  return false;
#endif
}

/* After xsmm_takes. false: libxsmm had no kernel (nothing written). */
static bool run_xsmm(const tg_gemm_problem *p) {
#if TG_WITH_XSMM
  int flags = LIBXSMM_GEMM_FLAG_NONE, prefetch = LIBXSMM_PREFETCH_NONE;
  libxsmm_blasint lda = (libxsmm_blasint)p->b_rs, ldc = (libxsmm_blasint)p->c_rs, ldb;
  if (p->a_cs == 1 && p->a_rs >= p->k) {
    ldb = (libxsmm_blasint)p->a_rs;
  } else {
    ldb = (libxsmm_blasint)p->a_cs;
    flags |= LIBXSMM_GEMM_FLAG_TRANS_B;
  }
  const libxsmm_blasint mm = (libxsmm_blasint)p->n, nn = (libxsmm_blasint)p->m,
                        kk = (libxsmm_blasint)p->k;
  if (p->dtype == TG_F32) {
    const float al = 1, be = (float)p->beta;
    libxsmm_smmfunction f =
        libxsmm_smmdispatch(mm, nn, kk, &lda, &ldb, &ldc, &al, &be, &flags, &prefetch);
    if (!f) return false;
    f((const float *)p->b, (const float *)p->a, (float *)p->c);
  } else {
    const double al = 1, be = p->beta;
    libxsmm_dmmfunction f =
        libxsmm_dmmdispatch(mm, nn, kk, &lda, &ldb, &ldc, &al, &be, &flags, &prefetch);
    if (!f) return false;
    f((const double *)p->b, (const double *)p->a, (double *)p->c);
  }
  return true;
#else
  (void)p;
  return false;
#endif
}

static bool takes(const tg_gemm_engine *e, const tg_gemm_problem *p) {
  switch (e->kind) {
  case TG_GEMM_ENGINE_BLIS:
    return true;
  case TG_GEMM_ENGINE_XSMM:
    return xsmm_takes(p);
  case TG_GEMM_ENGINE_MKL:
    return tg__mkl_takes(p);
  case TG_GEMM_ENGINE_OPENBLAS:
    return tg__openblas_takes(p);
  }
  return false;
}

/* One thread, after takes(). Where libxsmm has no kernel for the sizes, BLIS's own set runs
 * the product (nothing was written): a block of a split product must not fail alone. */
static void run_one(const tg_gemm_engine *e, const tg_gemm_problem *p) {
  switch (e->kind) {
  case TG_GEMM_ENGINE_BLIS:
    run_blis(e->blis_cntx, e->blis_packed, p);
    return;
  case TG_GEMM_ENGINE_XSMM:
    if (!run_xsmm(p)) run_blis(NULL, false, p);
    return;
  case TG_GEMM_ENGINE_MKL:
    tg__mkl_gemm(p);
    return;
  case TG_GEMM_ENGINE_OPENBLAS:
    tg__openblas_gemm(p);
    return;
  }
}

/* ---- more than one thread: blocks of out on tg's thread pool ----
 * Every engine runs one thread per call; a product for a team is split into one block of
 * out's rows (or columns, whichever of m and n is longer: the other operand, read whole by
 * each block, is then the smaller) per thread, each block a one-thread product on the pool.
 * Engines' own OpenMP teams are not used: their idle threads spin after each product (libgomp
 * polls for milliseconds) on the core tg's pool needs for the element-wise pass that comes
 * next, and their joins wait for a descheduled member; the pool's join does not (the caller
 * runs a block nobody started). Measured on Zen 3 (2 cores) against BLIS's own 2-thread team,
 * see gemm_classes.c's neighbour, README "GEMM engines chosen per CPU". */
typedef struct split_job {
  const tg_gemm_engine *engine;
  const tg_gemm_problem *p;
  bool by_rows;
  int64_t block;
} split_job;

/* Block boundaries are multiples of 16 rows or columns (a cache line of F32 out). */
#define TG_GEMM_SPLIT_ALIGN 16

/* Block `chunk` of j's product as a one-thread product; false past the end. */
static bool block_problem(const split_job *j, int64_t chunk, tg_gemm_problem *q) {
  *q = *j->p;
  q->threads = 1;
  const int64_t begin = chunk * j->block, total = j->by_rows ? q->m : q->n;
  const int64_t len = begin + j->block < total ? j->block : total - begin;
  const size_t elsize = q->dtype == TG_F32 ? sizeof(float) : sizeof(double);
  if (len <= 0) return false;
  if (j->by_rows) {
    q->m = len;
    q->c += (size_t)(begin * q->c_rs) * elsize;
    q->a += (size_t)(begin * q->a_rs) * elsize;
  } else {
    q->n = len;
    q->c += (size_t)(begin * q->c_cs) * elsize;
    q->b += (size_t)(begin * q->b_cs) * elsize;
  }
  return true;
}

static void run_block(int64_t chunk, void *arg) {
  split_job *j = arg;
  tg_gemm_problem q;
  if (block_problem(j, chunk, &q)) run_one(j->engine, &q);
}

/* How p splits: one block of out's rows (or columns) per thread; the number of blocks. */
static int64_t plan_split(const tg_gemm_engine *e, const tg_gemm_problem *p, split_job *j) {
  const bool by_rows = p->m >= p->n;
  const int64_t total = by_rows ? p->m : p->n;
  int64_t parts = p->threads > 1 ? p->threads : 1;
  int64_t block = (total + parts - 1) / parts;
  block = (block + TG_GEMM_SPLIT_ALIGN - 1) / TG_GEMM_SPLIT_ALIGN * TG_GEMM_SPLIT_ALIGN;
  *j = (split_job){e, p, by_rows, block};
  return (total + block - 1) / block;
}

static void run_split(const tg_gemm_engine *e, const tg_gemm_problem *p) {
  split_job j;
  const int64_t parts = plan_split(e, p, &j);
  if (parts <= 1)
    run_one(e, p);
  else
    tg_cpu_parallel_for(parts, run_block, &j);
}

tg_gemm_problem tg__gemm_block_of(const tg_gemm_problem *p) {
  split_job j;
  tg_gemm_problem q = *p;
  q.threads = 1;
  if (p->threads > 1 && plan_split(NULL, p, &j) > 1) block_problem(&j, 0, &q);
  return q;
}

bool tg__gemm_engine_takes(int index, const tg_gemm_problem *p) {
  const tg_gemm_engine *e = tg__gemm_engine_at(index);
  return e && takes(e, p);
}

bool tg__gemm_engine_run(int index, const tg_gemm_problem *p) {
  const tg_gemm_engine *e = tg__gemm_engine_at(index);
  if (!e || !takes(e, p)) return false;
  if (p->threads > 1)
    run_split(e, p);
  else
    run_one(e, p);
  return true;
}

void tg__gemm_engine_versions(char *buf, size_t size) {
  const char *mkl = tg__mkl_version(), *openblas = tg__openblas_version();
#if TG_WITH_XSMM
  const char *xsmm = "libxsmm " LIBXSMM_CONFIG_VERSION;
#else
  const char *xsmm = "no libxsmm";
#endif
  snprintf(buf, size, "BLIS %s, %s, %s%s, %s%s", bli_info_get_version_str(), xsmm,
           mkl ? "MKL " : "no MKL", mkl ? mkl : "", openblas ? "OpenBLAS " : "no OpenBLAS",
           openblas ? openblas : "");
}

const char *tg_small_gemm_engine(void) {
  if (tg_cpu_blis_ready("tg_small_gemm_engine") != TG_OK) return NULL;
  return tg__gemm_engine_named("libxsmm") >= 0 ? "libxsmm" : NULL;
}
