/* Creation: storages and tensors on a device (through its backend's allocator, device
 * check and fill), and the public creation functions. The tensor layer below only lays
 * out the bytes it is given. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/backend.h"
#include "ops/creation.h"
#include "tensor/checked.h"
#include "tensor/internal_assert.h"
#include "tensor/tensor_impl.h"

/* Makes device current and allocates there with its allocator (an installed one first).
 * Every storage is born here, so the engine's arithmetic is installed before any tensor
 * (and so any graph) exists. */
static tg_storage *storage_new(const char *op, size_t nbytes, tg_device device) {
  tg__grad_arith_install(&tg__ops_grad_arith);
  const tg_device_ops *dev = tg__device_ready(op, device);
  if (!dev) return NULL;
  return tg__storage_new_op(op, nbytes, device, tg_get_allocator(device.type), dev->copy_bytes);
}

tg_storage *tg__storage_new(size_t nbytes, tg_device device) {
  return storage_new("tg_empty", nbytes, device);
}

static bool check_geometry(const char *op, int ndim, const int64_t *sizes, tg_dtype dtype) {
  if (ndim < 0 || ndim > TG_MAX_DIMS)
    return tg_set_error(TG_ERR_SHAPE, "%s: ndim %d is outside 0..%d", op, ndim, TG_MAX_DIMS), false;
  if (ndim > 0 && !sizes)
    return tg_set_error(TG_ERR_ARGUMENT, "%s: sizes is NULL for ndim %d", op, ndim), false;
  if ((unsigned)dtype >= TG_NUM_DTYPES)
    return tg_set_error(TG_ERR_DTYPE, "%s: invalid dtype %d", op, (int)dtype), false;
  for (int d = 0; d < ndim; d++)
    if (sizes[d] < 0)
      return tg_set_error(TG_ERR_SHAPE, "%s: sizes %s: size of dim %d is negative", op,
                          tg__dims_str(ndim, sizes), d),
             false;
  /* The same bound as every view (contiguous strides fit int64, zeros counted as 1), and the
   * bytes of the elements there are must fit too; an empty tensor has none. */
  int64_t extent; /* numel <= extent, so tg__numel cannot overflow once extent fits */
  if (tg__extent_ovf(ndim, sizes, &extent) || tg__numel(ndim, sizes) > INT64_MAX / 8)
    return tg_set_error(TG_ERR_SHAPE, "%s: sizes %s: too many elements", op,
                        tg__dims_str(ndim, sizes)),
           false;
  return true;
}

tg_tensor *tg__empty_raw(int ndim, const int64_t *sizes, tg_dtype dtype, tg_device device) {
  return tg__empty_op("tg_empty", ndim, sizes, dtype, device);
}

tg_tensor *tg__empty_op(const char *op, int ndim, const int64_t *sizes, tg_dtype dtype,
                        tg_device device) {
  if (!check_geometry(op, ndim, sizes, dtype)) return NULL;
  if ((unsigned)device.type >= TG_NUM_DEVICE_TYPES) {
    tg_set_error(TG_ERR_DEVICE, "%s: invalid device type %d", op, (int)device.type);
    return NULL;
  }
  size_t nbytes = (size_t)tg__numel(ndim, sizes) * tg_dtype_size(dtype);
  tg_storage *s = storage_new(op, nbytes, device);
  if (!s) return NULL;
  tg_tensor *t = tg__tensor_new(s, 0, ndim, sizes, NULL, dtype);
  tg__storage_release(s);
  return t;
}

static tg_tensor *finish_leaf(tg_tensor *t, tg_options opts, const char *op) {
  if (!t) return NULL;
  if (opts.requires_grad) {
    if (!tg_dtype_is_floating(t->dtype)) {
      tg_set_error(TG_ERR_DTYPE, "%s: only floating tensors can require grad, not %s", op,
                   tg_dtype_name(t->dtype));
      tg_release(t);
      return NULL;
    }
    t->requires_grad = true;
  }
  return tg__scoped(t);
}

/* Creation functions name themselves (or their _like variant) in every error. */
static tg_tensor *empty_impl(int ndim, const int64_t *sizes, tg_options opts, const char *op) {
  if (opts.requires_grad && !tg_dtype_is_floating(opts.dtype)) {
    tg_set_error(TG_ERR_DTYPE, "%s: only floating tensors can require grad, not %s", op,
                 tg_dtype_name(opts.dtype));
    return NULL;
  }
  return finish_leaf(tg__empty_op(op, ndim, sizes, opts.dtype, opts.device), opts, op);
}

tg_tensor *tg_empty(int ndim, const int64_t *sizes, tg_options opts) {
  return empty_impl(ndim, sizes, opts, "tg_empty");
}

bool tg__check_value_fits(const char *op, const char *arg, tg_dtype dtype, double value) {
  bool fits = true;
  if (dtype == TG_F32)
    fits = !isfinite(value) || fabs(value) <= FLT_MAX;
  else if (dtype == TG_I64)
    fits = value >= -0x1p63 && value < 0x1p63; /* false for NaN */
  if (!fits) {
    /* The shortest of 15 or 17 digits that reads back as value (1e+300, not 1.00...01e+300). */
    char text[32];
    snprintf(text, sizeof text, "%.15g", value);
    if (isfinite(value) && strtod(text, NULL) != value) snprintf(text, sizeof text, "%.17g", value);
    tg_set_error(TG_ERR_ARGUMENT, "%s: %s %s cannot be converted to %s without overflow", op, arg,
                 text, tg_dtype_name(dtype));
  }
  return fits;
}

/* Fills a fresh tensor; on failure releases it. */
static tg_tensor *filled(const char *op, tg_tensor *t, double value) {
  if (!t) return NULL;
  const tg_backend *be = tg__backend(op, t->storage->device);
  if (!be || be->fill(t, value) != TG_OK) {
    tg_release(t);
    return NULL;
  }
  return t;
}

static tg_tensor *full_impl(int ndim, const int64_t *sizes, double value, tg_options opts,
                            const char *op) {
  if (opts.requires_grad && !tg_dtype_is_floating(opts.dtype)) {
    tg_set_error(TG_ERR_DTYPE, "%s: only floating tensors can require grad, not %s", op,
                 tg_dtype_name(opts.dtype));
    return NULL;
  }
  if (!tg__check_value_fits(op, "value", opts.dtype, value)) return NULL;
  return finish_leaf(filled(op, tg__empty_op(op, ndim, sizes, opts.dtype, opts.device), value),
                     opts, op);
}

tg_tensor *tg_zeros(int ndim, const int64_t *sizes, tg_options opts) {
  return full_impl(ndim, sizes, 0.0, opts, "tg_zeros");
}
tg_tensor *tg_ones(int ndim, const int64_t *sizes, tg_options opts) {
  return full_impl(ndim, sizes, 1.0, opts, "tg_ones");
}
tg_tensor *tg_full(int ndim, const int64_t *sizes, double value, tg_options opts) {
  return full_impl(ndim, sizes, value, opts, "tg_full");
}

tg_tensor *tg_scalar(double value, tg_options opts) {
  return full_impl(0, NULL, value, opts, "tg_scalar");
}

/* Moves a fresh host tensor (consumed) to device; unscoped result. */
static tg_tensor *to_device_raw(const char *op, tg_tensor *host, tg_device device) {
  if (device.type == TG_CPU) return host;
  tg_tensor *dev = tg__empty_op(op, host->ndim, host->sizes, host->dtype, device);
  if (dev && tg_copy_(dev, host) != TG_OK) {
    tg_release(dev);
    dev = NULL;
  }
  tg_release(host);
  return dev;
}

tg_tensor *tg_arange(double start, double end, double step, tg_options opts) {
  /* PyTorch's checks and order: the step, then the bounds, then their direction. */
  if (step == 0 || !isfinite(step)) {
    tg_set_error(TG_ERR_ARGUMENT, "tg_arange: step %g: need a finite, non-zero step", step);
    return NULL;
  }
  if (!isfinite(start) || !isfinite(end)) {
    tg_set_error(TG_ERR_ARGUMENT, "tg_arange: start %g, end %g: need finite bounds", start, end);
    return NULL;
  }
  if ((step > 0 && end < start) || (step < 0 && end > start)) {
    tg_set_error(TG_ERR_ARGUMENT,
                 "tg_arange: start %g, end %g, step %g: the bounds are inconsistent with the "
                 "step's sign (end must not be %s start)",
                 start, end, step, step > 0 ? "below" : "above");
    return NULL;
  }
  double span = ceil((end - start) / step);
  /* Converting a double that does not fit int64 is undefined: bound it first (the limit
   * leaves room for 8-byte elements). */
  if (!(span < (double)(INT64_MAX / 8))) {
    tg_set_error(TG_ERR_SHAPE, "tg_arange: start %g, end %g, step %g: %g elements are too many",
                 start, end, step, span);
    return NULL;
  }
  int64_t n = (int64_t)span;
  TG_INTERNAL_ASSERT(n >= 0); /* end - start has the sign of step, or is 0 (checked above) */
  if (n > 0 && !tg_dtype_is_floating(opts.dtype)) {
    double last = start + (double)(n - 1) * step;
    double lo = start < last ? start : last, hi = start < last ? last : start;
    if (!(lo >= -0x1p63 && hi < 0x1p63)) {
      tg_set_error(TG_ERR_ARGUMENT,
                   "tg_arange: start %g, end %g, step %g: values outside int64 for %s", start, end,
                   step, tg_dtype_name(opts.dtype));
      return NULL;
    }
  }
  tg_tensor *host = tg__empty_op("tg_arange", 1, &n, opts.dtype, TG_DEVICE_CPU);
  if (!host) return NULL;
  for (int64_t i = 0; i < n; i++) {
    double v = start + (double)i * step;
    switch (opts.dtype) {
    case TG_F32:
      ((float *)host->storage->data)[i] = (float)v;
      break;
    case TG_F64:
      ((double *)host->storage->data)[i] = v;
      break;
    default:
      TG_INTERNAL_ASSERT(opts.dtype == TG_I64); /* tg__empty_op validated it */
      ((int64_t *)host->storage->data)[i] = (int64_t)v;
      break;
    }
  }
  return finish_leaf(to_device_raw("tg_arange", host, opts.device), opts, "tg_arange");
}

tg_tensor *tg_from_data(int ndim, const int64_t *sizes, const void *data, tg_options opts) {
  if (!data) {
    tg_set_error(TG_ERR_ARGUMENT, "tg_from_data: data is NULL");
    return NULL;
  }
  tg_tensor *host = tg__empty_op("tg_from_data", ndim, sizes, opts.dtype, TG_DEVICE_CPU);
  if (!host) return NULL;
  if (host->storage->nbytes > 0) memcpy(host->storage->data, data, host->storage->nbytes);
  return finish_leaf(to_device_raw("tg_from_data", host, opts.device), opts, "tg_from_data");
}

static tg_options like(const tg_tensor *t) {
  return (tg_options){.dtype = t->dtype, .device = t->storage->device};
}
tg_tensor *tg_empty_like(const tg_tensor *t) {
  return tg__check_arg("tg_empty_like", "t", t)
             ? empty_impl(t->ndim, t->sizes, like(t), "tg_empty_like")
             : NULL;
}
tg_tensor *tg_zeros_like(const tg_tensor *t) {
  return tg__check_arg("tg_zeros_like", "t", t)
             ? full_impl(t->ndim, t->sizes, 0.0, like(t), "tg_zeros_like")
             : NULL;
}
tg_tensor *tg_ones_like(const tg_tensor *t) {
  return tg__check_arg("tg_ones_like", "t", t)
             ? full_impl(t->ndim, t->sizes, 1.0, like(t), "tg_ones_like")
             : NULL;
}
tg_tensor *tg_full_like(const tg_tensor *t, double value) {
  return tg__check_arg("tg_full_like", "t", t)
             ? full_impl(t->ndim, t->sizes, value, like(t), "tg_full_like")
             : NULL;
}
