/* Sample inputs of the pointwise ops: unary (ops/def/unary.def), binary and comparisons
 * (ops/def/binary.def), and the scalar-operand ops (ops/def/pointwise.def). In-place forms
 * take these through tg__samples_inplace. */
#include <math.h>

#include "testing/samples/samples_internal.h"
#include "tg/ops.h"

/* ---- unary ---- */

/* The layouts every unary op meets: 2-D, transposed, stepped, 0-dim, size-1 dims; with
 * params[0] (when n_params > 0), then one sample per further param. */
static int unary_samples(const tg_sample_request *r, tg_sample *out, tg__range range, int n_params,
                         const double *params) {
  tg__samples b = tg__samples_begin(r, out);
  tg_sample *s;
  if (r->bench) {
    s = tg__sample_new(&b, "bench");
    tg__sample_input(&b, s, TG__GRAD(&b, range, 1024, TG__BENCH_NUMEL / 1024));
    if (n_params > 0) tg__sample_scalar(s, params[0]);
    return tg__samples_end(&b);
  }
  static const char *const labels[] = {"2-D", "transposed", "stepped", "0-dim", "size-1 dims"};
  for (int k = 0; k < 5; k++) {
    s = tg__sample_new(&b, labels[k]);
    tg_tensor *x = k == 0   ? TG__GRAD(&b, range, 3, 4)
                   : k == 1 ? tg__sample_tensor(r, TG__TRANSPOSED, range, true, TG_SHAPE(3, 4))
                   : k == 2 ? tg__sample_tensor(r, TG__STEPPED, range, true, TG_SHAPE(2, 3))
                   : k == 3 ? TG__GRAD(&b, range)
                            : TG__GRAD(&b, range, 1, 3, 1);
    tg__sample_input(&b, s, x);
    if (n_params > 0) tg__sample_scalar(s, params[0]);
  }
  static const char *const param_labels[] = {"param 2", "param 3", "param 4", "param 5"};
  for (int p = 1; p < n_params && p <= 4; p++) {
    s = tg__sample_new(&b, param_labels[p - 1]);
    tg__sample_input(&b, s, TG__GRAD(&b, range, 2, 3));
    tg__sample_scalar(s, params[p]);
  }
  return tg__samples_end(&b);
}

#define UNARY_SAMPLES(name, range)                                                                 \
  int tg__samples_##name(const tg_sample_request *r, tg_sample *out) {                             \
    return unary_samples(r, out, range, 0, NULL);                                                  \
  }
UNARY_SAMPLES(neg, TG__ANY)
UNARY_SAMPLES(exp, TG__ANY)
UNARY_SAMPLES(log, TG__POSITIVE)
UNARY_SAMPLES(sqrt, TG__POSITIVE)
UNARY_SAMPLES(sigmoid, TG__ANY)
UNARY_SAMPLES(tanh, TG__ANY)
UNARY_SAMPLES(relu, TG__NONZERO)
UNARY_SAMPLES(reciprocal, TG__NONZERO)
UNARY_SAMPLES(step, TG__NONZERO)
UNARY_SAMPLES(abs, TG__NONZERO)
UNARY_SAMPLES(softplus, TG__ANY)

/* alpha 1 (smooth at 0), 0.5, and a negative alpha (backward then reads x, not y). */
int tg__samples_elu(const tg_sample_request *r, tg_sample *out) {
  return unary_samples(r, out, TG__NONZERO, 3, (const double[]){1.0, 0.5, -0.5});
}

/* Integer exponents take any x (0: a zero gradient); fractional and negative ones need
 * x > 0. */
int tg__samples_pow_scalar(const tg_sample_request *r, tg_sample *out) {
  if (r->bench) return unary_samples(r, out, TG__POSITIVE, 1, (const double[]){2.5});
  int n = unary_samples(r, out, TG__ANY, 3, (const double[]){2.0, 3.0, 0.0});
  if (n < 0) return -1;
  tg__samples b = {r, out, n, false};
  static const char *const labels[] = {"exponent 0.5", "exponent -1.5"};
  static const double exponents[] = {0.5, -1.5};
  for (int k = 0; k < 2; k++) {
    tg_sample *s = tg__sample_new(&b, labels[k]);
    tg__sample_input(&b, s, TG__GRAD(&b, TG__POSITIVE, 2, 3));
    tg__sample_scalar(s, exponents[k]);
  }
  return tg__samples_end(&b);
}

/* ---- scalar operand: x + s, x * s, s - x ---- */

static int scalar_samples(const tg_sample_request *r, tg_sample *out) {
  return unary_samples(r, out, TG__ANY, 3, (const double[]){2.5, -1.5, 0.0});
}
int tg__samples_add_scalar(const tg_sample_request *r, tg_sample *out) {
  return scalar_samples(r, out);
}
int tg__samples_mul_scalar(const tg_sample_request *r, tg_sample *out) {
  return scalar_samples(r, out);
}
/* Divisors away from 0 (x / 0 is inf: no finite difference there). */
int tg__samples_div_scalar(const tg_sample_request *r, tg_sample *out) {
  return unary_samples(r, out, TG__ANY, 3, (const double[]){2.5, -1.5, 0.5});
}
int tg__samples_rsub_scalar(const tg_sample_request *r, tg_sample *out) {
  return scalar_samples(r, out);
}

/* ---- binary ---- */

/* a (op) b with alpha: equal sizes, b broadcast, both broadcast, non-contiguous, 0-dim
 * operands, and a gradient for b only. b's values come from b_range (away from 0 for div);
 * with_alpha adds a sample with alpha != 1 (add, sub). grad: whether inputs require grad. */
static int binary_samples(const tg_sample_request *r, tg_sample *out, tg__range b_range,
                          bool with_alpha, bool grad) {
  tg__samples b = tg__samples_begin(r, out);
  tg_sample *s;
  tg__range a_range = TG__ANY;
  if (r->bench) {
    s = tg__sample_new(&b, "bench");
    tg__sample_input(&b, s,
                     tg__sample_tensor(r, TG__CONTIGUOUS, a_range, grad,
                                       TG_SHAPE(1024, TG__BENCH_NUMEL / 1024)));
    tg__sample_input(&b, s,
                     tg__sample_tensor(r, TG__CONTIGUOUS, b_range, grad,
                                       TG_SHAPE(1024, TG__BENCH_NUMEL / 1024)));
    if (grad) tg__sample_scalar(s, 1.0);
    return tg__samples_end(&b);
  }
#define BIN(label, a_layout, b_layout, a_shape, b_shape)                                           \
  s = tg__sample_new(&b, label);                                                                   \
  tg__sample_input(&b, s, tg__sample_tensor(r, a_layout, a_range, grad, TG_SHAPE a_shape));        \
  tg__sample_input(&b, s, tg__sample_tensor(r, b_layout, b_range, grad, TG_SHAPE b_shape));        \
  if (grad) tg__sample_scalar(s, 1.0);
  BIN("same sizes", TG__CONTIGUOUS, TG__CONTIGUOUS, (2, 3), (2, 3))
  BIN("broadcast b", TG__CONTIGUOUS, TG__CONTIGUOUS, (2, 3, 4), (3, 1))
  BIN("broadcast a", TG__CONTIGUOUS, TG__CONTIGUOUS, (4), (3, 4))
  BIN("broadcast both", TG__CONTIGUOUS, TG__CONTIGUOUS, (3, 1), (1, 4))
  BIN("transposed", TG__TRANSPOSED, TG__TRANSPOSED, (3, 4), (3, 4))
  BIN("stepped and transposed", TG__STEPPED, TG__TRANSPOSED, (2, 3), (2, 3))
  BIN("0-dim b", TG__CONTIGUOUS, TG__CONTIGUOUS, (2, 2), ())
  BIN("0-dim", TG__CONTIGUOUS, TG__CONTIGUOUS, (), ())
#undef BIN
  if (grad) {
    s = tg__sample_new(&b, "grad for b only");
    tg__sample_input(&b, s, TG__CONST(&b, a_range, 2, 3));
    tg__sample_input(&b, s, TG__GRAD(&b, b_range, 3));
    tg__sample_scalar(s, 1.0);
    s = tg__sample_new(&b, "grad for a only");
    tg__sample_input(&b, s, TG__GRAD(&b, a_range, 2, 3));
    tg__sample_input(&b, s, TG__CONST(&b, b_range, 2, 3));
    tg__sample_scalar(s, 1.0);
  }
  if (with_alpha) {
    s = tg__sample_new(&b, "alpha");
    tg__sample_input(&b, s, TG__GRAD(&b, a_range, 2, 3));
    tg__sample_input(&b, s, TG__GRAD(&b, b_range, 1, 3));
    tg__sample_scalar(s, 2.5);
  }
  return tg__samples_end(&b);
}

int tg__samples_add(const tg_sample_request *r, tg_sample *out) {
  return binary_samples(r, out, TG__ANY, true, true);
}
int tg__samples_sub(const tg_sample_request *r, tg_sample *out) {
  return binary_samples(r, out, TG__ANY, true, true);
}
int tg__samples_mul(const tg_sample_request *r, tg_sample *out) {
  return binary_samples(r, out, TG__ANY, false, true);
}
int tg__samples_div(const tg_sample_request *r, tg_sample *out) {
  return binary_samples(r, out, (tg__range){-2.0, 2.0, 0.5}, false, true);
}

/* ---- comparisons: the binary layouts, plus operands with equal elements ---- */

static int compare_samples(const tg_sample_request *r, tg_sample *out) {
  int n = binary_samples(r, out, TG__ANY, false, false);
  if (n < 0 || r->bench) return n;
  tg__samples b = {r, out, n, false};
  tg_sample *s = tg__sample_new(&b, "ties");
  tg__sample_input(&b, s,
                   tg__sample_values(r, false, TG_SHAPE(2, 3), (const double[]){1, 2, 3, 4, 5, 6}));
  tg__sample_input(&b, s,
                   tg__sample_values(r, false, TG_SHAPE(2, 3), (const double[]){1, 0, 3, 7, 5, 2}));
  s = tg__sample_new(&b, "ties, broadcast");
  tg__sample_input(&b, s, tg__sample_values(r, false, TG_SHAPE(3), (const double[]){-1, 0, 2}));
  tg__sample_input(&b, s, tg__sample_values(r, false, TG_SHAPE(2, 1), (const double[]){0, 2}));
  return tg__samples_end(&b);
}

#define COMPARE_SAMPLES(name)                                                                      \
  int tg__samples_##name(const tg_sample_request *r, tg_sample *out) {                             \
    return compare_samples(r, out);                                                                \
  }
COMPARE_SAMPLES(eq)
COMPARE_SAMPLES(ge)
COMPARE_SAMPLES(ne)
COMPARE_SAMPLES(gt)
COMPARE_SAMPLES(lt)
COMPARE_SAMPLES(le)

/* ---- where: cond (no grad; zeros and nonzeros, float or int64), a and b broadcast ---- */

int tg__samples_where(const tg_sample_request *r, tg_sample *out) {
  tg__samples b = tg__samples_begin(r, out);
  tg_sample *s;
  const double mask6[] = {1, 0, -2, 0, 0, 0.5};
  if (r->bench) {
    s = tg__sample_new(&b, "bench");
    tg__sample_input(&b, s, tg__sample_indices(r, 2, TG_SHAPE(1024, TG__BENCH_NUMEL / 1024)));
    tg__sample_input(&b, s, TG__GRAD(&b, TG__ANY, 1024, TG__BENCH_NUMEL / 1024));
    tg__sample_input(&b, s, TG__GRAD(&b, TG__ANY, 1024, TG__BENCH_NUMEL / 1024));
    return tg__samples_end(&b);
  }
  s = tg__sample_new(&b, "same sizes");
  tg__sample_input(&b, s, tg__sample_values(r, false, TG_SHAPE(2, 3), mask6));
  tg__sample_input(&b, s, TG__GRAD(&b, TG__ANY, 2, 3));
  tg__sample_input(&b, s, TG__GRAD(&b, TG__ANY, 2, 3));
  s = tg__sample_new(&b, "int64 cond, broadcast a and b");
  tg__sample_input(&b, s, tg__sample_indices(r, 2, TG_SHAPE(2, 3, 4)));
  tg__sample_input(&b, s, TG__GRAD(&b, TG__ANY, 3, 1));
  tg__sample_input(&b, s, TG__GRAD(&b, TG__ANY, 4));
  s = tg__sample_new(&b, "broadcast cond");
  tg__sample_input(&b, s, tg__sample_values(r, false, TG_SHAPE(3, 1), (const double[]){0, 1, 0}));
  tg__sample_input(&b, s, tg__sample_tensor(r, TG__TRANSPOSED, TG__ANY, true, TG_SHAPE(3, 4)));
  tg__sample_input(&b, s, tg__sample_tensor(r, TG__STEPPED, TG__ANY, true, TG_SHAPE(3, 4)));
  s = tg__sample_new(&b, "0-dim b");
  tg__sample_input(&b, s, tg__sample_values(r, false, TG_SHAPE(2, 3), mask6));
  tg__sample_input(&b, s, TG__GRAD(&b, TG__ANY, 2, 3));
  tg__sample_input(&b, s, tg__sample_tensor(r, TG__CONTIGUOUS, TG__ANY, true, TG_SHAPE()));
  s = tg__sample_new(&b, "0-dim");
  tg__sample_input(&b, s, tg__sample_values(r, false, 0, NULL, (const double[]){0}));
  tg__sample_input(&b, s, tg__sample_tensor(r, TG__CONTIGUOUS, TG__ANY, true, TG_SHAPE()));
  tg__sample_input(&b, s, tg__sample_tensor(r, TG__CONTIGUOUS, TG__ANY, true, TG_SHAPE()));
  s = tg__sample_new(&b, "grad for a only");
  tg__sample_input(&b, s, tg__sample_values(r, false, TG_SHAPE(2, 3), mask6));
  tg__sample_input(&b, s, TG__GRAD(&b, TG__ANY, 2, 3));
  tg__sample_input(&b, s, TG__CONST(&b, TG__ANY, 2, 3));
  return tg__samples_end(&b);
}

/* ---- issue 25, helper "pointwise": silu, maximum, minimum, gelu, the backward ops, clamp,
 * cumsum, logsumexp ---- */

UNARY_SAMPLES(silu, TG__ANY)
int tg__samples_maximum(const tg_sample_request *r, tg_sample *out) {
  return binary_samples(r, out, TG__ANY, false, true);
}
int tg__samples_minimum(const tg_sample_request *r, tg_sample *out) {
  return binary_samples(r, out, TG__ANY, false, true);
}

/* The unary layouts with the erf form (the bench call: the tanh form, GPT-2's), then the tanh
 * form on two more. */
int tg__samples_gelu(const tg_sample_request *r, tg_sample *out) {
  const int n = unary_samples(r, out, TG__ANY, 0, NULL);
  if (n < 0) return -1;
  for (int k = 0; k < n; k++) tg__sample_int(&out[k], r->bench ? TG_GELU_TANH : TG_GELU_NONE);
  if (r->bench) return n;
  tg__samples b = {r, out, n, false};
  tg_sample *s = tg__sample_new(&b, "tanh form");
  tg__sample_input(&b, s, TG__GRAD(&b, TG__ANY, 2, 3));
  tg__sample_int(s, TG_GELU_TANH);
  s = tg__sample_new(&b, "tanh form, transposed");
  tg__sample_input(&b, s, tg__sample_tensor(r, TG__TRANSPOSED, TG__ANY, true, TG_SHAPE(3, 4)));
  tg__sample_int(s, TG_GELU_TANH);
  return tg__samples_end(&b);
}

/* g and x of g f'(x): equal sizes, transposed x, a broadcast g; with_form: one sample per
 * gelu form (the int approximate), else none. */
static int slope_samples(const tg_sample_request *r, tg_sample *out, bool with_form) {
  tg__samples b = tg__samples_begin(r, out);
  tg_sample *s;
  if (r->bench) {
    s = tg__sample_new(&b, "bench");
    tg__sample_input(&b, s, TG__GRAD(&b, TG__ANY, 1024, TG__BENCH_NUMEL / 1024));
    tg__sample_input(&b, s, TG__GRAD(&b, TG__ANY, 1024, TG__BENCH_NUMEL / 1024));
    if (with_form) tg__sample_int(s, TG_GELU_TANH);
    return tg__samples_end(&b);
  }
  for (int form = 0; form < (with_form ? 2 : 1); form++) {
    s = tg__sample_new(&b, form ? "tanh form" : "same sizes");
    tg__sample_input(&b, s, TG__GRAD(&b, TG__ANY, 2, 3));
    tg__sample_input(&b, s, TG__GRAD(&b, TG__ANY, 2, 3));
    if (with_form) tg__sample_int(s, form);
    s = tg__sample_new(&b, form ? "tanh form, transposed x" : "transposed x");
    tg__sample_input(&b, s, TG__GRAD(&b, TG__ANY, 3, 4));
    tg__sample_input(&b, s, tg__sample_tensor(r, TG__TRANSPOSED, TG__ANY, true, TG_SHAPE(3, 4)));
    if (with_form) tg__sample_int(s, form);
    s = tg__sample_new(&b, form ? "tanh form, broadcast g" : "broadcast g");
    tg__sample_input(&b, s, TG__GRAD(&b, TG__ANY, 3));
    tg__sample_input(&b, s, TG__GRAD(&b, TG__ANY, 2, 3));
    if (with_form) tg__sample_int(s, form);
  }
  return tg__samples_end(&b);
}
int tg__samples_gelu_backward(const tg_sample_request *r, tg_sample *out) {
  return slope_samples(r, out, true);
}
int tg__samples_silu_backward(const tg_sample_request *r, tg_sample *out) {
  return slope_samples(r, out, false);
}

/* Bounds on both sides, one side only (NaN: none), and min > max, over the unary layouts;
 * the values are drawn away from the bounds (gradcheck cannot step across a kink). */
int tg__samples_clamp(const tg_sample_request *r, tg_sample *out) {
  static const double bounds[][2] = {{-0.1, 0.1}, {NAN, 0.1}, {-0.1, NAN}, {0.1, -0.1}};
  const tg__range away = {-2.0, 2.0, 0.25};
  const int n = unary_samples(r, out, away, 0, NULL);
  if (n < 0) return -1;
  for (int k = 0; k < n; k++) {
    tg__sample_scalar(&out[k], bounds[k % 4][0]);
    tg__sample_scalar(&out[k], bounds[k % 4][1]);
  }
  return n;
}

/* dim first, last and in the middle, reversed, over contiguous, transposed and 0-dim x. */
int tg__samples_cumsum(const tg_sample_request *r, tg_sample *out) {
  tg__samples b = tg__samples_begin(r, out);
  tg_sample *s;
  if (r->bench) {
    s = tg__sample_new(&b, "bench");
    tg__sample_input(&b, s, TG__GRAD(&b, TG__ANY, 1024, TG__BENCH_NUMEL / 1024));
    tg__sample_int(s, 1);
    tg__sample_int(s, 0);
    return tg__samples_end(&b);
  }
  struct {
    const char *label;
    tg__layout layout;
    int ndim;
    int64_t dim, reverse;
  } const cases[] = {
      {"dim 1", TG__CONTIGUOUS, 2, 1, 0},      {"dim 0", TG__CONTIGUOUS, 2, 0, 0},
      {"transposed", TG__TRANSPOSED, 2, 1, 0}, {"middle dim of 3", TG__CONTIGUOUS, 3, 1, 0},
      {"reversed", TG__STEPPED, 2, 1, 1},      {"0-dim", TG__CONTIGUOUS, 0, 0, 0},
  };
  static const int64_t sizes[] = {2, 3, 4};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    s = tg__sample_new(&b, cases[k].label);
    tg__sample_input(&b, s,
                     tg__sample_tensor(r, cases[k].layout, TG__ANY, true, cases[k].ndim,
                                       cases[k].ndim == 3 ? sizes : sizes + 1));
    tg__sample_int(s, cases[k].dim);
    tg__sample_int(s, cases[k].reverse);
  }
  return tg__samples_end(&b);
}

/* One dim, two dims, all, with and without keepdim, over contiguous and transposed x. */
int tg__samples_logsumexp(const tg_sample_request *r, tg_sample *out) {
  tg__samples b = tg__samples_begin(r, out);
  tg_sample *s;
  if (r->bench) {
    s = tg__sample_new(&b, "bench");
    tg__sample_input(&b, s, TG__GRAD(&b, TG__ANY, 1024, TG__BENCH_NUMEL / 1024));
    tg__sample_int(s, 0);
    tg__sample_int(s, 1);
    return tg__samples_end(&b);
  }
  struct {
    const char *label;
    tg__layout layout;
    int ndim, n_dims;
    int64_t keepdim, dims[2];
  } const cases[] = {
      {"last dim", TG__CONTIGUOUS, 2, 1, 0, {1}},
      {"first dim, keepdim", TG__CONTIGUOUS, 2, 1, 1, {0}},
      {"transposed", TG__TRANSPOSED, 2, 1, 0, {1}},
      {"two of three dims", TG__CONTIGUOUS, 3, 2, 0, {0, 2}},
      {"all dims, keepdim", TG__STEPPED, 2, 2, 1, {0, 1}},
  };
  static const int64_t sizes[] = {2, 3, 4};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    s = tg__sample_new(&b, cases[k].label);
    tg__sample_input(&b, s,
                     tg__sample_tensor(r, cases[k].layout, TG__ANY, true, cases[k].ndim,
                                       cases[k].ndim == 3 ? sizes : sizes + 1));
    tg__sample_int(s, cases[k].keepdim);
    for (int d = 0; d < cases[k].n_dims; d++) tg__sample_int(s, cases[k].dims[d]);
  }
  return tg__samples_end(&b);
}
