/* tg_cumsum (issue 25, helper "pointwise"; entry in ops/def/pointwise_extra.def): prefix sums
 * along one dim by the device kernel cumsum.scan over x viewed as [outer, n, inner]. Its
 * backward is the reversed scan of the gradient (cumsum.reverse_scan), which is the same op
 * with `reverse` set, so it is differentiable to any order. */
#include "ops/backend.h"
#include "ops/registry.h"
#include "tensor/check.h"
#include "tensor/tensor_impl.h"
#include "tg/ops.h"

static const char *const api = "tg_cumsum";

tg_status tg__fwd_cumsum(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  const tg_tensor *x = in[0];
  const int64_t dim = tg_ctx_int(ctx, 0), reverse = tg_ctx_int(ctx, 1);
  /* tg_apply may run the op directly */
  if (!tg__check(dim >= 0 && dim < (x->ndim ? x->ndim : 1), TG_ERR_ARGUMENT, api,
                 "dim %lld is out of range for x %s", (long long)dim, tg__sizes_str(x)))
    return tg_last_error();
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < x->ndim; d++) {
    if (d < dim) outer *= x->sizes[d];
    if (d > dim) inner *= x->sizes[d];
  }
  const int64_t shape[3] = {outer, x->ndim ? x->sizes[dim] : 1, inner};
  const tg_device device = x->storage->device;
  tg_kernel_fn scan = tg__kernel(api, reverse ? "cumsum.reverse_scan" : "cumsum.scan", device);
  tg_tensor *xc = scan ? tg_contiguous(x) : NULL;
  tg_tensor *y = xc ? tg_empty(x->ndim, x->sizes, (tg_options){x->dtype, device, false}) : NULL;
  tg_tensor *x3 = y ? tg_view(xc, 3, shape) : NULL, *y3 = x3 ? tg_view(y, 3, shape) : NULL;
  if (!y3 || scan(2, (tg_tensor *const[]){y3, x3}) != TG_OK) return tg_last_error();
  out[0] = y;
  return TG_OK;
}

tg_status tg__bwd_cumsum(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  gi[0] = tg_apply1_ex(TG__OP(cumsum), 1, g, TG__NO_SC,
                       TG__INTS(tg_ctx_int(ctx, 0), !tg_ctx_int(ctx, 1)));
  return gi[0] ? TG_OK : tg_last_error();
}

tg_tensor *tg_cumsum(const tg_tensor *x, int dim) {
  if (!tg__check_arg(api, "x", x)) return NULL;
  const int d = tg__wrap_dim(api, "dim", dim, x->ndim ? x->ndim : 1);
  if (d < 0) return NULL;
  return tg_apply1_ex(TG__OP(cumsum), 1, (const tg_tensor *const[]){x}, TG__NO_SC, TG__INTS(d, 0));
}
