/* Unary pointwise ops, generated from their list (ops/def/unary.def): per op a forward, a
 * backward, an in-place forward and the public front ends tg_<name>, tg_<name>_. What an
 * op saves and its derivative sit in its list entry; this file holds the shared steps.
 *
 * Saved layout (out-of-place and in-place alike, so both share one backward): y (when the
 * entry saves OUT), then x (when it saves IN). In place, y is the target saved before the
 * write (dated after it) and x is the copy of the old value the front end passed as input
 * 1. Everything is saved before the write: saving allocates, and a call that fails must
 * leave its target as it was. */
#include "autograd/node.h"
#include "ops/pointwise_internal.h"
#include "ops/promotion.h"
#include "ops/registry.h"
#include "tensor/check.h"
#include "tg/ops.h"

/* What an entry's backward reads (the `saves` field). */
enum { OUT = 1, IN = 2 };

/* Derivative of an entry: dL/dx from g, x, y (NULL unless saved) and the scalar a. */
typedef tg_tensor *(*unary_grad_fn)(const tg_tensor *g, const tg_tensor *x, const tg_tensor *y,
                                    double a);

/* ---- int64 (docs/dtypes.md) ---- */

/* What a kind does with an int64 x, as PyTorch (docs/dtypes.md): keeps int64, promotes x
 * to F32 (PyTorch's default float), or refuses it; pow_scalar decides by its exponent p. */
typedef enum { INT_REFUSED, INT_KEPT, INT_PROMOTED, INT_NEGATIVE_POWER } int_rule;

static int_rule int_rule_of(tg_unary_kind kind, double p) {
  switch (kind) {
  case TG_UNARY_NEG:
  case TG_UNARY_ABS:
  case TG_UNARY_RELU:
    return INT_KEPT;
  case TG_UNARY_POW: /* a whole exponent keeps int64, a fractional one gives F32 */
    return !tg__is_int64_value(p) ? INT_PROMOTED : p < 0 ? INT_NEGATIVE_POWER : INT_KEPT;
  case TG_UNARY_EXP:
  case TG_UNARY_LOG:
  case TG_UNARY_SQRT:
  case TG_UNARY_SIGMOID:
  case TG_UNARY_TANH:
  case TG_UNARY_RECIPROCAL:
    return INT_PROMOTED;
  default: /* elu, softplus: PyTorch refuses them too */
    return INT_REFUSED;
  }
}

/* False with TG_ERR_DTYPE for the refusals of int_rule_of. */
static bool int_refused(const char *op, int_rule rule, double p) {
  if (rule == INT_NEGATIVE_POWER)
    return tg__fail(TG_ERR_DTYPE, op,
                    "x is int64 and the exponent %g is negative: integers to negative integer "
                    "powers are not allowed (as in PyTorch); cast first with "
                    "tg_to_dtype(x, TG_F32)",
                    p);
  return tg__fail(TG_ERR_DTYPE, op,
                  "x is int64, which this op does not take; cast first with "
                  "tg_to_dtype(x, TG_F32)");
}

/* ---- forward ---- */

/* Scalar 0 of the call, or 0 for an op without one. */
static double scalar_or_zero(tg_ctx *ctx) {
  return tg_ctx_num_scalars(ctx) > 0 ? tg_ctx_scalar(ctx, 0) : 0.0;
}

/* Checked in the forwards too, since tg_apply may run an op directly: a kernel would
 * otherwise truncate a fractional exponent. */
static bool int_input_ok(const char *op, tg_unary_kind kind, const tg_tensor *x, double a) {
  if (x->dtype != TG_I64) return true;
  int_rule rule = int_rule_of(kind, a);
  return rule == INT_KEPT || int_refused(op, rule == INT_PROMOTED ? INT_REFUSED : rule, a);
}

static tg_status unary_forward(tg_ctx *ctx, const char *op, tg_unary_kind kind, int saves,
                               const tg_tensor *const *in, tg_tensor **out) {
  if (!int_input_ok(op, kind, in[0], scalar_or_zero(ctx))) return tg_last_error();
  out[0] = tg__unary_new(op, kind, scalar_or_zero(ctx), 0.0, in[0]);
  if (!out[0]) return tg_last_error();
  if (!tg_ctx_needs_input_grad(ctx, 0)) return TG_OK;
  tg_status st =
      saves & OUT ? tg_ctx_save_for_backward(ctx, 1, (const tg_tensor *const *)out) : TG_OK;
  return st == TG_OK && saves & IN ? tg_ctx_save_for_backward(ctx, 1, in) : st;
}

/* x = f(x) in place; in[1] is x's old value when the entry saves IN (and x needs grad). */
static tg_status unary_inplace_forward(tg_ctx *ctx, const char *op, tg_unary_kind kind, int saves,
                                       const tg_tensor *const *in, tg_tensor **out) {
  /* Inputs as tg__unary_inplace_call passes them (x, maybe its old value): tg_apply may run
   * the op directly. */
  const int n = tg_ctx_num_inputs(ctx);
  if (!tg__check(n == 1 || n == 2, TG_ERR_ARGUMENT, op,
                 "takes x and optionally x's old value: %d inputs given", n) ||
      !tg__check_inplace_target(op, "x", in[0]) ||
      !int_input_ok(op, kind, in[0], scalar_or_zero(ctx)) ||
      (n == 2 && !(tg__check_alike(op, "inputs[1]", in[1], "x", in[0]) &&
                   tg__check_same_sizes(op, "inputs[1]", in[1], "x", in[0]))))
    return tg_last_error();
  tg_tensor *x = (tg_tensor *)in[0];
  bool grad = tg_ctx_needs_input_grad(ctx, 0), save_out = grad && saves & OUT;
  if (grad && saves & IN && tg_ctx_num_inputs(ctx) < 2)
    return tg_set_error(TG_ERR_STATE, "%s: x's old value was not given", op);
  tg_status st = save_out ? tg_ctx_save_for_backward(ctx, 1, &in[0]) : TG_OK;
  if (st == TG_OK && grad && saves & IN) st = tg_ctx_save_for_backward(ctx, 1, &in[1]);
  if (st == TG_OK) st = tg__unary_into(op, kind, scalar_or_zero(ctx), 0.0, x, x);
  if (st != TG_OK) return st;
  tg__bump_version(x);
  out[0] = x;
  if (save_out) tg__ctx_saved_target_written(ctx);
  return TG_OK;
}

/* ---- backward ---- */

static tg_status unary_backward(tg_ctx *ctx, int saves, unary_grad_fn grad,
                                const tg_tensor *const *g, tg_tensor **gi) {
  int slot = 0;
  tg_tensor *y = saves & OUT ? tg_ctx_saved(ctx, slot++) : NULL;
  tg_tensor *x = saves & IN ? tg_ctx_saved(ctx, slot) : NULL;
  if ((saves & OUT && !y) || (saves & IN && !x)) return tg_last_error();
  gi[0] = grad(g[0], x, y, scalar_or_zero(ctx));
  return gi[0] ? TG_OK : tg_last_error();
}

/* relu: y <= 0 ? 0 : g, as PyTorch's threshold_backward. A selection, not g * step(y): an
 * inf or NaN g where x <= 0 gives 0 (not NaN), and g passes where y is NaN. */
static tg_tensor *tg__relu_grad(const tg_tensor *g, const tg_tensor *y) {
  tg_tensor *zero = tg_scalar(0.0, (tg_options){g->dtype, g->storage->device, false});
  return zero ? tg_where(tg_le(y, zero), zero, g) : NULL;
}

/* min(v, hi) = hi - relu(hi - v), from differentiable ops: finite at v = +inf, derivative
 * 0 from hi on. */
static tg_tensor *at_most(const tg_tensor *v, double hi) {
  return tg_rsub_scalar(tg_relu(tg_rsub_scalar(v, hi)), hi);
}

/* elu: 1 where x > 0, else alpha e^x = y + alpha. x is given only when alpha < 0.
 * Where x <= 0, y lies between 0 and -alpha, and y is clamped to that range before the mask
 * multiplies its branch: at x = +inf the discarded branch must be finite (0 * (inf + alpha)
 * is NaN; PyTorch gives g there). Inside the range the clamp adds exactly nothing to
 * y + alpha (min(y, 0) is -relu(-y); for alpha < 0 the two roundings of -alpha - (-alpha -
 * y) cancel in the sum). Its derivative, 0 at y = 0, makes the second derivative 0 at x =
 * 0, where PyTorch's is too (it masks with x < 0). */
static tg_tensor *tg__elu_grad(const tg_tensor *g, const tg_tensor *x, const tg_tensor *y,
                               double alpha) {
  tg_tensor *positive = tg__step(x ? x : y);
  tg_tensor *branch_y = alpha < 0 ? at_most(tg_relu(y), -alpha) : at_most(y, 0.0);
  tg_tensor *negative_slope = tg_mul(tg_rsub_scalar(positive, 1.0), tg_add_scalar(branch_y, alpha));
  return tg_mul(g, tg_add(positive, negative_slope));
}

/* softplus: sigmoid(x) + [x > 20] (1 - sigmoid(x)), which is exactly 1 above the threshold
 * (s + (1 - s) rounds to 1) and sigmoid(x) below it. */
static tg_tensor *tg__softplus_slope(const tg_tensor *x) {
  tg_tensor *s = tg_sigmoid(x);
  tg_tensor *above = tg__step(tg_add_scalar(x, -20.0));
  return tg_add(s, tg_mul(above, tg_rsub_scalar(s, 1.0)));
}

/* ---- front ends ---- */

static double first_scalar(int n_scalars, const double *scalars) {
  return n_scalars > 0 ? scalars[0] : 0.0;
}

static tg_tensor *unary(const char *op, tg_unary_kind kind, const tg_op_desc *desc,
                        const tg_tensor *x, int n_scalars, const double *scalars) {
  if (!tg__check_arg(op, "x", x)) return NULL;
  if (x->dtype == TG_I64) {
    const double p = first_scalar(n_scalars, scalars);
    int_rule rule = int_rule_of(kind, p);
    if (rule == INT_PROMOTED && !(x = tg_to_dtype(x, TG_F32))) return NULL;
    if (rule != INT_KEPT && rule != INT_PROMOTED && !int_refused(op, rule, p)) return NULL;
  }
  return tg_apply1(desc, 1, (const tg_tensor *const[]){x}, n_scalars, scalars);
}

/* In place, an int64 x keeps its dtype only where the op keeps int64 (PyTorch's rule: a
 * float result cannot be cast to an int64 target). */
static bool inplace_dtype_ok(const char *op, tg_unary_kind kind, const tg_tensor *x, int n_scalars,
                             const double *scalars) {
  if (!tg__check_arg(op, "x", x) || x->dtype != TG_I64) return true; /* NULL: checked later */
  const double p = first_scalar(n_scalars, scalars);
  int_rule rule = int_rule_of(kind, p);
  return rule == INT_KEPT || (rule == INT_PROMOTED ? tg__check_inplace_cast(op, "x", x, TG_F32)
                                                   : int_refused(op, rule, p));
}

/* ---- the ops of the list ---- */

/* Per entry: its saves as a function of the scalar, its derivative, forward, backward and
 * in-place forward. */
#define TG__UNARY_DEFINE(KIND, name, saves, grad)                                                  \
  static int saves_##name(double a) {                                                              \
    (void)a;                                                                                       \
    return (saves);                                                                                \
  }                                                                                                \
  static tg_tensor *grad_##name(const tg_tensor *g, const tg_tensor *x, const tg_tensor *y,        \
                                double a) {                                                        \
    (void)g, (void)x, (void)y, (void)a;                                                            \
    return (grad);                                                                                 \
  }                                                                                                \
  tg_status tg__fwd_##name(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {             \
    return unary_forward(ctx, "tg_" #name, TG_UNARY_##KIND, saves_##name(scalar_or_zero(ctx)), in, \
                         out);                                                                     \
  }                                                                                                \
  tg_status tg__bwd_##name(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {               \
    return unary_backward(ctx, saves_##name(scalar_or_zero(ctx)), grad_##name, g, gi);             \
  }                                                                                                \
  tg_status tg__fwd_##name##_(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {          \
    return unary_inplace_forward(ctx, "tg_" #name "_", TG_UNARY_##KIND,                            \
                                 saves_##name(scalar_or_zero(ctx)), in, out);                      \
  }

#define TG_UNARY_KERNEL(KIND, name, cost)
#define TG_UNARY_NOGRAD(KIND, name, cost)                                                          \
  tg_status tg__fwd_##name(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {             \
    return unary_forward(ctx, "tg_" #name, TG_UNARY_##KIND, 0, in, out);                           \
  }                                                                                                \
  tg_tensor *tg__##name(const tg_tensor *x) {                                                      \
    return unary("tg_" #name, TG_UNARY_##KIND, TG__OP(name), x, TG__NO_SC);                        \
  }
#define TG_UNARY_OP(KIND, name, cost, saves, grad)                                                 \
  TG__UNARY_DEFINE(KIND, name, saves, grad)                                                        \
  tg_tensor *tg_##name(const tg_tensor *x) {                                                       \
    return unary("tg_" #name, TG_UNARY_##KIND, TG__OP(name), x, TG__NO_SC);                        \
  }                                                                                                \
  tg_status tg_##name##_(tg_tensor *x) {                                                           \
    if (!inplace_dtype_ok("tg_" #name "_", TG_UNARY_##KIND, x, TG__NO_SC)) return tg_last_error(); \
    return tg__unary_inplace_call("tg_" #name "_", TG__OP(name##_), x,                             \
                                  (saves_##name(0.0) & IN) != 0, TG__NO_SC);                       \
  }
#define TG_UNARY_OP1(KIND, name, cost, param, saves, grad)                                         \
  TG__UNARY_DEFINE(KIND, name, saves, grad)                                                        \
  tg_tensor *tg_##name(const tg_tensor *x, double param) {                                         \
    return unary("tg_" #name, TG_UNARY_##KIND, TG__OP(name), x, TG__SC(param));                    \
  }                                                                                                \
  tg_status tg_##name##_(tg_tensor *x, double param) {                                             \
    if (!inplace_dtype_ok("tg_" #name "_", TG_UNARY_##KIND, x, TG__SC(param)))                     \
      return tg_last_error();                                                                      \
    return tg__unary_inplace_call("tg_" #name "_", TG__OP(name##_), x,                             \
                                  (saves_##name(param) & IN) != 0, TG__SC(param));                 \
  }
#include "ops/def/unary.def"
