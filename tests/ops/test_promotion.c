/* Type promotion and int64 arithmetic (docs/dtypes.md): PyTorch's rules where dtypes meet,
 * the gradients of promoted ops (each in its input's dtype), int64 wrap-around, the 0-dim
 * rule, comparisons and sums on int64 (an accuracy), and the places where tg refuses with
 * the cast to write. */
#include <math.h>
#include <stdint.h>

#include "testutil.h"

#include "alloc_sweep.h"

/* ---- helpers ---- */

static tg_tensor *f32(int64_t n, const double *v) { return tg_test_tensor_of(TG_F32, 1, &n, v); }
static tg_tensor *f64(int64_t n, const double *v) { return tg_test_tensor_of(TG_F64, 1, &n, v); }

static tg_tensor *i64(int64_t n, const int64_t *v) {
  tg_tensor *t = tg_from_data(1, &n, v, TG_OPTS(.dtype = TG_I64));
  cr_assert(t, "%s", tg_last_error_message());
  return t;
}

static tg_tensor *scalar_of(double v, tg_dtype dtype) {
  tg_tensor *t = tg_scalar(v, TG_OPTS(.dtype = dtype));
  cr_assert(t, "%s", tg_last_error_message());
  return t;
}

/* Asserts t is int64 with exactly the n values want. */
static void expect_i64(const tg_tensor *t, int64_t n, const int64_t *want) {
  cr_assert(t, "%s", tg_last_error_message());
  cr_assert_eq(tg_tensor_dtype(t), TG_I64, "dtype %s, expected int64",
               tg_dtype_name(tg_tensor_dtype(t)));
  cr_assert_eq(tg_numel(t), n);
  int64_t got[16];
  cr_assert(n <= 16);
  cr_assert_eq(tg_to_host_array(t, got, sizeof(int64_t) * (size_t)n), TG_OK);
  for (int64_t i = 0; i < n; i++)
    cr_assert_eq(got[i], want[i], "element %lld is %lld, expected %lld", (long long)i,
                 (long long)got[i], (long long)want[i]);
}

/* Asserts t has dtype and the n values want (within a dtype's rounding). */
static void expect_values(const tg_tensor *t, tg_dtype dtype, int64_t n, const double *want) {
  cr_assert(t, "%s", tg_last_error_message());
  cr_assert_eq(tg_tensor_dtype(t), dtype, "dtype %s, expected %s",
               tg_dtype_name(tg_tensor_dtype(t)), tg_dtype_name(dtype));
  tg_test_expect_values(t, n, want, dtype == TG_F32 ? 1e-6 : 1e-14);
}

/* ---- the rules ---- */

TG_TEST(promotion, promote_types_table) {
  const tg_dtype F = TG_F32, D = TG_F64, L = TG_I64;
  const tg_dtype want[3][3] = {[TG_F32] = {[TG_F32] = F, [TG_F64] = D, [TG_I64] = F},
                               [TG_F64] = {[TG_F32] = D, [TG_F64] = D, [TG_I64] = D},
                               [TG_I64] = {[TG_F32] = F, [TG_F64] = D, [TG_I64] = L}};
  for (int a = 0; a < TG_NUM_DTYPES; a++)
    for (int b = 0; b < TG_NUM_DTYPES; b++)
      cr_assert_eq(tg_promote_types((tg_dtype)a, (tg_dtype)b), want[a][b], "%s + %s",
                   tg_dtype_name((tg_dtype)a), tg_dtype_name((tg_dtype)b));
  cr_assert_eq(tg_promote_types(TG_NUM_DTYPES, TG_F32), TG_NUM_DTYPES);
  tg_expect_ok();
}

TG_TEST(promotion, result_type_zero_dim_rule) {
  tg_tensor *f3 = tg_zeros(TG_SHAPE(3), TG_OPTS(.dtype = TG_F32));
  tg_tensor *d3 = tg_zeros(TG_SHAPE(3), TG_OPTS(.dtype = TG_F64));
  tg_tensor *l3 = tg_zeros(TG_SHAPE(3), TG_OPTS(.dtype = TG_I64));
  tg_tensor *f0 = scalar_of(1, TG_F32), *d0 = scalar_of(1, TG_F64), *l0 = scalar_of(1, TG_I64);
  /* a 0-dim operand takes part only when its category is higher */
  cr_assert_eq(tg_result_type(f3, d0), TG_F32);
  cr_assert_eq(tg_result_type(d0, f3), TG_F32);
  cr_assert_eq(tg_result_type(l3, f0), TG_F32);
  cr_assert_eq(tg_result_type(l3, d0), TG_F64);
  cr_assert_eq(tg_result_type(l3, l0), TG_I64);
  cr_assert_eq(tg_result_type(f3, l0), TG_F32);
  /* dimensioned operands, and 0-dim ones among themselves, promote fully */
  cr_assert_eq(tg_result_type(f3, d3), TG_F64);
  cr_assert_eq(tg_result_type(l3, d3), TG_F64);
  cr_assert_eq(tg_result_type(f0, d0), TG_F64);
  cr_assert_eq(tg_result_type(l0, f0), TG_F32);
  tg_expect_ok();
  cr_assert_eq(tg_result_type(NULL, f3), TG_NUM_DTYPES);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_result_type", "a is NULL");
}

/* ---- binary ops ---- */

TG_TEST(promotion, mixed_float_binary_ops) {
  tg_tensor *a = f32(3, (double[]){1, 2, 3}), *b = f64(3, (double[]){0.5, 0.25, 4});
  expect_values(tg_add(a, b), TG_F64, 3, (double[]){1.5, 2.25, 7});
  expect_values(tg_sub(b, a), TG_F64, 3, (double[]){-0.5, -1.75, 1});
  expect_values(tg_mul(a, b), TG_F64, 3, (double[]){0.5, 0.5, 12});
  expect_values(tg_div(a, b), TG_F64, 3, (double[]){2, 8, 0.75});
  expect_values(tg_add_scaled(a, b, 2), TG_F64, 3, (double[]){2, 2.5, 11});
  /* the 0-dim rule: F32[3] + F64 0-dim stays F32 */
  expect_values(tg_add(a, scalar_of(0.5, TG_F64)), TG_F32, 3, (double[]){1.5, 2.5, 3.5});
  expect_values(tg_mul(scalar_of(2, TG_F64), a), TG_F32, 3, (double[]){2, 4, 6});
}

TG_TEST(promotion, int_and_float_binary_ops) {
  tg_tensor *l = i64(3, (int64_t[]){1, 2, 3}), *f = f32(3, (double[]){0.5, 0.5, 0.5});
  expect_values(tg_add(l, f), TG_F32, 3, (double[]){1.5, 2.5, 3.5});
  expect_values(tg_mul(f64(3, (double[]){2, 2, 2}), l), TG_F64, 3, (double[]){2, 4, 6});
  /* I64[3] + F32 0-dim: the float category is higher, so F32 */
  expect_values(tg_add(l, scalar_of(0.5, TG_F32)), TG_F32, 3, (double[]){1.5, 2.5, 3.5});
  /* I64[3] + I64 0-dim stays I64 */
  expect_i64(tg_add(l, scalar_of(10, TG_I64)), 3, (int64_t[]){11, 12, 13});
}

TG_TEST(promotion, int64_arithmetic) {
  tg_tensor *a = i64(4, (int64_t[]){7, -7, 100, 0}), *b = i64(4, (int64_t[]){2, 2, -3, 5});
  expect_i64(tg_add(a, b), 4, (int64_t[]){9, -5, 97, 5});
  expect_i64(tg_sub(a, b), 4, (int64_t[]){5, -9, 103, -5});
  expect_i64(tg_mul(a, b), 4, (int64_t[]){14, -14, -300, 0});
  expect_i64(tg_add_scaled(a, b, -3), 4, (int64_t[]){1, -13, 109, -15});
  /* broadcasting a column against a row */
  tg_tensor *col = tg_reshape(i64(2, (int64_t[]){1, 2}), TG_SHAPE(2, 1));
  expect_i64(tg_mul(col, i64(3, (int64_t[]){1, 10, 100})), 6, (int64_t[]){1, 10, 100, 2, 20, 200});
  /* div of int64 is true division, in F32 (PyTorch's default float) */
  expect_values(tg_div(a, b), TG_F32, 4, (double[]){3.5, -3.5, -100.0 / 3.0, 0});
}

TG_TEST(promotion, int64_wraps_around) {
  const int64_t big = INT64_C(1) << 62;
  tg_tensor *x = i64(2, (int64_t[]){big, INT64_MAX});
  expect_i64(tg_add(x, x), 2, (int64_t[]){INT64_MIN, -2});
  expect_i64(tg_mul(x, i64(2, (int64_t[]){4, 2})), 2, (int64_t[]){0, -2});
  expect_i64(tg_sub(i64(1, (int64_t[]){INT64_MIN}), i64(1, (int64_t[]){1})), 1,
             (int64_t[]){INT64_MAX});
  expect_i64(tg_neg(i64(1, (int64_t[]){INT64_MIN})), 1, (int64_t[]){INT64_MIN});
  expect_i64(tg_abs(i64(2, (int64_t[]){INT64_MIN, -5})), 2, (int64_t[]){INT64_MIN, 5});
  expect_i64(tg_add_scalar(x, 1), 2, (int64_t[]){big + 1, INT64_MIN});
  expect_i64(tg_mul_scalar(x, 4), 2, (int64_t[]){0, -4});
  expect_i64(tg_sum(x), 1, (int64_t[]){INT64_MIN + big - 1});
  expect_i64(tg_sum(i64(3, (int64_t[]){INT64_MAX, 1, 1})), 1, (int64_t[]){INT64_MIN + 1});
}

/* ---- gradients: each in its input's own dtype ---- */

TG_TEST(promotion, gradients_come_back_in_each_dtype) {
  tg_tensor *a = f32(2, (double[]){1, 2}), *b = f64(2, (double[]){3, 4});
  tg_set_requires_grad(a, true);
  tg_set_requires_grad(b, true);
  tg_tensor *y = tg_mul(a, b);
  cr_assert_eq(tg_tensor_dtype(y), TG_F64);
  cr_assert(tg_requires_grad(y));
  cr_assert_eq(tg_backward(tg_sum(y), NULL), TG_OK, "%s", tg_last_error_message());
  expect_values(tg_grad(a), TG_F32, 2, (double[]){3, 4});
  expect_values(tg_grad(b), TG_F64, 2, (double[]){1, 2});
}

TG_TEST(promotion, gradient_through_int_operand_and_zero_dim) {
  tg_tensor *x = f32(3, (double[]){1, 2, 4});
  tg_set_requires_grad(x, true);
  tg_tensor *c = scalar_of(0.5, TG_F64);
  tg_set_requires_grad(c, true);
  /* x * [1, 2, 3] (int64) + c (F64 0-dim, so the result stays F32) */
  tg_tensor *y = tg_add(tg_mul(x, i64(3, (int64_t[]){1, 2, 3})), c);
  cr_assert_eq(tg_tensor_dtype(y), TG_F32);
  cr_assert_eq(tg_backward(tg_sum(y), NULL), TG_OK, "%s", tg_last_error_message());
  expect_values(tg_grad(x), TG_F32, 3, (double[]){1, 2, 3});
  expect_values(tg_grad(c), TG_F64, 1, (double[]){3});
}

/* y = x * k + k / x + (x + half), with k an int64 tensor and half an F32 0-dim tensor. */
static tg_status mixed_f64_fn(void *user, const tg_tensor *const *in, tg_tensor **out) {
  (void)user;
  tg_tensor *k = tg_from_data(TG_SHAPE(3), (int64_t[]){2, -3, 5}, TG_OPTS(.dtype = TG_I64));
  tg_tensor *half = tg_scalar(0.5, TG_OPTS(.dtype = TG_F32));
  out[0] = tg_add(tg_add(tg_mul(in[0], k), tg_div(k, in[0])), tg_add(in[0], half));
  return out[0] ? TG_OK : tg_last_error();
}

TG_TEST(promotion, gradcheck_mixed_f64_ops) {
  tg_tensor *x = f64(3, (double[]){0.7, -1.3, 2.1});
  tg_set_requires_grad(x, true);
  tg_gradcheck_options o = {.quiet = true};
  cr_assert_eq(tg_gradcheck(mixed_f64_fn, NULL, 1, &x, 1, o), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(tg_gradgradcheck(mixed_f64_fn, NULL, 1, &x, 1, o), TG_OK, "%s",
               tg_last_error_message());
}

TG_TEST(promotion, int64_never_requires_grad) {
  tg_tensor *l = i64(2, (int64_t[]){1, 2});
  cr_assert_neq(tg_set_requires_grad(l, true), TG_OK);
  tg_expect_error(TG_ERR_DTYPE, "int64");
  cr_assert_null(tg_zeros(TG_SHAPE(2), TG_OPTS(.dtype = TG_I64, .requires_grad = true)));
  tg_expect_error(TG_ERR_DTYPE, "int64");
  /* an int64 result of a float leaf's comparison does not require grad either */
  tg_tensor *f = f32(2, (double[]){1, 2});
  tg_set_requires_grad(f, true);
  cr_assert(!tg_requires_grad(tg_eq(f, l)));
}

/* ---- comparisons and an accuracy ---- */

TG_TEST(promotion, comparisons_give_one_or_zero_in_the_promoted_dtype) {
  tg_tensor *a = i64(4, (int64_t[]){1, 2, 3, INT64_MIN}), *b = i64(4, (int64_t[]){1, 5, 0, 0});
  expect_i64(tg_eq(a, b), 4, (int64_t[]){1, 0, 0, 0});
  expect_i64(tg_ne(a, b), 4, (int64_t[]){0, 1, 1, 1});
  expect_i64(tg_gt(a, b), 4, (int64_t[]){0, 0, 1, 0});
  expect_i64(tg_ge(a, b), 4, (int64_t[]){1, 0, 1, 0});
  expect_i64(tg_lt(a, b), 4, (int64_t[]){0, 1, 0, 1});
  expect_i64(tg_le(a, b), 4, (int64_t[]){1, 1, 0, 1});
  expect_values(tg_eq(f32(2, (double[]){0.5, 1}), f64(2, (double[]){0.5, 2})), TG_F64, 2,
                (double[]){1, 0});
  expect_values(tg_gt(a, scalar_of(1.5, TG_F32)), TG_F32, 4, (double[]){0, 1, 1, 0});
  expect_i64(tg_eq(a, scalar_of(2, TG_I64)), 4, (int64_t[]){0, 1, 0, 0});
}

TG_TEST(promotion, accuracy_from_argmax_and_labels) {
  /* 4 samples, 3 classes; predictions 2, 0, 1, 1; labels 2, 1, 1, 0: accuracy 0.5 */
  tg_tensor *logits =
      tg_reshape(f32(12, (double[]){0, 1, 5, 3, 1, 0, 0, 9, 1, 2, 7, 3}), TG_SHAPE(4, 3));
  tg_tensor *labels = i64(4, (int64_t[]){2, 1, 1, 0});
  tg_tensor *pred = NULL;
  cr_assert_eq(tg_max_dim(logits, 1, false, NULL, &pred), TG_OK);
  tg_tensor *correct = tg_sum(tg_eq(pred, labels));
  expect_i64(correct, 1, (int64_t[]){2});
  expect_values(tg_div_scalar(correct, 4), TG_F32, 1, (double[]){0.5});
  expect_values(tg_mean(tg_to_dtype(tg_eq(pred, labels), TG_F32)), TG_F32, 1, (double[]){0.5});
}

/* ---- scalar ops ---- */

TG_TEST(promotion, scalar_ops_on_int64) {
  tg_tensor *x = i64(3, (int64_t[]){7, -7, 0});
  expect_i64(tg_add_scalar(x, 3), 3, (int64_t[]){10, -4, 3});
  expect_i64(tg_sub_scalar(x, 3), 3, (int64_t[]){4, -10, -3});
  expect_i64(tg_rsub_scalar(x, 3), 3, (int64_t[]){-4, 10, 3});
  expect_i64(tg_mul_scalar(x, -2), 3, (int64_t[]){-14, 14, 0});
  expect_values(tg_div_scalar(x, 2), TG_F32, 3, (double[]){3.5, -3.5, 0});
  expect_values(tg_div_scalar(x, 0.5), TG_F32, 3, (double[]){14, -14, 0});
  cr_assert_eq(tg_add_scalar_(x, -7), TG_OK);
  cr_assert_eq(tg_mul_scalar_(x, 2), TG_OK);
  expect_i64(x, 3, (int64_t[]){0, -28, -14});
}

TG_TEST(promotion, non_integral_scalar_on_int64_is_refused) {
  tg_tensor *x = i64(2, (int64_t[]){1, 2});
  cr_assert_null(tg_add_scalar(x, 0.5));
  tg_expect_error(TG_ERR_DTYPE, "tg_add_scalar", "int64", "0.5", "tg_to_dtype(a, TG_F32)");
  cr_assert_null(tg_sub_scalar(x, 1.25));
  tg_expect_error(TG_ERR_DTYPE, "tg_sub_scalar", "1.25");
  cr_assert_null(tg_rsub_scalar(x, NAN));
  tg_expect_error(TG_ERR_DTYPE, "tg_rsub_scalar");
  cr_assert_null(tg_mul_scalar(x, 1e19)); /* a whole number, but past int64 */
  tg_expect_error(TG_ERR_DTYPE, "tg_mul_scalar");
  cr_assert_eq(tg_add_scalar_(x, 0.5), TG_ERR_DTYPE);
  tg_expect_error(TG_ERR_DTYPE, "tg_add_scalar_", "TG_F32");
  cr_assert_eq(tg_mul_scalar_(x, INFINITY), TG_ERR_DTYPE);
  tg_expect_error(TG_ERR_DTYPE, "tg_mul_scalar_");
  expect_i64(x, 2, (int64_t[]){1, 2}); /* untouched */
  /* the edges of int64: -2^63 is one, 2^63 is not */
  expect_i64(tg_mul_scalar(i64(1, (int64_t[]){1}), -9223372036854775808.0), 1,
             (int64_t[]){INT64_MIN});
  expect_i64(tg_sub_scalar(i64(2, (int64_t[]){0, 5}), -9223372036854775808.0), 2,
             (int64_t[]){INT64_MIN, INT64_MIN + 5}); /* x - INT64_MIN wraps */
  cr_assert_null(tg_add_scalar(x, 9223372036854775808.0));
  tg_expect_error(TG_ERR_DTYPE, "tg_add_scalar");
}

/* ---- in place ---- */

TG_TEST(promotion, inplace_castable_targets) {
  tg_tensor *f = f32(3, (double[]){1, 2, 3});
  cr_assert_eq(tg_add_(f, f64(3, (double[]){0.5, 0.5, 0.5})), TG_OK);
  cr_assert_eq(tg_mul_(f, i64(3, (int64_t[]){2, 2, 2})), TG_OK);
  expect_values(f, TG_F32, 3, (double[]){3, 5, 7});
  tg_tensor *d = f64(2, (double[]){1, 2});
  cr_assert_eq(tg_div_(d, f32(2, (double[]){4, 4})), TG_OK);
  expect_values(d, TG_F64, 2, (double[]){0.25, 0.5});
  tg_tensor *l = i64(2, (int64_t[]){5, 6});
  cr_assert_eq(tg_sub_(l, i64(1, (int64_t[]){1})), TG_OK);
  cr_assert_eq(tg_add_scaled_(l, i64(2, (int64_t[]){1, 2}), 10), TG_OK);
  cr_assert_eq(tg_neg_(l), TG_OK);
  cr_assert_eq(tg_relu_(l), TG_OK);
  expect_i64(l, 2, (int64_t[]){0, 0});
  tg_tensor *m = i64(2, (int64_t[]){-5, 6});
  cr_assert_eq(tg_abs_(m), TG_OK);
  expect_i64(m, 2, (int64_t[]){5, 6});
}

TG_TEST(promotion, inplace_float_result_into_int64_is_refused) {
  tg_tensor *l = i64(2, (int64_t[]){5, 6});
  cr_assert_eq(tg_add_(l, f32(2, (double[]){1, 1})), TG_ERR_DTYPE);
  tg_expect_error(TG_ERR_DTYPE, "tg_add_", "float32", "int64", "tg_to_dtype(a, TG_F32)");
  cr_assert_eq(tg_mul_(l, scalar_of(2, TG_F64)), TG_ERR_DTYPE); /* a higher-category 0-dim */
  tg_expect_error(TG_ERR_DTYPE, "tg_mul_", "float64", "int64");
  cr_assert_eq(tg_div_(l, i64(2, (int64_t[]){1, 1})), TG_ERR_DTYPE); /* true division */
  tg_expect_error(TG_ERR_DTYPE, "tg_div_", "float32", "int64");
  cr_assert_eq(tg_add_scaled_(l, i64(2, (int64_t[]){1, 1}), 0.5), TG_ERR_DTYPE);
  tg_expect_error(TG_ERR_DTYPE, "tg_add_scaled_", "alpha");
  cr_assert_eq(tg_exp_(l), TG_ERR_DTYPE);
  tg_expect_error(TG_ERR_DTYPE, "tg_exp_", "float32", "int64");
  cr_assert_eq(tg_elu_(l, 1.0), TG_ERR_DTYPE);
  tg_expect_error(TG_ERR_DTYPE, "tg_elu_", "int64");
  expect_i64(l, 2, (int64_t[]){5, 6}); /* untouched */
}

TG_TEST(promotion, inplace_gradient_of_a_cast_operand) {
  tg_tensor *b = f64(2, (double[]){3, 4});
  tg_set_requires_grad(b, true);
  tg_tensor *a = tg_mul_scalar(f32(2, (double[]){1, 2}), 1.0); /* not a leaf */
  cr_assert_eq(tg_mul_(a, b), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(tg_tensor_dtype(a), TG_F32);
  cr_assert_eq(tg_backward(tg_sum(a), NULL), TG_OK, "%s", tg_last_error_message());
  expect_values(tg_grad(b), TG_F64, 2, (double[]){1, 2});
}

/* ---- unary ops ---- */

TG_TEST(promotion, unary_ops_on_int64) {
  tg_tensor *x = i64(3, (int64_t[]){-2, 0, 4});
  expect_i64(tg_neg(x), 3, (int64_t[]){2, 0, -4});
  expect_i64(tg_abs(x), 3, (int64_t[]){2, 0, 4});
  expect_i64(tg_relu(x), 3, (int64_t[]){0, 0, 4});
  tg_tensor *p = i64(2, (int64_t[]){1, 4});
  expect_values(tg_exp(p), TG_F32, 2, (double[]){exp(1.0), exp(4.0)});
  expect_values(tg_log(p), TG_F32, 2, (double[]){0, log(4.0)});
  expect_values(tg_sqrt(p), TG_F32, 2, (double[]){1, 2});
  expect_values(tg_sigmoid(p), TG_F32, 2, (double[]){1 / (1 + exp(-1.0)), 1 / (1 + exp(-4.0))});
  expect_values(tg_tanh(p), TG_F32, 2, (double[]){tanh(1.0), tanh(4.0)});
  expect_values(tg_reciprocal(p), TG_F32, 2, (double[]){1, 0.25});
  cr_assert_null(tg_elu(x, 1.0));
  tg_expect_error(TG_ERR_DTYPE, "tg_elu", "int64", "tg_to_dtype(x, TG_F32)");
  cr_assert_null(tg_softplus(x));
  tg_expect_error(TG_ERR_DTYPE, "tg_softplus", "int64");
  /* pow: a whole exponent keeps int64 (wrapping), a fractional one gives F32, a negative
   * whole one is refused, as in PyTorch */
  expect_i64(tg_pow_scalar(x, 2.0), 3, (int64_t[]){4, 0, 16});
  expect_i64(tg_pow_scalar(x, 0.0), 3, (int64_t[]){1, 1, 1});
  expect_i64(tg_pow_scalar(i64(3, (int64_t[]){-3, 3, -2}), 41), 3,
             (int64_t[]){INT64_C(420491770248316829), -INT64_C(420491770248316829),
                         -INT64_C(2199023255552)});
  expect_values(tg_pow_scalar(p, 0.5), TG_F32, 2, (double[]){1, 2});
  cr_assert_null(tg_pow_scalar(x, -1.0));
  tg_expect_error(TG_ERR_DTYPE, "tg_pow_scalar", "negative", "tg_to_dtype(x, TG_F32)");
  tg_tensor *q = i64(2, (int64_t[]){-2, 3});
  cr_assert_eq(tg_pow_scalar_(q, 3), TG_OK);
  expect_i64(q, 2, (int64_t[]){-8, 27});
  cr_assert_eq(tg_pow_scalar_(q, 0.5), TG_ERR_DTYPE);
  tg_expect_error(TG_ERR_DTYPE, "tg_pow_scalar_", "float32", "int64");
}

/* ---- reductions ---- */

TG_TEST(promotion, reductions_on_int64) {
  tg_tensor *x = tg_reshape(i64(6, (int64_t[]){3, -1, 7, 7, 0, -9}), TG_SHAPE(2, 3));
  expect_i64(tg_sum(x), 1, (int64_t[]){7});
  expect_i64(tg_sum_dim(x, 0, false), 3, (int64_t[]){10, -1, -2});
  expect_i64(tg_sum_dim(x, 1, true), 2, (int64_t[]){9, -2});
  expect_i64(tg_sum(tg_t(x)), 1, (int64_t[]){7});
  expect_i64(tg_sum_to_size(x, 2, (int64_t[]){1, 3}), 3, (int64_t[]){10, -1, -2});
  expect_i64(tg_max(x), 1, (int64_t[]){7});
  expect_i64(tg_min(x), 1, (int64_t[]){-9});
  tg_tensor *values, *indices;
  cr_assert_eq(tg_max_dim(x, 1, false, &values, &indices), TG_OK);
  expect_i64(values, 2, (int64_t[]){7, 7});
  expect_i64(indices, 2, (int64_t[]){2, 0}); /* the first of a tie */
  cr_assert_eq(tg_min_dim(x, 0, false, &values, &indices), TG_OK);
  expect_i64(values, 3, (int64_t[]){3, -1, -9});
  expect_i64(indices, 3, (int64_t[]){0, 0, 1});
  /* an empty sum is 0 */
  expect_i64(tg_sum(tg_zeros(TG_SHAPE(0), TG_OPTS(.dtype = TG_I64))), 1, (int64_t[]){0});
  cr_assert_null(tg_mean(x));
  tg_expect_error(TG_ERR_DTYPE, "tg_mean", "int64", "tg_to_dtype(x, TG_F32)");
  cr_assert_null(tg_mean_dim(x, 0, false));
  tg_expect_error(TG_ERR_DTYPE, "tg_mean_dim", "int64");
}

/* ---- cat, stack, mm ---- */

TG_TEST(promotion, cat_and_stack_promote) {
  tg_tensor *l = i64(2, (int64_t[]){1, 2}), *f = f32(1, (double[]){0.5});
  tg_set_requires_grad(f, true);
  tg_tensor *c = tg_cat(2, (const tg_tensor *[]){l, f}, 0);
  expect_values(c, TG_F32, 3, (double[]){1, 2, 0.5});
  cr_assert_eq(tg_backward(tg_sum(c), NULL), TG_OK, "%s", tg_last_error_message());
  expect_values(tg_grad(f), TG_F32, 1, (double[]){1});
  tg_tensor *s =
      tg_stack(2, (const tg_tensor *[]){scalar_of(1, TG_I64), scalar_of(1.5, TG_F64)}, 0);
  expect_values(s, TG_F64, 2, (double[]){1, 1.5});
  expect_i64(tg_cat(2, (const tg_tensor *[]){l, l}, 0), 4, (int64_t[]){1, 2, 1, 2});
  /* a shape mismatch is still named after the casts */
  cr_assert_null(tg_cat(2, (const tg_tensor *[]){tg_reshape(l, TG_SHAPE(1, 2)), f}, 0));
  tg_expect_error(TG_ERR_SHAPE, "tg_cat", "tensors[1]");
}

TG_TEST(promotion, matrix_products_do_not_promote) {
  tg_tensor *a = tg_zeros(TG_SHAPE(2, 2), TG_OPTS(.dtype = TG_F32));
  tg_tensor *b = tg_zeros(TG_SHAPE(2, 2), TG_OPTS(.dtype = TG_F64));
  cr_assert_null(tg_mm(a, b));
  tg_expect_error(TG_ERR_DTYPE, "tg_mm: b is float64 but a is float32");
  cr_assert_null(tg_mm(tg_zeros(TG_SHAPE(2, 2), TG_OPTS(.dtype = TG_I64)), a));
  tg_expect_error(TG_ERR_DTYPE, "tg_mm", "int64");
  cr_assert_null(tg_matmul(a, b));
  tg_expect_error(TG_ERR_DTYPE, "tg_matmul");
}

/* ---- direct calls of the ops skip the front ends: the kernels refuse what they lack ---- */

TG_TEST(promotion, registered_ops_refuse_what_the_front_end_would_promote) {
  tg_tensor *l = i64(2, (int64_t[]){1, 2});
  tg_tensor *out = NULL;
  cr_assert_neq(
      tg_apply(tg_op_lookup("div"), 2, (const tg_tensor *[]){l, l}, 1, (double[]){1}, 1, &out),
      TG_OK);
  tg_expect_error(TG_ERR_DTYPE, "int64");
  cr_assert_neq(tg_apply(tg_op_lookup("exp"), 1, (const tg_tensor *[]){l}, 0, NULL, 1, &out),
                TG_OK);
  tg_expect_error(TG_ERR_DTYPE, "int64");
  cr_assert_neq(tg_apply(tg_op_lookup("add_scalar"), 1, (const tg_tensor *[]){l}, 1,
                         (double[]){0.5}, 1, &out),
                TG_OK);
  tg_expect_error(TG_ERR_DTYPE, "int64");
  cr_assert_neq(
      tg_apply(tg_op_lookup("sub"), 2, (const tg_tensor *[]){l, l}, 1, (double[]){0.5}, 1, &out),
      TG_OK);
  tg_expect_error(TG_ERR_DTYPE, "tg_sub", "alpha");
  cr_assert_neq(tg_apply(tg_op_lookup("pow_scalar"), 1, (const tg_tensor *[]){l}, 1,
                         (double[]){0.5}, 1, &out),
                TG_OK);
  tg_expect_error(TG_ERR_DTYPE, "tg_pow_scalar", "int64");
  cr_assert_neq(tg_apply(tg_op_lookup("mean"), 1, (const tg_tensor *[]){l}, 0, NULL, 1, &out),
                TG_OK);
  tg_expect_error(TG_ERR_DTYPE, "int64");
  cr_assert_neq(tg_apply(tg_op_lookup("add"), 2, (const tg_tensor *[]){l, f32(2, (double[]){1, 2})},
                         1, (double[]){1}, 1, &out),
                TG_OK);
  tg_expect_error(TG_ERR_DTYPE);
}

/* ---- allocation failure ---- */

/* A promoted product and its backward: F32 * F64 -> F64, grads in F32 and F64. */
static tg_status promoted_step(void *user, double *out, int *n_out) {
  (void)user;
  tg_scope sc = tg_scope_begin();
  tg_tensor *a = tg_full(TG_SHAPE(2, 3), 1.5, TG_OPTS(.dtype = TG_F32, .requires_grad = true));
  tg_tensor *b = a ? tg_arange(0, 3, 1, TG_OPTS(.dtype = TG_F64, .requires_grad = true)) : NULL;
  tg_tensor *k = b ? tg_arange(1, 4, 1, TG_OPTS(.dtype = TG_I64)) : NULL;
  tg_tensor *y = k ? tg_add(tg_mul(a, b), k) : NULL;
  tg_status st = status_of(y);
  if (st == TG_OK) st = append(y, out, n_out);
  if (st == TG_OK) st = clean(tg_backward(tg_sum(y), NULL));
  if (st == TG_OK) st = append(tg_grad(a), out, n_out);
  if (st == TG_OK) st = append(tg_grad(b), out, n_out);
  if (st == TG_OK)
    st = tg_tensor_dtype(tg_grad(a)) == TG_F32 && tg_tensor_dtype(tg_grad(b)) == TG_F64
             ? TG_OK
             : tg_set_error(TG_ERR_STATE, "gradient dtypes");
  tg_scope_end(sc);
  return st;
}

TG_TEST(promotion, alloc_failure_sweep_of_a_promoted_op) {
  sweep_result r = sweep("promoted mul + add and backward", promoted_step, NULL);
  cr_assert_gt(r.failed, 0);
}
