/* tg_logsumexp (issue 25, helper "pointwise") against PyTorch: values over one, several and
 * all dims with and without keepdim, the edges (rows of -inf, +inf, NaN, empty), the
 * backward (softmax weights), int64, errors, allocation failures. Gradcheck and
 * gradgradcheck: the OpInfo walk. */
#include <math.h>

#include "testutil.h"

#include "alloc_sweep.h"

TG_TEST(logsumexp, values_as_pytorch) {
  tg_tensor *x =
      tg_from_data(TG_SHAPE(2, 3), (const double[]){1, 2, 3, 4, 5, 6}, TG_OPTS(.dtype = TG_F64));
  tg_tensor *y = tg_logsumexp(x, 1, (const int[]){1}, false);
  tg_assert_sizes(y, 2);
  tg_test_expect_values(y, 2, (const double[]){3.4076059644443806, 6.407605964444381}, 1e-15);
  y = tg_logsumexp(x, 1, (const int[]){-1}, true);
  tg_assert_sizes(y, 2, 1);
  y = tg_logsumexp(x, 2, (const int[]){1, 0}, false);
  tg_assert_sizes(y);
  tg_test_expect_values(y, 1, (const double[]){6.456193316018123}, 1e-15);
  y = tg_logsumexp(tg_t(x), 0, NULL, true);
  tg_assert_sizes(y, 1, 1);
  tg_test_expect_values(y, 1, (const double[]){6.456193316018123}, 1e-15);
  /* no overflow where exp(x) would: the max shift */
  tg_tensor *big = tg_from_data(TG_SHAPE(2), (const float[]){1000, 1000}, TG_OPTS(.dtype = TG_F32));
  tg_test_expect_values(tg_logsumexp(big, 1, (const int[]){0}, false), 1,
                        (const double[]){1000.6931471805599}, 1e-6);
  tg_tensor *i = tg_from_data(TG_SHAPE(3), (const int64_t[]){1, 2, 3}, TG_OPTS(.dtype = TG_I64));
  y = tg_logsumexp(i, 1, (const int[]){0}, false);
  cr_assert_eq(tg_tensor_dtype(y), TG_F32);
  tg_test_expect_values(y, 1, (const double[]){3.4076059644443806}, 1e-6);
}

TG_TEST(logsumexp, edges_as_pytorch) {
  tg_tensor *x =
      tg_from_data(TG_SHAPE(3, 2), (const double[]){-INFINITY, -INFINITY, INFINITY, 1, NAN, 1},
                   TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  tg_tensor *y = tg_logsumexp(x, 1, (const int[]){1}, false);
  tg_test_expect_ieee(y, 3, (const double[]){-INFINITY, INFINITY, NAN}, 0);
  cr_assert_eq(tg_backward(tg_sum(tg_narrow(y, 0, 0, 1)), NULL), TG_OK);
  /* g exp(x - y): (-inf) - (-inf) and inf - inf are NaN, and 0 * NaN too, so the rows that
   * get a zero gradient still see NaN where x is infinite or NaN: torch's gradient exactly */
  tg_test_expect_ieee(tg_grad(x), 6, (const double[]){NAN, NAN, NAN, 0, NAN, NAN}, 0);
  tg_tensor *e =
      tg_logsumexp(tg_empty(TG_SHAPE(2, 0), TG_OPTS(.dtype = TG_F32)), 1, (const int[]){1}, false);
  tg_test_expect_ieee(e, 2, (const double[]){-INFINITY, -INFINITY}, 0);
  tg_assert_sizes(
      tg_logsumexp(tg_empty(TG_SHAPE(0, 3), TG_OPTS(.dtype = TG_F32)), 1, (const int[]){1}, false),
      0);
}

TG_TEST(logsumexp, gradient_is_the_softmax) {
  tg_tensor *x = tg_from_data(TG_SHAPE(2, 3), (const double[]){1, 2, 3, -1, 0, 4},
                              TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  cr_assert_eq(tg_backward(tg_sum(tg_logsumexp(x, 1, (const int[]){1}, false)), NULL), TG_OK);
  tg_assert_close(tg_grad(x), tg_softmax(tg_detach(x), 1), 1e-15, 1e-15);
}

TG_TEST(logsumexp, refuses_bad_inputs_naming_them) {
  cr_assert_null(tg_logsumexp(NULL, 0, NULL, false));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_logsumexp", "x");
  tg_tensor *x = tg_zeros(TG_SHAPE(2, 3), TG_OPTS(.dtype = TG_F32));
  cr_assert_null(tg_logsumexp(x, 1, (const int[]){2}, false));
  tg_expect_error(TG_ERR_INDEX, "tg_logsumexp", "dim 2", "out of range");
  cr_assert_null(tg_logsumexp(x, 2, (const int[]){1, -1}, false));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_logsumexp", "multiple times");
  cr_assert_null(tg_logsumexp(x, 1, NULL, false));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_logsumexp", "dims");
}

static tg_status step(void *user, double *out, int *n_out) {
  (void)user;
  tg_tensor *x = tg_from_data(TG_SHAPE(2, 3), (const double[]){-1, 0.5, 2, 0.1, -0.3, 3},
                              TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  tg_tensor *y = x ? tg_logsumexp(x, 1, (const int[]){1}, false) : NULL;
  tg_status st = status_of(y);
  if (st == TG_OK) st = append(y, out, n_out);
  if (st == TG_OK) st = clean(tg_backward(tg_sum(tg_mul(y, y)), NULL));
  if (st == TG_OK) st = append(tg_grad(x), out, n_out);
  return st;
}

TG_TEST(logsumexp, allocation_failures) { sweep("logsumexp forward and backward", step, NULL); }
