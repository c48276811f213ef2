/* The pooling ops' CUDA kernels (src/ops/pool.c, pool_gather.c; lines in src/ops/def/pool.def):
 * one thread per output element (plane, o) walking o's window map. The max and the sum match
 * the CPU kernels (src/ops/cpu/pool_cpu.c) element for element, in the same order; the scatter
 * adds with atomicAdd (windows overlap), so the order of its sums, and their last bits, may
 * differ from run to run. */
#include <math.h>

#include "elementwise.cuh"
#include "ops.cuh"

namespace {

/* M outputs per plane, K entries per window, L inputs per plane, the map's planes (1: one
 * map shared by every plane). */
struct pool_geometry {
  int64_t planes, M, K, L, map_planes;
};

TG_HOST_DEVICE inline const int64_t *plane_map(const pool_geometry &g, const int64_t *map,
                                               int64_t plane) {
  return map + (g.map_planes == 1 ? 0 : plane * g.M * g.K);
}

template <typename T>
__global__ void sum_kernel(pool_geometry g, T *out, const T *x, const int64_t *map,
                           const T *divisor) {
  TG_CU_GRID_STRIDE(e, g.planes * g.M) {
    const int64_t plane = e / g.M, o = e % g.M;
    const int64_t *m = plane_map(g, map, plane) + o * g.K;
    const T *xp = x + plane * g.L;
    T sum = divisor ? T(0) : -T(0); /* -0 without a divisor: the identity that copies -0 */
    for (int64_t k = 0; k < g.K; k++)
      if (m[k] >= 0) sum += xp[m[k]];
    out[e] = divisor ? sum / divisor[o] : sum;
  }
}

template <typename T>
__global__ void scatter_kernel(pool_geometry g, T *out, const T *grad, const int64_t *map,
                               const T *divisor) {
  TG_CU_GRID_STRIDE(e, g.planes * g.M) {
    const int64_t plane = e / g.M, o = e % g.M;
    const int64_t *m = plane_map(g, map, plane) + o * g.K;
    const T share = divisor ? grad[e] / divisor[o] : grad[e];
    for (int64_t k = 0; k < g.K; k++)
      if (m[k] >= 0) atomicAdd(&out[plane * g.L + m[k]], share);
  }
}

/* PyTorch's CPU rule: a greater element or a NaN replaces the best (v != v: NaN). */
template <typename T>
__global__ void max_kernel(pool_geometry g, T *out, int64_t *indices, const T *x,
                           const int64_t *map) {
  TG_CU_GRID_STRIDE(e, g.planes * g.M) {
    const int64_t plane = e / g.M, o = e % g.M;
    const int64_t *m = map + o * g.K;
    const T *xp = x + plane * g.L;
    T best = -T(INFINITY);
    int64_t best_at = -1;
    for (int64_t k = 0; k < g.K; k++) {
      const int64_t at = m[k];
      if (at < 0) continue;
      if (best_at < 0) best_at = at;
      const T v = xp[at];
      if (v > best || v != v) best = v, best_at = at;
    }
    out[e] = best;
    indices[e] = best_at;
  }
}

/* Views of the four tensors (data operands of one floating dtype, the map I64), the geometry
 * and the device (not needed when there is nothing to do). out_at, in_at: the [P, *] operands
 * whose second sizes are M and L. */
tg_status prepare(const char *op, tg_tensor *const *t, int data_a, int data_b, int map_at,
                  int m_from, int l_from, tg_cu_view *v, pool_geometry *g, tg_cu_device **dev) {
  /* the divisor (t[3] of the sum and the scatter) may be NULL: views of the others */
  const tg_tensor *present[4];
  int at[4], n = 0;
  for (int i = 0; i < 4; i++)
    if (t[i]) present[n] = t[i], at[n++] = i;
  tg_cu_view got[4];
  tg_status st = tg_cu_views_of(op, n, present, got);
  if (st != TG_OK) return st;
  v[3].data = nullptr;
  for (int i = 0; i < n; i++) v[at[i]] = got[i];
  if ((v[data_a].dtype != TG_F32 && v[data_a].dtype != TG_F64) ||
      v[data_b].dtype != v[data_a].dtype)
    return tg_set_error(TG_ERR_DTYPE, "%s: dtypes %s and %s (F32 or F64, equal)", op,
                        tg_dtype_name(v[data_a].dtype), tg_dtype_name(v[data_b].dtype));
  if (v[map_at].dtype != TG_I64)
    return tg_set_error(TG_ERR_DTYPE, "%s: map is %s, not I64", op, tg_dtype_name(v[map_at].dtype));
  const tg_cu_view &map = v[map_at];
  *g = pool_geometry{v[0].sizes[0], v[m_from].sizes[1], map.sizes[map.ndim - 1], v[l_from].sizes[1],
                     map.ndim == 3 ? map.sizes[0] : 1};
  return g->planes * g->M == 0 ? TG_OK : tg_cu_device_get(op, v[0].device, dev);
}

} // namespace

tg_status tg__kernel_pool_gather_window_sum_cuda(int n, tg_tensor *const *t) {
  TG__KERNEL_ARITY("pool_gather.window_sum", n, 4);
  const char *op = "cuda.pool_gather.window_sum";
  tg_cu_view v[4];
  pool_geometry g;
  tg_cu_device *dev = nullptr;
  tg_status st = prepare(op, t, 0, 1, 2, 0, 1, v, &g, &dev);
  if (st != TG_OK || g.planes * g.M == 0) return st;
  TG_DISPATCH_FLOATING_TYPES(v[0].dtype, op, {
    TG_CU_LAUNCH(op, g.planes * g.M, dev->stream, sum_kernel<scalar_t>, g, (scalar_t *)v[0].data,
                 (const scalar_t *)v[1].data, (const int64_t *)v[2].data,
                 (const scalar_t *)v[3].data); /* NULL: no divisor */
  });
  return TG_OK;
}

tg_status tg__kernel_pool_scatter_window_scatter_cuda(int n, tg_tensor *const *t) {
  TG__KERNEL_ARITY("pool_scatter.window_scatter", n, 4);
  const char *op = "cuda.pool_scatter.window_scatter";
  tg_cu_view v[4];
  pool_geometry g;
  tg_cu_device *dev = nullptr;
  tg_status st = prepare(op, t, 0, 1, 2, 1, 0, v, &g, &dev);
  if (st != TG_OK || g.planes * g.M == 0) return st;
  TG_DISPATCH_FLOATING_TYPES(v[0].dtype, op, {
    TG_CU_LAUNCH(op, g.planes * g.M, dev->stream, scatter_kernel<scalar_t>, g,
                 (scalar_t *)v[0].data, (const scalar_t *)v[1].data, (const int64_t *)v[2].data,
                 (const scalar_t *)v[3].data);
  });
  return TG_OK;
}

tg_status tg__kernel_max_pool2d_window_max_cuda(int n, tg_tensor *const *t) {
  TG__KERNEL_ARITY("max_pool2d.window_max", n, 4);
  const char *op = "cuda.max_pool2d.window_max";
  tg_cu_view v[4];
  pool_geometry g;
  tg_cu_device *dev = nullptr;
  tg_status st = prepare(op, t, 0, 2, 3, 0, 2, v, &g, &dev);
  if (st == TG_OK && v[1].dtype != TG_I64)
    st = tg_set_error(TG_ERR_DTYPE, "%s: indices are %s, not I64", op, tg_dtype_name(v[1].dtype));
  if (st != TG_OK || g.planes * g.M == 0) return st;
  TG_DISPATCH_FLOATING_TYPES(v[0].dtype, op, {
    TG_CU_LAUNCH(op, g.planes * g.M, dev->stream, max_kernel<scalar_t>, g, (scalar_t *)v[0].data,
                 (int64_t *)v[1].data, (const scalar_t *)v[2].data, (const int64_t *)v[3].data);
  });
  return TG_OK;
}

/* pool_gather.window_sum under the ops that run it (src/ops/def/pool.def) */
#define SAME_AS_WINDOW_SUM(op)                                                                     \
  tg_status tg__kernel_##op##_window_sum_cuda(int n, tg_tensor *const *t) {                        \
    return tg__kernel_pool_gather_window_sum_cuda(n, t);                                           \
  }
SAME_AS_WINDOW_SUM(avg_pool2d)
SAME_AS_WINDOW_SUM(adaptive_avg_pool2d)
SAME_AS_WINDOW_SUM(pad)
