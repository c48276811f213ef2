/* Tensor objects and their properties. (The creation functions, which allocate on a device
 * and fill through its backend, are in src/ops/creation.c.) */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "checked.h"
#include "host_memory.h"
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
#if TG_LIFETIME_CHECK
  tg__lifetime_born(t, storage->made_by);
#endif
  tg__live_inc();
  return t;
}

tg_tensor *tg__alias_raw(const tg_tensor *t) {
  return tg__tensor_new(t->storage, t->offset, t->ndim, t->sizes, t->strides, t->dtype);
}

/* ---- properties ---- */
/* A getter's t: NULL, or live (the lifetime checker aborts on a freed one). */
static inline bool given(const char *fn, const tg_tensor *t) {
  if (t) tg__lifetime_verify(fn, "t", t);
  return t != NULL;
}

int tg_ndim(const tg_tensor *t) { return given("tg_ndim", t) ? t->ndim : 0; }
int64_t tg_size(const tg_tensor *t, int dim) {
  if (!given("tg_size", t)) return 0;
  int d = tg__wrap_dim("tg_size", "dim", dim, t->ndim);
  return d < 0 ? 0 : (t->ndim == 0 ? 1 : t->sizes[d]);
}
int64_t tg_stride(const tg_tensor *t, int dim) {
  if (!given("tg_stride", t)) return 0;
  int d = tg__wrap_dim("tg_stride", "dim", dim, t->ndim);
  return d < 0 ? 0 : (t->ndim == 0 ? 1 : t->strides[d]);
}
const int64_t *tg_sizes(const tg_tensor *t) { return given("tg_sizes", t) ? t->sizes : NULL; }
const int64_t *tg_strides(const tg_tensor *t) { return given("tg_strides", t) ? t->strides : NULL; }
int64_t tg_offset(const tg_tensor *t) { return given("tg_offset", t) ? t->offset : 0; }
int64_t tg_numel(const tg_tensor *t) {
  return given("tg_numel", t) ? tg__numel(t->ndim, t->sizes) : 0;
}
tg_dtype tg_tensor_dtype(const tg_tensor *t) {
  return given("tg_tensor_dtype", t) ? t->dtype : TG_F32;
}
tg_device tg_tensor_device(const tg_tensor *t) {
  return given("tg_tensor_device", t) ? t->storage->device : TG_DEVICE_CPU;
}
uint64_t tg_version(const tg_tensor *t) {
  return given("tg_version", t) ? atomic_load(&t->storage->version) : 0;
}

bool tg_is_contiguous(const tg_tensor *t) {
  if (!given("tg_is_contiguous", t)) return false;
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
  if (!given("tg_data_ptr", t) || !t->storage->data) return NULL;
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

/* First and one-past-last byte a non-empty view can address. */
static void byte_range(const tg_tensor *t, uintptr_t *lo, uintptr_t *hi) {
  int64_t first = 0, last = 0; /* in elements, relative to the view's first element */
  for (int d = 0; d < t->ndim; d++) {
    int64_t reach = (t->sizes[d] - 1) * t->strides[d];
    if (reach < 0)
      first += reach;
    else
      last += reach;
  }
  const int64_t es = (int64_t)tg_dtype_size(t->dtype);
  uintptr_t base = (uintptr_t)t->storage->data + (uintptr_t)(t->offset * es);
  *lo = base + (uintptr_t)(first * es); /* wraps back for a negative first, as intended */
  *hi = base + (uintptr_t)((last + 1) * es);
}

static bool may_overlap(const tg_tensor *a, const tg_tensor *b) {
  if (!tg_device_equal(a->storage->device, b->storage->device)) return false;
  if (!a->storage->data || !b->storage->data || tg__numel(a->ndim, a->sizes) == 0 ||
      tg__numel(b->ndim, b->sizes) == 0)
    return false;
  uintptr_t alo, ahi, blo, bhi;
  byte_range(a, &alo, &ahi);
  byte_range(b, &blo, &bhi);
  return alo < bhi && blo < ahi;
}

static bool same_layout(const tg_tensor *a, const tg_tensor *b) {
  if (a->dtype != b->dtype || a->ndim != b->ndim || tg_data_ptr(a) != tg_data_ptr(b) ||
      !tg_device_equal(a->storage->device, b->storage->device))
    return false;
  for (int d = 0; d < a->ndim; d++)
    if (a->sizes[d] != b->sizes[d] || (a->sizes[d] > 1 && a->strides[d] != b->strides[d]))
      return false;
  return true;
}

bool tg__needs_staging(const tg_tensor *dst, const tg_tensor *src) {
  return may_overlap(dst, src) && !same_layout(dst, src);
}

tg_status tg_accessor_of(const tg_tensor *t, int ndim, tg_dtype dtype, tg_accessor *out) {
  if (out) memset(out, 0, sizeof *out);
  if (!tg__check_arg("tg_accessor_of", "t", t)) return tg_last_error();
  if (!out) return tg_set_error(TG_ERR_ARGUMENT, "tg_accessor_of: out is NULL");
  if (t->ndim != ndim)
    return tg_set_error(TG_ERR_SHAPE, "tg_accessor_of: t is %s (%d dims) but %d dims were asked",
                        tg__sizes_str(t), t->ndim, ndim);
  if (t->dtype != dtype)
    return tg_set_error(TG_ERR_DTYPE, "tg_accessor_of: t is %s but %s was asked",
                        tg_dtype_name(t->dtype), tg_dtype_name(dtype));
  out->data = tg_data_ptr(t);
  out->ndim = ndim;
  memcpy(out->sizes, t->sizes, sizeof(int64_t) * (size_t)ndim);
  memcpy(out->strides, t->strides, sizeof(int64_t) * (size_t)ndim);
  return TG_OK;
}
