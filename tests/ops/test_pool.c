/* max_pool2d, avg_pool2d, adaptive_avg_pool2d (tg/pool.h): values against loop references that
 * follow PyTorch's CPU kernels line by line, PyTorch's rules at the edges (ceil_mode window
 * counts, NaN, -inf, +-0, ties, empty batch, strided input), the OpInfo checks (gradcheck and
 * gradgradcheck in F64), every bad input's error and an allocation-failure sweep. pad: test_pad.c.
 */
#include <math.h>

#include "testutil.h"

#include "ops/backend.h"

#include "alloc_sweep.h"

/* ---- loop references (PyTorch's aten/src/ATen/native/cpu pooling kernels) ---- */

typedef struct geom {
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
  bool ceil;
} geom;

static int64_t out_size(int64_t in, int64_t k, int64_t p, int64_t s, int64_t d, bool ceil) {
  const int64_t num = in + 2 * p - d * (k - 1) - 1 + (ceil ? s - 1 : 0);
  int64_t out = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
  if (ceil && (out - 1) * s >= in + p) out--;
  return out;
}

static void ref_max(const double *x, int64_t planes, int64_t H, int64_t W, geom g, double *out,
                    int64_t *idx) {
  const int64_t OH = out_size(H, g.kh, g.ph, g.sh, g.dh, g.ceil);
  const int64_t OW = out_size(W, g.kw, g.pw, g.sw, g.dw, g.ceil);
  for (int64_t p = 0; p < planes; p++)
    for (int64_t oh = 0; oh < OH; oh++)
      for (int64_t ow = 0; ow < OW; ow++) {
        int64_t h0 = oh * g.sh - g.ph, w0 = ow * g.sw - g.pw;
        const int64_t h1 = fmin(h0 + (g.kh - 1) * g.dh + 1, H);
        const int64_t w1 = fmin(w0 + (g.kw - 1) * g.dw + 1, W);
        while (h0 < 0) h0 += g.dh;
        while (w0 < 0) w0 += g.dw;
        int64_t best_at = h0 * W + w0;
        double best = -INFINITY;
        for (int64_t ih = h0; ih < h1; ih += g.dh)
          for (int64_t iw = w0; iw < w1; iw += g.dw) {
            const double v = x[p * H * W + ih * W + iw];
            if (v > best || isnan(v)) best = v, best_at = ih * W + iw;
          }
        out[(p * OH + oh) * OW + ow] = best;
        idx[(p * OH + oh) * OW + ow] = best_at;
      }
}

static void ref_avg(const double *x, int64_t planes, int64_t H, int64_t W, geom g, bool include_pad,
                    int64_t divisor, double *out) {
  const int64_t OH = out_size(H, g.kh, g.ph, g.sh, 1, g.ceil);
  const int64_t OW = out_size(W, g.kw, g.pw, g.sw, 1, g.ceil);
  for (int64_t p = 0; p < planes; p++)
    for (int64_t oh = 0; oh < OH; oh++)
      for (int64_t ow = 0; ow < OW; ow++) {
        int64_t h0 = oh * g.sh - g.ph, w0 = ow * g.sw - g.pw;
        int64_t h1 = fmin(h0 + g.kh, H + g.ph), w1 = fmin(w0 + g.kw, W + g.pw);
        const int64_t pool = (h1 - h0) * (w1 - w0);
        h0 = fmax(h0, 0), w0 = fmax(w0, 0), h1 = fmin(h1, H), w1 = fmin(w1, W);
        double sum = 0;
        for (int64_t ih = h0; ih < h1; ih++)
          for (int64_t iw = w0; iw < w1; iw++) sum += x[p * H * W + ih * W + iw];
        const double d = divisor ? (double)divisor : include_pad ? pool : (h1 - h0) * (w1 - w0);
        out[(p * OH + oh) * OW + ow] = (h0 >= h1 || w0 >= w1) ? 0 : sum / d;
      }
}

static void ref_adaptive(const double *x, int64_t planes, int64_t H, int64_t W, int64_t OH,
                         int64_t OW, double *out) {
  for (int64_t p = 0; p < planes; p++)
    for (int64_t oh = 0; oh < OH; oh++)
      for (int64_t ow = 0; ow < OW; ow++) {
        const int64_t h0 = oh * H / OH, h1 = ((oh + 1) * H + OH - 1) / OH;
        const int64_t w0 = ow * W / OW, w1 = ((ow + 1) * W + OW - 1) / OW;
        double sum = 0;
        for (int64_t ih = h0; ih < h1; ih++)
          for (int64_t iw = w0; iw < w1; iw++) sum += x[p * H * W + ih * W + iw];
        out[(p * OH + oh) * OW + ow] = sum / (double)((h1 - h0) * (w1 - w0));
      }
}

/* ---- helpers ---- */

static double host[4096], want[4096];
static int64_t want_idx[4096];

/* x [N, C, H, W] of random values (F64 on the host, then dtype), non-contiguous when asked
 * (a transposed copy transposed back). */
static tg_tensor *random_input(tg_generator *gen, tg_dtype dtype, int ndim, const int64_t *sizes,
                               bool strided) {
  tg_tensor *x = tg_randn(ndim, sizes, (tg_options){.dtype = TG_F64}, gen);
  cr_assert_not_null(x);
  cr_assert_eq(tg_to_host_array(x, host, sizeof host), TG_OK);
  x = tg_to_dtype(x, dtype);
  if (strided)
    x = tg_transpose(tg_contiguous(tg_transpose(x, ndim - 1, ndim - 2)), ndim - 1, ndim - 2);
  cr_assert_not_null(x, "%s", tg_last_error_message());
  if (dtype == TG_F32) /* the reference reads what the op reads */
    cr_assert_eq(tg_to_host_array(tg_to_dtype(x, TG_F64), host, sizeof host), TG_OK);
  return x;
}

static const int64_t *k2(int64_t a, int64_t b) {
  static int64_t k[2];
  k[0] = a, k[1] = b;
  return k;
}

/* ---- values ---- */

TG_TEST(pool, max_pool2d_matches_the_loop_reference) {
  tg_generator *gen = tg_generator_new(11);
  const geom geoms[] = {
      {2, 2, 2, 2, 0, 0, 1, 1, false}, {3, 3, 2, 2, 1, 1, 1, 1, false},
      {3, 3, 2, 2, 1, 1, 1, 1, true},  {2, 3, 1, 2, 1, 1, 2, 1, false},
      {3, 2, 3, 3, 1, 0, 1, 2, true},  {1, 1, 1, 1, 0, 0, 1, 1, false},
      {4, 4, 3, 3, 2, 2, 1, 1, true},  {2, 2, 3, 3, 1, 1, 2, 2, true},
  };
  for (int d = 0; d < 2; d++)
    for (size_t gi = 0; gi < sizeof geoms / sizeof geoms[0]; gi++)
      for (int strided = 0; strided < 2; strided++) {
        tg_scope sc = tg_scope_begin();
        const geom g = geoms[gi];
        const int64_t sizes[4] = {2, 3, 7, 6};
        tg_tensor *x = random_input(gen, d ? TG_F64 : TG_F32, 4, sizes, strided);
        tg_tensor *v, *i;
        tg_max_pool2d_options o = {{g.sh, g.sw}, {g.ph, g.pw}, {g.dh, g.dw}, g.ceil};
        cr_assert_eq(tg_max_pool2d_with_indices(x, k2(g.kh, g.kw), o, &v, &i), TG_OK, "%s",
                     tg_last_error_message());
        ref_max(host, 6, 7, 6, g, want, want_idx);
        const int64_t OH = out_size(7, g.kh, g.ph, g.sh, g.dh, g.ceil);
        const int64_t OW = out_size(6, g.kw, g.pw, g.sw, g.dw, g.ceil);
        tg_assert_sizes(v, 2, 3, OH, OW);
        tg_assert_sizes(i, 2, 3, OH, OW);
        cr_assert_eq(tg_tensor_dtype(i), TG_I64);
        tg_test_expect_values(v, 6 * OH * OW, want, 0);
        for (int64_t e = 0; e < 6 * OH * OW; e++)
          cr_assert_eq((int64_t)tg_test_at(i, e), want_idx[e], "geom %zu, index %lld", gi,
                       (long long)e);
        tg_scope_end(sc);
      }
  tg_generator_free(gen);
}

TG_TEST(pool, avg_pool2d_matches_the_loop_reference) {
  tg_generator *gen = tg_generator_new(12);
  const geom geoms[] = {
      {2, 2, 2, 2, 0, 0, 1, 1, false}, {3, 3, 2, 2, 1, 1, 1, 1, false},
      {3, 3, 2, 2, 1, 1, 1, 1, true},  {2, 3, 1, 2, 1, 1, 1, 1, true},
      {3, 2, 3, 3, 1, 0, 1, 1, true},  {4, 4, 3, 3, 2, 2, 1, 1, true},
  };
  for (int d = 0; d < 2; d++)
    for (size_t gi = 0; gi < sizeof geoms / sizeof geoms[0]; gi++)
      for (int mode = 0; mode < 3; mode++) {
        tg_scope sc = tg_scope_begin();
        const geom g = geoms[gi];
        const int64_t sizes[3] = {3, 7, 6};
        tg_tensor *x = random_input(gen, d ? TG_F64 : TG_F32, 3, sizes, mode == 1);
        const bool include_pad = mode != 1;
        const int64_t divisor = mode == 2 ? 3 : 0;
        tg_avg_pool2d_options o = {{g.sh, g.sw}, {g.ph, g.pw}, g.ceil, !include_pad, divisor};
        tg_tensor *y = tg_avg_pool2d(x, k2(g.kh, g.kw), o);
        cr_assert_not_null(y, "%s", tg_last_error_message());
        ref_avg(host, 3, 7, 6, g, include_pad, divisor, want);
        const int64_t OH = out_size(7, g.kh, g.ph, g.sh, 1, g.ceil);
        const int64_t OW = out_size(6, g.kw, g.pw, g.sw, 1, g.ceil);
        tg_assert_sizes(y, 3, OH, OW);
        tg_test_expect_values(y, 3 * OH * OW, want, d ? 1e-14 : 1e-6);
        tg_scope_end(sc);
      }
  tg_generator_free(gen);
}

TG_TEST(pool, adaptive_avg_pool2d_matches_the_loop_reference) {
  tg_generator *gen = tg_generator_new(13);
  const int64_t outs[][2] = {{1, 1}, {3, 4}, {7, 6}, {4, 5}, {9, 11}, {2, 6}};
  for (int d = 0; d < 2; d++)
    for (size_t k = 0; k < sizeof outs / sizeof outs[0]; k++) {
      tg_scope sc = tg_scope_begin();
      const int64_t sizes[4] = {2, 2, 7, 6};
      tg_tensor *x = random_input(gen, d ? TG_F64 : TG_F32, 4, sizes, k % 2);
      tg_tensor *y = tg_adaptive_avg_pool2d(x, outs[k]);
      cr_assert_not_null(y, "%s", tg_last_error_message());
      ref_adaptive(host, 4, 7, 6, outs[k][0], outs[k][1], want);
      tg_assert_sizes(y, 2, 2, outs[k][0], outs[k][1]);
      tg_test_expect_values(y, 4 * outs[k][0] * outs[k][1], want, d ? 1e-14 : 1e-6);
      tg_scope_end(sc);
    }
  tg_generator_free(gen);
}

/* ---- PyTorch's rules at the edges ---- */

TG_TEST(pool, ceil_mode_window_counts_follow_pytorch) {
  /* out = floor((in + 2p - d(k-1) - 1 + (ceil ? s-1 : 0)) / s) + 1, one less in ceil mode when
   * the last window would start at or after in + p: the numbers torch 2 gives */
  const struct {
    int64_t in, k, s, p, d;
    bool ceil;
    int64_t out;
  } cases[] = {
      {5, 2, 2, 0, 1, false, 2}, {5, 2, 2, 0, 1, true, 3}, {5, 2, 2, 1, 1, true, 3},
      {4, 3, 2, 1, 1, true, 3},  {6, 3, 2, 1, 1, true, 4}, {5, 3, 3, 1, 1, true, 2},
      {5, 2, 3, 1, 1, true, 2},  {7, 3, 2, 0, 2, true, 2}, {1, 1, 2, 0, 1, true, 1},
      {6, 2, 4, 1, 1, true, 2},  {3, 2, 2, 1, 1, true, 2}, {3, 2, 2, 1, 1, false, 2},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    tg_scope sc = tg_scope_begin();
    tg_tensor *x = tg_zeros(TG_SHAPE(1, 1, cases[c].in, 1), (tg_options){.dtype = TG_F32});
    tg_max_pool2d_options mo = {{cases[c].s, 1}, {cases[c].p, 0}, {cases[c].d, 1}, cases[c].ceil};
    tg_tensor *y = tg_max_pool2d(x, k2(cases[c].k, 1), mo);
    cr_assert_not_null(y, "case %zu: %s", c, tg_last_error_message());
    cr_assert_eq(tg_sizes(y)[2], cases[c].out, "case %zu: %lld windows, want %lld", c,
                 (long long)tg_sizes(y)[2], (long long)cases[c].out);
    if (cases[c].d == 1) {
      tg_avg_pool2d_options ao = {{cases[c].s, 1}, {cases[c].p, 0}, cases[c].ceil, false, 0};
      tg_tensor *a = tg_avg_pool2d(x, k2(cases[c].k, 1), ao);
      cr_assert_not_null(a, "case %zu: %s", c, tg_last_error_message());
      cr_assert_eq(tg_sizes(a)[2], cases[c].out, "case %zu (avg)", c);
    }
    tg_scope_end(sc);
  }
}

TG_TEST(pool, nan_inf_signed_zero_and_ties_as_pytorch_cpu) {
  tg_scope sc = tg_scope_begin();
  const double nan = NAN, inf = INFINITY;
  /* four 2x2 planes, one window each: NaN after a larger value (NaN wins), two NaNs (the last
   * one's index, as PyTorch's CPU kernel), -inf only (the first element), -0 before +0 (a tie:
   * the first), and a tie of 3s (the first) */
  const double xv[20] = {5,    nan,  1,    2,   nan, 1,  nan, 9, -inf, -inf,
                         -inf, -inf, -0.0, 0.0, -1,  -2, 3,   1, 3,    3};
  tg_tensor *x = tg_from_data(TG_SHAPE(5, 2, 2), xv, (tg_options){.dtype = TG_F64});
  cr_assert_eq(tg_set_requires_grad(x, true), TG_OK);
  tg_tensor *v, *i;
  cr_assert_eq(tg_max_pool2d_with_indices(x, k2(2, 2), (tg_max_pool2d_options){0}, &v, &i), TG_OK,
               "%s", tg_last_error_message());
  tg_test_expect_ieee(v, 5, (const double[]){nan, nan, -inf, -0.0, 3}, 0);
  tg_test_expect_values(i, 5, (const double[]){1, 2, 0, 0, 0}, 0);
  /* the gradient goes to the chosen element only */
  cr_assert_eq(tg_backward(tg_sum(v), NULL), TG_OK, "%s", tg_last_error_message());
  tg_test_expect_values(
      tg_grad(x), 20, (const double[]){0, 1, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0},
      0);
  /* padding is -inf to max pooling and zeros to average pooling; an inf or NaN in a window
   * reaches its average */
  const double av[4] = {inf, 1, nan, 2};
  tg_tensor *a = tg_test_tensor_of(TG_F32, TG_SHAPE(1, 1, 2, 2), av);
  tg_tensor *y = tg_avg_pool2d(a, k2(1, 2), (tg_avg_pool2d_options){0});
  tg_test_expect_ieee(y, 2, (const double[]){inf, nan}, 0);
  const double negv[4] = {-3, -4, -5, -6};
  tg_tensor *neg = tg_test_tensor_of(TG_F32, TG_SHAPE(1, 2, 2), negv);
  y = tg_max_pool2d(neg, k2(2, 2), (tg_max_pool2d_options){.stride = {1, 1}, .padding = {1, 1}});
  tg_test_expect_values(y, 9, (const double[]){-3, -3, -4, -3, -3, -4, -5, -5, -6}, 0);
  y = tg_avg_pool2d(neg, k2(2, 2), (tg_avg_pool2d_options){.stride = {1, 1}, .padding = {1, 1}});
  tg_test_expect_values(
      y, 9, (const double[]){-0.75, -1.75, -1, -2, -4.5, -2.5, -1.25, -2.75, -1.5}, 1e-6);
  y = tg_avg_pool2d(
      neg, k2(2, 2),
      (tg_avg_pool2d_options){.stride = {1, 1}, .padding = {1, 1}, .exclude_padding = true});
  tg_test_expect_values(y, 9, (const double[]){-3, -3.5, -4, -4, -4.5, -5, -5, -5.5, -6}, 1e-6);
  tg_scope_end(sc);
}

TG_TEST(pool, empty_batch_and_empty_output) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x =
      tg_zeros(TG_SHAPE(0, 3, 4, 4), (tg_options){.dtype = TG_F32, .requires_grad = true});
  tg_tensor *v, *i;
  cr_assert_eq(tg_max_pool2d_with_indices(x, k2(2, 2), (tg_max_pool2d_options){0}, &v, &i), TG_OK,
               "%s", tg_last_error_message());
  tg_assert_sizes(v, 0, 3, 2, 2);
  tg_assert_sizes(i, 0, 3, 2, 2);
  tg_tensor *a = tg_avg_pool2d(x, k2(3, 3), (tg_avg_pool2d_options){.padding = {1, 1}});
  tg_assert_sizes(a, 0, 3, 2, 2);
  tg_tensor *ad = tg_adaptive_avg_pool2d(x, k2(5, 1));
  tg_assert_sizes(ad, 0, 3, 5, 1);
  cr_assert_eq(tg_backward(tg_add(tg_add(tg_sum(v), tg_sum(a)), tg_sum(ad)), NULL), TG_OK, "%s",
               tg_last_error_message());
  tg_assert_sizes(tg_grad(x), 0, 3, 4, 4);
  /* adaptive pooling to 0 rows: an empty result, as PyTorch's */
  tg_tensor *x1 = tg_ones(TG_SHAPE(2, 3, 3), (tg_options){.dtype = TG_F64});
  tg_assert_sizes(tg_adaptive_avg_pool2d(x1, k2(0, 2)), 2, 0, 2);
  tg_scope_end(sc);
}

TG_TEST(pool, backward_spreads_and_scatters_like_the_adjoint) {
  /* <pool(x), g> = <x, pool^T(g)> for the linear poolings, and max pooling's gradient is g added
   * at the indices (overlapping windows add up) */
  tg_generator *gen = tg_generator_new(5);
  tg_scope sc = tg_scope_begin();
  tg_tensor *x =
      tg_randn(TG_SHAPE(2, 3, 7, 6), TG_OPTS(.dtype = TG_F64, .requires_grad = true), gen);
  tg_tensor *ys[3] = {
      tg_avg_pool2d(
          x, k2(3, 3),
          (tg_avg_pool2d_options){.stride = {2, 1}, .padding = {1, 1}, .ceil_mode = true}),
      tg_adaptive_avg_pool2d(x, k2(4, 5)),
      tg_max_pool2d(x, k2(3, 2), (tg_max_pool2d_options){.stride = {1, 1}}),
  };
  for (int k = 0; k < 3; k++) {
    cr_assert_not_null(ys[k], "%s", tg_last_error_message());
    tg_tensor *g = tg_randn(tg_ndim(ys[k]), tg_sizes(ys[k]), (tg_options){.dtype = TG_F64}, gen);
    tg_tensor *gx = NULL;
    cr_assert_eq(tg_autograd_grad(1, (const tg_tensor *const[]){ys[k]},
                                  (const tg_tensor *const[]){g}, 1, (const tg_tensor *const[]){x},
                                  &gx, (tg_backward_options){0}, false),
                 TG_OK, "%s", tg_last_error_message());
    double lhs, rhs;
    cr_assert_eq(tg_item(tg_sum(tg_mul(ys[k], g)), &lhs), TG_OK);
    cr_assert_eq(tg_item(tg_sum(tg_mul(tg_detach(x), gx)), &rhs), TG_OK);
    if (k < 2)
      cr_assert_float_eq(lhs, rhs, 1e-10, "pool %d: %g vs %g", k, lhs, rhs);
    else
      cr_assert_float_eq(lhs, rhs, 1e-10, "max pool: %g vs %g", lhs, rhs);
  }
  tg_scope_end(sc);
  tg_generator_free(gen);
}

/* ---- OpInfo: gradcheck and gradgradcheck in F64 over every sample ---- */

TG_TEST(pool, ops_pass_their_opinfo_checks) {
  const char *names[] = {"max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "pool_gather",
                         "pool_scatter"};
  for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
    const tg_op_desc *op = tg_op_lookup(names[k]);
    cr_assert_not_null(op, "%s", names[k]);
    tg_op_check_options opts = {.gradcheck = {.quiet = true}};
    cr_assert_eq(tg_op_check(op, opts), TG_OK, "%s: %s", names[k], tg_last_error_message());
  }
}

TG_TEST(pool, runs_on_the_meta_device) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_zeros(TG_SHAPE(2, 3, 8, 8), (tg_options){.device = TG_DEVICE_META});
  tg_tensor *v, *i;
  cr_assert_eq(
      tg_max_pool2d_with_indices(x, k2(3, 3), (tg_max_pool2d_options){.stride = {2, 2}}, &v, &i),
      TG_OK, "%s", tg_last_error_message());
  tg_assert_sizes(v, 2, 3, 3, 3);
  tg_assert_sizes(tg_avg_pool2d(x, k2(2, 2), (tg_avg_pool2d_options){0}), 2, 3, 4, 4);
  tg_assert_sizes(tg_adaptive_avg_pool2d(x, k2(3, 5)), 2, 3, 3, 5);
  /* windows of a huge input whose map could not be addressed: an error, not an overflow */
  tg_tensor *huge =
      tg_zeros(TG_SHAPE(1, 1, 100000, 100000), (tg_options){.device = TG_DEVICE_META});
  cr_assert_null(tg_max_pool2d(huge, k2(50000, 50000), (tg_max_pool2d_options){.stride = {1, 1}}));
  tg_expect_error(TG_ERR_MEMORY, "window map", "too large");
  tg_scope_end(sc);
}

/* ---- errors ---- */

TG_TEST(pool, refuses_bad_inputs_naming_them) {
  tg_scope sc = tg_scope_begin();
  const tg_options f32 = {.dtype = TG_F32};
  tg_tensor *x = tg_zeros(TG_SHAPE(1, 2, 5, 5), f32);
  tg_max_pool2d_options mo = {0};
  tg_avg_pool2d_options ao = {0};
  cr_assert_null(tg_max_pool2d(x, k2(0, 2), mo));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_max_pool2d", "kernel_size must be > 0", "(0, 2)");
  cr_assert_null(tg_max_pool2d(x, k2(2, 2), (tg_max_pool2d_options){.stride = {0, 1}}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_max_pool2d", "stride must be > 0", "(0, 1)");
  cr_assert_null(tg_max_pool2d(x, k2(2, 2), (tg_max_pool2d_options){.stride = {-1, -1}}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_max_pool2d", "stride");
  cr_assert_null(tg_max_pool2d(x, k2(2, 2), (tg_max_pool2d_options){.dilation = {1, 0}}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_max_pool2d", "dilation must be > 0");
  cr_assert_null(tg_max_pool2d(x, k2(2, 3), (tg_max_pool2d_options){.padding = {1, 2}}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_max_pool2d", "padding (1, 2)",
                  "half the kernel_size (2, 3)");
  cr_assert_null(tg_max_pool2d(x, k2(2, 2), (tg_max_pool2d_options){.padding = {-1, 0}}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_max_pool2d", "padding must be >= 0");
  cr_assert_null(tg_max_pool2d(x, k2(6, 2), mo));
  tg_expect_error(TG_ERR_SHAPE, "tg_max_pool2d", "[1, 2, 5, 5]", "output of 0x2, too small");
  cr_assert_null(tg_max_pool2d(x, k2(3, 3), (tg_max_pool2d_options){.dilation = {3, 3}}));
  tg_expect_error(TG_ERR_SHAPE, "tg_max_pool2d", "too small");
  cr_assert_null(tg_max_pool2d(x, k2((int64_t)1 << 40, 2), mo));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_max_pool2d", "kernel_size", "too large");
  cr_assert_null(tg_max_pool2d(tg_zeros(TG_SHAPE(5, 5), f32), k2(2, 2), mo));
  tg_expect_error(TG_ERR_SHAPE, "tg_max_pool2d", "x is [5, 5]", "[N, C, H, W]");
  cr_assert_null(tg_max_pool2d(tg_zeros(TG_SHAPE(1, 1, 1, 5, 5), f32), k2(2, 2), mo));
  tg_expect_error(TG_ERR_SHAPE, "tg_max_pool2d", "[1, 1, 1, 5, 5]");
  cr_assert_null(tg_max_pool2d(tg_zeros(TG_SHAPE(1, 0, 5, 5), f32), k2(2, 2), mo));
  tg_expect_error(TG_ERR_SHAPE, "tg_max_pool2d", "[1, 0, 5, 5]", "C, H and W > 0");
  cr_assert_null(
      tg_max_pool2d(tg_zeros(TG_SHAPE(1, 5, 5), (tg_options){.dtype = TG_I64}), k2(2, 2), mo));
  tg_expect_error(TG_ERR_DTYPE, "tg_max_pool2d", "x");
  cr_assert_null(tg_max_pool2d(NULL, k2(2, 2), mo));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_max_pool2d", "x");
  cr_assert_null(tg_max_pool2d(x, NULL, mo));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_max_pool2d", "kernel_size is NULL");
  tg_tensor *v;
  cr_assert_eq(tg_max_pool2d_with_indices(x, k2(2, 2), mo, &v, NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_max_pool2d", "indices is NULL");
  cr_assert_null(v);

  cr_assert_null(tg_avg_pool2d(x, k2(2, 0), ao));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_avg_pool2d", "kernel_size must be > 0");
  cr_assert_null(tg_avg_pool2d(x, k2(2, 2), (tg_avg_pool2d_options){.stride = {2, 0}}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_avg_pool2d", "stride must be > 0");
  cr_assert_null(tg_avg_pool2d(x, k2(3, 3), (tg_avg_pool2d_options){.padding = {2, 0}}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_avg_pool2d", "padding (2, 0)");
  cr_assert_null(tg_avg_pool2d(x, k2(2, 2), (tg_avg_pool2d_options){.divisor_override = -2}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_avg_pool2d", "divisor_override", "-2");
  cr_assert_null(tg_avg_pool2d(x, k2(7, 7), ao));
  tg_expect_error(TG_ERR_SHAPE, "tg_avg_pool2d", "too small");
  cr_assert_null(tg_avg_pool2d(tg_zeros(TG_SHAPE(2, 5), f32), k2(1, 1), ao));
  tg_expect_error(TG_ERR_SHAPE, "tg_avg_pool2d", "[2, 5]");

  cr_assert_null(tg_adaptive_avg_pool2d(x, k2(3, -1)));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_adaptive_avg_pool2d", "output_size", "(3, -1)");
  cr_assert_null(tg_adaptive_avg_pool2d(tg_zeros(TG_SHAPE(1, 1, 0, 4), f32), k2(2, 2)));
  tg_expect_error(TG_ERR_SHAPE, "tg_adaptive_avg_pool2d", "[1, 1, 0, 4]");
  cr_assert_null(tg_adaptive_avg_pool2d(tg_zeros(TG_SHAPE(4), f32), k2(2, 2)));
  tg_expect_error(TG_ERR_SHAPE, "tg_adaptive_avg_pool2d", "[4]");
  cr_assert_null(tg_adaptive_avg_pool2d(x, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_adaptive_avg_pool2d", "output_size is NULL");

  /* through tg_apply: the registered ops check their integer parameters too */
  cr_assert_null(tg_apply1_ex(tg_op_lookup("avg_pool2d"), 1, (const tg_tensor *const[]){x}, 0, NULL,
                              3, (const int64_t[]){2, 2, 2}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_avg_pool2d", "takes 9 integer parameters", "3 given");
  tg_tensor *outs[2];
  cr_assert_eq(tg_apply_ex(tg_op_lookup("max_pool2d"), 1, (const tg_tensor *const[]){x}, 0, NULL, 9,
                           (const int64_t[]){2, 2, 2, 2, 0, 0, 1, 1, 2}, 2, outs),
               TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_max_pool2d", "ceil_mode must be 0 or 1, got 2");
  tg_scope_end(sc);
}

TG_TEST(pool, gather_and_scatter_refuse_bad_maps) {
  tg_scope sc = tg_scope_begin();
  const tg_options f64 = {.dtype = TG_F64};
  const tg_op_desc *gather = tg_op_lookup("pool_gather"), *scatter = tg_op_lookup("pool_scatter");
  tg_tensor *x = tg_zeros(TG_SHAPE(2, 4), f64), *div = tg_ones(TG_SHAPE(3), f64);
  tg_tensor *map =
      tg_from_data(TG_SHAPE(1, 3, 1), (const int64_t[]){0, -1, 4}, (tg_options){.dtype = TG_I64});
  cr_assert_null(tg_apply1(gather, 3, (const tg_tensor *const[]){x, map, div}, 0, NULL));
  tg_expect_error(TG_ERR_INDEX, "tg_pool_gather", "map entry 2 is 4, outside [-1, 4)");
  tg_tensor *map2 = tg_zeros(TG_SHAPE(3, 3, 1), (tg_options){.dtype = TG_I64});
  cr_assert_null(tg_apply1(gather, 3, (const tg_tensor *const[]){x, map2, div}, 0, NULL));
  tg_expect_error(TG_ERR_SHAPE, "tg_pool_gather", "map is [3, 3, 1]", "[1 or 2, M, K]");
  cr_assert_null(tg_apply1(
      gather, 3, (const tg_tensor *const[]){x, tg_zeros(TG_SHAPE(1, 3, 1), f64), div}, 0, NULL));
  tg_expect_error(TG_ERR_DTYPE, "tg_pool_gather", "map is float64");
  cr_assert_null(tg_apply1(
      gather, 3, (const tg_tensor *const[]){x, map2, tg_ones(TG_SHAPE(2), f64)}, 0, NULL));
  tg_expect_error(TG_ERR_SHAPE, "tg_pool_gather");
  tg_tensor *ok_map =
      tg_from_data(TG_SHAPE(1, 3, 1), (const int64_t[]){0, -1, 3}, (tg_options){.dtype = TG_I64});
  cr_assert_null(tg_apply1_ex(
      scatter, 3, (const tg_tensor *const[]){tg_zeros(TG_SHAPE(2, 3), f64), ok_map, div}, 0, NULL,
      1, (const int64_t[]){3}));
  tg_expect_error(TG_ERR_INDEX, "tg_pool_scatter", "map entry 2 is 3, outside [-1, 3)");
  cr_assert_null(tg_apply1_ex(
      scatter, 3, (const tg_tensor *const[]){tg_zeros(TG_SHAPE(2, 3), f64), ok_map, div}, 0, NULL,
      1, (const int64_t[]){-1}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_pool_scatter", "L = -1");
  cr_assert_null(tg_apply1_ex(
      scatter, 3, (const tg_tensor *const[]){tg_zeros(TG_SHAPE(2, 4), f64), ok_map, div}, 0, NULL,
      1, (const int64_t[]){4}));
  tg_expect_error(TG_ERR_SHAPE, "tg_pool_scatter", "grad is [2, 4]");
  cr_assert_null(tg_apply1(gather, 1, (const tg_tensor *const[]){x}, 0, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_pool_gather", "takes 2 or 3 inputs", "1 given");
  tg_tensor *y = tg_apply1(gather, 3, (const tg_tensor *const[]){x, ok_map, div}, 0, NULL);
  cr_assert_not_null(y, "%s", tg_last_error_message());
  tg_assert_sizes(y, 2, 3);
  /* without a divisor a one-entry window copies, -0 included */
  tg_tensor *neg0 = tg_full(TG_SHAPE(2, 4), -0.0, f64);
  y = tg_apply1(gather, 2, (const tg_tensor *const[]){neg0, ok_map}, 0, NULL);
  cr_assert(signbit(tg_test_at(y, 0)) && signbit(tg_test_at(y, 2)));
  tg_scope_end(sc);
}

/* ---- allocation failures: every allocation of each op, forward and backward ---- */

static tg_status pool_step(void *user, double *out, int *n_out) {
  const int which = *(const int *)user;
  tg_tensor *x =
      tg_from_data(TG_SHAPE(1, 2, 3, 3),
                   (const double[]){3, -1, 4, 1, -5, 9, 2, 6, -5, 3, 5, -8, 9, 7, 9, 3, 2, -3},
                   TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  tg_tensor *xt = x ? tg_transpose(tg_contiguous(tg_transpose(x, 2, 3)), 2, 3) : NULL;
  tg_tensor *y = NULL;
  if (xt && which == 0)
    y = tg_max_pool2d(xt, k2(2, 2), (tg_max_pool2d_options){.stride = {1, 1}, .padding = {1, 1}});
  if (xt && which == 1)
    y = tg_avg_pool2d(xt, k2(2, 2),
                      (tg_avg_pool2d_options){.ceil_mode = true, .exclude_padding = true});
  if (xt && which == 2) y = tg_adaptive_avg_pool2d(xt, k2(2, 2));
  tg_status st = status_of(y);
  if (st == TG_OK) st = append(y, out, n_out);
  tg_tensor *gx = NULL;
  /* create_graph, then the gradient of the gradient: the backward ops' own backwards */
  if (st == TG_OK)
    st = clean(tg_autograd_grad(1, (const tg_tensor *const[]){tg_sum(tg_mul(y, y))}, NULL, 1,
                                (const tg_tensor *const[]){x}, &gx,
                                (tg_backward_options){.create_graph = true}, false));
  if (st == TG_OK) st = append(gx, out, n_out);
  if (st == TG_OK) st = clean(tg_backward(tg_sum(tg_mul(gx, gx)), NULL));
  if (st == TG_OK) st = append(tg_grad(x), out, n_out);
  return st;
}

TG_TEST(pool, allocation_failures) {
  int which = 0;
  sweep("max_pool2d forward, backward, double backward", pool_step, &which);
  which = 1;
  sweep("avg_pool2d forward, backward, double backward", pool_step, &which);
  which = 2;
  sweep("adaptive_avg_pool2d forward, backward, double backward", pool_step, &which);
}

/* ---- kernels: each op names the device kernel it runs, so tg_op_supported answers for it ---- */

TG_TEST(pool, each_op_has_its_kernel_on_cpu_and_meta) {
  const char *kernels[][2] = {
      {"max_pool2d", "max_pool2d.window_max"},
      {"avg_pool2d", "avg_pool2d.window_sum"},
      {"adaptive_avg_pool2d", "adaptive_avg_pool2d.window_sum"},
      {"pad", "pad.window_sum"},
      {"pool_gather", "pool_gather.window_sum"},
      {"pool_scatter", "pool_scatter.window_scatter"},
  };
  for (size_t k = 0; k < sizeof kernels / sizeof kernels[0]; k++) {
    cr_assert_not_null(tg__kernel("test", kernels[k][1], TG_DEVICE_CPU), "%s", kernels[k][1]);
    cr_assert(tg_op_supported(tg_op_lookup(kernels[k][0]), TG_DEVICE_CPU), "%s", kernels[k][0]);
    cr_assert(tg_op_supported(tg_op_lookup(kernels[k][0]), TG_DEVICE_META), "%s", kernels[k][0]);
  }
  /* a kernel refuses a call with the wrong number of tensors */
  tg_kernel_fn sum = tg__kernel("test", "avg_pool2d.window_sum", TG_DEVICE_CPU);
  cr_assert_eq(sum(2, (tg_tensor *const[]){NULL, NULL}), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "pool_gather.window_sum: called with 2 tensors, expected 4");
}
