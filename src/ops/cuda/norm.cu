/* normalize_groups' CUDA kernels (src/ops/norm.c; contracts in src/ops/def/norm.def), the
 * CPU kernels' arithmetic (src/ops/cpu/norm_cpu.c): x is the contiguous [A, R, C, K], group
 * g of sample a is the run [a span + g I, a span + (g + 1) I). One thread per group for the
 * statistics and dx, per element for y, per channel for dweight and dbias; sums in double.
 * A first version: a block-wide reduction per group would use the GPU far better when the
 * groups are few and large (batch_norm). */
#include "elementwise.cuh"
#include "ops.cuh"

namespace {

struct layout {
  int64_t A, C, K, G, I, span;
};

TG_HOST_DEVICE int64_t channel_of(const layout &l, int64_t g, int64_t i) {
  return ((g * l.I + i) / l.K) % l.C;
}

template <typename T> __global__ void stats_kernel(layout l, T *mean, T *var, const T *x) {
  TG_CU_GRID_STRIDE(g, l.G) {
    const double n = double(l.A * l.I);
    double sum = 0, sq = 0;
    for (int64_t a = 0; a < l.A; a++)
      for (int64_t i = 0; i < l.I; i++) sum += double(x[a * l.span + g * l.I + i]);
    const double m = sum / n;
    for (int64_t a = 0; a < l.A; a++)
      for (int64_t i = 0; i < l.I; i++) {
        const double d = double(x[a * l.span + g * l.I + i]) - m;
        sq += d * d;
      }
    mean[g] = T(m);
    var[g] = T(sq / n);
  }
}

template <typename T>
__global__ void apply_kernel(layout l, T *y, const T *x, const T *mean, const T *rstd, const T *w,
                             const T *b) {
  TG_CU_GRID_STRIDE(e, l.A * l.span) {
    const int64_t p = e % l.span, g = p / l.I, c = channel_of(l, g, p % l.I);
    y[e] = (x[e] - mean[g]) * rstd[g] * w[c] + b[c];
  }
}

template <typename T>
__global__ void backward_kernel(layout l, T *dx, const T *dy, const T *x, const T *mean,
                                const T *rstd, const T *w) {
  TG_CU_GRID_STRIDE(g, l.G) {
    const double n = double(l.A * l.I), m = double(mean[g]), s = double(rstd[g]);
    double sum_e = 0, sum_eh = 0;
    for (int64_t a = 0; a < l.A; a++)
      for (int64_t i = 0; i < l.I; i++) {
        const int64_t at = a * l.span + g * l.I + i;
        const double e = double(dy[at]) * double(w[channel_of(l, g, i)]);
        sum_e += e;
        sum_eh += e * (double(x[at]) - m) * s;
      }
    for (int64_t a = 0; a < l.A; a++)
      for (int64_t i = 0; i < l.I; i++) {
        const int64_t at = a * l.span + g * l.I + i;
        const double e = double(dy[at]) * double(w[channel_of(l, g, i)]);
        const double h = (double(x[at]) - m) * s;
        dx[at] = T(s / n * (n * e - sum_e - h * sum_eh));
      }
  }
}

template <typename T>
__global__ void affine_grad_kernel(layout l, T *dw, T *db, const T *dy, const T *x, const T *mean,
                                   const T *rstd) {
  TG_CU_GRID_STRIDE(c, l.C) {
    const int64_t reps = l.span / (l.C * l.K);
    double sum_w = 0, sum_b = 0;
    for (int64_t a = 0; a < l.A; a++)
      for (int64_t r = 0; r < reps; r++)
        for (int64_t k = 0; k < l.K; k++) {
          const int64_t p = (r * l.C + c) * l.K + k, g = p / l.I, e = a * l.span + p;
          const double d = double(dy[e]);
          sum_w += d * (double(x[e]) - double(mean[g])) * double(rstd[g]);
          sum_b += d;
        }
    dw[c] = T(sum_w);
    db[c] = T(sum_b);
  }
}

/* Views of t[0..n) (one CUDA device, one floating dtype), the layout from x's view [A, R,
 * C, K] and the [G] view, and the device to launch on. */
tg_status prepare(const char *op, int n, tg_tensor *const *t, int x, int groups, tg_cu_view *v,
                  layout *l, tg_cu_device **dev) {
  tg_status st = tg_cu_views_floating(op, n, (const tg_tensor *const *)t, v);
  if (st != TG_OK) return st;
  l->A = v[x].sizes[0];
  l->C = v[x].sizes[2];
  l->K = v[x].sizes[3];
  l->G = v[groups].sizes[0];
  l->span = v[x].sizes[1] * l->C * l->K;
  l->I = l->G ? l->span / l->G : 0;
  return tg_cu_device_get(op, v[0].device, dev);
}

} // namespace

tg_status tg__kernel_normalize_groups_stats_cuda(int n_tensors, tg_tensor *const *t) {
  TG__KERNEL_ARITY("normalize_groups.stats", n_tensors, 3);
  const char *op = "cuda.normalize_groups.stats";
  tg_cu_view v[3];
  layout l;
  tg_cu_device *dev = nullptr;
  tg_status st = prepare(op, 3, t, 2, 0, v, &l, &dev);
  if (st != TG_OK || l.G == 0) return st;
  TG_DISPATCH_FLOATING_TYPES(v[0].dtype, op, {
    TG_CU_LAUNCH(op, l.G, dev->stream, stats_kernel<scalar_t>, l, (scalar_t *)v[0].data,
                 (scalar_t *)v[1].data, (const scalar_t *)v[2].data);
  });
  return TG_OK;
}

tg_status tg__kernel_normalize_groups_apply_cuda(int n_tensors, tg_tensor *const *t) {
  TG__KERNEL_ARITY("normalize_groups.apply", n_tensors, 6);
  const char *op = "cuda.normalize_groups.apply";
  tg_cu_view v[6];
  layout l;
  tg_cu_device *dev = nullptr;
  tg_status st = prepare(op, 6, t, 1, 2, v, &l, &dev);
  if (st != TG_OK || l.A * l.span == 0) return st;
  TG_DISPATCH_FLOATING_TYPES(v[0].dtype, op, {
    TG_CU_LAUNCH(op, l.A * l.span, dev->stream, apply_kernel<scalar_t>, l, (scalar_t *)v[0].data,
                 (const scalar_t *)v[1].data, (const scalar_t *)v[2].data,
                 (const scalar_t *)v[3].data, (const scalar_t *)v[4].data,
                 (const scalar_t *)v[5].data);
  });
  return TG_OK;
}

tg_status tg__kernel_normalize_groups_backward_cuda(int n_tensors, tg_tensor *const *t) {
  TG__KERNEL_ARITY("normalize_groups.backward", n_tensors, 6);
  const char *op = "cuda.normalize_groups.backward";
  tg_cu_view v[6];
  layout l;
  tg_cu_device *dev = nullptr;
  tg_status st = prepare(op, 6, t, 2, 3, v, &l, &dev);
  if (st != TG_OK || l.A * l.span == 0) return st;
  TG_DISPATCH_FLOATING_TYPES(v[0].dtype, op, {
    TG_CU_LAUNCH(op, l.G, dev->stream, backward_kernel<scalar_t>, l, (scalar_t *)v[0].data,
                 (const scalar_t *)v[1].data, (const scalar_t *)v[2].data,
                 (const scalar_t *)v[3].data, (const scalar_t *)v[4].data,
                 (const scalar_t *)v[5].data);
  });
  return TG_OK;
}

tg_status tg__kernel_normalize_groups_affine_grad_cuda(int n_tensors, tg_tensor *const *t) {
  TG__KERNEL_ARITY("normalize_groups.affine_grad", n_tensors, 6);
  const char *op = "cuda.normalize_groups.affine_grad";
  tg_cu_view v[6];
  layout l;
  tg_cu_device *dev = nullptr;
  tg_status st = prepare(op, 6, t, 3, 4, v, &l, &dev);
  if (st != TG_OK || l.C == 0) return st;
  TG_DISPATCH_FLOATING_TYPES(v[0].dtype, op, {
    TG_CU_LAUNCH(op, l.C, dev->stream, affine_grad_kernel<scalar_t>, l, (scalar_t *)v[0].data,
                 (scalar_t *)v[1].data, (const scalar_t *)v[2].data, (const scalar_t *)v[3].data,
                 (const scalar_t *)v[4].data, (const scalar_t *)v[5].data);
  });
  return TG_OK;
}
