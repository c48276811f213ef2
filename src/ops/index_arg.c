/* argmax and argmin (include/tg/index.h): the indices that max_dim / min_dim return (one
 * reduction kind each, src/ops/def/reduction.def: NaN wins, the first of equal values), over
 * one dim or, with TG_ALL_DIMS, over x flattened in row-major order. Not differentiable. */
#include "tensor/check.h"
#include "tensor/tensor_impl.h"
#include "tg/autograd.h"
#include "tg/index.h"
#include "tg/ops.h"

typedef tg_status (*select_dim_fn)(const tg_tensor *, int, bool, tg_tensor **, tg_tensor **);

static tg_tensor *arg_select(const char *op, select_dim_fn select, const tg_tensor *x, int dim,
                             bool keepdim) {
  if (!tg__check_arg(op, "x", x)) return NULL;
  tg_tensor *indices = NULL;
  const bool grad = tg_set_grad_enabled(false); /* the values are thrown away */
  if (dim == TG_ALL_DIMS) {
    const int64_t n = tg__numel(x->ndim, x->sizes);
    if (tg__check(n > 0, TG_ERR_SHAPE, op,
                  "x %s is empty; over all elements (TG_ALL_DIMS) it needs at least one",
                  tg__sizes_str(x))) {
      tg_tensor *flat = tg_reshape(x, 1, &n);
      if (flat && select(flat, 0, false, NULL, &indices) == TG_OK && keepdim) {
        const int64_t ones[TG_MAX_DIMS] = {1, 1, 1, 1, 1, 1, 1, 1};
        indices = tg_reshape(indices, x->ndim, ones);
      }
    }
  } else {
    const int d = tg__wrap_dim(op, "dim", dim, x->ndim ? x->ndim : 1);
    if (d >= 0 &&
        tg__check(x->ndim == 0 || x->sizes[d] > 0, TG_ERR_SHAPE, op,
                  "dim %d of x %s is empty: nothing to pick from", d, tg__sizes_str(x)) &&
        select(x, d, keepdim, NULL, &indices) != TG_OK)
      indices = NULL;
  }
  tg_set_grad_enabled(grad);
  return indices;
}

tg_tensor *tg_argmax(const tg_tensor *x, int dim, bool keepdim) {
  return arg_select("tg_argmax", tg_max_dim, x, dim, keepdim);
}

tg_tensor *tg_argmin(const tg_tensor *x, int dim, bool keepdim) {
  return arg_select("tg_argmin", tg_min_dim, x, dim, keepdim);
}
