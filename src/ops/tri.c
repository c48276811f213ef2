/* tg_tril / tg_triu: the lower / upper triangle of the last two dims, the rest zero, as
 * torch.tril / torch.triu. Composed: a [rows, cols] mask of (j - i <= diagonal) (>= for
 * triu) from two aranges on x's device, then tg_where(mask, x, 0), so an inf or NaN outside
 * the triangle never reaches the result (x * mask would make NaN of it), the batch dims take
 * the mask by broadcasting, and the gradient, where(mask, g, 0), is the same triangle of g:
 * differentiable to any order, on every device the pointwise ops run on. */
#include "tensor/tensor_impl.h"
#include "tg/ops.h"

static tg_tensor *triangle(const char *op, const tg_tensor *x, int64_t diagonal, bool lower) {
  if (!tg__check_arg(op, "x", x) ||
      !tg__check(x->ndim >= 2, TG_ERR_SHAPE, op, "x must have at least 2 dims, got %s",
                 tg__sizes_str(x)))
    return NULL;
  const int64_t rows = x->sizes[x->ndim - 2], cols = x->sizes[x->ndim - 1];
  const tg_options idx = {TG_I64, x->storage->device, false};
  tg_scope s = tg_scope_begin(); /* the mask and its pieces are temporaries */
  tg_tensor *i = tg_reshape(tg_arange(0, (double)rows, 1, idx), 2, (const int64_t[]){rows, 1});
  tg_tensor *j = tg_arange(0, (double)cols, 1, idx);
  tg_tensor *d = tg_scalar((double)diagonal, idx);
  tg_tensor *offset = i && j ? tg_sub(j, i) : NULL; /* j - i, [rows, cols] */
  tg_tensor *mask = !offset || !d ? NULL : lower ? tg_le(offset, d) : tg_ge(offset, d);
  tg_tensor *zero = mask ? tg_scalar(0, (tg_options){x->dtype, x->storage->device, false}) : NULL;
  tg_tensor *result = tg_scope_escape(s, zero ? tg_where(mask, x, zero) : NULL);
  tg_scope_end(s);
  return result;
}

tg_tensor *tg_tril(const tg_tensor *x, int64_t diagonal) {
  return triangle("tg_tril", x, diagonal, true);
}

tg_tensor *tg_triu(const tg_tensor *x, int64_t diagonal) {
  return triangle("tg_triu", x, diagonal, false);
}
