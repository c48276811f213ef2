/* mm/addmm through cuBLAS. cuBLAS is column-major and tg row-major: a row-major C is the
 * column-major C^T, so C = A B is computed as C^T = B^T A^T by swapping the operands. A
 * strided view is passed in place when one of its strides is 1 (its other stride is the
 * leading dimension; a column-major view enters transposed); an operand with no unit stride
 * is made contiguous first, and an output with none is computed in a temporary. */
#include "allocator.cuh"
#include "blas.cuh"
#include "context.cuh"
#include "ops.cuh"

namespace {

/* A 2-D view [r, c] as cuBLAS reads it: row-major (ld = row stride, read as its transpose)
 * or column-major (ld = column stride). The stride of a dim of size 1 is never used, so it
 * does not decide the layout. */
struct operand {
  bool row_major;
  int ld;
};

bool layout_of(const tg_cu_view &v, operand *o) {
  int64_t r = v.sizes[0], c = v.sizes[1], s0 = v.strides[0], s1 = v.strides[1];
  int64_t min_c = c > 1 ? c : 1, min_r = r > 1 ? r : 1;
  if (c <= 1 || s1 == 1) {
    int64_t ld = r <= 1 ? min_c : s0;
    if (ld >= min_c && tg_cu_fits_int(ld)) {
      *o = operand{true, (int)ld};
      return true;
    }
  }
  if (r <= 1 || s0 == 1) {
    int64_t ld = c <= 1 ? min_r : s1;
    if (ld >= min_r && tg_cu_fits_int(ld)) {
      *o = operand{false, (int)ld};
      return true;
    }
  }
  return false;
}

/* v, or a contiguous copy of it in tmp when cuBLAS cannot read it in place. */
tg_status readable(const char *op, const tg_cu_view &v, tg_cu_temp *tmp, tg_cu_view *out,
                   operand *o) {
  if (layout_of(v, o)) {
    *out = v;
    return TG_OK;
  }
  tmp->ptr = tg_cu_alloc(op, v.device, tg_cu_nbytes(v));
  if (!tmp->ptr) return tg_last_error();
  *out = tg_cu_view_dense(tmp->ptr, v.dtype, v.device, 2, v.sizes);
  layout_of(*out, o);
  return tg_cu_copy(op, *out, v);
}

template <typename T>
tg_status gemm_typed(const char *op, tg_cu_device *dev, const tg_cu_view &c, operand oc,
                     const tg_cu_view &a, operand oa, const tg_cu_view &b, operand ob, double alpha,
                     double beta) {
  cublasHandle_t h;
  tg_status st = tg_cu_blas_get(op, dev, &h);
  if (st != TG_OK) return st;
  int m = (int)a.sizes[0], k = (int)a.sizes[1], n = (int)b.sizes[1];
  T al = (T)alpha, be = (T)beta;
  const T *A = (const T *)a.data, *B = (const T *)b.data;
  if (oc.row_major) /* C^T (n x m) = B^T A^T; a row-major operand already reads as its ^T */
    TG_CU_BLAS_TRY(op, tg_cu_blas_gemm_name(T()),
                   tg_cu_blas_gemm(h, ob.row_major ? CUBLAS_OP_N : CUBLAS_OP_T,
                                   oa.row_major ? CUBLAS_OP_N : CUBLAS_OP_T, n, m, k, &al, B, ob.ld,
                                   A, oa.ld, &be, (T *)c.data, oc.ld));
  else /* C (m x n) = A B */
    TG_CU_BLAS_TRY(op, tg_cu_blas_gemm_name(T()),
                   tg_cu_blas_gemm(h, oa.row_major ? CUBLAS_OP_T : CUBLAS_OP_N,
                                   ob.row_major ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &al, A, oa.ld,
                                   B, ob.ld, &be, (T *)c.data, oc.ld));
  return TG_OK;
}

} // namespace

tg_status tg_cu_gemm(const char *op, const tg_cu_view &out, const tg_cu_view &a,
                     const tg_cu_view &b, double alpha, double beta) {
  if (a.dtype != out.dtype || b.dtype != out.dtype)
    return tg_set_error(TG_ERR_DTYPE, "%s: operands are %s and %s but out is %s", op,
                        tg_dtype_name(a.dtype), tg_dtype_name(b.dtype), tg_dtype_name(out.dtype));
  if (out.dtype != TG_F32 && out.dtype != TG_F64)
    return tg_set_error(TG_ERR_DTYPE, "%s: dtype %s is not supported (F32, F64 only)", op,
                        tg_dtype_name(out.dtype));
  if (a.ndim != 2 || b.ndim != 2 || out.ndim != 2 || a.sizes[1] != b.sizes[0] ||
      out.sizes[0] != a.sizes[0] || out.sizes[1] != b.sizes[1])
    return tg_set_error(TG_ERR_SHAPE, "%s: gemm operands do not fit together", op);
  int64_t m = a.sizes[0], k = a.sizes[1], n = b.sizes[1];
  if (m == 0 || n == 0) return TG_OK;
  if (k == 0 || alpha == 0) /* an empty or skipped product (BLAS's alpha 0): beta*out is left */
    return beta == 0 ? tg_cu_fill(op, out, 0.0)
                     : tg_cu_unary_op(op, TG_UNARY_MUL_SCALAR, beta, 0.0, out, out);
  if (!tg_cu_fits_int(m) || !tg_cu_fits_int(n) || !tg_cu_fits_int(k))
    return tg_set_error(TG_ERR_UNSUPPORTED,
                        "%s: gemm sizes [%lld, %lld] x [%lld, %lld] exceed "
                        "cuBLAS's int range",
                        op, (long long)m, (long long)k, (long long)k, (long long)n);
  tg_cu_device *dev;
  tg_status st = tg_cu_device_get(op, out.device, &dev);
  if (st != TG_OK) return st;

  tg_cu_temp a_tmp, b_tmp, c_tmp;
  tg_cu_view av, bv, cv = out;
  operand oa, ob, oc;
  if ((st = readable(op, a, &a_tmp, &av, &oa)) != TG_OK) return st;
  if ((st = readable(op, b, &b_tmp, &bv, &ob)) != TG_OK) return st;
  bool direct = layout_of(out, &oc);
  if (!direct) { /* compute in a contiguous temporary, then scatter into out */
    c_tmp.ptr = tg_cu_alloc(op, out.device, tg_cu_nbytes(out));
    if (!c_tmp.ptr) return tg_last_error();
    cv = tg_cu_view_dense(c_tmp.ptr, out.dtype, out.device, 2, out.sizes);
    layout_of(cv, &oc);
    if (beta != 0 && (st = tg_cu_copy(op, cv, out)) != TG_OK) return st;
  }
  TG_DISPATCH_FLOATING_TYPES(
      out.dtype, op, { st = gemm_typed<scalar_t>(op, dev, cv, oc, av, oa, bv, ob, alpha, beta); });
  if (st == TG_OK && !direct) st = tg_cu_copy(op, out, cv);
  return st;
}
