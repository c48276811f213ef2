/* Pointwise ops (src/ops/pointwise_binary.c, pointwise_unary.c): values on hand-checked
 * cases, NumPy broadcasting, strided inputs, F32 and F64, gradcheck and gradgradcheck in F64
 * on contiguous, transposed, sliced-with-offset and broadcast inputs, stability at +-1e4,
 * and every error path. */
#include <math.h>
#include <stdlib.h>

#include "testutil.h"

static const tg_gradcheck_options quiet = {.quiet = true};

/* ---- helpers ---- */

/* Values in [lo, hi] from a fixed generator; with mixed_signs every third one is negated, so
 * they stay at least lo away from 0 (relu, elu and div have a kink or pole there). */
static tg_tensor *values(int ndim, const int64_t *sizes, uint64_t seed, double lo, double hi,
                         bool mixed_signs) {
  tg_generator *gen = tg_generator_new(seed);
  tg_tensor *u = tg_uniform(ndim, sizes, lo, hi, (tg_options){.dtype = TG_F64}, gen);
  tg_generator_free(gen);
  cr_assert(u, "%s", tg_last_error_message());
  int64_t n = tg_numel(u);
  double *buf = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
  cr_assert_eq(tg_to_host_array(u, buf, sizeof(double) * (size_t)n), TG_OK);
  for (int64_t i = 0; mixed_signs && i < n; i++)
    if (i % 3 == 1) buf[i] = -buf[i];
  tg_tensor *t = tg_from_data(ndim, sizes, buf, (tg_options){.dtype = TG_F64});
  free(buf);
  cr_assert(t);
  return t;
}

typedef enum layout { CONTIGUOUS, TRANSPOSED, SLICED, BROADCAST, NUM_LAYOUTS } layout;
static const char *const layout_names[] = {"contiguous", "transposed", "sliced", "broadcast"};

typedef struct domain {
  double lo, hi;
  bool mixed_signs;
} domain;

/* An F64 input that requires grad, seen by the function as [2, 3]: contiguous, the
 * transpose of a [3, 2], a stride-2 window at an offset in a [4, 7], or (BROADCAST) a [3]
 * that the function expands to [2, 3]. */
static tg_tensor *input(layout l, uint64_t seed, domain d) {
  tg_tensor *t;
  switch (l) {
  case TRANSPOSED:
    t = tg_t(values(TG_SHAPE(3, 2), seed, d.lo, d.hi, d.mixed_signs));
    break;
  case SLICED:
    t = tg_slice(tg_narrow(values(TG_SHAPE(4, 7), seed, d.lo, d.hi, d.mixed_signs), 0, 1, 2), 1, 1,
                 7, 2);
    cr_assert(t && tg_offset(t) == 8 && tg_stride(t, 1) == 2);
    break;
  case BROADCAST:
    t = values(TG_SHAPE(3), seed, d.lo, d.hi, d.mixed_signs);
    break;
  default:
    t = values(TG_SHAPE(2, 3), seed, d.lo, d.hi, d.mixed_signs);
    break;
  }
  cr_assert(t && tg_set_requires_grad(t, true) == TG_OK, "%s", tg_last_error_message());
  return t;
}

/* ---- unary ops (and the scalar-operand binary ops) ---- */

typedef tg_tensor *(*unary_fn)(const tg_tensor *);

typedef struct unary_case {
  const char *name;
  unary_fn op;
  domain dom;
} unary_case;

static tg_tensor *pow_2_5(const tg_tensor *x) { return tg_pow_scalar(x, 2.5); }
static tg_tensor *pow_3(const tg_tensor *x) { return tg_pow_scalar(x, 3.0); }
static tg_tensor *pow_minus_1_5(const tg_tensor *x) { return tg_pow_scalar(x, -1.5); }
static tg_tensor *pow_0(const tg_tensor *x) { return tg_pow_scalar(x, 0.0); }
static tg_tensor *elu_1(const tg_tensor *x) { return tg_elu(x, 1.0); }
static tg_tensor *elu_0_3(const tg_tensor *x) { return tg_elu(x, 0.3); }
static tg_tensor *elu_minus_0_5(const tg_tensor *x) { return tg_elu(x, -0.5); }
static tg_tensor *add_scalar_2(const tg_tensor *x) { return tg_add_scalar(x, 2.0); }
static tg_tensor *sub_scalar_2(const tg_tensor *x) { return tg_sub_scalar(x, 2.0); }
static tg_tensor *rsub_scalar_2(const tg_tensor *x) { return tg_rsub_scalar(x, 2.0); }
static tg_tensor *mul_scalar_3(const tg_tensor *x) { return tg_mul_scalar(x, -3.0); }
static tg_tensor *div_scalar_4(const tg_tensor *x) { return tg_div_scalar(x, 4.0); }

static const domain anywhere = {0.1, 2.0, true};
static const domain positive = {0.5, 2.0, false};

static const unary_case unary_cases[] = {
    {"neg", tg_neg, anywhere},
    {"exp", tg_exp, anywhere},
    {"log", tg_log, positive},
    {"sqrt", tg_sqrt, positive},
    {"pow 2.5", pow_2_5, positive},
    {"pow 3", pow_3, anywhere},
    {"pow -1.5", pow_minus_1_5, positive},
    {"pow 0", pow_0, anywhere},
    {"sigmoid", tg_sigmoid, {0.1, 3.0, true}},
    {"tanh", tg_tanh, {0.1, 2.0, true}},
    {"relu", tg_relu, anywhere},
    {"elu 1", elu_1, anywhere},
    {"elu 0.3", elu_0_3, anywhere},
    {"elu -0.5", elu_minus_0_5, anywhere},
    {"add_scalar", add_scalar_2, anywhere},
    {"sub_scalar", sub_scalar_2, anywhere},
    {"rsub_scalar", rsub_scalar_2, anywhere},
    {"mul_scalar", mul_scalar_3, anywhere},
    {"div_scalar", div_scalar_4, anywhere},
    {"abs", tg_abs, anywhere},
    {"reciprocal", tg_reciprocal, {0.5, 2.0, true}},
    {"softplus", tg_softplus, anywhere},
};
#define N_UNARY (int)(sizeof unary_cases / sizeof unary_cases[0])

/* A 1-D input stands for a broadcast one: expand it to [2, 3] first. */
static const tg_tensor *as_2x3(const tg_tensor *x) {
  return tg_ndim(x) == 1 ? tg_expand(x, TG_SHAPE(2, 3)) : x;
}

static tg_status run_unary(void *user, const tg_tensor *const *in, tg_tensor **out) {
  const unary_case *c = user;
  out[0] = c->op(as_2x3(in[0]));
  return out[0] ? TG_OK : tg_last_error();
}

TG_TEST(pointwise, unary_gradcheck_and_gradgradcheck_every_layout) {
  for (int k = 0; k < N_UNARY; k++) {
    const unary_case *c = &unary_cases[k];
    for (int l = 0; l < NUM_LAYOUTS; l++) {
      tg_scope sc = tg_scope_begin();
      tg_tensor *x = input((layout)l, 10 + (uint64_t)k, c->dom);
      cr_assert_eq(tg_gradcheck(run_unary, (void *)c, 1, &x, 1, quiet), TG_OK, "%s %s: %s", c->name,
                   layout_names[l], tg_last_error_message());
      cr_assert_eq(tg_gradgradcheck(run_unary, (void *)c, 1, &x, 1, quiet), TG_OK, "%s %s: %s",
                   c->name, layout_names[l], tg_last_error_message());
      tg_scope_end(sc);
    }
  }
}

TG_TEST(pointwise, unary_values_by_hand) {
  tg_scope sc = tg_scope_begin();
  for (int dt = TG_F32; dt <= TG_F64; dt++) {
    double tol = dt == TG_F32 ? 1e-6 : 1e-14;
    tg_tensor *x = tg_test_tensor_of((tg_dtype)dt, TG_SHAPE(4), (const double[]){-1, 0, 1, 4});
    tg_test_expect_values(tg_neg(x), 4, (const double[]){1, 0, -1, -4}, tol);
    tg_test_expect_values(tg_exp(x), 4, (const double[]){exp(-1), 1, exp(1), exp(4)}, tol);
    tg_test_expect_values(tg_relu(x), 4, (const double[]){0, 0, 1, 4}, tol);
    tg_test_expect_values(tg_elu(x, 1.0), 4, (const double[]){exp(-1) - 1, 0, 1, 4}, tol);
    tg_test_expect_values(tg_elu(x, 0.5), 4, (const double[]){0.5 * (exp(-1) - 1), 0, 1, 4}, tol);
    tg_test_expect_values(
        tg_sigmoid(x), 4,
        (const double[]){1 / (1 + exp(1)), 0.5, 1 / (1 + exp(-1)), 1 / (1 + exp(-4))}, tol);
    tg_test_expect_values(tg_tanh(x), 4, (const double[]){tanh(-1), 0, tanh(1), tanh(4)}, tol);
    tg_test_expect_values(tg_pow_scalar(x, 3), 4, (const double[]){-1, 0, 1, 64}, tol);
    tg_test_expect_values(tg_pow_scalar(x, 2), 4, (const double[]){1, 0, 1, 16}, tol);
    tg_tensor *big = tg_test_tensor_of((tg_dtype)dt, TG_SHAPE(2), (const double[]){-100, 100});
    tg_test_expect_values(tg_softplus(big), 2, (const double[]){exp(-100), 100}, tol);
    tg_tensor *p = tg_test_tensor_of((tg_dtype)dt, TG_SHAPE(3), (const double[]){1, 4, 9});
    tg_test_expect_values(tg_sqrt(p), 3, (const double[]){1, 2, 3}, tol);
    tg_test_expect_values(tg_log(p), 3, (const double[]){0, log(4), log(9)}, tol);
    tg_test_expect_values(tg_pow_scalar(p, 0.5), 3, (const double[]){1, 2, 3}, tol);
    tg_test_expect_values(tg_reciprocal(tg_neg(p)), 3, (const double[]){-1, -0.25, -1.0 / 9}, tol);
    tg_test_expect_values(tg_add_scalar(x, 1.5), 4, (const double[]){0.5, 1.5, 2.5, 5.5}, tol);
    tg_test_expect_values(tg_sub_scalar(x, 1.5), 4, (const double[]){-2.5, -1.5, -0.5, 2.5}, tol);
    tg_test_expect_values(tg_rsub_scalar(x, 1.5), 4, (const double[]){2.5, 1.5, 0.5, -2.5}, tol);
    tg_test_expect_values(tg_mul_scalar(x, -2), 4, (const double[]){2, 0, -2, -8}, tol);
    tg_test_expect_values(tg_div_scalar(x, 4), 4, (const double[]){-0.25, 0, 0.25, 1}, tol);
    tg_test_expect_values(tg_abs(x), 4, (const double[]){1, 0, 1, 4}, tol);
    tg_test_expect_values(tg_softplus(x), 4,
                          (const double[]){log1p(exp(-1)), log(2), log1p(exp(1)), log1p(exp(4))},
                          tol);
    cr_assert_eq(tg_tensor_dtype(tg_exp(x)), (tg_dtype)dt);
  }
  /* 0-dim in, 0-dim out */
  tg_tensor *s = tg_full(0, (const int64_t[]){1}, 2.0, (tg_options){.dtype = TG_F64});
  tg_tensor *e = tg_exp(s);
  cr_assert_eq(tg_ndim(e), 0);
  tg_test_expect_values(e, 1, (const double[]){exp(2)}, 1e-15);
  tg_expect_ok();
  tg_scope_end(sc);
}

/* op on transposed, sliced-with-offset and expanded views equals op on contiguous copies. */
TG_TEST(pointwise, unary_strided_inputs_match_contiguous) {
  tg_scope sc = tg_scope_begin();
  for (int dt = TG_F32; dt <= TG_F64; dt++) {
    tg_options o = {.dtype = (tg_dtype)dt};
    tg_tensor *base = tg_to_dtype(values(TG_SHAPE(5, 8), 3, 0.2, 2.0, false), o.dtype);
    tg_tensor *views[] = {tg_t(base), tg_slice(tg_narrow(base, 0, 1, 3), 1, 2, 8, 3),
                          tg_expand(tg_narrow(base, 0, 2, 1), TG_SHAPE(4, 8))};
    for (int v = 0; v < 3; v++) {
      cr_assert(views[v]);
      for (int k = 0; k < N_UNARY; k++) {
        tg_tensor *got = unary_cases[k].op(views[v]);
        tg_tensor *want = unary_cases[k].op(tg_clone(views[v]));
        cr_assert(got && want && tg_is_contiguous(got), "%s", unary_cases[k].name);
        tg_assert_close(got, want, 0, 0);
      }
    }
  }
  tg_scope_end(sc);
}

TG_TEST(pointwise, sigmoid_tanh_elu_stay_finite_at_1e4_with_finite_gradients) {
  tg_scope sc = tg_scope_begin();
  unary_fn fns[] = {tg_sigmoid, tg_tanh, elu_1, elu_0_3, tg_relu};
  for (int dt = TG_F32; dt <= TG_F64; dt++) {
    for (int k = 0; k < 5; k++) {
      tg_tensor *x =
          tg_test_tensor_of((tg_dtype)dt, TG_SHAPE(5), (const double[]){-1e4, -50, 0, 50, 1e4});
      cr_assert_eq(tg_set_requires_grad(x, true), TG_OK);
      tg_tensor *y = fns[k](x);
      cr_assert_eq(tg_backward(tg_sum(y), NULL), TG_OK, "%s", tg_last_error_message());
      for (int i = 0; i < 5; i++) {
        cr_assert(isfinite(tg_test_at(y, i)), "fn %d dtype %d: y[%d] = %g", k, dt, i,
                  tg_test_at(y, i));
        cr_assert(isfinite(tg_test_at(tg_grad(x), i)), "fn %d dtype %d: grad[%d] = %g", k, dt, i,
                  tg_test_at(tg_grad(x), i));
      }
    }
  }
  /* and the limits are right */
  tg_tensor *x = tg_test_tensor_of(TG_F64, TG_SHAPE(2), (const double[]){-1e4, 1e4});
  tg_test_expect_values(tg_sigmoid(x), 2, (const double[]){0, 1}, 0);
  tg_test_expect_values(tg_tanh(x), 2, (const double[]){-1, 1}, 0);
  tg_test_expect_values(tg_elu(x, 2.0), 2, (const double[]){-2, 1e4}, 0);
  tg_scope_end(sc);
}

/* relu'(0) = 0 and elu'(0) = alpha, as in PyTorch. */
TG_TEST(pointwise, relu_and_elu_gradient_at_zero) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_zeros(TG_SHAPE(1), (tg_options){.dtype = TG_F64, .requires_grad = true});
  cr_assert_eq(tg_backward(tg_sum(tg_add(tg_relu(x), tg_elu(x, 0.25))), NULL), TG_OK);
  tg_test_expect_values(tg_grad(x), 1, (const double[]){0.25}, 1e-15);
  tg_scope_end(sc);
}

/* Asserts element i of t is v, a zero of the same sign (signbit) included. */
static void expect_exactly(const tg_tensor *t, int64_t i, double v, const char *what) {
  double got = tg_test_at(t, i);
  cr_assert(got == v && !signbit(got) == !signbit(v), "%s[%lld]: got %g, want %g", what,
            (long long)i, got, v);
}

/* x / s divides (x * (1/s) overflows where 1/s does), and so does its gradient, g / s; the
 * values are PyTorch's. */
TG_TEST(pointwise, div_scalar_divides_for_a_tiny_divisor) {
  tg_scope sc = tg_scope_begin();
  const double divisor[] = {1e-40, 1e-310}, numerator[] = {1e-30, 1e-10};
  /* F32: the divisor rounds to the subnormal 9.99995e-41f (PyTorch's values too) */
  const double quotient[] = {10000054272.0, 1e300}, grad[] = {1.0000053796557908e30, 1e300};
  for (int dt = TG_F32; dt <= TG_F64; dt++) {
    tg_tensor *x = tg_test_tensor_of((tg_dtype)dt, TG_SHAPE(1), &numerator[dt]);
    cr_assert_eq(tg_set_requires_grad(x, true), TG_OK);
    tg_tensor *y = tg_div_scalar(x, divisor[dt]);
    tg_test_expect_values(y, 1, &quotient[dt], 1e-6);
    tg_tensor *g = tg_test_tensor_of((tg_dtype)dt, TG_SHAPE(1), (const double[]){1e-10});
    cr_assert_eq(tg_backward(y, g), TG_OK, "%s", tg_last_error_message());
    tg_test_expect_values(tg_grad(x), 1, &grad[dt], 1e-6);
    cr_assert_str_eq(tg_grad_fn_name(y), "div_scalar");
  }
  tg_scope_end(sc);
}

/* Scalar multiply and divide are x * s and x / s, not 0 + s * x: -0 stays -0 (PyTorch). */
TG_TEST(pointwise, scalar_ops_keep_the_sign_of_zero) {
  tg_scope sc = tg_scope_begin();
  for (int dt = TG_F32; dt <= TG_F64; dt++) {
    tg_tensor *z = tg_test_tensor_of((tg_dtype)dt, TG_SHAPE(2), (const double[]){-0.0, 0.0});
    tg_tensor *y = tg_mul_scalar(z, 2);
    expect_exactly(y, 0, -0.0, "mul_scalar");
    expect_exactly(y, 1, 0.0, "mul_scalar");
    y = tg_div_scalar(z, 2);
    expect_exactly(y, 0, -0.0, "div_scalar");
    expect_exactly(y, 1, 0.0, "div_scalar");
    expect_exactly(tg_mul_scalar(z, -3), 1, -0.0, "mul_scalar by -3");
    expect_exactly(tg_add_scalar(z, 0.0), 0, 0.0, "add_scalar(-0, 0)");
    expect_exactly(tg_add_scalar(z, -0.0), 0, -0.0, "add_scalar(-0, -0)");
    expect_exactly(tg_sub_scalar(z, 0.0), 0, -0.0, "sub_scalar(-0, 0)");
    y = tg_rsub_scalar(z, 0.0);
    expect_exactly(y, 0, 0.0, "rsub_scalar(-0, 0)");
    expect_exactly(y, 1, 0.0, "rsub_scalar(0, 0)");
    y = tg_rsub_scalar(z, -0.0);
    expect_exactly(y, 0, 0.0, "rsub_scalar(-0, -0)");
    expect_exactly(y, 1, -0.0, "rsub_scalar(0, -0)");
    tg_tensor *w = tg_clone(z);
    cr_assert_eq(tg_mul_scalar_(w, 2), TG_OK);
    expect_exactly(w, 0, -0.0, "mul_scalar_");
    /* sqrt'(-0) = g / (2 * sqrt(-0)) = g / -0 = -inf, as PyTorch */
    tg_tensor *m = tg_test_tensor_of((tg_dtype)dt, TG_SHAPE(1), (const double[]){-0.0});
    cr_assert_eq(tg_set_requires_grad(m, true), TG_OK);
    cr_assert_eq(tg_backward(tg_sum(tg_sqrt(m)), NULL), TG_OK, "%s", tg_last_error_message());
    expect_exactly(tg_grad(m), 0, -INFINITY, "sqrt'(-0)");
  }
  tg_scope_end(sc);
}

/* elu'(+inf) = 1 for every alpha, out of place and in place (it was 0 * inf = NaN), with
 * the other values unchanged; PyTorch's values. */
TG_TEST(pointwise, elu_gradient_at_infinity_is_finite) {
  tg_scope sc = tg_scope_begin();
  const double alphas[] = {1.0, 0.5, -0.5, 0.0};
  for (int dt = TG_F32; dt <= TG_F64; dt++)
    for (int k = 0; k < 4; k++)
      for (int in_place = 0; in_place < 2; in_place++) {
        double a = alphas[k], tol = dt == TG_F32 ? 1e-6 : 1e-15;
        tg_tensor *x = tg_test_tensor_of((tg_dtype)dt, TG_SHAPE(4),
                                         (const double[]){INFINITY, -INFINITY, 0, -1});
        cr_assert_eq(tg_set_requires_grad(x, true), TG_OK);
        tg_tensor *y = tg_elu(x, a);
        if (in_place) {
          y = tg_mul_scalar(x, 1.0);
          cr_assert_eq(tg_elu_(y, a), TG_OK, "%s", tg_last_error_message());
        }
        cr_assert_eq(tg_backward(tg_sum(y), NULL), TG_OK, "%s", tg_last_error_message());
        tg_test_expect_values(tg_grad(x), 4, (const double[]){1, 0, a, a * exp(-1)}, tol);
      }
  tg_scope_end(sc);
}

/* PyTorch's second derivative of elu: alpha e^x where x < 0, and 0 at x = 0 and x > 0. */
TG_TEST(pointwise, elu_second_derivative_matches_pytorch) {
  tg_scope sc = tg_scope_begin();
  const double alphas[] = {1.0, -0.5};
  for (int k = 0; k < 2; k++) {
    double a = alphas[k];
    tg_tensor *x = tg_test_tensor_of(TG_F64, TG_SHAPE(3), (const double[]){0, -1, 2});
    cr_assert_eq(tg_set_requires_grad(x, true), TG_OK);
    tg_tensor *g1 = NULL, *g2 = NULL;
    tg_backward_options graph = {.create_graph = true};
    cr_assert_eq(tg_autograd_grad(1, (const tg_tensor *[]){tg_sum(tg_elu(x, a))}, NULL, 1,
                                  (const tg_tensor *[]){x}, &g1, graph, false),
                 TG_OK, "%s", tg_last_error_message());
    cr_assert_eq(tg_autograd_grad(1, (const tg_tensor *[]){tg_sum(g1)}, NULL, 1,
                                  (const tg_tensor *[]){x}, &g2, (tg_backward_options){0}, false),
                 TG_OK, "%s", tg_last_error_message());
    tg_test_expect_values(g2, 3, (const double[]){0, a * exp(-1), 0}, 1e-15);
  }
  tg_scope_end(sc);
}

/* d(a/b)/db = -g * (y / b), as PyTorch: with a = 0 and a subnormal b it is -0, where
 * -(g / b) * y was inf * 0 = NaN. */
TG_TEST(pointwise, div_gradient_for_a_subnormal_divisor_is_finite) {
  tg_scope sc = tg_scope_begin();
  const double tiny[] = {1e-40, 1e-310};
  for (int dt = TG_F32; dt <= TG_F64; dt++) {
    tg_tensor *a = tg_test_tensor_of((tg_dtype)dt, TG_SHAPE(3), (const double[]){0, 0, 1});
    tg_tensor *b =
        tg_test_tensor_of((tg_dtype)dt, TG_SHAPE(3), (const double[]){tiny[dt], -tiny[dt], 2});
    cr_assert_eq(tg_set_requires_grad(a, true), TG_OK);
    cr_assert_eq(tg_set_requires_grad(b, true), TG_OK);
    cr_assert_eq(tg_backward(tg_sum(tg_div(a, b)), NULL), TG_OK, "%s", tg_last_error_message());
    expect_exactly(tg_grad(b), 0, -0.0, "d/db");
    expect_exactly(tg_grad(b), 1, -0.0, "d/db");
    expect_exactly(tg_grad(b), 2, -0.25, "d/db");
    expect_exactly(tg_grad(a), 2, 0.5, "d/da");
    cr_assert(isinf(tg_test_at(tg_grad(a), 0)) && isinf(tg_test_at(tg_grad(a), 1)));
  }
  tg_scope_end(sc);
}

/* ---- binary ops ---- */

typedef tg_tensor *(*binary_fn)(const tg_tensor *, const tg_tensor *);

static tg_tensor *add_scaled_m1_5(const tg_tensor *a, const tg_tensor *b) {
  return tg_add_scaled(a, b, -1.5);
}

typedef struct binary_case {
  const char *name;
  binary_fn op;
} binary_case;

static const binary_case binary_cases[] = {
    {"add", tg_add},
    {"sub", tg_sub},
    {"mul", tg_mul},
    {"div", tg_div},
    {"add_scaled", add_scaled_m1_5},
};
#define N_BINARY (int)(sizeof binary_cases / sizeof binary_cases[0])

static tg_status run_binary(void *user, const tg_tensor *const *in, tg_tensor **out) {
  const binary_case *c = user;
  out[0] = c->op(in[0], in[1]);
  return out[0] ? TG_OK : tg_last_error();
}

/* An F64 leaf of the given shape (ndim 0 allowed) that requires grad. */
static tg_tensor *grad_leaf(int ndim, const int64_t *sizes, uint64_t seed, domain d) {
  tg_tensor *t = values(ndim, sizes, seed, d.lo, d.hi, d.mixed_signs);
  cr_assert_eq(tg_set_requires_grad(t, true), TG_OK);
  return t;
}

TG_TEST(pointwise, binary_gradcheck_and_gradgradcheck_every_layout) {
  const domain d = {0.5, 2.0, true}; /* b stays away from 0 for div */
  const int64_t s23[] = {2, 3}, s3[] = {3}, s21[] = {2, 1}, s13[] = {1, 3}, s0[] = {1};
  for (int k = 0; k < N_BINARY; k++) {
    const binary_case *c = &binary_cases[k];
    /* pairs: a, b */
    for (int p = 0; p < 7; p++) {
      tg_scope sc = tg_scope_begin();
      tg_tensor *in[2];
      const char *what;
      switch (p) {
      case 0:
        in[0] = input(CONTIGUOUS, 1, d), in[1] = input(CONTIGUOUS, 2, d), what = "contiguous";
        break;
      case 1:
        in[0] = input(TRANSPOSED, 1, d), in[1] = input(SLICED, 2, d), what = "transposed, sliced";
        break;
      case 2:
        in[0] = input(SLICED, 1, d), in[1] = input(TRANSPOSED, 2, d), what = "sliced, transposed";
        break;
      case 3:
        in[0] = grad_leaf(2, s23, 1, d), in[1] = grad_leaf(1, s3, 2, d), what = "[2, 3], [3]";
        break;
      case 4:
        in[0] = grad_leaf(2, s21, 1, d), in[1] = grad_leaf(2, s13, 2, d), what = "[2, 1], [1, 3]";
        break;
      case 5:
        in[0] = grad_leaf(2, s23, 1, d), in[1] = grad_leaf(0, s0, 2, d), what = "[2, 3], []";
        break;
      default:
        in[0] = grad_leaf(0, s0, 1, d), in[1] = input(TRANSPOSED, 2, d), what = "[], transposed";
        break;
      }
      cr_assert_eq(tg_gradcheck(run_binary, (void *)c, 2, in, 1, quiet), TG_OK, "%s %s: %s",
                   c->name, what, tg_last_error_message());
      cr_assert_eq(tg_gradgradcheck(run_binary, (void *)c, 2, in, 1, quiet), TG_OK, "%s %s: %s",
                   c->name, what, tg_last_error_message());
      tg_scope_end(sc);
    }
  }
}

/* Only one input requires grad: the other gets none and the check still passes. */
TG_TEST(pointwise, binary_gradcheck_with_one_constant_input) {
  const domain d = {0.5, 2.0, true};
  for (int k = 0; k < N_BINARY; k++) {
    for (int which = 0; which < 2; which++) {
      tg_scope sc = tg_scope_begin();
      tg_tensor *in[2] = {input(CONTIGUOUS, 1, d), input(BROADCAST, 2, d)};
      cr_assert_eq(tg_set_requires_grad(in[which], false), TG_OK);
      cr_assert_eq(tg_gradgradcheck(run_binary, (void *)&binary_cases[k], 2, in, 1, quiet), TG_OK,
                   "%s (input %d constant): %s", binary_cases[k].name, which,
                   tg_last_error_message());
      cr_assert_null(tg_grad(in[which]));
      tg_scope_end(sc);
    }
  }
}

TG_TEST(pointwise, binary_values_and_broadcasting_by_hand) {
  tg_scope sc = tg_scope_begin();
  for (int dt = TG_F32; dt <= TG_F64; dt++) {
    tg_dtype t = (tg_dtype)dt;
    double tol = dt == TG_F32 ? 1e-6 : 1e-15;
    tg_tensor *a = tg_test_tensor_of(t, TG_SHAPE(2, 3), (const double[]){1, 2, 3, 4, 5, 6});
    tg_tensor *b = tg_test_tensor_of(t, TG_SHAPE(3), (const double[]){10, 20, 40});
    tg_tensor *sum = tg_add(a, b);
    tg_assert_sizes(sum, 2, 3);
    cr_assert_eq(tg_tensor_dtype(sum), t);
    tg_test_expect_values(sum, 6, (const double[]){11, 22, 43, 14, 25, 46}, tol);
    tg_test_expect_values(tg_add(b, a), 6, (const double[]){11, 22, 43, 14, 25, 46}, tol);
    tg_test_expect_values(tg_sub(a, b), 6, (const double[]){-9, -18, -37, -6, -15, -34}, tol);
    tg_test_expect_values(tg_sub(b, a), 6, (const double[]){9, 18, 37, 6, 15, 34}, tol);
    tg_test_expect_values(tg_mul(a, b), 6, (const double[]){10, 40, 120, 40, 100, 240}, tol);
    tg_test_expect_values(tg_div(a, b), 6, (const double[]){0.1, 0.1, 0.075, 0.4, 0.25, 0.15}, tol);
    tg_test_expect_values(tg_add_scaled(a, b, -0.5), 6, (const double[]){-4, -8, -17, -1, -5, -14},
                          tol);

    /* [2, 1] (op) [1, 3] -> [2, 3] */
    tg_tensor *col = tg_test_tensor_of(t, TG_SHAPE(2, 1), (const double[]){1, 2});
    tg_tensor *row = tg_test_tensor_of(t, TG_SHAPE(1, 3), (const double[]){10, 20, 30});
    tg_tensor *outer = tg_mul(col, row);
    tg_assert_sizes(outer, 2, 3);
    tg_test_expect_values(outer, 6, (const double[]){10, 20, 30, 20, 40, 60}, tol);
    tg_assert_sizes(tg_add(row, col), 2, 3);

    /* 0-dim scalars: with each other (0-dim result) and with tensors */
    tg_tensor *s = tg_test_tensor_of(t, 0, (const int64_t[]){1}, (const double[]){4});
    tg_tensor *s2 = tg_mul(s, s);
    cr_assert_eq(tg_ndim(s2), 0);
    tg_test_expect_values(s2, 1, (const double[]){16}, tol);
    tg_test_expect_values(tg_div(s, b), 3, (const double[]){0.4, 0.2, 0.1}, tol);
    tg_assert_sizes(tg_sub(a, s), 2, 3);
    tg_test_expect_values(tg_sub(a, s), 6, (const double[]){-3, -2, -1, 0, 1, 2}, tol);

    /* more dims on the left: [3] with [2, 1, 3] */
    tg_tensor *c = tg_test_tensor_of(t, TG_SHAPE(2, 1, 3), (const double[]){0, 0, 0, 1, 1, 1});
    tg_tensor *bc = tg_add(b, c);
    tg_assert_sizes(bc, 2, 1, 3);
    tg_test_expect_values(bc, 6, (const double[]){10, 20, 40, 11, 21, 41}, tol);

    /* empty dims broadcast too */
    tg_tensor *e = tg_zeros(TG_SHAPE(0, 3), (tg_options){.dtype = t});
    tg_assert_sizes(tg_add(e, b), 0, 3);
  }
  tg_expect_ok();
  tg_scope_end(sc);
}

TG_TEST(pointwise, binary_strided_inputs_match_contiguous) {
  tg_scope sc = tg_scope_begin();
  for (int dt = TG_F32; dt <= TG_F64; dt++) {
    tg_dtype t = (tg_dtype)dt;
    tg_tensor *base = tg_to_dtype(values(TG_SHAPE(6, 8), 5, 0.5, 2.0, true), t);
    tg_tensor *other = tg_to_dtype(values(TG_SHAPE(8, 6), 6, 0.5, 2.0, true), t);
    tg_tensor *transposed = tg_t(other);                                /* [6, 8], strides [1, 6] */
    tg_tensor *sliced = tg_slice(tg_narrow(base, 0, 2, 3), 1, 1, 8, 2); /* [3, 4] at offset 17 */
    tg_tensor *expanded = tg_expand(tg_narrow(base, 1, 3, 1), TG_SHAPE(6, 8));
    tg_tensor *small = tg_narrow(tg_narrow(other, 0, 1, 3), 1, 2, 4); /* [3, 4] */
    for (int k = 0; k < N_BINARY; k++) {
      binary_fn op = binary_cases[k].op;
      tg_tensor *pairs[][2] = {
          {base, transposed}, {transposed, expanded}, {sliced, small}, {small, sliced}};
      for (int p = 0; p < 4; p++) {
        tg_tensor *got = op(pairs[p][0], pairs[p][1]);
        tg_tensor *want = op(tg_clone(pairs[p][0]), tg_clone(pairs[p][1]));
        cr_assert(got && want, "%s pair %d: %s", binary_cases[k].name, p, tg_last_error_message());
        tg_assert_close(got, want, 0, 0);
      }
    }
  }
  tg_scope_end(sc);
}

TG_TEST(pointwise, grad_fn_names) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *a = tg_ones(TG_SHAPE(2), (tg_options){.dtype = TG_F64, .requires_grad = true});
  cr_assert_str_eq(tg_grad_fn_name(tg_add(a, a)), "add");
  cr_assert_str_eq(tg_grad_fn_name(tg_sub(a, a)), "sub");
  cr_assert_str_eq(tg_grad_fn_name(tg_mul(a, a)), "mul");
  cr_assert_str_eq(tg_grad_fn_name(tg_div(a, a)), "div");
  cr_assert_str_eq(tg_grad_fn_name(tg_sigmoid(a)), "sigmoid");
  cr_assert_str_eq(tg_grad_fn_name(tg_elu(a, 1)), "elu");
  cr_assert_str_eq(tg_grad_fn_name(tg_rsub_scalar(a, 1)), "rsub_scalar");
  /* without grad mode nothing is recorded */
  tg_no_grad_begin();
  cr_assert_null(tg_grad_fn_name(tg_add(a, a)));
  cr_assert(!tg_requires_grad(tg_exp(a)));
  tg_no_grad_end();
  tg_scope_end(sc);
}

/* d(a*a)/da through one tensor used twice: gradients meet. */
TG_TEST(pointwise, same_tensor_as_both_operands) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *a = tg_test_tensor_of(TG_F64, TG_SHAPE(3), (const double[]){1, -2, 3});
  cr_assert_eq(tg_set_requires_grad(a, true), TG_OK);
  cr_assert_eq(tg_backward(tg_sum(tg_mul(a, a)), NULL), TG_OK);
  tg_test_expect_values(tg_grad(a), 3, (const double[]){2, -4, 6}, 0);
  tg_scope_end(sc);
}

/* ---- errors ---- */

/* Mixed dtypes promote (docs/dtypes.md; tests/ops/test_promotion.c has the rules). */
TG_TEST(pointwise, mismatched_dtypes_promote) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *f = tg_ones(TG_SHAPE(2, 3), (tg_options){.dtype = TG_F32});
  tg_tensor *d = tg_ones(TG_SHAPE(2, 3), (tg_options){.dtype = TG_F64});
  cr_assert_eq(tg_tensor_dtype(tg_add(f, d)), TG_F64);
  cr_assert_eq(tg_tensor_dtype(tg_div(d, f)), TG_F64);
  cr_assert_eq(tg_tensor_dtype(tg_add_scaled(d, f, 2)), TG_F64);
  tg_expect_ok();
  tg_scope_end(sc);
}

/* int64 inputs: the unary ops keep int64 (neg, abs, relu, pow with a whole exponent,
 * whole-number scalar ops), promote to F32 (exp, log, sqrt, sigmoid, tanh, reciprocal, pow
 * with a fractional exponent, div_scalar) or refuse with the cast to write (elu, softplus, a
 * scalar that is not a whole number). */
TG_TEST(pointwise, int64_inputs_keep_promote_or_refuse) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *i = tg_zeros(TG_SHAPE(3), (tg_options){.dtype = TG_I64});
  tg_tensor *f = tg_zeros(TG_SHAPE(3), (tg_options){.dtype = TG_F32});
  cr_assert_eq(tg_tensor_dtype(tg_mul(i, i)), TG_I64);
  cr_assert_eq(tg_tensor_dtype(tg_sub(f, i)), TG_F32);
  for (int k = 0; k < N_UNARY; k++) {
    const char *name = unary_cases[k].name;
    tg_tensor *y = unary_cases[k].op(i);
    bool refused = !strncmp(name, "elu", 3) || !strcmp(name, "softplus");
    if (refused) {
      cr_assert_null(y, "%s", name);
      tg_expect_error(TG_ERR_DTYPE, "x is int64", "tg_to_dtype(x, TG_F32)");
      continue;
    }
    cr_assert(y, "%s: %s", name, tg_last_error_message());
    bool kept = !strcmp(name, "neg") || !strcmp(name, "relu") || !strcmp(name, "abs") ||
                !strcmp(name, "pow 3") || !strcmp(name, "pow 0") ||
                (strstr(name, "_scalar") && strcmp(name, "div_scalar"));
    cr_assert_eq(tg_tensor_dtype(y), kept ? TG_I64 : TG_F32, "%s", name);
  }
  cr_assert_null(tg_add_scalar(i, 1.5));
  tg_expect_error(TG_ERR_DTYPE, "tg_add_scalar: a is int64 and s = 1.5 is not a whole number");
  tg_scope_end(sc);
}

TG_TEST(pointwise, non_broadcastable_shapes_are_rejected) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *a = tg_ones(TG_SHAPE(2, 3), TG_OPTS_DEFAULT);
  tg_tensor *b = tg_ones(TG_SHAPE(4), TG_OPTS_DEFAULT);
  cr_assert_null(tg_add(a, b));
  tg_expect_error(TG_ERR_SHAPE,
                  "tg_add: a is [2, 3] and b is [4]: sizes are not broadcastable at dim 1");
  tg_tensor *c = tg_ones(TG_SHAPE(4, 3, 1), TG_OPTS_DEFAULT);
  cr_assert_null(tg_mul(c, a));
  tg_expect_error(TG_ERR_SHAPE,
                  "tg_mul: a is [4, 3, 1] and b is [2, 3]: sizes are not broadcastable at dim 1");
  cr_assert_null(tg_div(tg_ones(TG_SHAPE(0), TG_OPTS_DEFAULT), b));
  tg_expect_error(TG_ERR_SHAPE, "tg_div: a is [0] and b is [4]");
  tg_scope_end(sc);
}

TG_TEST(pointwise, null_inputs_keep_the_first_error) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *a = tg_ones(TG_SHAPE(2, 3), TG_OPTS_DEFAULT);
  cr_assert_null(tg_sub(NULL, a));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_sub: a is NULL");
  cr_assert_null(tg_sigmoid(NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_sigmoid: x is NULL");
  /* a chain checked once at the end reports where it first broke */
  tg_tensor *bad = tg_add(a, tg_ones(TG_SHAPE(5), TG_OPTS_DEFAULT));
  tg_tensor *y = tg_tanh(tg_mul_scalar(tg_exp(tg_mul(bad, a)), 2));
  cr_assert_null(y);
  tg_expect_error(TG_ERR_SHAPE, "tg_add: a is [2, 3] and b is [5]");
  cr_assert_null(tg_add(a, tg_pow_scalar(NULL, 2)));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_pow_scalar: x is NULL");
  tg_scope_end(sc);
}

/* ---- abs, reciprocal and the comparisons (declared once in their lists) ---- */

/* d|x|/dx is sign(x): 0 at 0, as in PyTorch. */
TG_TEST(pointwise, abs_gradient_is_the_sign_and_zero_at_zero) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_test_tensor_of(TG_F64, TG_SHAPE(4), (const double[]){-2, 0, 0.5, -0.0});
  cr_assert_eq(tg_set_requires_grad(x, true), TG_OK);
  cr_assert_str_eq(tg_grad_fn_name(tg_abs(x)), "abs");
  cr_assert_str_eq(tg_grad_fn_name(tg_reciprocal(x)), "reciprocal");
  cr_assert_eq(tg_backward(tg_sum(tg_abs(x)), NULL), TG_OK);
  tg_test_expect_values(tg_grad(x), 4, (const double[]){-1, 0, 1, 0}, 0);
  tg_scope_end(sc);
}

typedef tg_tensor *(*binary_fn)(const tg_tensor *, const tg_tensor *);

static const struct {
  const char *name;
  binary_fn op;
  double want[5]; /* for a = {1, 2, 3, NaN, 2} against b = {2, 2, 2, 2, NaN} */
} comparisons[] = {
    {"tg_eq", tg_eq, {0, 1, 0, 0, 0}}, {"tg_ne", tg_ne, {1, 0, 1, 1, 1}},
    {"tg_gt", tg_gt, {0, 0, 1, 0, 0}}, {"tg_ge", tg_ge, {0, 1, 1, 0, 0}},
    {"tg_lt", tg_lt, {1, 0, 0, 0, 0}}, {"tg_le", tg_le, {1, 1, 0, 0, 0}},
};
#define N_COMPARISONS (int)(sizeof comparisons / sizeof comparisons[0])

TG_TEST(pointwise, comparisons_by_hand_in_the_input_dtype_without_grad) {
  tg_scope sc = tg_scope_begin();
  for (int dt = TG_F32; dt <= TG_F64; dt++) {
    tg_tensor *a = tg_test_tensor_of((tg_dtype)dt, TG_SHAPE(5), (const double[]){1, 2, 3, NAN, 2});
    tg_tensor *b = tg_test_tensor_of((tg_dtype)dt, TG_SHAPE(5), (const double[]){2, 2, 2, 2, NAN});
    cr_assert_eq(tg_set_requires_grad(a, true), TG_OK);
    for (int k = 0; k < N_COMPARISONS; k++) {
      tg_tensor *y = comparisons[k].op(a, b);
      cr_assert(y, "%s: %s", comparisons[k].name, tg_last_error_message());
      cr_assert_eq(tg_tensor_dtype(y), (tg_dtype)dt);
      cr_assert(!tg_requires_grad(y), "%s", comparisons[k].name);
      tg_test_expect_values(y, 5, comparisons[k].want, 0);
    }
  }
  tg_expect_ok();
  tg_scope_end(sc);
}

/* A [2, 1] against a [3] broadcasts to [2, 3], strided operands too. */
TG_TEST(pointwise, comparisons_broadcast_and_take_strided_operands) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *a = tg_test_tensor_of(TG_F64, TG_SHAPE(2, 1), (const double[]){1, 2});
  tg_tensor *b = tg_test_tensor_of(TG_F64, TG_SHAPE(3), (const double[]){0, 1, 2});
  tg_test_expect_values(tg_ge(a, b), 6, (const double[]){1, 1, 0, 1, 1, 1}, 0);
  tg_test_expect_values(tg_lt(b, a), 6, (const double[]){1, 0, 0, 1, 1, 0}, 0);
  tg_tensor *m = tg_test_tensor_of(TG_F64, TG_SHAPE(2, 3), (const double[]){0, 1, 2, 3, 4, 5});
  tg_test_expect_values(tg_eq(tg_t(m), tg_t(m)), 6, (const double[]){1, 1, 1, 1, 1, 1}, 0);
  tg_test_expect_values(tg_gt(tg_t(m), tg_narrow(tg_t(m), 1, 0, 1)), 6,
                        (const double[]){0, 1, 0, 1, 0, 1}, 0);
  tg_expect_ok();
  tg_scope_end(sc);
}

TG_TEST(pointwise, comparisons_and_new_unary_ops_reject_bad_input) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *f = tg_ones(TG_SHAPE(2, 3), (tg_options){.dtype = TG_F32});
  tg_tensor *d = tg_ones(TG_SHAPE(2, 3), (tg_options){.dtype = TG_F64});
  tg_tensor *i = tg_zeros(TG_SHAPE(3), (tg_options){.dtype = TG_I64});
  tg_tensor *b = tg_ones(TG_SHAPE(4), (tg_options){.dtype = TG_F32});
  for (int k = 0; k < N_COMPARISONS; k++) {
    char want[128];
    /* mixed dtypes promote; int64 compares as int64 (1/0, no bool dtype) */
    cr_assert_eq(tg_tensor_dtype(comparisons[k].op(f, d)), TG_F64, "%s", comparisons[k].name);
    cr_assert_eq(tg_tensor_dtype(comparisons[k].op(i, i)), TG_I64, "%s", comparisons[k].name);
    tg_expect_ok();
    cr_assert_null(comparisons[k].op(f, b));
    snprintf(want, sizeof want, "%s: a is [2, 3] and b is [4]", comparisons[k].name);
    tg_expect_error(TG_ERR_SHAPE, want);
    cr_assert_null(comparisons[k].op(NULL, f));
    snprintf(want, sizeof want, "%s: a is NULL", comparisons[k].name);
    tg_expect_error(TG_ERR_ARGUMENT, want);
  }
  cr_assert_null(tg_abs(NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_abs: x is NULL");
  cr_assert_eq(tg_tensor_dtype(tg_reciprocal(i)), TG_F32); /* promoted, as PyTorch */
  cr_assert_null(tg_softplus(i));
  tg_expect_error(TG_ERR_DTYPE, "tg_softplus: x is int64");
  tg_scope_end(sc);
}

/* ---- conventions at the edges, as PyTorch's (docs/conventions.md) ---- */

/* relu's gradient at NaN is g, as PyTorch's threshold_backward (y <= 0 ? 0 : g), in place
 * too; abs's is 0 there (sign(NaN) is 0 in PyTorch's backward). Failed before: relu gave 0. */
TG_TEST(pointwise, relu_passes_the_gradient_at_nan_abs_does_not) {
  const double xs[] = {NAN, -1, 0, -0.0, 2, INFINITY, -INFINITY};
  for (int d = 0; d < 2; d++) {
    tg_scope sc = tg_scope_begin();
    tg_dtype dt = d ? TG_F64 : TG_F32;
    tg_tensor *x = tg_test_tensor_of(dt, TG_SHAPE(7), xs);
    cr_assert_eq(tg_set_requires_grad(x, true), TG_OK);
    cr_assert_eq(tg_backward(tg_sum(tg_relu(x)), NULL), TG_OK, "%s", tg_last_error_message());
    tg_test_expect_ieee(tg_grad(x), 7, (const double[]){1, 0, 0, 0, 1, 1, 0}, 0);
    tg_tensor *x2 = tg_test_tensor_of(dt, TG_SHAPE(7), xs);
    cr_assert_eq(tg_set_requires_grad(x2, true), TG_OK);
    tg_tensor *y = tg_mul_scalar(x2, 1.0);
    cr_assert_eq(tg_relu_(y), TG_OK, "%s", tg_last_error_message());
    cr_assert_eq(tg_backward(tg_sum(y), NULL), TG_OK, "%s", tg_last_error_message());
    tg_test_expect_ieee(tg_grad(x2), 7, (const double[]){1, 0, 0, 0, 1, 1, 0}, 0);
    tg_tensor *x3 = tg_test_tensor_of(dt, TG_SHAPE(7), xs);
    cr_assert_eq(tg_set_requires_grad(x3, true), TG_OK);
    cr_assert_eq(tg_backward(tg_sum(tg_abs(x3)), NULL), TG_OK, "%s", tg_last_error_message());
    tg_test_expect_ieee(tg_grad(x3), 7, (const double[]){0, -1, 0, 0, 1, 1, -1}, 0);
    tg_scope_end(sc);
  }
}

/* elu's gradient at NaN is NaN, in place too (PyTorch's CPU gives g or NaN depending on
 * the tensor's length; docs/conventions.md), and still alpha at 0 and 1 above 0. */
TG_TEST(pointwise, elu_gradient_at_nan_is_nan) {
  tg_scope sc = tg_scope_begin();
  const double xs[] = {NAN, 0, 3};
  tg_tensor *x = tg_from_data(TG_SHAPE(3), xs, TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  cr_assert_eq(tg_backward(tg_sum(tg_elu(x, 0.5)), NULL), TG_OK, "%s", tg_last_error_message());
  tg_test_expect_ieee(tg_grad(x), 3, (const double[]){NAN, 0.5, 1}, 0);
  tg_tensor *x2 = tg_from_data(TG_SHAPE(3), xs, TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  tg_tensor *y = tg_mul_scalar(x2, 1.0);
  cr_assert_eq(tg_elu_(y, 0.5), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(tg_backward(tg_sum(y), NULL), TG_OK, "%s", tg_last_error_message());
  tg_test_expect_ieee(tg_grad(x2), 3, (const double[]){NAN, 0.5, 1}, 0);
  tg_scope_end(sc);
}

/* softplus is x above its threshold 20 and its gradient there is exactly 1, as PyTorch's
 * softplus_backward (x > 20 ? g : g * sigmoid(x)); at 20 itself sigmoid(20). Failed before:
 * the gradient was sigmoid(x) everywhere (1 - 1.25e-9 at 20.5 in F64). */
TG_TEST(pointwise, softplus_gradient_is_exactly_one_above_the_threshold) {
  const double xs[] = {20, 20.5, 21, 30, 100, 1e30, INFINITY, -INFINITY, NAN};
  /* torch.nn.functional.softplus, F64: forward and gradient */
  const double want[] = {20.000000002061153, 20.5, 21, 30, 100, 1e30, INFINITY, 0, NAN};
  const double grad[] = {0.9999999979388464, 1, 1, 1, 1, 1, 1, 0, NAN};
  for (int d = 0; d < 2; d++) {
    tg_scope sc = tg_scope_begin();
    tg_tensor *x = tg_test_tensor_of(d ? TG_F64 : TG_F32, TG_SHAPE(9), xs);
    cr_assert_eq(tg_set_requires_grad(x, true), TG_OK);
    tg_tensor *y = tg_softplus(x);
    tg_test_expect_ieee(y, 9, want, d ? 1e-15 : 1e-7);
    cr_assert_eq(tg_backward(tg_sum(y), NULL), TG_OK, "%s", tg_last_error_message());
    tg_test_expect_ieee(tg_grad(x), 9, grad, d ? 1e-15 : 1e-7);
    for (int i = 1; i < 7; i++) cr_assert_eq(tg_test_at(tg_grad(x), i), 1.0, "element %d", i);
    tg_scope_end(sc);
  }
  /* Double backward agrees with the numerical one on both sides of the threshold. */
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_from_data(TG_SHAPE(2, 3), (const double[]){-3, 0.5, 19, 21, 25, 40},
                              TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  unary_case c = {"softplus", tg_softplus, anywhere};
  cr_assert_eq(tg_gradcheck(run_unary, &c, 1, &x, 1, quiet), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(tg_gradgradcheck(run_unary, &c, 1, &x, 1, quiet), TG_OK, "%s",
               tg_last_error_message());
  tg_scope_end(sc);
}

/* pow_scalar against torch.pow (F64) on a grid of bases and exponents, forward and
 * gradient: exponent 0.5 is sqrt and -0.5 is 1/sqrt as in PyTorch (sqrt(-0) = -0, NaN at
 * -inf), and exponent 0 has gradient 0. Failed before: pow(-0, 0.5) was +0, pow(-inf, 0.5)
 * inf, pow(-0, -0.5) +inf, and their gradients followed. */
#define POW_BASES 12
#define POW_EXPONENTS 12
static const double pow_bases[POW_BASES] = {0, -0.0, 1,        -1,        0.5, -0.5,
                                            2, -2,   INFINITY, -INFINITY, NAN, 5e-324};
static const double pow_exponents[POW_EXPONENTS] = {0,  0.5, -0.5, 1,        2,         3,
                                                    -1, -2,  2.5,  INFINITY, -INFINITY, NAN};
static const double pow_want[POW_EXPONENTS][POW_BASES] = {
    {1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0}, /* ^0.0 */
    {0.0, -0.0, 1.0, NAN, 0.7071067811865476, NAN, 1.4142135623730951, NAN, INFINITY, NAN, NAN,
     2.2227587494850775e-162}, /* ^0.5 */
    {INFINITY, -INFINITY, 1.0, NAN, 1.414213562373095, NAN, 0.7071067811865475, NAN, 0.0, NAN, NAN,
     4.4989137945431964e+161},                                                        /* ^-0.5 */
    {0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, INFINITY, -INFINITY, NAN, 5e-324},   /* ^1.0 */
    {0.0, 0.0, 1.0, 1.0, 0.25, 0.25, 4.0, 4.0, INFINITY, INFINITY, NAN, 0.0},         /* ^2.0 */
    {0.0, -0.0, 1.0, -1.0, 0.125, -0.125, 8.0, -8.0, INFINITY, -INFINITY, NAN, 0.0},  /* ^3.0 */
    {INFINITY, -INFINITY, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 0.0, -0.0, NAN, INFINITY}, /* ^-1.0 */
    {INFINITY, INFINITY, 1.0, 1.0, 4.0, 4.0, 0.25, 0.25, 0.0, 0.0, NAN, INFINITY},    /* ^-2.0 */
    {0.0, 0.0, 1.0, NAN, 0.17677669529663687, NAN, 5.656854249492381, NAN, INFINITY, INFINITY, NAN,
     0.0}, /* ^2.5 */
    {0.0, 0.0, 1.0, 1.0, 0.0, 0.0, INFINITY, INFINITY, INFINITY, INFINITY, NAN,
     0.0}, /* ^INFINITY */
    {INFINITY, INFINITY, 1.0, 1.0, INFINITY, INFINITY, 0.0, 0.0, 0.0, 0.0, NAN,
     INFINITY},                                                   /* ^-INFINITY */
    {NAN, NAN, 1.0, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN}, /* ^NAN */
};

static const double pow_grad_want[POW_EXPONENTS][POW_BASES] = {
    {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0}, /* ^0.0 */
    {INFINITY, -INFINITY, 0.5, NAN, 0.7071067811865475, NAN, 0.35355339059327373, NAN, 0.0, NAN,
     NAN, 2.2494568972715982e+161}, /* ^0.5 */
    {-INFINITY, -INFINITY, -0.5, NAN, -1.4142135623730951, NAN, -0.17677669529663687, NAN, -0.0,
     -0.0, NAN, -INFINITY},                                                         /* ^-0.5 */
    {1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0},                   /* ^1.0 */
    {0.0, -0.0, 2.0, -2.0, 1.0, -1.0, 4.0, -4.0, INFINITY, -INFINITY, NAN, 1e-323}, /* ^2.0 */
    {0.0, 0.0, 3.0, 3.0, 0.75, 0.75, 12.0, 12.0, INFINITY, INFINITY, NAN, 0.0},     /* ^3.0 */
    {-INFINITY, -INFINITY, -1.0, -1.0, -4.0, -4.0, -0.25, -0.25, -0.0, -0.0, NAN,
     -INFINITY}, /* ^-1.0 */
    {-INFINITY, INFINITY, -2.0, 2.0, -16.0, 16.0, -0.25, 0.25, -0.0, 0.0, NAN,
     -INFINITY}, /* ^-2.0 */
    {0.0, 0.0, 2.5, NAN, 0.8838834764831843, NAN, 7.0710678118654755, NAN, INFINITY, INFINITY, NAN,
     0.0}, /* ^2.5 */
    {NAN, NAN, INFINITY, INFINITY, NAN, NAN, INFINITY, INFINITY, INFINITY, INFINITY, NAN,
     NAN}, /* ^INFINITY */
    {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, NAN, NAN, NAN, NAN, NAN,
     -INFINITY},                                                  /* ^-INFINITY */
    {NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN}, /* ^NAN */
};

TG_TEST(pointwise, pow_scalar_matches_torch_on_the_edges) {
  for (int d = 0; d < 2; d++) {
    /* F32: the subnormal 5e-324 is not a float, so its column is left out */
    const int n = d ? POW_BASES : POW_BASES - 1;
    const tg_dtype dt = d ? TG_F64 : TG_F32;
    for (int e = 0; e < POW_EXPONENTS; e++) {
      tg_scope sc = tg_scope_begin();
      tg_tensor *x = tg_test_tensor_of(dt, TG_SHAPE(n), pow_bases);
      cr_assert_eq(tg_set_requires_grad(x, true), TG_OK);
      tg_tensor *y = tg_pow_scalar(x, pow_exponents[e]);
      cr_assert(y, "%s", tg_last_error_message());
      for (int i = 0; i < n; i++) {
        const double got = tg_test_at(y, i), want = pow_want[e][i];
        const bool same = isnan(want) ? isnan(got)
                          : want == 0 ? got == 0 && signbit(got) == signbit(want)
                                      : got == want || fabs(got - want) <= 1e-6 * fabs(want);
        cr_assert(same, "%s pow(%g, %g): got %.17g, want %.17g", d ? "F64" : "F32", pow_bases[i],
                  pow_exponents[e], got, want);
      }
      cr_assert_eq(tg_backward(tg_sum(y), NULL), TG_OK, "%s", tg_last_error_message());
      for (int i = 0; i < n; i++) {
        const double got = tg_test_at(tg_grad(x), i), want = pow_grad_want[e][i];
        const bool same =
            isnan(want) ? isnan(got) : got == want || fabs(got - want) <= 1e-6 * fabs(want);
        cr_assert(same, "%s d pow(%g, %g): got %.17g, want %.17g", d ? "F64" : "F32", pow_bases[i],
                  pow_exponents[e], got, want);
      }
      tg_scope_end(sc);
    }
  }
}

/* Exponent 0's gradient is zeros, not g * 0: NaN and inf in g do not leak (PyTorch's
 * pow_backward). */
TG_TEST(pointwise, pow_scalar_exponent_0_gradient_is_zero_whatever_g) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_from_data(TG_SHAPE(3), (const double[]){2, NAN, 0},
                              TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  tg_tensor *g =
      tg_from_data(TG_SHAPE(3), (const double[]){INFINITY, NAN, 1}, TG_OPTS(.dtype = TG_F64));
  cr_assert_eq(tg_backward(tg_pow_scalar(x, 0), g), TG_OK, "%s", tg_last_error_message());
  tg_test_expect_ieee(tg_grad(x), 3, (const double[]){0, 0, 0}, 0);
  tg_scope_end(sc);
}
