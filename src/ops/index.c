/* gather and scatter_add along a dim (include/tg/index.h), each the other's gradient: the
 * adjoint of picking x[.., index[..], ..] is adding into those places, and back, so both are
 * differentiable to any order.
 *
 * The forwards check their inputs, indices in range included (read on the host; tg_apply is
 * public), then hand the device kernel (src/ops/def/index.def) the three tensors with dim
 * moved last: views only, x narrowed to index's sizes in the other dims. The backwards apply
 * the ops through unchecked copies of their descriptors (same names), as embedding's do: the
 * indices were checked when the forward pass ran. */
#include <stdio.h>

#include "autograd/node.h"
#include "ops/backend.h"
#include "ops/index_internal.h"
#include "ops/op_params.h"
#include "ops/registry.h"
#include "tensor/check.h"
#include "tensor/tensor_impl.h"
#include "tg/index.h"
#include "tg/pool.h"

static tg_options options_of(const tg_tensor *t, tg_dtype dtype) {
  return (tg_options){dtype, t->storage->device, false};
}

tg_tensor *tg__index_at_least_1d(const tg_tensor *t) {
  return t->ndim ? tg__scoped(tg_retain(t)) : tg_reshape(t, 1, (const int64_t[]){1});
}

void tg__index_dim_last(int ndim, int dim, int *perm) {
  int k = 0;
  for (int d = 0; d < ndim; d++)
    if (d != dim) perm[k++] = d;
  perm[k] = dim;
}

bool tg__index_check_range(const char *op, const char *arg, const tg_tensor *t, int dim,
                           const char *of, int64_t n) {
  char range[64];
  snprintf(range, sizeof range, "dim %d of %s", dim, of);
  return tg__check_indices(op, arg, t, n, range);
}

/* t narrowed to sizes[d] in every dim d but skip (skip -1: every dim). */
static tg_tensor *narrow_to(const tg_tensor *t, const int64_t *sizes, int skip) {
  tg_tensor *r = tg__scoped(tg_retain(t));
  for (int d = 0; r && d < t->ndim; d++)
    if (d != skip && sizes[d] != t->sizes[d]) r = tg_narrow(r, d, 0, sizes[d]);
  return r;
}

static tg_tensor *dim_last(const tg_tensor *t, int dim) {
  int perm[TG_MAX_DIMS];
  tg__index_dim_last(t->ndim, dim, perm);
  return tg_permute(t, t->ndim, perm);
}

/* A fresh copy of x: written by the scatter (a contiguous x itself must not be). */
static tg_tensor *fresh_copy(const tg_tensor *x) {
  tg_tensor *o = tg_empty(x->ndim, x->sizes, options_of(x, x->dtype));
  return o && tg_copy_(o, x) == TG_OK ? o : NULL;
}

/* ---- gather ---- */

static tg_status gather_kernel(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  const int dim = (int)tg_ctx_int(ctx, 0);
  tg_kernel_fn kernel = tg__kernel("tg_gather", "gather.along_last", in[0]->storage->device);
  tg_tensor *x = kernel ? tg__index_at_least_1d(in[0]) : NULL;
  tg_tensor *index = x ? tg__index_at_least_1d(in[1]) : NULL;
  tg_tensor *o = index ? tg_empty(in[1]->ndim, in[1]->sizes, options_of(x, x->dtype)) : NULL;
  tg_tensor *o1 = o ? tg__index_at_least_1d(o) : NULL;
  tg_tensor *xn = o1 ? narrow_to(x, index->sizes, dim) : NULL;
  tg_tensor *ol = xn ? dim_last(o1, dim) : NULL, *xl = ol ? dim_last(xn, dim) : NULL;
  tg_tensor *il = xl ? dim_last(index, dim) : NULL;
  if (!il || kernel(3, (tg_tensor *const[]){ol, xl, il}) != TG_OK ||
      tg_ctx_save_for_backward(ctx, 1, &in[1]) != TG_OK)
    return tg_last_error();
  out[0] = o;
  return TG_OK;
}

/* x and index of one ndim (0-dim as 1-D), index no larger than x but in dim. */
static bool check_gather_shapes(const char *op, const tg_tensor *x, const tg_tensor *index,
                                int dim) {
  const int nd = x->ndim ? x->ndim : 1;
  if (!tg__check((index->ndim ? index->ndim : 1) == nd, TG_ERR_SHAPE, op,
                 "index is %s and x %s: index must have x's number of dims", tg__sizes_str(index),
                 tg__sizes_str(x)))
    return false;
  for (int d = 0; d < x->ndim && index->ndim; d++)
    if (!tg__check(d == dim || index->sizes[d] <= x->sizes[d], TG_ERR_SHAPE, op,
                   "index %s is larger than x %s in dim %d (only dim %d may be)",
                   tg__sizes_str(index), tg__sizes_str(x), d, dim))
      return false;
  return true;
}

static bool check_index_dtype(const char *op, const tg_tensor *index) {
  return tg__check(index->dtype == TG_I64, TG_ERR_DTYPE, op,
                   "index is %s; indices must be int64 (I64)", tg_dtype_name(index->dtype));
}

tg_status tg__fwd_gather(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  static const char *op = "tg_gather";
  const tg_tensor *x = in[0], *index = in[1];
  int dim;
  if (!tg__check(tg_ctx_num_ints(ctx) == 1, TG_ERR_ARGUMENT, op,
                 "takes 1 integer parameter (dim), %d given", tg_ctx_num_ints(ctx)) ||
      !tg__param_dim(op, ctx, 0, x->ndim ? x->ndim : 1, &dim) || !check_index_dtype(op, index) ||
      !check_gather_shapes(op, x, index, dim) ||
      !tg__index_check_range(op, "index", index, dim, "x", x->ndim ? x->sizes[dim] : 1))
    return tg_last_error();
  return gather_kernel(ctx, in, out);
}

static tg_status scatter_into_zeros_kernel(tg_ctx *ctx, const tg_tensor *const *in,
                                           tg_tensor **out);
static tg_status bwd_scatter_into_zeros(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi);

/* The ops as the backwards apply them: same names and backwards, forwards without the checks
 * (not in the registry, so only this file reaches them). */
static const tg_op_desc unchecked_gather = {
    .name = "gather",
    .n_inputs = 2,
    .n_outputs = 1,
    .forward = TG__ON_EVERY_DEVICE(gather_kernel),
    .backward = tg__bwd_gather,
    .flags = TG__OP_BUILTIN,
};

/* scatter_add into zeros it makes itself (the backwards' form: no copy of a zero x): inputs
 * index, src; ints: dim, then the output's sizes. Named as the op it computes. */
static const tg_op_desc scatter_add_into_zeros = {
    .name = "scatter_add",
    .n_inputs = 2,
    .n_outputs = 1,
    .forward = TG__ON_EVERY_DEVICE(scatter_into_zeros_kernel),
    .backward = bwd_scatter_into_zeros,
    .flags = TG__OP_BUILTIN,
};

tg_tensor *tg__scatter_add_into_zeros(int ndim, const int64_t *sizes, int dim,
                                      const tg_tensor *index, const tg_tensor *src) {
  int64_t ints[1 + TG_MAX_DIMS] = {dim};
  for (int d = 0; d < ndim; d++) ints[1 + d] = sizes[d];
  return tg_apply1_ex(&scatter_add_into_zeros, TG__IN(index, src), TG__NO_SC, 1 + ndim, ints);
}

/* d x = the gradient added into the places it was read from. */
tg_status tg__bwd_gather(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  if (!tg_ctx_needs_input_grad(ctx, 0)) return TG_OK;
  tg_tensor *index = tg_ctx_saved(ctx, 0);
  const int nd = tg_ctx_input_ndim(ctx, 0);
  tg_tensor *g1 = index ? tg__index_at_least_1d(g[0]) : NULL;
  tg_tensor *i1 = g1 ? tg__index_at_least_1d(index) : NULL;
  tg_tensor *dx = i1 ? tg__scatter_add_into_zeros(
                           nd ? nd : 1, nd ? tg_ctx_input_sizes(ctx, 0) : (const int64_t[]){1},
                           (int)tg_ctx_int(ctx, 0), i1, g1)
                     : NULL;
  gi[0] = dx && !nd ? tg_reshape(dx, 0, NULL) : dx;
  return gi[0] ? TG_OK : tg_last_error();
}

tg_tensor *tg_gather(const tg_tensor *x, int dim, const tg_tensor *index) {
  static const char *op = "tg_gather";
  if (!tg__check_arg(op, "x", x) || !tg__check_arg(op, "index", index) ||
      !tg__check_same_device(op, "index", index, "x", x))
    return NULL;
  const int d = tg__wrap_dim(op, "dim", dim, x->ndim ? x->ndim : 1);
  if (d < 0) return NULL;
  return tg_apply1_ex(TG__OP(gather), TG__IN(x, index), TG__NO_SC, TG__INTS(d));
}

/* ---- scatter_add ---- */

/* o[.., index[..], ..] += src[..] along dim, o fresh (its elements distinct); index saved. */
static tg_status scatter_into(tg_ctx *ctx, tg_tensor *o, const tg_tensor *index_in,
                              const tg_tensor *src_in, int dim) {
  tg_kernel_fn kernel = tg__kernel("tg_scatter_add", "scatter_add.along_last", o->storage->device);
  tg_tensor *o1 = kernel ? tg__index_at_least_1d(o) : NULL;
  tg_tensor *index = o1 ? tg__index_at_least_1d(index_in) : NULL;
  tg_tensor *src = index ? tg__index_at_least_1d(src_in) : NULL;
  tg_tensor *on = src ? narrow_to(o1, index->sizes, dim) : NULL;
  tg_tensor *sn = on ? narrow_to(src, index->sizes, -1) : NULL;
  tg_tensor *ol = sn ? dim_last(on, dim) : NULL, *sl = ol ? dim_last(sn, dim) : NULL;
  tg_tensor *il = sl ? dim_last(index, dim) : NULL;
  if (!il || kernel(3, (tg_tensor *const[]){ol, sl, il}) != TG_OK ||
      tg_ctx_save_for_backward(ctx, 1, &index_in) != TG_OK)
    return tg_last_error();
  return TG_OK;
}

static tg_status scatter_add_kernel(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  tg_tensor *o = fresh_copy(in[0]);
  if (!o || scatter_into(ctx, o, in[1], in[2], (int)tg_ctx_int(ctx, 0)) != TG_OK)
    return tg_last_error();
  out[0] = o;
  return TG_OK;
}

static tg_status scatter_into_zeros_kernel(tg_ctx *ctx, const tg_tensor *const *in,
                                           tg_tensor **out) {
  const int nd = tg_ctx_num_ints(ctx) - 1;
  int64_t sizes[TG_MAX_DIMS];
  for (int d = 0; d < nd; d++) sizes[d] = tg_ctx_int(ctx, 1 + d);
  tg_tensor *o = tg_zeros(nd, sizes, options_of(in[1], in[1]->dtype));
  if (!o || scatter_into(ctx, o, in[0], in[1], (int)tg_ctx_int(ctx, 0)) != TG_OK)
    return tg_last_error();
  out[0] = o;
  return TG_OK;
}

tg_status tg__fwd_scatter_add(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  static const char *op = "tg_scatter_add";
  const tg_tensor *x = in[0], *index = in[1], *src = in[2];
  int dim;
  if (!tg__check(tg_ctx_num_ints(ctx) == 1, TG_ERR_ARGUMENT, op,
                 "takes 1 integer parameter (dim), %d given", tg_ctx_num_ints(ctx)) ||
      !tg__param_dim(op, ctx, 0, x->ndim ? x->ndim : 1, &dim) || !check_index_dtype(op, index) ||
      !tg__check(src->dtype == x->dtype, TG_ERR_DTYPE, op,
                 "src is %s and x %s: src must have x's dtype", tg_dtype_name(src->dtype),
                 tg_dtype_name(x->dtype)) ||
      !check_gather_shapes(op, x, index, dim) ||
      !tg__check((src->ndim ? src->ndim : 1) == (index->ndim ? index->ndim : 1), TG_ERR_SHAPE, op,
                 "index is %s and src %s: they must have one number of dims", tg__sizes_str(index),
                 tg__sizes_str(src)))
    return tg_last_error();
  for (int d = 0; d < index->ndim && src->ndim; d++)
    if (!tg__check(index->sizes[d] <= src->sizes[d], TG_ERR_SHAPE, op,
                   "index %s is larger than src %s in dim %d", tg__sizes_str(index),
                   tg__sizes_str(src), d))
      return tg_last_error();
  if (!tg__index_check_range(op, "index", index, dim, "x", x->ndim ? x->sizes[dim] : 1))
    return tg_last_error();
  return scatter_add_kernel(ctx, in, out);
}

/* d src = g read back at index (zero where index does not reach src), src being input k. */
static tg_status src_gradient(tg_ctx *ctx, const tg_tensor *g, int k, tg_tensor **gi) {
  tg_tensor *index = tg_ctx_saved(ctx, 0);
  const int nd = tg_ctx_input_ndim(ctx, k);
  const int64_t *src_sizes = tg_ctx_input_sizes(ctx, k);
  tg_tensor *picked = index ? tg_apply1_ex(&unchecked_gather, TG__IN(g, index), TG__NO_SC,
                                           TG__INTS(tg_ctx_int(ctx, 0)))
                            : NULL;
  if (picked && nd && !picked->ndim) picked = tg__index_at_least_1d(picked);
  if (picked && nd && !tg__dims_equal(nd, src_sizes, picked->ndim, picked->sizes)) {
    int64_t pad[2 * TG_MAX_DIMS];
    for (int d = 0; d < nd; d++) {
      pad[2 * (nd - 1 - d)] = 0;
      pad[2 * (nd - 1 - d) + 1] = src_sizes[d] - picked->sizes[d];
    }
    picked = tg_pad(picked, 2 * nd, pad, (tg_pad_options){TG_PAD_CONSTANT, 0.0});
  }
  gi[k] = picked && !nd ? tg_reshape(picked, 0, NULL) : picked;
  return gi[k] ? TG_OK : tg_last_error();
}

/* d x = g; d src = g read back at index. */
tg_status tg__bwd_scatter_add(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  if (tg_ctx_needs_input_grad(ctx, 0)) {
    gi[0] = tg__scoped(tg_retain(g[0]));
    if (!gi[0]) return tg_last_error();
  }
  return tg_ctx_needs_input_grad(ctx, 2) ? src_gradient(ctx, g[0], 2, gi) : TG_OK;
}

static tg_status bwd_scatter_into_zeros(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  return tg_ctx_needs_input_grad(ctx, 1) ? src_gradient(ctx, g[0], 1, gi) : TG_OK;
}

tg_tensor *tg_scatter_add(const tg_tensor *x, int dim, const tg_tensor *index,
                          const tg_tensor *src) {
  static const char *op = "tg_scatter_add";
  if (!tg__check_arg(op, "x", x) || !tg__check_arg(op, "index", index) ||
      !tg__check_arg(op, "src", src) || !tg__check_same_device(op, "index", index, "x", x) ||
      !tg__check_same_device(op, "src", src, "x", x))
    return NULL;
  const int d = tg__wrap_dim(op, "dim", dim, x->ndim ? x->ndim : 1);
  if (d < 0) return NULL;
  return tg_apply1_ex(TG__OP(scatter_add), TG__IN(x, index, src), TG__NO_SC, TG__INTS(d));
}
