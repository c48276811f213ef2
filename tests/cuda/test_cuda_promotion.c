/* Type promotion and int64 arithmetic on CUDA (docs/dtypes.md) against the CPU: the int64
 * kernels (pointwise kinds, sums and selections, with full-range values that wrap around),
 * the promoted ops and their gradients in each input's dtype. Results must agree exactly
 * for int64. */
#include <math.h>
#include <stdint.h>

#include "cuda_testutil.h"

/* ---- helpers ---- */

/* n int64 values: full-range (wrapping when added or multiplied) or small (ties for max). */
static tg_tensor *i64_values(int64_t n, bool full_range, uint64_t salt) {
  int64_t *v = malloc(sizeof(int64_t) * (size_t)n);
  cr_assert(v);
  uint64_t s = 0x9E3779B97F4A7C15u * (salt + 1);
  for (int64_t i = 0; i < n; i++) {
    s = s * 6364136223846793005u + 1442695040888963407u;
    v[i] = full_range ? (int64_t)s : (int64_t)(s >> 60) - 8;
  }
  tg_tensor *t = tg_from_data(1, &n, v, TG_OPTS(.dtype = TG_I64));
  free(v);
  cr_assert(t, "%s", tg_last_error_message());
  return t;
}

static tg_tensor *on_cuda(const tg_tensor *t) {
  tg_tensor *c = tg_to_device(t, TG_CUDA0);
  cr_assert(c, "%s", tg_last_error_message());
  return c;
}

/* Asserts cuda (on the device) equals cpu exactly, dtype and values. */
static void expect_same_i64(const char *what, const tg_tensor *cuda, const tg_tensor *cpu) {
  cr_assert(cuda && cpu, "%s: %s", what, tg_last_error_message());
  cr_assert_eq(tg_tensor_dtype(cuda), TG_I64, "%s: %s", what, tg_dtype_name(tg_tensor_dtype(cuda)));
  cr_assert_eq(tg_tensor_dtype(cpu), TG_I64, "%s", what);
  int64_t n = tg_numel(cpu);
  cr_assert_eq(tg_numel(cuda), n, "%s", what);
  int64_t *a = malloc(sizeof(int64_t) * (size_t)(n + 1)),
          *b = malloc(sizeof(int64_t) * (size_t)(n + 1));
  cr_assert(a && b);
  cr_assert_eq(tg_to_host_array(tg_to_device(cuda, TG_DEVICE_CPU), a, sizeof(int64_t) * (size_t)n),
               TG_OK, "%s: %s", what, tg_last_error_message());
  cr_assert_eq(tg_to_host_array(cpu, b, sizeof(int64_t) * (size_t)n), TG_OK);
  for (int64_t i = 0; i < n; i++)
    cr_assert_eq(a[i], b[i], "%s: element %lld is %lld on CUDA, %lld on the CPU", what,
                 (long long)i, (long long)a[i], (long long)b[i]);
  free(a);
  free(b);
}

/* ---- pointwise ---- */

TG_CUDA_TEST(cuda_promotion, int64_pointwise_matches_cpu) {
  tg_tensor *a = tg_reshape(i64_values(24, true, 1), TG_SHAPE(4, 6));
  tg_tensor *b = tg_reshape(i64_values(6, true, 2), TG_SHAPE(1, 6)); /* broadcast rows */
  tg_tensor *small = tg_reshape(i64_values(24, false, 3), TG_SHAPE(4, 6));
  tg_tensor *ca = on_cuda(a), *cb = on_cuda(b), *csmall = on_cuda(small);
  expect_same_i64("add", tg_add(ca, cb), tg_add(a, b));
  expect_same_i64("sub", tg_sub(ca, cb), tg_sub(a, b));
  expect_same_i64("mul", tg_mul(ca, cb), tg_mul(a, b));
  expect_same_i64("add_scaled", tg_add_scaled(ca, cb, -7), tg_add_scaled(a, b, -7));
  expect_same_i64("mul transposed", tg_mul(tg_t(ca), tg_t(ca)), tg_mul(tg_t(a), tg_t(a)));
  expect_same_i64("eq", tg_eq(csmall, tg_t(tg_t(csmall))), tg_eq(small, small));
  expect_same_i64("ne", tg_ne(csmall, cb), tg_ne(small, b));
  expect_same_i64("gt", tg_gt(ca, cb), tg_gt(a, b));
  expect_same_i64("ge", tg_ge(csmall, tg_neg(csmall)), tg_ge(small, tg_neg(small)));
  expect_same_i64("lt", tg_lt(ca, cb), tg_lt(a, b));
  expect_same_i64("le", tg_le(csmall, tg_abs(csmall)), tg_le(small, tg_abs(small)));
  expect_same_i64("neg", tg_neg(ca), tg_neg(a));
  expect_same_i64("abs", tg_abs(ca), tg_abs(a));
  expect_same_i64("relu", tg_relu(ca), tg_relu(a));
  expect_same_i64("pow", tg_pow_scalar(ca, 5), tg_pow_scalar(a, 5));
  expect_same_i64("scalar ops", tg_rsub_scalar(tg_mul_scalar(tg_add_scalar(ca, 12345), -3), 5),
                  tg_rsub_scalar(tg_mul_scalar(tg_add_scalar(a, 12345), -3), 5));
  tg_tensor *m = tg_clone(ca), *mc = tg_clone(a);
  cr_assert_eq(tg_add_(m, cb), TG_OK);
  cr_assert_eq(tg_add_(mc, b), TG_OK);
  cr_assert_eq(tg_neg_(m), TG_OK);
  cr_assert_eq(tg_neg_(mc), TG_OK);
  expect_same_i64("in place", m, mc);
  /* the extremes wrap as on the CPU */
  tg_tensor *edge =
      tg_from_data(TG_SHAPE(3), (int64_t[]){INT64_MIN, INT64_MAX, -1}, TG_OPTS(.dtype = TG_I64));
  expect_same_i64("neg of INT64_MIN", tg_neg(on_cuda(edge)), tg_neg(edge));
  expect_same_i64("abs of INT64_MIN", tg_abs(on_cuda(edge)), tg_abs(edge));
  expect_same_i64("INT64_MAX + 1", tg_add_scalar(on_cuda(edge), 1), tg_add_scalar(edge, 1));
}

TG_CUDA_TEST(cuda_promotion, promoted_ops_match_cpu) {
  for (int k = 0; k < 2; k++) {
    tg_twin f = tg_twin_values(6, TG_F32, 1, true), d = tg_twin_values(6, TG_F64, 2, true);
    tg_tensor *l = i64_values(6, false, 4), *cl = on_cuda(l);
    tg_tensor *y = k ? tg_div(f.cuda, d.cuda) : tg_mul(tg_add(f.cuda, cl), d.cuda);
    tg_tensor *want = k ? tg_div(f.cpu, d.cpu) : tg_mul(tg_add(f.cpu, l), d.cpu);
    cr_assert_eq(tg_tensor_dtype(y), TG_F64);
    tg_assert_close(tg_to_device(y, TG_DEVICE_CPU), want, 1e-6, 1e-6);
  }
  tg_tensor *l = i64_values(8, false, 5), *cl = on_cuda(l);
  tg_tensor *r = tg_div(cl, tg_add_scalar(tg_abs(cl), 1)); /* true division: F32 */
  cr_assert_eq(tg_tensor_dtype(r), TG_F32);
  tg_assert_close(tg_to_device(r, TG_DEVICE_CPU), tg_div(l, tg_add_scalar(tg_abs(l), 1)), 1e-6,
                  1e-6);
  tg_tensor *e = tg_exp(cl);
  cr_assert_eq(tg_tensor_dtype(e), TG_F32);
  tg_assert_close(tg_to_device(e, TG_DEVICE_CPU), tg_exp(l), 1e-6, 1e-6);
  tg_tensor *q = tg_div_scalar(cl, 4);
  cr_assert_eq(tg_tensor_dtype(q), TG_F32);
  tg_assert_close(tg_to_device(q, TG_DEVICE_CPU), tg_div_scalar(l, 4), 0, 0);
}

TG_CUDA_TEST(cuda_promotion, gradients_in_each_dtype) {
  tg_twin f = tg_twin_values(5, TG_F32, 6, false), d = tg_twin_values(5, TG_F64, 7, false);
  tg_tensor *leaves[4] = {f.cpu, d.cpu, f.cuda, d.cuda};
  for (int i = 0; i < 4; i++) tg_set_requires_grad(leaves[i], true);
  for (int dev = 0; dev < 2; dev++) {
    tg_tensor *a = leaves[2 * dev], *b = leaves[2 * dev + 1];
    cr_assert_eq(tg_backward(tg_sum(tg_mul(tg_div(a, b), a)), NULL), TG_OK, "%s",
                 tg_last_error_message());
  }
  for (int i = 0; i < 2; i++) {
    tg_tensor *g = tg_grad(leaves[2 + i]);
    cr_assert_eq(tg_tensor_dtype(g), i ? TG_F64 : TG_F32);
    tg_assert_close(tg_to_device(g, TG_DEVICE_CPU), tg_grad(leaves[i]), 1e-5, 1e-5);
  }
}

/* ---- reductions ---- */

TG_CUDA_TEST(cuda_promotion, int64_sums_match_cpu) {
  /* shapes that take each path of the float sums: few rows, many rows, long rows */
  const int64_t shapes[][2] = {{3, 5}, {4096, 3}, {2, 3000}, {1, 1}, {0, 4}};
  for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
    int64_t r = shapes[k][0], c = shapes[k][1];
    tg_tensor *x = tg_reshape(i64_values(r * c, true, 10 + k), TG_SHAPE(r, c)), *cx = on_cuda(x);
    expect_same_i64("sum", tg_sum(cx), tg_sum(x));
    expect_same_i64("sum_dim 0", tg_sum_dim(cx, 0, false), tg_sum_dim(x, 0, false));
    expect_same_i64("sum_dim 1", tg_sum_dim(cx, 1, true), tg_sum_dim(x, 1, true));
    expect_same_i64("sum of the transpose", tg_sum_dim(tg_t(cx), 1, false),
                    tg_sum_dim(tg_t(x), 1, false));
    expect_same_i64("sum_to_size", tg_sum_to_size(cx, 2, (int64_t[]){1, c}),
                    tg_sum_to_size(x, 2, (int64_t[]){1, c}));
  }
}

TG_CUDA_TEST(cuda_promotion, int64_selections_match_cpu) {
  /* {rows, len}: one thread per row, and few long rows (the chunked path) */
  const int64_t shapes[][2] = {{5, 7}, {3, 1000}, {4096, 2}};
  for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
    int64_t r = shapes[k][0], c = shapes[k][1];
    for (int full = 0; full < 2; full++) { /* small values tie: the first index wins */
      tg_tensor *x = tg_reshape(i64_values(r * c, full, 20 + k), TG_SHAPE(r, c)), *cx = on_cuda(x);
      expect_same_i64("max", tg_max(cx), tg_max(x));
      expect_same_i64("min", tg_min(cx), tg_min(x));
      for (int dim = 0; dim < 2; dim++) {
        tg_tensor *v, *i, *cv, *ci;
        cr_assert_eq(tg_max_dim(x, dim, false, &v, &i), TG_OK);
        cr_assert_eq(tg_max_dim(cx, dim, false, &cv, &ci), TG_OK, "%s", tg_last_error_message());
        expect_same_i64("max_dim values", cv, v);
        expect_same_i64("max_dim indices", ci, i);
        cr_assert_eq(tg_min_dim(x, dim, true, &v, &i), TG_OK);
        cr_assert_eq(tg_min_dim(cx, dim, true, &cv, &ci), TG_OK, "%s", tg_last_error_message());
        expect_same_i64("min_dim values", cv, v);
        expect_same_i64("min_dim indices", ci, i);
      }
    }
  }
}

/* ---- what the kernels refuse ---- */

TG_CUDA_TEST(cuda_promotion, kernels_refuse_int64_kinds_they_lack) {
  const tg_backend *be = tg__backend("test", TG_CUDA0);
  cr_assert(be);
  tg_tensor *l = on_cuda(i64_values(4, false, 30)), *o = tg_empty_like(l);
  cr_assert_eq(be->binary(TG_BINARY_DIV, 1, o, l, l), TG_ERR_DTYPE);
  tg_expect_error(TG_ERR_DTYPE, "int64");
  cr_assert_eq(be->unary(TG_UNARY_EXP, 0, 0, o, l), TG_ERR_DTYPE);
  tg_expect_error(TG_ERR_DTYPE, "int64");
  cr_assert_null(tg_mean(l));
  tg_expect_error(TG_ERR_DTYPE, "tg_mean", "int64");
}
