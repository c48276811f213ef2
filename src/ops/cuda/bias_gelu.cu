/* bias_gelu's CUDA kernels (src/ops/bias_gelu.c; lines in src/ops/def/pointwise.def): one
 * thread per element of contiguous [m, n], grid-stride. The math is the CPU kernels'
 * (src/ops/cpu/bias_gelu_cpu.c): GELU's tanh form and its derivative. */
#include "elementwise.cuh"
#include "ops.cuh"

namespace {

template <typename T> TG_HOST_DEVICE T gelu_tanh_of(T z) {
  return tanh(T(0.7978845608028654) * (z + T(0.044715) * z * z * z));
}

template <typename T>
__global__ void forward_kernel(int64_t m, int64_t n, T *y, const T *x, const T *bias) {
  TG_CU_GRID_STRIDE(e, m * n) {
    const T z = x[e] + bias[e % n];
    y[e] = T(0.5) * z * (T(1) + gelu_tanh_of(z));
  }
}

template <typename T>
__global__ void backward_kernel(int64_t m, int64_t n, T *dx, const T *g, const T *x,
                                const T *bias) {
  TG_CU_GRID_STRIDE(e, m * n) {
    const T z = x[e] + bias[e % n], th = gelu_tanh_of(z);
    dx[e] = g[e] * (T(0.5) * (T(1) + th) + T(0.5) * z * (T(1) - th * th) * T(0.7978845608028654) *
                                               (T(1) + T(3) * T(0.044715) * z * z));
  }
}

/* Views of t[0..n), all on one CUDA device, one floating dtype; m, n from t[first_x]. */
tg_status views_of(const char *op, int n, tg_tensor *const *t, tg_cu_view *v) {
  tg_status st = tg_cu_views_of(op, n, (const tg_tensor *const *)t, v);
  if (st != TG_OK) return st;
  for (int i = 1; i < n; i++)
    if (v[i].dtype != v[0].dtype)
      return tg_set_error(TG_ERR_DTYPE, "%s: tensors are %s and %s", op, tg_dtype_name(v[0].dtype),
                          tg_dtype_name(v[i].dtype));
  return TG_OK;
}

} // namespace

tg_status tg__kernel_bias_gelu_forward_cuda(int n_tensors, tg_tensor *const *t) {
  TG__KERNEL_ARITY("bias_gelu.forward", n_tensors, 3);
  const char *op = "cuda.bias_gelu.forward";
  tg_cu_view v[3];
  tg_status st = views_of(op, 3, t, v);
  if (st != TG_OK) return st;
  const int64_t m = v[1].sizes[0], n = v[1].sizes[1];
  if (m * n == 0) return TG_OK;
  tg_cu_device *dev;
  if ((st = tg_cu_device_get(op, v[0].device, &dev)) != TG_OK) return st;
  TG_DISPATCH_FLOATING_TYPES(v[0].dtype, op, {
    TG_CU_LAUNCH(op, m * n, dev->stream, forward_kernel<scalar_t>, m, n, (scalar_t *)v[0].data,
                 (const scalar_t *)v[1].data, (const scalar_t *)v[2].data);
  });
  return TG_OK;
}

tg_status tg__kernel_bias_gelu_backward_cuda(int n_tensors, tg_tensor *const *t) {
  TG__KERNEL_ARITY("bias_gelu.backward", n_tensors, 4);
  const char *op = "cuda.bias_gelu.backward";
  tg_cu_view v[4];
  tg_status st = views_of(op, 4, t, v);
  if (st != TG_OK) return st;
  const int64_t m = v[2].sizes[0], n = v[2].sizes[1];
  if (m * n == 0) return TG_OK;
  tg_cu_device *dev;
  if ((st = tg_cu_device_get(op, v[0].device, &dev)) != TG_OK) return st;
  TG_DISPATCH_FLOATING_TYPES(v[0].dtype, op, {
    TG_CU_LAUNCH(op, m * n, dev->stream, backward_kernel<scalar_t>, m, n, (scalar_t *)v[0].data,
                 (const scalar_t *)v[1].data, (const scalar_t *)v[2].data,
                 (const scalar_t *)v[3].data);
  });
  return TG_OK;
}
