/* index_select and index_add along a dim (include/tg/index.h), each the other's gradient (as
 * gather and scatter_add are: src/ops/index.c), so differentiable to any order.
 *
 * Both read x as [A, N, K] around dim (A the elements before it, K after), index as [M] and
 * the picked slices as [A, M, K], and run the device kernels of src/ops/def/index.def on those
 * views (a reshape copies an input only where its strides do not fold). The forwards check
 * everything, indices in range included; the backwards go through unchecked copies of the
 * descriptors, as gather's do. */
#include "autograd/node.h"
#include "ops/backend.h"
#include "ops/index_internal.h"
#include "ops/op_params.h"
#include "ops/registry.h"
#include "tensor/check.h"
#include "tensor/tensor_impl.h"
#include "tg/index.h"
#include "tg/ops.h"

static tg_options options_of(const tg_tensor *t, tg_dtype dtype) {
  return (tg_options){dtype, t->storage->device, false};
}

/* t (1-D at least) as [A, n, K] around dim, n being t's size there. */
static tg_tensor *as_3d(const tg_tensor *t, int dim) {
  tg_tensor *t1 = tg__index_at_least_1d(t);
  if (!t1) return NULL;
  const int64_t a = tg__numel(dim, t1->sizes), n = t1->sizes[dim];
  const int64_t k = tg__numel(t1->ndim - dim - 1, t1->sizes + dim + 1);
  return tg_reshape(t1, 3, (const int64_t[]){a, n, k});
}

static tg_tensor *flat_index(const tg_tensor *index) {
  return tg_reshape(index, 1, (const int64_t[]){tg__numel(index->ndim, index->sizes)});
}

/* x's sizes with dim's replaced by m (x 0-dim: none). */
static int sizes_with(const tg_tensor *x, int dim, int64_t m, int64_t *sizes) {
  for (int d = 0; d < x->ndim; d++) sizes[d] = d == dim ? m : x->sizes[d];
  return x->ndim;
}

static bool check_index(const char *op, const tg_tensor *x, const tg_tensor *index, int dim) {
  const int64_t m = tg__numel(index->ndim, index->sizes);
  return tg__check(index->dtype == TG_I64, TG_ERR_DTYPE, op,
                   "index is %s; indices must be int64 (I64)", tg_dtype_name(index->dtype)) &&
         tg__check(index->ndim <= 1, TG_ERR_SHAPE, op,
                   "index is %s; it must be 1-D or 0-dim (a vector)", tg__sizes_str(index)) &&
         tg__check(x->ndim > 0 || m == 1, TG_ERR_SHAPE, op,
                   "x is 0-dim, so index must have 1 element, not %lld", (long long)m) &&
         tg__index_check_range(op, "index", index, dim, "x", x->ndim ? x->sizes[dim] : 1);
}

static bool check_call(const char *op, const tg_ctx *ctx, const tg_tensor *x, int n_ints,
                       int *dim) {
  return tg__check(tg_ctx_num_ints(ctx) == n_ints, TG_ERR_ARGUMENT, op,
                   "takes %d integer parameter (dim), %d given", n_ints, tg_ctx_num_ints(ctx)) &&
         tg__param_dim(op, ctx, 0, x->ndim ? x->ndim : 1, dim);
}

/* ---- index_select ---- */

static tg_status index_select_kernel(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  const tg_tensor *x = in[0];
  const int dim = (int)tg_ctx_int(ctx, 0);
  tg_kernel_fn kernel = tg__kernel("tg_index_select", "index_select.rows", x->storage->device);
  tg_tensor *index = kernel ? flat_index(in[1]) : NULL;
  int64_t sizes[TG_MAX_DIMS];
  const int nd = sizes_with(x, dim, index ? index->sizes[0] : 0, sizes);
  tg_tensor *o = index ? tg_empty(nd, sizes, options_of(x, x->dtype)) : NULL;
  tg_tensor *o3 = o ? as_3d(o, dim) : NULL, *x3 = o3 ? as_3d(x, dim) : NULL;
  if (!x3 || kernel(3, (tg_tensor *const[]){o3, x3, index}) != TG_OK ||
      tg_ctx_save_for_backward(ctx, 1, &in[1]) != TG_OK)
    return tg_last_error();
  out[0] = o;
  return TG_OK;
}

tg_status tg__fwd_index_select(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  static const char *op = "tg_index_select";
  int dim;
  if (!check_call(op, ctx, in[0], 1, &dim) || !check_index(op, in[0], in[1], dim))
    return tg_last_error();
  return index_select_kernel(ctx, in, out);
}

static const tg_op_desc unchecked_index_select = {
    .name = "index_select",
    .n_inputs = 2,
    .n_outputs = 1,
    .forward = TG__ON_EVERY_DEVICE(index_select_kernel),
    .backward = tg__bwd_index_select,
    .flags = TG__OP_BUILTIN,
};

/* index_add into zeros it makes itself (index_select's backward: no copy of a zero x): inputs
 * index, src; ints: dim, then the output's sizes. Named as the op it computes. */
static tg_status index_add_into_zeros_kernel(tg_ctx *ctx, const tg_tensor *const *in,
                                             tg_tensor **out);
static tg_status bwd_index_add_into_zeros(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi);
static const tg_op_desc index_add_into_zeros = {
    .name = "index_add",
    .n_inputs = 2,
    .n_outputs = 1,
    .forward = TG__ON_EVERY_DEVICE(index_add_into_zeros_kernel),
    .backward = bwd_index_add_into_zeros,
    .flags = TG__OP_BUILTIN,
};

/* d x = the gradient's slices added into the slices they were read from. */
tg_status tg__bwd_index_select(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  if (!tg_ctx_needs_input_grad(ctx, 0)) return TG_OK;
  tg_tensor *index = tg_ctx_saved(ctx, 0);
  const int nd = tg_ctx_input_ndim(ctx, 0);
  int64_t ints[1 + TG_MAX_DIMS] = {tg_ctx_int(ctx, 0)};
  for (int d = 0; d < nd; d++) ints[1 + d] = tg_ctx_input_sizes(ctx, 0)[d];
  gi[0] = index ? tg_apply1_ex(&index_add_into_zeros, TG__IN(index, g[0]), TG__NO_SC, 1 + nd, ints)
                : NULL;
  return gi[0] ? TG_OK : tg_last_error();
}

tg_tensor *tg_index_select(const tg_tensor *x, int dim, const tg_tensor *index) {
  static const char *op = "tg_index_select";
  if (!tg__check_arg(op, "x", x) || !tg__check_arg(op, "index", index) ||
      !tg__check_same_device(op, "index", index, "x", x))
    return NULL;
  const int d = tg__wrap_dim(op, "dim", dim, x->ndim ? x->ndim : 1);
  if (d < 0) return NULL;
  return tg_apply1_ex(TG__OP(index_select), TG__IN(x, index), TG__NO_SC, TG__INTS(d));
}

/* ---- index_add ---- */

/* o's slices index[m] along dim += alpha * src's slices m, o fresh; index saved. */
static tg_status index_add_into(tg_ctx *ctx, tg_tensor *o, const tg_tensor *index_in,
                                const tg_tensor *src_in, int dim, double alpha) {
  tg_kernel_fn kernel = tg__kernel("tg_index_add", "index_add.rows", o->storage->device);
  tg_tensor *src = !kernel        ? NULL
                   : alpha != 1.0 ? tg_mul_scalar(src_in, alpha)
                                  : (tg_tensor *)src_in;
  tg_tensor *index = src ? flat_index(index_in) : NULL;
  tg_tensor *o3 = index ? as_3d(o, dim) : NULL;
  tg_tensor *s3 =
      o3 ? tg_reshape(src, 3, (const int64_t[]){o3->sizes[0], index->sizes[0], o3->sizes[2]})
         : NULL;
  if (!s3 || kernel(3, (tg_tensor *const[]){o3, s3, index}) != TG_OK ||
      tg_ctx_save_for_backward(ctx, 1, &index_in) != TG_OK)
    return tg_last_error();
  return TG_OK;
}

static tg_status index_add_kernel(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  const tg_tensor *x = in[0];
  tg_tensor *o = tg_empty(x->ndim, x->sizes, options_of(x, x->dtype));
  if (!o || tg_copy_(o, x) != TG_OK ||
      index_add_into(ctx, o, in[1], in[2], (int)tg_ctx_int(ctx, 0), tg_ctx_scalar(ctx, 0)) != TG_OK)
    return tg_last_error();
  out[0] = o;
  return TG_OK;
}

static tg_status index_add_into_zeros_kernel(tg_ctx *ctx, const tg_tensor *const *in,
                                             tg_tensor **out) {
  const int nd = tg_ctx_num_ints(ctx) - 1;
  int64_t sizes[TG_MAX_DIMS];
  for (int d = 0; d < nd; d++) sizes[d] = tg_ctx_int(ctx, 1 + d);
  tg_tensor *o = tg_zeros(nd, sizes, options_of(in[1], in[1]->dtype));
  if (!o || index_add_into(ctx, o, in[0], in[1], (int)tg_ctx_int(ctx, 0), 1.0) != TG_OK)
    return tg_last_error();
  out[0] = o;
  return TG_OK;
}

tg_status tg__fwd_index_add(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  static const char *op = "tg_index_add";
  const tg_tensor *x = in[0], *index = in[1], *src = in[2];
  int dim;
  if (!check_call(op, ctx, x, 1, &dim) ||
      !tg__check(tg_ctx_num_scalars(ctx) == 1, TG_ERR_ARGUMENT, op,
                 "takes 1 scalar parameter (alpha), %d given", tg_ctx_num_scalars(ctx)) ||
      !tg__check(src->dtype == x->dtype, TG_ERR_DTYPE, op,
                 "src is %s and x %s: src must have x's dtype", tg_dtype_name(src->dtype),
                 tg_dtype_name(x->dtype)))
    return tg_last_error();
  int64_t sizes[TG_MAX_DIMS];
  const int nd = sizes_with(x, dim, tg__numel(index->ndim, index->sizes), sizes);
  const bool scalar_ok = x->ndim == 0 && tg__numel(src->ndim, src->sizes) == 1 && src->ndim <= 1;
  if (!tg__check(scalar_ok || tg__dims_equal(src->ndim, src->sizes, nd, sizes), TG_ERR_SHAPE, op,
                 "src is %s; with x %s and %lld indices along dim %d it must be %s",
                 tg__sizes_str(src), tg__sizes_str(x),
                 (long long)tg__numel(index->ndim, index->sizes), dim, tg__dims_str(nd, sizes)) ||
      !check_index(op, x, index, dim))
    return tg_last_error();
  return index_add_kernel(ctx, in, out);
}

/* d src = alpha * the gradient's slices at index, src being input k. */
static tg_status src_gradient(tg_ctx *ctx, const tg_tensor *g, int k, double alpha,
                              tg_tensor **gi) {
  tg_tensor *index = tg_ctx_saved(ctx, 0);
  tg_tensor *picked = index ? tg_apply1_ex(&unchecked_index_select, TG__IN(g, index), TG__NO_SC,
                                           TG__INTS(tg_ctx_int(ctx, 0)))
                            : NULL;
  if (picked && alpha != 1.0) picked = tg_mul_scalar(picked, alpha);
  gi[k] = picked ? tg_reshape(picked, tg_ctx_input_ndim(ctx, k), tg_ctx_input_sizes(ctx, k)) : NULL;
  return gi[k] ? TG_OK : tg_last_error();
}

/* d x = g; d src = alpha * the gradient's slices at index. */
tg_status tg__bwd_index_add(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  if (tg_ctx_needs_input_grad(ctx, 0)) {
    gi[0] = tg__scoped(tg_retain(g[0]));
    if (!gi[0]) return tg_last_error();
  }
  return tg_ctx_needs_input_grad(ctx, 2) ? src_gradient(ctx, g[0], 2, tg_ctx_scalar(ctx, 0), gi)
                                         : TG_OK;
}

static tg_status bwd_index_add_into_zeros(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  return tg_ctx_needs_input_grad(ctx, 1) ? src_gradient(ctx, g[0], 1, 1.0, gi) : TG_OK;
}

tg_tensor *tg_index_add(const tg_tensor *x, int dim, const tg_tensor *index, const tg_tensor *src,
                        double alpha) {
  static const char *op = "tg_index_add";
  if (!tg__check_arg(op, "x", x) || !tg__check_arg(op, "index", index) ||
      !tg__check_arg(op, "src", src) || !tg__check_same_device(op, "index", index, "x", x) ||
      !tg__check_same_device(op, "src", src, "x", x))
    return NULL;
  const int d = tg__wrap_dim(op, "dim", dim, x->ndim ? x->ndim : 1);
  if (d < 0) return NULL;
  return tg_apply1_ex(TG__OP(index_add), TG__IN(x, index, src), TG__SC(alpha), TG__INTS(d));
}
