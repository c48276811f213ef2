/* gather_rows / scatter_add_rows: one thread per row. Row i touches only x[i, :] / out[i, :],
 * so the scatter needs no atomics. */
#include "elementwise.cuh"
#include "ops.cuh"

namespace {

/* A 2-D view [n, c], the vector [n] and the I64 index [n], by their strides. */
struct rows2 {
  int64_t n, mat_row, mat_col, vec, idx;
};

template <typename T>
__global__ void gather_rows_kernel(rows2 g, T *out, const T *x, const int64_t *index) {
  TG_CU_GRID_STRIDE(i, g.n) { out[i * g.vec] = x[i * g.mat_row + index[i * g.idx] * g.mat_col]; }
}

template <typename T>
__global__ void scatter_add_rows_kernel(rows2 g, T *out, const T *src, const int64_t *index) {
  TG_CU_GRID_STRIDE(i, g.n) { out[i * g.mat_row + index[i * g.idx] * g.mat_col] += src[i * g.vec]; }
}

tg_status check(const char *op, const tg_cu_view &mat, const tg_cu_view &vec,
                const tg_cu_view &index) {
  if (mat.ndim != 2 || vec.ndim != 1 || index.ndim != 1 || vec.sizes[0] != mat.sizes[0] ||
      index.sizes[0] != mat.sizes[0])
    return tg_set_error(TG_ERR_SHAPE, "%s: expects [n, c], [n] and an index [n]", op);
  if (index.dtype != TG_I64)
    return tg_set_error(TG_ERR_DTYPE, "%s: index is %s, not I64", op, tg_dtype_name(index.dtype));
  if (mat.dtype != vec.dtype)
    return tg_set_error(TG_ERR_DTYPE, "%s: %s and %s differ", op, tg_dtype_name(mat.dtype),
                        tg_dtype_name(vec.dtype));
  return TG_OK;
}

} // namespace

tg_status tg_cu_gather_rows(const char *op, const tg_cu_view &out, const tg_cu_view &x,
                            const tg_cu_view &index) {
  tg_status st = check(op, x, out, index);
  if (st != TG_OK) return st;
  rows2 g{x.sizes[0], x.strides[0], x.strides[1], out.strides[0], index.strides[0]};
  if (g.n == 0) return TG_OK;
  tg_cu_device *dev;
  if ((st = tg_cu_device_get(op, out.device, &dev)) != TG_OK) return st;
  TG_DISPATCH_FLOATING_TYPES(x.dtype, op, {
    TG_CU_LAUNCH(op, g.n, dev->stream, gather_rows_kernel<scalar_t>, g, (scalar_t *)out.data,
                 (const scalar_t *)x.data, (const int64_t *)index.data);
  });
  return TG_OK;
}

tg_status tg_cu_scatter_add_rows(const char *op, const tg_cu_view &out, const tg_cu_view &src,
                                 const tg_cu_view &index) {
  tg_status st = check(op, out, src, index);
  if (st != TG_OK) return st;
  rows2 g{out.sizes[0], out.strides[0], out.strides[1], src.strides[0], index.strides[0]};
  if (g.n == 0) return TG_OK;
  tg_cu_device *dev;
  if ((st = tg_cu_device_get(op, out.device, &dev)) != TG_OK) return st;
  TG_DISPATCH_FLOATING_TYPES(out.dtype, op, {
    TG_CU_LAUNCH(op, g.n, dev->stream, scatter_add_rows_kernel<scalar_t>, g, (scalar_t *)out.data,
                 (const scalar_t *)src.data, (const int64_t *)index.data);
  });
  return TG_OK;
}
