/* No BLIS read leaves memory tg owns, on every kernel set this CPU executes.
 *
 * BLIS 0.9's haswell/zen small-matrix kernels read past their operands (flame/blis#635,
 * #821); tg pads every CPU storage and copies operands that lack the room
 * (src/ops/cpu/cpu_gemm.c). Here an allocator ends every storage exactly at a PROT_NONE page,
 * so any read past what tg allocated faults, and GEMMs of many shapes and layouts and the
 * LLTM (fused and composed, forward and backward, 1 and 2 threads) run under it, once per
 * kernel set: each Criterion test is its own process, and sets BLIS_ARCH_TYPE before
 * anything starts BLIS. Results are checked too, against a plain loop and across the paths. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ops/cpu/blis_kernels.h"
#include "ops/cpu/gemm_engine.h"
#include "ops/cpu/cpu_lltm_avx2.h"
#include "testutil.h"

/* ---- an allocator whose blocks end at a guard page ---- */

static size_t page_size(void) { return (size_t)sysconf(_SC_PAGESIZE); }

static void *guard_alloc(void *ctx, size_t nbytes) {
  (void)ctx;
  const size_t page = page_size(), body = (nbytes + page - 1) / page * page;
  char *base = mmap(NULL, body + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) return NULL;
  if (mprotect(base + body, page, PROT_NONE) != 0) {
    munmap(base, body + page);
    return NULL;
  }
  return base + body - nbytes; /* the block's last byte touches the guard page */
}

static void guard_free(void *ctx, void *ptr, size_t nbytes) {
  (void)ctx;
  const size_t page = page_size(), body = (nbytes + page - 1) / page * page;
  munmap((char *)ptr + nbytes - body, body + page);
}

static const tg_allocator guard_allocator = {"guard-page", guard_alloc, guard_free, NULL};

/* ---- choosing the kernel set ---- */

/* Starts BLIS with kernel set `id`, or skips the test when this CPU cannot execute it. */
static void use_kernel_set(const char *id, const char *name) {
  if (id)
    cr_assert_eq(setenv("BLIS_ARCH_TYPE", id, 1), 0);
  else
    unsetenv("BLIS_ARCH_TYPE");
  const char *in_use = tg_blis_kernels();
  if (!in_use) {
    char why[600];
    snprintf(why, sizeof why, "%s", tg_last_error_message());
    if (strstr(why, "lacks")) {
      tg_clear_error();
      cr_skip_test("this CPU cannot execute BLIS's %s kernels: %s", name, why);
    }
    cr_assert_fail("kernel set %s: %s", name, why);
  }
  if (name) cr_assert_str_eq(in_use, name);
  cr_log_info("BLIS kernels: %s (chosen by %s)", in_use, tg_blis_kernels_source());
  tg_set_allocator(TG_CPU, &guard_allocator);
}

/* ---- GEMMs against a plain loop ---- */

/* A [rows, cols] operand holding values from seed: contiguous, or the transpose of a
 * contiguous [cols, rows] tensor (transposed), or a view ending at its storage's last
 * element whose rows lie `ld` elements apart (ld > cols: a narrow of a wider tensor). */
static tg_tensor *operand(int64_t rows, int64_t cols, bool transposed, int64_t ld, tg_dtype dtype,
                          uint64_t seed) {
  tg_options o = {.dtype = dtype};
  tg_manual_seed(seed);
  if (transposed) return tg_t(tg_uniform(TG_SHAPE(cols, rows), -1, 1, o, NULL));
  if (ld > cols)
    return tg_narrow(tg_uniform(TG_SHAPE(rows, ld), -1, 1, o, NULL), 1, ld - cols, cols);
  return tg_uniform(TG_SHAPE(rows, cols), -1, 1, o, NULL);
}

/* t as a contiguous row-major F64 array (owned by the current scope). */
static const double *values_of(const tg_tensor *t) {
  tg_tensor *c = tg_contiguous(tg_to_dtype(t, TG_F64));
  cr_assert(c, "%s", tg_last_error_message());
  return tg_data_ptr(c);
}

/* mm(a, b) against a plain loop, to a tolerance that grows with k. */
static void check_mm(const tg_tensor *a, const tg_tensor *b, tg_dtype dtype) {
  cr_assert(a && b, "%s", tg_last_error_message());
  tg_tensor *c = tg_mm(a, b);
  cr_assert(c, "%s", tg_last_error_message());
  const int64_t m = tg_size(a, 0), k = tg_size(a, 1), n = tg_size(b, 1);
  const double *av = values_of(a), *bv = values_of(b), *cv = values_of(c);
  const double tol = (dtype == TG_F32 ? 1e-5 : 1e-12) * (double)(k + 1);
  for (int64_t i = 0; i < m; i++) {
    for (int64_t j = 0; j < n; j++) {
      double want = 0;
      for (int64_t p = 0; p < k; p++) want += av[i * k + p] * bv[p * n + j];
      if (fabs(cv[i * n + j] - want) > tol)
        cr_assert_fail("mm [%ld x %ld] @ [%ld x %ld]: element (%ld, %ld) is %g, want %g", (long)m,
                       (long)k, (long)k, (long)n, (long)i, (long)j, cv[i * n + j], want);
    }
  }
}

static int64_t gemm_cases;

/* [m, k] @ [k, n] with the given layouts and leading dimensions (0: the row length). */
static void mm_case(int64_t m, int64_t k, int64_t n, bool at, int64_t lda, bool bt, int64_t ldb,
                    tg_dtype dtype) {
  tg_scope sc = tg_scope_begin();
  const uint64_t seed = (uint64_t)gemm_cases * 2 + 1;
  tg_tensor *a = operand(m, k, at, lda, dtype, seed);
  tg_tensor *b = operand(k, n, bt, ldb, dtype, seed + 1);
  check_mm(a, b, dtype);
  tg_scope_end(sc);
  gemm_cases++;
}

/* Every (m, n, k) of a set of edge sizes (around the kernels' 6/8/16 blockings), every
 * operand layout; F32 (where the known over-reads are) and fewer sizes in F64. */
static void gemm_sweep(void) {
  static const int64_t f32_dims[] = {1, 2, 3, 7, 16, 17, 33, 65}, f64_dims[] = {1, 3, 7, 17, 33};
  for (int dt = 0; dt < 2; dt++) {
    const int64_t *dims = dt ? f64_dims : f32_dims;
    const int nd = dt ? 5 : 8;
    for (int im = 0; im < nd; im++)
      for (int in = 0; in < nd; in++)
        for (int ik = 0; ik < nd; ik++)
          for (int layout = 0; layout < 4; layout++)
            mm_case(dims[im], dims[ik], dims[in], layout & 1, 0, layout & 2, 0,
                    dt ? TG_F64 : TG_F32);
  }
}

/* Rows longer than the storage pad covers (16 KiB): the operand itself is copied. And
 * operands whose leading dimension is wider than their rows, ending at the storage end. */
static void gemm_wide_rows(void) {
  static const int64_t ms[] = {1, 2, 7, 13};
  for (int dt = 0; dt < 2; dt++) {
    const tg_dtype dtype = dt ? TG_F64 : TG_F32;
    const int64_t k = dt ? 2100 : 4200; /* rows of 16.4 KiB */
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) {
      mm_case(ms[i], k, 17, false, 0, false, 0, dtype);
      mm_case(ms[i], k, 17, false, 0, true, 0, dtype);
      mm_case(17, k, ms[i], true, 0, true, 0, dtype);
      mm_case(ms[i], 40, 33, false, k, false, 0, dtype);
      mm_case(33, 40, ms[i], false, 0, false, k, dtype);
    }
  }
}

/* Products of at least 2^22 multiply-adds (TG_BLIS_LARGE_MIN_MACS), which may run a second
 * kernel set: every layout, edge sizes on the 16/32 blockings. */
static void gemm_large(void) {
  static const int64_t dims[][3] = {{160, 170, 161}, {33, 386, 330}, {257, 129, 127}};
  for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
    for (int layout = 0; layout < 4; layout++)
      mm_case(dims[i][0], dims[i][1], dims[i][2], layout & 1, 0, layout & 2, 0, TG_F32);
  mm_case(160, 170, 161, false, 0, true, 0, TG_F64);
  /* A column-major left operand of 256+ rows and k < 256, which BLIS gets as a row-major
   * copy (cpu_gemm.c), on two threads and on one. */
  for (int threads = 2; threads >= 1; threads--) {
    tg_set_num_threads(threads);
    mm_case(300, 100, 200, true, 0, false, 0, TG_F32);
    mm_case(300, 100, 200, true, 0, true, 0, TG_F64);
  }
  tg_set_num_threads(0);
}

/* ---- the LLTM, fused against composed, forward and backward ---- */

typedef tg_status (*lltm_fn)(const tg_tensor *, const tg_tensor *, const tg_tensor *,
                             const tg_tensor *, const tg_tensor *, tg_tensor **, tg_tensor **);

/* new_h, new_cell and the five gradients of sum(new_h) + sum(new_cell). */
static void lltm_run(lltm_fn fn, tg_tensor *const in[5], tg_tensor *out[7]) {
  cr_assert_eq(fn(in[0], in[1], in[2], in[3], in[4], &out[0], &out[1]), TG_OK, "%s",
               tg_last_error_message());
  const tg_tensor *roots[1] = {tg_add(tg_sum(out[0]), tg_sum(out[1]))};
  cr_assert(roots[0], "%s", tg_last_error_message());
  cr_assert_eq(tg_autograd_grad(1, roots, NULL, 5, (const tg_tensor *const *)in, out + 2,
                                (tg_backward_options){0}, true),
               TG_OK, "%s", tg_last_error_message());
}

static int64_t lltm_cases;

static void lltm_case(int64_t B, int64_t I, int64_t S, tg_dtype dtype) {
  tg_scope sc = tg_scope_begin();
  const tg_options o = {.dtype = dtype};
  tg_manual_seed((uint64_t)(B * 1000003 + I * 1009 + S));
  tg_tensor *in[5] = {tg_uniform(TG_SHAPE(B, I), -2, 2, o, NULL),
                      tg_uniform(TG_SHAPE(3 * S, I + S), -0.3, 0.3, o, NULL),
                      tg_uniform(TG_SHAPE(3 * S), -0.3, 0.3, o, NULL),
                      tg_uniform(TG_SHAPE(B, S), -2, 2, o, NULL),
                      tg_uniform(TG_SHAPE(B, S), -2, 2, o, NULL)};
  for (int i = 0; i < 5; i++) {
    cr_assert(in[i], "%s", tg_last_error_message());
    cr_assert_eq(tg_set_requires_grad(in[i], true), TG_OK);
  }
  tg_tensor *fused[7], *composed[7];
  lltm_run(tg_lltm, in, fused);
  lltm_run(tg_lltm_composed, in, composed);
  const double rtol = dtype == TG_F32 ? 1e-4 : 1e-10;
  for (int i = 0; i < 7; i++) {
    double scale = tg_test_max_abs_diff(composed[i], tg_zeros_like(composed[i]));
    tg_assert_close(fused[i], composed[i], rtol, rtol * scale + 1e-30);
  }
  tg_scope_end(sc);
  lltm_cases++;
}

/* 40 sizes from a fixed generator (batch 1-70, input 1-300, state 1-200) on 1 and 2 threads,
 * F32, and a few in F64; the sizes that faulted with the haswell kernels among them. */
static void lltm_sweep(void) {
  uint64_t x = 12345;
  for (int i = 0; i < 40; i++) {
    x = x * 6364136223846793005u + 1442695040888963407u;
    const int64_t B = 1 + (int64_t)((x >> 33) % 70), I = 1 + (int64_t)((x >> 13) % 300),
                  S = 1 + (int64_t)((x >> 43) % 200);
    tg_set_num_threads(1 + i % 2);
    lltm_case(B, I, S, i % 8 == 0 ? TG_F64 : TG_F32);
  }
  tg_set_num_threads(2);
  lltm_case(64, 900 - 256, 256, TG_F32); /* the gate GEMM 64 x 900 x 768 */
  lltm_case(16, 32, 128, TG_F32);        /* the tutorial's size */
  tg_set_num_threads(0);
}

static void run_all(const char *id, const char *name) {
  use_kernel_set(id, name);
  gemm_sweep();
  gemm_wide_rows();
  gemm_large();
  lltm_sweep();
  cr_log_info("%s: %ld GEMM cases, %ld LLTM cases, no read outside tg's memory",
              name ? name : "default", (long)gemm_cases, (long)lltm_cases);
  tg_set_allocator(TG_CPU, NULL);
}

TG_TEST(blis_guard, default_choice) { run_all(NULL, NULL); }
/* tg's choice for small GEMMs and skx for large ones, in one process (as on Intel CPUs with
 * AVX-512), on any CPU that executes skx. */
TG_TEST(blis_guard, skx_for_large_gemms) {
  tg_cpu_features f = tg_cpu_features_read();
  if (!tg__blis_can_run(&f, "skx")) cr_skip_test("this CPU cannot execute BLIS's skx kernels");
  tg__blis_prefer_large_kernels("skx");
  run_all(NULL, NULL);
#if TG_BLIS_CONTEXTS
  if (strcmp(tg_blis_kernels(), "skx") != 0) cr_assert_str_eq(tg_blis_large_kernels(), "skx");
#endif
}
/* ---- every engine the GEMM choice can pick (src/ops/cpu/gemm_choice.c) ---- */

/* Pins TG_GEMM_ENGINE to name before the first GEMM, or skips where this process lacks it. */
static void pin_engine(const char *name) {
  cr_assert_eq(setenv("TG_GEMM_ENGINE", name, 1), 0);
  unsetenv("BLIS_ARCH_TYPE");
  if (tg_blis_kernels() && tg__gemm_engine_named(name) < 0)
    cr_skip_test("this process has no GEMM engine %s (it depends on the CPU and the build)", name);
  cr_assert_str_eq(tg_gemm_engine_source(), "TG_GEMM_ENGINE", "%s", tg_last_error_message());
}

TG_TEST(blis_guard, engine_blis_haswell) {
  pin_engine("blis-haswell");
  run_all(NULL, NULL);
}
TG_TEST(blis_guard, engine_blis_zen3) {
  pin_engine("blis-zen3");
  run_all(NULL, NULL);
}
TG_TEST(blis_guard, engine_blis_skx) {
  pin_engine("blis-skx");
  run_all(NULL, NULL);
}
/* The same sets with BLIS's small/unpacked path off (every product packed). */
TG_TEST(blis_guard, engine_blis_haswell_packed) {
  pin_engine("blis-haswell-packed");
  run_all(NULL, NULL);
}
TG_TEST(blis_guard, engine_blis_zen3_packed) {
  pin_engine("blis-zen3-packed");
  run_all(NULL, NULL);
}
TG_TEST(blis_guard, engine_blis_skx_packed) {
  pin_engine("blis-skx-packed");
  run_all(NULL, NULL);
}
TG_TEST(blis_guard, engine_libxsmm) {
  pin_engine("libxsmm");
  run_all(NULL, NULL);
}
/* MKL from TG_MKL_LIBRARY, $VIRTUAL_ENV, or the PyTorch venv the benchmarks use. */
TG_TEST(blis_guard, engine_mkl) {
  if (!getenv("TG_MKL_LIBRARY")) {
    char path[512];
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(path, sizeof path, "%s/torchvenv/lib/libmkl_rt.so.3", tmp);
    if (access(path, R_OK) == 0) setenv("TG_MKL_LIBRARY", path, 1);
  }
  pin_engine("mkl");
  run_all(NULL, NULL);
}
/* OpenBLAS from TG_OPENBLAS_LIBRARY, Debian's libopenblas0-serial or libopenblas.so.0. */
TG_TEST(blis_guard, engine_openblas) {
  pin_engine("openblas");
  run_all(NULL, NULL);
}
/* The calibrated choice (at tiny shapes: any engine may win any class). */
TG_TEST(blis_guard, engine_calibrated) {
  cr_assert_eq(setenv("TG_GEMM_ENGINE", "auto", 1), 0);
  cr_assert_eq(setenv("TG_GEMM_CACHE", "off", 1), 0);
  tg__gemm_calibration_quick(true);
  cr_assert_str_eq(tg_gemm_engine_source(), "calibrated", "%s", tg_last_error_message());
  run_all(NULL, NULL);
}

/* The LLTM's cell passes on each of their F32 spans (cpu_lltm_avx2.h: the AVX2 ones read
 * whole vectors and copy tails), whichever this CPU would choose. */
static void lltm_cell_path(tg_cpu_lltm_cell_path path) {
  if (!tg_cpu_lltm_set_cell_path(path)) cr_skip_test("this CPU has no AVX2 + FMA");
  use_kernel_set(NULL, NULL);
  lltm_sweep();
  tg_set_allocator(TG_CPU, NULL);
  tg_cpu_lltm_set_cell_path(TG_CPU_LLTM_CELL_AUTO);
}
TG_TEST(blis_guard, lltm_avx2_cell) { lltm_cell_path(TG_CPU_LLTM_CELL_AVX2); }
TG_TEST(blis_guard, lltm_portable_cell) { lltm_cell_path(TG_CPU_LLTM_CELL_PORTABLE); }
TG_TEST(blis_guard, skx) { run_all("0", "skx"); }
TG_TEST(blis_guard, knl) { run_all("1", "knl"); }
TG_TEST(blis_guard, haswell) { run_all("3", "haswell"); }
TG_TEST(blis_guard, sandybridge) { run_all("4", "sandybridge"); }
TG_TEST(blis_guard, penryn) { run_all("5", "penryn"); }
TG_TEST(blis_guard, zen3) { run_all("6", "zen3"); }
TG_TEST(blis_guard, zen2) { run_all("7", "zen2"); }
TG_TEST(blis_guard, zen) { run_all("8", "zen"); }
TG_TEST(blis_guard, excavator) { run_all("9", "excavator"); }
TG_TEST(blis_guard, steamroller) { run_all("10", "steamroller"); }
TG_TEST(blis_guard, piledriver) { run_all("11", "piledriver"); }
TG_TEST(blis_guard, bulldozer) { run_all("12", "bulldozer"); }
TG_TEST(blis_guard, generic) { run_all("25", "generic"); }
