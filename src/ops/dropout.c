/* tg_dropout (include/tg/norm.h), composed from tg ops: the mask is a tg_rand draw (Philox,
 * the same numbers on every device for a seed) compared with 1 - p and scaled by
 * 1 / (1 - p); y = x * mask, so the backward multiplies by the same mask and double
 * backward comes with it. */
#include "tensor/check.h"
#include "tensor/tensor_impl.h"
#include "tg/autograd.h"
#include "tg/norm.h"
#include "tg/ops.h"

tg_tensor *tg_dropout(const tg_tensor *x, double p, bool training, tg_generator *gen) {
  const char *api = "tg_dropout";
  if (!tg__check_arg(api, "x", x) || !tg__check_floating(api, "x", x) ||
      !tg__check(p >= 0 && p <= 1, TG_ERR_ARGUMENT, api,
                 "dropout probability has to be between 0 and 1, but got %g", p))
    return NULL;
  if (!training || p == 0) return tg__scoped(tg_retain(x)); /* x itself, as PyTorch */
  tg_scope s = tg_scope_begin();
  tg_tensor *y = NULL;
  if (p == 1) {
    y = tg_mul(x, tg_zeros_like(x));
  } else {
    tg_no_grad_begin();
    tg_tensor *u =
        tg_rand(x->ndim, x->sizes, (tg_options){x->dtype, x->storage->device, false}, gen);
    tg_tensor *keep = u ? tg_lt(u, tg_full_like(u, 1 - p)) : NULL;
    tg_tensor *mask = keep ? tg_mul_scalar(keep, 1 / (1 - p)) : NULL;
    tg_no_grad_end();
    y = mask ? tg_mul(x, mask) : NULL;
  }
  y = tg_scope_escape(s, y);
  tg_scope_end(s);
  return y;
}
