/* Reductions: the ops of the family's list (ops/def/reduction.def: sum, mean, max, min),
 * each over all elements (tg_<name>) or one dim (tg_<name>_dim), generated here from the
 * shared steps below; and sum_to_size (the backward of broadcasting). Backward formulas expand the
 * gradient back with stride-0 views, so they cost no copy and stay differentiable. */
#include <stdlib.h>

#include "ops/broadcast.h"
#include "ops/op_params.h"
#include "ops/pointwise_internal.h"
#include "ops/registry.h"
#include "tensor/check.h"
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
    tg_status st = out ? be->reduce(TG_REDUCE_SUM, out, NULL, flat, 0) : tg_last_error();
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
    if (!next || be->reduce(TG_REDUCE_SUM, next, NULL, cur, d) != TG_OK) return NULL;
    cur = next;
  }
  if (cur != x) return (tg_tensor *)cur;
  tg_tensor *copy = tg_empty(x->ndim, sizes, options_of(x, x->dtype)); /* nothing to reduce */
  return copy && be->copy(copy, x) == TG_OK ? copy : NULL;
}

/* Scales t in place by s (t is a fresh result of this op). */
static tg_status scale_inplace(const char *op, tg_tensor *t, double s) {
  return tg__unary_into(op, TG_UNARY_MUL_SCALAR, s, 0.0, t, t);
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

/* ---- sum_to_size ---- */

tg_status tg__fwd_sum_to_size(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  const tg_tensor *x = in[0];
  int ndim;
  int64_t sizes[TG_MAX_DIMS];
  if (!tg__param_sizes("tg_sum_to_size", ctx, 0, &ndim, sizes) ||
      !tg__check_broadcasts_to("tg_sum_to_size", "sizes", ndim, sizes, "x", x->ndim, x->sizes))
    return tg_last_error();
  int lead = x->ndim - ndim;
  bool reduce[TG_MAX_DIMS];
  for (int d = 0; d < x->ndim; d++) reduce[d] = d < lead || sizes[d - lead] == 1;
  tg_tensor *k = sum_keepdim("tg_sum_to_size", x, reduce);
  out[0] = k ? reshaped(k, ndim, sizes) : NULL;
  return out[0] ? TG_OK : tg_last_error();
}

tg_status tg__bwd_sum_to_size(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  RETURN_GRAD(expand_back(ctx, g[0], -1, true));
}

/* ---- front ends ---- */

/* x is non-NULL; any dtype (sum, max, min and sum_to_size take int64: docs/dtypes.md). */
static bool check_input(const char *op, const tg_tensor *x) { return tg__check_arg(op, "x", x); }

/* A mean of int64 is refused, as in PyTorch: the message names the cast to write. */
static bool check_averageable(const char *op, const tg_tensor *x) {
  return tg__check(tg_dtype_is_floating(x->dtype), TG_ERR_DTYPE, op,
                   "x is int64: the mean takes float32 or float64 (as in PyTorch); cast first "
                   "with tg_to_dtype(x, TG_F32)");
}

static tg_tensor *reduce_dim(const char *op, const tg_op_desc *desc, const tg_tensor *x, int dim,
                             bool keepdim, bool takes_int) {
  if (!check_input(op, x) || (!takes_int && !check_averageable(op, x))) return NULL;
  int d = tg__wrap_dim(op, "dim", dim, x->ndim);
  if (d < 0) return NULL;
  return tg_apply1_ex(desc, 1, (const tg_tensor *const[]){x}, TG__NO_SC, TG__INTS(d, keepdim));
}

/* A SELECT op's input: checked, and not empty (the max of nothing is undefined). */
static bool select_input_ok(const char *api, const char *what, const tg_tensor *x) {
  if (!check_input(api, x)) return false;
  return tg__check(tg__numel(x->ndim, x->sizes) != 0, TG_ERR_SHAPE, api,
                   "x is %s: the %s of no elements is undefined", tg__sizes_str(x), what);
}

static tg_status select_dim(const char *api, const char *what, const tg_op_desc *desc,
                            const tg_tensor *x, int dim, bool keepdim, tg_tensor **values,
                            tg_tensor **indices) {
  if (values) *values = NULL;
  if (indices) *indices = NULL;
  if (!check_input(api, x)) return tg_last_error();
  int d = tg__wrap_dim(api, "dim", dim, x->ndim);
  if (d < 0) return tg_last_error();
  if (!tg__check(x->ndim == 0 || x->sizes[d] != 0, TG_ERR_SHAPE, api,
                 "x is %s: the %s over dim %d of size 0 is undefined", tg__sizes_str(x), what, d))
    return tg_last_error();
  tg_tensor *out[2];
  tg_status st =
      tg_apply_ex(desc, 1, (const tg_tensor *const[]){x}, TG__NO_SC, TG__INTS(d, keepdim), 2, out);
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
  if (tg__dims_equal(ndim, sizes, x->ndim, x->sizes))
    return tg__scoped(tg_retain(x)); /* nothing to sum, as in PyTorch */
  return tg_apply1_ex(TG__OP(sum_to_size), 1, (const tg_tensor *const[]){x}, TG__NO_SC, ndim,
                      sizes);
}

/* ---- the family's shared steps (the ops are generated from them below) ---- */

/* What a backward formula of the list reads: spread(r, t) expands t, shaped like the
 * values, back to x's sizes (dim -1: a reduction over all elements). */
typedef struct reduce_site {
  tg_ctx *ctx;
  int dim;
  bool keepdim;
} reduce_site;

static tg_tensor *spread(const reduce_site *r, const tg_tensor *t) {
  return expand_back(r->ctx, t, r->dim, r->keepdim);
}

/* A SUM kind over all elements, times scale: a 0-dim result. */
static tg_status fwd_sum_all(const char *api, const tg_tensor *x, double scale, tg_tensor **out) {
  if (scale != 1.0 && !check_averageable(api, x)) return tg_last_error(); /* tg_apply's path */
  out[0] = sum_all(api, x);
  if (!out[0]) return tg_last_error();
  return scale == 1.0 ? TG_OK : scale_inplace(api, out[0], scale);
}

/* ints[0], the dim of a _dim op: one of x's (0 for a 0-dim x, its single implicit dim). */
static bool dim_param(const char *api, const tg_ctx *ctx, const tg_tensor *x, int *dim) {
  return tg__param_dim(api, ctx, 0, x->ndim > 0 ? x->ndim : 1, dim);
}

static tg_status fwd_sum_dim(const char *api, tg_ctx *ctx, const tg_tensor *x, int dim,
                             double scale, tg_tensor **out) {
  if (scale != 1.0 && !check_averageable(api, x)) return tg_last_error(); /* tg_apply's path */
  out[0] = sum_one_dim(api, x, dim, tg_ctx_int(ctx, 1) != 0);
  if (!out[0]) return tg_last_error();
  return scale == 1.0 ? TG_OK : scale_inplace(api, out[0], scale);
}

/* Where x equals its selected value, as 1/count (the gradient is shared among ties, as in
 * PyTorch); a constant of x's sizes. y is the 0-dim result. */
static tg_tensor *share_mask(const char *api, const tg_tensor *x, const tg_tensor *y) {
  tg_tensor *mask = tg_empty(x->ndim, x->sizes, options_of(x, x->dtype));
  if (!mask || tg__binary_into(api, TG_BINARY_EQ, 1.0, mask, x, y) != TG_OK) return NULL;
  double count;
  tg_tensor *total = sum_all(api, mask);
  if (!total || tg_item(total, &count) != TG_OK) return NULL;
  /* Only a NaN result equals no element: it is shared among x's NaNs (x != x), as PyTorch's
   * evenly_distribute_backward does. */
  if (count == 0) {
    if (tg__binary_into(api, TG_BINARY_NE, 1.0, mask, x, x) != TG_OK) return NULL;
    total = sum_all(api, mask);
    if (!total || tg_item(total, &count) != TG_OK) return NULL;
  }
  if (count > 0 && scale_inplace(api, mask, 1.0 / count) != TG_OK) return NULL;
  return mask;
}

/* A SELECT kind over all elements (x is not empty); saves the share mask when x needs its
 * gradient. */
static tg_status fwd_select_all(const char *api, tg_reduce_kind kind, tg_ctx *ctx,
                                const tg_tensor *x, tg_tensor **out) {
  if (!tg__check(tg__numel(x->ndim, x->sizes) != 0, TG_ERR_SHAPE, api,
                 "x is %s: a selection from no elements is undefined", tg__sizes_str(x)))
    return tg_last_error();
  const tg_backend *be = tg__backend(api, x->storage->device);
  if (!be) return tg_last_error();
  tg_tensor *c = tg_contiguous(x);
  int64_t numel = tg__numel(x->ndim, x->sizes), one = 1;
  tg_tensor *flat = c ? reshaped(c, 1, &numel) : NULL;
  tg_tensor *values = tg_empty(1, &one, options_of(x, x->dtype));
  tg_tensor *indices = tg_empty(1, &one, options_of(x, TG_I64));
  if (!flat || !values || !indices || be->reduce(kind, values, indices, flat, 0) != TG_OK)
    return tg_last_error();
  out[0] = reshaped(values, 0, &one);
  if (!out[0]) return tg_last_error();
  if (!tg_ctx_needs_input_grad(ctx, 0)) return TG_OK;
  tg_tensor *mask = share_mask(api, x, out[0]);
  return mask ? tg_ctx_save_for_backward(ctx, 1, (const tg_tensor *const[]){mask})
              : tg_last_error();
}

/* One-hot of indices (keepdim form) along dim of x's sizes, in x's dtype: where the
 * gradient of each selected value goes. A constant, so the backward stays differentiable. */
static tg_tensor *one_hot(const char *api, const tg_tensor *x, const tg_tensor *indices, int dim) {
  const tg_backend *be = tg__backend(api, x->storage->device);
  tg_tensor *index_f = be ? tg_empty(indices->ndim, indices->sizes, options_of(x, x->dtype)) : NULL;
  if (!index_f || be->copy(index_f, indices) != TG_OK) return NULL;
  int64_t along[TG_MAX_DIMS];
  for (int d = 0; d < x->ndim; d++) along[d] = d == dim ? x->sizes[d] : 1;
  tg_tensor *positions = tg_arange(0, (double)x->sizes[dim], 1, options_of(x, x->dtype));
  tg_tensor *positions_along = positions ? reshaped(positions, x->ndim, along) : NULL;
  tg_tensor *hot = tg_empty(x->ndim, x->sizes, options_of(x, x->dtype));
  if (!positions_along || !hot ||
      tg__binary_into(api, TG_BINARY_EQ, 1.0, hot, positions_along, index_f) != TG_OK)
    return NULL;
  return hot;
}

/* A SELECT kind over one dim: values and (non-differentiable) I64 indices; saves the
 * one-hot of the indices when x needs its gradient. */
static tg_status fwd_select_dim(const char *api, tg_reduce_kind kind, tg_ctx *ctx,
                                const tg_tensor *x, tg_tensor **out) {
  int dim;
  if (!dim_param(api, ctx, x, &dim) ||
      !tg__check(x->ndim == 0 || x->sizes[dim] != 0, TG_ERR_SHAPE, api,
                 "x is %s: a selection over dim %d of size 0 is undefined", tg__sizes_str(x), dim))
    return tg_last_error();
  bool keepdim = tg_ctx_int(ctx, 1) != 0;
  const tg_backend *be = tg__backend(api, x->storage->device);
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
    if (!values || !indices || be->reduce(kind, values, indices, x, dim) != TG_OK)
      return tg_last_error();
    out[0] = keepdim ? values : reshaped(values, n, sizes);
    out[1] = keepdim ? indices : reshaped(indices, n, sizes);
    if (out[0] && out[1] && tg_ctx_needs_input_grad(ctx, 0)) {
      tg_tensor *hot = one_hot(api, x, indices, dim);
      if (!hot || tg_ctx_save_for_backward(ctx, 1, (const tg_tensor *const[]){hot}) != TG_OK)
        return tg_last_error();
    }
  }
  if (!out[0] || !out[1]) return tg_last_error();
  return tg_ctx_mark_non_differentiable(ctx, out[1]);
}

/* ---- the ops of the list ---- */

/* A backward of the list: g, r, n (and w for SELECT) as reduction.def describes them. */
#define TG__REDUCE_BWD(fn, site_dim, site_keepdim, n_expr, w_decl, grad)                           \
  tg_status fn(tg_ctx *ctx, const tg_tensor *const *g_, tg_tensor **gi) {                          \
    const reduce_site site = {ctx, (site_dim), (site_keepdim)}, *r = &site;                        \
    const tg_tensor *g = g_[0];                                                                    \
    const int64_t n = (n_expr);                                                                    \
    w_decl;                                                                                        \
    (void)r, (void)n;                                                                              \
    RETURN_GRAD(grad);                                                                             \
  }
#define TG__DIM_OF(ctx) ((int)tg_ctx_int(ctx, 0))
#define TG__KEEPDIM_OF(ctx) (tg_ctx_int(ctx, 1) != 0)

/* takes_int: whether the op takes int64 (a sum does, a mean does not). */
#define TG__REDUCE_ACCUMULATE(name, scale, grad, takes_int)                                        \
  tg_status tg__fwd_##name(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {             \
    const int64_t n = tg__numel(in[0]->ndim, in[0]->sizes);                                        \
    (void)ctx, (void)n;                                                                            \
    return fwd_sum_all("tg_" #name, in[0], (scale), out);                                          \
  }                                                                                                \
  TG__REDUCE_BWD(tg__bwd_##name, -1, true, input_numel(ctx), (void)0, grad)                        \
  tg_status tg__fwd_##name##_dim(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {       \
    int dim;                                                                                       \
    if (!dim_param("tg_" #name "_dim", ctx, in[0], &dim)) return tg_last_error();                  \
    const int64_t n = in[0]->ndim == 0 ? 1 : in[0]->sizes[dim];                                    \
    (void)n;                                                                                       \
    return fwd_sum_dim("tg_" #name "_dim", ctx, in[0], dim, (scale), out);                         \
  }                                                                                                \
  TG__REDUCE_BWD(tg__bwd_##name##_dim, TG__DIM_OF(ctx), TG__KEEPDIM_OF(ctx),                       \
                 input_dim_size(ctx, TG__DIM_OF(ctx)), (void)0, grad)                              \
  tg_tensor *tg_##name(const tg_tensor *x) {                                                       \
    if (!check_input("tg_" #name, x) || (!(takes_int) && !check_averageable("tg_" #name, x)))      \
      return NULL;                                                                                 \
    return tg_apply1(TG__OP(name), 1, (const tg_tensor *const[]){x}, TG__NO_SC);                   \
  }                                                                                                \
  tg_tensor *tg_##name##_dim(const tg_tensor *x, int dim, bool keepdim) {                          \
    return reduce_dim("tg_" #name "_dim", TG__OP(name##_dim), x, dim, keepdim, (takes_int));       \
  }

#define TG__REDUCE_PICK(KIND, name, grad)                                                          \
  tg_status tg__fwd_##name(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {             \
    return fwd_select_all("tg_" #name, TG_REDUCE_##KIND, ctx, in[0], out);                         \
  }                                                                                                \
  TG__REDUCE_BWD(tg__bwd_##name, -1, true, input_numel(ctx),                                       \
                 const tg_tensor *w = tg_ctx_saved(ctx, 0), grad)                                  \
  tg_status tg__fwd_##name##_dim(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {       \
    return fwd_select_dim("tg_" #name "_dim", TG_REDUCE_##KIND, ctx, in[0], out);                  \
  }                                                                                                \
  /* A 0-dim x selected itself (nothing saved): the gradient passes through. */                    \
  static TG__REDUCE_BWD(bwd_##name##_dim, TG__DIM_OF(ctx), TG__KEEPDIM_OF(ctx),                    \
                        input_dim_size(ctx, TG__DIM_OF(ctx)),                                      \
                        const tg_tensor *w = tg_ctx_saved(ctx, 0), grad)                           \
      tg_status tg__bwd_##name##_dim(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {     \
    if (tg_ctx_input_ndim(ctx, 0) == 0) RETURN_GRAD(tg__scoped(tg_retain(g[0])));                  \
    return bwd_##name##_dim(ctx, g, gi);                                                           \
  }                                                                                                \
  tg_tensor *tg_##name(const tg_tensor *x) {                                                       \
    if (!select_input_ok("tg_" #name, #name, x)) return NULL;                                      \
    return tg_apply1(TG__OP(name), 1, (const tg_tensor *const[]){x}, TG__NO_SC);                   \
  }                                                                                                \
  tg_status tg_##name##_dim(const tg_tensor *x, int dim, bool keepdim, tg_tensor **values,         \
                            tg_tensor **indices) {                                                 \
    return select_dim("tg_" #name "_dim", #name, TG__OP(name##_dim), x, dim, keepdim, values,      \
                      indices);                                                                    \
  }

#define TG_REDUCE_SUM(KIND, name, grad) TG__REDUCE_ACCUMULATE(name, 1.0, grad, true)
#define TG_REDUCE_SCALED(name, KIND, scale, grad) TG__REDUCE_ACCUMULATE(name, scale, grad, false)
#define TG_REDUCE_SELECT(KIND, name, better, grad) TG__REDUCE_PICK(KIND, name, grad)
#include "ops/def/reduction.def"
