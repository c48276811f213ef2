/* topk (include/tg/index.h): the k largest or smallest along a dim, values and I64 indices.
 * The forward moves dim last, reads x as rows [R, N] and runs the device kernel topk.largest
 * or topk.smallest (src/ops/def/index.def; the selection itself, shared by the devices, is
 * src/ops/topk_row.h) into contiguous [R, k] results, then puts dim back. The values'
 * gradient is a scatter_add into zeros at the indices, differentiable again. */
#include "autograd/node.h"
#include "ops/backend.h"
#include "ops/index_internal.h"
#include "ops/op_params.h"
#include "ops/registry.h"
#include "tensor/check.h"
#include "tensor/tensor_impl.h"
#include "tg/index.h"

static tg_options options_of(const tg_tensor *t, tg_dtype dtype) {
  return (tg_options){dtype, t->storage->device, false};
}

/* [*B, k] contiguous with dim last, back in x's order (a view of it). */
static tg_tensor *dim_back(const tg_tensor *t, int ndim, const int *perm) {
  int inverse[TG_MAX_DIMS];
  for (int d = 0; d < ndim; d++) inverse[perm[d]] = d;
  return tg_contiguous(tg_permute(t, ndim, inverse));
}

static bool check_flag(const char *op, const char *name, int64_t v) {
  return tg__check(v == 0 || v == 1, TG_ERR_ARGUMENT, op, "%s = %lld is not 0 or 1", name,
                   (long long)v);
}

tg_status tg__fwd_topk(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  static const char *op = "tg_topk";
  const tg_tensor *x = in[0];
  int dim;
  if (!tg__check(tg_ctx_num_ints(ctx) == 4, TG_ERR_ARGUMENT, op,
                 "takes 4 integer parameters (k, dim, largest, sorted), %d given",
                 tg_ctx_num_ints(ctx)) ||
      !tg__param_dim(op, ctx, 1, x->ndim ? x->ndim : 1, &dim) ||
      !check_flag(op, "largest", tg_ctx_int(ctx, 2)) ||
      !check_flag(op, "sorted", tg_ctx_int(ctx, 3)))
    return tg_last_error();
  const int64_t k = tg_ctx_int(ctx, 0), n = x->ndim ? x->sizes[dim] : 1;
  if (!tg__check(k >= 0 && k <= n, TG_ERR_ARGUMENT, op,
                 "k = %lld is outside [0, %lld], the size of dim %d of x %s", (long long)k,
                 (long long)n, dim, tg__sizes_str(x)))
    return tg_last_error();
  tg_kernel_fn kernel =
      tg__kernel(op, tg_ctx_int(ctx, 2) ? "topk.largest" : "topk.smallest", x->storage->device);
  tg_tensor *x1 = kernel ? tg__index_at_least_1d(x) : NULL;
  if (!x1) return tg_last_error();
  const int nd = x1->ndim;
  int perm[TG_MAX_DIMS];
  tg__index_dim_last(nd, dim, perm);
  int64_t last[TG_MAX_DIMS];
  for (int d = 0; d < nd; d++) last[d] = x1->sizes[perm[d]];
  last[nd - 1] = k;
  const int64_t rows = tg__numel(nd - 1, last);
  tg_tensor *xl = tg_reshape(tg_permute(x1, nd, perm), 2, (const int64_t[]){rows, n});
  tg_tensor *v = xl ? tg_empty(nd, last, options_of(x, x->dtype)) : NULL;
  tg_tensor *i = v ? tg_empty(nd, last, options_of(x, TG_I64)) : NULL;
  tg_tensor *v2 = i ? tg_view(v, 2, (const int64_t[]){rows, k}) : NULL;
  tg_tensor *i2 = v2 ? tg_view(i, 2, (const int64_t[]){rows, k}) : NULL;
  if (!i2 || kernel(3, (tg_tensor *const[]){v2, i2, xl}) != TG_OK) return tg_last_error();
  tg_tensor *values = dim_back(v, nd, perm);
  tg_tensor *indices = values ? dim_back(i, nd, perm) : NULL;
  if (indices && !x->ndim) {
    values = tg_reshape(values, 0, NULL);
    indices = values ? tg_reshape(indices, 0, NULL) : NULL;
  }
  if (!indices || tg_ctx_save_for_backward(ctx, 1, (const tg_tensor *const[]){indices}) != TG_OK)
    return tg_last_error();
  out[0] = values;
  out[1] = indices;
  return tg_ctx_mark_non_differentiable(ctx, indices);
}

/* d x = the values' gradient at their places, zeros elsewhere. */
tg_status tg__bwd_topk(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  if (!tg_ctx_needs_input_grad(ctx, 0) || !g[0]) return TG_OK;
  tg_tensor *indices = tg_ctx_saved(ctx, 0);
  const int nd = tg_ctx_input_ndim(ctx, 0);
  tg_tensor *g1 = indices ? tg__index_at_least_1d(g[0]) : NULL;
  tg_tensor *i1 = g1 ? tg__index_at_least_1d(indices) : NULL;
  tg_tensor *dx = i1 ? tg__scatter_add_into_zeros(
                           nd ? nd : 1, nd ? tg_ctx_input_sizes(ctx, 0) : (const int64_t[]){1},
                           (int)tg_ctx_int(ctx, 1), i1, g1)
                     : NULL;
  gi[0] = dx && !nd ? tg_reshape(dx, 0, NULL) : dx;
  return gi[0] ? TG_OK : tg_last_error();
}

tg_status tg_topk(const tg_tensor *x, int64_t k, int dim, bool largest, bool sorted,
                  tg_tensor **values, tg_tensor **indices) {
  static const char *op = "tg_topk";
  if (values) *values = NULL;
  if (indices) *indices = NULL;
  if (!tg__check_arg(op, "x", x)) return tg_last_error();
  const int d = tg__wrap_dim(op, "dim", dim, x->ndim ? x->ndim : 1);
  if (d < 0) return tg_last_error();
  tg_tensor *outs[2] = {NULL, NULL};
  tg_status st = tg_apply_ex(TG__OP(topk), TG__IN(x), TG__NO_SC,
                             TG__INTS(k, d, largest ? 1 : 0, sorted ? 1 : 0), 2, outs);
  if (st != TG_OK) return st;
  if (values) *values = outs[0];
  if (indices) *indices = outs[1];
  return TG_OK;
}
