/* bmm.gemm on CUDA (the kernel line in src/ops/def/linalg.def): cuBLAS's strided-batched
 * gemm, row-major C computed as C^T = B^T A^T as in blas.cu. The batch dims are merged where
 * the strides of out, a and b all allow (a contiguous batch is one dim); the innermost
 * merged dim is cuBLAS's batch, with its three strides (0 for an operand broadcast by
 * tg_matmul), and any outer one a loop of such calls. An operand whose matrices have no unit
 * stride is copied to a contiguous buffer first, as blas.cu does. */
#include "allocator.cuh"
#include "blas.cuh"
#include "context.cuh"
#include "ops.cuh"

namespace {

cublasStatus_t gemm_batched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                            int n, int k, const float *alpha, const float *A, int lda, long long sa,
                            const float *B, int ldb, long long sb, const float *beta, float *C,
                            int ldc, long long sc, int batch) {
  return cublasSgemmStridedBatched(h, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc,
                                   sc, batch);
}
cublasStatus_t gemm_batched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                            int n, int k, const double *alpha, const double *A, int lda,
                            long long sa, const double *B, int ldb, long long sb,
                            const double *beta, double *C, int ldc, long long sc, int batch) {
  return cublasDgemmStridedBatched(h, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc,
                                   sc, batch);
}
const char *gemm_batched_name(float) { return "cublasSgemmStridedBatched"; }
const char *gemm_batched_name(double) { return "cublasDgemmStridedBatched"; }

/* A [*, r, c] view's matrices as cuBLAS reads them: row-major (ld = row stride, read as the
 * transpose) or column-major (ld = column stride); the stride of a size-1 dim decides
 * nothing. false when neither stride is unit (or ld is past int). */
struct operand {
  bool row_major;
  int ld;
};

bool layout_of(const tg_cu_view &v, operand *o) {
  const int nd = v.ndim;
  const int64_t r = v.sizes[nd - 2], c = v.sizes[nd - 1];
  const int64_t s0 = v.strides[nd - 2], s1 = v.strides[nd - 1];
  const int64_t min_c = c > 1 ? c : 1, min_r = r > 1 ? r : 1;
  if (c <= 1 || s1 == 1) {
    const int64_t ld = r <= 1 ? min_c : s0;
    if (ld >= min_c && tg_cu_fits_int(ld)) {
      *o = operand{true, (int)ld};
      return true;
    }
  }
  if (r <= 1 || s0 == 1) {
    const int64_t ld = c <= 1 ? min_r : s1;
    if (ld >= min_r && tg_cu_fits_int(ld)) {
      *o = operand{false, (int)ld};
      return true;
    }
  }
  return false;
}

/* v, or a contiguous copy of it (every batch entry) in tmp when cuBLAS cannot read it. */
tg_status readable(const char *op, const tg_cu_view &v, tg_cu_temp *tmp, tg_cu_view *out,
                   operand *o) {
  if (layout_of(v, o)) {
    *out = v;
    return TG_OK;
  }
  tmp->ptr = tg_cu_alloc(op, v.device, tg_cu_nbytes(v));
  if (!tmp->ptr) return tg_last_error();
  *out = tg_cu_view_dense(tmp->ptr, v.dtype, v.device, v.ndim, v.sizes);
  layout_of(*out, o);
  return tg_cu_copy(op, *out, v);
}

/* The batch dims of out, a and b merged: dims[0..n) sizes and each view's strides,
 * outermost first, size-1 dims dropped. */
struct batch_dims {
  int n;
  int64_t size[TG_MAX_DIMS], stride[3][TG_MAX_DIMS];
};

batch_dims merged_batch(const tg_cu_view *v) {
  batch_dims bd;
  bd.n = 0;
  for (int d = 0; d < v[0].ndim - 2; d++) {
    if (v[0].sizes[d] == 1) continue;
    bool merges = bd.n > 0;
    for (int i = 0; i < 3 && merges; i++)
      merges = bd.stride[i][bd.n - 1] == v[i].strides[d] * v[0].sizes[d];
    if (merges) {
      bd.size[bd.n - 1] *= v[0].sizes[d];
      for (int i = 0; i < 3; i++) bd.stride[i][bd.n - 1] = v[i].strides[d];
    } else {
      bd.size[bd.n] = v[0].sizes[d];
      for (int i = 0; i < 3; i++) bd.stride[i][bd.n] = v[i].strides[d];
      bd.n++;
    }
  }
  if (bd.n == 0) { /* one entry: a batch of one */
    bd.n = 1;
    bd.size[0] = 1;
    for (int i = 0; i < 3; i++) bd.stride[i][0] = 0;
  }
  return bd;
}

template <typename T>
tg_status run(const char *op, tg_cu_device *dev, const tg_cu_view *v, const operand *o,
              const batch_dims &bd) {
  cublasHandle_t h;
  tg_status st = tg_cu_blas_get(op, dev, &h);
  if (st != TG_OK) return st;
  const int nd = v[0].ndim;
  const int m = (int)v[1].sizes[nd - 2], k = (int)v[1].sizes[nd - 1], n = (int)v[2].sizes[nd - 1];
  const T one = 1, zero = 0;
  const int inner = bd.n - 1;
  int64_t outer = 1;
  for (int d = 0; d < inner; d++) outer *= bd.size[d];
  for (int64_t e = 0; e < outer; e++) {
    int64_t off[3] = {0, 0, 0}, rest = e;
    for (int d = inner - 1; d >= 0; d--) {
      for (int i = 0; i < 3; i++) off[i] += rest % bd.size[d] * bd.stride[i][d];
      rest /= bd.size[d];
    }
    T *C = (T *)v[0].data + off[0];
    const T *A = (const T *)v[1].data + off[1], *B = (const T *)v[2].data + off[2];
    const long long sc = bd.stride[0][inner], sa = bd.stride[1][inner], sb = bd.stride[2][inner];
    const int batch = (int)bd.size[inner];
    if (o[0].row_major) /* C^T (n x m) = B^T A^T */
      TG_CU_BLAS_TRY(op, gemm_batched_name(T()),
                     gemm_batched(h, o[2].row_major ? CUBLAS_OP_N : CUBLAS_OP_T,
                                  o[1].row_major ? CUBLAS_OP_N : CUBLAS_OP_T, n, m, k, &one, B,
                                  o[2].ld, sb, A, o[1].ld, sa, &zero, C, o[0].ld, sc, batch));
    else /* C (m x n) = A B */
      TG_CU_BLAS_TRY(op, gemm_batched_name(T()),
                     gemm_batched(h, o[1].row_major ? CUBLAS_OP_T : CUBLAS_OP_N,
                                  o[2].row_major ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &one, A,
                                  o[1].ld, sa, B, o[2].ld, sb, &zero, C, o[0].ld, sc, batch));
  }
  return TG_OK;
}

tg_status check_fit(const char *op, const tg_cu_view *v) {
  const int nd = v[0].ndim;
  bool fits = nd >= 3 && v[1].ndim == nd && v[2].ndim == nd &&
              v[1].sizes[nd - 1] == v[2].sizes[nd - 2] &&
              v[0].sizes[nd - 2] == v[1].sizes[nd - 2] && v[0].sizes[nd - 1] == v[2].sizes[nd - 1];
  for (int d = 0; fits && d < nd - 2; d++)
    fits = v[1].sizes[d] == v[0].sizes[d] && v[2].sizes[d] == v[0].sizes[d];
  if (!fits) return tg_set_error(TG_ERR_SHAPE, "%s: out = a @ b does not fit (batched)", op);
  return TG_OK;
}

} // namespace

tg_status tg__kernel_bmm_gemm_cuda(int n, tg_tensor *const *t) {
  TG__KERNEL_ARITY("bmm.gemm", n, 3);
  const char *op = "cuda.bmm_gemm";
  tg_cu_view v[3];
  tg_status st = tg_cu_views_floating(op, 3, t, v);
  if (st != TG_OK || (st = check_fit(op, v)) != TG_OK) return st;
  const int nd = v[0].ndim;
  const int64_t m = v[1].sizes[nd - 2], k = v[1].sizes[nd - 1], cols = v[2].sizes[nd - 1];
  if (tg_cu_numel(v[0]) == 0) return TG_OK;
  if (k == 0) return tg_cu_fill(op, v[0], 0.0); /* empty sums */
  tg_cu_device *dev;
  if ((st = tg_cu_device_get(op, v[0].device, &dev)) != TG_OK) return st;

  tg_cu_temp a_tmp, b_tmp, c_tmp;
  tg_cu_view rv[3] = {v[0], v[1], v[2]};
  operand o[3];
  if ((st = readable(op, v[1], &a_tmp, &rv[1], &o[1])) != TG_OK ||
      (st = readable(op, v[2], &b_tmp, &rv[2], &o[2])) != TG_OK)
    return st;
  const bool direct = layout_of(v[0], &o[0]);
  if (!direct) { /* computed in a contiguous temporary, then copied into out */
    c_tmp.ptr = tg_cu_alloc(op, v[0].device, tg_cu_nbytes(v[0]));
    if (!c_tmp.ptr) return tg_last_error();
    rv[0] = tg_cu_view_dense(c_tmp.ptr, v[0].dtype, v[0].device, nd, v[0].sizes);
    layout_of(rv[0], &o[0]);
  }
  const batch_dims bd = merged_batch(rv);
  if (!tg_cu_fits_int(m) || !tg_cu_fits_int(k) || !tg_cu_fits_int(cols) ||
      !tg_cu_fits_int(bd.size[bd.n - 1]))
    return tg_set_error(TG_ERR_UNSUPPORTED,
                        "%s: sizes [%lld, %lld] x [%lld, %lld] (batch %lld) exceed cuBLAS's int "
                        "range",
                        op, (long long)m, (long long)k, (long long)k, (long long)cols,
                        (long long)bd.size[bd.n - 1]);
  TG_DISPATCH_FLOATING_TYPES(rv[0].dtype, op, { st = run<scalar_t>(op, dev, rv, o, bd); });
  if (st == TG_OK && !direct) st = tg_cu_copy(op, v[0], rv[0]);
  return st;
}
