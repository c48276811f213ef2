/* tg_masked_fill: torch.masked_fill, composed as tg_where(mask, value, x). mask has any
 * dtype (tg has no bool: nonzero is true, NaN too) and broadcasts to x, whose sizes and
 * dtype the result keeps. A selection, not arithmetic: x's gradient is g where mask is
 * false and 0 where it filled, and an inf or NaN under the mask never reaches the result. */
#include "ops/broadcast.h"
#include "tensor/tensor_impl.h"
#include "tg/ops.h"

tg_tensor *tg_masked_fill(const tg_tensor *x, const tg_tensor *mask, double value) {
  static const char *op = "tg_masked_fill";
  if (!tg__check_arg(op, "x", x) || !tg__check_arg(op, "mask", mask) ||
      !tg__check_same_device(op, "mask", mask, "x", x) ||
      !tg__check_broadcasts_to(op, "mask", mask->ndim, mask->sizes, "x", x->ndim, x->sizes))
    return NULL;
  tg_scope s = tg_scope_begin();
  tg_tensor *fill = tg_scalar(value, (tg_options){x->dtype, x->storage->device, false});
  tg_tensor *result = tg_scope_escape(s, fill ? tg_where(mask, fill, x) : NULL);
  tg_scope_end(s);
  return result;
}
