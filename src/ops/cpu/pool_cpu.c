/* The pooling ops' CPU kernels (src/ops/pool.c, pool_gather.c; lines in src/ops/def/pool.def):
 * loops over window maps, the planes (N * C) split among the pool's threads. Each plane is
 * one thread's, so the scatter adds without races, in map order, the same for any thread
 * count. Every operand is contiguous (the ops make them so). */
#include <math.h>
#include <string.h>

#include "ops/cpu/cpu_internal.h"
#include "ops/cpu/thread_pool.h"

/* One pass: out [P, M] or [P, L], in [P, L] or [P, M], the map [mp, M, K] (mp 1: one map
 * for every plane), the divisor [M]; indices [P, M] for the max. */
typedef struct pool_pass {
  void *out;
  int64_t *indices;
  const void *in, *divisor;
  const int64_t *map;
  int64_t M, K, L, map_planes;
} pool_pass;

static const int64_t *plane_map(const pool_pass *p, int64_t plane) {
  return p->map + (p->map_planes == 1 ? 0 : plane * p->M * p->K);
}

/* out[p, o] = sum of x[p, map[o, k]] over the entries, / divisor[o] (PyTorch: sum from +0,
 * then divide); without a divisor the sum from -0, the identity that copies -0 too. */
#define POOL_SUM_PLANES(name, T)                                                                   \
  static void name(int64_t p0, int64_t p1, void *ctx) {                                            \
    const pool_pass *p = ctx;                                                                      \
    const T *div = p->divisor;                                                                     \
    for (int64_t plane = p0; plane < p1; plane++) {                                                \
      const T *x = (const T *)p->in + plane * p->L;                                                \
      T *out = (T *)p->out + plane * p->M;                                                         \
      const int64_t *map = plane_map(p, plane);                                                    \
      for (int64_t o = 0; o < p->M; o++) {                                                         \
        T sum = div ? (T)0 : -(T)0;                                                                \
        for (int64_t k = 0; k < p->K; k++) {                                                       \
          const int64_t at = map[o * p->K + k];                                                    \
          if (at >= 0) sum += x[at];                                                               \
        }                                                                                          \
        out[o] = div ? sum / div[o] : sum;                                                         \
      }                                                                                            \
    }                                                                                              \
  }
POOL_SUM_PLANES(sum_planes_f32, float)
POOL_SUM_PLANES(sum_planes_f64, double)

/* out[p, map[o, k]] += g[p, o] / divisor[o]; out zeroed by the op. */
#define POOL_SCATTER_PLANES(name, T)                                                               \
  static void name(int64_t p0, int64_t p1, void *ctx) {                                            \
    const pool_pass *p = ctx;                                                                      \
    const T *div = p->divisor;                                                                     \
    for (int64_t plane = p0; plane < p1; plane++) {                                                \
      const T *g = (const T *)p->in + plane * p->M;                                                \
      T *out = (T *)p->out + plane * p->L;                                                         \
      const int64_t *map = plane_map(p, plane);                                                    \
      for (int64_t o = 0; o < p->M; o++) {                                                         \
        const T share = div ? g[o] / div[o] : g[o];                                                \
        for (int64_t k = 0; k < p->K; k++) {                                                       \
          const int64_t at = map[o * p->K + k];                                                    \
          if (at >= 0) out[at] += share;                                                           \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
  }
POOL_SCATTER_PLANES(scatter_planes_f32, float)
POOL_SCATTER_PLANES(scatter_planes_f64, double)

/* PyTorch's CPU max pooling: start at -inf with the window's first element, take an element
 * that is greater or NaN (so a NaN wins, the last of several; equal maxima keep the first).
 * Four outputs at a time, each one's chain free of branches on the data (the selects are
 * masks): a compare's outcome on real activations is a coin toss, and with its
 * mispredictions and one output at a time this loop took ~21 ns per output of a 2x2 window,
 * 40% of train_cnn's one-thread step. UT: the unsigned integer of T's width. */
#define POOL_MAX_UPDATE(T, UT, best, best_at, window)                                              \
  do {                                                                                             \
    const int64_t at = (window)[k];                                                                \
    if (at >= 0) { /* padding: the same for every plane, predicted */                              \
      const T v = x[at];                                                                           \
      const int64_t better = -(int64_t)((v > best) | (v != v));                                    \
      const int64_t take = better | (best_at >> 63);                                               \
      best_at = (at & take) | (best_at & ~take);                                                   \
      UT vb, bb;                                                                                   \
      memcpy(&vb, &v, sizeof v);                                                                   \
      memcpy(&bb, &best, sizeof best);                                                             \
      bb = (vb & (UT)better) | (bb & ~(UT)better);                                                 \
      memcpy(&best, &bb, sizeof best);                                                             \
    }                                                                                              \
  } while (0)
#define POOL_MAX_PLANES(name, T, UT)                                                               \
  static void name(int64_t p0, int64_t p1, void *ctx) {                                            \
    const pool_pass *p = ctx;                                                                      \
    const int64_t K = p->K, M = p->M;                                                              \
    for (int64_t plane = p0; plane < p1; plane++) {                                                \
      const T *x = (const T *)p->in + plane * p->L;                                                \
      T *out = (T *)p->out + plane * M;                                                            \
      int64_t *indices = p->indices + plane * M;                                                   \
      int64_t o = 0;                                                                               \
      for (; o + 4 <= M; o += 4) {                                                                 \
        const int64_t *w0 = p->map + o * K, *w1 = w0 + K, *w2 = w1 + K, *w3 = w2 + K;              \
        T b0 = -(T)INFINITY, b1 = b0, b2 = b0, b3 = b0;                                            \
        int64_t a0 = -1, a1 = -1, a2 = -1, a3 = -1;                                                \
        for (int64_t k = 0; k < K; k++) {                                                          \
          POOL_MAX_UPDATE(T, UT, b0, a0, w0);                                                      \
          POOL_MAX_UPDATE(T, UT, b1, a1, w1);                                                      \
          POOL_MAX_UPDATE(T, UT, b2, a2, w2);                                                      \
          POOL_MAX_UPDATE(T, UT, b3, a3, w3);                                                      \
        }                                                                                          \
        out[o] = b0, out[o + 1] = b1, out[o + 2] = b2, out[o + 3] = b3;                            \
        indices[o] = a0, indices[o + 1] = a1, indices[o + 2] = a2, indices[o + 3] = a3;            \
      }                                                                                            \
      for (; o < M; o++) {                                                                         \
        const int64_t *w0 = p->map + o * K;                                                        \
        T b0 = -(T)INFINITY;                                                                       \
        int64_t a0 = -1;                                                                           \
        for (int64_t k = 0; k < K; k++) POOL_MAX_UPDATE(T, UT, b0, a0, w0);                        \
        out[o] = b0, indices[o] = a0;                                                              \
      }                                                                                            \
    }                                                                                              \
  }
POOL_MAX_PLANES(max_planes_f32, float, uint32_t)
POOL_MAX_PLANES(max_planes_f64, double, uint64_t)

/* Floating dtype of the data operands and I64 of the map (and indices). */
static tg_status check_dtypes(const char *kernel, const tg_tensor *a, const tg_tensor *b,
                              const tg_tensor *map) {
  if ((a->dtype != TG_F32 && a->dtype != TG_F64) || b->dtype != a->dtype)
    return tg_set_error(TG_ERR_DTYPE, "%s: dtypes %s and %s (F32 or F64, equal)", kernel,
                        tg_dtype_name(a->dtype), tg_dtype_name(b->dtype));
  if (map->dtype != TG_I64)
    return tg_set_error(TG_ERR_DTYPE, "%s: map is %s, not I64", kernel, tg_dtype_name(map->dtype));
  return TG_OK;
}

static void run_planes(int64_t planes, int64_t work, tg_cpu_range_fn fn, pool_pass *p) {
  tg_cpu_parallel_ranges(planes, 1, tg_cpu_should_parallelize(work, TG_CPU_PARALLEL_MIN), fn, p);
}

/* The map's K and planes: [mp, M, K], or [M, K] for the max. */
static pool_pass pass_of(const tg_tensor *map, int64_t M, int64_t L) {
  const bool three = map->ndim == 3;
  return (pool_pass){.map = (const int64_t *)tg_cpu_data(map),
                     .M = M,
                     .K = map->sizes[map->ndim - 1],
                     .L = L,
                     .map_planes = three ? map->sizes[0] : 1};
}

tg_status tg__kernel_pool_gather_window_sum_cpu(int n, tg_tensor *const *t) {
  TG__KERNEL_ARITY("pool_gather.window_sum", n, 4);
  const tg_tensor *out = t[0], *x = t[1];
  tg_status st = check_dtypes("pool_gather.window_sum", out, x, t[2]);
  if (st != TG_OK) return st;
  pool_pass p = pass_of(t[2], out->sizes[1], x->sizes[1]);
  p.out = tg_cpu_data(out), p.in = tg_cpu_data(x), p.divisor = t[3] ? tg_cpu_data(t[3]) : NULL;
  run_planes(out->sizes[0], out->sizes[0] * p.M * p.K,
             out->dtype == TG_F32 ? sum_planes_f32 : sum_planes_f64, &p);
  return TG_OK;
}

tg_status tg__kernel_pool_scatter_window_scatter_cpu(int n, tg_tensor *const *t) {
  TG__KERNEL_ARITY("pool_scatter.window_scatter", n, 4);
  const tg_tensor *out = t[0], *g = t[1];
  tg_status st = check_dtypes("pool_scatter.window_scatter", out, g, t[2]);
  if (st != TG_OK) return st;
  pool_pass p = pass_of(t[2], g->sizes[1], out->sizes[1]);
  p.out = tg_cpu_data(out), p.in = tg_cpu_data(g), p.divisor = t[3] ? tg_cpu_data(t[3]) : NULL;
  run_planes(out->sizes[0], out->sizes[0] * p.M * p.K,
             out->dtype == TG_F32 ? scatter_planes_f32 : scatter_planes_f64, &p);
  return TG_OK;
}

tg_status tg__kernel_max_pool2d_window_max_cpu(int n, tg_tensor *const *t) {
  TG__KERNEL_ARITY("max_pool2d.window_max", n, 4);
  const tg_tensor *out = t[0], *x = t[2];
  tg_status st = check_dtypes("max_pool2d.window_max", out, x, t[3]);
  if (st == TG_OK && t[1]->dtype != TG_I64)
    st = tg_set_error(TG_ERR_DTYPE, "max_pool2d.window_max: indices are %s, not I64",
                      tg_dtype_name(t[1]->dtype));
  if (st != TG_OK) return st;
  pool_pass p = pass_of(t[3], out->sizes[1], x->sizes[1]);
  p.out = tg_cpu_data(out), p.in = tg_cpu_data(x), p.indices = (int64_t *)tg_cpu_data(t[1]);
  run_planes(out->sizes[0], out->sizes[0] * p.M * p.K,
             out->dtype == TG_F32 ? max_planes_f32 : max_planes_f64, &p);
  return TG_OK;
}

/* pool_gather.window_sum under the ops that run it (src/ops/def/pool.def) */
#define SAME_AS_WINDOW_SUM(op)                                                                     \
  tg_status tg__kernel_##op##_window_sum_cpu(int n, tg_tensor *const *t) {                         \
    return tg__kernel_pool_gather_window_sum_cpu(n, t);                                            \
  }
SAME_AS_WINDOW_SUM(avg_pool2d)
SAME_AS_WINDOW_SUM(adaptive_avg_pool2d)
SAME_AS_WINDOW_SUM(pad)
