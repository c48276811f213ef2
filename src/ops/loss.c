/* Softmax, log_softmax and the losses built on them (mse_loss, cross_entropy).
 *
 * Forwards run on the backend primitives (max, subtract, exp, sum) and subtract the max
 * along dim first, so large logits do not overflow. Backwards are written with tg ops on
 * the saved output or inputs, so double backward works. */
#include <math.h>
#include <stdlib.h>

#include "ops/backend.h"
#include "ops/op_params.h"
#include "ops/registry.h"
#include "tensor/check.h"
#include "tensor/tensor_impl.h"
#include "tg/ops.h"

/* ---- forward helpers ---- */

static tg_options options_of(const tg_tensor *t, tg_dtype dtype) {
  return (tg_options){dtype, t->storage->device, false};
}

/* t itself, or a [1] view of a 0-dim t: the kernels below reduce over a real dim. */
static tg_tensor *at_least_1d(const tg_tensor *t) {
  return t->ndim > 0 ? (tg_tensor *)t : tg_reshape(t, 1, (const int64_t[]){1});
}

/* x with the max along dim subtracted (into out), and the keepdim-shaped scratch that
 * held the max, for the caller to reuse. x is non-empty. */
static tg_tensor *subtract_max(const tg_backend *be, tg_tensor *out, const tg_tensor *x, int dim) {
  int64_t kept[TG_MAX_DIMS];
  for (int d = 0; d < x->ndim; d++) kept[d] = d == dim ? 1 : x->sizes[d];
  tg_tensor *max = tg_empty(x->ndim, kept, options_of(x, x->dtype));
  tg_tensor *argmax = tg_empty(x->ndim, kept, options_of(x, TG_I64));
  if (!max || !argmax || be->reduce(TG_REDUCE_MAX, max, argmax, x, dim) != TG_OK) return NULL;
  tg_tensor *max_b = tg_expand(max, x->ndim, x->sizes);
  if (!max_b || be->binary(TG_BINARY_SUB, 1.0, out, x, max_b) != TG_OK) return NULL;
  return max;
}

/* out = log_softmax(x) along dim; x non-empty, at least 1-D. */
static tg_status log_softmax_into(const tg_backend *be, tg_tensor *out, const tg_tensor *x,
                                  int dim) {
  tg_tensor *lse = subtract_max(be, out, x, dim);
  tg_tensor *e = lse ? tg_empty(x->ndim, x->sizes, options_of(x, x->dtype)) : NULL;
  if (!e || be->unary(TG_UNARY_EXP, 0, 0, e, out) != TG_OK ||
      be->reduce(TG_REDUCE_SUM, lse, NULL, e, dim) != TG_OK ||
      be->unary(TG_UNARY_LOG, 0, 0, lse, lse) != TG_OK)
    return tg_last_error();
  tg_tensor *lse_b = tg_expand(lse, x->ndim, x->sizes);
  return lse_b ? be->binary(TG_BINARY_SUB, 1.0, out, out, lse_b) : tg_last_error();
}

/* out = softmax(x) along dim; x non-empty, at least 1-D. */
static tg_status softmax_into(const tg_backend *be, tg_tensor *out, const tg_tensor *x, int dim) {
  tg_tensor *sum = subtract_max(be, out, x, dim);
  if (!sum || be->unary(TG_UNARY_EXP, 0, 0, out, out) != TG_OK ||
      be->reduce(TG_REDUCE_SUM, sum, NULL, out, dim) != TG_OK)
    return tg_last_error();
  tg_tensor *sum_b = tg_expand(sum, x->ndim, x->sizes);
  return sum_b ? be->binary(TG_BINARY_DIV, 1.0, out, out, sum_b) : tg_last_error();
}

/* out (0-dim) = scale * sum of the 1-D tensor v; NaN when v is empty (a mean of nothing). */
static tg_status scaled_sum_into(const tg_backend *be, tg_tensor *out, const tg_tensor *v,
                                 double scale) {
  if (v->sizes[0] == 0) return be->fill(out, NAN);
  tg_tensor *out1 = at_least_1d(out);
  if (!out1 || be->reduce(TG_REDUCE_SUM, out1, NULL, v, 0) != TG_OK ||
      be->unary(TG_UNARY_MUL_SCALAR, scale, 0, out1, out1) != TG_OK)
    return tg_last_error();
  return TG_OK;
}

/* ---- log_softmax / softmax ---- */

typedef tg_status (*softmax_kernel)(const tg_backend *, tg_tensor *, const tg_tensor *, int);

static tg_status softmax_forward(const char *op, softmax_kernel kernel, tg_ctx *ctx,
                                 const tg_tensor *x, tg_tensor **out) {
  int dim; /* 0 for a 0-dim x, which the kernel sees as [1] */
  if (!tg__check_floating(op, "x", x) ||
      !tg__param_dim(op, ctx, 0, x->ndim > 0 ? x->ndim : 1, &dim))
    return tg_last_error();
  const tg_backend *be = tg__backend(op, x->storage->device);
  tg_tensor *o = be ? tg_empty(x->ndim, x->sizes, options_of(x, x->dtype)) : NULL;
  if (!o) return tg_last_error();
  if (tg__numel(x->ndim, x->sizes) > 0) {
    tg_tensor *x1 = at_least_1d(x), *o1 = at_least_1d(o);
    if (!x1 || !o1 || kernel(be, o1, x1, dim) != TG_OK) return tg_last_error();
  }
  /* out[0] first: the context then knows o is this op's output and saves an alias that
   * does not keep the node alive through its own output. */
  out[0] = o;
  return tg_ctx_save_for_backward(ctx, 1, (const tg_tensor *const[]){o});
}

/* sum of t along dim, kept as a size-1 dim (t itself when 0-dim: one element). */
static tg_tensor *sum_keepdim(const tg_tensor *t, int dim) {
  return tg_ndim(t) == 0 ? (tg_tensor *)t : tg_sum_dim(t, dim, true);
}

tg_status tg__fwd_log_softmax(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  return softmax_forward("tg_log_softmax", log_softmax_into, ctx, in[0], out);
}

/* d x = g - softmax(x) * sum(g, dim), with softmax(x) = exp(y). */
tg_status tg__bwd_log_softmax(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  tg_tensor *y = tg_ctx_saved(ctx, 0);
  gi[0] = tg_sub(g[0], tg_mul(tg_exp(y), sum_keepdim(g[0], (int)tg_ctx_int(ctx, 0))));
  return gi[0] ? TG_OK : tg_last_error();
}

tg_status tg__fwd_softmax(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  return softmax_forward("tg_softmax", softmax_into, ctx, in[0], out);
}

/* d x = y * (g - sum(g * y, dim)). */
tg_status tg__bwd_softmax(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  tg_tensor *y = tg_ctx_saved(ctx, 0);
  gi[0] = tg_mul(y, tg_sub(g[0], sum_keepdim(tg_mul(g[0], y), (int)tg_ctx_int(ctx, 0))));
  return gi[0] ? TG_OK : tg_last_error();
}

static tg_tensor *softmax_front(const char *op, const tg_op_desc *desc, const tg_tensor *x,
                                int dim) {
  if (!tg__check_arg(op, "x", x) || !tg__check_floating(op, "x", x)) return NULL;
  int d = tg__wrap_dim(op, "dim", dim, x->ndim);
  if (d < 0) return NULL;
  return tg_apply1_ex(desc, TG__IN(x), TG__NO_SC, TG__INTS(d));
}

tg_tensor *tg_log_softmax(const tg_tensor *x, int dim) {
  return softmax_front("tg_log_softmax", TG__OP(log_softmax), x, dim);
}

tg_tensor *tg_softmax(const tg_tensor *x, int dim) {
  return softmax_front("tg_softmax", TG__OP(softmax), x, dim);
}

/* ---- mse_loss ---- */

tg_status tg__fwd_mse_loss(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  static const char *op = "tg_mse_loss";
  const tg_tensor *input = in[0], *target = in[1];
  if (!tg__check_floating(op, "input", input) ||
      !tg__check_alike(op, "target", target, "input", input) ||
      !tg__check_same_sizes(op, "input", input, "target", target))
    return tg_last_error();
  const tg_backend *be = tg__backend(op, input->storage->device);
  int64_t numel = tg__numel(input->ndim, input->sizes);
  tg_tensor *sq = be ? tg_empty(1, &numel, options_of(input, input->dtype)) : NULL;
  tg_tensor *o = sq ? tg_empty(0, NULL, options_of(input, input->dtype)) : NULL;
  /* The squared differences, computed straight into a flat buffer. */
  tg_tensor *sq_view = o ? tg_view(sq, input->ndim, input->sizes) : NULL;
  if (!sq_view || be->binary(TG_BINARY_SUB, 1.0, sq_view, input, target) != TG_OK ||
      be->binary(TG_BINARY_MUL, 1.0, sq, sq, sq) != TG_OK ||
      scaled_sum_into(be, o, sq, 1.0 / (double)numel) != TG_OK ||
      tg_ctx_save_for_backward(ctx, 2, in) != TG_OK)
    return tg_last_error();
  out[0] = o;
  return TG_OK;
}

/* d input = 2 (input - target) g / numel = -d target. */
tg_status tg__bwd_mse_loss(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  tg_tensor *input = tg_ctx_saved(ctx, 0), *target = tg_ctx_saved(ctx, 1);
  double numel = (double)tg__numel(tg_ctx_input_ndim(ctx, 0), tg_ctx_input_sizes(ctx, 0));
  tg_tensor *d = tg_mul(tg_sub(input, target), tg_mul_scalar(g[0], 2.0 / numel));
  if (!d) return tg_last_error();
  if (tg_ctx_needs_input_grad(ctx, 0)) gi[0] = d;
  if (tg_ctx_needs_input_grad(ctx, 1) && !(gi[1] = tg_neg(d))) return tg_last_error();
  return TG_OK;
}

tg_tensor *tg_mse_loss(const tg_tensor *input, const tg_tensor *target) {
  static const char *op = "tg_mse_loss";
  if (!tg__check_arg(op, "input", input) || !tg__check_arg(op, "target", target) ||
      !tg__check_floating(op, "input", input) ||
      !tg__check_alike(op, "target", target, "input", input))
    return NULL;
  return tg_apply1(TG__OP(mse_loss), TG__IN(input, target), TG__NO_SC); /* checks the sizes */
}

/* ---- cross_entropy ---- */

/* The forward checks everything but NULLs and devices (tg_apply is public), the targets'
 * range included, so that the front end need not read them to the host a second time. */
static bool check_cross_entropy(const tg_tensor *logits, const tg_tensor *target) {
  static const char *op = "tg_cross_entropy";
  return tg__check_floating(op, "logits", logits) &&
         tg__check(logits->ndim == 2, TG_ERR_SHAPE, op, "logits must be 2-D [n, c], got %s",
                   tg__sizes_str(logits)) &&
         tg__check(target->dtype == TG_I64, TG_ERR_DTYPE, op,
                   "target is %s; class indices must be int64", tg_dtype_name(target->dtype)) &&
         tg__check(target->ndim == 1 && target->sizes[0] == logits->sizes[0], TG_ERR_SHAPE, op,
                   "target is %s but logits is %s: target needs one class index per row ([%lld])",
                   tg__sizes_str(target), tg__sizes_str(logits), (long long)logits->sizes[0]) &&
         tg__check_indices(op, "target", target, logits->sizes[1], "the class range");
}

tg_status tg__fwd_cross_entropy(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  const tg_tensor *logits = in[0], *target = in[1];
  if (!check_cross_entropy(logits, target)) return tg_last_error();
  const tg_backend *be = tg__backend("tg_cross_entropy", logits->storage->device);
  tg_kernel_fn gather_rows =
      be ? tg__kernel("tg_cross_entropy", "cross_entropy.gather_rows", logits->storage->device)
         : NULL;
  const int64_t n = logits->sizes[0];
  tg_tensor *lsm =
      gather_rows ? tg_empty(2, logits->sizes, options_of(logits, logits->dtype)) : NULL;
  tg_tensor *picked = lsm ? tg_empty(1, &n, options_of(logits, logits->dtype)) : NULL;
  tg_tensor *o = picked ? tg_empty(0, NULL, options_of(logits, logits->dtype)) : NULL;
  if (!o ||
      (n > 0 &&
       (log_softmax_into(be, lsm, logits, 1) != TG_OK ||
        gather_rows(3, (tg_tensor *const[]){picked, lsm, (tg_tensor *)target}) != TG_OK)) ||
      scaled_sum_into(be, o, picked, -1.0 / (double)n) != TG_OK ||
      tg_ctx_save_for_backward(ctx, 2, in) != TG_OK)
    return tg_last_error();
  out[0] = o;
  return TG_OK;
}

/* d logits = (softmax(logits) - one_hot(target)) g / n; softmax is recomputed with the tg
 * op so that double backward sees its dependence on logits. */
tg_status tg__bwd_cross_entropy(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  if (!tg_ctx_needs_input_grad(ctx, 0)) return TG_OK;
  tg_tensor *logits = tg_ctx_saved(ctx, 0), *target = tg_ctx_saved(ctx, 1);
  if (!logits || !target) return tg_last_error();
  const int64_t n = logits->sizes[0];
  tg_kernel_fn scatter_add_rows =
      tg__kernel("tg_cross_entropy", "cross_entropy.scatter_add_rows", logits->storage->device);
  tg_tensor *one_hot =
      scatter_add_rows ? tg_zeros(2, logits->sizes, options_of(logits, logits->dtype)) : NULL;
  tg_tensor *ones = one_hot ? tg_ones(1, &n, options_of(logits, logits->dtype)) : NULL;
  if (!ones || scatter_add_rows(3, (tg_tensor *const[]){one_hot, ones, target}) != TG_OK)
    return tg_last_error();
  gi[0] = tg_mul(tg_sub(tg_softmax(logits, 1), one_hot), tg_mul_scalar(g[0], 1.0 / (double)n));
  return gi[0] ? TG_OK : tg_last_error();
}

tg_tensor *tg_cross_entropy(const tg_tensor *logits, const tg_tensor *target) {
  static const char *op = "tg_cross_entropy";
  if (!tg__check_arg(op, "logits", logits) || !tg__check_arg(op, "target", target) ||
      !tg__check_same_device(op, "target", target, "logits", logits))
    return NULL;
  return tg_apply1(TG__OP(cross_entropy), TG__IN(logits, target), TG__NO_SC); /* checks the rest */
}
