/* The CUDA kernels of gather, scatter_add, index_select and index_add (src/ops/def/index.def;
 * the CPU's are src/ops/cpu/index_cpu.c; src/ops/cuda/index.cu is cross-entropy's row pick).
 * One thread per picked element, grid-stride, F32, F64 and I64, any strides. Repeated indices
 * make the adding threads meet on one element, so the scatters add with atomicAdd (F64
 * atomics need sm_60; tg builds for sm_80 and up): the order of those sums, and so their last
 * bits, may differ from run to run (the CPU's are in index order). */
#include "elementwise.cuh"
#include "ops.cuh"

namespace {

/* [*B, M] picks along the last dim: batch sizes, then strides (elements) of out, in, index;
 * [nb] holds the last dim's stride. */
struct along_geometry {
  int nb;
  int64_t m;
  int64_t bsizes[TG_MAX_DIMS];
  int64_t os[TG_MAX_DIMS], ins[TG_MAX_DIMS], is[TG_MAX_DIMS];
};

template <typename T> __device__ inline void add_at(T *p, T v) { atomicAdd(p, v); }
/* int64 adds wrap: the unsigned atomic is the same bits */
template <> __device__ inline void add_at<int64_t>(int64_t *p, int64_t v) {
  atomicAdd((unsigned long long *)p, (unsigned long long)v);
}

/* Offsets of element e of [*B, M] in out, in and index. */
__device__ inline void along_offsets(const along_geometry &g, int64_t e, int64_t *o, int64_t *in,
                                     int64_t *ix) {
  const int64_t m = e % g.m;
  int64_t r = e / g.m;
  *o = m * g.os[g.nb];
  *in = m * g.ins[g.nb];
  *ix = m * g.is[g.nb];
  for (int d = g.nb - 1; d >= 0; d--) {
    const int64_t pos = r % g.bsizes[d];
    r /= g.bsizes[d];
    *o += pos * g.os[d];
    *in += pos * g.ins[d];
    *ix += pos * g.is[d];
  }
}

/* out[b, m] = x[b, index[b, m]]: in's offset is x's row start (its m term unused). */
template <typename T>
__global__ void gather_kernel(along_geometry g, int64_t n, T *out, const T *x,
                              const int64_t *index) {
  TG_CU_GRID_STRIDE(e, n) {
    int64_t o, in, ix;
    along_offsets(g, e, &o, &in, &ix);
    in -= (e % g.m) * g.ins[g.nb];
    out[o] = x[in + index[ix] * g.ins[g.nb]];
  }
}

/* out[b, index[b, m]] += src[b, m]: out's offset is its row start. */
template <typename T>
__global__ void scatter_add_kernel(along_geometry g, int64_t n, T *out, const T *src,
                                   const int64_t *index) {
  TG_CU_GRID_STRIDE(e, n) {
    int64_t o, in, ix;
    along_offsets(g, e, &o, &in, &ix);
    o -= (e % g.m) * g.os[g.nb];
    add_at(&out[o + index[ix] * g.os[g.nb]], src[in]);
  }
}

tg_status check_dtypes(const char *op, const tg_cu_view *v) {
  if (v[2].dtype != TG_I64)
    return tg_set_error(TG_ERR_DTYPE, "%s: index is %s, not I64", op, tg_dtype_name(v[2].dtype));
  if (v[0].dtype != v[1].dtype)
    return tg_set_error(TG_ERR_DTYPE, "%s: %s and %s differ", op, tg_dtype_name(v[0].dtype),
                        tg_dtype_name(v[1].dtype));
  return TG_OK;
}

bool same_sizes(int n, const int64_t *a, const int64_t *b) {
  for (int d = 0; d < n; d++)
    if (a[d] != b[d]) return false;
  return true;
}

/* t: out, in, index (gather: out [*B, M], x [*B, N]; scatter: out [*B, N], src [*B, M]). */
tg_status launch_along(const char *op, bool scatter, tg_tensor *const *t) {
  tg_cu_view v[3];
  tg_status st = tg_cu_views_of(op, 3, (const tg_tensor *const *)t, v);
  if (st != TG_OK || (st = check_dtypes(op, v)) != TG_OK) return st;
  const int nd = v[2].ndim;
  const tg_cu_view &picks = v[scatter ? 1 : 0];
  if (nd < 1 || v[0].ndim != nd || v[1].ndim != nd || !same_sizes(nd, picks.sizes, v[2].sizes) ||
      !same_sizes(nd - 1, v[0].sizes, v[1].sizes))
    return tg_set_error(TG_ERR_SHAPE, "%s: expects [*B, N], [*B, M] and an index [*B, M]", op);
  along_geometry g{};
  g.nb = nd - 1;
  g.m = v[2].sizes[nd - 1];
  int64_t n = g.m;
  for (int d = 0; d < nd; d++) {
    if (d < nd - 1) n *= (g.bsizes[d] = v[2].sizes[d]);
    g.os[d] = v[0].strides[d];
    g.ins[d] = v[1].strides[d];
    g.is[d] = v[2].strides[d];
  }
  if (n == 0) return TG_OK;
  tg_cu_device *dev;
  if ((st = tg_cu_device_get(op, v[0].device, &dev)) != TG_OK) return st;
  TG_DISPATCH_ALL_TYPES(v[0].dtype, op, {
    TG_CU_LAUNCH(op, n, dev->stream,
                 scatter ? scatter_add_kernel<scalar_t> : gather_kernel<scalar_t>, g, n,
                 (scalar_t *)v[0].data, (const scalar_t *)v[1].data, (const int64_t *)v[2].data);
  });
  return TG_OK;
}

/* [A, N, K] table, [A, M, K] rows, [M] index, by their strides. */
struct rows3_geometry {
  int64_t m, k, t0, t1, t2, r0, r1, r2, idx;
};

template <typename T>
__global__ void select3_kernel(rows3_geometry g, int64_t n, T *out, const T *x,
                               const int64_t *index) {
  TG_CU_GRID_STRIDE(e, n) {
    const int64_t k = e % g.k, m = (e / g.k) % g.m, a = e / (g.k * g.m);
    out[a * g.r0 + m * g.r1 + k * g.r2] = x[a * g.t0 + index[m * g.idx] * g.t1 + k * g.t2];
  }
}

template <typename T>
__global__ void add3_kernel(rows3_geometry g, int64_t n, T *out, const T *src,
                            const int64_t *index) {
  TG_CU_GRID_STRIDE(e, n) {
    const int64_t k = e % g.k, m = (e / g.k) % g.m, a = e / (g.k * g.m);
    add_at(&out[a * g.t0 + index[m * g.idx] * g.t1 + k * g.t2],
           src[a * g.r0 + m * g.r1 + k * g.r2]);
  }
}

/* t: the written one first (select: out [A, M, K], x [A, N, K]; add: out [A, N, K], src
 * [A, M, K]), then the index [M]. */
tg_status launch_rows3(const char *op, bool add, tg_tensor *const *t) {
  tg_cu_view v[3];
  tg_status st = tg_cu_views_of(op, 3, (const tg_tensor *const *)t, v);
  if (st != TG_OK || (st = check_dtypes(op, v)) != TG_OK) return st;
  const tg_cu_view &table = v[add ? 0 : 1], &rows = v[add ? 1 : 0];
  if (table.ndim != 3 || rows.ndim != 3 || v[2].ndim != 1 || rows.sizes[0] != table.sizes[0] ||
      rows.sizes[2] != table.sizes[2] || rows.sizes[1] != v[2].sizes[0])
    return tg_set_error(TG_ERR_SHAPE, "%s: expects [A, N, K], [A, M, K] and an index [M]", op);
  const rows3_geometry g{rows.sizes[1],    rows.sizes[2],    table.strides[0],
                         table.strides[1], table.strides[2], rows.strides[0],
                         rows.strides[1],  rows.strides[2],  v[2].strides[0]};
  const int64_t n = rows.sizes[0] * rows.sizes[1] * rows.sizes[2];
  if (n == 0) return TG_OK;
  tg_cu_device *dev;
  if ((st = tg_cu_device_get(op, v[0].device, &dev)) != TG_OK) return st;
  TG_DISPATCH_ALL_TYPES(v[0].dtype, op, {
    TG_CU_LAUNCH(op, n, dev->stream, add ? add3_kernel<scalar_t> : select3_kernel<scalar_t>, g, n,
                 (scalar_t *)v[0].data, (const scalar_t *)v[1].data, (const int64_t *)v[2].data);
  });
  return TG_OK;
}

} // namespace

tg_status tg__kernel_gather_along_last_cuda(int n, tg_tensor *const *t) {
  TG__KERNEL_ARITY("gather.along_last", n, 3);
  return launch_along("cuda.gather.along_last", false, t);
}

tg_status tg__kernel_scatter_add_along_last_cuda(int n, tg_tensor *const *t) {
  TG__KERNEL_ARITY("scatter_add.along_last", n, 3);
  return launch_along("cuda.scatter_add.along_last", true, t);
}

tg_status tg__kernel_index_select_rows_cuda(int n, tg_tensor *const *t) {
  TG__KERNEL_ARITY("index_select.rows", n, 3);
  return launch_rows3("cuda.index_select.rows", false, t);
}

tg_status tg__kernel_index_add_rows_cuda(int n, tg_tensor *const *t) {
  TG__KERNEL_ARITY("index_add.rows", n, 3);
  return launch_rows3("cuda.index_add.rows", true, t);
}
