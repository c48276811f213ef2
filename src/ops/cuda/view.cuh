/* A tensor as the CUDA kernels see it: the device address of element 0, dtype, device
 * and geometry (in elements). Taken from tensors through the public accessors, so the
 * kernels do not depend on the core's internal layout; narrowed and transposed freely for
 * the GEMMs and the fused LLTM. */
#ifndef TG_CUDA_VIEW_CUH
#define TG_CUDA_VIEW_CUH

#include "cuda_common.cuh"

typedef struct tg_cu_view {
  char *data;
  tg_dtype dtype;
  int device;
  int ndim;
  int64_t sizes[TG_MAX_DIMS];
  int64_t strides[TG_MAX_DIMS];
} tg_cu_view;

static inline tg_cu_view tg_cu_view_of(const tg_tensor *t) {
  tg_cu_view v;
  v.data = (char *)tg_data_ptr(t);
  v.dtype = tg_tensor_dtype(t);
  v.device = tg_tensor_device(t).index;
  v.ndim = tg_ndim(t);
  for (int d = 0; d < v.ndim; d++) {
    v.sizes[d] = tg_sizes(t)[d];
    v.strides[d] = tg_strides(t)[d];
  }
  return v;
}

/* A contiguous view over a buffer. */
static inline tg_cu_view tg_cu_view_dense(void *data, tg_dtype dtype, int device, int ndim,
                                          const int64_t *sizes) {
  tg_cu_view v;
  v.data = (char *)data;
  v.dtype = dtype;
  v.device = device;
  v.ndim = ndim;
  int64_t stride = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    v.sizes[d] = sizes[d];
    v.strides[d] = stride;
    stride *= sizes[d];
  }
  return v;
}

static inline int64_t tg_cu_numel(const tg_cu_view &v) {
  int64_t n = 1;
  for (int d = 0; d < v.ndim; d++) n *= v.sizes[d];
  return n;
}

static inline size_t tg_cu_nbytes(const tg_cu_view &v) {
  return (size_t)tg_cu_numel(v) * tg_dtype_size(v.dtype);
}

static inline tg_cu_view tg_cu_narrow(tg_cu_view v, int dim, int64_t start, int64_t length) {
  v.data += start * v.strides[dim] * (int64_t)tg_dtype_size(v.dtype);
  v.sizes[dim] = length;
  return v;
}

static inline tg_cu_view tg_cu_transpose(tg_cu_view v, int d0, int d1) {
  int64_t s = v.sizes[d0], st = v.strides[d0];
  v.sizes[d0] = v.sizes[d1];
  v.strides[d0] = v.strides[d1];
  v.sizes[d1] = s;
  v.strides[d1] = st;
  return v;
}

/* v with a leading size-1 dim added and expanded to n rows (stride 0). */
static inline tg_cu_view tg_cu_expand_rows(tg_cu_view v, int64_t n) {
  for (int d = v.ndim; d > 0; d--) {
    v.sizes[d] = v.sizes[d - 1];
    v.strides[d] = v.strides[d - 1];
  }
  v.sizes[0] = n;
  v.strides[0] = 0;
  v.ndim++;
  return v;
}

#endif
