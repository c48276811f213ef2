/* nn init (torch.nn.init): gains and fans against PyTorch's values, the bounds and standard
 * deviations of the kaiming and xavier fills to the last bit (the literals below were
 * printed by torch 2's torch.nn.init arithmetic), fills outside the tape, the errors, and
 * Linear's default init through them. */
#include <math.h>

#include "testutil.h"

#include "alloc_sweep.h"

static const tg_options f64 = {.dtype = TG_F64};

/* ---- gains and fans ---- */

TG_TEST(init, calculate_gain_is_pytorchs) {
  const tg_nonlinearity ones[] = {
      TG_NL_LINEAR,           TG_NL_CONV1D,           TG_NL_CONV2D,           TG_NL_CONV3D,
      TG_NL_CONV_TRANSPOSE1D, TG_NL_CONV_TRANSPOSE2D, TG_NL_CONV_TRANSPOSE3D, TG_NL_SIGMOID};
  for (size_t i = 0; i < sizeof ones / sizeof *ones; i++)
    cr_assert_eq(tg_init_calculate_gain(ones[i], NAN), 1.0);
  cr_assert_eq(tg_init_calculate_gain(TG_NL_TANH, NAN), 1.6666666666666667);
  cr_assert_eq(tg_init_calculate_gain(TG_NL_RELU, 123), 1.4142135623730951); /* param ignored */
  cr_assert_eq(tg_init_calculate_gain(TG_NL_LEAKY_RELU, NAN), 1.4141428569978354); /* 0.01 */
  cr_assert_eq(tg_init_calculate_gain(TG_NL_LEAKY_RELU, 0.2), 1.3867504905630728);
  cr_assert_eq(tg_init_calculate_gain(TG_NL_LEAKY_RELU, sqrt(5.0)), 0.5773502691896257);
  cr_assert_eq(tg_init_calculate_gain(TG_NL_LEAKY_RELU, 0), sqrt(2.0));
  cr_assert_eq(tg_init_calculate_gain(TG_NL_SELU, NAN), 0.75);
  tg_expect_ok();
  cr_assert(isnan(tg_init_calculate_gain((tg_nonlinearity)99, 0)));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_init_calculate_gain", "nonlinearity 99");
}

TG_TEST(init, fans_of_linear_and_conv_weights) {
  int64_t fan_in = -1, fan_out = -1;
  tg_tensor *linear = tg_empty(TG_SHAPE(4, 6), f64);
  cr_assert_eq(tg_init_calculate_fans(linear, &fan_in, &fan_out), TG_OK);
  cr_assert(fan_in == 6 && fan_out == 4);
  /* torch's _calculate_fan_in_and_fan_out(torch.empty(8, 3, 5, 7)) == (105, 280) */
  cr_assert_eq(tg_init_calculate_fans(tg_empty(TG_SHAPE(8, 3, 5, 7), f64), &fan_in, &fan_out),
               TG_OK);
  cr_assert(fan_in == 105 && fan_out == 280);
  /* a grouped conv2d weight [out 16, in/groups 4 (in 8, groups 2), 3, 3] */
  cr_assert_eq(tg_init_calculate_fans(tg_empty(TG_SHAPE(16, 4, 3, 3), f64), &fan_in, NULL), TG_OK);
  cr_assert_eq(fan_in, 36);
  cr_assert_eq(tg_init_calculate_fans(tg_empty(TG_SHAPE(16, 4, 3), f64), NULL, &fan_out), TG_OK);
  cr_assert_eq(fan_out, 48);
  cr_assert_eq(tg_init_calculate_fans(tg_empty(TG_SHAPE(5), f64), &fan_in, &fan_out), TG_ERR_SHAPE);
  tg_expect_error(TG_ERR_SHAPE, "tg_init_calculate_fans", "t is [5]", "fewer than 2 dimensions");
  cr_assert_eq(tg_init_calculate_fans(tg_scalar(1.0, f64), &fan_in, &fan_out), TG_ERR_SHAPE);
  tg_expect_error(TG_ERR_SHAPE, "t is []");
  cr_assert_eq(tg_init_calculate_fans(NULL, &fan_in, &fan_out), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_init_calculate_fans", "t is NULL");
}

/* ---- the random fills: PyTorch's bounds, tg's generator ---- */

/* t filled by `fill` from seed 11 equals tg_uniform_ (uniform) or tg_normal_ with
 * (a, b) from the same seed, bit for bit. */
static void expect_draw(const tg_tensor *t, bool uniform, double a, double b) {
  tg_generator *g = tg_generator_new(11);
  tg_tensor *want = tg_empty(tg_ndim(t), tg_sizes(t), f64);
  cr_assert_eq(uniform ? tg_uniform_(want, a, b, g) : tg_normal_(want, a, b, g), TG_OK);
  cr_assert_eq(tg_test_max_abs_diff(t, want), 0.0, "not the draw (%g, %g)", a, b);
  tg_generator_free(g);
}

TG_TEST(init, kaiming_bounds_are_pytorchs) {
  tg_generator *g = tg_generator_new(11);
  tg_tensor *w = tg_empty(TG_SHAPE(8, 3, 5, 7), f64); /* fan_in 105, fan_out 280 */
  cr_assert_eq(tg_init_kaiming_uniform_(w, 0, TG_FAN_IN, TG_NL_RELU, g), TG_OK);
  expect_draw(w, true, -0.23904572186687872, 0.23904572186687872);
  tg_generator_seed(g, 11);
  cr_assert_eq(tg_init_kaiming_normal_(w, 0, TG_FAN_IN, TG_NL_RELU, g), TG_OK);
  expect_draw(w, false, 0.0, 0.13801311186847084);
  tg_generator_seed(g, 11);
  cr_assert_eq(tg_init_kaiming_uniform_(w, 0, TG_FAN_OUT, TG_NL_LEAKY_RELU, g), TG_OK);
  expect_draw(w, true, -0.14638501094227999, 0.14638501094227999);
  tg_generator_seed(g, 11);
  cr_assert_eq(tg_init_kaiming_normal_(w, 0, TG_FAN_OUT, TG_NL_LEAKY_RELU, g), TG_OK);
  expect_draw(w, false, 0.0, 0.084515425472851666);
  /* Linear's a = sqrt(5) with fan_in 5: PyTorch's bound, one ulp below 1/sqrt(5) */
  tg_tensor *lin = tg_empty(TG_SHAPE(3, 5), f64);
  tg_generator_seed(g, 11);
  cr_assert_eq(tg_init_kaiming_uniform_(lin, sqrt(5.0), TG_FAN_IN, TG_NL_LEAKY_RELU, g), TG_OK);
  expect_draw(lin, true, -0.44721359549995787, 0.44721359549995787);
  tg_generator_free(g);
}

TG_TEST(init, xavier_bounds_are_pytorchs) {
  tg_generator *g = tg_generator_new(11);
  tg_tensor *w = tg_empty(TG_SHAPE(8, 3, 5, 7), f64);
  cr_assert_eq(tg_init_xavier_uniform_(w, 2.0, g), TG_OK);
  expect_draw(w, true, -0.24967511357294372, 0.24967511357294372);
  tg_generator_seed(g, 11);
  cr_assert_eq(tg_init_xavier_normal_(w, 2.0, g), TG_OK);
  expect_draw(w, false, 0.0, 0.14414999403128945);
  tg_generator_free(g);
}

TG_TEST(init, spread_matches_the_distribution) {
  /* 256x256 F64: the sample standard deviation within 2% of the target */
  tg_generator *g = tg_generator_new(3);
  tg_tensor *w = tg_empty(TG_SHAPE(256, 256), f64);
  for (int k = 0; k < 4; k++) {
    double want;
    tg_status st;
    switch (k) {
    case 0:
      st = tg_init_kaiming_normal_(w, 0, TG_FAN_IN, TG_NL_RELU, g), want = sqrt(2.0 / 256);
      break;
    case 1:
      st = tg_init_kaiming_uniform_(w, 0, TG_FAN_OUT, TG_NL_TANH, g), want = 5.0 / 3 / 16;
      break;
    case 2:
      st = tg_init_xavier_normal_(w, 1.0, g), want = sqrt(2.0 / 512);
      break;
    default:
      st = tg_init_xavier_uniform_(w, 3.0, g), want = 3.0 * sqrt(2.0 / 512);
      break;
    }
    cr_assert_eq(st, TG_OK, "%s", tg_last_error_message());
    double mean, sq;
    cr_assert_eq(tg_item(tg_mean(w), &mean), TG_OK);
    cr_assert_eq(tg_item(tg_mean(tg_mul(w, w)), &sq), TG_OK);
    double got = sqrt(sq - mean * mean);
    cr_assert(fabs(got / want - 1) < 0.02, "case %d: std %g, want %g", k, got, want);
    cr_assert(fabs(mean) < 0.02 * want, "case %d: mean %g", k, mean);
  }
  tg_generator_free(g);
}

TG_TEST(init, plain_fills) {
  tg_tensor *t = tg_empty(TG_SHAPE(2, 3), f64);
  cr_assert_eq(tg_init_constant_(t, 0.5), TG_OK);
  tg_test_expect_values(t, 6, (const double[]){0.5, 0.5, 0.5, 0.5, 0.5, 0.5}, 0);
  cr_assert_eq(tg_init_ones_(t), TG_OK);
  tg_test_expect_values(t, 6, (const double[]){1, 1, 1, 1, 1, 1}, 0);
  cr_assert_eq(tg_init_zeros_(t), TG_OK);
  tg_test_expect_values(t, 6, (const double[]){0, 0, 0, 0, 0, 0}, 0);
  /* constant_ takes any dtype, like torch's fill_ (3.7 truncates in an int64 tensor) */
  tg_tensor *i = tg_empty(TG_SHAPE(2), TG_OPTS(.dtype = TG_I64));
  cr_assert_eq(tg_init_constant_(i, 3.7), TG_OK);
  tg_test_expect_values(i, 2, (const double[]){3, 3}, 0);
}

TG_TEST(init, uniform_equals_the_same_draw) {
  tg_generator *g = tg_generator_new(11);
  tg_tensor *t = tg_empty(TG_SHAPE(4, 5), f64);
  cr_assert_eq(tg_init_uniform_(t, -2, 3, g), TG_OK);
  expect_draw(t, true, -2, 3);
  tg_generator_seed(g, 11);
  cr_assert_eq(tg_init_normal_(t, 1, 0.5, g), TG_OK);
  expect_draw(t, false, 1, 0.5);
  tg_generator_free(g);
}

TG_TEST(init, fills_parameters_outside_the_tape) {
  /* a leaf that requires grad, filled without the caller opening a no-grad region */
  tg_tensor *p = tg_zeros(TG_SHAPE(3, 4), TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  cr_assert_eq(tg_init_kaiming_uniform_(p, sqrt(5.0), TG_FAN_IN, TG_NL_LEAKY_RELU, NULL), TG_OK);
  cr_assert_eq(tg_init_xavier_normal_(p, 1, NULL), TG_OK);
  cr_assert_eq(tg_init_constant_(p, 2), TG_OK);
  cr_assert(tg_is_leaf(p) && tg_requires_grad(p) && tg_is_grad_enabled());
  cr_assert_null(tg_grad_fn_name(p));
  /* a non-contiguous target (a transposed view) is filled in place */
  tg_tensor *base = tg_zeros(TG_SHAPE(4, 6), f64);
  cr_assert_eq(tg_init_ones_(tg_t(base)), TG_OK);
  cr_assert_eq(tg_init_kaiming_uniform_(tg_t(base), 0, TG_FAN_IN, TG_NL_RELU, NULL), TG_OK);
  double m;
  cr_assert_eq(tg_item(tg_max(tg_abs(base)), &m), TG_OK);
  cr_assert(m > 0 && m <= sqrt(3.0) * sqrt(2.0) / 2, "max %g", m); /* fan_in of [6, 4] is 4 */
}

TG_TEST(init, empty_tensors) {
  tg_generator *g = tg_generator_new(1);
  tg_generator_state before = tg_generator_get_state(g);
  /* kaiming leaves a tensor without elements alone (PyTorch warns), even a 1-D one */
  cr_assert_eq(
      tg_init_kaiming_uniform_(tg_empty(TG_SHAPE(0, 0), f64), 0, TG_FAN_IN, TG_NL_LEAKY_RELU, g),
      TG_OK);
  cr_assert_eq(tg_init_kaiming_normal_(tg_empty(TG_SHAPE(0), f64), 0, TG_FAN_IN, TG_NL_RELU, g),
               TG_OK);
  cr_assert_eq(tg_init_xavier_uniform_(tg_empty(TG_SHAPE(0, 5), f64), 1, g), TG_OK);
  cr_assert_eq(tg_generator_get_state(g).offset, before.offset);
  /* xavier with fan_in + fan_out 0: PyTorch divides by zero */
  cr_assert_eq(tg_init_xavier_uniform_(tg_empty(TG_SHAPE(0, 0), f64), 1, g), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_init_xavier_uniform_", "[0, 0]", "fan_in + fan_out is 0");
  cr_assert_eq(tg_init_xavier_normal_(tg_empty(TG_SHAPE(0, 0, 3), f64), 1, g), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_init_xavier_normal_");
  tg_generator_free(g);
}

TG_TEST(init, errors) {
  tg_tensor *v = tg_empty(TG_SHAPE(5), f64), *w = tg_empty(TG_SHAPE(2, 2), f64);
  cr_assert_eq(tg_init_kaiming_uniform_(v, 0, TG_FAN_IN, TG_NL_RELU, NULL), TG_ERR_SHAPE);
  tg_expect_error(TG_ERR_SHAPE, "tg_init_kaiming_uniform_", "t is [5]", "fewer than 2 dimensions");
  cr_assert_eq(tg_init_kaiming_normal_(tg_scalar(1, f64), 0, TG_FAN_IN, TG_NL_RELU, NULL),
               TG_ERR_SHAPE);
  tg_expect_error(TG_ERR_SHAPE, "tg_init_kaiming_normal_", "t is []");
  cr_assert_eq(tg_init_xavier_uniform_(v, 1, NULL), TG_ERR_SHAPE);
  tg_expect_error(TG_ERR_SHAPE, "tg_init_xavier_uniform_", "fewer than 2 dimensions");
  cr_assert_eq(tg_init_kaiming_uniform_(w, 0, (tg_fan_mode)7, TG_NL_RELU, NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_init_kaiming_uniform_", "mode 7");
  cr_assert_eq(tg_init_kaiming_normal_(w, 0, TG_FAN_IN, (tg_nonlinearity)-1, NULL),
               TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_init_kaiming_normal_", "nonlinearity -1");
  /* the random fills need floating tensors */
  tg_tensor *i = tg_empty(TG_SHAPE(2, 2), TG_OPTS(.dtype = TG_I64));
  cr_assert_eq(tg_init_kaiming_uniform_(i, 0, TG_FAN_IN, TG_NL_RELU, NULL), TG_ERR_DTYPE);
  tg_expect_error(TG_ERR_DTYPE, "tg_init_kaiming_uniform_", "t is int64");
  cr_assert_eq(tg_init_normal_(i, 0, 1, NULL), TG_ERR_DTYPE);
  tg_expect_error(TG_ERR_DTYPE, "tg_init_normal_");
  /* what the draws refuse, named by the init function */
  cr_assert_eq(tg_init_uniform_(w, 1, 0, NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_init_uniform_: ", "low 1 must not exceed high 0");
  cr_assert_eq(tg_init_normal_(w, 0, -1, NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_init_normal_: ", "std -1");
  cr_assert_eq(tg_init_xavier_uniform_(w, -1, NULL), TG_ERR_ARGUMENT); /* bound < 0 */
  tg_expect_error(TG_ERR_ARGUMENT, "tg_init_xavier_uniform_: ");
  cr_assert_eq(tg_init_constant_(tg_empty(TG_SHAPE(2), TG_OPTS_DEFAULT), 1e300), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_init_constant_: ");
  /* NULL tensors */
  tg_status (*const nulls[])(tg_tensor *) = {tg_init_zeros_, tg_init_ones_};
  for (int k = 0; k < 2; k++) {
    cr_assert_eq(nulls[k](NULL), TG_ERR_ARGUMENT);
    tg_expect_error(TG_ERR_ARGUMENT, "t is NULL");
  }
  cr_assert_eq(tg_init_xavier_normal_(NULL, 1, NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_init_xavier_normal_", "t is NULL");
  cr_assert_eq(tg_init_kaiming_uniform_(NULL, 0, TG_FAN_IN, TG_NL_RELU, NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_init_kaiming_uniform_", "t is NULL");
}

/* ---- Linear's default init is PyTorch's, through these functions ---- */

TG_TEST(init, linear_default_init_is_kaiming_uniform_sqrt5) {
  for (int dt = 0; dt < 2; dt++) {
    tg_options o = dt ? f64 : TG_OPTS_DEFAULT;
    tg_generator *g = tg_generator_new(21), *h = tg_generator_new(21);
    tg_linear *l = tg_linear_new(5, 3, true, o, g);
    cr_assert_not_null(l, "%s", tg_last_error_message());
    tg_scope sc = tg_scope_begin();
    tg_tensor *w = tg_empty(TG_SHAPE(3, 5), o), *b = tg_empty(TG_SHAPE(3), o);
    /* torch.nn.Linear.reset_parameters: the weight, then the bias from the same generator */
    cr_assert_eq(tg_uniform_(w, -0.44721359549995787, 0.44721359549995787, h), TG_OK);
    cr_assert_eq(tg_uniform_(b, -1 / sqrt(5.0), 1 / sqrt(5.0), h), TG_OK);
    cr_assert_eq(tg_test_max_abs_diff(tg_linear_weight(l), w), 0.0);
    cr_assert_eq(tg_test_max_abs_diff(tg_linear_bias(l), b), 0.0);
    cr_assert_eq(tg_generator_get_state(g).offset, tg_generator_get_state(h).offset);
    tg_scope_end(sc);
    tg_linear_free(l);
    tg_generator_free(g);
    tg_generator_free(h);
  }
}

/* ---- allocation failures ---- */

static tg_status init_step(void *user, double *out, int *n_out) {
  (void)user;
  tg_generator *g = tg_generator_new(2);
  tg_tensor *t = g ? tg_empty(TG_SHAPE(3, 2, 2), f64) : NULL;
  tg_tensor *tt = t ? tg_transpose(t, 0, 2) : NULL; /* non-contiguous: a staging buffer */
  tg_status st = status_of(tt);
  if (st == TG_OK) st = clean(tg_init_kaiming_uniform_(tt, 0, TG_FAN_IN, TG_NL_RELU, g));
  if (st == TG_OK) st = append(t, out, n_out);
  if (st == TG_OK) st = clean(tg_init_xavier_normal_(tt, 1, g));
  if (st == TG_OK) st = append(t, out, n_out);
  if (st == TG_OK) st = clean(tg_init_constant_(tt, 3));
  if (st == TG_OK) st = append(t, out, n_out);
  tg_generator_free(g);
  return st;
}

TG_TEST(init, alloc_failure) { cr_assert_gt(sweep("init functions", init_step, NULL).failed, 0); }
