/* Every generic op on CUDA against its CPU twin, forward and backward: the same input
 * values on both devices, a fixed upstream gradient, and the outputs and every input
 * gradient compared (|cuda - cpu| <= atol + rtol*|cpu|), in F32 and F64. */
#include <math.h>

#include "cuda_testutil.h"

#define MAX_INPUTS 3

typedef tg_tensor *(*op_fn)(tg_tensor *const *in);

typedef struct op_case {
  const char *name;
  op_fn fn;
  int n_inputs;
  int64_t shapes[MAX_INPUTS][2]; /* [rows, cols]; cols 0 = a vector of rows */
  bool positive;                 /* inputs in [0.25, 3.25) (log, sqrt, pow, div) */
} op_case;

/* ---- the ops ---- */

static tg_tensor *f_add(tg_tensor *const *in) { return tg_add(in[0], in[1]); }
static tg_tensor *f_sub(tg_tensor *const *in) { return tg_sub(in[0], in[1]); }
static tg_tensor *f_mul(tg_tensor *const *in) { return tg_mul(in[0], in[1]); }
static tg_tensor *f_div(tg_tensor *const *in) { return tg_div(in[0], in[1]); }
static tg_tensor *f_add_scaled(tg_tensor *const *in) { return tg_add_scaled(in[0], in[1], -0.5); }
static tg_tensor *f_scalars(tg_tensor *const *in) {
  return tg_div_scalar(tg_rsub_scalar(tg_mul_scalar(tg_add_scalar(in[0], 1.5), 2.0), 0.25), 3.0);
}
static tg_tensor *f_neg(tg_tensor *const *in) { return tg_neg(in[0]); }
static tg_tensor *f_exp(tg_tensor *const *in) { return tg_exp(in[0]); }
static tg_tensor *f_log(tg_tensor *const *in) { return tg_log(in[0]); }
static tg_tensor *f_sqrt(tg_tensor *const *in) { return tg_sqrt(in[0]); }
static tg_tensor *f_pow(tg_tensor *const *in) { return tg_pow_scalar(in[0], 1.7); }
static tg_tensor *f_sigmoid(tg_tensor *const *in) { return tg_sigmoid(in[0]); }
static tg_tensor *f_tanh(tg_tensor *const *in) { return tg_tanh(in[0]); }
static tg_tensor *f_relu(tg_tensor *const *in) { return tg_relu(in[0]); }
static tg_tensor *f_elu(tg_tensor *const *in) { return tg_elu(in[0], 0.8); }
static tg_tensor *f_abs(tg_tensor *const *in) { return tg_abs(in[0]); }
static tg_tensor *f_reciprocal(tg_tensor *const *in) { return tg_reciprocal(in[0]); }
/* Every comparison, weighted so that each one shows in the result; eq(a, a) sees ties.
 * They are not differentiable: the gradients come through the products with a and b. */
static tg_tensor *f_comparisons(tg_tensor *const *in) {
  const tg_tensor *a = in[0], *b = in[1];
  tg_tensor *w = tg_add(tg_eq(a, b), tg_mul_scalar(tg_ne(a, b), 2));
  w = tg_add(w, tg_mul_scalar(tg_gt(a, b), 4));
  w = tg_add(w, tg_mul_scalar(tg_ge(a, b), 8));
  w = tg_add(w, tg_mul_scalar(tg_lt(a, b), 16));
  w = tg_add(w, tg_mul_scalar(tg_le(a, b), 32));
  w = tg_add(w, tg_mul_scalar(tg_eq(a, a), 64));
  return tg_add(tg_mul(a, w), tg_mul(b, w));
}
/* where with a float cond (the larger of a and b) plus one with an int64 cond (the smaller). */
static tg_tensor *f_where(tg_tensor *const *in) {
  const tg_tensor *a = in[0], *b = in[1];
  tg_tensor *larger = tg_where(tg_gt(a, b), a, b);
  tg_tensor *smaller = tg_where(tg_to_dtype(tg_gt(a, b), TG_I64), b, a);
  return tg_add(larger, tg_mul_scalar(smaller, 3));
}
static tg_tensor *f_sum(tg_tensor *const *in) { return tg_sum(in[0]); }
static tg_tensor *f_sum_dim(tg_tensor *const *in) { return tg_sum_dim(in[0], 0, false); }
static tg_tensor *f_mean(tg_tensor *const *in) { return tg_mean(in[0]); }
static tg_tensor *f_mean_dim(tg_tensor *const *in) { return tg_mean_dim(in[0], 1, true); }
static tg_tensor *f_max(tg_tensor *const *in) { return tg_max(in[0]); }
static tg_tensor *f_max_dim(tg_tensor *const *in) {
  tg_tensor *values = NULL;
  return tg_max_dim(in[0], 1, false, &values, NULL) == TG_OK ? values : NULL;
}
static tg_tensor *f_min(tg_tensor *const *in) { return tg_min(in[0]); }
static tg_tensor *f_min_dim(tg_tensor *const *in) {
  tg_tensor *values = NULL;
  return tg_min_dim(in[0], 0, true, &values, NULL) == TG_OK ? values : NULL;
}
static tg_tensor *f_sum_to_size(tg_tensor *const *in) {
  return tg_sum_to_size(in[0], 2, (const int64_t[]){1, 5});
}
static tg_tensor *f_mm(tg_tensor *const *in) { return tg_mm(tg_t(in[0]), in[1]); }
static tg_tensor *f_addmm(tg_tensor *const *in) {
  return tg_addmm(in[2], in[0], tg_t(in[1]), 0.5, 2.0);
}
static tg_tensor *f_matmul(tg_tensor *const *in) { return tg_matmul(in[0], in[1]); }
static tg_tensor *f_cat(tg_tensor *const *in) {
  return tg_cat(3, (const tg_tensor *const[]){in[0], in[1], tg_t(in[2])}, 1);
}
static tg_tensor *f_stack(tg_tensor *const *in) {
  return tg_stack(2, (const tg_tensor *const[]){in[0], in[1]}, 0);
}
static tg_tensor *f_softmax(tg_tensor *const *in) { return tg_softmax(in[0], 1); }
static tg_tensor *f_log_softmax(tg_tensor *const *in) { return tg_log_softmax(in[0], 0); }
static tg_tensor *f_mse(tg_tensor *const *in) { return tg_mse_loss(in[0], in[1]); }
static tg_tensor *f_cross_entropy(tg_tensor *const *in) {
  const int64_t labels[4] = {2, 0, 4, 1};
  tg_tensor *target = tg_from_data(TG_SHAPE(4), labels, TG_OPTS(.dtype = TG_I64));
  return tg_cross_entropy(in[0], tg_to_device(target, tg_tensor_device(in[0])));
}
static tg_tensor *f_views(tg_tensor *const *in) {
  /* a chain of views and a copy: transpose, narrow, select, expand, contiguous */
  tg_tensor *t = tg_narrow(tg_transpose(in[0], 0, 1), 0, 1, 3);
  tg_tensor *e = tg_expand(tg_unsqueeze(tg_select(t, 1, 2), 0), TG_SHAPE(4, 3));
  tg_tensor *s =
      tg_reshape(tg_reshape(tg_slice(in[0], 1, 0, 5, 2), TG_SHAPE(2, 6)), TG_SHAPE(4, 3));
  return tg_mul(tg_contiguous(e), s);
}

static const op_case cases[] = {
    {"add", f_add, 2, {{4, 1}, {1, 5}}, false},
    {"sub", f_sub, 2, {{4, 5}, {5, 0}}, false},
    {"mul", f_mul, 2, {{4, 5}, {4, 1}}, false},
    {"div", f_div, 2, {{4, 5}, {1, 5}}, true},
    {"add_scaled", f_add_scaled, 2, {{4, 5}, {4, 5}}, false},
    {"scalar ops", f_scalars, 1, {{4, 5}}, false},
    {"neg", f_neg, 1, {{4, 5}}, false},
    {"exp", f_exp, 1, {{4, 5}}, false},
    {"log", f_log, 1, {{4, 5}}, true},
    {"sqrt", f_sqrt, 1, {{4, 5}}, true},
    {"pow_scalar", f_pow, 1, {{4, 5}}, true},
    {"sigmoid", f_sigmoid, 1, {{4, 5}}, false},
    {"tanh", f_tanh, 1, {{4, 5}}, false},
    {"relu", f_relu, 1, {{4, 5}}, false},
    {"elu", f_elu, 1, {{4, 5}}, false},
    {"abs", f_abs, 1, {{4, 5}}, false},
    {"reciprocal", f_reciprocal, 1, {{4, 5}}, true},
    {"comparisons", f_comparisons, 2, {{4, 5}, {1, 5}}, false},
    {"where", f_where, 2, {{4, 5}, {1, 5}}, false},
    {"sum", f_sum, 1, {{4, 5}}, false},
    {"sum_dim", f_sum_dim, 1, {{4, 5}}, false},
    {"mean", f_mean, 1, {{4, 5}}, false},
    {"mean_dim", f_mean_dim, 1, {{4, 5}}, false},
    {"max", f_max, 1, {{4, 5}}, false},
    {"max_dim", f_max_dim, 1, {{4, 5}}, false},
    {"min", f_min, 1, {{4, 5}}, false},
    {"min_dim", f_min_dim, 1, {{4, 5}}, false},
    {"sum_to_size", f_sum_to_size, 1, {{4, 5}}, false},
    {"mm", f_mm, 2, {{3, 4}, {3, 5}}, false},
    {"addmm", f_addmm, 3, {{4, 3}, {5, 3}, {5, 0}}, false},
    {"matmul", f_matmul, 2, {{4, 0}, {4, 5}}, false},
    {"cat", f_cat, 3, {{4, 2}, {4, 5}, {1, 4}}, false},
    {"stack", f_stack, 2, {{4, 5}, {4, 5}}, false},
    {"softmax", f_softmax, 1, {{4, 5}}, false},
    {"log_softmax", f_log_softmax, 1, {{4, 5}}, false},
    {"mse_loss", f_mse, 2, {{4, 5}, {4, 5}}, false},
    {"cross_entropy", f_cross_entropy, 1, {{4, 5}}, false},
    {"views", f_views, 1, {{4, 5}}, false},
};

/* ---- running one case on one device ---- */

static tg_tensor *input(const op_case *c, int i, tg_dtype dtype, tg_device device) {
  const int64_t rows = c->shapes[i][0], cols = c->shapes[i][1];
  int64_t n = rows * (cols ? cols : 1);
  double v[64];
  cr_assert(n <= 64);
  for (int64_t k = 0; k < n; k++) v[k] = tg_test_value(k, 10 * i + 1, c->positive);
  tg_tensor *t = cols ? tg_from_data(TG_SHAPE(rows, cols), v, TG_OPTS(.dtype = TG_F64))
                      : tg_from_data(TG_SHAPE(rows), v, TG_OPTS(.dtype = TG_F64));
  t = tg_to_device(tg_to_dtype(t, dtype), device);
  cr_assert(t, "%s", tg_last_error_message());
  cr_assert_eq(tg_set_requires_grad(t, true), TG_OK);
  return t;
}

/* results[0] = out, results[1 + i] = the gradient of sum(out * upstream) for input i. */
static void run(const op_case *c, tg_dtype dtype, tg_device device, tg_tensor **results) {
  tg_tensor *in[MAX_INPUTS];
  for (int i = 0; i < c->n_inputs; i++) in[i] = input(c, i, dtype, device);
  tg_tensor *out = c->fn(in);
  cr_assert(out, "%s on %s: %s", c->name, tg_device_type_name(device.type),
            tg_last_error_message());
  cr_assert(tg_device_equal(tg_tensor_device(out), device), "%s: output on the wrong device",
            c->name);
  double v[64];
  int64_t n = tg_numel(out);
  cr_assert(n <= 64);
  for (int64_t k = 0; k < n; k++) v[k] = tg_test_value(k, 77, false);
  tg_tensor *up = tg_from_data(tg_ndim(out), tg_sizes(out), v, TG_OPTS(.dtype = TG_F64));
  up = tg_to_device(tg_to_dtype(up, dtype), device);
  tg_tensor *loss = tg_sum(tg_mul(out, up));
  cr_assert(loss, "%s: %s", c->name, tg_last_error_message());
  cr_assert_eq(tg_backward(loss, NULL), TG_OK, "%s: %s", c->name, tg_last_error_message());
  results[0] = out;
  for (int i = 0; i < c->n_inputs; i++) {
    results[1 + i] = tg_grad(in[i]);
    cr_assert(results[1 + i], "%s: no gradient for input %d", c->name, i);
  }
}

/* ---- conventions at the edges (docs/conventions.md): CUDA gives what the CPU does ---- */

/* y = f(x) on CUDA for x of the given values (leaf on CUDA), backward of sum(y); checks y
 * and x's gradient against want (NaN matching NaN). */
static void expect_edge(tg_dtype dt, int64_t n, const double *xs, tg_tensor *(*f)(tg_tensor *),
                        const double *want_y, const double *want_grad) {
  tg_tensor *host = tg_to_dtype(tg_from_data(TG_SHAPE(n), xs, TG_OPTS(.dtype = TG_F64)), dt);
  tg_tensor *x = tg_to_device(host, TG_CUDA0);
  cr_assert(x, "%s", tg_last_error_message());
  cr_assert_eq(tg_set_requires_grad(x, true), TG_OK);
  tg_tensor *y = f(x);
  tg_test_expect_ieee(y, tg_numel(y), want_y, dt == TG_F64 ? 1e-15 : 1e-6);
  cr_assert_eq(tg_backward(tg_sum(y), NULL), TG_OK, "%s", tg_last_error_message());
  tg_test_expect_ieee(tg_grad(x), n, want_grad, dt == TG_F64 ? 1e-15 : 1e-6);
}

static tg_tensor *e_relu(tg_tensor *x) { return tg_relu(x); }
static tg_tensor *e_softplus(tg_tensor *x) { return tg_softplus(x); }
static tg_tensor *e_pow_half(tg_tensor *x) { return tg_pow_scalar(x, 0.5); }
static tg_tensor *e_max(tg_tensor *x) { return tg_max(x); }

TG_CUDA_TEST(cuda_ops, conventions_at_the_edges_match_the_cpu) {
  for (int d = 0; d < 2; d++) {
    const tg_dtype dt = d ? TG_F64 : TG_F32;
    expect_edge(dt, 3, (const double[]){NAN, -1, 2}, e_relu, (const double[]){NAN, 0, 2},
                (const double[]){1, 0, 1});
    expect_edge(dt, 2, (const double[]){20.5, 100}, e_softplus, (const double[]){20.5, 100},
                (const double[]){1, 1});
    expect_edge(dt, 3, (const double[]){-0.0, -INFINITY, 4}, e_pow_half,
                (const double[]){0, NAN, 2}, (const double[]){-INFINITY, NAN, 0.25});
    expect_edge(dt, 3, (const double[]){NAN, 1, NAN}, e_max, (const double[]){NAN},
                (const double[]){0.5, 0, 0.5});
    /* NaN, inf and out of range to I64: INT64_MIN, as on the CPU */
    tg_tensor *f = tg_to_device(
        tg_to_dtype(tg_from_data(TG_SHAPE(4), (const double[]){NAN, INFINITY, -1e30, -3.7},
                                 TG_OPTS(.dtype = TG_F64)),
                    dt),
        TG_CUDA0);
    int64_t got[4];
    cr_assert_eq(tg_to_host_array(tg_to_dtype(f, TG_I64), got, sizeof got), TG_OK, "%s",
                 tg_last_error_message());
    cr_assert(got[0] == INT64_MIN && got[1] == INT64_MIN && got[2] == INT64_MIN && got[3] == -3);
    /* addmm with alpha 0: the inf in mat1 does not reach the result */
    tg_tensor *input = tg_to_device(tg_full(TG_SHAPE(2, 2), 1.0, TG_OPTS(.dtype = dt)), TG_CUDA0);
    tg_tensor *m1 = tg_to_device(tg_full(TG_SHAPE(2, 2), INFINITY, TG_OPTS(.dtype = dt)), TG_CUDA0);
    tg_test_expect_ieee(tg_addmm(input, m1, m1, 2, 0), 4, (const double[]){2, 2, 2, 2}, 0);
    tg_tensor *big =
        tg_to_device(tg_full(TG_SHAPE(2, 2), d ? 1e300 : 1e30, TG_OPTS(.dtype = dt)), TG_CUDA0);
    /* max_dim/min_dim: the first NaN's index, also across chunks of a long row */
    tg_tensor *row = tg_zeros(TG_SHAPE(2, 1000), TG_OPTS(.dtype = dt));
    cr_assert_eq(tg_set(row, (const int64_t[]){0, 700}, NAN), TG_OK);
    cr_assert_eq(tg_set(row, (const int64_t[]){0, 900}, NAN), TG_OK);
    cr_assert_eq(tg_set(row, (const int64_t[]){1, 3}, NAN), TG_OK);
    cr_assert_eq(tg_set(row, (const int64_t[]){1, 4}, NAN), TG_OK);
    tg_tensor *row_cuda = tg_to_device(row, TG_CUDA0), *values = NULL, *indices = NULL;
    for (int which = 0; which < 2; which++) {
      tg_status st = which ? tg_min_dim(row_cuda, 1, false, &values, &indices)
                           : tg_max_dim(row_cuda, 1, false, &values, &indices);
      cr_assert_eq(st, TG_OK, "%s", tg_last_error_message());
      tg_test_expect_ieee(values, 2, (const double[]){NAN, NAN}, 0);
      tg_test_expect_values(indices, 2, (const double[]){700, 3}, 0);
    }
    tg_test_expect_ieee(tg_mm(big, big), 4,
                        (const double[]){INFINITY, INFINITY, INFINITY, INFINITY}, 0);
  }
}

TG_CUDA_TEST(cuda_ops, every_op_matches_the_cpu_forward_and_backward) {
  const tg_dtype floating[] = {TG_F32, TG_F64};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
    for (int d = 0; d < 2; d++) {
      tg_scope sc = tg_scope_begin();
      const op_case *c = &cases[k];
      tg_tensor *cpu[1 + MAX_INPUTS], *gpu[1 + MAX_INPUTS];
      run(c, floating[d], TG_DEVICE_CPU, cpu);
      run(c, floating[d], TG_CUDA0, gpu);
      const double rtol = floating[d] == TG_F64 ? 1e-12 : 1e-5;
      const double atol = floating[d] == TG_F64 ? 1e-12 : 1e-5;
      for (int r = 0; r <= c->n_inputs; r++) {
        cr_assert_eq(tg_tensor_device(gpu[r]).type, TG_CUDA, "%s: result %d", c->name, r);
        cr_log_info("%s (%s): result %d", c->name, tg_dtype_name(floating[d]), r);
        tg_assert_close(gpu[r], cpu[r], rtol, atol);
      }
      tg_scope_end(sc);
    }
}

/* ---- the edges, on the device ---- */

static tg_tensor *on_device(tg_dtype dtype, int ndim, const int64_t *sizes, const double *v) {
  tg_tensor *t = tg_to_device(tg_test_tensor_of(dtype, ndim, sizes, v), TG_CUDA0);
  cr_assert(t, "%s", tg_last_error_message());
  return t;
}

/* A source overlapping the destination is read whole first, as on the CPU: copy_ of the
 * transpose and of shifted windows, and an in-place add of the transpose. */
TG_CUDA_TEST(cuda_ops, overlapping_source_is_read_before_the_write) {
  for (int dt = TG_F32; dt <= TG_F64; dt++) {
    tg_options o = {.dtype = (tg_dtype)dt, .device = TG_CUDA0};
    tg_tensor *m = tg_view(tg_arange(1, 10, 1, o), TG_SHAPE(3, 3));
    cr_assert_eq(tg_copy_(m, tg_t(m)), TG_OK, "%s", tg_last_error_message());
    tg_test_expect_values(m, 9, (const double[]){1, 4, 7, 2, 5, 8, 3, 6, 9}, 0);
    cr_assert_eq(tg_add_(m, tg_t(m)), TG_OK, "%s", tg_last_error_message());
    tg_test_expect_values(m, 9, (const double[]){2, 6, 10, 6, 10, 14, 10, 14, 18}, 0);
    tg_tensor *x = tg_arange(0, 6, 1, o);
    cr_assert_eq(tg_copy_(tg_narrow(x, 0, 1, 5), tg_narrow(x, 0, 0, 5)), TG_OK);
    tg_test_expect_values(x, 6, (const double[]){0, 0, 1, 2, 3, 4}, 0);
    x = tg_arange(0, 6, 1, o);
    cr_assert_eq(tg_copy_(tg_narrow(x, 0, 0, 5), tg_narrow(x, 0, 1, 5)), TG_OK);
    tg_test_expect_values(x, 6, (const double[]){1, 2, 3, 4, 5, 5}, 0);
    x = tg_arange(0, 6, 1, o);
    cr_assert_eq(tg_add_(tg_narrow(x, 0, 1, 5), tg_narrow(x, 0, 0, 5)), TG_OK);
    tg_test_expect_values(x, 6, (const double[]){0, 1, 3, 5, 7, 9}, 0);
  }
}

/* The scalar kinds and the gradients fixed at the edges agree with the CPU's values: -0
 * kept by mul_scalar, x / s for a tiny s, elu'(+inf) = 1, d(a/b)/db = -0 for a = 0 and a
 * subnormal b. */
TG_CUDA_TEST(cuda_ops, scalar_ops_and_gradients_at_the_edges) {
  const double tiny[] = {1e-40, 1e-310}, numerator[] = {1e-30, 1e-10};
  const double quotient[] = {10000054272.0, 1e300};
  for (int dt = TG_F32; dt <= TG_F64; dt++) {
    tg_dtype d = (tg_dtype)dt;
    tg_tensor *z = on_device(d, TG_SHAPE(2), (const double[]){-0.0, 0.0});
    cr_assert(signbit(tg_test_at(tg_mul_scalar(z, 2), 0)), "mul_scalar(-0, 2) lost the sign");
    cr_assert(signbit(tg_test_at(tg_div_scalar(z, 2), 0)), "div_scalar(-0, 2) lost the sign");
    tg_tensor *n = on_device(d, TG_SHAPE(1), &numerator[dt]);
    tg_test_expect_values(tg_div_scalar(n, tiny[dt]), 1, &quotient[dt], 1e-6);
    tg_tensor *x = on_device(d, TG_SHAPE(2), (const double[]){INFINITY, -1});
    cr_assert_eq(tg_set_requires_grad(x, true), TG_OK);
    cr_assert_eq(tg_backward(tg_sum(tg_elu(x, 0.5)), NULL), TG_OK, "%s", tg_last_error_message());
    tg_test_expect_values(tg_grad(x), 2, (const double[]){1, 0.5 * exp(-1)}, 1e-6);
    tg_tensor *a = on_device(d, TG_SHAPE(1), (const double[]){0});
    tg_tensor *b = on_device(d, TG_SHAPE(1), &tiny[dt]);
    cr_assert_eq(tg_set_requires_grad(b, true), TG_OK);
    cr_assert_eq(tg_backward(tg_sum(tg_div(a, b)), NULL), TG_OK, "%s", tg_last_error_message());
    double gb = tg_test_at(tg_grad(b), 0);
    cr_assert(gb == 0 && signbit(gb), "d(0/b)/db for a subnormal b: got %g, want -0", gb);
  }
}
