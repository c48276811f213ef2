/* tg_maximum / tg_minimum (issue 25, helper "pointwise") against PyTorch 2.15: NaN propagates,
 * ties give a (maximum(-0, 0) = -0) and split the gradient half and half, broadcasting,
 * promotion, int64, in place, errors, allocation failures. Gradcheck and gradgradcheck: the
 * OpInfo walk and tests/ops/test_inplace.c. */
#include <math.h>

#include "testutil.h"

#include "alloc_sweep.h"

TG_TEST(maximum, values_ties_and_gradients_as_pytorch) {
  const double av[6] = {1, 2, 3, NAN, 0.0, -0.0}, bv[6] = {1, 3, 2, 1, -0.0, 0.0};
  tg_tensor *a = tg_from_data(TG_SHAPE(6), av, TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  tg_tensor *b = tg_from_data(TG_SHAPE(6), bv, TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  tg_tensor *mx = tg_maximum(a, b), *mn = tg_minimum(a, b);
  tg_test_expect_ieee(mx, 6, (const double[]){1, 3, 3, NAN, 0.0, -0.0}, 0);
  tg_test_expect_ieee(mn, 6, (const double[]){1, 2, 2, NAN, 0.0, -0.0}, 0);
  cr_assert_eq(tg_backward(tg_sum(mx), NULL), TG_OK);
  tg_test_expect_values(tg_grad(a), 6, (const double[]){0.5, 0, 1, 1, 0.5, 0.5}, 0);
  tg_test_expect_values(tg_grad(b), 6, (const double[]){0.5, 1, 0, 1, 0.5, 0.5}, 0);
  tg_tensor *a2 = tg_detach(a), *b2 = tg_detach(b);
  tg_set_requires_grad(a2, true);
  tg_set_requires_grad(b2, true);
  cr_assert_eq(tg_backward(tg_sum(tg_minimum(a2, b2)), NULL), TG_OK);
  tg_test_expect_values(tg_grad(a2), 6, (const double[]){0.5, 1, 0, 1, 0.5, 0.5}, 0);
  tg_test_expect_values(tg_grad(b2), 6, (const double[]){0.5, 0, 1, 1, 0.5, 0.5}, 0);
}

TG_TEST(maximum, broadcasts_and_promotes) {
  tg_tensor *a = tg_from_data(TG_SHAPE(2, 1), (const int64_t[]){1, 4}, TG_OPTS(.dtype = TG_I64));
  tg_tensor *b =
      tg_from_data(TG_SHAPE(3), (const float[]){0.5f, 2.5f, 5.0f}, TG_OPTS(.dtype = TG_F32));
  tg_tensor *y = tg_maximum(a, b);
  cr_assert_eq(tg_tensor_dtype(y), TG_F32);
  tg_assert_sizes(y, 2, 3);
  tg_test_expect_values(y, 6, (const double[]){1, 2.5, 5, 4, 4, 5}, 0);
  tg_tensor *ii =
      tg_minimum(a, tg_from_data(TG_SHAPE(1), (const int64_t[]){3}, TG_OPTS(.dtype = TG_I64)));
  cr_assert_eq(tg_tensor_dtype(ii), TG_I64);
  tg_test_expect_values(ii, 2, (const double[]){1, 3}, 0);
  tg_assert_sizes(tg_maximum(tg_empty(TG_SHAPE(0, 3), TG_OPTS(.dtype = TG_F32)), b), 0, 3);
}

TG_TEST(maximum, in_place_and_non_contiguous) {
  tg_tensor *a =
      tg_t(tg_from_data(TG_SHAPE(2, 2), (const double[]){1, 5, -2, 0}, TG_OPTS(.dtype = TG_F64)));
  tg_tensor *b = tg_scalar(0.5, TG_OPTS(.dtype = TG_F64));
  cr_assert_eq(tg_maximum_(a, b), TG_OK);
  tg_test_expect_values(a, 4, (const double[]){1, 0.5, 5, 0.5}, 0);
  cr_assert_eq(tg_minimum_(a, b), TG_OK);
  tg_test_expect_values(a, 4, (const double[]){0.5, 0.5, 0.5, 0.5}, 0);
}

TG_TEST(maximum, refuses_bad_inputs_naming_them) {
  tg_tensor *a = tg_zeros(TG_SHAPE(2), TG_OPTS(.dtype = TG_F32));
  cr_assert_null(tg_maximum(a, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_maximum", "b");
  cr_assert_null(tg_minimum(a, tg_zeros(TG_SHAPE(3), TG_OPTS(.dtype = TG_F32))));
  tg_expect_error(TG_ERR_SHAPE, "tg_minimum", "[2]", "[3]");
}

static tg_status step(void *user, double *out, int *n_out) {
  const bool max = *(const bool *)user;
  tg_tensor *a = tg_from_data(TG_SHAPE(2, 3), (const double[]){-1, 0.5, 2, 0.1, -0.3, 3},
                              TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  tg_tensor *b = a ? tg_from_data(TG_SHAPE(3), (const double[]){0.5, 0.5, 1},
                                  TG_OPTS(.dtype = TG_F64, .requires_grad = true))
                   : NULL;
  tg_tensor *y = !b ? NULL : max ? tg_maximum(a, b) : tg_minimum(a, b);
  tg_status st = status_of(y);
  if (st == TG_OK) st = append(y, out, n_out);
  if (st == TG_OK) st = clean(tg_backward(tg_sum(tg_mul(y, y)), NULL));
  if (st == TG_OK) st = append(tg_grad(a), out, n_out);
  if (st == TG_OK) st = append(tg_grad(b), out, n_out);
  return st;
}

TG_TEST(maximum, allocation_failures) {
  const bool which[2] = {true, false};
  sweep("maximum forward and backward", step, (void *)&which[0]);
  sweep("minimum forward and backward", step, (void *)&which[1]);
}
