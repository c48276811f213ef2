/* masked_fill (issue 25): PyTorch's values, a mask of any dtype broadcast to x (NaN counts as
 * true), x's gradient zero where filled, gradcheck and gradgradcheck, errors. */
#include <math.h>

#include "testutil.h"

static const tg_gradcheck_options quiet = {.quiet = true};

TG_TEST(masked_fill, values_and_broadcast_mask) {
  tg_tensor *x =
      tg_test_tensor_of(TG_F32, TG_SHAPE(2, 3), (const double[]){1, NAN, 3, INFINITY, 5, 6});
  tg_tensor *row = tg_test_tensor_of(TG_I64, TG_SHAPE(3), (const double[]){0, 1, 5});
  tg_test_expect_ieee(tg_masked_fill(x, row, -INFINITY), 6,
                      (const double[]){1, -INFINITY, -INFINITY, INFINITY, -INFINITY, -INFINITY}, 0);
  tg_tensor *col = tg_test_tensor_of(TG_F64, TG_SHAPE(2, 1), (const double[]){NAN, 0});
  tg_tensor *y = tg_masked_fill(x, col, 0.5);
  cr_assert_eq(tg_tensor_dtype(y), TG_F32, "x's dtype");
  tg_test_expect_ieee(y, 6, (const double[]){0.5, 0.5, 0.5, INFINITY, 5, 6}, 0);
  tg_tensor *xi = tg_test_tensor_of(TG_I64, TG_SHAPE(2), (const double[]){7, 8});
  tg_test_expect_ieee(
      tg_masked_fill(xi, tg_test_tensor_of(TG_I64, TG_SHAPE(2), (const double[]){1, 0}), -3), 2,
      (const double[]){-3, 8}, 0);
  /* a causal mask over a batch of scores */
  tg_tensor *scores = tg_zeros(TG_SHAPE(2, 2, 2), TG_OPTS_DEFAULT);
  tg_tensor *causal = tg_triu(tg_ones(TG_SHAPE(2, 2), TG_OPTS_DEFAULT), 1);
  tg_test_expect_ieee(tg_masked_fill(scores, causal, -INFINITY), 8,
                      (const double[]){0, -INFINITY, 0, 0, 0, -INFINITY, 0, 0}, 0);
}

TG_TEST(masked_fill, gradient_is_zero_where_filled) {
  tg_tensor *x =
      tg_uniform(TG_SHAPE(2, 3), -1, 1, TG_OPTS(.dtype = TG_F64, .requires_grad = true), NULL);
  tg_tensor *mask = tg_test_tensor_of(TG_F64, TG_SHAPE(3), (const double[]){1, 0, 1});
  cr_assert_eq(tg_backward(tg_sum(tg_masked_fill(x, mask, 4)), NULL), TG_OK, "%s",
               tg_last_error_message());
  tg_test_expect_ieee(tg_grad(x), 6, (const double[]){0, 1, 0, 0, 1, 0}, 0);
}

static tg_status fn_fill(void *user, const tg_tensor *const *in, tg_tensor **out) {
  out[0] = tg_masked_fill(in[0], user, -2.5);
  return out[0] ? TG_OK : tg_last_error();
}

TG_TEST(masked_fill, gradcheck) {
  tg_tensor *x =
      tg_uniform(TG_SHAPE(3, 2, 4), -1, 1, TG_OPTS(.dtype = TG_F64, .requires_grad = true), NULL);
  tg_tensor *mask = tg_test_tensor_of(TG_I64, TG_SHAPE(2, 1), (const double[]){0, 1});
  tg_tensor *in[1] = {x};
  cr_assert_eq(tg_gradcheck(fn_fill, mask, 1, in, 1, quiet), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(tg_gradgradcheck(fn_fill, mask, 1, in, 1, quiet), TG_OK, "%s",
               tg_last_error_message());
}

TG_TEST(masked_fill, errors) {
  tg_tensor *x = tg_zeros(TG_SHAPE(2, 3), TG_OPTS_DEFAULT);
  cr_assert_null(tg_masked_fill(x, tg_ones(TG_SHAPE(2, 3, 1), TG_OPTS_DEFAULT), 0));
  tg_expect_error(TG_ERR_SHAPE, "tg_masked_fill", "mask is [2, 3, 1]", "x is [2, 3]");
  cr_assert_null(tg_masked_fill(x, tg_ones(TG_SHAPE(2), TG_OPTS_DEFAULT), 0));
  tg_expect_error(TG_ERR_SHAPE, "tg_masked_fill", "mask is [2]");
  cr_assert_null(tg_masked_fill(x, NULL, 0));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_masked_fill: mask is NULL");
}

/* ---- allocation failures ---- */
#include "alloc_sweep.h"

static tg_status fill_step(void *user, double *out, int *n_out) {
  (void)user;
  tg_tensor *x = tg_arange(0, 6, 1, TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  tg_tensor *m = tg_from_data(TG_SHAPE(3), (const int64_t[]){1, 0, 1}, TG_OPTS(.dtype = TG_I64));
  tg_tensor *x2 = x && m ? tg_reshape(x, TG_SHAPE(2, 3)) : NULL;
  tg_tensor *y = x2 ? tg_masked_fill(x2, m, -1) : NULL;
  tg_status st = status_of(y);
  if (st == TG_OK) st = append(y, out, n_out);
  if (st == TG_OK) st = clean(tg_backward(tg_sum(tg_mul(y, y)), NULL));
  if (st == TG_OK) st = append(tg_grad(x), out, n_out);
  return st;
}

TG_TEST(masked_fill, allocation_failures) {
  sweep("masked_fill forward and backward", fill_step, NULL);
}
