/* Binary pointwise ops with NumPy broadcasting, and their scalar-operand forms. */
#include "ops/broadcast.h"
#include "ops/pointwise_internal.h"
#include "ops/registry.h"
#include "tg/ops.h"

/* ---- forward ---- */

static tg_status binary_forward(const char *op, tg_binary_kind kind, double alpha,
                                const tg_tensor *const *in, tg_tensor **out) {
  const tg_tensor *a = in[0], *b = in[1];
  int ndim;
  int64_t sizes[TG_MAX_DIMS];
  if (!tg__broadcast_shapes(op, "a", a->ndim, a->sizes, "b", b->ndim, b->sizes, &ndim, sizes))
    return tg_last_error();
  out[0] = tg_empty(ndim, sizes, (tg_options){a->dtype, a->storage->device, false});
  if (!out[0]) return tg_last_error();
  return tg__binary_into(op, kind, alpha, out[0], a, b);
}

tg_status tg__fwd_add(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  return binary_forward("tg_add", TG_BINARY_ADD, tg_ctx_scalar(ctx, 0), in, out);
}

tg_status tg__fwd_sub(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  return binary_forward("tg_sub", TG_BINARY_SUB, tg_ctx_scalar(ctx, 0), in, out);
}

tg_status tg__fwd_mul(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  /* b for a's gradient, a for b's. */
  if (tg_ctx_needs_input_grad(ctx, 0) && tg_ctx_save_for_backward(ctx, 1, &in[1]) != TG_OK)
    return tg_last_error();
  if (tg_ctx_needs_input_grad(ctx, 1) && tg_ctx_save_for_backward(ctx, 1, &in[0]) != TG_OK)
    return tg_last_error();
  return binary_forward("tg_mul", TG_BINARY_MUL, 1.0, in, out);
}

tg_status tg__fwd_div(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  tg_status st = binary_forward("tg_div", TG_BINARY_DIV, 1.0, in, out);
  if (st != TG_OK) return st;
  /* d/db (a/b) = -y/b: the output stands in for a, so div_ needs no copy of a either. */
  const tg_tensor *saved[2] = {in[1], out[0]};
  return tg_ctx_save_for_backward(ctx, tg_ctx_needs_input_grad(ctx, 1) ? 2 : 1, saved);
}

static tg_status affine_forward(const char *op, double scale, double shift,
                                const tg_tensor *const *in, tg_tensor **out) {
  out[0] = tg__unary_new(op, TG_UNARY_AFFINE, scale, shift, in[0]);
  return out[0] ? TG_OK : tg_last_error();
}

tg_status tg__fwd_add_scalar(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  return affine_forward("tg_add_scalar", 1.0, tg_ctx_scalar(ctx, 0), in, out);
}

tg_status tg__fwd_mul_scalar(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  return affine_forward("tg_mul_scalar", tg_ctx_scalar(ctx, 0), 0.0, in, out);
}

tg_status tg__fwd_rsub_scalar(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  return affine_forward("tg_rsub_scalar", -1.0, tg_ctx_scalar(ctx, 0), in, out);
}

/* ---- backward (shared with the in-place forms, which have the same inputs) ---- */

/* g summed down to input i's sizes (undoing its broadcast). */
static tg_tensor *to_input(tg_ctx *ctx, int i, const tg_tensor *g) {
  return tg_sum_to_size(g, tg_ctx_input_ndim(ctx, i), tg_ctx_input_sizes(ctx, i));
}

/* TG_OK when every gradient asked for was made. */
static tg_status grads_status(tg_ctx *ctx, int n, tg_tensor **gi) {
  for (int i = 0; i < n; i++)
    if (tg_ctx_needs_input_grad(ctx, i) && !gi[i]) return tg_last_error();
  return TG_OK;
}

static tg_status add_sub_backward(tg_ctx *ctx, double b_scale, const tg_tensor *g, tg_tensor **gi) {
  if (tg_ctx_needs_input_grad(ctx, 0)) gi[0] = to_input(ctx, 0, g);
  if (tg_ctx_needs_input_grad(ctx, 1))
    gi[1] = to_input(ctx, 1, b_scale == 1.0 ? g : tg_mul_scalar(g, b_scale));
  return grads_status(ctx, 2, gi);
}

tg_status tg__bwd_add(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  return add_sub_backward(ctx, tg_ctx_scalar(ctx, 0), g[0], gi);
}

tg_status tg__bwd_sub(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  return add_sub_backward(ctx, -tg_ctx_scalar(ctx, 0), g[0], gi);
}

/* mul and mul_ save b first when a needs its gradient, then a (or a's old value). */
tg_status tg__bwd_mul(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  int next = 0;
  if (tg_ctx_needs_input_grad(ctx, 0))
    gi[0] = to_input(ctx, 0, tg_mul(g[0], tg_ctx_saved(ctx, next++)));
  if (tg_ctx_needs_input_grad(ctx, 1))
    gi[1] = to_input(ctx, 1, tg_mul(g[0], tg_ctx_saved(ctx, next)));
  return grads_status(ctx, 2, gi);
}

/* Saved: b, then the output y when b needs its gradient. */
tg_status tg__bwd_div(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  tg_tensor *b = tg_ctx_saved(ctx, 0);
  if (!b) return tg_last_error();
  tg_tensor *g_over_b = tg_div(g[0], b);
  if (tg_ctx_needs_input_grad(ctx, 0)) gi[0] = to_input(ctx, 0, g_over_b);
  if (tg_ctx_needs_input_grad(ctx, 1))
    gi[1] = to_input(ctx, 1, tg_neg(tg_mul(g_over_b, tg_ctx_saved(ctx, 1))));
  return grads_status(ctx, 2, gi);
}

tg_status tg__bwd_add_scalar(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  (void)ctx;
  gi[0] = tg__scoped(tg_retain(g[0]));
  return gi[0] ? TG_OK : tg_last_error();
}

tg_status tg__bwd_mul_scalar(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  gi[0] = tg_mul_scalar(g[0], tg_ctx_scalar(ctx, 0));
  return gi[0] ? TG_OK : tg_last_error();
}

tg_status tg__bwd_rsub_scalar(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  (void)ctx;
  gi[0] = tg_neg(g[0]);
  return gi[0] ? TG_OK : tg_last_error();
}

/* ---- front ends ---- */

static tg_tensor *binary(const char *op, const tg_op_desc *desc, const tg_tensor *a,
                         const tg_tensor *b, int n_scalars, const double *scalars) {
  int ndim;
  int64_t sizes[TG_MAX_DIMS];
  if (!tg__check_binary_operands(op, "a", a, "b", b) ||
      !tg__broadcast_shapes(op, "a", a->ndim, a->sizes, "b", b->ndim, b->sizes, &ndim, sizes))
    return NULL;
  return tg_apply1(desc, 2, (const tg_tensor *const[]){a, b}, n_scalars, scalars);
}

tg_tensor *tg_add(const tg_tensor *a, const tg_tensor *b) {
  return binary("tg_add", TG__OP(add), a, b, TG__SC(1.0));
}

tg_tensor *tg_add_scaled(const tg_tensor *a, const tg_tensor *b, double alpha) {
  return binary("tg_add_scaled", TG__OP(add), a, b, TG__SC(alpha));
}

tg_tensor *tg_sub(const tg_tensor *a, const tg_tensor *b) {
  return binary("tg_sub", TG__OP(sub), a, b, TG__SC(1.0));
}

tg_tensor *tg_mul(const tg_tensor *a, const tg_tensor *b) {
  return binary("tg_mul", TG__OP(mul), a, b, TG__NO_SC);
}

tg_tensor *tg_div(const tg_tensor *a, const tg_tensor *b) {
  return binary("tg_div", TG__OP(div), a, b, TG__NO_SC);
}

static tg_tensor *with_scalar(const char *op, const tg_op_desc *desc, const tg_tensor *x,
                              double s) {
  if (!tg__check_arg(op, "a", x) || !tg__check_floating(op, "a", x)) return NULL;
  return tg_apply1(desc, 1, (const tg_tensor *const[]){x}, TG__SC(s));
}

tg_tensor *tg_add_scalar(const tg_tensor *a, double s) {
  return with_scalar("tg_add_scalar", TG__OP(add_scalar), a, s);
}

tg_tensor *tg_sub_scalar(const tg_tensor *a, double s) {
  return with_scalar("tg_sub_scalar", TG__OP(add_scalar), a, -s);
}

tg_tensor *tg_rsub_scalar(const tg_tensor *a, double s) {
  return with_scalar("tg_rsub_scalar", TG__OP(rsub_scalar), a, s);
}

tg_tensor *tg_mul_scalar(const tg_tensor *a, double s) {
  return with_scalar("tg_mul_scalar", TG__OP(mul_scalar), a, s);
}

tg_tensor *tg_div_scalar(const tg_tensor *a, double s) {
  return with_scalar("tg_div_scalar", TG__OP(mul_scalar), a, 1.0 / s);
}

/* ---- comparisons, from the list (ops/def/binary.def) ---- */

#define TG_BINARY_KERNEL(KIND, name)
#define TG_BINARY_CMP(KIND, name)                                                                  \
  tg_status tg__fwd_##name(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {             \
    (void)ctx;                                                                                     \
    return binary_forward("tg_" #name, TG_BINARY_##KIND, 1.0, in, out);                            \
  }                                                                                                \
  tg_tensor *tg_##name(const tg_tensor *a, const tg_tensor *b) {                                   \
    return binary("tg_" #name, TG__OP(name), a, b, TG__NO_SC);                                     \
  }
#include "ops/def/binary.def"
