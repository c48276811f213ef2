/* Sample inputs of the pointwise ops: unary (ops/def/unary.def), binary and comparisons
 * (ops/def/binary.def), and the scalar-operand ops (ops/def/pointwise.def). In-place forms
 * take these through tg__samples_inplace. */
#include "testing/samples/samples_internal.h"

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
