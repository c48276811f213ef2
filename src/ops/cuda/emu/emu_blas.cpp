/* Emulated cuBLAS: the argument checks cuBLAS makes, plus a check that every operand
 * lies in device memory, then the same product by BLIS (column-major strides) on the
 * calling thread. See cuda_emu.h for what is emulated and why. */
#include <blis.h>

#include "emu_state.h"

using namespace tg_emu;

struct tg_emu_blas {
  cudaStream_t stream;
};

const char *cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
  case CUBLAS_STATUS_SUCCESS:
    return "the operation completed successfully";
  case CUBLAS_STATUS_NOT_INITIALIZED:
    return "the library was not initialized";
  case CUBLAS_STATUS_ALLOC_FAILED:
    return "the resource allocation failed";
  case CUBLAS_STATUS_INVALID_VALUE:
    return "an invalid numeric value was used as an argument";
  case CUBLAS_STATUS_EXECUTION_FAILED:
    return "the GPU program failed to execute";
  }
  return "unknown cuBLAS status";
}

cublasStatus_t cublasCreate(cublasHandle_t *handle) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  int n = 0;
  if (device_state(s, &n) != cudaSuccess) return CUBLAS_STATUS_NOT_INITIALIZED;
  *handle = new tg_emu_blas{NULL};
  s.handles.insert(*handle);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!handle || !s.handles.erase(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!handle || !s.handles.count(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!stream_ok(s, stream)) return CUBLAS_STATUS_INVALID_VALUE;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

namespace {

/* Bytes a column-major rows x cols matrix with leading dimension ld spans (0: none read). */
size_t matrix_extent(int rows, int cols, int ld, size_t elem) {
  if (rows <= 0 || cols <= 0) return 0;
  return ((size_t)(cols - 1) * (size_t)ld + (size_t)rows) * elem;
}
size_t vector_extent(int n, int inc, size_t elem) {
  if (n <= 0) return 0;
  return ((size_t)(n - 1) * (size_t)(inc < 0 ? -inc : inc) + 1) * elem;
}
bool operand_ok(State &s, const void *p, size_t extent) {
  return extent == 0 || in_device(s, p, extent);
}

/* cuBLAS's argument checks for gemm, plus: every operand it reads lies in device memory. No
 * injected failure (check_gemm takes it). */
cublasStatus_t check_gemm_args(State &s, cublasHandle_t handle, cublasOperation_t ta,
                               cublasOperation_t tb, int m, int n, int k, const void *A, int lda,
                               const void *B, int ldb, const void *C, int ldc, size_t elem) {
  if (!handle || !s.handles.count(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  int a_rows = ta == CUBLAS_OP_N ? m : k, a_cols = ta == CUBLAS_OP_N ? k : m;
  int b_rows = tb == CUBLAS_OP_N ? k : n, b_cols = tb == CUBLAS_OP_N ? n : k;
  if (m < 0 || n < 0 || k < 0 || lda < (a_rows > 1 ? a_rows : 1) ||
      ldb < (b_rows > 1 ? b_rows : 1) || ldc < (m > 1 ? m : 1))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (!operand_ok(s, A, k ? matrix_extent(a_rows, a_cols, lda, elem) : 0) ||
      !operand_ok(s, B, k ? matrix_extent(b_rows, b_cols, ldb, elem) : 0) ||
      !operand_ok(s, C, matrix_extent(m, n, ldc, elem)))
    return CUBLAS_STATUS_INVALID_VALUE; /* a GPU would fault or read garbage */
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t check_gemm(State &s, cublasHandle_t handle, cublasOperation_t ta,
                          cublasOperation_t tb, int m, int n, int k, const void *A, int lda,
                          const void *B, int ldb, const void *C, int ldc, size_t elem) {
  cublasStatus_t st = check_gemm_args(s, handle, ta, tb, m, n, k, A, lda, B, ldb, C, ldc, elem);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  if (take_failure(s.fail_blas)) return CUBLAS_STATUS_EXECUTION_FAILED;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t check_gemv(State &s, cublasHandle_t handle, cublasOperation_t trans, int m, int n,
                          const void *A, int lda, const void *x, int incx, const void *y, int incy,
                          size_t elem) {
  if (!handle || !s.handles.count(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (m < 0 || n < 0 || lda < (m > 1 ? m : 1) || incx == 0 || incy == 0)
    return CUBLAS_STATUS_INVALID_VALUE;
  int x_len = trans == CUBLAS_OP_N ? n : m, y_len = trans == CUBLAS_OP_N ? m : n;
  if (!operand_ok(s, A, matrix_extent(m, n, lda, elem)) ||
      !operand_ok(s, x, vector_extent(x_len, incx, elem)) ||
      !operand_ok(s, y, vector_extent(y_len, incy, elem)))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (take_failure(s.fail_blas)) return CUBLAS_STATUS_EXECUTION_FAILED;
  return CUBLAS_STATUS_SUCCESS;
}

/* The emulated GPU runs its BLIS calls on the calling thread: small products do not pay
 * for a thread team spinning against the tests' other work, and results are repeatable. */
rntm_t one_thread() {
  rntm_t rntm = BLIS_RNTM_INITIALIZER;
  bli_rntm_set_num_threads(1, &rntm);
  return rntm;
}

trans_t blis_trans(cublasOperation_t op) {
  return op == CUBLAS_OP_N ? BLIS_NO_TRANSPOSE : BLIS_TRANSPOSE;
}

/* One template for both precisions; BLIS's typed API takes non-const pointers. */
template <typename T, typename Gemm>
cublasStatus_t gemm(Gemm blis_gemm, cublasHandle_t handle, cublasOperation_t ta,
                    cublasOperation_t tb, int m, int n, int k, const T *alpha, const T *A, int lda,
                    const T *B, int ldb, const T *beta, T *C, int ldc) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  cublasStatus_t st = check_gemm(s, handle, ta, tb, m, n, k, A, lda, B, ldb, C, ldc, sizeof(T));
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
  T a = *alpha, b = *beta;
  rntm_t rntm = one_thread();
  open_window(s);
  blis_gemm(blis_trans(ta), blis_trans(tb), m, n, k, &a, (T *)A, 1, lda, (T *)B, 1, ldb, &b, C, 1,
            ldc, NULL, &rntm);
  close_window(s);
  return CUBLAS_STATUS_SUCCESS;
}

/* The strided-batched gemm: entry i reads A + i strideA, B + i strideB and writes
 * C + i strideC (a stride of 0 reads one operand for every entry, as cuBLAS allows). Every
 * entry is checked before any runs; an injected failure fails the whole call. */
template <typename T, typename Gemm>
cublasStatus_t gemm_strided_batched(Gemm blis_gemm, cublasHandle_t handle, cublasOperation_t ta,
                                    cublasOperation_t tb, int m, int n, int k, const T *alpha,
                                    const T *A, int lda, long long sa, const T *B, int ldb,
                                    long long sb, const T *beta, T *C, int ldc, long long sc,
                                    int batch) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!handle || !s.handles.count(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (batch < 0) return CUBLAS_STATUS_INVALID_VALUE;
  for (int i = 0; i < batch; i++) {
    cublasStatus_t st = check_gemm_args(s, handle, ta, tb, m, n, k, A + i * sa, lda, B + i * sb,
                                        ldb, C + i * sc, ldc, sizeof(T));
    if (st != CUBLAS_STATUS_SUCCESS) return st;
  }
  if (take_failure(s.fail_blas)) return CUBLAS_STATUS_EXECUTION_FAILED;
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
  T a = *alpha, b = *beta;
  rntm_t rntm = one_thread();
  open_window(s);
  for (int i = 0; i < batch; i++)
    blis_gemm(blis_trans(ta), blis_trans(tb), m, n, k, &a, (T *)(A + i * sa), 1, lda,
              (T *)(B + i * sb), 1, ldb, &b, C + i * sc, 1, ldc, NULL, &rntm);
  close_window(s);
  return CUBLAS_STATUS_SUCCESS;
}

/* BLIS, like BLAS, sizes gemv by A as stored (m x n), whatever the transpose. */
template <typename T, typename Gemv>
cublasStatus_t gemv(Gemv blis_gemv, cublasHandle_t handle, cublasOperation_t trans, int m, int n,
                    const T *alpha, const T *A, int lda, const T *x, int incx, const T *beta, T *y,
                    int incy) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  cublasStatus_t st = check_gemv(s, handle, trans, m, n, A, lda, x, incx, y, incy, sizeof(T));
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
  T a = *alpha, b = *beta;
  rntm_t rntm = one_thread();
  open_window(s);
  blis_gemv(blis_trans(trans), BLIS_NO_CONJUGATE, m, n, &a, (T *)A, 1, lda, (T *)x, incx, &b, y,
            incy, NULL, &rntm);
  close_window(s);
  return CUBLAS_STATUS_SUCCESS;
}

} // namespace

cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa,
                           cublasOperation_t transb, int m, int n, int k, const float *alpha,
                           const float *A, int lda, const float *B, int ldb, const float *beta,
                           float *C, int ldc) {
  return gemm<float>(bli_sgemm_ex, handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C,
                     ldc);
}
cublasStatus_t cublasDgemm(cublasHandle_t handle, cublasOperation_t transa,
                           cublasOperation_t transb, int m, int n, int k, const double *alpha,
                           const double *A, int lda, const double *B, int ldb, const double *beta,
                           double *C, int ldc) {
  return gemm<double>(bli_dgemm_ex, handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C,
                      ldc);
}
cublasStatus_t cublasSgemv(cublasHandle_t handle, cublasOperation_t trans, int m, int n,
                           const float *alpha, const float *A, int lda, const float *x, int incx,
                           const float *beta, float *y, int incy) {
  return gemv<float>(bli_sgemv_ex, handle, trans, m, n, alpha, A, lda, x, incx, beta, y, incy);
}
cublasStatus_t cublasDgemv(cublasHandle_t handle, cublasOperation_t trans, int m, int n,
                           const double *alpha, const double *A, int lda, const double *x, int incx,
                           const double *beta, double *y, int incy) {
  return gemv<double>(bli_dgemv_ex, handle, trans, m, n, alpha, A, lda, x, incx, beta, y, incy);
}
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k,
                                         const float *alpha, const float *A, int lda,
                                         long long strideA, const float *B, int ldb,
                                         long long strideB, const float *beta, float *C, int ldc,
                                         long long strideC, int batchCount) {
  return gemm_strided_batched<float>(bli_sgemm_ex, handle, transa, transb, m, n, k, alpha, A, lda,
                                     strideA, B, ldb, strideB, beta, C, ldc, strideC, batchCount);
}
cublasStatus_t cublasDgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k,
                                         const double *alpha, const double *A, int lda,
                                         long long strideA, const double *B, int ldb,
                                         long long strideB, const double *beta, double *C, int ldc,
                                         long long strideC, int batchCount) {
  return gemm_strided_batched<double>(bli_dgemm_ex, handle, transa, transb, m, n, k, alpha, A, lda,
                                      strideA, B, ldb, strideB, beta, C, ldc, strideC, batchCount);
}
