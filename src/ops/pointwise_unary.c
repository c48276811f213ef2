/* Unary pointwise ops. Backward formulas use the output where it suffices (exp, sqrt,
 * sigmoid, tanh, relu, elu), so the in-place forms, which overwrite the input, share them. */
#include "ops/pointwise_internal.h"
#include "ops/registry.h"
#include "tg/ops.h"

/* ---- forward ---- */

/* out = f(x); saves the output when backward needs it. */
static tg_status unary_forward(tg_ctx *ctx, const char *op, tg_unary_kind kind, double a,
                               const tg_tensor *const *in, tg_tensor **out, bool save_output) {
  out[0] = tg__unary_new(op, kind, a, 0.0, in[0]);
  if (!out[0]) return tg_last_error();
  if (!save_output || !tg_ctx_needs_input_grad(ctx, 0)) return TG_OK;
  return tg_ctx_save_for_backward(ctx, 1, (const tg_tensor *const *)out);
}

/* Saves input x for backward (log, pow need it). */
static tg_status save_input(tg_ctx *ctx, const tg_tensor *const *in) {
  if (!tg_ctx_needs_input_grad(ctx, 0)) return TG_OK;
  return tg_ctx_save_for_backward(ctx, 1, in);
}

tg_status tg__fwd_neg(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  return unary_forward(ctx, "tg_neg", TG_UNARY_NEG, 0.0, in, out, false);
}
tg_status tg__fwd_exp(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  return unary_forward(ctx, "tg_exp", TG_UNARY_EXP, 0.0, in, out, true);
}
tg_status tg__fwd_log(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  tg_status st = save_input(ctx, in);
  return st != TG_OK ? st : unary_forward(ctx, "tg_log", TG_UNARY_LOG, 0.0, in, out, false);
}
tg_status tg__fwd_sqrt(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  return unary_forward(ctx, "tg_sqrt", TG_UNARY_SQRT, 0.0, in, out, true);
}
tg_status tg__fwd_pow_scalar(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  tg_status st = save_input(ctx, in);
  if (st != TG_OK) return st;
  return unary_forward(ctx, "tg_pow_scalar", TG_UNARY_POW, tg_ctx_scalar(ctx, 0), in, out, false);
}
tg_status tg__fwd_sigmoid(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  return unary_forward(ctx, "tg_sigmoid", TG_UNARY_SIGMOID, 0.0, in, out, true);
}
tg_status tg__fwd_tanh(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  return unary_forward(ctx, "tg_tanh", TG_UNARY_TANH, 0.0, in, out, true);
}
tg_status tg__fwd_relu(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  return unary_forward(ctx, "tg_relu", TG_UNARY_RELU, 0.0, in, out, true);
}
tg_status tg__fwd_elu(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  double alpha = tg_ctx_scalar(ctx, 0);
  tg_status st = unary_forward(ctx, "tg_elu", TG_UNARY_ELU, alpha, in, out, true);
  /* With alpha < 0 the output's sign no longer tells which branch x took: keep x too. */
  return st != TG_OK || alpha >= 0 ? st : save_input(ctx, in);
}
tg_status tg__fwd_step(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  return unary_forward(ctx, "tg_step", TG_UNARY_STEP, 0.0, in, out, false);
}

/* ---- backward (formulas shared with the in-place forms; see pointwise_inplace.c) ---- */

#define RETURN_GRAD(expr)                                                                          \
  do {                                                                                             \
    gi[0] = (expr);                                                                                \
    return gi[0] ? TG_OK : tg_last_error();                                                        \
  } while (0)

tg_status tg__bwd_neg(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  (void)ctx;
  RETURN_GRAD(tg_neg(g[0]));
}
/* saved: y */
tg_status tg__bwd_exp(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  RETURN_GRAD(tg_mul(g[0], tg_ctx_saved(ctx, 0)));
}
/* saved: x */
tg_status tg__bwd_log(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  RETURN_GRAD(tg_div(g[0], tg_ctx_saved(ctx, 0)));
}
/* saved: y; dy/dx = 1 / (2y) */
tg_status tg__bwd_sqrt(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  RETURN_GRAD(tg_div(g[0], tg_mul_scalar(tg_ctx_saved(ctx, 0), 2.0)));
}
/* saved: x; dy/dx = p x^(p-1) */
tg_status tg__bwd_pow_scalar(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  double p = tg_ctx_scalar(ctx, 0);
  tg_tensor *x = tg_ctx_saved(ctx, 0);
  if (p == 0.0) RETURN_GRAD(x ? tg_mul_scalar(g[0], 0.0) : NULL);
  RETURN_GRAD(tg_mul(g[0], tg_mul_scalar(tg_pow_scalar(x, p - 1.0), p)));
}
/* saved: y; dy/dx = y (1 - y) */
tg_status tg__bwd_sigmoid(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  tg_tensor *y = tg_ctx_saved(ctx, 0);
  RETURN_GRAD(tg_mul(g[0], tg_mul(y, tg_rsub_scalar(y, 1.0))));
}
/* saved: y; dy/dx = 1 - y^2 */
tg_status tg__bwd_tanh(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  tg_tensor *y = tg_ctx_saved(ctx, 0);
  RETURN_GRAD(tg_mul(g[0], tg_rsub_scalar(tg_mul(y, y), 1.0)));
}
/* saved: y; y > 0 exactly where x > 0 */
tg_status tg__bwd_relu(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  RETURN_GRAD(tg_mul(g[0], tg__step(tg_ctx_saved(ctx, 0))));
}
/* saved: y, then x when alpha < 0. dy/dx = 1 where x > 0, else alpha e^x = y + alpha.
 * With alpha >= 0, y > 0 exactly where x > 0, so y alone decides the branch. */
tg_status tg__bwd_elu(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  double alpha = tg_ctx_scalar(ctx, 0);
  tg_tensor *y = tg_ctx_saved(ctx, 0);
  tg_tensor *positive = tg__step(alpha < 0 ? tg_ctx_saved(ctx, 1) : y);
  tg_tensor *negative_slope = tg_mul(tg_rsub_scalar(positive, 1.0), tg_add_scalar(y, alpha));
  RETURN_GRAD(tg_mul(g[0], tg_add(positive, negative_slope)));
}

/* ---- front ends ---- */

static tg_tensor *unary(const char *op, const tg_op_desc *desc, const tg_tensor *x, int n_scalars,
                        const double *scalars) {
  if (!tg__check_arg(op, "x", x) || !tg__check_floating(op, "x", x)) return NULL;
  return tg_apply1(desc, 1, (const tg_tensor *const[]){x}, n_scalars, scalars);
}

tg_tensor *tg_neg(const tg_tensor *x) { return unary("tg_neg", TG__OP(neg), x, TG__NO_SC); }
tg_tensor *tg_exp(const tg_tensor *x) { return unary("tg_exp", TG__OP(exp), x, TG__NO_SC); }
tg_tensor *tg_log(const tg_tensor *x) { return unary("tg_log", TG__OP(log), x, TG__NO_SC); }
tg_tensor *tg_sqrt(const tg_tensor *x) { return unary("tg_sqrt", TG__OP(sqrt), x, TG__NO_SC); }
tg_tensor *tg_pow_scalar(const tg_tensor *x, double exponent) {
  return unary("tg_pow_scalar", TG__OP(pow_scalar), x, TG__SC(exponent));
}
tg_tensor *tg_sigmoid(const tg_tensor *x) {
  return unary("tg_sigmoid", TG__OP(sigmoid), x, TG__NO_SC);
}
tg_tensor *tg_tanh(const tg_tensor *x) { return unary("tg_tanh", TG__OP(tanh), x, TG__NO_SC); }
tg_tensor *tg_relu(const tg_tensor *x) { return unary("tg_relu", TG__OP(relu), x, TG__NO_SC); }
tg_tensor *tg_elu(const tg_tensor *x, double alpha) {
  return unary("tg_elu", TG__OP(elu), x, TG__SC(alpha));
}
tg_tensor *tg__step(const tg_tensor *x) { return unary("tg_step", TG__OP(step), x, TG__NO_SC); }
