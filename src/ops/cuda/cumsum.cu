/* cumsum's CUDA kernels (src/ops/cumsum.c; lines in src/ops/def/pointwise_extra.def): one
 * thread per line of contiguous [outer, n, inner] (an (outer, inner) pair), each summing its
 * n elements in order, so the result is the CPU kernel's bit for bit: F32 sums in double, I64
 * wraps (in uint64_t). */
#include "elementwise.cuh"
#include "ops.cuh"

namespace {

template <typename T> struct scan_acc { typedef double type; };
template <> struct scan_acc<int64_t> { typedef uint64_t type; };

template <typename T>
__global__ void scan_kernel(int64_t outer, int64_t n, int64_t inner, bool reverse, T *out,
                            const T *x) {
  typedef typename scan_acc<T>::type acc_t;
  TG_CU_GRID_STRIDE(line, outer * inner) {
    const int64_t base = (line / inner) * n * inner + line % inner;
    acc_t acc = 0;
    for (int64_t k = 0; k < n; k++) {
      const int64_t i = base + (reverse ? n - 1 - k : k) * inner;
      acc += (acc_t)x[i];
      out[i] = (T)acc;
    }
  }
}

tg_status scan(const char *op, int n_tensors, tg_tensor *const *t, bool reverse) {
  TG__KERNEL_ARITY(op, n_tensors, 2);
  tg_cu_view v[2];
  tg_status st = tg_cu_views_of(op, 2, (const tg_tensor *const *)t, v);
  if (st != TG_OK) return st;
  if (v[0].dtype != v[1].dtype)
    return tg_set_error(TG_ERR_DTYPE, "%s: out is %s but x %s", op, tg_dtype_name(v[0].dtype),
                        tg_dtype_name(v[1].dtype));
  const int64_t outer = v[1].sizes[0], n = v[1].sizes[1], inner = v[1].sizes[2];
  if (outer * n * inner == 0) return TG_OK;
  tg_cu_device *dev = nullptr;
  if ((st = tg_cu_device_get(op, v[0].device, &dev)) != TG_OK) return st;
  TG_DISPATCH_ALL_TYPES(v[0].dtype, op, {
    TG_CU_LAUNCH(op, outer * inner, dev->stream, scan_kernel<scalar_t>, outer, n, inner, reverse,
                 (scalar_t *)v[0].data, (const scalar_t *)v[1].data);
  });
  return TG_OK;
}

} // namespace

tg_status tg__kernel_cumsum_scan_cuda(int n_tensors, tg_tensor *const *t) {
  return scan("cuda.cumsum.scan", n_tensors, t, false);
}

tg_status tg__kernel_cumsum_reverse_scan_cuda(int n_tensors, tg_tensor *const *t) {
  return scan("cuda.cumsum.reverse_scan", n_tensors, t, true);
}
