/* DLPack 0.6 (tg/dlpack.h): tensors handed to other libraries and taken from them, zero-copy.
 *
 * Export: one host block holds the DLManagedTensor, its shape and strides and a reference to
 * the tensor's storage; the deleter drops the reference and frees the block. Import: the
 * foreign memory becomes a tg storage (tg__storage_wrap) whose release calls the managed
 * tensor's deleter, once, when the last tensor over it dies. A managed tensor tg exported
 * itself comes back onto its own storage (same memory, same version counter). */
#include <dlpack/dlpack.h>
#include <inttypes.h>
#include <string.h>

#include "ops/backend.h"
#include "ops/creation.h"
#include "tensor/checked.h"
#include "tensor/host_memory.h"
#include "tensor/tensor_impl.h"
#include "tg/cuda.h"
#include "tg/dlpack.h"

static const char export_op[] = "tg_to_dlpack";
static const char import_op[] = "tg_from_dlpack";

typedef struct exported {
  DLManagedTensor managed;
  tg_storage *storage; /* the reference that keeps the memory alive */
  int64_t shape[TG_MAX_DIMS];
  int64_t strides[TG_MAX_DIMS];
} exported;

static void exported_delete(DLManagedTensor *m) {
  if (!m) return;
  exported *e = m->manager_ctx;
  tg_storage *s = e->storage;
  tg__host_free(e);
  tg__storage_release(s);
}

/* Each dtype's DLDataType, for export and import both. */
static const DLDataType dl_dtypes[TG_NUM_DTYPES] = {
    [TG_F32] = {kDLFloat, 32, 1}, [TG_F64] = {kDLFloat, 64, 1}, [TG_I64] = {kDLInt, 64, 1}};

DLManagedTensor *tg_to_dlpack(const tg_tensor *t) {
  if (!tg__check_arg(export_op, "t", t)) return NULL;
  tg_storage *s = t->storage;
  if (s->device.type != TG_CPU && s->device.type != TG_CUDA) {
    tg_set_error(TG_ERR_UNSUPPORTED, "%s: t is on device %s, which DLPack has no type for",
                 export_op, tg_device_type_name(s->device.type));
    return NULL;
  }
  /* DLPack has no stream: what tg queued on the tensor must be done when a consumer reads. */
  if (s->device.type == TG_CUDA && tg_cuda_synchronize() != TG_OK) return NULL;
  exported *e = tg__host_calloc(1, sizeof *e);
  if (!e) {
    tg_set_error(TG_ERR_MEMORY, "%s: out of memory for a DLManagedTensor", export_op);
    return NULL;
  }
  DLTensor *dl = &e->managed.dl_tensor;
  /* Element 0's address and byte_offset 0, as PyTorch exports (an empty CUDA storage has
   * no address at all). */
  dl->data = s->data ? (char *)s->data + (size_t)t->offset * tg_dtype_size(t->dtype) : NULL;
  dl->device =
      s->device.type == TG_CUDA ? (DLDevice){kDLCUDA, s->device.index} : (DLDevice){kDLCPU, 0};
  dl->ndim = t->ndim;
  dl->dtype = dl_dtypes[t->dtype];
  if (t->ndim > 0) {
    memcpy(e->shape, t->sizes, sizeof(int64_t) * (size_t)t->ndim);
    memcpy(e->strides, t->strides, sizeof(int64_t) * (size_t)t->ndim);
  }
  dl->shape = e->shape;
  dl->strides = e->strides;
  dl->byte_offset = 0;
  tg__storage_retain(s);
  e->storage = s;
  e->managed.manager_ctx = e;
  e->managed.deleter = exported_delete;
  return &e->managed;
}

/* ---- import ---- */

static bool dtype_from_dl(DLDataType d, tg_dtype *out) {
  for (int i = 0; i < TG_NUM_DTYPES; i++)
    if (d.code == dl_dtypes[i].code && d.bits == dl_dtypes[i].bits &&
        d.lanes == dl_dtypes[i].lanes) {
      *out = (tg_dtype)i;
      return true;
    }
  return false;
}

/* Pinned host memory (kDLCUDAHost) is ordinary CPU memory to tg, as it is to PyTorch. */
static bool device_from_dl(DLDevice d, tg_device *out) {
  switch ((int)d.device_type) {
  case kDLCPU:
  case kDLCUDAHost:
    *out = TG_DEVICE_CPU;
    return true;
  case kDLCUDA:
    *out = TG_DEVICE_CUDA(d.device_id);
    return true;
  default:
    return false;
  }
}

/* Where the managed tensor's elements lie: the tensor's geometry, and the bytes
 * [base, base + nbytes) with element 0 at element offset `offset` from base. */
typedef struct layout {
  tg_dtype dtype;
  tg_device device;
  int ndim;
  int64_t sizes[TG_MAX_DIMS], strides[TG_MAX_DIMS];
  uintptr_t base;
  size_t nbytes;
  int64_t offset;
} layout;

/* Lowest and highest element reached from element 0 (non-empty sizes); false on overflow. */
static bool reach(int ndim, const int64_t *sizes, const int64_t *strides, int64_t *lo,
                  int64_t *hi) {
  *lo = *hi = 0;
  for (int d = 0; d < ndim; d++) {
    int64_t span;
    if (tg__mul_ovf(sizes[d] - 1, strides[d], &span) ||
        (span < 0 ? tg__add_ovf(*lo, span, lo) : tg__add_ovf(*hi, span, hi)))
      return false;
  }
  return true;
}

static bool check_sizes(const DLTensor *dl, layout *l) {
  if (!tg__check(dl->ndim >= 0 && dl->ndim <= TG_MAX_DIMS, TG_ERR_SHAPE, import_op,
                 "ndim %d is outside 0..%d", dl->ndim, TG_MAX_DIMS) ||
      !tg__check(dl->ndim == 0 || dl->shape, TG_ERR_ARGUMENT, import_op,
                 "shape is NULL for ndim %d", dl->ndim))
    return false;
  l->ndim = dl->ndim;
  if (l->ndim > 0) memcpy(l->sizes, dl->shape, sizeof(int64_t) * (size_t)l->ndim);
  for (int d = 0; d < l->ndim; d++)
    if (!tg__check(l->sizes[d] >= 0, TG_ERR_SHAPE, import_op,
                   "shape %s: size of dim %d is negative", tg__dims_str(l->ndim, l->sizes), d))
      return false;
  /* tg's bound for every tensor: contiguous strides fit int64, and so do the bytes. */
  int64_t extent;
  if (!tg__check(!tg__extent_ovf(l->ndim, l->sizes, &extent) &&
                     tg__numel(l->ndim, l->sizes) <= INT64_MAX / 8,
                 TG_ERR_SHAPE, import_op, "shape %s: too many elements",
                 tg__dims_str(l->ndim, l->sizes)))
    return false;
  if (l->ndim == 0) return true;
  if (dl->strides)
    memcpy(l->strides, dl->strides, sizeof(int64_t) * (size_t)l->ndim);
  else
    tg__contiguous_strides(l->ndim, l->sizes, l->strides);
  return true;
}

/* The bytes the elements span, from data + byte_offset, with exact arithmetic. */
static bool check_memory(const DLTensor *dl, layout *l) {
  const int64_t numel = tg__numel(l->ndim, l->sizes);
  const size_t elsize = tg_dtype_size(l->dtype);
  if (numel == 0) { /* nothing is addressed: keep whatever pointer came */
    l->base = (uintptr_t)dl->data;
    l->nbytes = 0;
    l->offset = 0;
    return true;
  }
  if (!tg__check(dl->data, TG_ERR_ARGUMENT, import_op, "data is NULL for shape %s",
                 tg__dims_str(l->ndim, l->sizes)))
    return false;
  const uintptr_t data = (uintptr_t)dl->data;
  if (!tg__check(dl->byte_offset <= UINTPTR_MAX - data, TG_ERR_ARGUMENT, import_op,
                 "byte_offset %" PRIu64 " overflows the address space", dl->byte_offset))
    return false;
  const uintptr_t first = data + (uintptr_t)dl->byte_offset;
  if (!tg__check(first % elsize == 0, TG_ERR_ARGUMENT, import_op,
                 "data + byte_offset (%#" PRIxPTR ") is not aligned to the %zu bytes of %s", first,
                 elsize, tg_dtype_name(l->dtype)))
    return false;
  int64_t lo, hi, count = 0, bytes = 0, below = 0;
  const bool fits = reach(l->ndim, l->sizes, l->strides, &lo, &hi) &&
                    !tg__sub_ovf(hi, lo, &count) && !tg__add_ovf(count, 1, &count) &&
                    !tg__mul_ovf(count, (int64_t)elsize, &bytes) &&
                    !tg__mul_ovf(-lo, (int64_t)elsize, &below);
  /* Elements below element 0 (negative strides) must not start below address 0, nor the
   * last one end past the top. */
  if (!tg__check(fits && (uintptr_t)below <= first &&
                     (uint64_t)bytes - 1 <= UINTPTR_MAX - (first - (uintptr_t)below),
                 TG_ERR_SHAPE, import_op, "strides %s for shape %s reach beyond the address space",
                 tg__dims_str(l->ndim, l->strides), tg__dims_str(l->ndim, l->sizes)))
    return false;
  l->base = first - (uintptr_t)below;
  l->nbytes = (size_t)bytes;
  l->offset = -lo;
  return true;
}

static bool check_managed(const DLManagedTensor *m, layout *l) {
  if (!tg__check(m, TG_ERR_ARGUMENT, import_op, "m is NULL")) return false;
  const DLTensor *dl = &m->dl_tensor;
  if (!tg__check(dtype_from_dl(dl->dtype, &l->dtype), TG_ERR_DTYPE, import_op,
                 "dtype (code %u, bits %u, lanes %u) is not float32, float64 or int64 with "
                 "lanes 1",
                 (unsigned)dl->dtype.code, (unsigned)dl->dtype.bits, (unsigned)dl->dtype.lanes) ||
      !tg__check(device_from_dl(dl->device, &l->device), TG_ERR_DEVICE, import_op,
                 "device type %d is not one tg has (kDLCPU, kDLCUDA, kDLCUDAHost)",
                 (int)dl->device.device_type))
    return false;
  return check_sizes(dl, l) && check_memory(dl, l);
}

/* The storage tg exported m from, when l lies inside it at an element boundary. */
static tg_storage *own_storage(const DLManagedTensor *m, const layout *l, int64_t *offset) {
  if (m->deleter != exported_delete) return NULL;
  tg_storage *s = ((const exported *)m->manager_ctx)->storage;
  const uintptr_t start = (uintptr_t)s->data;
  const size_t elsize = tg_dtype_size(l->dtype);
  if (!tg_device_equal(s->device, l->device) || l->nbytes == 0 || l->base < start ||
      l->base - start > s->nbytes || l->nbytes > s->nbytes - (l->base - start) ||
      (l->base - start) % elsize != 0)
    return NULL;
  *offset = (int64_t)((l->base - start) / elsize) + l->offset;
  return s;
}

static void release_managed(void *ctx) {
  DLManagedTensor *m = ctx;
  if (m->deleter) m->deleter(m);
}

tg_tensor *tg_from_dlpack(DLManagedTensor *m) {
  layout l;
  if (!check_managed(m, &l)) return NULL;
  const tg_device_ops *dev = tg__device_ready(import_op, l.device);
  if (!dev) return NULL;
  /* Room in the scope first: once m's ownership passed to tg, nothing may fail. */
  if (tg__scope_reserve(1) != TG_OK) return NULL;

  int64_t offset;
  tg_storage *own = own_storage(m, &l, &offset);
  if (own) {
    tg_tensor *t = tg__tensor_new(own, offset, l.ndim, l.sizes, l.strides, l.dtype);
    if (!t) return NULL;
    m->deleter(m); /* t holds the storage now */
    return tg__scoped(t);
  }

  /* Backward over these tensors needs the engine's arithmetic, installed with a storage. */
  tg__grad_arith_install(&tg__ops_grad_arith);
  tg_storage *s = tg__storage_wrap(import_op, (void *)l.base, l.nbytes, l.device, dev->copy_bytes,
                                   release_managed, m);
  if (!s) return NULL;
  tg_tensor *t = tg__tensor_new(s, l.offset, l.ndim, l.sizes, l.strides, l.dtype);
  if (!t) s->release = NULL; /* failed: m stays the caller's */
  tg__storage_release(s);
  return t ? tg__scoped(t) : NULL;
}
