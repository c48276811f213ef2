/* tg_clamp (issue 25, helper "pointwise") against PyTorch 2.15: values, NaN bounds as "no
 * bound", min > max, NaN x, the gradient (strictly inside the bounds: 0 at a bound, as
 * torch 2.15 gives for scalar bounds), int64, errors, allocation failures. Gradcheck and
 * gradgradcheck: the OpInfo walk. */
#include <math.h>

#include "testutil.h"

#include "alloc_sweep.h"

static const double xs[6] = {-1, -0.5, 0, 0.5, 1, NAN};

static void check(double lo, double hi, const double *want, const double *want_grad) {
  const tg_dtype dtypes[2] = {TG_F32, TG_F64};
  for (int d = 0; d < 2; d++) {
    tg_tensor *x = tg_to_dtype(tg_from_data(TG_SHAPE(6), xs, TG_OPTS(.dtype = TG_F64)), dtypes[d]);
    cr_assert_eq(tg_set_requires_grad(x, true), TG_OK);
    tg_tensor *y = tg_clamp(x, lo, hi);
    cr_assert(y, "%s", tg_last_error_message());
    tg_test_expect_ieee(y, 6, want, 0);
    cr_assert_eq(tg_backward(tg_sum(tg_where(tg_eq(y, y), y, tg_zeros_like(y))), NULL), TG_OK);
    tg_test_expect_ieee(tg_grad(x), 6, want_grad, 0);
  }
}

TG_TEST(clamp, values_and_gradient_as_pytorch) {
  check(-0.5, 0.5, (const double[]){-0.5, -0.5, 0, 0.5, 0.5, NAN},
        (const double[]){0, 0, 1, 0, 0, 0});
  check(NAN, 0.5, (const double[]){-1, -0.5, 0, 0.5, 0.5, NAN}, (const double[]){1, 1, 1, 0, 0, 0});
  check(-0.5, NAN, (const double[]){-0.5, -0.5, 0, 0.5, 1, NAN},
        (const double[]){0, 0, 1, 1, 1, 0});
  /* min > max: max everywhere, no gradient */
  check(1, -1, (const double[]){-1, -1, -1, -1, -1, NAN}, (const double[]){0, 0, 0, 0, 0, 0});
}

TG_TEST(clamp, signed_zeros_and_infinite_bounds) {
  tg_tensor *x =
      tg_from_data(TG_SHAPE(3), (const double[]){-0.0, 0.0, INFINITY}, TG_OPTS(.dtype = TG_F64));
  tg_test_expect_ieee(tg_clamp(x, 0.0, 1.0), 3, (const double[]){-0.0, 0.0, 1.0}, 0);
  tg_test_expect_ieee(tg_clamp(x, -INFINITY, INFINITY), 3, (const double[]){-0.0, 0.0, INFINITY},
                      0);
  tg_tensor *e = tg_clamp(tg_empty(TG_SHAPE(0, 2), TG_OPTS(.dtype = TG_F32)), 0, 1);
  tg_assert_sizes(e, 0, 2);
}

/* int64 with whole bounds stays int64 (torch.clamp(long, 2, 6)); a fractional bound gives F32. */
TG_TEST(clamp, int64) {
  tg_tensor *x = tg_from_data(TG_SHAPE(3), (const int64_t[]){1, 5, 9}, TG_OPTS(.dtype = TG_I64));
  tg_tensor *y = tg_clamp(x, 2, 6);
  cr_assert_eq(tg_tensor_dtype(y), TG_I64);
  tg_test_expect_values(y, 3, (const double[]){2, 5, 6}, 0);
  y = tg_clamp(x, NAN, 6);
  cr_assert_eq(tg_tensor_dtype(y), TG_I64);
  tg_test_expect_values(y, 3, (const double[]){1, 5, 6}, 0);
  y = tg_clamp(x, 2.5, 6);
  cr_assert_eq(tg_tensor_dtype(y), TG_F32);
  tg_test_expect_values(y, 3, (const double[]){2.5, 5, 6}, 0);
}

TG_TEST(clamp, non_contiguous_input) {
  tg_tensor *x = tg_t(
      tg_from_data(TG_SHAPE(2, 3), (const double[]){-2, -1, 0, 1, 2, 3}, TG_OPTS(.dtype = TG_F64)));
  tg_test_expect_values(tg_clamp(x, -1, 1), 6, (const double[]){-1, 1, -1, 1, 0, 1}, 0);
}

TG_TEST(clamp, refuses_bad_inputs_naming_them) {
  cr_assert_null(tg_clamp(NULL, 0, 1));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_clamp", "x");
  tg_tensor *x = tg_zeros(TG_SHAPE(2), TG_OPTS(.dtype = TG_F32));
  cr_assert_null(tg_clamp(x, NAN, NAN));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_clamp", "min and max are both NaN");
}

static tg_status step(void *user, double *out, int *n_out) {
  (void)user;
  tg_tensor *x = tg_from_data(TG_SHAPE(2, 3), (const double[]){-1, 0.5, 2, 0.1, -0.3, 3},
                              TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  tg_tensor *y = x ? tg_clamp(x, -0.5, 1.0) : NULL;
  tg_status st = status_of(y);
  if (st == TG_OK) st = append(y, out, n_out);
  if (st == TG_OK) st = clean(tg_backward(tg_sum(tg_mul(y, y)), NULL));
  if (st == TG_OK) st = append(tg_grad(x), out, n_out);
  return st;
}

TG_TEST(clamp, allocation_failures) { sweep("clamp forward and backward", step, NULL); }
