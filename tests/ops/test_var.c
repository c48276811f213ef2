/* tg_var and tg_std (include/tg/norm.h): values against loops over dim lists, keepdim,
 * correction (PyTorch's inf/NaN where N - correction <= 0), empty and constant inputs,
 * gradcheck and gradgradcheck, std's zero gradient where std is 0, errors, alloc sweep. */
#include <math.h>

#include "testutil.h"

#include "alloc_sweep.h"

static const tg_options f64 = {.dtype = TG_F64};

/* Variance over dims {0, 2} of [3, 4, 5] by loops: results [4]. */
static void loop_var(const tg_tensor *x, double correction, double *out) {
  for (int64_t j = 0; j < 4; j++) {
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < 3; i++)
      for (int64_t k = 0; k < 5; k++) sum += tg_test_at(x, (i * 4 + j) * 5 + k);
    const double m = sum / 15;
    for (int64_t i = 0; i < 3; i++)
      for (int64_t k = 0; k < 5; k++) {
        const double d = tg_test_at(x, (i * 4 + j) * 5 + k) - m;
        sq += d * d;
      }
    out[j] = sq / fmax(0.0, 15 - correction);
  }
}

TG_TEST(var, matches_loops_over_a_dim_list_with_each_correction) {
  tg_generator *gen = tg_generator_new(7);
  tg_tensor *x = tg_randn(TG_SHAPE(3, 4, 5), f64, gen);
  const double corrections[3] = {0, 1, 2.5};
  for (int k = 0; k < 3; k++) {
    double want[4], want_std[4];
    loop_var(x, corrections[k], want);
    for (int j = 0; j < 4; j++) want_std[j] = sqrt(want[j]);
    tg_tensor *v = tg_var(x, 2, (const int[]){0, -1}, corrections[k], false);
    cr_assert_not_null(v, "%s", tg_last_error_message());
    tg_assert_sizes(v, 4);
    tg_test_expect_values(v, 4, want, 1e-12);
    tg_tensor *s = tg_std(x, 2, (const int[]){2, 0}, corrections[k], true);
    tg_assert_sizes(s, 1, 4, 1);
    tg_test_expect_values(s, 4, want_std, 1e-12);
  }
  /* n_dims 0: every dim, a 0-dim result; F32 agrees with F64 */
  tg_tensor *all = tg_var(x, 0, NULL, 1, false);
  cr_assert_eq(tg_ndim(all), 0);
  tg_tensor *flat = tg_var(tg_reshape(x, 1, (const int64_t[]){60}), 1, (const int[]){0}, 1, false);
  tg_assert_close(all, flat, 1e-12, 1e-12);
  tg_tensor *all32 = tg_var(tg_to_dtype(x, TG_F32), 0, NULL, 1, true);
  tg_assert_sizes(all32, 1, 1, 1);
  cr_assert_float_eq(tg_test_at(all32, 0), tg_test_at(all, 0), 1e-5);
  tg_generator_free(gen);
}

TG_TEST(var, edges_follow_pytorch) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_from_data(TG_SHAPE(3), (const double[]){1, 2, 4}, f64);
  /* N - correction == 0 -> inf; < 0 -> the divisor is 0 too */
  cr_assert(isinf(tg_test_at(tg_var(x, 0, NULL, 3, false), 0)));
  cr_assert(isinf(tg_test_at(tg_var(x, 0, NULL, 5, false), 0)));
  /* one element with Bessel: 0/0 */
  cr_assert(isnan(tg_test_at(tg_var(tg_narrow(x, 0, 0, 1), 0, NULL, 1, false), 0)));
  /* empty: NaN, empty dims keep their sizes */
  cr_assert(isnan(tg_test_at(tg_var(tg_zeros(TG_SHAPE(0, 3), f64), 0, NULL, 1, false), 0)));
  tg_tensor *e = tg_var(tg_zeros(TG_SHAPE(0, 3), f64), 1, (const int[]){0}, 1, false);
  tg_assert_sizes(e, 3);
  cr_assert(isnan(tg_test_at(e, 2)));
  /* NaN and inf propagate */
  const double bad[4] = {1, NAN, 2, INFINITY};
  tg_tensor *b = tg_var(tg_from_data(TG_SHAPE(2, 2), bad, f64), 1, (const int[]){1}, 1, false);
  cr_assert(isnan(tg_test_at(b, 0)) && isnan(tg_test_at(b, 1)));
  /* 0-dim x: dim 0 and -1 are its one dim */
  tg_tensor *s = tg_scalar(3, f64);
  cr_assert_float_eq(tg_test_at(tg_var(s, 1, (const int[]){-1}, 0, false), 0), 0, 0);
  /* constant input: var 0, and std's gradient is 0 there (PyTorch), not NaN */
  tg_tensor *c =
      tg_full(1, (const int64_t[]){3}, 2.0, TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  tg_tensor *sd = tg_std(c, 0, NULL, 1, false);
  cr_assert_float_eq(tg_test_at(sd, 0), 0, 0);
  cr_assert_eq(tg_backward(sd, NULL), TG_OK, "%s", tg_last_error_message());
  tg_test_expect_values(tg_grad(c), 3, (const double[]){0, 0, 0}, 0);
  tg_scope_end(sc);
}

typedef struct var_call {
  bool std;
  double correction;
} var_call;

static tg_status call_var(void *user, const tg_tensor *const *in, tg_tensor **out) {
  const var_call *c = user;
  const int dims[2] = {0, 2};
  out[0] = c->std ? tg_std(in[0], 2, dims, c->correction, true)
                  : tg_var(in[0], 2, dims, c->correction, false);
  return out[0] ? TG_OK : tg_last_error();
}

TG_TEST(var, gradcheck_and_gradgradcheck_in_f64) {
  tg_generator *gen = tg_generator_new(8);
  for (int k = 0; k < 4; k++) {
    tg_scope sc = tg_scope_begin();
    tg_tensor *x =
        tg_randn(TG_SHAPE(3, 2, 4), TG_OPTS(.dtype = TG_F64, .requires_grad = true), gen);
    /* a transposed input as well */
    tg_tensor *in = k % 2 ? tg_transpose(x, 0, 2) : x;
    var_call c = {k >= 2, k == 1 ? 0.0 : 1.0};
    tg_gradcheck_options o = {.quiet = true};
    cr_assert_eq(tg_gradcheck(call_var, &c, 1, &in, 1, o), TG_OK, "%d: %s", k,
                 tg_last_error_message());
    cr_assert_eq(tg_gradgradcheck(call_var, &c, 1, &in, 1, o), TG_OK, "%d: %s", k,
                 tg_last_error_message());
    tg_scope_end(sc);
  }
  tg_generator_free(gen);
}

TG_TEST(var, refuses_bad_inputs_naming_them) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_zeros(TG_SHAPE(3, 4), f64);
  cr_assert_null(tg_var(x, 2, (const int[]){0, 0}, 1, false));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_var", "dim 0 appears multiple times in the list of dims");
  cr_assert_null(tg_var(x, 2, (const int[]){1, -1}, 1, false));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_var", "dim 1 appears multiple times");
  cr_assert_null(tg_std(x, 1, (const int[]){2}, 1, false));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_std", "dim 2 is out of range for x [3, 4]", "[-2, 1]");
  cr_assert_null(tg_var(tg_zeros(TG_SHAPE(3), (tg_options){.dtype = TG_I64}), 0, NULL, 1, false));
  tg_expect_error(TG_ERR_DTYPE, "tg_var", "int64", "floating point");
  cr_assert_null(tg_var(x, 0, NULL, -1, false));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_var", "correction -1 must be non-negative");
  cr_assert_null(tg_var(x, 0, NULL, NAN, false));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_var", "correction nan");
  cr_assert_null(tg_var(x, 1, NULL, 1, false));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_var", "n_dims 1 with dims NULL");
  cr_assert_null(tg_var(NULL, 0, NULL, 1, false));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_var", "x");
  tg_scope_end(sc);
}

TG_TEST(var, runs_on_the_meta_device) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *v = tg_std(tg_zeros(TG_SHAPE(2, 3), (tg_options){.device = TG_DEVICE_META}), 1,
                        (const int[]){1}, 1, true);
  cr_assert_not_null(v, "%s", tg_last_error_message());
  tg_assert_sizes(v, 2, 1);
  tg_scope_end(sc);
}

static tg_status var_step(void *user, double *out, int *n_out) {
  const bool std = user != NULL;
  tg_tensor *x = tg_from_data(TG_SHAPE(2, 3), (const double[]){-1.5, -0.25, 0, 0.5, 1, 3},
                              TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  tg_tensor *y =
      x ? (std ? tg_std(x, 1, (const int[]){1}, 1, false) : tg_var(x, 0, NULL, 0, true)) : NULL;
  tg_status st = status_of(y);
  if (st == TG_OK) st = append(y, out, n_out);
  if (st == TG_OK) st = clean(tg_backward(tg_sum(tg_mul(y, y)), NULL));
  if (st == TG_OK) st = append(tg_grad(x), out, n_out);
  return st;
}

TG_TEST(var, allocation_failures) {
  sweep("var forward and backward", var_step, NULL);
  sweep("std forward and backward", var_step, (void *)1);
}
