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

/* What both kernels do first: views of t[0..n) (one CUDA device, one floating dtype), x's
 * [m, n] from the view at x, and the device to launch on (not when m * n is 0). */
tg_status prepare(const char *op, int n_tensors, tg_tensor *const *t, int x, tg_cu_view *v,
                  int64_t *m, int64_t *n, tg_cu_device **dev) {
  tg_status st = tg_cu_views_floating(op, n_tensors, (const tg_tensor *const *)t, v);
  if (st != TG_OK) return st;
  *m = v[x].sizes[0];
  *n = v[x].sizes[1];
  return *m * *n == 0 ? TG_OK : tg_cu_device_get(op, v[0].device, dev);
}

} // namespace

tg_status tg__kernel_bias_gelu_forward_cuda(int n_tensors, tg_tensor *const *t) {
  TG__KERNEL_ARITY("bias_gelu.forward", n_tensors, 3);
  const char *op = "cuda.bias_gelu.forward";
  tg_cu_view v[3];
  int64_t m, n;
  tg_cu_device *dev = nullptr;
  tg_status st = prepare(op, 3, t, 1, v, &m, &n, &dev);
  if (st != TG_OK || m * n == 0) return st;
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
  int64_t m, n;
  tg_cu_device *dev = nullptr;
  tg_status st = prepare(op, 4, t, 2, v, &m, &n, &dev);
  if (st != TG_OK || m * n == 0) return st;
  TG_DISPATCH_FLOATING_TYPES(v[0].dtype, op, {
    TG_CU_LAUNCH(op, m * n, dev->stream, backward_kernel<scalar_t>, m, n, (scalar_t *)v[0].data,
                 (const scalar_t *)v[1].data, (const scalar_t *)v[2].data,
                 (const scalar_t *)v[3].data);
  });
  return TG_OK;
}
