/* Views: new geometry over the same storage, recorded on the tape like any op. */
#include <stdlib.h>
#include <string.h>

#include "ops/backend.h"
#include "ops/op_params.h"
#include "ops/registry.h"
#include "tensor/checked.h"
#include "tensor/tensor_impl.h"
#include "tg/ops.h"

/* ---- geometry ---- */

/* Strides for viewing (sizes, strides) as new_sizes without a copy (PyTorch's rule: a dim
 * group may be split or merged only where it is contiguous within itself). */
static bool view_strides(int ndim, const int64_t *sizes, const int64_t *strides, int new_ndim,
                         const int64_t *new_sizes, int64_t *new_strides) {
  if (ndim == 0 || tg__numel(ndim, sizes) == 0) {
    tg__contiguous_strides(new_ndim, new_sizes, new_strides);
    return true;
  }
  int view_d = new_ndim - 1;
  int64_t chunk_base_stride = strides[ndim - 1], tensor_numel = 1, view_numel = 1;
  /* Strides of size-1 dims can be anything, so the products are checked: an overflow means
   * no view (tg_reshape then copies). */
  for (int d = ndim - 1; d >= 0; d--) {
    int64_t chunk_stride;
    tensor_numel *= sizes[d];
    if (d == 0 ||
        (sizes[d - 1] != 1 && (tg__mul_ovf(tensor_numel, chunk_base_stride, &chunk_stride) ||
                               strides[d - 1] != chunk_stride))) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_sizes[view_d] == 1)) {
        if (tg__mul_ovf(view_numel, chunk_base_stride, &new_strides[view_d])) return false;
        view_numel *= new_sizes[view_d];
        view_d--;
      }
      if (view_numel != tensor_numel) return false;
      if (d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

/* Resolves one -1 in sizes against numel; false (with an error naming op) if impossible. */
static bool infer_sizes(const char *op, const tg_tensor *t, int ndim, const int64_t *sizes,
                        int64_t *out) {
  if (ndim < 0 || ndim > TG_MAX_DIMS || (ndim > 0 && !sizes))
    return tg_set_error(TG_ERR_SHAPE, "%s: ndim %d is outside 0..%d", op, ndim, TG_MAX_DIMS), false;
  int infer = -1;
  int64_t known = 1, numel = tg__numel(t->ndim, t->sizes);
  for (int d = 0; d < ndim; d++) {
    if (sizes[d] == -1) {
      if (infer >= 0)
        return tg_set_error(TG_ERR_SHAPE, "%s: sizes %s: only one dim can be -1", op,
                            tg__dims_str(ndim, sizes)),
               false;
      infer = d;
    } else if (sizes[d] < 0) {
      return tg_set_error(TG_ERR_SHAPE, "%s: sizes %s: size of dim %d is negative", op,
                          tg__dims_str(ndim, sizes), d),
             false;
    } else if (tg__mul_ovf(known, sizes[d], &known)) {
      return tg_set_error(TG_ERR_SHAPE,
                          "%s: sizes %s: the number of elements overflows int64 (input %s)", op,
                          tg__dims_str(ndim, sizes), tg__sizes_str(t)),
             false;
    }
    out[d] = sizes[d];
  }
  if (infer >= 0) {
    if (known == 0 || numel % known != 0)
      return tg_set_error(TG_ERR_SHAPE, "%s: shape %s is invalid for input %s", op,
                          tg__dims_str(ndim, sizes), tg__sizes_str(t)),
             false;
    out[infer] = numel / known;
    known *= out[infer];
  }
  if (known != numel)
    return tg_set_error(TG_ERR_SHAPE, "%s: shape %s is invalid for input %s (%lld elements)", op,
                        tg__dims_str(ndim, sizes), tg__sizes_str(t), (long long)numel),
           false;
  /* An empty input matches any sizes with a 0, but the others must still keep contiguous
   * strides within int64. */
  int64_t extent;
  if (tg__extent_ovf(ndim, out, &extent))
    return tg_set_error(TG_ERR_SHAPE,
                        "%s: sizes %s: the product of the non-zero sizes overflows int64 "
                        "(input %s)",
                        op, tg__dims_str(ndim, sizes), tg__sizes_str(t)),
           false;
  return true;
}

static tg_tensor *make_view(const tg_tensor *t, int ndim, const int64_t *sizes,
                            const int64_t *strides, int64_t offset) {
  return tg__scoped(tg__tensor_new(t->storage, offset, ndim, sizes, strides, t->dtype));
}

/* Sizes, dims and indices travel as the op's integer parameters, never through a double.
 * Forwards check them (op_params.h): a caller of tg_apply_ex may pass anything. */

/* ---- view / reshape ---- */

tg_status tg__fwd_view(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  int64_t sizes[TG_MAX_DIMS], strides[TG_MAX_DIMS];
  int ndim;
  const tg_tensor *t = in[0];
  if (!tg__param_sizes("tg_view", ctx, 0, &ndim, sizes)) return tg_last_error();
  if (tg__numel(ndim, sizes) != tg__numel(t->ndim, t->sizes))
    return tg_set_error(TG_ERR_SHAPE, "tg_view: shape %s is invalid for input %s (%lld elements)",
                        tg__dims_str(ndim, sizes), tg__sizes_str(t),
                        (long long)tg__numel(t->ndim, t->sizes));
  if (!view_strides(t->ndim, t->sizes, t->strides, ndim, sizes, strides)) {
    return tg_set_error(TG_ERR_SHAPE,
                        "tg_view: a view of shape %s is not possible for input %s with strides "
                        "%s; use tg_reshape",
                        tg__dims_str(ndim, sizes), tg__sizes_str(t),
                        tg__dims_str(t->ndim, t->strides));
  }
  out[0] = make_view(t, ndim, sizes, strides, t->offset);
  return out[0] ? TG_OK : tg_last_error();
}

tg_status tg__bwd_view(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  gi[0] = tg_reshape(g[0], tg_ctx_input_ndim(ctx, 0), tg_ctx_input_sizes(ctx, 0));
  return gi[0] ? TG_OK : tg_last_error();
}

static tg_tensor *view_op(const tg_tensor *t, int ndim, const int64_t *sizes) {
  return tg_apply1_ex(TG__OP(view), 1, (const tg_tensor *const[]){t}, TG__NO_SC, ndim, sizes);
}

tg_tensor *tg_view(const tg_tensor *t, int ndim, const int64_t *sizes) {
  int64_t resolved[TG_MAX_DIMS];
  if (!tg__check_arg("tg_view", "t", t) || !infer_sizes("tg_view", t, ndim, sizes, resolved))
    return NULL;
  return view_op(t, ndim, resolved);
}

tg_tensor *tg_reshape(const tg_tensor *t, int ndim, const int64_t *sizes) {
  int64_t resolved[TG_MAX_DIMS], strides[TG_MAX_DIMS];
  if (!tg__check_arg("tg_reshape", "t", t) || !infer_sizes("tg_reshape", t, ndim, sizes, resolved))
    return NULL;
  if (view_strides(t->ndim, t->sizes, t->strides, ndim, resolved, strides))
    return view_op(t, ndim, resolved);
  return view_op(tg_clone(t), ndim, resolved);
}

tg_tensor *tg_flatten(const tg_tensor *t) {
  if (!tg__check_arg("tg_flatten", "t", t)) return NULL;
  return tg_reshape(t, 1, (const int64_t[]){tg__numel(t->ndim, t->sizes)});
}

tg_tensor *tg_squeeze(const tg_tensor *t, int dim) {
  if (!tg__check_arg("tg_squeeze", "t", t)) return NULL;
  int d = tg__wrap_dim("tg_squeeze", "dim", dim, t->ndim);
  if (d < 0) return NULL;
  int64_t sizes[TG_MAX_DIMS];
  int n = 0;
  for (int k = 0; k < t->ndim; k++)
    if (k != d || t->sizes[k] != 1) sizes[n++] = t->sizes[k];
  return view_op(t, n, sizes);
}

tg_tensor *tg_squeeze_all(const tg_tensor *t) {
  if (!tg__check_arg("tg_squeeze_all", "t", t)) return NULL;
  int64_t sizes[TG_MAX_DIMS];
  int n = 0;
  for (int k = 0; k < t->ndim; k++)
    if (t->sizes[k] != 1) sizes[n++] = t->sizes[k];
  return view_op(t, n, sizes);
}

tg_tensor *tg_unsqueeze(const tg_tensor *t, int dim) {
  if (!tg__check_arg("tg_unsqueeze", "t", t)) return NULL;
  if (t->ndim >= TG_MAX_DIMS) {
    tg_set_error(TG_ERR_SHAPE, "tg_unsqueeze: t already has the maximum of %d dims", TG_MAX_DIMS);
    return NULL;
  }
  int d = tg__wrap_dim("tg_unsqueeze", "dim", dim, t->ndim + 1);
  if (d < 0) return NULL;
  int64_t sizes[TG_MAX_DIMS];
  for (int k = 0, n = 0; k <= t->ndim; k++) sizes[k] = k == d ? 1 : t->sizes[n++];
  return view_op(t, t->ndim + 1, sizes);
}

/* ---- permute / transpose ---- */

tg_status tg__fwd_permute(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  const tg_tensor *t = in[0];
  int64_t sizes[TG_MAX_DIMS], strides[TG_MAX_DIMS];
  bool seen[TG_MAX_DIMS] = {false};
  if (tg_ctx_num_ints(ctx) != t->ndim)
    return tg_set_error(TG_ERR_SHAPE, "tg_permute: %d dims given for a tensor of shape %s",
                        tg_ctx_num_ints(ctx), tg__sizes_str(t));
  for (int d = 0; d < t->ndim; d++) {
    int src;
    if (!tg__param_dim("tg_permute", ctx, d, t->ndim, &src)) return tg_last_error();
    if (seen[src]) return tg_set_error(TG_ERR_INDEX, "tg_permute: dim %d appears twice", src);
    seen[src] = true;
    sizes[d] = t->sizes[src];
    strides[d] = t->strides[src];
  }
  out[0] = make_view(t, t->ndim, sizes, strides, t->offset);
  return out[0] ? TG_OK : tg_last_error();
}

tg_status tg__bwd_permute(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  int n = tg_ctx_num_ints(ctx), inverse[TG_MAX_DIMS];
  for (int d = 0; d < n; d++) inverse[tg_ctx_int(ctx, d)] = d;
  gi[0] = tg_permute(g[0], n, inverse);
  return gi[0] ? TG_OK : tg_last_error();
}

tg_tensor *tg_permute(const tg_tensor *t, int ndim, const int *dims) {
  if (!tg__check_arg("tg_permute", "t", t)) return NULL;
  if (ndim != t->ndim || (ndim > 0 && !dims)) {
    tg_set_error(TG_ERR_SHAPE, "tg_permute: %d dims given for a tensor of shape %s", ndim,
                 tg__sizes_str(t));
    return NULL;
  }
  int64_t order[TG_MAX_DIMS];
  bool seen[TG_MAX_DIMS] = {false};
  for (int d = 0; d < ndim; d++) {
    int w = tg__wrap_dim("tg_permute", "dims entry", dims[d], ndim);
    if (w < 0) return NULL;
    if (seen[w]) {
      tg_set_error(TG_ERR_INDEX, "tg_permute: dim %d appears twice", w);
      return NULL;
    }
    seen[w] = true;
    order[d] = w;
  }
  return tg_apply1_ex(TG__OP(permute), 1, (const tg_tensor *const[]){t}, TG__NO_SC, ndim, order);
}

tg_tensor *tg_transpose(const tg_tensor *t, int dim0, int dim1) {
  if (!tg__check_arg("tg_transpose", "t", t)) return NULL;
  int a = tg__wrap_dim("tg_transpose", "dim0", dim0, t->ndim);
  int b = a < 0 ? -1 : tg__wrap_dim("tg_transpose", "dim1", dim1, t->ndim);
  if (b < 0) return NULL;
  int dims[TG_MAX_DIMS];
  for (int d = 0; d < t->ndim; d++) dims[d] = d == a ? b : d == b ? a : d;
  if (t->ndim == 0) return view_op(t, 0, NULL);
  return tg_permute(t, t->ndim, dims);
}

tg_tensor *tg_t(const tg_tensor *t) {
  if (!tg__check_arg("tg_t", "t", t)) return NULL;
  if (t->ndim > 2) {
    tg_set_error(TG_ERR_SHAPE, "tg_t: expects a tensor with <= 2 dims, got %s", tg__sizes_str(t));
    return NULL;
  }
  return t->ndim < 2 ? view_op(t, t->ndim, t->sizes) : tg_transpose(t, 0, 1);
}

/* ---- slice / narrow / select / chunk / split ---- */

/* start, end are clamped to 0 <= start <= end <= sizes[dim] and step > 0. */
static tg_status slice_geometry(const tg_tensor *t, int dim, int64_t start, int64_t end,
                                int64_t step, int64_t *sizes, int64_t *strides, int64_t *offset) {
  memcpy(sizes, t->sizes, sizeof(int64_t) * (size_t)t->ndim);
  memcpy(strides, t->strides, sizeof(int64_t) * (size_t)t->ndim);
  /* 1 + (len - 1) / step, not (len + step - 1) / step: that overflows for a large step. */
  sizes[dim] = end > start ? 1 + (end - start - 1) / step : 0;
  /* An empty result addresses nothing: it keeps the offset, and its strides may be anything
   * (as_strided allows any on an empty tensor), so nothing is computed from them. A dim of
   * size 1 never uses its stride either, and step * stride may not fit there (slicing twice
   * with a huge step): it keeps the old stride. Otherwise the new stride and offset lie
   * within the span of elements t already reaches, which fits int64. */
  *offset = t->offset;
  int64_t stride, shift;
  bool stride_ovf = tg__mul_ovf(t->strides[dim], step, &stride);
  if (!stride_ovf) strides[dim] = stride;
  if (tg__numel(t->ndim, sizes) == 0) return TG_OK;
  if (sizes[dim] > 1 && stride_ovf)
    return tg_set_error(TG_ERR_SHAPE, "tg_slice: stride %lld times step %lld overflows int64",
                        (long long)t->strides[dim], (long long)step);
  if (tg__mul_ovf(start, t->strides[dim], &shift) || tg__add_ovf(t->offset, shift, offset))
    return tg_set_error(TG_ERR_SHAPE,
                        "tg_slice: offset %lld + start %lld * stride %lld overflows int64",
                        (long long)t->offset, (long long)start, (long long)t->strides[dim]);
  return TG_OK;
}

/* ints[0..4) are dim, start, end, step as tg_slice leaves them for a tensor of sizes t_sizes:
 * a dim of t, 0 <= start <= end <= its size, step > 0. Sets *dim. */
static bool check_slice_params(const char *op, const tg_ctx *ctx, int ndim, const int64_t *t_sizes,
                               int *dim) {
  if (!tg__check(ndim > 0, TG_ERR_INDEX, op, "cannot slice a 0-dim tensor") ||
      !tg__param_dim(op, ctx, 0, ndim, dim))
    return false;
  const int64_t start = tg_ctx_int(ctx, 1), end = tg_ctx_int(ctx, 2), step = tg_ctx_int(ctx, 3);
  const int64_t n = t_sizes[*dim];
  return tg__check(step > 0, TG_ERR_ARGUMENT, op, "step %lld must be positive", (long long)step) &&
         tg__check(0 <= start && start <= end && end <= n, TG_ERR_INDEX, op,
                   "start %lld, end %lld must satisfy 0 <= start <= end <= %lld (size of dim %d "
                   "of %s)",
                   (long long)start, (long long)end, (long long)n, *dim,
                   tg__dims_str(ndim, t_sizes));
}

tg_status tg__fwd_slice(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  int64_t sizes[TG_MAX_DIMS], strides[TG_MAX_DIMS], offset;
  int dim;
  if (!check_slice_params("tg_slice", ctx, in[0]->ndim, in[0]->sizes, &dim)) return tg_last_error();
  tg_status st = slice_geometry(in[0], dim, tg_ctx_int(ctx, 1), tg_ctx_int(ctx, 2),
                                tg_ctx_int(ctx, 3), sizes, strides, &offset);
  if (st != TG_OK) return st;
  out[0] = make_view(in[0], in[0]->ndim, sizes, strides, offset);
  return out[0] ? TG_OK : tg_last_error();
}

/* backward of slice: zeros of the input's sizes with the slice filled by the gradient. */
tg_status tg__bwd_slice(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  int64_t params[4 + TG_MAX_DIMS];
  int n = tg_ctx_input_ndim(ctx, 0);
  for (int k = 0; k < 4; k++) params[k] = tg_ctx_int(ctx, k);
  for (int d = 0; d < n; d++) params[4 + d] = tg_ctx_input_sizes(ctx, 0)[d];
  gi[0] = tg_apply1_ex(TG__OP(slice_backward), 1, g, TG__NO_SC, 4 + n, params);
  return gi[0] ? TG_OK : tg_last_error();
}

tg_status tg__fwd_slice_backward(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  static const char *op = "tg_slice_backward";
  int64_t base[TG_MAX_DIMS];
  int ndim, dim;
  if (!tg__param_sizes(op, ctx, 4, &ndim, base) || !check_slice_params(op, ctx, ndim, base, &dim))
    return tg_last_error();
  tg_tensor *z = tg_zeros(ndim, base, (tg_options){in[0]->dtype, in[0]->storage->device, false});
  if (!z) return tg_last_error();
  int64_t sizes[TG_MAX_DIMS], strides[TG_MAX_DIMS], offset;
  tg_status st = slice_geometry(z, dim, tg_ctx_int(ctx, 1), tg_ctx_int(ctx, 2), tg_ctx_int(ctx, 3),
                                sizes, strides, &offset);
  if (st != TG_OK) return st;
  tg_tensor *window = make_view(z, ndim, sizes, strides, offset);
  if (!window || tg_copy_(window, in[0]) != TG_OK) return tg_last_error();
  out[0] = z;
  return TG_OK;
}

tg_status tg__bwd_slice_backward(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  gi[0] = tg_apply1_ex(
      TG__OP(slice), 1, g, TG__NO_SC,
      TG__INTS(tg_ctx_int(ctx, 0), tg_ctx_int(ctx, 1), tg_ctx_int(ctx, 2), tg_ctx_int(ctx, 3)));
  return gi[0] ? TG_OK : tg_last_error();
}

tg_tensor *tg_slice(const tg_tensor *t, int dim, int64_t start, int64_t end, int64_t step) {
  if (!tg__check_arg("tg_slice", "t", t)) return NULL;
  if (t->ndim == 0) {
    tg_set_error(TG_ERR_INDEX, "tg_slice: cannot slice a 0-dim tensor");
    return NULL;
  }
  int d = tg__wrap_dim("tg_slice", "dim", dim, t->ndim);
  if (d < 0) return NULL;
  if (step <= 0) {
    tg_set_error(TG_ERR_ARGUMENT, "tg_slice: step %lld must be positive", (long long)step);
    return NULL;
  }
  int64_t n = t->sizes[d];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = start < 0 ? 0 : start > n ? n : start;
  end = end < start ? start : end > n ? n : end;
  return tg_apply1_ex(TG__OP(slice), 1, (const tg_tensor *const[]){t}, TG__NO_SC,
                      TG__INTS(d, start, end, step));
}

tg_tensor *tg_narrow(const tg_tensor *t, int dim, int64_t start, int64_t length) {
  if (!tg__check_arg("tg_narrow", "t", t)) return NULL;
  if (t->ndim == 0) {
    tg_set_error(TG_ERR_INDEX, "tg_narrow: cannot narrow a 0-dim tensor");
    return NULL;
  }
  int d = tg__wrap_dim("tg_narrow", "dim", dim, t->ndim);
  if (d < 0) return NULL;
  int64_t n = t->sizes[d];
  if (start < 0 && start >= -n) start += n;
  if (start < 0 || length < 0 || start > n || length > n - start) {
    tg_set_error(TG_ERR_INDEX,
                 "tg_narrow: start %lld, length %lld is out of bounds for dim %d of size %lld "
                 "(tensor %s)",
                 (long long)start, (long long)length, d, (long long)n, tg__sizes_str(t));
    return NULL;
  }
  return tg_apply1_ex(TG__OP(slice), 1, (const tg_tensor *const[]){t}, TG__NO_SC,
                      TG__INTS(d, start, start + length, 1));
}

tg_status tg__fwd_select(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  const tg_tensor *t = in[0];
  int dim;
  if (!tg__check(t->ndim > 0, TG_ERR_INDEX, "tg_select", "cannot select from a 0-dim tensor") ||
      !tg__param_dim("tg_select", ctx, 0, t->ndim, &dim))
    return tg_last_error();
  int64_t index = tg_ctx_int(ctx, 1);
  if (index < 0 || index >= t->sizes[dim])
    return tg_set_error(TG_ERR_INDEX,
                        "tg_select: index %lld is out of range for dim %d of size %lld (tensor %s)",
                        (long long)index, dim, (long long)t->sizes[dim], tg__sizes_str(t));
  int64_t sizes[TG_MAX_DIMS], strides[TG_MAX_DIMS];
  for (int k = 0, n = 0; k < t->ndim; k++)
    if (k != dim) {
      sizes[n] = t->sizes[k];
      strides[n++] = t->strides[k];
    }
  /* As in slice: an empty result keeps the offset (its strides may be anything); otherwise
   * the element lies within t's span. */
  int64_t offset = t->offset, shift;
  if (tg__numel(t->ndim - 1, sizes) > 0 &&
      (tg__mul_ovf(index, t->strides[dim], &shift) || tg__add_ovf(t->offset, shift, &offset)))
    return tg_set_error(TG_ERR_SHAPE,
                        "tg_select: offset %lld + index %lld * stride %lld overflows int64",
                        (long long)t->offset, (long long)index, (long long)t->strides[dim]);
  out[0] = make_view(t, t->ndim - 1, sizes, strides, offset);
  return out[0] ? TG_OK : tg_last_error();
}

tg_status tg__bwd_select(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  int64_t params[2 + TG_MAX_DIMS];
  int n = tg_ctx_input_ndim(ctx, 0);
  params[0] = tg_ctx_int(ctx, 0);
  params[1] = tg_ctx_int(ctx, 1);
  for (int d = 0; d < n; d++) params[2 + d] = tg_ctx_input_sizes(ctx, 0)[d];
  gi[0] = tg_apply1_ex(TG__OP(select_backward), 1, g, TG__NO_SC, 2 + n, params);
  return gi[0] ? TG_OK : tg_last_error();
}

tg_status tg__fwd_select_backward(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  int64_t base[TG_MAX_DIMS];
  int ndim;
  if (!tg__param_sizes("tg_select_backward", ctx, 2, &ndim, base)) return tg_last_error();
  tg_tensor *z = tg_zeros(ndim, base, (tg_options){in[0]->dtype, in[0]->storage->device, false});
  tg_tensor *window = tg_select(z, (int)tg_ctx_int(ctx, 0), tg_ctx_int(ctx, 1));
  if (!window || tg_copy_(window, in[0]) != TG_OK) return tg_last_error();
  out[0] = z;
  return TG_OK;
}

tg_status tg__bwd_select_backward(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  gi[0] = tg_apply1_ex(TG__OP(select), 1, g, TG__NO_SC,
                       TG__INTS(tg_ctx_int(ctx, 0), tg_ctx_int(ctx, 1)));
  return gi[0] ? TG_OK : tg_last_error();
}

tg_tensor *tg_select(const tg_tensor *t, int dim, int64_t index) {
  if (!tg__check_arg("tg_select", "t", t)) return NULL;
  if (t->ndim == 0) {
    tg_set_error(TG_ERR_INDEX, "tg_select: cannot select from a 0-dim tensor");
    return NULL;
  }
  int d = tg__wrap_dim("tg_select", "dim", dim, t->ndim);
  if (d < 0) return NULL;
  int64_t n = t->sizes[d];
  if (index < -n || index >= n) {
    tg_set_error(TG_ERR_INDEX,
                 "tg_select: index %lld is out of range for dim %d of size %lld "
                 "(tensor %s)",
                 (long long)index, d, (long long)n, tg__sizes_str(t));
    return NULL;
  }
  if (index < 0) index += n;
  return tg_apply1_ex(TG__OP(select), 1, (const tg_tensor *const[]){t}, TG__NO_SC,
                      TG__INTS(d, index));
}

/* Views of split_size along dim; every one or none is returned. */
static tg_status split_views(const char *op, const tg_tensor *t, int64_t split_size, int dim,
                             tg_tensor **out, int max_out, int *n_out) {
  int d = tg__wrap_dim(op, "dim", dim, t->ndim);
  if (d < 0) return tg_last_error();
  int64_t n = t->sizes[d];
  /* 1 + (n - 1) / split_size: (n + split_size - 1) would overflow for a large split_size. */
  int64_t pieces = n == 0 ? 1 : 1 + (n - 1) / split_size;
  if (pieces > max_out)
    return tg_set_error(TG_ERR_ARGUMENT, "%s: %lld pieces need room but out holds %d", op,
                        (long long)pieces, max_out);
  int count = (int)pieces;
  for (int k = 0; k < count; k++) {
    int64_t start = (int64_t)k * split_size;
    int64_t len = n - start < split_size ? n - start : split_size;
    out[k] = tg_narrow(t, d, start, len);
    if (!out[k]) {
      for (int j = 0; j < k; j++) out[j] = NULL;
      return tg_last_error();
    }
  }
  *n_out = count;
  return TG_OK;
}

tg_status tg_chunk(const tg_tensor *t, int chunks, int dim, tg_tensor **out, int *n_out) {
  if (n_out) *n_out = 0;
  if (!tg__check_arg("tg_chunk", "t", t)) return tg_last_error();
  if (!out || !n_out) return tg_set_error(TG_ERR_ARGUMENT, "tg_chunk: out or n_out is NULL");
  if (chunks <= 0)
    return tg_set_error(TG_ERR_ARGUMENT, "tg_chunk: chunks %d must be positive", chunks);
  if (t->ndim == 0) return tg_set_error(TG_ERR_INDEX, "tg_chunk: cannot chunk a 0-dim tensor");
  int d = tg__wrap_dim("tg_chunk", "dim", dim, t->ndim);
  if (d < 0) return tg_last_error();
  int64_t n = t->sizes[d];
  if (n == 0) { /* as torch.chunk: `chunks` empty pieces (a split of size 0 gives one) */
    for (int k = 0; k < chunks; k++) {
      out[k] = tg_narrow(t, d, 0, 0);
      if (!out[k]) {
        for (int j = 0; j < k; j++) out[j] = NULL;
        return tg_last_error();
      }
    }
    *n_out = chunks;
    return TG_OK;
  }
  int64_t split = 1 + (n - 1) / chunks; /* n + chunks - 1 could overflow */
  return split_views("tg_chunk", t, split, d, out, chunks, n_out);
}

tg_status tg_split(const tg_tensor *t, int64_t split_size, int dim, tg_tensor **out, int max_out,
                   int *n_out) {
  if (n_out) *n_out = 0;
  if (!tg__check_arg("tg_split", "t", t)) return tg_last_error();
  if (!out || !n_out) return tg_set_error(TG_ERR_ARGUMENT, "tg_split: out or n_out is NULL");
  if (split_size < 0)
    return tg_set_error(TG_ERR_ARGUMENT, "tg_split: split_size %lld is negative",
                        (long long)split_size);
  if (t->ndim == 0) return tg_set_error(TG_ERR_INDEX, "tg_split: cannot split a 0-dim tensor");
  int d = tg__wrap_dim("tg_split", "dim", dim, t->ndim);
  if (d < 0) return tg_last_error();
  if (split_size == 0 && t->sizes[d] != 0) /* as torch.split: 0 only splits an empty dim */
    return tg_set_error(TG_ERR_ARGUMENT,
                        "tg_split: split_size 0 only splits a dim of size 0, but dim %d of %s "
                        "has size %lld",
                        d, tg__sizes_str(t), (long long)t->sizes[d]);
  return split_views("tg_split", t, split_size, d, out, max_out, n_out);
}

/* ---- expand ---- */

tg_status tg__fwd_expand(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  const tg_tensor *t = in[0];
  int64_t sizes[TG_MAX_DIMS], strides[TG_MAX_DIMS];
  int ndim;
  if (!tg__param_sizes("tg_expand", ctx, 0, &ndim, sizes)) return tg_last_error();
  if (ndim < t->ndim)
    return tg_set_error(TG_ERR_SHAPE, "tg_expand: cannot expand %s to %d dims", tg__sizes_str(t),
                        ndim);
  int lead = ndim - t->ndim;
  for (int d = 0; d < ndim; d++) {
    int src = d - lead;
    if (src >= 0 && t->sizes[src] != 1 && t->sizes[src] != sizes[d])
      return tg_set_error(TG_ERR_SHAPE,
                          "tg_expand: cannot expand %s to %s: dim %d has size %lld, not 1 or %lld",
                          tg__sizes_str(t), tg__dims_str(ndim, sizes), d, (long long)t->sizes[src],
                          (long long)sizes[d]);
    strides[d] = src < 0 || (t->sizes[src] == 1 && sizes[d] != 1) ? 0 : t->strides[src];
  }
  out[0] = make_view(t, ndim, sizes, strides, t->offset);
  return out[0] ? TG_OK : tg_last_error();
}

tg_status tg__bwd_expand(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  gi[0] = tg_sum_to_size(g[0], tg_ctx_input_ndim(ctx, 0), tg_ctx_input_sizes(ctx, 0));
  return gi[0] ? TG_OK : tg_last_error();
}

tg_tensor *tg_expand(const tg_tensor *t, int ndim, const int64_t *sizes) {
  if (!tg__check_arg("tg_expand", "t", t)) return NULL;
  if (ndim < t->ndim || ndim > TG_MAX_DIMS || (ndim > 0 && !sizes)) {
    tg_set_error(TG_ERR_SHAPE, "tg_expand: cannot expand %s to %d dims", tg__sizes_str(t), ndim);
    return NULL;
  }
  int64_t resolved[TG_MAX_DIMS];
  int lead = ndim - t->ndim;
  for (int d = 0; d < ndim; d++) {
    int64_t want = sizes[d];
    int src = d - lead;
    if (want == -1) {
      if (src < 0) {
        tg_set_error(TG_ERR_SHAPE, "tg_expand: -1 is not allowed for new leading dim %d of %s", d,
                     tg__dims_str(ndim, sizes));
        return NULL;
      }
      want = t->sizes[src];
    }
    if (want < 0) {
      tg_set_error(TG_ERR_SHAPE,
                   "tg_expand: cannot expand %s to %s: size %lld for dim %d is negative (only -1, "
                   "keep the size, is allowed)",
                   tg__sizes_str(t), tg__dims_str(ndim, sizes), (long long)want, d);
      return NULL;
    }
    if (src >= 0 && t->sizes[src] != 1 && t->sizes[src] != want) {
      tg_set_error(TG_ERR_SHAPE,
                   "tg_expand: cannot expand %s to %s: dim %d has size %lld, not 1 or %lld",
                   tg__sizes_str(t), tg__dims_str(ndim, sizes), d, (long long)t->sizes[src],
                   (long long)want);
      return NULL;
    }
    resolved[d] = want;
  }
  /* The result's element count (and tg_numel) must fit int64. */
  int64_t extent;
  if (tg__extent_ovf(ndim, resolved, &extent)) {
    tg_set_error(TG_ERR_SHAPE,
                 "tg_expand: cannot expand %s to %s: the number of elements overflows int64",
                 tg__sizes_str(t), tg__dims_str(ndim, sizes));
    return NULL;
  }
  return tg_apply1_ex(TG__OP(expand), 1, (const tg_tensor *const[]){t}, TG__NO_SC, ndim, resolved);
}

tg_tensor *tg_expand_as(const tg_tensor *t, const tg_tensor *other) {
  if (!tg__check_arg("tg_expand_as", "t", t) || !tg__check_arg("tg_expand_as", "other", other))
    return NULL;
  return tg_expand(t, other->ndim, other->sizes);
}
