/* Tensor objects, their properties, and the creation functions. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "checked.h"
#include "host_memory.h"
#include "ops/backend.h"
#include "tensor_impl.h"

int64_t tg__numel(int ndim, const int64_t *sizes) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= sizes[d];
  return n;
}

void tg__contiguous_strides(int ndim, const int64_t *sizes, int64_t *strides) {
  int64_t s = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    strides[d] = s;
    s *= sizes[d] > 1 ? sizes[d] : 1;
  }
}

int tg__wrap_dim(const char *op, const char *arg, int dim, int ndim) {
  int lo = ndim > 0 ? -ndim : -1, hi = ndim > 0 ? ndim - 1 : 0;
  if (dim < lo || dim > hi) {
    tg_set_error(TG_ERR_INDEX, "%s: %s %d is out of range for a %d-dim tensor (expected %d..%d)",
                 op, arg, dim, ndim, lo, hi);
    return -1;
  }
  return dim < 0 ? dim + (ndim > 0 ? ndim : 1) : dim;
}

bool tg__check_arg(const char *op, const char *arg, const tg_tensor *t) {
  if (t) return true;
  if (tg_last_error() == TG_OK) tg_set_error(TG_ERR_ARGUMENT, "%s: %s is NULL", op, arg);
  return false;
}

tg_tensor *tg__tensor_new(tg_storage *storage, int64_t offset, int ndim, const int64_t *sizes,
                          const int64_t *strides, tg_dtype dtype) {
  tg_tensor *t = tg__host_calloc(1, sizeof *t);
  if (!t) {
    tg_set_error(TG_ERR_MEMORY, "tg: out of memory for a tensor header");
    return NULL;
  }
  atomic_init(&t->refcount, 1);
  tg__storage_retain(storage);
  t->storage = storage;
  t->offset = offset;
  t->ndim = ndim;
  t->dtype = dtype;
  if (ndim > 0) memcpy(t->sizes, sizes, sizeof(int64_t) * (size_t)ndim);
  if (ndim > 0 && strides)
    memcpy(t->strides, strides, sizeof(int64_t) * (size_t)ndim);
  else if (ndim > 0)
    tg__contiguous_strides(ndim, sizes, t->strides);
  tg__live_inc();
  return t;
}

tg_tensor *tg__alias_raw(const tg_tensor *t) {
  return tg__tensor_new(t->storage, t->offset, t->ndim, t->sizes, t->strides, t->dtype);
}

static bool check_geometry(const char *op, int ndim, const int64_t *sizes, tg_dtype dtype) {
  char buf[160];
  if (ndim < 0 || ndim > TG_MAX_DIMS)
    return tg_set_error(TG_ERR_SHAPE, "%s: ndim %d is outside 0..%d", op, ndim, TG_MAX_DIMS), false;
  if (ndim > 0 && !sizes)
    return tg_set_error(TG_ERR_ARGUMENT, "%s: sizes is NULL for ndim %d", op, ndim), false;
  if ((unsigned)dtype >= TG_NUM_DTYPES)
    return tg_set_error(TG_ERR_DTYPE, "%s: invalid dtype %d", op, (int)dtype), false;
  for (int d = 0; d < ndim; d++)
    if (sizes[d] < 0)
      return tg_set_error(TG_ERR_SHAPE, "%s: sizes %s: size of dim %d is negative", op,
                          tg_format_sizes(buf, sizeof buf, ndim, sizes), d),
             false;
  /* The same bound as every view (contiguous strides fit int64, zeros counted as 1), and the
   * bytes of the elements there are must fit too; an empty tensor has none. */
  int64_t extent; /* numel <= extent, so tg__numel cannot overflow once extent fits */
  if (tg__extent_ovf(ndim, sizes, &extent) || tg__numel(ndim, sizes) > INT64_MAX / 8)
    return tg_set_error(TG_ERR_SHAPE, "%s: sizes %s: too many elements", op,
                        tg_format_sizes(buf, sizeof buf, ndim, sizes)),
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
  tg_storage *s = tg__storage_new_op(op, nbytes, device);
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
  if (step == 0 || !isfinite(step) || !isfinite(start) || !isfinite(end)) {
    tg_set_error(TG_ERR_ARGUMENT,
                 "tg_arange: start %g, end %g, step %g: need finite values and a non-zero step",
                 start, end, step);
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
  int64_t n = span > 0 ? (int64_t)span : 0;
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

/* ---- properties ---- */
int tg_ndim(const tg_tensor *t) { return t ? t->ndim : 0; }
int64_t tg_size(const tg_tensor *t, int dim) {
  if (!t) return 0;
  int d = tg__wrap_dim("tg_size", "dim", dim, t->ndim);
  return d < 0 ? 0 : (t->ndim == 0 ? 1 : t->sizes[d]);
}
int64_t tg_stride(const tg_tensor *t, int dim) {
  if (!t) return 0;
  int d = tg__wrap_dim("tg_stride", "dim", dim, t->ndim);
  return d < 0 ? 0 : (t->ndim == 0 ? 1 : t->strides[d]);
}
const int64_t *tg_sizes(const tg_tensor *t) { return t ? t->sizes : NULL; }
const int64_t *tg_strides(const tg_tensor *t) { return t ? t->strides : NULL; }
int64_t tg_offset(const tg_tensor *t) { return t ? t->offset : 0; }
int64_t tg_numel(const tg_tensor *t) { return t ? tg__numel(t->ndim, t->sizes) : 0; }
tg_dtype tg_tensor_dtype(const tg_tensor *t) { return t ? t->dtype : TG_F32; }
tg_device tg_tensor_device(const tg_tensor *t) { return t ? t->storage->device : TG_DEVICE_CPU; }
uint64_t tg_version(const tg_tensor *t) { return t ? atomic_load(&t->storage->version) : 0; }

bool tg_is_contiguous(const tg_tensor *t) {
  if (!t) return false;
  if (tg__numel(t->ndim, t->sizes) == 0) return true; /* no element sits anywhere */
  int64_t expected = 1;
  for (int d = t->ndim - 1; d >= 0; d--) {
    if (t->sizes[d] == 1) continue;
    if (t->strides[d] != expected) return false;
    expected *= t->sizes[d];
  }
  return true;
}

bool tg_shares_storage(const tg_tensor *a, const tg_tensor *b) {
  return a && b && a->storage == b->storage;
}

void *tg_data_ptr(const tg_tensor *t) {
  if (!t || !t->storage->data) return NULL;
  return (char *)t->storage->data + t->offset * (int64_t)tg_dtype_size(t->dtype);
}

bool tg__has_internal_overlap(const tg_tensor *t) {
  /* Sort dims by stride; non-overlapping iff each stride >= extent of the smaller dims. An
   * empty tensor has no elements to overlap, and its strides may be anything (as_strided). */
  if (tg__numel(t->ndim, t->sizes) == 0) return false;
  int idx[TG_MAX_DIMS], n = 0;
  for (int d = 0; d < t->ndim; d++)
    if (t->sizes[d] > 1) {
      if (t->strides[d] == 0) return true;
      idx[n++] = d;
    }
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && llabs(t->strides[idx[j]]) < llabs(t->strides[idx[j - 1]]); j--) {
      int tmp = idx[j];
      idx[j] = idx[j - 1];
      idx[j - 1] = tmp;
    }
  int64_t extent = 1;
  for (int i = 0; i < n; i++) {
    int64_t s = llabs(t->strides[idx[i]]);
    if (s < extent) return true;
    extent = s * (t->sizes[idx[i]] - 1) + extent;
  }
  return false;
}

tg_status tg_accessor_of(const tg_tensor *t, int ndim, tg_dtype dtype, tg_accessor *out) {
  if (out) memset(out, 0, sizeof *out);
  if (!tg__check_arg("tg_accessor_of", "t", t)) return tg_last_error();
  if (!out) return tg_set_error(TG_ERR_ARGUMENT, "tg_accessor_of: out is NULL");
  char buf[160];
  if (t->ndim != ndim)
    return tg_set_error(TG_ERR_SHAPE, "tg_accessor_of: t is %s (%d dims) but %d dims were asked",
                        tg_format_sizes(buf, sizeof buf, t->ndim, t->sizes), t->ndim, ndim);
  if (t->dtype != dtype)
    return tg_set_error(TG_ERR_DTYPE, "tg_accessor_of: t is %s but %s was asked",
                        tg_dtype_name(t->dtype), tg_dtype_name(dtype));
  out->data = tg_data_ptr(t);
  out->ndim = ndim;
  memcpy(out->sizes, t->sizes, sizeof(int64_t) * (size_t)ndim);
  memcpy(out->strides, t->strides, sizeof(int64_t) * (size_t)ndim);
  return TG_OK;
}
