/* The fused LLTM's AVX2 + FMA cell spans (src/ops/cpu/cpu_lltm_avx2.c): element by element
 * against the scalar cell they transcribe (ops/lltm_cell.h over cpu_vecmath.h) at every tail
 * length and at extreme and special values; no access past the arrays (each ends at a guard
 * page); the fused op with the spans forced on and off against the composed LLTM (odd sizes,
 * B = 1, S = 1, large K, zero bias, strided inputs, the transposed backward layout, two
 * threads); and the path switch (hook and TG_LLTM_CELL). Skipped where the CPU has no AVX2. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ops/cpu/cpu_features.h"
#include "ops/cpu/cpu_lltm_avx2.h"
#include "ops/cpu/cpu_vecmath.h"
#include "ops/lltm_cell.h"
#include "testutil.h"

TG_LLTM_CELL_DEFINE(float, _vf, 1.0f, tg_vf_sigmoid, tg_vf_tanh, tg_vf_elu, tg_vf_d_elu)

static void need_avx2(void) {
  if (!tg_cpu_lltm_avx2_supported()) cr_skip_test("this CPU has no AVX2 + FMA");
}

/* ---- arrays that end at a guard page ---- */

static size_t page_size(void) { return (size_t)sysconf(_SC_PAGESIZE); }

/* n floats whose last one touches a PROT_NONE page. */
static float *guarded(int64_t n) {
  const size_t page = page_size(), bytes = (size_t)n * sizeof(float);
  const size_t body = (bytes + page - 1) / page * page;
  char *base = mmap(NULL, body + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  cr_assert(base != MAP_FAILED);
  cr_assert_eq(mprotect(base + body, page, PROT_NONE), 0);
  return (float *)(base + body - bytes);
}

static void unguard(float *p, int64_t n) {
  const size_t page = page_size(), bytes = (size_t)n * sizeof(float);
  const size_t body = (bytes + page - 1) / page * page;
  munmap((char *)p + bytes - body, body + page);
}

/* ---- values ---- */

/* Pre-activations worth testing: zeros, tiny, the expm1 switch (0.3466), moderate, the exp
 * clamps and over/underflow (87-104), huge, NaN and infinities. */
static const float special[] = {0.0f,   -0.0f,    1e-30f,   -1e-30f, 1e-6f,   -1e-6f, 0.3f,
                                -0.3f,  0.3466f,  -0.3466f, 0.35f,   -0.35f,  0.5f,   -1.0f,
                                1.0f,   -5.0f,    5.0f,     -30.0f,  30.0f,   -87.0f, 87.0f,
                                -88.9f, 88.9f,    -100.0f,  100.0f,  -104.5f, 200.0f, -1000.0f,
                                NAN,    INFINITY, -INFINITY};
#define N_SPECIAL ((int)(sizeof special / sizeof special[0]))

static uint64_t rng_state = 88172645463325252u;
static float uniform(float lo, float hi) {
  rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
  return lo + (hi - lo) * (float)((rng_state >> 40) * (1.0 / 16777216.0));
}

/* Element k of a stream mixing the special values with uniform ones of [-12, 12]. */
static float value(int64_t k) {
  return k % 3 == 0 ? special[(k / 3) % N_SPECIAL] : uniform(-12, 12);
}

/* a agrees with the reference b: both NaN, or |a - b| <= rtol |b| + atol. */
static void expect_near(float a, float b, double rtol, double atol, const char *what, int64_t n,
                        int64_t j) {
  if (isnan(b)) {
    cr_assert(isnan(a), "%s, n=%lld, element %lld: %.9g, want NaN", what, (long long)n,
              (long long)j, a);
    return;
  }
  if (isinf(b)) {
    cr_assert(a == b, "%s, n=%lld, element %lld: %.9g, want %.9g", what, (long long)n, (long long)j,
              a, b);
    return;
  }
  cr_assert(fabs((double)a - b) <= rtol * fabs((double)b) + atol,
            "%s, n=%lld, element %lld: %.9g, want %.9g", what, (long long)n, (long long)j, a, b);
}

/* ---- the spans against the scalar cell ---- */

/* 8 ulp of the result for the activations (the scalar functions are within 3 ulp of the
 * correctly rounded ones, so are these); the results past a sum (new_cell, new_h, the
 * gradients) relative to their operands' scale, 1 + |result|. Subnormal results (sigmoid
 * below -87) within 1e-37. */
static const double act_rtol = 8 * 6e-8, sum_tol = 2e-6, tiny = 1e-37;

static void check_forward(int64_t n) {
  float *in[7], *out[2];
  for (int i = 0; i < 7; i++) in[i] = guarded(n);
  for (int i = 0; i < 2; i++) out[i] = guarded(n);
  float *ref[5];
  for (int i = 0; i < 5; i++) ref[i] = malloc(sizeof(float) * (size_t)n);
  for (int64_t j = 0; j < n; j++) {
    for (int i = 0; i < 7; i++) in[i][j] = value(j * 7 + i + n);
    in[3][j] = uniform(-3, 3); /* old_cell */
    tg__lltm_math_forward_vf(in[4][j] + in[0][j], in[5][j] + in[1][j], in[6][j] + in[2][j],
                             in[3][j], &ref[0][j], &ref[1][j], &ref[2][j], &ref[4][j], &ref[3][j]);
  }
  tg_cpu_lltm_avx2_forward_span(n, in[0], in[1], in[2], in[3], in[4], in[5], in[6], out[0], out[1]);
  for (int64_t j = 0; j < n; j++) {
    expect_near(in[4][j], ref[0][j], act_rtol, tiny, "input gate", n, j);
    expect_near(in[5][j], ref[1][j], act_rtol, tiny, "output gate", n, j);
    expect_near(in[6][j], ref[2][j], act_rtol, tiny, "candidate", n, j);
    expect_near(out[0][j], ref[3][j], sum_tol, sum_tol, "new_h", n, j);
    expect_near(out[1][j], ref[4][j], sum_tol, sum_tol * (1 + fabsf(in[3][j])), "new_cell", n, j);
  }
  for (int i = 0; i < 7; i++) unguard(in[i], n);
  for (int i = 0; i < 2; i++) unguard(out[i], n);
  for (int i = 0; i < 5; i++) free(ref[i]);
}

static void check_backward(int64_t n) {
  float *in[6], *out[4];
  for (int i = 0; i < 6; i++) in[i] = guarded(n);
  for (int i = 0; i < 4; i++) out[i] = guarded(n);
  float *ref[4];
  for (int i = 0; i < 4; i++) ref[i] = malloc(sizeof(float) * (size_t)n);
  for (int64_t j = 0; j < n; j++) {
    /* activations as the forward leaves them, from special and random pre-activations */
    float h, c;
    tg__lltm_math_forward_vf(value(5 * j + n), value(5 * j + 1 + n), value(5 * j + 2 + n),
                             uniform(-3, 3), &in[3][j], &in[4][j], &in[5][j], &c, &h);
    in[0][j] = uniform(-3, 3); /* grad_h */
    in[1][j] = uniform(-3, 3); /* grad_cell */
    in[2][j] = uniform(-3, 3); /* old_cell */
    tg__lltm_math_backward_from_act_vf(in[0][j], in[1][j], in[2][j], in[3][j], in[4][j], in[5][j],
                                       &ref[0][j], &ref[1][j], &ref[2][j], &ref[3][j]);
  }
  tg_cpu_lltm_avx2_backward_span(n, in[0], in[1], in[2], in[3], in[4], in[5], out[0], out[1],
                                 out[2], out[3]);
  static const char *const names[] = {"d_g0", "d_g1", "d_g2", "d_old_cell"};
  for (int64_t j = 0; j < n; j++)
    for (int i = 0; i < 4; i++) expect_near(out[i][j], ref[i][j], sum_tol, sum_tol, names[i], n, j);
  for (int i = 0; i < 6; i++) unguard(in[i], n);
  for (int i = 0; i < 4; i++) unguard(out[i], n);
  for (int i = 0; i < 4; i++) free(ref[i]);
}

/* Every tail length (1-7 past whole vectors), and spans of one tile (256) and around it. */
static const int64_t lengths[] = {1,  2,  3,  4,  5,  6,  7,  8,   9,   15,  16,
                                  17, 23, 31, 32, 33, 40, 93, 255, 256, 257, 1000};
#define N_LENGTHS ((int)(sizeof lengths / sizeof lengths[0]))

TG_TEST(lltm_avx2, forward_span_matches_scalar_cell) {
  need_avx2();
  for (int k = 0; k < N_LENGTHS; k++) check_forward(lengths[k]);
}

TG_TEST(lltm_avx2, backward_span_matches_scalar_cell) {
  need_avx2();
  for (int k = 0; k < N_LENGTHS; k++) check_backward(lengths[k]);
}

/* The gates below -87: sigmoid is e^x there, subnormal from -87.3 and zero only below
 * -103.28 (e^x under half the least subnormal). The span rounds p 2^n once, as the scalar
 * exp does, so each gate is the scalar one to a subnormal step or two (the polynomials may
 * differ by an ulp), never flushed to zero or scaled wrong. Every 1/64 from -104 to -86. */
TG_TEST(lltm_avx2, subnormal_gates_match_scalar_cell) {
  need_avx2();
  enum { N = 18 * 64 + 1 };
  static float zero[N], cell[N], a0[N], a1[N], a2[N], h[N], c[N];
  for (int j = 0; j < N; j++) a0[j] = a1[j] = -104.0f + (float)j / 64;
  for (int j = 0; j < N; j++) a2[j] = -1;
  tg_cpu_lltm_avx2_forward_span(N, zero, zero, zero, cell, a0, a1, a2, h, c);
  const float step = 0x1p-149f;
  for (int j = 0; j < N; j++) {
    const float x = -104.0f + (float)j / 64;
    float ig, og, cand, nc, nh;
    tg__lltm_math_forward_vf(x, x, -1, 0, &ig, &og, &cand, &nc, &nh);
    cr_assert(fabsf(a0[j] - ig) <= 2 * step && fabsf(a1[j] - og) <= 2 * step,
              "sigmoid(%.6f): %a and %a, scalar %a", (double)x, (double)a0[j], (double)a1[j],
              (double)ig);
    if (x > -103.2f)
      cr_assert(a0[j] > 0, "sigmoid(%.6f) flushed to zero (scalar %a)", (double)x, (double)ig);
    if (x < -87.4f)
      cr_assert(a0[j] < 0x1p-126f, "sigmoid(%.6f) = %a is not subnormal", (double)x, (double)a0[j]);
  }
}

/* ---- the fused op on each path against the composed LLTM ---- */

typedef tg_status (*lltm_fn)(const tg_tensor *, const tg_tensor *, const tg_tensor *,
                             const tg_tensor *, const tg_tensor *, tg_tensor **, tg_tensor **);

/* new_h, new_cell and the five gradients of sum(new_h * gh) + sum(new_cell * gc). */
static void run(lltm_fn fn, tg_tensor *const in[5], const tg_tensor *gh, const tg_tensor *gc,
                tg_tensor *out[7]) {
  cr_assert_eq(fn(in[0], in[1], in[2], in[3], in[4], &out[0], &out[1]), TG_OK, "%s",
               tg_last_error_message());
  const tg_tensor *root = tg_add(tg_sum(tg_mul(out[0], gh)), tg_sum(tg_mul(out[1], gc)));
  cr_assert(root, "%s", tg_last_error_message());
  cr_assert_eq(tg_autograd_grad(1, &root, NULL, 5, (const tg_tensor *const *)in, out + 2,
                                (tg_backward_options){0}, true),
               TG_OK, "%s", tg_last_error_message());
}

/* A [rows, cols] F32 leaf in [lo, hi): contiguous, or every other column of a wider one;
 * row 0 only (a 1-D [cols] leaf) when row0. */
static tg_tensor *leaf_of(int64_t rows, int64_t cols, double lo, double hi, bool strided,
                          bool row0) {
  tg_tensor *t = strided
                     ? tg_slice(tg_uniform(TG_SHAPE(rows, 2 * cols), lo, hi, TG_OPTS_DEFAULT, NULL),
                                1, 0, 2 * cols, 2)
                     : tg_uniform(TG_SHAPE(rows, cols), lo, hi, TG_OPTS_DEFAULT, NULL);
  if (row0) t = tg_select(t, 0, 0);
  cr_assert(t, "%s", tg_last_error_message());
  cr_assert_eq(tg_set_requires_grad(t, true), TG_OK);
  return t;
}

static tg_tensor *leaf(int64_t rows, int64_t cols, double lo, double hi, bool strided) {
  return leaf_of(rows, cols, lo, hi, strided, false);
}

static void check_op(int64_t B, int64_t I, int64_t S, bool zero_bias, bool strided) {
  tg_scope sc = tg_scope_begin();
  tg_manual_seed((uint64_t)(B * 7919 + I * 31 + S));
  const double w = 1.0 / sqrt((double)S);
  tg_tensor *in[5] = {leaf(B, I, -2, 2, strided), leaf(3 * S, S + I, -w, w, false),
                      leaf_of(1, 3 * S, -w, w, strided, true), leaf(B, S, -2, 2, strided),
                      leaf(B, S, -2, 2, strided)};
  if (zero_bias) in[2] = tg_zeros(TG_SHAPE(3 * S), TG_OPTS(.requires_grad = true));
  tg_tensor *gh = tg_uniform(TG_SHAPE(B, S), -1, 1, TG_OPTS_DEFAULT, NULL);
  tg_tensor *gc = tg_uniform(TG_SHAPE(B, S), -1, 1, TG_OPTS_DEFAULT, NULL);
  tg_tensor *avx2[7], *portable[7], *composed[7];
  cr_assert(tg_cpu_lltm_set_cell_path(TG_CPU_LLTM_CELL_AVX2));
  cr_assert(tg_cpu_lltm_avx2_active());
  run(tg_lltm, in, gh, gc, avx2);
  cr_assert(tg_cpu_lltm_set_cell_path(TG_CPU_LLTM_CELL_PORTABLE));
  cr_assert(!tg_cpu_lltm_avx2_active());
  run(tg_lltm, in, gh, gc, portable);
  run(tg_lltm_composed, in, gh, gc, composed);
  tg_cpu_lltm_set_cell_path(TG_CPU_LLTM_CELL_AUTO);
  for (int i = 0; i < 7; i++) {
    const double scale = tg_test_max_abs_diff(composed[i], tg_zeros_like(composed[i]));
    cr_assert(isfinite(scale));
    tg_assert_close(avx2[i], composed[i], 1e-5, 1e-5 * scale + 1e-30);
    tg_assert_close(avx2[i], portable[i], 1e-5, 1e-5 * scale + 1e-30);
  }
  tg_scope_end(sc);
}

TG_TEST(lltm_avx2, fused_op_on_each_path_matches_composed) {
  need_avx2();
  static const int64_t sizes[][3] = {{1, 1, 1},    {1, 5, 7},     {3, 5, 9},     {2, 3, 300},
                                     {1, 32, 128}, {5, 2000, 13}, {16, 32, 128}, {7, 3, 33}};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    check_op(sizes[k][0], sizes[k][1], sizes[k][2], false, false);
    check_op(sizes[k][0], sizes[k][1], sizes[k][2], true, false);
    check_op(sizes[k][0], sizes[k][1], sizes[k][2], false, true); /* packed into tiles first */
  }
}

TG_TEST(lltm_avx2, transposed_backward_layout_and_two_threads) {
  need_avx2();
  check_op(64, 8, 403, false, false); /* B * 3S >= 65536: d_gates stored transposed */
  tg_set_num_threads(2);
  check_op(64, 8, 301, false, false); /* above the parallel threshold: columns split */
  check_op(64, 8, 403, false, true);
  tg_set_num_threads(0);
}

/* ---- the switch ---- */

TG_TEST(lltm_avx2, auto_follows_the_cpu) {
  cr_assert(tg_cpu_lltm_set_cell_path(TG_CPU_LLTM_CELL_AUTO));
  const tg_cpu_features f = tg_cpu_features_read();
  cr_assert_eq(tg_cpu_lltm_avx2_active(), tg_cpu_lltm_avx2_supported() && !f.avx512f);
  cr_assert(tg_cpu_lltm_set_cell_path(TG_CPU_LLTM_CELL_PORTABLE));
  cr_assert(!tg_cpu_lltm_avx2_active());
  /* refused (and portable kept) where unsupported */
  cr_assert_eq(tg_cpu_lltm_set_cell_path(TG_CPU_LLTM_CELL_AVX2), tg_cpu_lltm_avx2_supported());
  cr_assert_eq(tg_cpu_lltm_avx2_active(), tg_cpu_lltm_avx2_supported());
  tg_cpu_lltm_set_cell_path(TG_CPU_LLTM_CELL_AUTO);
}

/* Each Criterion test is a fresh process: the variable is read at the first use. */
TG_TEST(lltm_avx2, environment_chooses_portable) {
  cr_assert_eq(setenv("TG_LLTM_CELL", "portable", 1), 0);
  cr_assert(!tg_cpu_lltm_avx2_active());
}

TG_TEST(lltm_avx2, environment_chooses_avx2) {
  cr_assert_eq(setenv("TG_LLTM_CELL", "avx2", 1), 0);
  cr_assert_eq(tg_cpu_lltm_avx2_active(), tg_cpu_lltm_avx2_supported());
}

/* A value that names no path is reported on stderr and ignored (the CPU decides). */
TG_TEST(lltm_avx2, environment_unknown_value_is_reported) {
  cr_assert_eq(setenv("TG_LLTM_CELL", "avx512", 1), 0);
  char path[] = "/tmp/tg-lltm-cell-XXXXXX";
  const int fd = mkstemp(path), saved = dup(2);
  cr_assert(fd >= 0 && saved >= 0);
  fflush(stderr);
  dup2(fd, 2);
  const bool active = tg_cpu_lltm_avx2_active();
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  char text[512] = "";
  lseek(fd, 0, SEEK_SET);
  const ssize_t n = read(fd, text, sizeof text - 1);
  text[n > 0 ? n : 0] = '\0';
  close(fd);
  unlink(path);
  cr_assert(strstr(text, "TG_LLTM_CELL='avx512' is neither portable nor avx2"), "stderr: %s", text);
  const tg_cpu_features f = tg_cpu_features_read();
  cr_assert_eq(active, tg_cpu_lltm_avx2_supported() && !f.avx512f);
}
