/* Binary pointwise ops with NumPy broadcasting, and their scalar-operand forms. The binary
 * ops and comparisons are generated from their list (ops/def/binary.def): what an op saves
 * and its derivatives sit in its entry; this file holds the shared steps.
 *
 * Saved layout (out-of-place and in-place alike, so both share one backward): b, then a,
 * then the output y, each only when the gradient of an input that needs one reads it. */
#include "ops/broadcast.h"
#include "ops/pointwise_internal.h"
#include "ops/promotion.h"
#include "ops/registry.h"
#include "tg/ops.h"

/* What an entry's gradients read (its saves_a / saves_b fields). */
enum { A = TG__SAVE_A, B = TG__SAVE_B, OUT = TG__SAVE_OUT };

/* The gradient of one input at the output's sizes: from g, the saved a, b, y and alpha. */
typedef const tg_tensor *(*binary_grad_fn)(const tg_tensor *g, const tg_tensor *a,
                                           const tg_tensor *b, const tg_tensor *y, double alpha);

/* ---- forward ---- */

static tg_status binary_forward(const char *op, tg_binary_kind kind, double alpha,
                                const tg_tensor *const *in, tg_tensor **out) {
  const tg_tensor *a = in[0], *b = in[1];
  int ndim;
  int64_t sizes[TG_MAX_DIMS];
  if (!tg__broadcast_shapes(op, "a", a->ndim, a->sizes, "b", b->ndim, b->sizes, &ndim, sizes) ||
      !tg__check_int_scalar(op, "a", a, "alpha", alpha)) /* tg_apply may run the op directly */
    return tg_last_error();
  out[0] = tg_empty(ndim, sizes, (tg_options){a->dtype, a->storage->device, false});
  if (!out[0]) return tg_last_error();
  return tg__binary_into(op, kind, alpha, out[0], a, b);
}

/* out = kind(x; a, b): each scalar op is one kernel kind whose element math is the IEEE
 * operation itself (x + s, s - x, x * s, x / s), so -0, inf and tiny scalars come out as in
 * PyTorch. */
static tg_status scalar_forward(const char *op, tg_unary_kind kind, double a, double b,
                                const tg_tensor *const *in, tg_tensor **out) {
  /* Checked here too, since tg_apply may run the op directly. */
  if (!tg__check_int_scalar(op, "a", in[0], "the scalar", a) ||
      !tg__check_int_scalar(op, "a", in[0], "the scalar", b))
    return tg_last_error();
  out[0] = tg__unary_new(op, kind, a, b, in[0]);
  return out[0] ? TG_OK : tg_last_error();
}

tg_status tg__fwd_add_scalar(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  return scalar_forward("tg_add_scalar", TG_UNARY_AFFINE, 1.0, tg_ctx_scalar(ctx, 0), in, out);
}

tg_status tg__fwd_mul_scalar(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  return scalar_forward("tg_mul_scalar", TG_UNARY_MUL_SCALAR, tg_ctx_scalar(ctx, 0), 0.0, in, out);
}

tg_status tg__fwd_div_scalar(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  return scalar_forward("tg_div_scalar", TG_UNARY_DIV_SCALAR, tg_ctx_scalar(ctx, 0), 0.0, in, out);
}

tg_status tg__fwd_rsub_scalar(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  return scalar_forward("tg_rsub_scalar", TG_UNARY_AFFINE, -1.0, tg_ctx_scalar(ctx, 0), in, out);
}

/* ---- backward ---- */

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

tg_status tg__bwd_add_scalar(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  (void)ctx;
  gi[0] = tg__scoped(tg_retain(g[0]));
  return gi[0] ? TG_OK : tg_last_error();
}

tg_status tg__bwd_mul_scalar(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  gi[0] = tg_mul_scalar(g[0], tg_ctx_scalar(ctx, 0));
  return gi[0] ? TG_OK : tg_last_error();
}

tg_status tg__bwd_div_scalar(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  gi[0] = tg_div_scalar(g[0], tg_ctx_scalar(ctx, 0)); /* g / s, as PyTorch: g * (1/s) overflows */
  return gi[0] ? TG_OK : tg_last_error();
}

tg_status tg__bwd_rsub_scalar(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  (void)ctx;
  gi[0] = tg_neg(g[0]);
  return gi[0] ? TG_OK : tg_last_error();
}

/* ---- front ends ---- */

/* Type promotion (docs/dtypes.md): a and b are cast to the dtype the op computes in, with
 * tg_to_dtype on the tape, so each input's gradient comes back in its own dtype. */
static tg_tensor *binary(const char *op, tg_binary_kind kind, const tg_op_desc *desc,
                         const tg_tensor *a, const tg_tensor *b, int n_scalars,
                         const double *scalars) {
  int ndim;
  int64_t sizes[TG_MAX_DIMS];
  if (!tg__check_arg(op, "a", a) || !tg__check_arg(op, "b", b) ||
      !tg__check_same_device(op, "b", b, "a", a) ||
      !tg__broadcast_shapes(op, "a", a->ndim, a->sizes, "b", b->ndim, b->sizes, &ndim, sizes))
    return NULL;
  tg_dtype dtype = tg__result_type(a, b);
  if (kind == TG_BINARY_DIV && dtype == TG_I64) dtype = TG_F32; /* true division, as PyTorch */
  if (dtype == TG_I64 && n_scalars > 0 &&
      !tg__check(tg__is_int64_value(scalars[0]), TG_ERR_DTYPE, op,
                 "a and b are int64 and alpha = %g is not a whole number within int64 (as in "
                 "PyTorch, int64 operands take an integral alpha); cast first with "
                 "tg_to_dtype(a, TG_F32)",
                 scalars[0]))
    return NULL;
  const tg_tensor *ca = a->dtype == dtype ? a : tg_to_dtype(a, dtype);
  const tg_tensor *cb = !ca ? NULL : b->dtype == dtype ? b : tg_to_dtype(b, dtype);
  if (!cb) return NULL;
  return tg_apply1(desc, 2, (const tg_tensor *const[]){ca, cb}, n_scalars, scalars);
}

tg_tensor *tg_add_scaled(const tg_tensor *a, const tg_tensor *b, double alpha) {
  return binary("tg_add_scaled", TG_BINARY_ADD, TG__OP(add), a, b, TG__SC(alpha));
}

/* The scalar s as the user gave it is checked against an int64 a (a whole number keeps
 * int64, as a Python int does; anything else is refused: docs/dtypes.md); desc runs with
 * the scalar it takes, op_s. */
static tg_tensor *with_scalar(const char *op, const tg_op_desc *desc, const tg_tensor *x, double s,
                              double op_s) {
  if (!tg__check_arg(op, "a", x) || !tg__check_int_scalar(op, "a", x, "s", s)) return NULL;
  return tg_apply1(desc, 1, (const tg_tensor *const[]){x}, TG__SC(op_s));
}

tg_tensor *tg_add_scalar(const tg_tensor *a, double s) {
  return with_scalar("tg_add_scalar", TG__OP(add_scalar), a, s, s);
}

tg_tensor *tg_sub_scalar(const tg_tensor *a, double s) {
  /* x - s as x + -s; for int64, -(-2^63) is not an int64 but wraps to -2^63 itself */
  const bool int_min = a && a->dtype == TG_I64 && s == -0x1p63;
  return with_scalar("tg_sub_scalar", TG__OP(add_scalar), a, s, int_min ? s : -s);
}

tg_tensor *tg_rsub_scalar(const tg_tensor *a, double s) {
  return with_scalar("tg_rsub_scalar", TG__OP(rsub_scalar), a, s, s);
}

tg_tensor *tg_mul_scalar(const tg_tensor *a, double s) {
  return with_scalar("tg_mul_scalar", TG__OP(mul_scalar), a, s, s);
}

tg_tensor *tg_div_scalar(const tg_tensor *a, double s) {
  /* int64 / s is true division in F32, as in PyTorch */
  if (a && a->dtype == TG_I64 && !(a = tg_to_dtype(a, TG_F32))) return NULL;
  return with_scalar("tg_div_scalar", TG__OP(div_scalar), a, s, s);
}

/* ---- the ops of the list ---- */

static double alpha_of(tg_ctx *ctx) {
  return tg_ctx_num_scalars(ctx) > 0 ? tg_ctx_scalar(ctx, 0) : 1.0;
}

/* The saved tensors (TG__SAVE_* bits) this call's backward will read. */
static int needed(tg_ctx *ctx, int saves_a, int saves_b) {
  return (tg_ctx_needs_input_grad(ctx, 0) ? saves_a : 0) |
         (tg_ctx_needs_input_grad(ctx, 1) ? saves_b : 0);
}

static tg_status binary_op_forward(tg_ctx *ctx, const char *op, tg_binary_kind kind, int need,
                                   const tg_tensor *const *in, tg_tensor **out) {
  tg_status st = binary_forward(op, kind, alpha_of(ctx), in, out);
  if (st == TG_OK && need & B) st = tg_ctx_save_for_backward(ctx, 1, &in[1]);
  if (st == TG_OK && need & A) st = tg_ctx_save_for_backward(ctx, 1, &in[0]);
  if (st == TG_OK && need & OUT) st = tg_ctx_save_for_backward(ctx, 1, (const tg_tensor **)out);
  return st;
}

static tg_status binary_op_backward(tg_ctx *ctx, int need, binary_grad_fn grad_a,
                                    binary_grad_fn grad_b, const tg_tensor *g, tg_tensor **gi) {
  int slot = 0;
  const tg_tensor *b = need & B ? tg_ctx_saved(ctx, slot++) : NULL;
  const tg_tensor *a = need & A ? tg_ctx_saved(ctx, slot++) : NULL;
  const tg_tensor *y = need & OUT ? tg_ctx_saved(ctx, slot) : NULL;
  if ((need & B && !b) || (need & A && !a) || (need & OUT && !y)) return tg_last_error();
  double alpha = alpha_of(ctx);
  if (tg_ctx_needs_input_grad(ctx, 0)) gi[0] = to_input(ctx, 0, grad_a(g, a, b, y, alpha));
  if (tg_ctx_needs_input_grad(ctx, 1)) gi[1] = to_input(ctx, 1, grad_b(g, a, b, y, alpha));
  return grads_status(ctx, 2, gi);
}

#define TG__BINARY_GRAD(fn, expr)                                                                  \
  static const tg_tensor *fn(const tg_tensor *g, const tg_tensor *a, const tg_tensor *b,           \
                             const tg_tensor *y, double alpha) {                                   \
    (void)g, (void)a, (void)b, (void)y, (void)alpha;                                               \
    return (expr);                                                                                 \
  }
#define TG_BINARY_KERNEL(KIND, name)
#define TG_BINARY_CMP(KIND, name)
#define TG_BINARY_OP(KIND, name, saves_a, saves_b, grad_a, grad_b)                                 \
  TG__BINARY_GRAD(grad_a_##name, grad_a)                                                           \
  TG__BINARY_GRAD(grad_b_##name, grad_b)                                                           \
  tg_status tg__fwd_##name(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {             \
    return binary_op_forward(ctx, "tg_" #name, TG_BINARY_##KIND, needed(ctx, saves_a, saves_b),    \
                             in, out);                                                             \
  }                                                                                                \
  tg_status tg__bwd_##name(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {               \
    return binary_op_backward(ctx, needed(ctx, saves_a, saves_b), grad_a_##name, grad_b_##name,    \
                              g[0], gi);                                                           \
  }                                                                                                \
  tg_status tg__fwd_##name##_(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {          \
    return tg__binary_inplace_forward(ctx, "tg_" #name "_", TG_BINARY_##KIND, alpha_of(ctx),       \
                                      needed(ctx, saves_a, saves_b), in, out);                     \
  }                                                                                                \
  tg_tensor *tg_##name(const tg_tensor *a, const tg_tensor *b) {                                   \
    return binary("tg_" #name, TG_BINARY_##KIND, TG__OP(name), a, b, TG__SC(1.0));                 \
  }                                                                                                \
  tg_status tg_##name##_(tg_tensor *a, const tg_tensor *b) {                                       \
    return tg__binary_inplace_call("tg_" #name "_", TG_BINARY_##KIND, TG__OP(name##_), a, b,       \
                                   (saves_a)&A, (saves_b)&A, TG__SC(1.0));                         \
  }
#include "ops/def/binary.def"

/* ---- where: a selection (ternary), differentiable in a and b ---- */

/* The sizes cond, a and b broadcast to. */
static bool where_sizes(const char *op, const tg_tensor *cond, const tg_tensor *a,
                        const tg_tensor *b, int *ndim, int64_t *sizes) {
  int ca_ndim;
  int64_t ca_sizes[TG_MAX_DIMS];
  return tg__broadcast_shapes(op, "cond", cond->ndim, cond->sizes, "a", a->ndim, a->sizes, &ca_ndim,
                              ca_sizes) &&
         tg__broadcast_shapes(op, "cond and a", ca_ndim, ca_sizes, "b", b->ndim, b->sizes, ndim,
                              sizes);
}

tg_status tg__fwd_where(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  const char *op = "tg_where";
  const tg_tensor *cond = in[0], *a = in[1], *b = in[2];
  int ndim;
  int64_t sizes[TG_MAX_DIMS];
  if (!where_sizes(op, cond, a, b, &ndim, sizes) || /* tg_apply may run the op directly */
      !tg__check(a->dtype == b->dtype, TG_ERR_DTYPE, op,
                 "a is %s and b is %s (the front end tg_where promotes them to one dtype)",
                 tg_dtype_name(a->dtype), tg_dtype_name(b->dtype)))
    return tg_last_error();
  out[0] = tg_empty(ndim, sizes, (tg_options){a->dtype, a->storage->device, false});
  if (!out[0]) return tg_last_error();
  tg_status st = tg__where_into(op, out[0], cond, a, b);
  if (st == TG_OK && (tg_ctx_needs_input_grad(ctx, 1) || tg_ctx_needs_input_grad(ctx, 2)))
    st = tg_ctx_save_for_backward(ctx, 1, &cond);
  return st;
}

/* grad_a = where(cond, g, 0), grad_b = where(cond, 0, g): selections again, so an inf or
 * NaN in g never leaks into the other branch (as g * mask would), and double backward
 * works. cond gets no gradient. */
tg_status tg__bwd_where(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  const tg_tensor *cond = tg_ctx_saved(ctx, 0);
  if (!cond) return tg_last_error();
  const tg_tensor *zero = tg_scalar(0.0, (tg_options){g[0]->dtype, g[0]->storage->device, false});
  if (!zero) return tg_last_error();
  if (tg_ctx_needs_input_grad(ctx, 1)) gi[1] = to_input(ctx, 1, tg_where(cond, g[0], zero));
  if (tg_ctx_needs_input_grad(ctx, 2)) gi[2] = to_input(ctx, 2, tg_where(cond, zero, g[0]));
  for (int i = 1; i < 3; i++)
    if (tg_ctx_needs_input_grad(ctx, i) && !gi[i]) return tg_last_error();
  return TG_OK;
}

tg_tensor *tg_where(const tg_tensor *cond, const tg_tensor *a, const tg_tensor *b) {
  const char *op = "tg_where";
  int ndim;
  int64_t sizes[TG_MAX_DIMS];
  if (!tg__check_arg(op, "cond", cond) || !tg__check_arg(op, "a", a) ||
      !tg__check_arg(op, "b", b) || !tg__check_same_device(op, "a", a, "cond", cond) ||
      !tg__check_same_device(op, "b", b, "cond", cond) ||
      !where_sizes(op, cond, a, b, &ndim, sizes))
    return NULL;
  const tg_dtype dtype = tg__result_type(a, b);
  const tg_tensor *ca = a->dtype == dtype ? a : tg_to_dtype(a, dtype);
  const tg_tensor *cb = !ca ? NULL : b->dtype == dtype ? b : tg_to_dtype(b, dtype);
  if (!cb) return NULL;
  return tg_apply1(TG__OP(where), 3, (const tg_tensor *const[]){cond, ca, cb}, TG__NO_SC);
}

/* ---- comparisons, from the list (ops/def/binary.def) ---- */

#define TG_BINARY_KERNEL(KIND, name)
#define TG_BINARY_OP(KIND, name, saves_a, saves_b, grad_a, grad_b)
#define TG_BINARY_CMP(KIND, name)                                                                  \
  tg_status tg__fwd_##name(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {             \
    (void)ctx;                                                                                     \
    return binary_forward("tg_" #name, TG_BINARY_##KIND, 1.0, in, out);                            \
  }                                                                                                \
  tg_tensor *tg_##name(const tg_tensor *a, const tg_tensor *b) {                                   \
    return binary("tg_" #name, TG_BINARY_##KIND, TG__OP(name), a, b, TG__NO_SC);                   \
  }
#include "ops/def/binary.def"
