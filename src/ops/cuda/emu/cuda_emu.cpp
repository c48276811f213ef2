/* The CUDA emulation layer's runtime: device memory, the host-access window, streams,
 * launches, and cuBLAS over BLIS. See cuda_emu.h for what is emulated and why. */
#include "cuda_emu.h"

#include <blis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <map>
#include <mutex>
#include <set>

thread_local uint3 threadIdx;
thread_local uint3 blockIdx;
thread_local dim3 blockDim;
thread_local dim3 gridDim;

namespace {

/* cudaMalloc's alignment, and the size of the red zone behind every buffer. */
constexpr size_t kAlign = 256;
constexpr unsigned char kPoison = 0xff;  /* fresh memory: NaN as float/double, -1 as I64 */
constexpr unsigned char kRedZone = 0xa5; /* behind each buffer: checked when it is freed */

/* Device memory is one reserved address range (the arena), handed out upwards in whole
 * pages and never reused, so that opening and closing it to the host is one mprotect
 * each, however many buffers are alive. Freed pages are given back to the kernel
 * (MADV_DONTNEED) but stay reserved. */
struct Allocation {
  char *pages;       /* its pages in the arena */
  size_t page_bytes; /* buffer + red zone, rounded up to pages */
  size_t size;       /* what was asked for, rounded to kAlign */
};

struct State {
  std::mutex mu;
  char *arena = nullptr;
  size_t arena_bytes = 0, used = 0;       /* [arena, arena + used) has been handed out */
  std::map<uintptr_t, Allocation> allocs; /* by user pointer */
  std::set<const void *> streams, handles;
  int window_depth = 0;
  int device_count = -1; /* -1: not set, read $TG_EMU_DEVICES */
  bool driver_missing = false;
  int fail_mallocs = 0, fail_launches = 0, fail_blas = 0;
  size_t bytes = 0;
};

State &state() {
  static State s; /* constructed on first use, never at load time */
  return s;
}

thread_local cudaError_t last_error = cudaSuccess;
thread_local int current_device = 0;

size_t page_size() { return (size_t)sysconf(_SC_PAGESIZE); }

cudaError_t record(cudaError_t e) {
  if (e != cudaSuccess) last_error = e;
  return e;
}

/* Device state as cudaGetDeviceCount sees it: the count, or the error it fails with. */
cudaError_t device_state(State &s, int *count) {
  if (s.device_count < 0) {
    const char *env = getenv("TG_EMU_DEVICES");
    s.device_count = env ? atoi(env) : 1;
  }
  *count = s.device_count;
  if (s.driver_missing) return cudaErrorInsufficientDriver;
  if (s.device_count <= 0) return cudaErrorNoDevice;
  return cudaSuccess;
}

void set_protection(char *p, size_t n, bool open) {
  if (n && mprotect(p, n, open ? PROT_READ | PROT_WRITE : PROT_NONE) != 0)
    abort(); /* the emulation itself is broken: nothing sensible to report */
}

void open_window(State &s) {
  if (s.window_depth++ == 0) set_protection(s.arena, s.used, true);
}
void close_window(State &s) {
  if (--s.window_depth == 0) set_protection(s.arena, s.used, false);
}

/* Reserves the arena on first use: as much address space as the system grants, up to
 * 64 GiB (address space only: nothing is committed until touched). */
bool reserve_arena(State &s) {
  for (size_t bytes = (size_t)64 << 30; !s.arena && bytes >= ((size_t)1 << 30); bytes /= 2) {
    void *p = mmap(NULL, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p != MAP_FAILED) s.arena = (char *)p, s.arena_bytes = bytes;
  }
  return s.arena != nullptr;
}

/* Whether [p, p + nbytes) lies inside one device allocation. */
bool in_device(State &s, const void *p, size_t nbytes) {
  uintptr_t a = (uintptr_t)p;
  auto it = s.allocs.upper_bound(a);
  if (it == s.allocs.begin()) return false;
  --it;
  return a >= it->first && a - it->first <= it->second.size &&
         nbytes <= it->second.size - (a - it->first);
}

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

bool take_failure(int &counter) {
  if (counter <= 0) return false;
  counter--;
  return true;
}

} // namespace

/* ---- runtime ---- */

const char *cudaGetErrorName(cudaError_t error) {
  switch (error) {
  case cudaSuccess:
    return "cudaSuccess";
  case cudaErrorInvalidValue:
    return "cudaErrorInvalidValue";
  case cudaErrorMemoryAllocation:
    return "cudaErrorMemoryAllocation";
  case cudaErrorInvalidConfiguration:
    return "cudaErrorInvalidConfiguration";
  case cudaErrorInsufficientDriver:
    return "cudaErrorInsufficientDriver";
  case cudaErrorNoDevice:
    return "cudaErrorNoDevice";
  case cudaErrorInvalidDevice:
    return "cudaErrorInvalidDevice";
  case cudaErrorInvalidResourceHandle:
    return "cudaErrorInvalidResourceHandle";
  case cudaErrorLaunchFailure:
    return "cudaErrorLaunchFailure";
  }
  return "cudaErrorUnknown";
}

/* The runtime's own wording, so messages read the same as on a GPU machine. */
const char *cudaGetErrorString(cudaError_t error) {
  switch (error) {
  case cudaSuccess:
    return "no error";
  case cudaErrorInvalidValue:
    return "invalid argument";
  case cudaErrorMemoryAllocation:
    return "out of memory";
  case cudaErrorInvalidConfiguration:
    return "invalid configuration argument";
  case cudaErrorInsufficientDriver:
    return "CUDA driver version is insufficient for CUDA runtime version";
  case cudaErrorNoDevice:
    return "no CUDA-capable device is detected";
  case cudaErrorInvalidDevice:
    return "invalid device ordinal";
  case cudaErrorInvalidResourceHandle:
    return "invalid resource handle";
  case cudaErrorLaunchFailure:
    return "unspecified launch failure";
  }
  return "unknown error";
}

cudaError_t cudaGetLastError(void) {
  cudaError_t e = last_error;
  last_error = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError(void) { return last_error; }

cudaError_t cudaGetDeviceCount(int *count) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  int n = 0;
  cudaError_t e = device_state(s, &n);
  *count = e == cudaSuccess ? n : 0;
  return record(e);
}

cudaError_t cudaSetDevice(int device) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  int n = 0;
  cudaError_t e = device_state(s, &n);
  if (e != cudaSuccess) return record(e);
  if (device < 0 || device >= n) return record(cudaErrorInvalidDevice);
  current_device = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device) {
  *device = current_device;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  int n = 0;
  return record(device_state(s, &n));
}

cudaError_t cudaMalloc(void **ptr, size_t size) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  *ptr = NULL;
  int n = 0;
  cudaError_t e = device_state(s, &n);
  if (e != cudaSuccess) return record(e);
  if (take_failure(s.fail_mallocs) || !reserve_arena(s)) return record(cudaErrorMemoryAllocation);
  size_t page = page_size();
  size_t rounded = ((size ? size : 1) + kAlign - 1) / kAlign * kAlign;
  if (rounded < size || rounded > s.arena_bytes) return record(cudaErrorMemoryAllocation);
  size_t page_bytes = (rounded + kAlign + page - 1) / page * page;
  if (page_bytes > s.arena_bytes - s.used) return record(cudaErrorMemoryAllocation);
  Allocation a{s.arena + s.used, page_bytes, rounded};
  s.used += page_bytes;
  /* The buffer ends one red zone before its last page ends. */
  char *user = a.pages + page_bytes - kAlign - rounded;
  if (s.window_depth == 0) set_protection(a.pages, page_bytes, true);
  memset(a.pages, kPoison, page_bytes - kAlign);
  memset(user + rounded, kRedZone, kAlign);
  set_protection(a.pages, page_bytes, s.window_depth > 0);
  s.allocs[(uintptr_t)user] = a;
  s.bytes += rounded;
  *ptr = user;
  return cudaSuccess;
}

cudaError_t cudaFree(void *ptr) {
  if (!ptr) return cudaSuccess;
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.allocs.find((uintptr_t)ptr);
  if (it == s.allocs.end()) return record(cudaErrorInvalidValue);
  const Allocation &a = it->second;
  /* A kernel that wrote past its buffer hit the red zone: no GPU would say so, but a
   * silent overrun must not pass the tests. */
  const unsigned char *zone = (const unsigned char *)ptr + a.size;
  if (s.window_depth == 0) set_protection(a.pages, a.page_bytes, true);
  for (size_t i = 0; i < kAlign; i++)
    if (zone[i] != kRedZone) {
      fprintf(stderr, "tg CUDA emulation: a write past the end of a %zu-byte device buffer\n",
              a.size);
      abort();
    }
  madvise(a.pages, a.page_bytes, MADV_DONTNEED);
  set_protection(a.pages, a.page_bytes, s.window_depth > 0);
  s.bytes -= a.size;
  s.allocs.erase(it);
  return cudaSuccess;
}

static bool stream_ok(State &s, cudaStream_t stream) {
  return stream == NULL || s.streams.count(stream) != 0;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!stream_ok(s, stream)) return record(cudaErrorInvalidResourceHandle);
  if (count == 0) return cudaSuccess;
  bool dst_dev = in_device(s, dst, count), src_dev = in_device(s, src, count);
  bool ok = true;
  switch (kind) {
  case cudaMemcpyHostToHost:
    ok = !dst_dev && !src_dev;
    break;
  case cudaMemcpyHostToDevice:
    ok = dst_dev && !src_dev;
    break;
  case cudaMemcpyDeviceToHost:
    ok = !dst_dev && src_dev;
    break;
  case cudaMemcpyDeviceToDevice:
    ok = dst_dev && src_dev;
    break;
  case cudaMemcpyDefault:
    break;
  }
  /* A pointer that starts in device memory but runs past its buffer is an error too. */
  if (!dst_dev && in_device(s, dst, 1)) ok = false;
  if (!src_dev && in_device(s, src, 1)) ok = false;
  if (!ok) return record(cudaErrorInvalidValue);
  open_window(s);
  memmove(dst, src, count);
  close_window(s);
  return cudaSuccess;
}

struct tg_emu_stream {
  int device;
};

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags) {
  (void)flags;
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  int n = 0;
  cudaError_t e = device_state(s, &n);
  if (e != cudaSuccess) return record(e);
  *stream = new tg_emu_stream{current_device};
  s.streams.insert(*stream);
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!stream || !s.streams.erase(stream)) return record(cudaErrorInvalidResourceHandle);
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return stream_ok(s, stream) ? cudaSuccess : record(cudaErrorInvalidResourceHandle);
}

/* ---- launches ---- */

cudaError_t tg_emu_launch_begin(dim3 grid, dim3 block, cudaStream_t stream) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  int n = 0;
  cudaError_t e = device_state(s, &n);
  if (e != cudaSuccess) return record(e);
  if (!stream_ok(s, stream)) return record(cudaErrorInvalidResourceHandle);
  unsigned long threads = (unsigned long)block.x * block.y * block.z;
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 0x7fffffffu || grid.y > 65535 ||
      grid.z > 65535 || threads == 0 || threads > 1024 || block.z > 64)
    return record(cudaErrorInvalidConfiguration);
  if (take_failure(s.fail_launches)) return record(cudaErrorLaunchFailure);
  open_window(s);
  return cudaSuccess;
}

void tg_emu_launch_end(void) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  close_window(s);
}

/* ---- cuBLAS ---- */

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

/* cuBLAS's argument checks for gemm, plus: every operand it reads lies in device memory. */
cublasStatus_t check_gemm(State &s, cublasHandle_t handle, cublasOperation_t ta,
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

/* ---- test controls ---- */

void tg_emu_set_device_count(int count) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.device_count = count;
}
void tg_emu_set_driver_missing(bool missing) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.driver_missing = missing;
}
void tg_emu_fail_mallocs(int n) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.fail_mallocs = n;
}
void tg_emu_fail_launches(int n) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.fail_launches = n;
}
void tg_emu_fail_blas(int n) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.fail_blas = n;
}
size_t tg_emu_device_allocations(void) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.allocs.size();
}
size_t tg_emu_device_bytes(void) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.bytes;
}
bool tg_emu_is_device_pointer(const void *p) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return in_device(s, p, 1);
}
