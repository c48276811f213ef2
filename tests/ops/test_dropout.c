/* tg_dropout (include/tg/norm.h): the identity in eval and at p = 0, zeros at p = 1,
 * kept elements scaled by 1 / (1 - p), the mask from the generator (a seed repeats it),
 * the backward by the same mask, gradcheck and gradgradcheck, errors, alloc sweep. The
 * CPU-vs-emulated-CUDA mask agreement is in tests/cuda/test_cuda_norm.c. */
#include <math.h>

#include "testutil.h"

#include "alloc_sweep.h"

static const tg_options f64 = {.dtype = TG_F64};

TG_TEST(dropout, is_the_identity_in_eval_and_at_p_0) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_from_data(TG_SHAPE(3), (const double[]){1, -2, INFINITY}, f64);
  tg_generator *gen = tg_generator_new(1);
  const tg_generator_state before = tg_generator_get_state(gen);
  tg_tensor *eval = tg_dropout(x, 0.5, false, gen), *p0 = tg_dropout(x, 0, true, gen);
  cr_assert_not_null(eval, "%s", tg_last_error_message());
  cr_assert_eq(tg_data_ptr(eval), tg_data_ptr(x), "x itself, as PyTorch returns its input");
  cr_assert_eq(tg_data_ptr(p0), tg_data_ptr(x));
  cr_assert_eq(tg_generator_get_state(gen).offset, before.offset, "no draw");
  tg_generator_free(gen);
  tg_scope_end(sc);
}

TG_TEST(dropout, p_1_gives_zeros_and_nan_for_inf) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_from_data(TG_SHAPE(3), (const double[]){1, -2, INFINITY}, f64);
  tg_tensor *y = tg_dropout(x, 1, true, NULL);
  cr_assert_not_null(y, "%s", tg_last_error_message());
  cr_assert(tg_test_at(y, 0) == 0 && tg_test_at(y, 1) == 0 && isnan(tg_test_at(y, 2)));
  tg_scope_end(sc);
}

TG_TEST(dropout, keeps_a_seeded_scaled_fraction_and_backward_uses_the_mask) {
  tg_scope sc = tg_scope_begin();
  const double p = 0.3;
  const int64_t n = 10000;
  for (int d = 0; d < 2; d++) {
    const tg_dtype dt = d ? TG_F64 : TG_F32;
    tg_tensor *x = tg_ones(1, &n, TG_OPTS(.dtype = dt, .requires_grad = true));
    tg_generator *gen = tg_generator_new(42);
    tg_tensor *y = tg_dropout(x, p, true, gen);
    cr_assert_not_null(y, "%s", tg_last_error_message());
    int64_t kept = 0;
    for (int64_t e = 0; e < n; e++) {
      const double v = tg_test_at(y, e);
      cr_assert(v == 0 || fabs(v - 1 / (1 - p)) < 1e-6, "y[%lld] = %g", (long long)e, v);
      kept += v != 0;
    }
    /* 7000 expected, sd 46 */
    cr_assert(kept > 6700 && kept < 7300, "kept %lld of %lld", (long long)kept, (long long)n);
    /* the same seed repeats the mask; the generator moved on */
    tg_generator_seed(gen, 42);
    tg_assert_close(tg_dropout(x, p, true, gen), y, 0, 0);
    cr_assert_gt(tg_max_abs_diff(tg_dropout(x, p, true, gen), y), 0);
    /* backward: d y / d x is the scaled mask, which is y itself for x = 1 */
    cr_assert_eq(tg_backward(y, tg_ones_like(y)), TG_OK, "%s", tg_last_error_message());
    tg_assert_close(tg_grad(x), y, 0, 0);
    tg_generator_free(gen);
  }
  tg_scope_end(sc);
}

static tg_status call_dropout(void *user, const tg_tensor *const *in, tg_tensor **out) {
  tg_generator_seed(user, 9); /* the same mask at every evaluation */
  out[0] = tg_dropout(in[0], 0.4, true, user);
  return out[0] ? TG_OK : tg_last_error();
}

TG_TEST(dropout, gradcheck_and_gradgradcheck_in_f64) {
  tg_scope sc = tg_scope_begin();
  tg_generator *gen = tg_generator_new(9);
  tg_tensor *x = tg_randn(TG_SHAPE(4, 5), TG_OPTS(.dtype = TG_F64, .requires_grad = true), gen);
  tg_tensor *in = tg_transpose(x, 0, 1);
  tg_gradcheck_options o = {.quiet = true};
  cr_assert_eq(tg_gradcheck(call_dropout, gen, 1, &in, 1, o), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(tg_gradgradcheck(call_dropout, gen, 1, &in, 1, o), TG_OK, "%s",
               tg_last_error_message());
  tg_generator_free(gen);
  tg_scope_end(sc);
}

TG_TEST(dropout, refuses_bad_inputs_naming_them) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_zeros(TG_SHAPE(3), f64);
  cr_assert_null(tg_dropout(x, 1.5, true, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_dropout",
                  "dropout probability has to be between 0 and 1, but got 1.5");
  cr_assert_null(tg_dropout(x, -0.1, false, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_dropout", "-0.1");
  cr_assert_null(tg_dropout(x, NAN, true, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_dropout", "nan");
  cr_assert_null(tg_dropout(tg_zeros(TG_SHAPE(3), (tg_options){.dtype = TG_I64}), 0.5, true, NULL));
  tg_expect_error(TG_ERR_DTYPE, "tg_dropout", "x");
  cr_assert_null(tg_dropout(NULL, 0.5, true, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_dropout", "x");
  tg_scope_end(sc);
}

static tg_status dropout_step(void *user, double *out, int *n_out) {
  tg_generator_seed(user, 3);
  tg_tensor *x = tg_from_data(TG_SHAPE(2, 3), (const double[]){-1.5, -0.25, 0, 0.5, 1, 3},
                              TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  tg_tensor *y = x ? tg_dropout(x, 0.5, true, user) : NULL;
  tg_status st = status_of(y);
  if (st == TG_OK) st = append(y, out, n_out);
  if (st == TG_OK) st = clean(tg_backward(tg_sum(tg_mul(y, y)), NULL));
  if (st == TG_OK) st = append(tg_grad(x), out, n_out);
  return st;
}

TG_TEST(dropout, allocation_failures) {
  tg_generator *gen = tg_generator_new(3);
  sweep("dropout forward and backward", dropout_step, gen);
  tg_generator_free(gen);
}
