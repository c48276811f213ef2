/* tg_logsumexp (issue 25, helper "pointwise"; entry in ops/def/pointwise_extra.def):
 * log(sum(exp(x))) over a list of dims, as PyTorch computes it: shifted by the maximum m
 * (taken as 0 where it is infinite, so a row of -inf gives -inf and one holding +inf gives
 * inf; NaN propagates), m + log(sum(exp(x - m))). Forward from the device drivers (max, sum,
 * exp, log); backward g exp(x - y), the softmax weights, written with tg ops so it is
 * differentiable again. */
#include <math.h>

#include "ops/registry.h"
#include "tensor/check.h"
#include "tensor/tensor_impl.h"
#include "tg/ops.h"

static const char *const api = "tg_logsumexp";

/* x's sizes with the reduced dims (reduced[d]) set to 1 (keepdim) or dropped. */
static int reduced_sizes(const tg_tensor *x, const bool *reduced, bool keepdim, int64_t *sizes) {
  int n = 0;
  for (int d = 0; d < x->ndim; d++)
    if (!reduced[d] || keepdim) sizes[n++] = reduced[d] ? 1 : x->sizes[d];
  return n;
}

/* The reduced dims of a call (ints 1..), as flags over x's dims. */
static void reduced_of(tg_ctx *ctx, bool *reduced) {
  for (int d = 0; d < TG_MAX_DIMS; d++) reduced[d] = false;
  for (int k = 1; k < tg_ctx_num_ints(ctx); k++) reduced[tg_ctx_int(ctx, k)] = true;
}

/* m + log(sum(exp(x - m))) with keepdim sizes; x has elements. */
static tg_tensor *shifted(const tg_tensor *x, const bool *reduced) {
  tg_tensor *m = (tg_tensor *)x;
  for (int d = 0; d < x->ndim && m; d++)
    if (reduced[d] && tg_max_dim(m, d, true, &m, NULL) != TG_OK) return NULL;
  tg_tensor *inf =
      m ? tg_scalar(INFINITY, (tg_options){x->dtype, x->storage->device, false}) : NULL;
  tg_tensor *zero = inf ? tg_zeros_like(inf) : NULL;
  m = zero ? tg_where(tg_eq(tg_abs(m), inf), zero, m) : NULL;
  tg_tensor *s = m ? tg_exp(tg_sub(x, m)) : NULL;
  for (int d = 0; d < x->ndim && s; d++)
    if (reduced[d]) s = tg_sum_dim(s, d, true);
  return s ? tg_add(tg_log(s), m) : NULL;
}

tg_status tg__fwd_logsumexp(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  const tg_tensor *x = in[0];
  for (int k = 1; k < tg_ctx_num_ints(ctx); k++) /* tg_apply may run the op directly */
    if (!tg__check(tg_ctx_int(ctx, k) >= 0 && tg_ctx_int(ctx, k) < x->ndim, TG_ERR_ARGUMENT, api,
                   "dim %lld is out of range for x %s", (long long)tg_ctx_int(ctx, k),
                   tg__sizes_str(x)))
      return tg_last_error();
  if (!tg__check_floating(api, "x", x)) return tg_last_error();
  bool reduced[TG_MAX_DIMS];
  reduced_of(ctx, reduced);
  const bool keepdim = tg_ctx_int(ctx, 0) != 0;
  int64_t sizes[TG_MAX_DIMS];
  const int ndim = reduced_sizes(x, reduced, keepdim, sizes);
  tg_tensor *y;
  if (tg_numel(x) == 0) /* the sum of nothing is 0, its log -inf */
    y = tg_full(ndim, sizes, -INFINITY, (tg_options){x->dtype, x->storage->device, false});
  else if ((y = shifted(x, reduced)) && !keepdim)
    y = tg_contiguous(tg_reshape(y, ndim, sizes));
  if (!y) return tg_last_error();
  out[0] = y;
  if (!tg_ctx_needs_input_grad(ctx, 0)) return TG_OK;
  tg_status st = tg_ctx_save_for_backward(ctx, 1, in);
  return st == TG_OK ? tg_ctx_save_for_backward(ctx, 1, (const tg_tensor *const *)out) : st;
}

/* g exp(x - y), with g and y shaped back to keepdim sizes (they broadcast over x). */
tg_status tg__bwd_logsumexp(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  const tg_tensor *x = tg_ctx_saved(ctx, 0), *y = x ? tg_ctx_saved(ctx, 1) : NULL;
  if (!y) return tg_last_error();
  bool reduced[TG_MAX_DIMS];
  reduced_of(ctx, reduced);
  int64_t sizes[TG_MAX_DIMS];
  const int ndim = reduced_sizes(x, reduced, true, sizes);
  gi[0] = tg_mul(tg_reshape(g[0], ndim, sizes), tg_exp(tg_sub(x, tg_reshape(y, ndim, sizes))));
  return gi[0] ? TG_OK : tg_last_error();
}

tg_tensor *tg_logsumexp(const tg_tensor *x, int n_dims, const int *dims, bool keepdim) {
  if (!tg__check_arg(api, "x", x) ||
      !tg__check(n_dims >= 0 && n_dims <= TG_MAX_DIMS && (n_dims == 0 || dims), TG_ERR_ARGUMENT,
                 api, "dims: n_dims %d with dims %s (0 to %d dims; 0 reduces all)", n_dims,
                 dims ? "set" : "NULL", TG_MAX_DIMS))
    return NULL;
  bool picked[TG_MAX_DIMS] = {false};
  for (int k = 0; k < n_dims; k++) {
    const int d = tg__wrap_dim(api, "dim", dims[k], x->ndim ? x->ndim : 1);
    if (d < 0 || !tg__check(!picked[d], TG_ERR_ARGUMENT, api,
                            "dim %d appears multiple times in the list of dims", d))
      return NULL;
    picked[d] = true;
  }
  int64_t ints[TG_MAX_DIMS + 1] = {keepdim};
  int n_ints = 1;
  for (int d = 0; d < x->ndim; d++)
    if (n_dims == 0 || picked[d]) ints[n_ints++] = d;
  /* int64 is summed in F32, as PyTorch's logsumexp promotes it */
  if (x->dtype == TG_I64 && !(x = tg_to_dtype(x, TG_F32))) return NULL;
  return tg_apply1_ex(TG__OP(logsumexp), 1, (const tg_tensor *const[]){x}, TG__NO_SC, n_ints, ints);
}
