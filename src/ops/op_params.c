/* Checks of an op call's integer parameters (see op_params.h). */
#include "ops/op_params.h"

#include "tensor/check.h"
#include "tensor/checked.h"

bool tg__param_dim(const char *op, const tg_ctx *ctx, int k, int ndim, int *dim) {
  const int64_t v = tg_ctx_int(ctx, k);
  if (!tg__check(v >= 0 && v < ndim, TG_ERR_INDEX, op,
                 "integer parameter %d (dim) = %lld is outside 0..%d", k, (long long)v, ndim - 1))
    return false;
  *dim = (int)v;
  return true;
}

bool tg__param_sizes(const char *op, const tg_ctx *ctx, int first, int *ndim, int64_t *sizes) {
  const int n = tg_ctx_num_ints(ctx) - first;
  if (!tg__check(n >= 0 && n <= TG_MAX_DIMS, TG_ERR_SHAPE, op,
                 "%d sizes given as integer parameters (at most %d dims)", n, TG_MAX_DIMS))
    return false;
  for (int d = 0; d < n; d++) sizes[d] = tg_ctx_int(ctx, first + d);
  for (int d = 0; d < n; d++)
    if (!tg__check(sizes[d] >= 0, TG_ERR_SHAPE, op, "sizes %s: size of dim %d is negative",
                   tg__dims_str(n, sizes), d))
      return false;
  int64_t extent;
  if (!tg__check(!tg__extent_ovf(n, sizes, &extent), TG_ERR_SHAPE, op,
                 "sizes %s: the number of elements overflows int64", tg__dims_str(n, sizes)))
    return false;
  *ndim = n;
  return true;
}
