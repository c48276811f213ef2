/* The backend's reduce: every kind of ops/def/reduction.def over one dim (F32, F64, I64; an I64
 * sum always takes the one-thread-per-output kernel). sum: the reduced dim and
 * the kept dims, flattened, form a matrix; when cuBLAS can read it in place (one of the two strides
 * is 1) the sum is a gemv with a vector of ones; else one thread per output element loops over the
 * dim, or, when that leaves the GPU idle, the matrix is made dense for the gemv. select (max, min):
 * one thread per output element, or, for few long rows, one per chunk of a row and then one per row
 * over the chunks. */
#include "allocator.cuh"
#include "blas.cuh"
#include "elementwise.cuh"
#include "ops.cuh"

/* Where sum_dim's kernel beats a dense copy + gemv (see tg_cu_sum_dim). */
#define TG_CU_SUM_KERNEL_MIN_ROWS 2048
#define TG_CU_SUM_KERNEL_MAX_LEN 32
/* Elements per thread of a select kind's first pass over few long rows. */
#define TG_CU_MAX_CHUNK 256

namespace {

/* The dims of x other than dim (sizes, x's strides, out's strides): the "rows" that each
 * reduce to one output element. */
struct rows {
  int ndim;
  int64_t sizes[TG_MAX_DIMS], x_strides[TG_MAX_DIMS], out_strides[TG_MAX_DIMS],
      idx_strides[TG_MAX_DIMS];
  int64_t count;
};

rows rows_of(const tg_cu_view &x, const tg_cu_view &out, const tg_cu_view *idx, int dim) {
  rows r;
  r.ndim = 0;
  r.count = 1;
  for (int d = 0; d < x.ndim; d++) {
    if (d == dim) continue;
    r.sizes[r.ndim] = x.sizes[d];
    r.x_strides[r.ndim] = x.strides[d];
    r.out_strides[r.ndim] = out.strides[d];
    r.idx_strides[r.ndim] = idx ? idx->strides[d] : 0;
    r.count *= x.sizes[d];
    r.ndim++;
  }
  return r;
}

/* A sum's accumulator: the element type, but uint64_t for int64 (wrap-around, as PyTorch's
 * int64 sum, without signed overflow). */
template <typename T> struct sum_acc { typedef T type; };
template <> struct sum_acc<int64_t> { typedef uint64_t type; };

template <typename T>
__global__ void sum_dim_kernel(int64_t n_rows, tg_cu_indexer<2> ix, T *out, const T *x, int64_t len,
                               int64_t stride) {
  TG_CU_GRID_STRIDE(r, n_rows) {
    int64_t o[2];
    ix.offsets(r, o);
    const T *p = x + o[0];
    typename sum_acc<T>::type acc = 0;
    for (int64_t k = 0; k < len; k++) acc += (typename sum_acc<T>::type)p[k * stride];
    out[o[1]] = (T)acc;
  }
}

/* Each select kind's rule as a functor: whether v replaces the running best (the list's
 * strict `better`, or a NaN: the first NaN beats everything, as on the CPU). */
#define TG_REDUCE_SUM(KIND, name, grad)
#define TG_REDUCE_SELECT(KIND, name, better, grad)                                                 \
  struct name##_takes {                                                                            \
    template <typename T> TG_HOST_DEVICE bool operator()(T v, T best) const {                      \
      return (better) || v != v;                                                                   \
    }                                                                                              \
  };
#define TG_REDUCE_SCALED(name, KIND, scale, grad)
#include "ops/def/reduction.def"

/* The best of p[k * stride] over [k0, k1) and its index: the first best wins. */
template <typename Takes, typename T>
TG_HOST_DEVICE void select_over(const T *p, int64_t stride, int64_t k0, int64_t k1, T *best,
                                int64_t *best_k) {
  T b = p[k0 * stride];
  int64_t bk = k0;
  for (int64_t k = k0 + 1; k < k1 && b == b; k++) {
    T v = p[k * stride];
    if (Takes()(v, b)) b = v, bk = k;
  }
  *best = b;
  *best_k = bk;
}

template <typename Takes, typename T>
__global__ void select_dim_kernel(int64_t n_rows, tg_cu_indexer<3> ix, T *values, int64_t *indices,
                                  const T *x, int64_t len, int64_t stride) {
  TG_CU_GRID_STRIDE(r, n_rows) {
    int64_t o[3];
    ix.offsets(r, o);
    select_over<Takes>(x + o[0], stride, 0, len, &values[o[1]], &indices[o[2]]);
  }
}

/* Few long rows: first the best of every chunk of every row, one thread each... */
template <typename Takes, typename T>
__global__ void select_chunks_kernel(int64_t n, int64_t chunks, int64_t chunk, tg_cu_indexer<3> ix,
                                     T *chunk_values, int64_t *chunk_indices, const T *x,
                                     int64_t len, int64_t stride) {
  TG_CU_GRID_STRIDE(e, n) {
    int64_t r = e / chunks, c = e % chunks, o[3];
    ix.offsets(r, o);
    int64_t k1 = (c + 1) * chunk < len ? (c + 1) * chunk : len;
    select_over<Takes>(x + o[0], stride, c * chunk, k1, &chunk_values[e], &chunk_indices[e]);
  }
}

/* ...then, one thread per row, the chunks' bests in order (keeping the first-wins rules). */
template <typename Takes, typename T>
__global__ void select_combine_kernel(int64_t n_rows, int64_t chunks, tg_cu_indexer<3> ix,
                                      T *values, int64_t *indices, const T *chunk_values,
                                      const int64_t *chunk_indices) {
  TG_CU_GRID_STRIDE(r, n_rows) {
    int64_t o[3], at;
    ix.offsets(r, o);
    T best;
    select_over<Takes>(chunk_values + r * chunks, 1, 0, chunks, &best, &at);
    values[o[1]] = best;
    indices[o[2]] = chunk_indices[r * chunks + at];
  }
}

/* A gemv that sums the matrix x[row, k] (row stride rs, k stride ks) into y (stride ys). */
struct gemv_plan {
  cublasOperation_t trans;
  int m, n, lda, incy;
};

bool plan_gemv(int64_t n_rows, int64_t len, int64_t rs, int64_t ks, int64_t ys, gemv_plan *p) {
  if (!tg_cu_fits_int(n_rows) || !tg_cu_fits_int(len)) return false;
  int64_t incy = n_rows > 1 ? ys : 1;
  if (incy < 1 || !tg_cu_fits_int(incy)) return false;
  int64_t min_rows = n_rows > 1 ? n_rows : 1, min_len = len > 1 ? len : 1;
  /* Columns are the reduced dim: y = A * ones with A [rows x len] column-major. */
  if (n_rows <= 1 || rs == 1) {
    int64_t lda = len <= 1 ? min_rows : ks;
    if (lda >= min_rows && tg_cu_fits_int(lda)) {
      *p = gemv_plan{CUBLAS_OP_N, (int)n_rows, (int)len, (int)lda, (int)incy};
      return true;
    }
  }
  /* Rows are the reduced dim: y = A^T * ones with A [len x rows] column-major. */
  if (len <= 1 || ks == 1) {
    int64_t lda = n_rows <= 1 ? min_len : rs;
    if (lda >= min_len && tg_cu_fits_int(lda)) {
      *p = gemv_plan{CUBLAS_OP_T, (int)len, (int)n_rows, (int)lda, (int)incy};
      return true;
    }
  }
  return false;
}

/* y = the row sums of the matrix at x, laid out as plan says. */
template <typename T>
tg_status sum_gemv(const char *op, int device, const void *x, void *y, int64_t len,
                   const gemv_plan &p) {
  tg_cu_device *dev;
  tg_status st = tg_cu_device_get(op, device, &dev);
  if (st != TG_OK) return st;
  cublasHandle_t h;
  if ((st = tg_cu_blas_get(op, dev, &h)) != TG_OK) return st;
  tg_cu_temp ones;
  ones.ptr = tg_cu_alloc(op, device, (size_t)len * sizeof(T));
  if (!ones.ptr) return tg_last_error();
  tg_dtype dtype = sizeof(T) == sizeof(double) ? TG_F64 : TG_F32;
  if ((st = tg_cu_fill(op, tg_cu_view_dense(ones.ptr, dtype, device, 1, &len), 1.0)) != TG_OK)
    return st;
  const T one = 1, zero = 0;
  TG_CU_BLAS_TRY(op, tg_cu_blas_gemv_name(T()),
                 tg_cu_blas_gemv(h, p.trans, p.m, p.n, &one, (const T *)x, p.lda,
                                 (const T *)ones.ptr, 1, &zero, (T *)y, p.incy));
  return TG_OK;
}

/* One thread per output element, looping over the reduced dim. */
template <typename T>
tg_status sum_kernel(const char *op, const tg_cu_view &out, const tg_cu_view &x, const rows &r,
                     int64_t len, int64_t stride) {
  tg_cu_device *dev;
  tg_status st = tg_cu_device_get(op, out.device, &dev);
  if (st != TG_OK) return st;
  const int64_t *strides[2] = {r.x_strides, r.out_strides};
  tg_cu_indexer<2> ix = tg_cu_make_indexer<2>(r.ndim, r.sizes, strides);
  TG_CU_LAUNCH(op, r.count, dev->stream, sum_dim_kernel<T>, r.count, ix, (T *)out.data,
               (const T *)x.data, len, stride);
  return TG_OK;
}

/* x's rows copied to a dense [rows, len] matrix (the reduced dim last), summed by gemv into
 * a dense [rows] vector, which is copied to out. */
template <typename T>
tg_status sum_dense(const char *op, const tg_cu_view &out, const tg_cu_view &x, const rows &r,
                    int64_t len, int64_t stride) {
  tg_cu_view xr = x; /* x with the reduced dim moved last */
  xr.ndim = r.ndim + 1;
  for (int d = 0; d < r.ndim; d++) xr.sizes[d] = r.sizes[d], xr.strides[d] = r.x_strides[d];
  xr.sizes[r.ndim] = len;
  xr.strides[r.ndim] = stride;
  tg_cu_view outr = out; /* out over the kept dims */
  outr.ndim = r.ndim;
  for (int d = 0; d < r.ndim; d++) outr.sizes[d] = r.sizes[d], outr.strides[d] = r.out_strides[d];
  tg_cu_temp xd, yd;
  xd.ptr = tg_cu_alloc(op, x.device, (size_t)(r.count * len) * sizeof(T));
  yd.ptr = xd.ptr ? tg_cu_alloc(op, x.device, (size_t)r.count * sizeof(T)) : NULL;
  if (!yd.ptr) return tg_last_error();
  tg_status st = tg_cu_copy(op, tg_cu_view_dense(xd.ptr, x.dtype, x.device, xr.ndim, xr.sizes), xr);
  gemv_plan plan;
  if (st == TG_OK && !plan_gemv(r.count, len, len, 1, 1, &plan)) /* only past int range */
    return sum_kernel<T>(op, out, x, r, len, stride);
  if (st == TG_OK) st = sum_gemv<T>(op, x.device, xd.ptr, yd.ptr, len, plan);
  if (st == TG_OK)
    st = tg_cu_copy(op, outr, tg_cu_view_dense(yd.ptr, x.dtype, x.device, r.ndim, r.sizes));
  return st;
}

tg_status sum_dim(const char *op, const tg_cu_view &out, const tg_cu_view &x, int dim) {
  if (out.dtype != x.dtype)
    return tg_set_error(TG_ERR_DTYPE, "%s: input is %s but out is %s", op, tg_dtype_name(x.dtype),
                        tg_dtype_name(out.dtype));
  rows r = rows_of(x, out, NULL, dim);
  int64_t len = x.sizes[dim], stride = x.strides[dim];
  if (r.count == 0) return TG_OK;
  if (len == 0) return tg_cu_fill(op, out, 0.0);
  /* The kept dims as one dim, when they collapse to one. */
  const int64_t *strides[2] = {r.x_strides, r.out_strides};
  tg_cu_indexer<2> ix = tg_cu_make_indexer<2>(r.ndim, r.sizes, strides);
  gemv_plan plan;
  bool gemv = ix.ndim <= 1 && plan_gemv(r.count, len, ix.ndim ? ix.strides[0][0] : 0, stride,
                                        ix.ndim ? ix.strides[1][0] : 1, &plan);
  /* Otherwise: the kernel when it has enough rows to fill the GPU, or short ones; else the
   * rows are worth a dense copy for cuBLAS (one thread summing 10^6 elements is not). */
  bool kernel = r.count >= TG_CU_SUM_KERNEL_MIN_ROWS || len <= TG_CU_SUM_KERNEL_MAX_LEN;
  if (x.dtype == TG_I64) return sum_kernel<int64_t>(op, out, x, r, len, stride); /* no int BLAS */
  TG_DISPATCH_FLOATING_TYPES(x.dtype, op, {
    if (gemv) return sum_gemv<scalar_t>(op, x.device, x.data, out.data, len, plan);
    return kernel ? sum_kernel<scalar_t>(op, out, x, r, len, stride)
                  : sum_dense<scalar_t>(op, out, x, r, len, stride);
  });
  return TG_OK;
}

template <typename Takes>
tg_status select_dim(const char *op, const tg_cu_view &values, const tg_cu_view &indices,
                     const tg_cu_view &x, int dim) {
  if (values.dtype != x.dtype || indices.dtype != TG_I64)
    return tg_set_error(TG_ERR_DTYPE, "%s: values must be %s and indices I64 (got %s, %s)", op,
                        tg_dtype_name(x.dtype), tg_dtype_name(values.dtype),
                        tg_dtype_name(indices.dtype));
  rows r = rows_of(x, values, &indices, dim);
  int64_t len = x.sizes[dim], stride = x.strides[dim];
  if (r.count == 0) return TG_OK;
  if (len == 0) return tg_set_error(TG_ERR_SHAPE, "%s: a select over an empty dim %d", op, dim);
  tg_cu_device *dev;
  tg_status st = tg_cu_device_get(op, x.device, &dev);
  if (st != TG_OK) return st;
  const int64_t *strides[3] = {r.x_strides, r.out_strides, r.idx_strides};
  tg_cu_indexer<3> ix = tg_cu_make_indexer<3>(r.ndim, r.sizes, strides);
  if (r.count >= TG_CU_SUM_KERNEL_MIN_ROWS || len <= TG_CU_MAX_CHUNK) {
    TG_DISPATCH_ALL_TYPES(x.dtype, op, {
      TG_CU_LAUNCH(op, r.count, dev->stream, select_dim_kernel<Takes, scalar_t>, r.count, ix,
                   (scalar_t *)values.data, (int64_t *)indices.data, (const scalar_t *)x.data, len,
                   stride);
    });
    return TG_OK;
  }
  const int64_t chunks = (len + TG_CU_MAX_CHUNK - 1) / TG_CU_MAX_CHUNK, n = r.count * chunks;
  tg_cu_temp cv, ci;
  cv.ptr = tg_cu_alloc(op, x.device, (size_t)n * tg_dtype_size(x.dtype));
  ci.ptr = cv.ptr ? tg_cu_alloc(op, x.device, (size_t)n * sizeof(int64_t)) : NULL;
  if (!ci.ptr) return tg_last_error();
  TG_DISPATCH_ALL_TYPES(x.dtype, op, {
    TG_CU_LAUNCH(op, n, dev->stream, select_chunks_kernel<Takes, scalar_t>, n, chunks,
                 (int64_t)TG_CU_MAX_CHUNK, ix, (scalar_t *)cv.ptr, (int64_t *)ci.ptr,
                 (const scalar_t *)x.data, len, stride);
    TG_CU_LAUNCH(op, r.count, dev->stream, select_combine_kernel<Takes, scalar_t>, r.count, chunks,
                 ix, (scalar_t *)values.data, (int64_t *)indices.data, (const scalar_t *)cv.ptr,
                 (const int64_t *)ci.ptr);
  });
  return TG_OK;
}

} // namespace

tg_status tg_cu_reduce(const char *op, tg_reduce_kind kind, const tg_cu_view &values,
                       const tg_cu_view *indices, const tg_cu_view &x, int dim) {
  switch (kind) {
#define TG_REDUCE_SUM(KIND, name, grad)                                                            \
  case TG_REDUCE_##KIND:                                                                           \
    return sum_dim(op, values, x, dim);
#define TG_REDUCE_SELECT(KIND, name, better, grad)                                                 \
  case TG_REDUCE_##KIND:                                                                           \
    if (!indices) return tg_set_error(TG_ERR_ARGUMENT, "%s: " #name "_dim needs indices", op);     \
    return select_dim<name##_takes>(op, values, *indices, x, dim);
#define TG_REDUCE_SCALED(name, KIND, scale, grad)
#include "ops/def/reduction.def"
  default:
    return tg_set_error(TG_ERR_ARGUMENT, "%s: unknown reduction kind %d", op, (int)kind);
  }
}
