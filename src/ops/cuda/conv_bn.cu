/* conv2d_batch_norm's CUDA kernels (src/ops/conv_bn.c; lines in src/ops/def/conv_bn.def), over
 * contiguous planes [n, c, l] and [c] vectors. The per-channel sums run one thread per channel
 * (each channel summed in the CPU kernels' order, in double: the same values as the CPU up to
 * the last bit of F32's final rounding); the pointwise passes one thread per element,
 * grid-stride. A block-per-channel tree reduction would be faster on a GPU with few channels;
 * the emulation runs these as written. */
#include "elementwise.cuh"
#include "ops.cuh"

namespace {

template <typename T>
__global__ void stats_kernel(int64_t n, int64_t c, int64_t l, T *mean, T *m2, const T *y) {
  TG_CU_GRID_STRIDE(ch, c) {
    double sum = 0, sq = 0;
    for (int64_t b = 0; b < n; b++)
      for (int64_t i = 0; i < l; i++) sum += (double)y[(b * c + ch) * l + i];
    const double m = sum / (double)(n * l);
    for (int64_t b = 0; b < n; b++)
      for (int64_t i = 0; i < l; i++) {
        const double d = (double)y[(b * c + ch) * l + i] - m;
        sq += d * d;
      }
    mean[ch] = T(m);
    m2[ch] = T(sq);
  }
}

template <typename T>
__global__ void sums_kernel(int64_t n, int64_t c, int64_t l, T *s1, T *s2, const T *grad,
                            const T *y, const T *mean) {
  TG_CU_GRID_STRIDE(ch, c) {
    double a = 0, b2 = 0;
    const double m = (double)mean[ch];
    for (int64_t b = 0; b < n; b++)
      for (int64_t i = 0; i < l; i++) {
        const int64_t at = (b * c + ch) * l + i;
        a += (double)grad[at];
        b2 += (double)grad[at] * ((double)y[at] - m);
      }
    s1[ch] = T(a);
    s2[ch] = T(b2);
  }
}

template <typename T>
__global__ void affine_kernel(int64_t total, int64_t c, int64_t l, T *out, const T *y, const T *a,
                              const T *b) {
  TG_CU_GRID_STRIDE(e, total) {
    const int64_t ch = (e / l) % c;
    out[e] = y[e] * a[ch] + b[ch];
  }
}

template <typename T>
__global__ void apply_kernel(int64_t total, int64_t c, int64_t l, T *dy, const T *grad, const T *y,
                             const T *k1, const T *k2, const T *k3) {
  TG_CU_GRID_STRIDE(e, total) {
    const int64_t ch = (e / l) % c;
    dy[e] = grad[e] * k1[ch] + y[e] * k2[ch] + k3[ch];
  }
}

/* Views of t[0..n) (one CUDA device, one floating dtype), the planes' [n, c, l] from the view
 * at planes, and the device to launch on (not when there is nothing to do). */
tg_status prepare(const char *op, int n_tensors, tg_tensor *const *t, int planes, tg_cu_view *v,
                  int64_t *dims, tg_cu_device **dev) {
  tg_status st = tg_cu_views_floating(op, n_tensors, (const tg_tensor *const *)t, v);
  if (st != TG_OK) return st;
  for (int d = 0; d < 3; d++) dims[d] = v[planes].sizes[d];
  return dims[0] * dims[1] * dims[2] == 0 ? TG_OK : tg_cu_device_get(op, v[0].device, dev);
}

} // namespace

tg_status tg__kernel_conv2d_batch_norm_channel_stats_cuda(int n_tensors, tg_tensor *const *t) {
  TG__KERNEL_ARITY("conv2d_batch_norm.channel_stats", n_tensors, 3);
  const char *op = "cuda.conv2d_batch_norm.channel_stats";
  tg_cu_view v[3];
  int64_t d[3];
  tg_cu_device *dev = nullptr;
  tg_status st = prepare(op, 3, t, 2, v, d, &dev);
  if (st != TG_OK || !dev) return st;
  TG_DISPATCH_FLOATING_TYPES(v[0].dtype, op, {
    TG_CU_LAUNCH(op, d[1], dev->stream, stats_kernel<scalar_t>, d[0], d[1], d[2],
                 (scalar_t *)v[0].data, (scalar_t *)v[1].data, (const scalar_t *)v[2].data);
  });
  return TG_OK;
}

tg_status tg__kernel_conv2d_batch_norm_channel_affine_cuda(int n_tensors, tg_tensor *const *t) {
  TG__KERNEL_ARITY("conv2d_batch_norm.channel_affine", n_tensors, 4);
  const char *op = "cuda.conv2d_batch_norm.channel_affine";
  tg_cu_view v[4];
  int64_t d[3];
  tg_cu_device *dev = nullptr;
  tg_status st = prepare(op, 4, t, 1, v, d, &dev);
  if (st != TG_OK || !dev) return st;
  const int64_t total = d[0] * d[1] * d[2];
  TG_DISPATCH_FLOATING_TYPES(v[0].dtype, op, {
    TG_CU_LAUNCH(op, total, dev->stream, affine_kernel<scalar_t>, total, d[1], d[2],
                 (scalar_t *)v[0].data, (const scalar_t *)v[1].data, (const scalar_t *)v[2].data,
                 (const scalar_t *)v[3].data);
  });
  return TG_OK;
}

tg_status tg__kernel_conv2d_batch_norm_backward_sums_cuda(int n_tensors, tg_tensor *const *t) {
  TG__KERNEL_ARITY("conv2d_batch_norm.backward_sums", n_tensors, 5);
  const char *op = "cuda.conv2d_batch_norm.backward_sums";
  tg_cu_view v[5];
  int64_t d[3];
  tg_cu_device *dev = nullptr;
  tg_status st = prepare(op, 5, t, 2, v, d, &dev);
  if (st != TG_OK || !dev) return st;
  TG_DISPATCH_FLOATING_TYPES(v[0].dtype, op, {
    TG_CU_LAUNCH(op, d[1], dev->stream, sums_kernel<scalar_t>, d[0], d[1], d[2],
                 (scalar_t *)v[0].data, (scalar_t *)v[1].data, (const scalar_t *)v[2].data,
                 (const scalar_t *)v[3].data, (const scalar_t *)v[4].data);
  });
  return TG_OK;
}

tg_status tg__kernel_conv2d_batch_norm_backward_apply_cuda(int n_tensors, tg_tensor *const *t) {
  TG__KERNEL_ARITY("conv2d_batch_norm.backward_apply", n_tensors, 6);
  const char *op = "cuda.conv2d_batch_norm.backward_apply";
  tg_cu_view v[6];
  int64_t d[3];
  tg_cu_device *dev = nullptr;
  tg_status st = prepare(op, 6, t, 1, v, d, &dev);
  if (st != TG_OK || !dev) return st;
  const int64_t total = d[0] * d[1] * d[2];
  TG_DISPATCH_FLOATING_TYPES(v[0].dtype, op, {
    TG_CU_LAUNCH(op, total, dev->stream, apply_kernel<scalar_t>, total, d[1], d[2],
                 (scalar_t *)v[0].data, (const scalar_t *)v[1].data, (const scalar_t *)v[2].data,
                 (const scalar_t *)v[3].data, (const scalar_t *)v[4].data,
                 (const scalar_t *)v[5].data);
  });
  return TG_OK;
}
