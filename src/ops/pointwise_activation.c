/* gelu (erf and tanh forms), silu's backward, clamp, and the gradients of maximum / minimum
 * (issue 25, helper "pointwise"; entries in ops/def/pointwise_extra.def, unary.def and
 * binary.def).
 *
 * gelu and silu are one unary pass forward and one binary pass back (g, x) -> g f'(x),
 * which the CPU vectorises: the op gelu_backward / silu_backward. Those ops' own backwards
 * are written with tg ops (f'' composed), so double backward and beyond work. */
#include <math.h>

#include "ops/broadcast.h"
#include "ops/pointwise_internal.h"
#include "ops/promotion.h"
#include "ops/registry.h"
#include "tensor/check.h"
#include "tg/ops.h"

/* The constants of ops/pointwise_math.h's gelu. */
#define GELU_PDF 0.39894228040143267794  /* 1 / sqrt(2 pi) */
#define GELU_BETA 0.79788456080286535588 /* sqrt(2 / pi) */
#define GELU_KAPPA 0.044715

static tg_tensor *zero_like_dtype(const tg_tensor *t) {
  return tg_scalar(0.0, (tg_options){t->dtype, t->storage->device, false});
}

/* ---- gelu ---- */

static bool approximate_ok(const char *op, int64_t approximate) {
  return tg__check(approximate == TG_GELU_NONE || approximate == TG_GELU_TANH, TG_ERR_ARGUMENT, op,
                   "approximate is %lld; expected TG_GELU_NONE (0) or TG_GELU_TANH (1)",
                   (long long)approximate);
}

tg_status tg__fwd_gelu(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  const char *op = "tg_gelu";
  const int64_t approximate = tg_ctx_int(ctx, 0);
  if (!tg__check_floating(op, "x", in[0]) || !approximate_ok(op, approximate))
    return tg_last_error();
  out[0] = tg__unary_new(op, approximate == TG_GELU_TANH ? TG_UNARY_GELU_TANH : TG_UNARY_GELU, 0.0,
                         0.0, in[0]);
  if (!out[0]) return tg_last_error();
  return tg_ctx_needs_input_grad(ctx, 0) ? tg_ctx_save_for_backward(ctx, 1, in) : TG_OK;
}

static tg_tensor *gelu_backward(const tg_tensor *g, const tg_tensor *x, int64_t approximate) {
  return tg_apply1_ex(TG__OP(gelu_backward), 2, (const tg_tensor *const[]){g, x}, TG__NO_SC,
                      TG__INTS(approximate));
}

tg_status tg__bwd_gelu(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  const tg_tensor *x = tg_ctx_saved(ctx, 0);
  gi[0] = x ? gelu_backward(g[0], x, tg_ctx_int(ctx, 0)) : NULL;
  return gi[0] ? TG_OK : tg_last_error();
}

tg_tensor *tg_gelu(const tg_tensor *x, tg_gelu_approximate approximate) {
  const char *op = "tg_gelu";
  if (!tg__check_arg(op, "x", x) ||
      !tg__check(x->dtype != TG_I64, TG_ERR_DTYPE, op,
                 "x is int64, which gelu does not take (as in PyTorch); cast first with "
                 "tg_to_dtype(x, TG_F32)") ||
      !approximate_ok(op, approximate))
    return NULL;
  return tg_apply1_ex(TG__OP(gelu), 1, (const tg_tensor *const[]){x}, TG__NO_SC,
                      TG__INTS(approximate));
}

/* ---- the backward kernels as ops: g f'(x) ---- */

/* out = kind(g, x) at the sizes g and x broadcast to; saves g and x for the second
 * derivative. */
static tg_status slope_forward(tg_ctx *ctx, const char *op, tg_binary_kind kind,
                               const tg_tensor *const *in, tg_tensor **out) {
  const tg_tensor *g = in[0], *x = in[1];
  int ndim;
  int64_t sizes[TG_MAX_DIMS];
  if (!tg__check_floating(op, "x", x) || !tg__check_binary_operands(op, "g", g, "x", x) ||
      !tg__broadcast_shapes(op, "g", g->ndim, g->sizes, "x", x->ndim, x->sizes, &ndim, sizes))
    return tg_last_error();
  out[0] = tg_empty(ndim, sizes, (tg_options){x->dtype, x->storage->device, false});
  tg_status st = out[0] ? tg__binary_into(op, kind, 1.0, out[0], g, x) : tg_last_error();
  if (st == TG_OK && (tg_ctx_needs_input_grad(ctx, 0) || tg_ctx_needs_input_grad(ctx, 1)))
    st = tg_ctx_save_for_backward(ctx, 2, in);
  return st;
}

/* f''(x) of gelu's erf form: phi(x) (2 - x^2). */
static tg_tensor *gelu_erf_curvature(const tg_tensor *x) {
  tg_tensor *x2 = tg_mul(x, x);
  tg_tensor *pdf = tg_mul_scalar(tg_exp(tg_mul_scalar(x2, -0.5)), GELU_PDF);
  return tg_mul(pdf, tg_rsub_scalar(x2, 2.0));
}

/* f''(x) of gelu's tanh form: (1 - t^2) (u' - x t u'^2 + 3 beta kappa x^2), with
 * u = beta (x + kappa x^3), u' = beta (1 + 3 kappa x^2), t = tanh(u). */
static tg_tensor *gelu_tanh_curvature(const tg_tensor *x) {
  tg_tensor *x2 = tg_mul(x, x);
  tg_tensor *du = tg_mul_scalar(tg_add_scalar(tg_mul_scalar(x2, 3.0 * GELU_KAPPA), 1.0), GELU_BETA);
  tg_tensor *t =
      tg_tanh(tg_mul_scalar(tg_add(x, tg_mul_scalar(tg_mul(x2, x), GELU_KAPPA)), GELU_BETA));
  tg_tensor *sech2 = tg_rsub_scalar(tg_mul(t, t), 1.0);
  tg_tensor *inner = tg_add(tg_sub(du, tg_mul(tg_mul(x, t), tg_mul(du, du))),
                            tg_mul_scalar(x2, 3.0 * GELU_BETA * GELU_KAPPA));
  return tg_mul(sech2, inner);
}

/* f''(x) of silu: s (1 - s) (2 + x (1 - 2 s)), s = sigmoid(x). */
static tg_tensor *silu_curvature(const tg_tensor *x) {
  tg_tensor *s = tg_sigmoid(x);
  tg_tensor *ds = tg_mul(s, tg_rsub_scalar(s, 1.0));
  return tg_mul(ds, tg_add_scalar(tg_mul(x, tg_rsub_scalar(tg_mul_scalar(s, 2.0), 1.0)), 2.0));
}

/* d(g f'(x)) = gg f'(x) for g (the same op again) and gg g f''(x) for x, each summed to its
 * input's sizes. */
static tg_status
slope_backward(tg_ctx *ctx, tg_tensor *(*again)(const tg_tensor *gg, const tg_tensor *x, int64_t),
               tg_tensor *(*curvature)(const tg_tensor *x), const tg_tensor *const *gg,
               tg_tensor **gi) {
  const tg_tensor *g = tg_ctx_saved(ctx, 0), *x = g ? tg_ctx_saved(ctx, 1) : NULL;
  if (!x) return tg_last_error();
  const int64_t approximate = tg_ctx_int(ctx, 0);
  if (tg_ctx_needs_input_grad(ctx, 0))
    gi[0] = tg_sum_to_size(again(gg[0], x, approximate), tg_ctx_input_ndim(ctx, 0),
                           tg_ctx_input_sizes(ctx, 0));
  if (tg_ctx_needs_input_grad(ctx, 1))
    gi[1] = tg_sum_to_size(tg_mul(tg_mul(gg[0], g), curvature(x)), tg_ctx_input_ndim(ctx, 1),
                           tg_ctx_input_sizes(ctx, 1));
  for (int i = 0; i < 2; i++)
    if (tg_ctx_needs_input_grad(ctx, i) && !gi[i]) return tg_last_error();
  return TG_OK;
}

tg_status tg__fwd_gelu_backward(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  const char *op = "gelu_backward";
  const int64_t approximate = tg_ctx_int(ctx, 0);
  if (!approximate_ok(op, approximate)) return tg_last_error();
  return slope_forward(
      ctx, op, approximate == TG_GELU_TANH ? TG_BINARY_GELU_TANH_BACKWARD : TG_BINARY_GELU_BACKWARD,
      in, out);
}

tg_status tg__bwd_gelu_backward(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  return slope_backward(
      ctx, gelu_backward,
      tg_ctx_int(ctx, 0) == TG_GELU_TANH ? gelu_tanh_curvature : gelu_erf_curvature, g, gi);
}

tg_tensor *tg__silu_backward(const tg_tensor *g, const tg_tensor *x) {
  return tg_apply1(TG__OP(silu_backward), 2, (const tg_tensor *const[]){g, x}, TG__NO_SC);
}

static tg_tensor *silu_again(const tg_tensor *gg, const tg_tensor *x, int64_t unused) {
  (void)unused;
  return tg__silu_backward(gg, x);
}

tg_status tg__fwd_silu_backward(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  return slope_forward(ctx, "silu_backward", TG_BINARY_SILU_BACKWARD, in, out);
}

tg_status tg__bwd_silu_backward(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  return slope_backward(ctx, silu_again, silu_curvature, g, gi);
}

/* ---- clamp ---- */

tg_status tg__fwd_clamp(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  const char *op = "tg_clamp";
  if (!tg__check_floating(op, "x", in[0])) return tg_last_error();
  out[0] = tg__unary_new(op, TG_UNARY_CLAMP, tg_ctx_scalar(ctx, 0), tg_ctx_scalar(ctx, 1), in[0]);
  if (!out[0]) return tg_last_error();
  return tg_ctx_needs_input_grad(ctx, 0) ? tg_ctx_save_for_backward(ctx, 1, in) : TG_OK;
}

/* g strictly inside (lo, hi), 0 elsewhere (PyTorch 2.15's clamp_backward for scalar bounds),
 * a selection so that an inf or NaN g outside stays out; differentiable in g. */
tg_status tg__bwd_clamp(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  const tg_tensor *x = tg_ctx_saved(ctx, 0);
  tg_tensor *inside = x ? tg__unary_new("tg_clamp", TG_UNARY_CLAMP_SLOPE, tg_ctx_scalar(ctx, 0),
                                        tg_ctx_scalar(ctx, 1), x)
                        : NULL;
  tg_tensor *zero = inside ? zero_like_dtype(g[0]) : NULL;
  gi[0] = zero ? tg_where(inside, g[0], zero) : NULL;
  return gi[0] ? TG_OK : tg_last_error();
}

/* An int64 bound as a 0-dim int64 tensor on x's device. */
static tg_tensor *int_bound(const tg_tensor *x, double v) {
  return tg_scalar(v, (tg_options){TG_I64, x->storage->device, false});
}

tg_tensor *tg_clamp(const tg_tensor *x, double min, double max) {
  const char *op = "tg_clamp";
  if (!tg__check_arg(op, "x", x) ||
      !tg__check(!isnan(min) || !isnan(max), TG_ERR_ARGUMENT, op,
                 "min and max are both NaN (no bound): at least one is needed, as in PyTorch"))
    return NULL;
  if (x->dtype == TG_I64) {
    /* Whole bounds keep int64 (as PyTorch's int bounds); any other promotes x to F32. */
    if ((isnan(min) || tg__is_int64_value(min)) && (isnan(max) || tg__is_int64_value(max))) {
      tg_tensor *y = isnan(min) ? (tg_tensor *)x : tg_maximum(x, int_bound(x, min));
      return !y || isnan(max) ? (y == x ? tg_clone(x) : y) : tg_minimum(y, int_bound(x, max));
    }
    if (!(x = tg_to_dtype(x, TG_F32))) return NULL;
  }
  return tg_apply1(TG__OP(clamp), 1, (const tg_tensor *const[]){x}, TG__SC(min, max));
}

/* ---- maximum / minimum's gradient ---- */

tg_tensor *tg__select_grad(const tg_tensor *g, const tg_tensor *loses, const tg_tensor *a,
                           const tg_tensor *b) {
  tg_tensor *zero = zero_like_dtype(g);
  tg_tensor *shared = tg_where(tg_eq(a, b), tg_mul_scalar(g, 0.5), g);
  return zero ? tg_where(loses, zero, shared) : NULL;
}
