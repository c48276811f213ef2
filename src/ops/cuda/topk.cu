/* topk's CUDA kernels (src/ops/def/index.def): one thread per row of x [R, N], running the
 * heap selection the CPU runs (src/ops/topk_row.h) in its own rows of values and indices, so
 * both devices give the same k, in the same order, ties included. A row is sequential
 * (O(N log k) on one thread): right for the many short rows of sampling, not tuned for one
 * long row. */
#include "elementwise.cuh"
#include "ops.cuh"
#include "ops/topk_row.h"

namespace {

template <typename T> TG_HOST_DEVICE inline bool is_nan(T a) { return a != a; }
template <> TG_HOST_DEVICE inline bool is_nan<int64_t>(int64_t) { return false; }

TG_TOPK_ROW_DEFINE(largest_f32, float, 1, is_nan)
TG_TOPK_ROW_DEFINE(largest_f64, double, 1, is_nan)
TG_TOPK_ROW_DEFINE(largest_i64, int64_t, 1, is_nan)
TG_TOPK_ROW_DEFINE(smallest_f32, float, 0, is_nan)
TG_TOPK_ROW_DEFINE(smallest_f64, double, 0, is_nan)
TG_TOPK_ROW_DEFINE(smallest_i64, int64_t, 0, is_nan)

TG_HOST_DEVICE inline void select_row(bool largest, const float *x, int64_t xs, int64_t n,
                                      int64_t k, float *v, int64_t vs, int64_t *ix, int64_t is) {
  largest ? largest_f32(x, xs, n, k, v, vs, ix, is) : smallest_f32(x, xs, n, k, v, vs, ix, is);
}
TG_HOST_DEVICE inline void select_row(bool largest, const double *x, int64_t xs, int64_t n,
                                      int64_t k, double *v, int64_t vs, int64_t *ix, int64_t is) {
  largest ? largest_f64(x, xs, n, k, v, vs, ix, is) : smallest_f64(x, xs, n, k, v, vs, ix, is);
}
TG_HOST_DEVICE inline void select_row(bool largest, const int64_t *x, int64_t xs, int64_t n,
                                      int64_t k, int64_t *v, int64_t vs, int64_t *ix, int64_t is) {
  largest ? largest_i64(x, xs, n, k, v, vs, ix, is) : smallest_i64(x, xs, n, k, v, vs, ix, is);
}

struct topk_geometry {
  int64_t rows, n, k, vs0, vs1, is0, is1, xs0, xs1;
};

template <typename T>
__global__ void topk_kernel(topk_geometry g, bool largest, T *values, int64_t *indices,
                            const T *x) {
  TG_CU_GRID_STRIDE(r, g.rows) {
    select_row(largest, x + r * g.xs0, g.xs1, g.n, g.k, values + r * g.vs0, g.vs1,
               indices + r * g.is0, g.is1);
  }
}

tg_status launch_topk(const char *op, bool largest, tg_tensor *const *t) {
  tg_cu_view v[3];
  tg_status st = tg_cu_views_of(op, 3, (const tg_tensor *const *)t, v);
  if (st != TG_OK) return st;
  if (v[0].dtype != v[2].dtype || v[1].dtype != TG_I64)
    return tg_set_error(TG_ERR_DTYPE, "%s: values %s, indices %s for x %s (x's dtype and I64)", op,
                        tg_dtype_name(v[0].dtype), tg_dtype_name(v[1].dtype),
                        tg_dtype_name(v[2].dtype));
  if (v[0].ndim != 2 || v[1].ndim != 2 || v[2].ndim != 2 || v[0].sizes[0] != v[2].sizes[0] ||
      v[1].sizes[0] != v[2].sizes[0] || v[0].sizes[1] != v[1].sizes[1] ||
      v[0].sizes[1] > v[2].sizes[1])
    return tg_set_error(TG_ERR_SHAPE, "%s: expects values [R, k], indices [R, k], x [R, N], k <= N",
                        op);
  const topk_geometry g{v[2].sizes[0],   v[2].sizes[1],   v[0].sizes[1],
                        v[0].strides[0], v[0].strides[1], v[1].strides[0],
                        v[1].strides[1], v[2].strides[0], v[2].strides[1]};
  if (g.rows * g.k == 0) return TG_OK;
  tg_cu_device *dev;
  if ((st = tg_cu_device_get(op, v[0].device, &dev)) != TG_OK) return st;
  TG_DISPATCH_ALL_TYPES(v[0].dtype, op, {
    TG_CU_LAUNCH(op, g.rows, dev->stream, topk_kernel<scalar_t>, g, largest, (scalar_t *)v[0].data,
                 (int64_t *)v[1].data, (const scalar_t *)v[2].data);
  });
  return TG_OK;
}

} // namespace

tg_status tg__kernel_topk_largest_cuda(int n, tg_tensor *const *t) {
  TG__KERNEL_ARITY("topk.largest", n, 3);
  return launch_topk("cuda.topk.largest", true, t);
}

tg_status tg__kernel_topk_smallest_cuda(int n, tg_tensor *const *t) {
  TG__KERNEL_ARITY("topk.smallest", n, 3);
  return launch_topk("cuda.topk.smallest", false, t);
}
