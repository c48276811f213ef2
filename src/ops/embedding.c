/* embedding: rows of a weight table [n, d] picked by an I64 index of any shape, and its
 * backward, the registered op "embedding_backward" (grad_weight [n, d]: each output row's
 * gradient added into its index's row). The two are each other's gradient (a gather's
 * adjoint is a scatter-add and back), so double backward works to any order.
 *
 * Each op's forward checks its inputs, indices in range included (read on the host), since
 * tg_apply is public: the front end checks only what tg_apply would name worse (NULLs and
 * devices). The forwards then flatten the indices to [m] and run the device's
 * kernels embedding.index_select_rows / embedding_backward.index_add_rows over [m, d]. The
 * backwards apply the two ops through unchecked copies of their descriptors (same names): the
 * indices they pass were checked when the forward pass ran, so training reads them to the host once
 * per step, not twice. */
#include "autograd/node.h"
#include "ops/backend.h"
#include "ops/op_params.h"
#include "ops/registry.h"
#include "tensor/check.h"
#include "tensor/tensor_impl.h"
#include "tg/ops.h"

static tg_options options_of(const tg_tensor *t, tg_dtype dtype) {
  return (tg_options){dtype, t->storage->device, false};
}

/* The flat [m] view (or copy) of indices: m = 1 for a 0-dim index. */
static tg_tensor *flat_indices(const tg_tensor *indices) {
  int64_t m = tg__numel(indices->ndim, indices->sizes);
  return tg_reshape(indices, 1, &m);
}

static bool check_index_dtype(const char *op, const tg_tensor *indices) {
  return tg__check(indices->dtype == TG_I64, TG_ERR_DTYPE, op,
                   "indices is %s; row indices must be int64", tg_dtype_name(indices->dtype));
}

/* ---- embedding ---- */

static tg_status embedding_kernel(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  const tg_tensor *weight = in[0], *indices = in[1];
  tg_kernel_fn be =
      tg__kernel("tg_embedding", "embedding.index_select_rows", weight->storage->device);
  const int64_t d = weight->sizes[1];
  int64_t sizes[TG_MAX_DIMS];
  for (int k = 0; k < indices->ndim; k++) sizes[k] = indices->sizes[k];
  sizes[indices->ndim] = d;
  tg_tensor *o = be ? tg_empty(indices->ndim + 1, sizes, options_of(weight, weight->dtype)) : NULL;
  tg_tensor *flat = o ? flat_indices(indices) : NULL;
  tg_tensor *rows = flat ? tg_view(o, 2, (const int64_t[]){flat->sizes[0], d}) : NULL;
  if (!rows || be(3, (tg_tensor *const[]){rows, (tg_tensor *)weight, flat}) != TG_OK ||
      tg_ctx_save_for_backward(ctx, 1, &indices) != TG_OK)
    return tg_last_error();
  out[0] = o;
  return TG_OK;
}

tg_status tg__fwd_embedding(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  static const char *op = "tg_embedding";
  const tg_tensor *weight = in[0], *indices = in[1];
  if (!tg__check_floating(op, "weight", weight) ||
      !tg__check(weight->ndim == 2, TG_ERR_SHAPE, op, "weight must be 2-D [n, d], got %s",
                 tg__sizes_str(weight)) ||
      !check_index_dtype(op, indices) ||
      !tg__check(indices->ndim < TG_MAX_DIMS, TG_ERR_SHAPE, op,
                 "indices has %d dims; the output would have %d (at most %d)", indices->ndim,
                 indices->ndim + 1, TG_MAX_DIMS) ||
      !tg__check_indices(op, "indices", indices, weight->sizes[0], "the weight's rows"))
    return tg_last_error();
  return embedding_kernel(ctx, in, out);
}

static tg_status unchecked_embedding_backward_kernel(tg_ctx *ctx, const tg_tensor *const *in,
                                                     tg_tensor **out);

/* The ops as the backwards apply them: same names and backwards, forwards without the checks
 * (not in the registry, so only this file reaches them). */
static const tg_op_desc unchecked_embedding = {
    .name = "embedding",
    .n_inputs = 2,
    .n_outputs = 1,
    .forward = TG__ON_EVERY_DEVICE(embedding_kernel),
    .backward = tg__bwd_embedding,
    .flags = TG__OP_BUILTIN,
};
static const tg_op_desc unchecked_embedding_backward = {
    .name = "embedding_backward",
    .n_inputs = 2,
    .n_outputs = 1,
    .forward = TG__ON_EVERY_DEVICE(unchecked_embedding_backward_kernel),
    .backward = tg__bwd_embedding_backward,
    .flags = TG__OP_BUILTIN,
};

/* d weight = the output gradient's rows added into the rows they were read from. */
tg_status tg__bwd_embedding(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  if (!tg_ctx_needs_input_grad(ctx, 0)) return TG_OK;
  tg_tensor *indices = tg_ctx_saved(ctx, 0);
  gi[0] = indices ? tg_apply1_ex(&unchecked_embedding_backward, TG__IN(g[0], indices), TG__NO_SC,
                                 TG__INTS(tg_ctx_input_sizes(ctx, 0)[0]))
                  : NULL;
  return gi[0] ? TG_OK : tg_last_error();
}

tg_tensor *tg_embedding(const tg_tensor *weight, const tg_tensor *indices) {
  static const char *op = "tg_embedding";
  if (!tg__check_arg(op, "weight", weight) || !tg__check_arg(op, "indices", indices) ||
      !tg__check_same_device(op, "indices", indices, "weight", weight))
    return NULL;
  return tg_apply1(TG__OP(embedding), TG__IN(weight, indices), TG__NO_SC); /* checks the rest */
}

/* ---- embedding_backward ---- */

static tg_status unchecked_embedding_backward_kernel(tg_ctx *ctx, const tg_tensor *const *in,
                                                     tg_tensor **out) {
  const tg_tensor *grad = in[0], *indices = in[1];
  tg_kernel_fn be = tg__kernel("tg_embedding_backward", "embedding_backward.index_add_rows",
                               grad->storage->device);
  const int64_t n = tg_ctx_int(ctx, 0), d = grad->sizes[grad->ndim - 1];
  tg_tensor *o = be ? tg_zeros(2, (const int64_t[]){n, d}, options_of(grad, grad->dtype)) : NULL;
  tg_tensor *flat = o ? flat_indices(indices) : NULL;
  tg_tensor *rows = flat ? tg_reshape(grad, 2, (const int64_t[]){flat->sizes[0], d}) : NULL;
  if (!rows || be(3, (tg_tensor *const[]){o, rows, flat}) != TG_OK ||
      tg_ctx_save_for_backward(ctx, 1, &indices) != TG_OK)
    return tg_last_error();
  out[0] = o;
  return TG_OK;
}

/* Run directly (tg_apply), the op gets what embedding's backward would pass: grad of sizes
 * [*indices.shape, d], I64 indices in [0, n), ints: n >= 0. */
tg_status tg__fwd_embedding_backward(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  static const char *op = "tg_embedding_backward";
  const tg_tensor *grad = in[0], *indices = in[1];
  const int64_t n = tg_ctx_int(ctx, 0);
  if (!tg__check(tg_ctx_num_ints(ctx) == 1, TG_ERR_ARGUMENT, op,
                 "takes 1 integer parameter (n, the weight's rows), %d given",
                 tg_ctx_num_ints(ctx)) ||
      !tg__check(n >= 0, TG_ERR_ARGUMENT, op, "n = %lld (the weight's rows) is negative",
                 (long long)n) ||
      !tg__check_floating(op, "grad", grad) || !check_index_dtype(op, indices) ||
      !tg__check(grad->ndim == indices->ndim + 1 &&
                     tg__dims_equal(indices->ndim, grad->sizes, indices->ndim, indices->sizes),
                 TG_ERR_SHAPE, op, "grad is %s but indices is %s: grad must be [*indices, d]",
                 tg__sizes_str(grad), tg__sizes_str(indices)) ||
      !tg__check_indices(op, "indices", indices, n, "the rows of the weight's gradient"))
    return tg_last_error();
  return unchecked_embedding_backward_kernel(ctx, in, out);
}

/* d grad = the rows of the upstream gradient picked again: embedding itself (indices were
 * checked when the forward pass ran). */
tg_status tg__bwd_embedding_backward(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  if (!tg_ctx_needs_input_grad(ctx, 0)) return TG_OK;
  tg_tensor *indices = tg_ctx_saved(ctx, 0);
  gi[0] = indices ? tg_apply1(&unchecked_embedding, TG__IN(g[0], indices), TG__NO_SC) : NULL;
  return gi[0] ? TG_OK : tg_last_error();
}
