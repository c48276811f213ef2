/* The engine's arithmetic (autograd/grad_arith.h), implemented with ops and the backends. */
#include <math.h>

#include "autograd/grad_arith.h"
#include "ops/backend.h"
#include "ops/creation.h"
#include "tg/ops.h"

static tg_status add_into(const char *op, tg_tensor *out, const tg_tensor *a, const tg_tensor *b) {
  const tg_backend *be = tg__backend(op, out->storage->device);
  return be ? be->binary(TG_BINARY_ADD, 1.0, out, a, b) : tg_last_error();
}

static tg_status copy_into(const char *op, tg_tensor *out, const tg_tensor *src) {
  const tg_backend *be = tg__backend(op, out->storage->device);
  return be ? be->copy(out, src) : tg_last_error();
}

static tg_status fill(const char *op, tg_tensor *t, double value) {
  const tg_backend *be = tg__backend(op, t->storage->device);
  return be ? be->fill(t, value) : tg_last_error();
}

/* Walks a host tensor's elements in row-major order until one is not finite. */
static void host_first_nonfinite(const tg_tensor *t, int64_t *where, double *value) {
  int64_t numel = tg_numel(t), index[TG_MAX_DIMS] = {0};
  for (int64_t k = 0; k < numel; k++) {
    int64_t at = t->offset;
    for (int d = 0; d < t->ndim; d++) at += index[d] * t->strides[d];
    double v = t->dtype == TG_F32 ? ((const float *)t->storage->data)[at]
                                  : ((const double *)t->storage->data)[at];
    if (!isfinite(v)) {
      *where = k;
      *value = v;
      return;
    }
    for (int d = t->ndim - 1; d >= 0 && ++index[d] == t->sizes[d]; d--) index[d] = 0;
  }
}

static tg_status first_nonfinite(const tg_tensor *t, int64_t *where, double *value) {
  *where = -1;
  *value = 0;
  if (!tg_dtype_is_floating(t->dtype)) return TG_OK;
  if (t->storage->device.type == TG_CPU) {
    host_first_nonfinite(t, where, value);
    return TG_OK;
  }
  bool was = tg_set_grad_enabled(false);
  tg_scope scope;
  tg_status st = tg__scope_open(&scope);
  tg_tensor *host = st == TG_OK ? tg_to_device(t, TG_DEVICE_CPU) : NULL;
  if (host)
    host_first_nonfinite(host, where, value);
  else
    st = tg_last_error();
  tg_scope_end(scope);
  tg_set_grad_enabled(was);
  return st;
}

const tg_grad_arith tg__ops_grad_arith = {
    .add = tg_add,
    .zeros = tg_zeros,
    .ones_like = tg_ones_like,
    .empty = tg__empty_raw,
    .add_into = add_into,
    .copy_into = copy_into,
    .fill = fill,
    .first_nonfinite = first_nonfinite,
};
