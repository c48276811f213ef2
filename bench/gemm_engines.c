/* gemm_engines: single-precision GEMM engines at the LLTM's own shapes, in one process.
 *
 * For each B x I x S, the five products the fused LLTM runs (forward X @ W^T, backward
 * d_W = d_gates^T @ X from the transposed or the row-major d_gates, d_X = d_gates @ W from
 * either layout), timed on every engine this machine has:
 *   tg            tg_mm through the public API, grad mode off (output allocation included), on
 *                 the engine tg chose for the product's class (calibrated on first use;
 *                 TG_GEMM_ENGINE=builtin: the fixed rules), named after the ratio of tg to the best
 *   blis-<set>    BLIS's expert API with the context of one kernel set (haswell, zen3, skx
 *                 where the CPU runs them): needs BLIS linked statically (TG_BLIS_STATIC)
 *   blis-<set>-packed  the same with BLIS's small/unpacked ("sup") path off: every product
 *                 packed (tg's engines of those names)
 *   openblas      cblas_sgemm of Debian's OpenBLAS (libopenblas0-openmp), when installed
 *   libxsmm       libxsmm's JIT kernels (when tg is built with it), for the layouts it takes
 *   mkl           cblas_sgemm of MKL's libmkl_rt (pip install mkl; path in TG_BENCH_MKL,
 *                 default ${TMPDIR:-/tmp}/torchvenv/lib/libmkl_rt.so.{2,3}), when there
 * Engines alternate in rounds; each number is the median over all rounds' iterations.
 * Output: a table, and with --jsonl one JSON line per (size, product, engine).
 *
 *   gemm_engines [--sizes 16x32x128,...] [--iters N] [--rounds R] [--threads T] [--jsonl]
 *                [--engines tg,blis-haswell,...]
 * With more than one thread, run one engine per process (--engines): OpenMP teams of
 * different libraries alternating in one process disturb each other (a 2-thread 256 x 3072 x
 * 2048 product measured 10x slower interleaved than alone). */
#define _GNU_SOURCE
#include <blis.h>
#include <dlfcn.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if TG_WITH_XSMM
#include <libxsmm.h>
#endif

#include "cli_parse.h"
#include "tg/tg.h"
#include "timing.h"

typedef void (*cblas_sgemm_fn)(int, int, int, int, int, int, float, const float *, int,
                               const float *, int, float, float *, int);
enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };

/* One product: C [m, n] row-major = A @ B, A and B given by element strides into buffers. */
typedef struct product {
  const char *name;
  int64_t m, n, k;
  int64_t a_rs, a_cs, b_rs, b_cs;
} product;

typedef struct engine {
  char name[32];
  cntx_t *cntx;         /* blis-<set> */
  bool packed;          /* blis-<set>-packed: the sup path off */
  cblas_sgemm_fn cblas; /* openblas, mkl */
  bool is_tg;
  bool is_xsmm; /* libxsmm's JIT kernels directly, for the layouts it takes */
} engine;

#define MAX_ENGINES 12
static engine engines[MAX_ENGINES];
static int n_engines;
static int threads = 1;

static const char *only; /* --engines: a comma-separated list, NULL for all */

static bool wanted(const char *name) {
  if (!only) return true;
  const size_t len = strlen(name);
  for (const char *p = only; *p;) {
    const char *end = strchr(p, ',');
    const size_t n = end ? (size_t)(end - p) : strlen(p);
    if (n == len && strncmp(p, name, n) == 0) return true;
    p += n + (end ? 1 : 0);
  }
  return false;
}

static void add_engine(engine e) {
  if (n_engines < MAX_ENGINES && wanted(e.name)) engines[n_engines++] = e;
}

static void add_blis_sets(void) {
#if TG_BLIS_CONTEXTS
  bli_init();
  static const struct {
    arch_t id;
    const char *name;
  } sets[] = {{BLIS_ARCH_HASWELL, "haswell"}, {BLIS_ARCH_ZEN3, "zen3"}, {BLIS_ARCH_SKX, "skx"}};
  for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) {
    /* tg's own check of what this CPU executes, through the one public door: skip sets
     * whose instructions are missing (they would die of SIGILL). */
    if (sets[i].id == BLIS_ARCH_SKX && !__builtin_cpu_supports("avx512f")) continue;
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) continue;
    cntx_t **c = bli_gks_lookup_id(sets[i].id);
    if (!c || !c[BLIS_NAT]) continue;
    engine e = {.cntx = c[BLIS_NAT]};
    snprintf(e.name, sizeof e.name, "blis-%s", sets[i].name);
    add_engine(e);
    e.packed = true;
    snprintf(e.name, sizeof e.name, "blis-%s-packed", sets[i].name);
    add_engine(e);
  }
#else
  fprintf(stderr, "# BLIS is linked as a shared library: no per-set engines\n");
#endif
}

static void add_cblas(const char *name, const char *const *paths, const char *set_threads) {
  for (const char *const *p = paths; *p; p++) {
    void *h = dlopen(*p, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (!h) continue;
    engine e = {.cblas = (cblas_sgemm_fn)dlsym(h, "cblas_sgemm")};
    void (*set)(int) = (void (*)(int))dlsym(h, set_threads);
    if (!e.cblas) continue;
    if (set) set(threads);
    /* tg's own MKL engine (src/ops/cpu/mkl_gemm.c) loads the same library. */
    if (strcmp(name, "mkl") == 0) setenv("TG_MKL_LIBRARY", *p, 0);
    snprintf(e.name, sizeof e.name, "%s", name);
    add_engine(e);
    return;
  }
  fprintf(stderr, "# %s not found (tried %s ...)\n", name, paths[0]);
}

/* libxsmm (column-major, C = A @ op(B)) on the row-major c = a @ b: c^T = b^T @ a^T, so
 * A = b (row-major), B = a (row-major, or column-major as TRANS_B). false: not this layout. */
static bool run_xsmm(const product *p, const float *a, const float *b, float *c) {
#if TG_WITH_XSMM
  if (p->b_cs != 1 || (p->a_cs != 1 && p->a_rs != 1)) return false;
  libxsmm_blasint lda = (libxsmm_blasint)p->b_rs, ldc = (libxsmm_blasint)p->n;
  libxsmm_blasint ldb = (libxsmm_blasint)(p->a_cs == 1 ? p->a_rs : p->a_cs);
  int flags = p->a_cs == 1 ? LIBXSMM_GEMM_FLAG_NONE : LIBXSMM_GEMM_FLAG_TRANS_B;
  int prefetch = LIBXSMM_PREFETCH_NONE;
  const float one = 1, zero = 0;
  libxsmm_smmfunction f =
      libxsmm_smmdispatch((libxsmm_blasint)p->n, (libxsmm_blasint)p->m, (libxsmm_blasint)p->k, &lda,
                          &ldb, &ldc, &one, &zero, &flags, &prefetch);
  if (!f) return false;
  f(b, a, c);
  return true;
#else
  (void)p, (void)a, (void)b, (void)c;
  return false;
#endif
}

static bool run(const engine *e, const product *p, float *a, float *b, float *c, tg_tensor *ta,
                tg_tensor *tb) {
  if (e->is_xsmm) return run_xsmm(p, a, b, c);
  if (e->is_tg) {
    tg_scope s = tg_scope_begin();
    if (!tg_mm(ta, tb)) {
      fprintf(stderr, "gemm_engines: tg_mm: %s\n", tg_last_error_message());
      exit(1);
    }
    tg_scope_end(s);
  } else if (e->cblas) {
    const bool a_rows = p->a_cs == 1, b_rows = p->b_cs == 1;
    e->cblas(CBLAS_ROW_MAJOR, a_rows ? CBLAS_NO_TRANS : CBLAS_TRANS,
             b_rows ? CBLAS_NO_TRANS : CBLAS_TRANS, (int)p->m, (int)p->n, (int)p->k, 1.0f, a,
             (int)(a_rows ? p->a_rs : p->a_cs), b, (int)(b_rows ? p->b_rs : p->b_cs), 0.0f, c,
             (int)p->n);
  } else {
    float one = 1, zero = 0;
    rntm_t r = BLIS_RNTM_INITIALIZER;
    bli_rntm_set_num_threads(threads, &r);
    if (e->packed) bli_rntm_disable_l3_sup(&r);
    bli_sgemm_ex(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, p->m, p->n, p->k, &one, a, p->a_rs, p->a_cs,
                 b, p->b_rs, p->b_cs, &zero, c, p->n, 1, e->cntx, &r);
  }
  return true;
}

/* A tg tensor over `data` with the given sizes and strides (a view of a flat tensor). */
static tg_tensor *strided(tg_tensor *flat, int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  return tg_as_strided(flat, 2, (int64_t[]){rows, cols}, (int64_t[]){rs, cs}, 0);
}

static void bench_size(int64_t B, int64_t I, int64_t S, int iters, int rounds, bool jsonl) {
  const int64_t K = S + I, G = 3 * S;
  const product products[] = {
      {"fwd X@W^T", B, G, K, K, 1, 1, K},    {"dW dGt@X", G, K, B, B, 1, K, 1},
      {"dW dG^T@X", G, K, B, 1, G, K, 1},    {"dX dG@W", B, K, G, G, 1, K, 1},
      {"dX (dGt)^T@W", B, K, G, 1, B, K, 1},
  };
  const int64_t elems = (G + B) * (K + G + B) + 4096; /* covers every operand above */
  tg_options o = TG_OPTS_DEFAULT;                     /* F32 on the CPU */
  tg_scope scope = tg_scope_begin();
  tg_tensor *fa = tg_randn(1, (int64_t[]){elems}, o, NULL),
            *fb = tg_randn(1, (int64_t[]){elems}, o, NULL);
  tg_tensor *fc = tg_zeros(1, (int64_t[]){elems}, o);
  if (!fa || !fb || !fc) {
    fprintf(stderr, "gemm_engines: %s\n", tg_last_error_message());
    exit(1);
  }
  float *a = tg_data_ptr(fa), *b = tg_data_ptr(fb), *c = tg_data_ptr(fc);
  for (size_t pi = 0; pi < sizeof products / sizeof products[0]; pi++) {
    const product *p = &products[pi];
    tg_tensor *ta = strided(fa, p->m, p->k, p->a_rs, p->a_cs);
    tg_tensor *tb = strided(fb, p->k, p->n, p->b_rs, p->b_cs);
    double med[MAX_ENGINES];
    double *all = malloc(sizeof(double) * (size_t)(iters * rounds * n_engines));
    bool takes[MAX_ENGINES]; /* warm up, and which engines take this layout */
    for (int e = 0; e < n_engines; e++) takes[e] = run(&engines[e], p, a, b, c, ta, tb);
    for (int r = 0; r < rounds; r++)
      for (int e = 0; e < n_engines; e++)
        for (int i = 0; i < iters && takes[e]; i++) {
          double t0 = tg_bench_now_us();
          run(&engines[e], p, a, b, c, ta, tb);
          all[(e * rounds + r) * iters + i] = tg_bench_now_us() - t0;
        }
    int best = -1;
    for (int e = 0; e < n_engines; e++) {
      if (!takes[e]) continue;
      med[e] = tg_bench_median(all + e * rounds * iters, iters * rounds);
      if (best < 0 || med[e] < med[best]) best = e;
    }
    const double flop = 2.0 * (double)p->m * (double)p->n * (double)p->k;
    printf("%4lldx%5lldx%5lld %-13s m%5lld n%5lld k%5lld |", (long long)B, (long long)I,
           (long long)S, p->name, (long long)p->m, (long long)p->n, (long long)p->k);
    for (int e = 0; e < n_engines; e++) {
      if (!takes[e]) {
        printf(" %s %9s    %8s |", engines[e].name, "n/a", "");
        continue;
      }
      printf(" %s %9.1f us %5.1f GF%s |", engines[e].name, med[e], flop / med[e] / 1e3,
             e == best ? "*" : " ");
      if (jsonl)
        fprintf(stderr,
                "{\"batch\": %lld, \"features\": %lld, \"state\": %lld, \"product\": \"%s\", "
                "\"engine\": \"%s\", \"threads\": %d, \"us\": %.3f, \"gflops\": %.2f}\n",
                (long long)B, (long long)I, (long long)S, p->name, engines[e].name, threads, med[e],
                flop / med[e] / 1e3);
    }
    if (engines[0].is_tg)
      printf(" tg/best %.2f (tg on %s)", med[0] / med[best],
             tg_gemm_engine_for(p->m, p->n, p->k, p->a_cs != 1, p->b_cs != 1, threads));
    printf("\n");
    free(all);
  }
  tg_scope_end(scope);
}

enum { MAX_SIZES = 32 };
static const char *const me = "gemm_engines";
static const char usage[] =
    "usage: gemm_engines [--sizes BxIxS,...] [--iters N] [--rounds R] [--threads T] [--jsonl]\n"
    "                    [--engines a,b]\n"
    "Times single-precision GEMM engines at the LLTM's shapes. Defaults: sizes %s,\n"
    "20 iterations, 3 rounds, 1 thread, every engine found.\n";

/* --sizes: at most MAX_SIZES BxIxS items, each size in 1..2^24. */
static bool parse_sizes(const char *text, int64_t (*sizes)[3], int *n) {
  return cli_parse_dims_list(me, "--sizes", text, 3, 1, 1 << 24, MAX_SIZES, &sizes[0][0], n);
}

int main(int argc, char **argv) {
  const char *default_sizes = "16x32x128,64x1024x128,128x256x512,256x1024x1024";
  int64_t sizes[MAX_SIZES][3];
  int n_sizes = 0;
  int iters = 20, rounds = 3;
  bool jsonl = false;
  parse_sizes(default_sizes, sizes, &n_sizes);
  enum { SIZES = 256, ITERS, ROUNDS, THREADS, ENGINES, JSONL };
  static const struct option options[] = {{"sizes", required_argument, NULL, SIZES},
                                          {"iters", required_argument, NULL, ITERS},
                                          {"rounds", required_argument, NULL, ROUNDS},
                                          {"threads", required_argument, NULL, THREADS},
                                          {"engines", required_argument, NULL, ENGINES},
                                          {"jsonl", no_argument, NULL, JSONL},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
    bool ok = true;
    switch (c) {
    case 'h':
      printf(usage, default_sizes);
      return 0;
    case SIZES:
      ok = parse_sizes(optarg, sizes, &n_sizes);
      break;
    case ITERS:
      ok = cli_parse_int(me, "--iters", optarg, 1, 1000000, &iters);
      break;
    case ROUNDS:
      ok = cli_parse_int(me, "--rounds", optarg, 1, 1000000, &rounds);
      break;
    case THREADS:
      ok = cli_parse_int(me, "--threads", optarg, 1, 4096, &threads);
      break;
    case ENGINES:
      only = optarg;
      break;
    case JSONL:
      jsonl = true;
      break;
    default:
      return cli_usage_error(me);
    }
    if (!ok) return CLI_EXIT_USAGE;
  }
  if (optind < argc) {
    fprintf(stderr, "%s: unexpected argument '%s'\n", me, argv[optind]);
    return cli_usage_error(me);
  }
  tg_set_num_threads(threads);
  tg_set_grad_enabled(false);
  setenv("MKL_THREADING_LAYER", "GNU", 0); /* MKL on the same OpenMP runtime as the rest */
  add_engine((engine){.name = "tg", .is_tg = true});
#if TG_WITH_XSMM
  add_engine((engine){.name = "libxsmm", .is_xsmm = true});
#endif
  add_blis_sets();
  static const char *const openblas[] = {
      "/usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so.0", "libopenblas.so.0", NULL};
  add_cblas("openblas", openblas, "openblas_set_num_threads");
  char mkl2[512], mkl3[512];
  const char *venv = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  snprintf(mkl2, sizeof mkl2, "%s/torchvenv/lib/libmkl_rt.so.2", venv);
  snprintf(mkl3, sizeof mkl3, "%s/torchvenv/lib/libmkl_rt.so.3", venv);
  const char *mkl[] = {getenv("TG_BENCH_MKL") ? getenv("TG_BENCH_MKL") : mkl3, mkl3, mkl2, NULL};
  add_cblas("mkl", mkl, "MKL_Set_Num_Threads");
  if (n_engines == 0) {
    fprintf(stderr, "gemm_engines: no engine left (--engines %s)\n", only);
    return 2;
  }
  char choice[512];
  tg_gemm_engine_report(choice, sizeof choice, false);
  printf("# sgemm, %d thread(s), median us over %d rounds x %d iterations; BLIS runs %s\n# %s\n",
         threads, rounds, iters, tg_blis_kernels(), choice);
  for (int k = 0; k < n_sizes; k++)
    bench_size(sizes[k][0], sizes[k][1], sizes[k][2], iters, rounds, jsonl);
  return 0;
}
