/* tg_cumsum (issue 25, helper "pointwise") against PyTorch: F32 sums in double (as torch's
 * CPU), I64 stays I64 and wraps, every dim, non-contiguous and 0-dim inputs, empty, the
 * backward (a reversed cumsum), errors, allocation failures. Gradcheck and gradgradcheck:
 * the OpInfo walk. */
#include <math.h>
#include <stdint.h>

#include "testutil.h"

#include "alloc_sweep.h"

TG_TEST(cumsum, f32_sums_in_double_as_pytorch_cpu) {
  tg_tensor *x = tg_from_data(TG_SHAPE(6), (const float[]){1e8f, 1, 1, 1, -1e8f, 0.5f},
                              TG_OPTS(.dtype = TG_F32));
  tg_test_expect_values(tg_cumsum(x, 0), 6, (const double[]){1e8, 1e8, 1e8, 1e8, 3, 3.5}, 0);
}

TG_TEST(cumsum, every_dim_and_layout) {
  tg_tensor *x =
      tg_from_data(TG_SHAPE(2, 3), (const double[]){1, 2, 3, 4, 5, 6}, TG_OPTS(.dtype = TG_F64));
  tg_test_expect_values(tg_cumsum(x, 1), 6, (const double[]){1, 3, 6, 4, 9, 15}, 0);
  tg_test_expect_values(tg_cumsum(x, -2), 6, (const double[]){1, 2, 3, 5, 7, 9}, 0);
  tg_test_expect_values(tg_cumsum(tg_t(x), 1), 6, (const double[]){1, 5, 2, 7, 3, 9}, 0);
  tg_tensor *s = tg_scalar(2.5, TG_OPTS(.dtype = TG_F64));
  tg_tensor *y = tg_cumsum(s, -1);
  tg_assert_sizes(y);
  tg_test_expect_values(y, 1, (const double[]){2.5}, 0);
  tg_assert_sizes(tg_cumsum(tg_empty(TG_SHAPE(0, 3), TG_OPTS(.dtype = TG_F32)), 0), 0, 3);
  tg_tensor *n = tg_cumsum(
      tg_from_data(TG_SHAPE(3), (const double[]){1, NAN, 1}, TG_OPTS(.dtype = TG_F64)), 0);
  tg_test_expect_ieee(n, 3, (const double[]){1, NAN, NAN}, 0);
}

TG_TEST(cumsum, int64_stays_int64_and_wraps) {
  tg_tensor *x =
      tg_from_data(TG_SHAPE(3), (const int64_t[]){INT64_MAX, 1, 2}, TG_OPTS(.dtype = TG_I64));
  tg_tensor *y = tg_cumsum(x, 0);
  cr_assert_eq(tg_tensor_dtype(y), TG_I64);
  int64_t got[3];
  cr_assert_eq(tg_to_host_array(y, got, sizeof got), TG_OK);
  cr_assert_eq(got[0], INT64_MAX);
  cr_assert_eq(got[1], INT64_MIN);
  cr_assert_eq(got[2], INT64_MIN + 2);
}

/* d sum(w * cumsum(x)) / dx = the reversed cumsum of w */
TG_TEST(cumsum, backward_is_the_reversed_cumsum) {
  tg_tensor *x = tg_from_data(TG_SHAPE(2, 3), (const double[]){1, 2, 3, 4, 5, 6},
                              TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  tg_tensor *w = tg_from_data(TG_SHAPE(2, 3), (const double[]){1, 10, 100, 2, 20, 200},
                              TG_OPTS(.dtype = TG_F64));
  cr_assert_eq(tg_backward(tg_sum(tg_mul(tg_cumsum(x, 1), w)), NULL), TG_OK);
  tg_test_expect_values(tg_grad(x), 6, (const double[]){111, 110, 100, 222, 220, 200}, 0);
}

TG_TEST(cumsum, big_inputs_use_the_pool_and_agree) {
  tg_tensor *x = tg_ones(TG_SHAPE(300, 1000), TG_OPTS(.dtype = TG_F32));
  tg_tensor *y = tg_cumsum(x, 0);
  cr_assert_eq(tg_test_at(y, 299 * 1000 + 999), 300.0);
  y = tg_cumsum(x, 1);
  cr_assert_eq(tg_test_at(y, 299 * 1000 + 999), 1000.0);
}

TG_TEST(cumsum, refuses_bad_inputs_naming_them) {
  cr_assert_null(tg_cumsum(NULL, 0));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_cumsum", "x");
  tg_tensor *x = tg_zeros(TG_SHAPE(2, 3), TG_OPTS(.dtype = TG_F32));
  cr_assert_null(tg_cumsum(x, 2));
  tg_expect_error(TG_ERR_INDEX, "tg_cumsum", "dim 2", "out of range");
}

static tg_status step(void *user, double *out, int *n_out) {
  (void)user;
  tg_tensor *x = tg_from_data(TG_SHAPE(2, 3), (const double[]){-1, 0.5, 2, 0.1, -0.3, 3},
                              TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  tg_tensor *y = x ? tg_cumsum(x, 1) : NULL;
  tg_status st = status_of(y);
  if (st == TG_OK) st = append(y, out, n_out);
  if (st == TG_OK) st = clean(tg_backward(tg_sum(tg_mul(y, y)), NULL));
  if (st == TG_OK) st = append(tg_grad(x), out, n_out);
  return st;
}

TG_TEST(cumsum, allocation_failures) { sweep("cumsum forward and backward", step, NULL); }
