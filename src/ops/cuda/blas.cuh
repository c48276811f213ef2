/* cuBLAS by element type: one spelling for float and double, so templated code picks
 * cublasS* or cublasD* from scalar_t. Pointer mode host (alpha, beta on the host). */
#ifndef TG_CUDA_BLAS_CUH
#define TG_CUDA_BLAS_CUH

#include "cuda_common.cuh"

static inline cublasStatus_t tg_cu_blas_gemm(cublasHandle_t h, cublasOperation_t ta,
                                             cublasOperation_t tb, int m, int n, int k,
                                             const float *alpha, const float *A, int lda,
                                             const float *B, int ldb, const float *beta, float *C,
                                             int ldc) {
  return cublasSgemm(h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}
static inline cublasStatus_t tg_cu_blas_gemm(cublasHandle_t h, cublasOperation_t ta,
                                             cublasOperation_t tb, int m, int n, int k,
                                             const double *alpha, const double *A, int lda,
                                             const double *B, int ldb, const double *beta,
                                             double *C, int ldc) {
  return cublasDgemm(h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}
static inline cublasStatus_t tg_cu_blas_gemv(cublasHandle_t h, cublasOperation_t t, int m, int n,
                                             const float *alpha, const float *A, int lda,
                                             const float *x, int incx, const float *beta, float *y,
                                             int incy) {
  return cublasSgemv(h, t, m, n, alpha, A, lda, x, incx, beta, y, incy);
}
static inline cublasStatus_t tg_cu_blas_gemv(cublasHandle_t h, cublasOperation_t t, int m, int n,
                                             const double *alpha, const double *A, int lda,
                                             const double *x, int incx, const double *beta,
                                             double *y, int incy) {
  return cublasDgemv(h, t, m, n, alpha, A, lda, x, incx, beta, y, incy);
}

/* The names of the functions above, for error messages. */
static inline const char *tg_cu_blas_gemm_name(float) { return "cublasSgemm"; }
static inline const char *tg_cu_blas_gemm_name(double) { return "cublasDgemm"; }
static inline const char *tg_cu_blas_gemv_name(float) { return "cublasSgemv"; }
static inline const char *tg_cu_blas_gemv_name(double) { return "cublasDgemv"; }

/* cuBLAS takes int sizes, leading dimensions and increments. */
static inline bool tg_cu_fits_int(int64_t v) { return v >= 0 && v <= 0x7fffffff; }

#endif
