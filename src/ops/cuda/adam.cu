/* adam.step on CUDA (src/ops/def/optim.def): one thread per element of contiguous param,
 * grad and moments, grid-stride; the element math is the CPU kernel's (src/ops/adam_math.h). */
#include "elementwise.cuh"
#include "ops.cuh"
#include "ops/adam_math.h"

namespace {

template <typename T> struct adam_element;
template <> struct adam_element<float> {
  static TG_HOST_DEVICE void run(const tg_adam_scalars *s, float *p, float g, float *m, float *v) {
    tg_adam_element_f32(s, p, g, m, v);
  }
};
template <> struct adam_element<double> {
  static TG_HOST_DEVICE void run(const tg_adam_scalars *s, double *p, double g, double *m,
                                 double *v) {
    tg_adam_element_f64(s, p, g, m, v);
  }
};

template <typename T>
__global__ void step_kernel(int64_t n, tg_adam_scalars s, T *p, const T *g, T *m, T *v) {
  TG_CU_GRID_STRIDE(e, n) { adam_element<T>::run(&s, &p[e], g[e], &m[e], &v[e]); }
}

/* Row-major without gaps. */
bool dense(const tg_cu_view &v) {
  int64_t stride = 1;
  for (int d = v.ndim - 1; d >= 0; d--) {
    if (v.sizes[d] != 1 && v.strides[d] != stride) return false;
    stride *= v.sizes[d];
  }
  return true;
}

} // namespace

tg_status tg__kernel_adam_step_cuda(int n_tensors, tg_tensor *const *t) {
  TG__KERNEL_ARITY("adam.step", n_tensors, 5);
  const char *op = "cuda.adam.step";
  tg_cu_view v[4];
  tg_status st = tg_cu_views_floating(op, 4, (const tg_tensor *const *)t, v);
  if (st != TG_OK) return st;
  const tg_cu_view pv = tg_cu_view_of(t[4]);
  if (pv.dtype != TG_F64 || pv.ndim != 1 || pv.sizes[0] != TG_ADAM_NUM_PARAMS ||
      tg_tensor_device(t[4]).type != TG_CPU)
    return tg_set_error(TG_ERR_ARGUMENT, "%s: params must be a host F64 [%d]", op,
                        (int)TG_ADAM_NUM_PARAMS);
  const tg_adam_scalars s = tg_adam_scalars_read((const double *)pv.data);
  const int64_t n = tg_cu_numel(v[0]);
  for (int k = 0; k < 4; k++) /* the kernel reads each as param's flat elements */
    if (tg_cu_numel(v[k]) != n || !dense(v[k]))
      return tg_set_error(TG_ERR_ARGUMENT,
                          "%s: tensor %d must be contiguous with %lld elements, as param", op, k,
                          (long long)n);
  if (n == 0) return TG_OK;
  tg_cu_device *dev = nullptr;
  st = tg_cu_device_get(op, v[0].device, &dev);
  if (st != TG_OK) return st;
  TG_DISPATCH_FLOATING_TYPES(v[0].dtype, op, {
    TG_CU_LAUNCH(op, n, dev->stream, step_kernel<scalar_t>, n, s, (scalar_t *)v[0].data,
                 (const scalar_t *)v[1].data, (scalar_t *)v[2].data, (scalar_t *)v[3].data);
  });
  return TG_OK;
}
