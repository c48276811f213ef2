/* bias_gelu, the fused op of docs/adding-a-fused-op.md: the fused forward and backward
 * against the same computation composed from tg ops, its OpInfo checks (gradcheck in F64,
 * double backward refused), and its errors. The CPU-vs-CUDA agreement runs in
 * tests/cuda/test_cuda_opinfo.c with every other op's. */
#include "testutil.h"

#include "alloc_sweep.h"

static const tg_op_desc *bias_gelu(void) {
  const tg_op_desc *op = tg_op_lookup("bias_gelu");
  cr_assert_not_null(op, "%s", tg_last_error_message());
  return op;
}

static tg_tensor *fused(const tg_tensor *x, const tg_tensor *bias) {
  return tg_apply1(bias_gelu(), 2, (const tg_tensor *const[]){x, bias}, 0, NULL);
}

/* The same y = gelu(x + bias) composed: z/2 (1 + tanh(k (z + c z^3))). */
static tg_tensor *composed(const tg_tensor *x, const tg_tensor *bias) {
  tg_tensor *z = tg_add(x, bias);
  tg_tensor *inner = tg_mul_scalar(tg_add(z, tg_mul_scalar(tg_mul(tg_mul(z, z), z), 0.044715)),
                                   0.7978845608028654);
  return tg_mul(tg_mul_scalar(z, 0.5), tg_add_scalar(tg_tanh(inner), 1.0));
}

TG_TEST(bias_gelu, agrees_with_the_composed_ops_forward_and_backward) {
  tg_generator *gen = tg_generator_new(3);
  for (int d = 0; d < 2; d++) {
    const tg_dtype dt = d ? TG_F64 : TG_F32;
    const double tol = d ? 1e-12 : 1e-5;
    tg_scope sc = tg_scope_begin();
    tg_tensor *x = tg_randn(TG_SHAPE(33, 70), (tg_options){.dtype = dt}, gen);
    tg_tensor *b = tg_randn(TG_SHAPE(70), (tg_options){.dtype = dt}, gen);
    tg_tensor *x2 = tg_detach(x), *b2 = tg_detach(b);
    cr_assert_eq(tg_set_requires_grad(x, true), TG_OK);
    cr_assert_eq(tg_set_requires_grad(b, true), TG_OK);
    cr_assert_eq(tg_set_requires_grad(x2, true), TG_OK);
    cr_assert_eq(tg_set_requires_grad(b2, true), TG_OK);
    tg_tensor *y = fused(x, b), *y2 = composed(x2, b2);
    cr_assert_not_null(y, "%s", tg_last_error_message());
    tg_assert_close(y, y2, tol, tol);
    tg_tensor *g = tg_randn(TG_SHAPE(33, 70), (tg_options){.dtype = dt}, gen);
    cr_assert_eq(tg_backward(y, g), TG_OK, "%s", tg_last_error_message());
    cr_assert_eq(tg_backward(y2, g), TG_OK, "%s", tg_last_error_message());
    tg_assert_close(tg_grad(x), tg_grad(x2), tol, tol);
    tg_assert_close(tg_grad(b), tg_grad(b2), tol * 10, tol * 10); /* a sum over 33 rows */
    tg_scope_end(sc);
  }
  tg_generator_free(gen);
}

TG_TEST(bias_gelu, passes_its_opinfo_checks) {
  /* gradcheck in F64 on every sample (transposed x, stepped bias, zero rows, ...), double
   * backward refused (once differentiable) */
  tg_op_check_options opts = {.gradcheck = {.quiet = true}};
  cr_assert_eq(tg_op_check(bias_gelu(), opts), TG_OK, "%s", tg_last_error_message());
}

TG_TEST(bias_gelu, edges) {
  tg_scope sc = tg_scope_begin();
  /* gelu(0) = 0 with gelu'(0) = 1/2; large |z| saturates to z and 0 without NaN */
  const double xv[4] = {0.0, -0.0, 50.0, -50.0}, bv[2] = {0.0, 0.0};
  tg_tensor *x = tg_from_data(TG_SHAPE(2, 2), xv, (tg_options){.dtype = TG_F64});
  tg_tensor *b = tg_from_data(TG_SHAPE(2), bv, (tg_options){.dtype = TG_F64});
  cr_assert_eq(tg_set_requires_grad(x, true), TG_OK);
  tg_tensor *y = fused(x, b);
  cr_assert_not_null(y, "%s", tg_last_error_message());
  const double want_y[4] = {0.0, 0.0, 50.0, 0.0}, want_dx[4] = {0.5, 0.5, 1.0, 0.0};
  cr_assert_eq(tg_backward(y, tg_ones(TG_SHAPE(2, 2), (tg_options){.dtype = TG_F64})), TG_OK);
  for (int i = 0; i < 4; i++) {
    const int64_t at[2] = {i / 2, i % 2};
    double v, g;
    cr_assert_eq(tg_get(y, at, &v), TG_OK);
    cr_assert_eq(tg_get(tg_grad(x), at, &g), TG_OK);
    cr_assert_float_eq(v, want_y[i], 1e-12, "y[%d] = %g", i, v);
    cr_assert_float_eq(g, want_dx[i], 1e-12, "dx[%d] = %g", i, g);
  }
  tg_scope_end(sc);
}

TG_TEST(bias_gelu, refuses_bad_inputs_naming_them) {
  tg_scope sc = tg_scope_begin();
  const tg_options f32 = {.dtype = TG_F32};
  tg_tensor *x = tg_zeros(TG_SHAPE(2, 3), f32);
  cr_assert_null(fused(tg_zeros(TG_SHAPE(6), f32), tg_zeros(TG_SHAPE(3), f32)));
  tg_expect_error(TG_ERR_SHAPE, "bias_gelu", "x must be 2-D", "[6]");
  cr_assert_null(fused(x, tg_zeros(TG_SHAPE(4), f32)));
  tg_expect_error(TG_ERR_SHAPE, "bias_gelu", "bias is [4]", "must be [3]");
  cr_assert_null(fused(x, tg_zeros(TG_SHAPE(3), (tg_options){.dtype = TG_F64})));
  tg_expect_error(TG_ERR_DTYPE, "bias_gelu", "bias");
  cr_assert_null(fused(tg_zeros(TG_SHAPE(2, 3), (tg_options){.dtype = TG_I64}),
                       tg_zeros(TG_SHAPE(3), (tg_options){.dtype = TG_I64})));
  tg_expect_error(TG_ERR_DTYPE, "bias_gelu", "x");
  tg_scope_end(sc);
}

TG_TEST(bias_gelu, runs_where_its_kernels_are) {
  cr_assert(tg_op_supported(bias_gelu(), TG_DEVICE_CPU));
  cr_assert(tg_op_supported(bias_gelu(), TG_DEVICE_META));
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_zeros(TG_SHAPE(4, 5), (tg_options){.device = TG_DEVICE_META});
  tg_tensor *b = tg_zeros(TG_SHAPE(5), (tg_options){.device = TG_DEVICE_META});
  tg_tensor *y = fused(x, b);
  cr_assert_not_null(y, "%s", tg_last_error_message());
  cr_assert(tg_device_equal(tg_tensor_device(y), TG_DEVICE_META));
  tg_scope_end(sc);
}

/* ---- allocation failures: every one of the op's allocations, forward and backward ---- */

static tg_status bias_gelu_step(void *user, double *out, int *n_out) {
  (void)user;
  tg_tensor *x = tg_from_data(TG_SHAPE(2, 3), (const double[]){-1.5, -0.25, 0, 0.5, 1, 3},
                              TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  tg_tensor *b = x ? tg_from_data(TG_SHAPE(3), (const double[]){0.1, -0.2, 0.3},
                                  TG_OPTS(.dtype = TG_F64, .requires_grad = true))
                   : NULL;
  /* through a transpose, so the op also copies x to make it contiguous */
  tg_tensor *xt = b ? tg_t(tg_contiguous(tg_t(x))) : NULL;
  tg_tensor *y = xt ? fused(xt, b) : NULL;
  tg_status st = status_of(y);
  if (st == TG_OK) st = append(y, out, n_out);
  if (st == TG_OK) st = clean(tg_backward(tg_sum(tg_mul(y, y)), NULL));
  if (st == TG_OK) st = append(tg_grad(x), out, n_out);
  if (st == TG_OK) st = append(tg_grad(b), out, n_out);
  return st;
}

TG_TEST(bias_gelu, allocation_failures) {
  sweep("bias_gelu forward and backward", bias_gelu_step, NULL);
}
