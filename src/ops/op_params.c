/* Checks of an op call's integer parameters and index inputs (see op_params.h). */
#include "ops/op_params.h"

#include <stdio.h>

#include "tensor/check.h"
#include "tensor/checked.h"
#include "tensor/device_names.h"
#include "tensor/host_memory.h"
#include "tensor/tensor_impl.h"
#include "tg/tensor.h"

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

/* Writes "[i, j, ...]", the position of flat element k of sizes, into buf ("" for 0-dim). */
static void format_position(char *buf, size_t cap, int ndim, const int64_t *sizes, int64_t k) {
  buf[0] = '\0';
  if (ndim == 0) return;
  int64_t pos[TG_MAX_DIMS];
  for (int dim = ndim - 1; dim >= 0; dim--) {
    pos[dim] = sizes[dim] > 0 ? k % sizes[dim] : 0;
    k = sizes[dim] > 0 ? k / sizes[dim] : 0;
  }
  size_t used = (size_t)snprintf(buf, cap, "[");
  for (int dim = 0; dim < ndim && used < cap; dim++)
    used += (size_t)snprintf(buf + used, cap - used, dim ? ", %lld" : "%lld", (long long)pos[dim]);
  if (used < cap) snprintf(buf + used, cap - used, "]");
}

bool tg__check_indices(const char *op, const char *arg, const tg_tensor *t, int64_t n,
                       const char *range) {
  /* A device without data (meta) has no values to check, as PyTorch's meta tensors skip
   * data-dependent checks. */
  if (!tg__device_type_has_data(t->storage->device.type)) return true;
  /* t exists, so its numel * 8 bytes fit a size_t. */
  const int64_t m = tg__numel(t->ndim, t->sizes);
  int64_t *host = tg__host_malloc(sizeof *host * (size_t)(m > 0 ? m : 1));
  if (!host) return tg__fail(TG_ERR_MEMORY, op, "out of memory reading %lld indices", (long long)m);
  bool ok = tg_to_host_array(t, host, sizeof *host * (size_t)m) == TG_OK;
  for (int64_t k = 0; ok && k < m; k++) {
    if (host[k] < 0 || host[k] >= n) {
      char pos[TG_MAX_DIMS * 24 + 4];
      format_position(pos, sizeof pos, t->ndim, t->sizes, k);
      ok = tg__fail(TG_ERR_INDEX, op, "%s%s = %lld is outside %s [0, %lld)", arg, pos,
                    (long long)host[k], range, (long long)n);
    }
  }
  tg__host_free(host);
  return ok;
}
