/* Reductions: sum, mean and max over all elements or one dim, and sum_to_size (the
 * backward of broadcasting). Backward formulas expand the gradient back with stride-0
 * views, so they cost no copy and stay differentiable. */
#include <stdlib.h>

#include "ops/broadcast.h"
#include "ops/pointwise_internal.h"
#include "ops/registry.h"
#include "tg/ops.h"

/* ---- kernels on whole tensors ---- */

static tg_options options_of(const tg_tensor *x, tg_dtype dtype) {
  return (tg_options){dtype, x->storage->device, false};
}

/* A scope-owned tensor over contiguous k's elements with other sizes of the same numel. */
static tg_tensor *reshaped(const tg_tensor *k, int ndim, const int64_t *sizes) {
  return tg__scoped(tg__tensor_new(k->storage, k->offset, ndim, sizes, NULL, k->dtype));
}

/* x as one dense 1-D run if its elements fill a block of memory in some order (contiguous,
 * transposed, permuted): *flat is a new reference, or NULL when x is not dense; the status
 * says whether the header could be allocated, so "not dense" and "out of memory" differ. */
static tg_status dense_flat(const tg_tensor *x, tg_tensor **flat) {
  *flat = NULL;
  int order[TG_MAX_DIMS], n = 0;
  for (int d = 0; d < x->ndim; d++)
    if (x->sizes[d] != 1) order[n++] = d;
  for (int i = 1; i < n; i++) /* insertion sort by stride, largest first */
    for (int j = i; j > 0 && x->strides[order[j]] > x->strides[order[j - 1]]; j--) {
      int tmp = order[j];
      order[j] = order[j - 1];
      order[j - 1] = tmp;
    }
  int64_t expect = 1;
  for (int i = n - 1; i >= 0; i--) {
    if (x->strides[order[i]] != expect) return TG_OK; /* not dense: *flat stays NULL */
    expect *= x->sizes[order[i]];
  }
  int64_t numel = tg__numel(x->ndim, x->sizes);
  *flat = tg__tensor_new(x->storage, x->offset, 1, &numel, (const int64_t[]){1}, x->dtype);
  return *flat ? TG_OK : tg_last_error();
}

/* Sum of x over the dims flagged in reduce, in keepdim form (x's ndim, reduced dims of
 * size 1): a new contiguous scope-owned tensor. */
static tg_tensor *sum_keepdim(const char *op, const tg_tensor *x, const bool *reduce) {
  const tg_backend *be = tg__backend(op, x->storage->device);
  if (!be) return NULL;
  int64_t sizes[TG_MAX_DIMS];
  bool all = true;
  for (int d = 0; d < x->ndim; d++) {
    sizes[d] = reduce[d] ? 1 : x->sizes[d];
    all &= reduce[d];
  }
  tg_tensor *flat = NULL;
  /* Out of memory is an error, not a reason to take the other path (which rounds differently). */
  if (all && x->ndim > 0 && dense_flat(x, &flat) != TG_OK) return NULL;
  if (flat) { /* one pass over all elements: a single accumulation, the most accurate */
    tg_tensor *out = tg_empty(1, (const int64_t[]){1}, options_of(x, x->dtype));
    tg_status st = out ? be->sum_dim(out, flat, 0) : tg_last_error();
    tg_release(flat);
    return st == TG_OK ? reshaped(out, x->ndim, sizes) : NULL;
  }
  const tg_tensor *cur = x;
  int64_t cur_sizes[TG_MAX_DIMS];
  for (int d = 0; d < x->ndim; d++) cur_sizes[d] = x->sizes[d];
  for (int d = x->ndim - 1; d >= 0; d--) {
    if (!reduce[d] || x->sizes[d] == 1) continue;
    cur_sizes[d] = 1;
    tg_tensor *next = tg_empty(x->ndim, cur_sizes, options_of(x, x->dtype));
    if (!next || be->sum_dim(next, cur, d) != TG_OK) return NULL;
    cur = next;
  }
  if (cur != x) return (tg_tensor *)cur;
  tg_tensor *copy = tg_empty(x->ndim, sizes, options_of(x, x->dtype)); /* nothing to reduce */
  return copy && be->copy(copy, x) == TG_OK ? copy : NULL;
}

/* Scales t in place by s (t is a fresh result of this op). */
static tg_status scale_inplace(const char *op, tg_tensor *t, double s) {
  return tg__unary_into(op, TG_UNARY_AFFINE, s, 0.0, t, t);
}

/* Sizes of x without dim (keepdim false) or with it set to 1. */
static int reduced_sizes(const tg_tensor *x, int dim, bool keepdim, int64_t *sizes) {
  int n = 0;
  for (int d = 0; d < x->ndim; d++)
    if (d != dim)
      sizes[n++] = x->sizes[d];
    else if (keepdim)
      sizes[n++] = 1;
  return n;
}

/* sum over one dim (a 0-dim x has a single dim of size 1), shaped as the op returns it. */
static tg_tensor *sum_one_dim(const char *op, const tg_tensor *x, int dim, bool keepdim) {
  bool reduce[TG_MAX_DIMS] = {false};
  if (x->ndim > 0) reduce[dim] = true;
  tg_tensor *k = sum_keepdim(op, x, reduce);
  if (!k || keepdim || x->ndim == 0) return k;
  int64_t sizes[TG_MAX_DIMS];
  return reshaped(k, reduced_sizes(x, dim, false, sizes), sizes);
}

static tg_tensor *sum_all(const char *op, const tg_tensor *x) {
  bool reduce[TG_MAX_DIMS];
  for (int d = 0; d < TG_MAX_DIMS; d++) reduce[d] = true;
  tg_tensor *k = sum_keepdim(op, x, reduce);
  return k ? reshaped(k, 0, (const int64_t[]){1}) : NULL;
}

/* ---- backward helpers ---- */

/* g (the gradient of a reduction over dim, keepdim or not) expanded to input 0's sizes. */
static tg_tensor *expand_back(tg_ctx *ctx, const tg_tensor *g, int dim, bool keepdim) {
  int ndim = tg_ctx_input_ndim(ctx, 0);
  const int64_t *sizes = tg_ctx_input_sizes(ctx, 0);
  const tg_tensor *k = keepdim || dim < 0 || ndim == 0 ? g : tg_unsqueeze(g, dim);
  return tg_expand(k, ndim, sizes);
}

static int64_t input_numel(tg_ctx *ctx) {
  return tg__numel(tg_ctx_input_ndim(ctx, 0), tg_ctx_input_sizes(ctx, 0));
}

static int64_t input_dim_size(tg_ctx *ctx, int dim) {
  return tg_ctx_input_ndim(ctx, 0) == 0 ? 1 : tg_ctx_input_sizes(ctx, 0)[dim];
}

#define RETURN_GRAD(expr)                                                                          \
  do {                                                                                             \
    gi[0] = (expr);                                                                                \
    return gi[0] ? TG_OK : tg_last_error();                                                        \
  } while (0)

/* ---- sum / mean ---- */

tg_status tg__fwd_sum(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  (void)ctx;
  out[0] = sum_all("tg_sum", in[0]);
  return out[0] ? TG_OK : tg_last_error();
}

tg_status tg__bwd_sum(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  RETURN_GRAD(expand_back(ctx, g[0], -1, true));
}

tg_status tg__fwd_mean(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  (void)ctx;
  out[0] = sum_all("tg_mean", in[0]);
  if (!out[0]) return tg_last_error();
  return scale_inplace("tg_mean", out[0], 1.0 / (double)tg__numel(in[0]->ndim, in[0]->sizes));
}

tg_status tg__bwd_mean(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  RETURN_GRAD(expand_back(ctx, tg_mul_scalar(g[0], 1.0 / (double)input_numel(ctx)), -1, true));
}

tg_status tg__fwd_sum_dim(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  out[0] = sum_one_dim("tg_sum_dim", in[0], (int)tg_ctx_int(ctx, 0), tg_ctx_int(ctx, 1) != 0);
  return out[0] ? TG_OK : tg_last_error();
}

tg_status tg__bwd_sum_dim(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  RETURN_GRAD(expand_back(ctx, g[0], (int)tg_ctx_int(ctx, 0), tg_ctx_int(ctx, 1) != 0));
}

tg_status tg__fwd_mean_dim(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  int dim = (int)tg_ctx_int(ctx, 0);
  out[0] = sum_one_dim("tg_mean_dim", in[0], dim, tg_ctx_int(ctx, 1) != 0);
  if (!out[0]) return tg_last_error();
  int64_t n = in[0]->ndim == 0 ? 1 : in[0]->sizes[dim];
  return scale_inplace("tg_mean_dim", out[0], 1.0 / (double)n);
}

tg_status tg__bwd_mean_dim(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  int dim = (int)tg_ctx_int(ctx, 0);
  tg_tensor *scaled = tg_mul_scalar(g[0], 1.0 / (double)input_dim_size(ctx, dim));
  RETURN_GRAD(expand_back(ctx, scaled, dim, tg_ctx_int(ctx, 1) != 0));
}

/* ---- sum_to_size ---- */

tg_status tg__fwd_sum_to_size(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  const tg_tensor *x = in[0];
  int ndim = tg_ctx_num_ints(ctx), lead = x->ndim - ndim;
  int64_t sizes[TG_MAX_DIMS];
  bool reduce[TG_MAX_DIMS];
  for (int d = 0; d < ndim; d++) sizes[d] = tg_ctx_int(ctx, d);
  for (int d = 0; d < x->ndim; d++) reduce[d] = d < lead || sizes[d - lead] == 1;
  tg_tensor *k = sum_keepdim("tg_sum_to_size", x, reduce);
  out[0] = k ? reshaped(k, ndim, sizes) : NULL;
  return out[0] ? TG_OK : tg_last_error();
}

tg_status tg__bwd_sum_to_size(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  RETURN_GRAD(expand_back(ctx, g[0], -1, true));
}

/* ---- max ---- */

/* Where x equals its max, as 1/count (the gradient is shared among ties, as in PyTorch);
 * a constant of x's sizes. y is the 0-dim max. */
static tg_tensor *max_share_mask(const tg_tensor *x, const tg_tensor *y) {
  tg_tensor *mask = tg_empty(x->ndim, x->sizes, options_of(x, x->dtype));
  if (!mask || tg__binary_into("tg_max", TG_BINARY_EQ, 1.0, mask, x, y) != TG_OK) return NULL;
  double count;
  tg_tensor *total = sum_all("tg_max", mask);
  if (!total || tg_item(total, &count) != TG_OK) return NULL;
  if (count > 0 && scale_inplace("tg_max", mask, 1.0 / count) != TG_OK) return NULL;
  return mask;
}

tg_status tg__fwd_max(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  const tg_tensor *x = in[0];
  const tg_backend *be = tg__backend("tg_max", x->storage->device);
  if (!be) return tg_last_error();
  tg_tensor *c = tg_contiguous(x);
  int64_t numel = tg__numel(x->ndim, x->sizes), one = 1;
  tg_tensor *flat = c ? reshaped(c, 1, &numel) : NULL;
  tg_tensor *values = tg_empty(1, &one, options_of(x, x->dtype));
  tg_tensor *indices = tg_empty(1, &one, options_of(x, TG_I64));
  if (!flat || !values || !indices || be->max_dim(values, indices, flat, 0) != TG_OK)
    return tg_last_error();
  out[0] = reshaped(values, 0, &one);
  if (!out[0]) return tg_last_error();
  if (!tg_ctx_needs_input_grad(ctx, 0)) return TG_OK;
  tg_tensor *mask = max_share_mask(x, out[0]);
  return mask ? tg_ctx_save_for_backward(ctx, 1, (const tg_tensor *const[]){mask})
              : tg_last_error();
}

tg_status tg__bwd_max(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  RETURN_GRAD(tg_mul(expand_back(ctx, g[0], -1, true), tg_ctx_saved(ctx, 0)));
}

/* One-hot of indices (keepdim form) along dim of x's sizes, in x's dtype: where the
 * gradient of each max goes. A constant, so the backward stays differentiable. */
static tg_tensor *argmax_one_hot(const tg_tensor *x, const tg_tensor *indices, int dim) {
  const tg_backend *be = tg__backend("tg_max_dim", x->storage->device);
  tg_tensor *index_f = be ? tg_empty(indices->ndim, indices->sizes, options_of(x, x->dtype)) : NULL;
  if (!index_f || be->copy(index_f, indices) != TG_OK) return NULL;
  int64_t along[TG_MAX_DIMS];
  for (int d = 0; d < x->ndim; d++) along[d] = d == dim ? x->sizes[d] : 1;
  tg_tensor *positions = tg_arange(0, (double)x->sizes[dim], 1, options_of(x, x->dtype));
  tg_tensor *positions_along = positions ? reshaped(positions, x->ndim, along) : NULL;
  tg_tensor *hot = tg_empty(x->ndim, x->sizes, options_of(x, x->dtype));
  if (!positions_along || !hot ||
      tg__binary_into("tg_max_dim", TG_BINARY_EQ, 1.0, hot, positions_along, index_f) != TG_OK)
    return NULL;
  return hot;
}

tg_status tg__fwd_max_dim(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  const tg_tensor *x = in[0];
  int dim = (int)tg_ctx_int(ctx, 0);
  bool keepdim = tg_ctx_int(ctx, 1) != 0;
  const tg_backend *be = tg__backend("tg_max_dim", x->storage->device);
  if (!be) return tg_last_error();
  if (x->ndim == 0) { /* one element along a single implicit dim */
    out[0] = tg_clone(x);
    out[1] = tg_zeros(0, x->sizes, options_of(x, TG_I64));
  } else {
    int64_t keep[TG_MAX_DIMS], sizes[TG_MAX_DIMS];
    reduced_sizes(x, dim, true, keep);
    int n = reduced_sizes(x, dim, keepdim, sizes);
    tg_tensor *values = tg_empty(x->ndim, keep, options_of(x, x->dtype));
    tg_tensor *indices = tg_empty(x->ndim, keep, options_of(x, TG_I64));
    if (!values || !indices || be->max_dim(values, indices, x, dim) != TG_OK)
      return tg_last_error();
    out[0] = keepdim ? values : reshaped(values, n, sizes);
    out[1] = keepdim ? indices : reshaped(indices, n, sizes);
    if (out[0] && out[1] && tg_ctx_needs_input_grad(ctx, 0)) {
      tg_tensor *hot = argmax_one_hot(x, indices, dim);
      if (!hot || tg_ctx_save_for_backward(ctx, 1, (const tg_tensor *const[]){hot}) != TG_OK)
        return tg_last_error();
    }
  }
  if (!out[0] || !out[1]) return tg_last_error();
  return tg_ctx_mark_non_differentiable(ctx, out[1]);
}

tg_status tg__bwd_max_dim(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  int dim = (int)tg_ctx_int(ctx, 0);
  if (tg_ctx_input_ndim(ctx, 0) == 0) RETURN_GRAD(tg__scoped(tg_retain(g[0])));
  tg_tensor *spread = expand_back(ctx, g[0], dim, tg_ctx_int(ctx, 1) != 0);
  RETURN_GRAD(tg_mul(spread, tg_ctx_saved(ctx, 0)));
}

/* ---- front ends ---- */

static bool check_input(const char *op, const tg_tensor *x) {
  return tg__check_arg(op, "x", x) && tg__check_floating(op, "x", x);
}

tg_tensor *tg_sum(const tg_tensor *x) {
  if (!check_input("tg_sum", x)) return NULL;
  return tg_apply1(TG__OP(sum), 1, (const tg_tensor *const[]){x}, TG__NO_SC);
}

tg_tensor *tg_mean(const tg_tensor *x) {
  if (!check_input("tg_mean", x)) return NULL;
  return tg_apply1(TG__OP(mean), 1, (const tg_tensor *const[]){x}, TG__NO_SC);
}

static tg_tensor *reduce_dim(const char *op, const tg_op_desc *desc, const tg_tensor *x, int dim,
                             bool keepdim) {
  if (!check_input(op, x)) return NULL;
  int d = tg__wrap_dim(op, "dim", dim, x->ndim);
  if (d < 0) return NULL;
  return tg_apply1_ex(desc, 1, (const tg_tensor *const[]){x}, TG__NO_SC, TG__INTS(d, keepdim));
}

tg_tensor *tg_sum_dim(const tg_tensor *x, int dim, bool keepdim) {
  return reduce_dim("tg_sum_dim", TG__OP(sum_dim), x, dim, keepdim);
}

tg_tensor *tg_mean_dim(const tg_tensor *x, int dim, bool keepdim) {
  return reduce_dim("tg_mean_dim", TG__OP(mean_dim), x, dim, keepdim);
}

tg_tensor *tg_max(const tg_tensor *x) {
  if (!check_input("tg_max", x)) return NULL;
  if (tg__numel(x->ndim, x->sizes) == 0) {
    char a[160];
    tg_set_error(TG_ERR_SHAPE, "tg_max: x is %s: the max of no elements is undefined",
                 tg_format_sizes(a, sizeof a, x->ndim, x->sizes));
    return NULL;
  }
  return tg_apply1(TG__OP(max), 1, (const tg_tensor *const[]){x}, TG__NO_SC);
}

tg_status tg_max_dim(const tg_tensor *x, int dim, bool keepdim, tg_tensor **values,
                     tg_tensor **indices) {
  if (values) *values = NULL;
  if (indices) *indices = NULL;
  if (!check_input("tg_max_dim", x)) return tg_last_error();
  int d = tg__wrap_dim("tg_max_dim", "dim", dim, x->ndim);
  if (d < 0) return tg_last_error();
  if (x->ndim > 0 && x->sizes[d] == 0) {
    char a[160];
    return tg_set_error(TG_ERR_SHAPE,
                        "tg_max_dim: x is %s: the max over dim %d of size 0 is undefined",
                        tg_format_sizes(a, sizeof a, x->ndim, x->sizes), d);
  }
  tg_tensor *out[2];
  tg_status st = tg_apply_ex(TG__OP(max_dim), 1, (const tg_tensor *const[]){x}, TG__NO_SC,
                             TG__INTS(d, keepdim), 2, out);
  if (st != TG_OK) return st;
  /* Both results are scope-owned; the one the caller did not ask for goes with its scope. */
  if (values) *values = out[0];
  if (indices) *indices = out[1];
  return TG_OK;
}

tg_tensor *tg_sum_to_size(const tg_tensor *x, int ndim, const int64_t *sizes) {
  if (!check_input("tg_sum_to_size", x)) return NULL;
  if (ndim < 0 || ndim > TG_MAX_DIMS || (ndim > 0 && !sizes)) {
    tg_set_error(TG_ERR_SHAPE, "tg_sum_to_size: ndim %d is outside 0..%d", ndim, TG_MAX_DIMS);
    return NULL;
  }
  if (!tg__check_broadcasts_to("tg_sum_to_size", "sizes", ndim, sizes, "x", x->ndim, x->sizes))
    return NULL;
  bool same = ndim == x->ndim;
  for (int d = 0; same && d < ndim; d++) same = sizes[d] == x->sizes[d];
  if (same) return tg__scoped(tg_retain(x)); /* nothing to sum, as in PyTorch */
  return tg_apply1_ex(TG__OP(sum_to_size), 1, (const tg_tensor *const[]){x}, TG__NO_SC, ndim,
                      sizes);
}
