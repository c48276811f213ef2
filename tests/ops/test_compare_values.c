/* tg_allclose, tg_max_abs_diff, tg_all_finite (values compared on the host in double,
 * through strides and broadcasting) and tg_scalar. */
#include <math.h>

#include "testutil.h"

#include "alloc_sweep.h"

static const tg_options f64 = {.dtype = TG_F64};
static const tg_options f32 = {.dtype = TG_F32};
static const tg_options i64 = {.dtype = TG_I64};

static tg_tensor *vec(tg_options o, int n, const double *v) {
  return tg_test_tensor_of(o.dtype, 1, (const int64_t[]){n}, v);
}

TG_TEST(allclose, tolerance_is_atol_plus_rtol_times_b) {
  tg_tensor *a = vec(f64, 2, (const double[]){1.0, 100.0});
  tg_tensor *b = vec(f64, 2, (const double[]){1.0, 101.0});
  /* |100 - 101| = 1 <= 0 + 0.01 * 101, but not <= 0 + 0.0098 * 101 = 0.9898 */
  cr_assert(tg_allclose(a, b, 0.01, 0));
  cr_assert(!tg_allclose(a, b, 0.0098, 0));
  cr_assert(tg_allclose(a, b, 0.0098, 0.011)); /* 0.9898 + 0.011 >= 1 */
  cr_assert(tg_allclose(a, b, 0, 1.0));        /* exactly atol */
  cr_assert(!tg_allclose(a, b, 0, 0.999));
  /* Asymmetric like torch: rtol scales |b|. |0 - 1| <= 1 * |1| but not <= 1 * |0|. */
  tg_tensor *zero = vec(f64, 1, (const double[]){0}), *one = vec(f64, 1, (const double[]){1});
  cr_assert(tg_allclose(zero, one, 1.0, 0));
  cr_assert(!tg_allclose(one, zero, 1.0, 0));
  tg_expect_ok();
  cr_assert_float_eq(tg_max_abs_diff(a, b), 1.0, 0);
  cr_assert_float_eq(tg_max_abs_diff(b, a), 1.0, 0);
}

TG_TEST(allclose, nan_and_infinity) {
  const double inf = INFINITY;
  tg_tensor *a = vec(f64, 3, (const double[]){NAN, inf, -inf});
  tg_tensor *same = vec(f64, 3, (const double[]){NAN, inf, -inf});
  cr_assert(!tg_allclose(a, same, 1e-5, 1e-8), "NaN is close to nothing");
  cr_assert(tg_allclose_ex(a, same, 1e-5, 1e-8, true), "unless equal_nan");
  tg_tensor *infs = vec(f64, 2, (const double[]){inf, -inf});
  cr_assert(tg_allclose(infs, vec(f64, 2, (const double[]){inf, -inf}), 0, 0));
  cr_assert(!tg_allclose(infs, vec(f64, 2, (const double[]){inf, inf}), 0, 0), "signs differ");
  cr_assert(!tg_allclose(vec(f64, 1, (const double[]){inf}), vec(f64, 1, (const double[]){1e308}),
                         1e9, 1e9),
            "inf is close only to itself");
  cr_assert(!tg_allclose(vec(f64, 1, (const double[]){1e308}), vec(f64, 1, (const double[]){inf}),
                         1e9, 1e9));
  cr_assert(!tg_allclose_ex(vec(f64, 1, (const double[]){NAN}), vec(f64, 1, (const double[]){1}),
                            1e9, 1e9, true),
            "equal_nan wants both NaN");
  cr_assert(!tg_allclose_ex(vec(f64, 1, (const double[]){1}), vec(f64, 1, (const double[]){NAN}),
                            1e9, 1e9, true));
  tg_expect_ok();
  /* max_abs_diff: NaN if any difference is NaN (inf - inf too), inf for inf against finite */
  cr_assert(isnan(tg_max_abs_diff(a, same)));
  cr_assert(isnan(tg_max_abs_diff(infs, infs)));
  cr_assert(isinf(tg_max_abs_diff(infs, vec(f64, 2, (const double[]){0, 0}))));
  tg_expect_ok();
}

TG_TEST(allclose, mixed_dtypes_compare_in_double) {
  tg_tensor *i = vec(i64, 3, (const double[]){1, -2, 3});
  tg_tensor *d = vec(f64, 3, (const double[]){1, -2, 3.5});
  tg_tensor *s = vec(f32, 3, (const double[]){1, -2, 3.25});
  cr_assert(!tg_allclose(i, d, 0, 0.49));
  cr_assert(tg_allclose(i, d, 0, 0.5));
  cr_assert_float_eq(tg_max_abs_diff(i, d), 0.5, 0);
  cr_assert_float_eq(tg_max_abs_diff(s, d), 0.25, 0);
  cr_assert_float_eq(tg_max_abs_diff(s, i), 0.25, 0);
  /* 0.1f is not 0.1: compared in double, the F32 rounding shows */
  tg_tensor *tenth32 = vec(f32, 1, (const double[]){0.1}),
            *tenth = vec(f64, 1, (const double[]){0.1});
  cr_assert_float_eq(tg_max_abs_diff(tenth32, tenth), fabs((double)0.1f - 0.1), 0);
  cr_assert(!tg_allclose(tenth32, tenth, 0, 0));
  cr_assert(tg_allclose(tenth32, tenth, 1e-7, 0));
  tg_expect_ok();
}

TG_TEST(allclose, broadcasting) {
  /* a [2, 3] against a row [3] and a column [2, 1] and a 0-dim scalar */
  tg_tensor *a = tg_test_tensor_of(TG_F64, TG_SHAPE(2, 3), (const double[]){1, 2, 3, 1, 2, 3.5});
  tg_tensor *row = vec(f64, 3, (const double[]){1, 2, 3});
  cr_assert(!tg_allclose(a, row, 0, 0.4));
  cr_assert(tg_allclose(a, row, 0, 0.5));
  cr_assert_float_eq(tg_max_abs_diff(row, a), 0.5, 0);
  tg_tensor *col = tg_test_tensor_of(TG_F64, TG_SHAPE(2, 1), (const double[]){2, 2});
  cr_assert_float_eq(tg_max_abs_diff(a, col), 1.5, 0);
  cr_assert(tg_allclose(tg_full(TG_SHAPE(4, 1, 2), 7, f32), tg_scalar(7, i64), 0, 0));
  cr_assert_float_eq(tg_max_abs_diff(tg_full(TG_SHAPE(4, 1, 2), 7, f32), tg_scalar(9, f64)), 2, 0);
  /* [2, 1] against [1, 3]: broadcast to [2, 3] */
  tg_tensor *c = tg_test_tensor_of(TG_F64, TG_SHAPE(2, 1), (const double[]){0, 10});
  tg_tensor *r = tg_test_tensor_of(TG_F64, TG_SHAPE(1, 3), (const double[]){1, 2, 3});
  cr_assert_float_eq(tg_max_abs_diff(c, r), 9, 0);
  tg_expect_ok();
}

TG_TEST(allclose, empty_tensors) {
  tg_tensor *e = tg_zeros(TG_SHAPE(0, 3), f64);
  cr_assert(tg_allclose(e, tg_ones(TG_SHAPE(3), f64), 0, 0), "vacuously close");
  cr_assert_float_eq(tg_max_abs_diff(e, e), 0, 0);
  cr_assert(tg_all_finite(e));
  tg_expect_ok();
}

TG_TEST(allclose, strided_views) {
  /* m = [[0, 1, 2], [3, 4, 5]]; its transpose against the same values laid out densely */
  tg_tensor *m = tg_reshape(tg_arange(0, 6, 1, f64), TG_SHAPE(2, 3));
  tg_tensor *mt = tg_transpose(m, 0, 1);
  tg_tensor *dense = tg_test_tensor_of(TG_F64, TG_SHAPE(3, 2), (const double[]){0, 3, 1, 4, 2, 5});
  cr_assert(tg_allclose(mt, dense, 0, 0));
  cr_assert_float_eq(tg_max_abs_diff(dense, mt), 0, 0);
  /* a column (stride 3, offset 1) against a vector */
  tg_tensor *col = tg_select(m, 1, 1);
  cr_assert_float_eq(tg_max_abs_diff(col, vec(f64, 2, (const double[]){1, 4.5})), 0.5, 0);
  /* a stride-0 expand */
  tg_tensor *ex = tg_expand(vec(f64, 1, (const double[]){2}), TG_SHAPE(2, 3));
  cr_assert_float_eq(tg_max_abs_diff(ex, m), 3, 0);
  tg_expect_ok();
}

TG_TEST(allclose, records_nothing_and_leaves_nothing_in_scope) {
  tg_tensor *x = tg_ones(TG_SHAPE(3), TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  tg_tensor *y = tg_mul_scalar(x, 2.0);
  tg_tensor *y2 = tg_mul_scalar(x, 2.0);
  int64_t live = tg_live_objects();
  cr_assert(tg_allclose(y, y2, 0, 0));
  cr_assert_float_eq(tg_max_abs_diff(y, x), 1, 0);
  cr_assert(tg_all_finite(y));
  cr_assert_eq(tg_live_objects(), live);
  tg_expect_ok();
  cr_assert(tg_is_grad_enabled(), "grad mode restored");
}

TG_TEST(allclose, all_finite) {
  cr_assert(tg_all_finite(vec(f64, 3, (const double[]){1, -1e308, 0})));
  cr_assert(!tg_all_finite(vec(f64, 3, (const double[]){1, NAN, 0})));
  cr_assert(!tg_all_finite(vec(f32, 2, (const double[]){-INFINITY, 0})));
  cr_assert(tg_all_finite(vec(i64, 2, (const double[]){-5, 7})));
  /* strided: the NaN is outside the view */
  tg_tensor *v = tg_test_tensor_of(TG_F64, TG_SHAPE(2, 2), (const double[]){1, NAN, 2, INFINITY});
  cr_assert(tg_all_finite(tg_select(v, 1, 0)));
  cr_assert(!tg_all_finite(tg_select(v, 1, 1)));
  cr_assert(tg_all_finite(tg_scalar(3, f32)));
  tg_expect_ok();
}

TG_TEST(allclose, errors) {
  tg_tensor *a = tg_ones(TG_SHAPE(2, 3), f64), *b = tg_ones(TG_SHAPE(4), f64);
  cr_assert(!tg_allclose(a, b, 0, 0));
  tg_expect_error(TG_ERR_SHAPE, "tg_allclose: a is [2, 3] and b is [4]", "not broadcastable");
  cr_assert(!tg_allclose_ex(a, b, 0, 0, true));
  tg_expect_error(TG_ERR_SHAPE, "tg_allclose");
  cr_assert_float_eq(tg_max_abs_diff(a, b), -1, 0);
  tg_expect_error(TG_ERR_SHAPE, "tg_max_abs_diff: a is [2, 3] and b is [4]");
  cr_assert(!tg_allclose(NULL, a, 0, 0));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_allclose: a is NULL");
  cr_assert(!tg_allclose(a, NULL, 0, 0));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_allclose: b is NULL");
  cr_assert_float_eq(tg_max_abs_diff(a, NULL), -1, 0);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_max_abs_diff: b is NULL");
  cr_assert(!tg_all_finite(NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_all_finite: t is NULL");
  cr_assert(!tg_allclose(a, a, -1e-5, 0));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_allclose: rtol -1e-05 and atol 0 must be non-negative");
  cr_assert(!tg_allclose(a, a, 0, NAN));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_allclose: rtol 0 and atol nan");
  /* A NULL from a failed op keeps that op's error. */
  cr_assert(!tg_allclose(tg_add(a, b), a, 0, 0));
  tg_expect_error(TG_ERR_SHAPE, "tg_add");
}

/* The sweep: host copies of strided, broadcast operands of every dtype. */
static tg_status compare_step(void *user, double *out, int *n_out) {
  (void)user;
  tg_tensor *m = tg_reshape(tg_arange(0, 6, 1, f32), TG_SHAPE(2, 3));
  tg_tensor *mt = m ? tg_transpose(m, 0, 1) : NULL;
  tg_tensor *row = mt ? tg_arange(0, 2, 1, i64) : NULL;
  tg_status st = status_of(row);
  if (st != TG_OK) return st;
  bool close = tg_allclose(mt, row, 0, 10);
  st = status_of(close || tg_last_error() == TG_OK ? (void *)1 : NULL);
  double d = st == TG_OK ? tg_max_abs_diff(mt, row) : 0;
  if (st == TG_OK && d < 0) st = tg_last_error();
  bool finite = st == TG_OK && tg_all_finite(mt);
  if (st == TG_OK && !finite) st = tg_last_error();
  if (st == TG_OK) {
    out[(*n_out)++] = close;
    out[(*n_out)++] = d;
  }
  return st;
}

TG_TEST(allclose, allocation_failures_are_clean) {
  sweep("tg_allclose, tg_max_abs_diff, tg_all_finite", compare_step, NULL);
}

TG_TEST(scalar, zero_dim_of_each_dtype) {
  tg_tensor *x = tg_scalar(2.5, f64);
  cr_assert_eq(tg_ndim(x), 0);
  cr_assert_eq(tg_numel(x), 1);
  cr_assert_eq(tg_tensor_dtype(x), TG_F64);
  cr_assert(!tg_requires_grad(x));
  double v = 0;
  cr_assert_eq(tg_item(x, &v), TG_OK);
  cr_assert_float_eq(v, 2.5, 0);
  cr_assert_eq(tg_item(tg_scalar(2.5, f32), &v), TG_OK);
  cr_assert_float_eq(v, 2.5, 0);
  cr_assert_eq(tg_tensor_dtype(tg_scalar(1, TG_OPTS_DEFAULT)), TG_F32);
  tg_tensor *n = tg_scalar(-7, i64);
  cr_assert_eq(tg_tensor_dtype(n), TG_I64);
  cr_assert_eq(tg_item(n, &v), TG_OK);
  cr_assert_float_eq(v, -7, 0);
  cr_assert_eq(tg_item(tg_scalar(0x1p62, i64), &v), TG_OK);
  cr_assert_float_eq(v, 0x1p62, 0);
  tg_expect_ok();
}

TG_TEST(scalar, requires_grad) {
  tg_tensor *w = tg_scalar(3, TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  cr_assert(tg_requires_grad(w));
  tg_tensor *y = tg_mul(w, w);
  cr_assert_eq(tg_backward(y, NULL), TG_OK, "%s", tg_last_error_message());
  tg_test_expect_values(tg_grad(w), 1, (const double[]){6}, 0);
}

TG_TEST(scalar, errors) {
  cr_assert_null(tg_scalar(1, TG_OPTS(.dtype = TG_I64, .requires_grad = true)));
  tg_expect_error(TG_ERR_DTYPE, "tg_scalar: only floating tensors can require grad, not int64");
  /* I64 takes what tg_fill_ takes (test_overflow.c): truncated toward zero, NaN, inf and
   * values outside int64 refused, as torch.scalar_tensor refuses them. */
  double v = -1;
  cr_assert_eq(tg_item(tg_scalar(-2.7, i64), &v), TG_OK);
  cr_assert_eq(v, -2);
  cr_assert_null(tg_scalar(NAN, i64));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_scalar: value nan cannot be converted to int64");
  cr_assert_null(tg_scalar(-INFINITY, i64));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_scalar: value -inf cannot be converted to int64");
}

static tg_status scalar_step(void *user, double *out, int *n_out) {
  (void)user;
  return append(tg_scalar(4.5, TG_OPTS(.dtype = TG_F64, .requires_grad = true)), out, n_out);
}

TG_TEST(scalar, allocation_failures_are_clean) { sweep("tg_scalar", scalar_step, NULL); }
