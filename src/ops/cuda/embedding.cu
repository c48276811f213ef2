/* index_select_rows / index_add_rows on CUDA (ops/backend.h; registered in backend.cu):
 * embedding's forward and backward. One thread per element of the [m, d] rows, grid-stride.
 * Repeated indices make the scatter-add threads meet on one element, so it adds with
 * atomicAdd (F64 atomics need sm_60; tg builds for sm_80 and up): the order of the sums,
 * and so their last bits, may differ from run to run. */
#include "elementwise.cuh"
#include "ops.cuh"

namespace {

/* The table [n, d], the rows [m, d] and the index [m], by their strides (elements). */
struct rows_geometry {
  int64_t m, d, table0, table1, rows0, rows1, idx;
};

template <typename T>
__global__ void select_rows_kernel(rows_geometry g, T *out, const T *x, const int64_t *index) {
  TG_CU_GRID_STRIDE(k, g.m * g.d) {
    const int64_t i = k / g.d, j = k % g.d;
    out[i * g.rows0 + j * g.rows1] = x[index[i * g.idx] * g.table0 + j * g.table1];
  }
}

template <typename T>
__global__ void add_rows_kernel(rows_geometry g, T *out, const T *src, const int64_t *index) {
  TG_CU_GRID_STRIDE(k, g.m * g.d) {
    const int64_t i = k / g.d, j = k % g.d;
    atomicAdd(&out[index[i * g.idx] * g.table0 + j * g.table1], src[i * g.rows0 + j * g.rows1]);
  }
}

/* Views of table, rows and index on one device, with their shapes and dtypes checked. */
tg_status views_checked(const char *op, const tg_tensor *table, const tg_tensor *rows,
                        const tg_tensor *index, tg_cu_view *v) {
  const tg_tensor *const ts[3] = {table, rows, index};
  tg_status st = tg_cu_views_of(op, 3, ts, v);
  if (st != TG_OK) return st;
  if (v[0].ndim != 2 || v[1].ndim != 2 || v[2].ndim != 1 || v[1].sizes[0] != v[2].sizes[0] ||
      v[1].sizes[1] != v[0].sizes[1])
    return tg_set_error(TG_ERR_SHAPE, "%s: expects a table [n, d], rows [m, d] and an index [m]",
                        op);
  if (v[2].dtype != TG_I64)
    return tg_set_error(TG_ERR_DTYPE, "%s: index is %s, not I64", op, tg_dtype_name(v[2].dtype));
  if (v[0].dtype != v[1].dtype)
    return tg_set_error(TG_ERR_DTYPE, "%s: %s and %s differ", op, tg_dtype_name(v[0].dtype),
                        tg_dtype_name(v[1].dtype));
  return TG_OK;
}

rows_geometry geometry_of(const tg_cu_view *v) {
  return rows_geometry{v[1].sizes[0],   v[1].sizes[1],   v[0].strides[0], v[0].strides[1],
                       v[1].strides[0], v[1].strides[1], v[2].strides[0]};
}

/* Both ops over table [n, d], rows [m, d] and index [m]: select writes the rows from the
 * table, add adds the rows into the table. */
tg_status launch_rows(const char *op, bool add, const tg_tensor *table, const tg_tensor *rows,
                      const tg_tensor *index) {
  tg_cu_view v[3];
  tg_status st = views_checked(op, table, rows, index, v);
  if (st != TG_OK) return st;
  const rows_geometry g = geometry_of(v);
  if (g.m * g.d == 0) return TG_OK;
  tg_cu_device *dev;
  if ((st = tg_cu_device_get(op, v[0].device, &dev)) != TG_OK) return st;
  TG_DISPATCH_FLOATING_TYPES(v[0].dtype, op, {
    scalar_t *dst = (scalar_t *)v[add ? 0 : 1].data;
    const scalar_t *src = (const scalar_t *)v[add ? 1 : 0].data;
    TG_CU_LAUNCH(op, g.m * g.d, dev->stream,
                 add ? add_rows_kernel<scalar_t> : select_rows_kernel<scalar_t>, g, dst, src,
                 (const int64_t *)v[2].data);
  });
  return TG_OK;
}

} // namespace

/* embedding's kernels (TG_OP_KERNEL lines in src/ops/def/embedding.def) */
tg_status tg__kernel_embedding_index_select_rows_cuda(int n, tg_tensor *const *t) {
  TG__KERNEL_ARITY("embedding.index_select_rows", n, 3);
  return launch_rows("cuda.index_select_rows", false, t[1], t[0], t[2]);
}

tg_status tg__kernel_embedding_backward_index_add_rows_cuda(int n, tg_tensor *const *t) {
  TG__KERNEL_ARITY("embedding_backward.index_add_rows", n, 3);
  return launch_rows("cuda.index_add_rows", true, t[0], t[1], t[2]);
}
