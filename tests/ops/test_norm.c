/* batch_norm, layer_norm and group_norm (include/tg/norm.h) and the op behind them,
 * normalize_groups: values against loop references, running statistics, eval against
 * train, the kernel backward against the composed one, OpInfo (gradcheck and
 * gradgradcheck), PyTorch's rules at the edges, errors, allocation failures. */
#include <math.h>

#include "testutil.h"

#include "alloc_sweep.h"

static const tg_options f64 = {.dtype = TG_F64};

static tg_tensor *randn(tg_generator *gen, tg_dtype dt, int ndim, const int64_t *sizes, bool grad) {
  tg_tensor *t = tg_randn(ndim, sizes, (tg_options){.dtype = dt}, gen);
  cr_assert_not_null(t, "%s", tg_last_error_message());
  if (grad) cr_assert_eq(tg_set_requires_grad(t, true), TG_OK);
  return t;
}

/* The reference: x as [A, G, I] groups (after a permutation the caller made), each group's
 * elements normalized with its biased variance, then w[c] x + b[c] with c = channel_of. */
typedef int64_t (*channel_fn)(int64_t flat, const int64_t *sizes);

static void reference(const tg_tensor *x, int64_t n_groups,
                      int64_t (*group_of)(int64_t, const int64_t *), channel_fn channel_of,
                      const double *w, const double *b, double eps, double *y, double *mean_out,
                      double *var_out) {
  const int64_t n = tg_numel(x);
  const int64_t *sizes = tg_sizes(x);
  double sum[64] = {0}, sq[64] = {0}, count[64] = {0};
  for (int64_t e = 0; e < n; e++) {
    const int64_t g = group_of(e, sizes);
    sum[g] += tg_test_at(x, e);
    count[g] += 1;
  }
  for (int64_t e = 0; e < n; e++) {
    const int64_t g = group_of(e, sizes);
    const double d = tg_test_at(x, e) - sum[g] / count[g];
    sq[g] += d * d;
  }
  for (int64_t e = 0; e < n; e++) {
    const int64_t g = group_of(e, sizes), c = channel_of(e, sizes);
    const double m = sum[g] / count[g], v = sq[g] / count[g];
    y[e] = (tg_test_at(x, e) - m) / sqrt(v + eps) * (w ? w[c] : 1) + (b ? b[c] : 0);
  }
  for (int64_t g = 0; g < n_groups && mean_out; g++) {
    mean_out[g] = sum[g] / count[g];
    var_out[g] = sq[g] / count[g];
  }
}

/* [N, C, L]: group = channel = c */
static int64_t bn_channel(int64_t e, const int64_t *s) { return (e / s[2]) % s[1]; }
/* [M, D]: group = row, channel = column */
static int64_t ln_group(int64_t e, const int64_t *s) { return e / s[1]; }
static int64_t ln_channel(int64_t e, const int64_t *s) { return e % s[1]; }
/* [N, C, L] in 3 groups (C = 6): group = n * 3 + c / 2 */
static int64_t gn_group(int64_t e, const int64_t *s) {
  return (e / (s[1] * s[2])) * 3 + ((e / s[2]) % s[1]) / (s[1] / 3);
}

static double *values_of(const tg_tensor *t, double *out) {
  for (int64_t e = 0; e < tg_numel(t); e++) out[e] = tg_test_at(t, e);
  return out;
}

TG_TEST(batch_norm, training_matches_the_loop_reference_and_updates_running_stats) {
  tg_generator *gen = tg_generator_new(1);
  tg_tensor *x = randn(gen, TG_F64, TG_SHAPE(4, 3, 5), false);
  tg_tensor *w = randn(gen, TG_F64, TG_SHAPE(3), false),
            *b = randn(gen, TG_F64, TG_SHAPE(3), false);
  tg_tensor *rm = randn(gen, TG_F64, TG_SHAPE(3), false);
  tg_tensor *rv = tg_add_scalar(tg_abs(randn(gen, TG_F64, TG_SHAPE(3), false)), 0.5);
  double wv[3], bv[3], rm0[3], rv0[3], want[60], mean[3], var[3];
  values_of(w, wv), values_of(b, bv), values_of(rm, rm0), values_of(rv, rv0);
  reference(x, 3, bn_channel, bn_channel, wv, bv, 1e-5, want, mean, var);
  tg_tensor *y = tg_batch_norm(x, rm, rv, w, b, (tg_batch_norm_options){.training = true});
  cr_assert_not_null(y, "%s", tg_last_error_message());
  tg_test_expect_values(y, 60, want, 1e-12);
  double want_rm[3], want_rv[3];
  for (int c = 0; c < 3; c++) {
    want_rm[c] = 0.9 * rm0[c] + 0.1 * mean[c];
    want_rv[c] = 0.9 * rv0[c] + 0.1 * var[c] * 20.0 / 19.0; /* unbiased: N L = 20 */
  }
  tg_test_expect_values(rm, 3, want_rm, 1e-12);
  tg_test_expect_values(rv, 3, want_rv, 1e-12);
  cr_assert_null(tg_grad_fn_name(rm), "running stats are written outside the tape");
  /* momentum and eps given; no affine */
  reference(x, 3, bn_channel, bn_channel, NULL, NULL, 1e-3, want, NULL, NULL);
  y = tg_batch_norm(x, rm, rv, NULL, NULL,
                    (tg_batch_norm_options){.training = true, .momentum = 0.5, .eps = 1e-3});
  tg_test_expect_values(y, 60, want, 1e-12);
  for (int c = 0; c < 3; c++) want_rm[c] = 0.5 * want_rm[c] + 0.5 * mean[c];
  tg_test_expect_values(rm, 3, want_rm, 1e-12);
  /* TG_NORM_ZERO momentum: running stats unchanged */
  y = tg_batch_norm(x, rm, rv, NULL, NULL,
                    (tg_batch_norm_options){.training = true, .momentum = TG_NORM_ZERO});
  tg_test_expect_values(rm, 3, want_rm, 1e-15);
  tg_generator_free(gen);
}

TG_TEST(batch_norm, eval_uses_the_running_stats_and_2d_4d_inputs_work) {
  tg_generator *gen = tg_generator_new(2);
  for (int nd = 2; nd <= 4; nd++) {
    const int64_t sizes[4] = {3, 2, 2, 3};
    tg_tensor *x = randn(gen, TG_F64, nd, sizes, false);
    const double rmv[2] = {0.5, -1}, rvv[2] = {2, 0.25}, wv[2] = {1.5, -2}, bv[2] = {0.1, 0.2};
    tg_tensor *rm = tg_from_data(TG_SHAPE(2), rmv, f64), *rv = tg_from_data(TG_SHAPE(2), rvv, f64);
    tg_tensor *w = tg_from_data(TG_SHAPE(2), wv, f64), *b = tg_from_data(TG_SHAPE(2), bv, f64);
    tg_tensor *y = tg_batch_norm(x, rm, rv, w, b, (tg_batch_norm_options){0});
    cr_assert_not_null(y, "%s", tg_last_error_message());
    int64_t inner = 1;
    for (int d = 2; d < nd; d++) inner *= sizes[d];
    double want[36];
    for (int64_t e = 0; e < tg_numel(x); e++) {
      const int64_t c = (e / inner) % 2;
      want[e] = (tg_test_at(x, e) - rmv[c]) / sqrt(rvv[c] + 1e-5) * wv[c] + bv[c];
    }
    tg_test_expect_values(y, tg_numel(x), want, 1e-12);
    tg_test_expect_values(rm, 2, rmv, 0); /* eval never writes them */
    /* training on the same input: batch statistics, so y differs from eval's */
    tg_tensor *yt = tg_batch_norm(x, NULL, NULL, w, b, (tg_batch_norm_options){.training = true});
    cr_assert_not_null(yt, "%s", tg_last_error_message());
    cr_assert_gt(tg_max_abs_diff(y, yt), 1e-3);
  }
  tg_generator_free(gen);
}

TG_TEST(layer_norm, and_group_norm_match_the_loop_reference) {
  tg_generator *gen = tg_generator_new(3);
  tg_tensor *x = randn(gen, TG_F64, TG_SHAPE(5, 4), false);
  tg_tensor *w = randn(gen, TG_F64, TG_SHAPE(4), false),
            *b = randn(gen, TG_F64, TG_SHAPE(4), false);
  double wv[6], bv[6], want[60];
  values_of(w, wv), values_of(b, bv);
  reference(x, 5, ln_group, ln_channel, wv, bv, 1e-5, want, NULL, NULL);
  tg_tensor *y = tg_layer_norm(x, 1, (const int64_t[]){4}, w, b, (tg_layer_norm_options){0});
  cr_assert_not_null(y, "%s", tg_last_error_message());
  tg_test_expect_values(y, 20, want, 1e-12);
  /* two normalized dims: [2, 5, 4] over [5, 4] is the layer norm of two [20] rows */
  tg_tensor *x3 = randn(gen, TG_F64, TG_SHAPE(2, 5, 4), false);
  tg_tensor *y3 = tg_layer_norm(x3, 2, (const int64_t[]){5, 4}, NULL, NULL,
                                (tg_layer_norm_options){.eps = 1e-3});
  tg_tensor *flat = tg_reshape(x3, 2, (const int64_t[]){2, 20});
  reference(flat, 2, ln_group, ln_channel, NULL, NULL, 1e-3, want, NULL, NULL);
  tg_test_expect_values(y3, 40, want, 1e-12);
  /* group_norm: [2, 6, 5] in 3 groups */
  tg_tensor *xg = randn(gen, TG_F64, TG_SHAPE(2, 6, 5), false);
  tg_tensor *wg = randn(gen, TG_F64, TG_SHAPE(6), false),
            *bg = randn(gen, TG_F64, TG_SHAPE(6), false);
  values_of(wg, wv), values_of(bg, bv);
  reference(xg, 6, gn_group, bn_channel, wv, bv, 1e-5, want, NULL, NULL);
  tg_tensor *yg = tg_group_norm(xg, 3, wg, bg, (tg_group_norm_options){0});
  cr_assert_not_null(yg, "%s", tg_last_error_message());
  tg_test_expect_values(yg, 60, want, 1e-12);
  tg_generator_free(gen);
}

/* layer_norm's weight and bias gradients split their channels in one range per thread
 * (norm_cpu.c): on 1, 2 and 3 threads, with 200 channels (ranges of 112 + 88, and 80 + 80 +
 * 40), every channel's sum is the same to the bit as on one thread (each sums its rows in
 * order), and the input's gradient too. */
TG_TEST(layer_norm, gradients_are_the_same_bits_on_any_thread_count) {
  double *want[3] = {NULL, NULL, NULL};
  const int64_t rows = 512, channels = 200;
  for (int threads = 1; threads <= 3; threads++) {
    tg_set_num_threads(threads);
    tg_scope sc = tg_scope_begin();
    tg_generator *gen = tg_generator_new(11);
    tg_tensor *x = randn(gen, TG_F32, TG_SHAPE(rows, channels), true);
    tg_tensor *w = randn(gen, TG_F32, TG_SHAPE(channels), true);
    tg_tensor *b = randn(gen, TG_F32, TG_SHAPE(channels), true);
    tg_tensor *dy = randn(gen, TG_F32, TG_SHAPE(rows, channels), false);
    tg_tensor *y =
        tg_layer_norm(x, 1, (const int64_t[]){channels}, w, b, (tg_layer_norm_options){0});
    cr_assert_not_null(y, "%s", tg_last_error_message());
    cr_assert_eq(tg_backward(y, dy), TG_OK, "%s", tg_last_error_message());
    const tg_tensor *grads[3] = {tg_grad(x), tg_grad(w), tg_grad(b)};
    for (int g = 0; g < 3; g++) {
      const size_t bytes = (size_t)tg_numel(grads[g]) * sizeof(float);
      if (threads == 1) {
        want[g] = malloc(bytes);
        memcpy(want[g], tg_data_ptr(grads[g]), bytes);
      } else {
        cr_assert_eq(memcmp(want[g], tg_data_ptr(grads[g]), bytes), 0,
                     "gradient %d on %d threads: other bits", g, threads);
      }
    }
    tg_generator_free(gen);
    tg_scope_end(sc);
  }
  for (int g = 0; g < 3; g++) free(want[g]);
  tg_set_num_threads(0);
}

/* The same three norms composed from public tg ops, as the gradients' reference. */
static tg_tensor *composed_norm(const tg_tensor *x3, const int *dims, int n_dims,
                                const tg_tensor *w, const tg_tensor *b, double eps) {
  tg_tensor *mean = tg_mean_dim(x3, dims[n_dims - 1], true);
  for (int k = n_dims - 2; k >= 0; k--) mean = tg_mean_dim(mean, dims[k], true);
  tg_tensor *var = tg_var(x3, n_dims, dims, 0, true);
  tg_tensor *h = tg_div(tg_sub(x3, mean), tg_sqrt(tg_add_scalar(var, eps)));
  return tg_add(tg_mul(h, w), b);
}

TG_TEST(batch_norm, kernel_backward_agrees_with_the_composed_ops_f32_and_f64) {
  tg_generator *gen = tg_generator_new(4);
  for (int d = 0; d < 2; d++) {
    const tg_dtype dt = d ? TG_F64 : TG_F32;
    const double tol = d ? 1e-10 : 2e-4;
    tg_scope sc = tg_scope_begin();
    tg_tensor *x = randn(gen, dt, TG_SHAPE(6, 4, 7), true);
    tg_tensor *w = randn(gen, dt, TG_SHAPE(4), true), *b = randn(gen, dt, TG_SHAPE(4), true);
    tg_tensor *x2 = tg_detach(x), *w2 = tg_detach(w), *b2 = tg_detach(b);
    tg_set_requires_grad(x2, true), tg_set_requires_grad(w2, true), tg_set_requires_grad(b2, true);
    tg_tensor *y = tg_batch_norm(x, NULL, NULL, w, b, (tg_batch_norm_options){.training = true});
    tg_tensor *y2 =
        composed_norm(x2, (const int[]){0, 2}, 2, tg_reshape(w2, 2, (const int64_t[]){4, 1}),
                      tg_reshape(b2, 2, (const int64_t[]){4, 1}), 1e-5);
    cr_assert_not_null(y, "%s", tg_last_error_message());
    cr_assert_not_null(y2, "%s", tg_last_error_message());
    tg_assert_close(y, y2, tol, tol);
    tg_tensor *g = randn(gen, dt, TG_SHAPE(6, 4, 7), false);
    cr_assert_eq(tg_backward(y, g), TG_OK, "%s", tg_last_error_message());
    cr_assert_eq(tg_backward(y2, g), TG_OK, "%s", tg_last_error_message());
    tg_assert_close(tg_grad(x), tg_grad(x2), tol, tol);
    tg_assert_close(tg_grad(w), tg_grad(w2), tol * 10, tol * 10);
    tg_assert_close(tg_grad(b), tg_grad(b2), tol * 10, tol * 10);
    tg_scope_end(sc);
  }
  tg_generator_free(gen);
}

TG_TEST(normalize_groups, passes_its_opinfo_checks) {
  /* gradcheck and gradgradcheck in F64 on every sample (the three layouts, transposed x,
   * affine with and without grad, an empty batch), every output (y, mean, var) */
  const tg_op_desc *op = tg_op_lookup("normalize_groups");
  cr_assert_not_null(op);
  tg_op_check_options opts = {.gradcheck = {.quiet = true}};
  cr_assert_eq(tg_op_check(op, opts), TG_OK, "%s", tg_last_error_message());
}

typedef struct front_call {
  int which; /* 0 batch_norm train, 1 layer_norm, 2 group_norm, 3 batch_norm eval */
} front_call;

static tg_status call_front(void *user, const tg_tensor *const *in, tg_tensor **out) {
  const front_call *c = user;
  const tg_tensor *x = in[0], *w = in[1], *b = in[2];
  if (c->which == 0)
    out[0] = tg_batch_norm(x, NULL, NULL, w, b, (tg_batch_norm_options){.training = true});
  else if (c->which == 1)
    out[0] = tg_layer_norm(x, 2, (const int64_t[]){3, 4}, tg_reshape(w, 2, (const int64_t[]){3, 4}),
                           tg_reshape(b, 2, (const int64_t[]){3, 4}), (tg_layer_norm_options){0});
  else if (c->which == 2)
    out[0] = tg_group_norm(x, 2, tg_narrow(w, 0, 0, 4), tg_narrow(b, 0, 0, 4),
                           (tg_group_norm_options){0});
  else {
    tg_tensor *rm = tg_full(1, (const int64_t[]){3}, 0.25, f64);
    tg_tensor *rv = tg_full(1, (const int64_t[]){3}, 1.5, f64);
    out[0] = tg_batch_norm(x, rm, rv, tg_narrow(w, 0, 0, 3), tg_narrow(b, 0, 0, 3),
                           (tg_batch_norm_options){0});
  }
  return out[0] ? TG_OK : tg_last_error();
}

TG_TEST(norm_front_ends, gradcheck_and_gradgradcheck_in_f64) {
  tg_generator *gen = tg_generator_new(5);
  const int64_t xs[4][3] = {{4, 3, 2}, {2, 3, 4}, {2, 4, 3}, {2, 3, 2}};
  const int64_t ws[4] = {3, 12, 4, 3};
  for (int k = 0; k < 4; k++) {
    tg_scope sc = tg_scope_begin();
    tg_tensor *in[3] = {randn(gen, TG_F64, 3, xs[k], true), randn(gen, TG_F64, 1, &ws[k], true),
                        randn(gen, TG_F64, 1, &ws[k], true)};
    front_call c = {k};
    tg_gradcheck_options o = {.quiet = true};
    cr_assert_eq(tg_gradcheck(call_front, &c, 3, in, 1, o), TG_OK, "%d: %s", k,
                 tg_last_error_message());
    cr_assert_eq(tg_gradgradcheck(call_front, &c, 3, in, 1, o), TG_OK, "%d: %s", k,
                 tg_last_error_message());
    tg_scope_end(sc);
  }
  tg_generator_free(gen);
}

TG_TEST(batch_norm, edges_follow_pytorch) {
  tg_scope sc = tg_scope_begin();
  /* constant input: var 0, y = bias, dx finite (0 for a constant upstream gradient) */
  tg_tensor *x =
      tg_full(3, (const int64_t[]){3, 2, 2}, 7.0, TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  tg_tensor *b = tg_from_data(TG_SHAPE(2), (const double[]){0.5, -1}, f64);
  tg_tensor *y = tg_batch_norm(x, NULL, NULL, NULL, b, (tg_batch_norm_options){.training = true});
  cr_assert_not_null(y, "%s", tg_last_error_message());
  for (int64_t e = 0; e < 12; e++)
    cr_assert_float_eq(tg_test_at(y, e), e / 2 % 2 ? -1 : 0.5, 1e-12);
  cr_assert_eq(tg_backward(tg_sum(y), NULL), TG_OK);
  cr_assert(tg_all_finite(tg_grad(x)));
  /* a NaN reaches its channel only */
  const double xv[4] = {1, NAN, 2, 3};
  tg_tensor *xn = tg_from_data(TG_SHAPE(2, 2), xv, f64);
  tg_tensor *yn =
      tg_batch_norm(xn, NULL, NULL, NULL, NULL, (tg_batch_norm_options){.training = true});
  cr_assert(isfinite(tg_test_at(yn, 0)) && isnan(tg_test_at(yn, 1)) && isnan(tg_test_at(yn, 3)));
  /* an empty batch: empty y, running stats unchanged (PyTorch) */
  tg_tensor *rm = tg_zeros(TG_SHAPE(3), f64), *rv = tg_ones(TG_SHAPE(3), f64);
  tg_tensor *ye = tg_batch_norm(tg_zeros(TG_SHAPE(0, 3), f64), rm, rv, NULL, NULL,
                                (tg_batch_norm_options){.training = true});
  cr_assert_not_null(ye, "%s", tg_last_error_message());
  tg_assert_sizes(ye, 0, 3);
  tg_test_expect_values(rv, 3, (const double[]){1, 1, 1}, 0);
  /* one value per channel in training: PyTorch's error; in eval it is fine */
  cr_assert_null(tg_batch_norm(tg_zeros(TG_SHAPE(1, 3), f64), NULL, NULL, NULL, NULL,
                               (tg_batch_norm_options){.training = true}));
  tg_expect_error(TG_ERR_SHAPE, "tg_batch_norm",
                  "Expected more than 1 value per channel when training, got input size [1, 3]");
  cr_assert_null(tg_batch_norm(tg_zeros(TG_SHAPE(1, 3, 1), f64), NULL, NULL, NULL, NULL,
                               (tg_batch_norm_options){.training = true}));
  tg_expect_error(TG_ERR_SHAPE, "[1, 3, 1]");
  cr_assert_not_null(tg_batch_norm(tg_zeros(TG_SHAPE(1, 3, 2), f64), NULL, NULL, NULL, NULL,
                                   (tg_batch_norm_options){.training = true}));
  cr_assert_not_null(
      tg_batch_norm(tg_zeros(TG_SHAPE(1, 3), f64), rm, rv, NULL, NULL, (tg_batch_norm_options){0}));
  tg_scope_end(sc);
}

TG_TEST(norm_front_ends, refuse_bad_inputs_naming_them) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_zeros(TG_SHAPE(2, 3, 4), f64), *c3 = tg_zeros(TG_SHAPE(3), f64);
  const tg_batch_norm_options train = {.training = true};
  cr_assert_null(tg_batch_norm(x, NULL, NULL, NULL, NULL, (tg_batch_norm_options){0}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_batch_norm",
                  "running_mean must be defined in evaluation mode");
  cr_assert_null(tg_batch_norm(x, c3, NULL, NULL, NULL, train));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_batch_norm", "both be NULL or neither");
  cr_assert_null(
      tg_batch_norm(x, tg_zeros(TG_SHAPE(4), f64), tg_zeros(TG_SHAPE(4), f64), NULL, NULL, train));
  tg_expect_error(TG_ERR_SHAPE, "tg_batch_norm", "running_mean is [4]", "must be [3]");
  cr_assert_null(tg_batch_norm(x, NULL, NULL, tg_zeros(TG_SHAPE(4), f64), NULL, train));
  tg_expect_error(TG_ERR_SHAPE, "tg_batch_norm", "weight is [4], must be [3]");
  cr_assert_null(tg_batch_norm(x, NULL, NULL, NULL,
                               tg_zeros(TG_SHAPE(3), (tg_options){.dtype = TG_F32}), train));
  tg_expect_error(TG_ERR_DTYPE, "tg_batch_norm", "bias");
  cr_assert_null(tg_batch_norm(tg_zeros(TG_SHAPE(3), f64), NULL, NULL, NULL, NULL, train));
  tg_expect_error(TG_ERR_SHAPE, "tg_batch_norm", "at least 2-D", "[3]");
  cr_assert_null(tg_batch_norm(tg_zeros(TG_SHAPE(2, 3), (tg_options){.dtype = TG_I64}), NULL, NULL,
                               NULL, NULL, train));
  tg_expect_error(TG_ERR_DTYPE, "tg_batch_norm", "x");
  cr_assert_null(tg_batch_norm(x, NULL, NULL, NULL, NULL,
                               (tg_batch_norm_options){.training = true, .momentum = -0.5}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_batch_norm", "momentum -0.5 must be non-negative");
  cr_assert_null(tg_batch_norm(x, NULL, NULL, NULL, NULL,
                               (tg_batch_norm_options){.training = true, .eps = NAN}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_batch_norm", "eps nan");
  cr_assert_null(tg_layer_norm(x, 1, (const int64_t[]){3}, NULL, NULL, (tg_layer_norm_options){0}));
  tg_expect_error(TG_ERR_SHAPE, "tg_layer_norm",
                  "Given normalized_shape=[3], expected input with shape [*, 3], but got input of "
                  "size [2, 3, 4]");
  cr_assert_null(
      tg_layer_norm(x, 4, (const int64_t[]){1, 2, 3, 4}, NULL, NULL, (tg_layer_norm_options){0}));
  tg_expect_error(TG_ERR_SHAPE, "tg_layer_norm", "normalized_shape=[1, 2, 3, 4]");
  cr_assert_null(tg_layer_norm(x, 0, NULL, NULL, NULL, (tg_layer_norm_options){0}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_layer_norm", "1 to 8 dims, got 0");
  cr_assert_null(tg_layer_norm(x, 1, (const int64_t[]){4}, c3, NULL, (tg_layer_norm_options){0}));
  tg_expect_error(TG_ERR_SHAPE, "tg_layer_norm", "weight is [3], must be [4]");
  cr_assert_null(
      tg_group_norm(tg_zeros(TG_SHAPE(2, 6, 3), f64), 4, NULL, NULL, (tg_group_norm_options){0}));
  tg_expect_error(TG_ERR_SHAPE, "tg_group_norm",
                  "Expected number of channels in input to be divisible by num_groups, but got "
                  "input of shape [2, 6, 3] and num_groups=4");
  cr_assert_null(tg_group_norm(x, 0, NULL, NULL, (tg_group_norm_options){0}));
  tg_expect_error(TG_ERR_SHAPE, "tg_group_norm", "num_groups=0");
  cr_assert_null(
      tg_group_norm(tg_zeros(TG_SHAPE(2, 4, 0), f64), 2, NULL, NULL, (tg_group_norm_options){0}));
  tg_expect_error(TG_ERR_SHAPE, "tg_group_norm", "Expected HxW to be greater than 0");
  /* the op itself, reached by name with a layout that does not fit */
  const tg_op_desc *op = tg_op_lookup("normalize_groups");
  tg_tensor *outs[3];
  cr_assert_neq(tg_apply_ex(op, 3, (const tg_tensor *const[]){x, c3, c3}, 1, (const double[]){1e-5},
                            5, (const int64_t[]){2, 1, 3, 5, 3}, 3, outs),
                TG_OK);
  tg_expect_error(TG_ERR_SHAPE, "normalize_groups", "does not fit x [2, 3, 4]");
  /* sizes whose product overflows int64 */
  cr_assert_neq(tg_apply_ex(op, 3, (const tg_tensor *const[]){x, c3, c3}, 1, (const double[]){1e-5},
                            5, (const int64_t[]){INT64_MAX / 2, 4, 3, INT64_MAX / 3, 3}, 3, outs),
                TG_OK);
  tg_expect_error(TG_ERR_SHAPE, "normalize_groups", "does not fit x [2, 3, 4]");
  tg_scope_end(sc);
}

TG_TEST(normalize_groups, runs_on_the_meta_device) {
  tg_scope sc = tg_scope_begin();
  const tg_options meta = {.dtype = TG_F32, .device = TG_DEVICE_META};
  tg_tensor *y =
      tg_group_norm(tg_zeros(TG_SHAPE(2, 4, 3), meta), 2, NULL, NULL, (tg_group_norm_options){0});
  cr_assert_not_null(y, "%s", tg_last_error_message());
  tg_assert_sizes(y, 2, 4, 3);
  tg_scope_end(sc);
}

/* ---- allocation failures: forward, backward and the running-stat update ---- */

static tg_status norm_step(void *user, double *out, int *n_out) {
  const int which = *(const int *)user;
  const double xv[12] = {-1.5, -0.25, 0, 0.5, 1, 3, 2, -2, 0.75, 1.25, -0.5, 4};
  tg_tensor *x =
      tg_from_data(TG_SHAPE(2, 3, 2), xv, TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  tg_tensor *w = x ? tg_from_data(TG_SHAPE(3), (const double[]){0.5, 1, 2},
                                  TG_OPTS(.dtype = TG_F64, .requires_grad = true))
                   : NULL;
  tg_tensor *rm = w ? tg_from_data(TG_SHAPE(3), (const double[]){0.1, 0.2, 0.3}, f64) : NULL;
  tg_tensor *rv = rm ? tg_from_data(TG_SHAPE(3), (const double[]){1, 2, 3}, f64) : NULL;
  tg_tensor *y = NULL;
  if (rv && which == 0)
    y = tg_batch_norm(tg_transpose(tg_contiguous(tg_transpose(x, 0, 2)), 0, 2), rm, rv, w, w,
                      (tg_batch_norm_options){.training = true});
  else if (rv && which == 1)
    y = tg_layer_norm(x, 1, (const int64_t[]){2}, NULL, NULL, (tg_layer_norm_options){0});
  else if (rv)
    y = tg_group_norm(x, 3, w, NULL, (tg_group_norm_options){0});
  tg_status st = status_of(y);
  if (st != TG_OK && rv) {
    /* all or nothing: a failed call leaves the running statistics as they were */
    const double rm0[3] = {0.1, 0.2, 0.3}, rv0[3] = {1, 2, 3};
    for (int64_t c = 0; c < 3; c++)
      if (tg_test_at(rm, c) != rm0[c] || tg_test_at(rv, c) != rv0[c]) return TG_ERR_STATE;
  }
  if (st == TG_OK) st = append(y, out, n_out);
  if (st == TG_OK && which == 0) st = append(rm, out, n_out);
  if (st == TG_OK && which == 0) st = append(rv, out, n_out);
  if (st == TG_OK) st = clean(tg_backward(tg_sum(tg_mul(y, y)), NULL));
  if (st == TG_OK) st = append(tg_grad(x), out, n_out);
  if (st == TG_OK && which != 1) st = append(tg_grad(w), out, n_out);
  return st;
}

TG_TEST(norm_front_ends, allocation_failures) {
  const int which[3] = {0, 1, 2};
  sweep("batch_norm training forward, running stats and backward", norm_step, (void *)&which[0]);
  sweep("layer_norm forward and backward", norm_step, (void *)&which[1]);
  sweep("group_norm forward and backward", norm_step, (void *)&which[2]);
}
