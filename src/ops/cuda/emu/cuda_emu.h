/* The CUDA emulation layer: lets the .cu sources of src/ops/cuda/ compile as host C++ and
 * run on a machine without a GPU (the tg_emu library; TG_CUDA_EMULATION is defined).
 *
 * It declares the subset of the CUDA runtime and cuBLAS that tg uses, under their real
 * names, so the wrapper code around them (error checks, streams, the caching allocator)
 * is the same code that runs on a GPU. Behaviour (emu_runtime.cpp, emu_memory.cpp,
 * emu_blas.cpp):
 *  - device memory is a reserved address range kept PROT_NONE: host code that touches it
 *    faults as it would on a GPU; it is accessible only inside emulated copies, kernel
 *    launches and cuBLAS calls. Fresh buffers hold 0xff bytes (NaN, -1), not zeros, and a
 *    red zone behind each buffer is checked when it is freed (a write past the end
 *    aborts). Copies and cuBLAS calls check that their ranges lie inside one buffer.
 *  - a kernel launch (tg_cuda_launch in include/tg/cuda_ext.cuh) runs the kernel as loops over
 * blocks and threads, one after the other, last block and thread first (a kernel that relies on
 * threads running in index order fails here): kernels must not use __syncthreads or shared memory,
 * and must be correct in any thread order (as they must on a GPU).
 *  - streams exist but every operation completes before returning; so an event completes
 *    when it is recorded and holds the host's monotonic clock at that moment.
 *  - cuBLAS gemm/gemv validate their arguments like cuBLAS and call BLIS column-major.
 *  - emu_control.h lets tests change the device count or make the next call fail.
 * Only what tg uses is here; a new CUDA call needs its emulation added. */
#ifndef TG_CUDA_EMU_H
#define TG_CUDA_EMU_H

#ifndef __cplusplus
#error "cuda_emu.h is for the C++ emulation build of the .cu sources"
#endif

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "emu_control.h"

/* ---- CUDA C++ keywords: kernels become plain functions ---- */
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)

struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};
struct uint3 {
  unsigned x, y, z;
};

/* The built-in index variables, set by the launch loops (thread_local: launches from
 * different host threads do not interfere). */
extern thread_local uint3 threadIdx;
extern thread_local uint3 blockIdx;
extern thread_local dim3 blockDim;
extern thread_local dim3 gridDim;

/* Threads of an emulated launch run one at a time, so atomics are plain updates. */
template <typename T> inline T atomicAdd(T *address, T value) {
  T old = *address;
  *address = old + value;
  return old;
}

/* ---- runtime ---- */
enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInsufficientDriver = 35,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorLaunchFailure = 719,
};
typedef cudaError_t cudaError;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

typedef struct tg_emu_stream *cudaStream_t;
#define cudaStreamNonBlocking 0x01u

const char *cudaGetErrorString(cudaError_t error);
const char *cudaGetErrorName(cudaError_t error);
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);
cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaMalloc(void **ptr, size_t size);
cudaError_t cudaFree(void *ptr);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, cudaMemcpyKind kind,
                            cudaStream_t stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);

typedef struct tg_emu_event *cudaEvent_t;
cudaError_t cudaEventCreate(cudaEvent_t *event);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = 0);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end);

/* ---- cuBLAS (v2 API, pointer mode host) ---- */
enum cublasStatus_t {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_EXECUTION_FAILED = 13,
};
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 };
typedef struct tg_emu_blas *cublasHandle_t;

const char *cublasGetStatusString(cublasStatus_t status);
cublasStatus_t cublasCreate(cublasHandle_t *handle);
cublasStatus_t cublasDestroy(cublasHandle_t handle);
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream);
cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa,
                           cublasOperation_t transb, int m, int n, int k, const float *alpha,
                           const float *A, int lda, const float *B, int ldb, const float *beta,
                           float *C, int ldc);
cublasStatus_t cublasDgemm(cublasHandle_t handle, cublasOperation_t transa,
                           cublasOperation_t transb, int m, int n, int k, const double *alpha,
                           const double *A, int lda, const double *B, int ldb, const double *beta,
                           double *C, int ldc);
/* The batched products bmm runs (src/ops/cuda/bmm.cu): batchCount gemms at fixed strides. */
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k,
                                         const float *alpha, const float *A, int lda,
                                         long long strideA, const float *B, int ldb,
                                         long long strideB, const float *beta, float *C, int ldc,
                                         long long strideC, int batchCount);
cublasStatus_t cublasDgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k,
                                         const double *alpha, const double *A, int lda,
                                         long long strideA, const double *B, int ldb,
                                         long long strideB, const double *beta, double *C, int ldc,
                                         long long strideC, int batchCount);
cublasStatus_t cublasSgemv(cublasHandle_t handle, cublasOperation_t trans, int m, int n,
                           const float *alpha, const float *A, int lda, const float *x, int incx,
                           const float *beta, float *y, int incy);
cublasStatus_t cublasDgemv(cublasHandle_t handle, cublasOperation_t trans, int m, int n,
                           const double *alpha, const double *A, int lda, const double *x, int incx,
                           const double *beta, double *y, int incy);

/* ---- kernel launches ---- */
/* Validates the launch and opens device memory to the host; cudaSuccess or the error the
 * launch reports. Every successful begin needs its end. */
cudaError_t tg_emu_launch_begin(dim3 grid, dim3 block, cudaStream_t stream);
void tg_emu_launch_end(void);

/* kernel<<<grid, block, 0, stream>>>(args...): the threads run one at a time, in reverse
 * index order. Arguments are passed by value to every thread, as a launch copies them. */
template <typename... KArgs, typename... Args>
cudaError_t tg_emu_launch(void (*kernel)(KArgs...), dim3 grid, dim3 block, cudaStream_t stream,
                          const Args &...args) {
  cudaError_t err = tg_emu_launch_begin(grid, block, stream);
  if (err != cudaSuccess) return err;
  gridDim = grid;
  blockDim = block;
  for (unsigned bz = grid.z; bz-- > 0;)
    for (unsigned by = grid.y; by-- > 0;)
      for (unsigned bx = grid.x; bx-- > 0;) {
        blockIdx = uint3{bx, by, bz};
        for (unsigned tz = block.z; tz-- > 0;)
          for (unsigned ty = block.y; ty-- > 0;)
            for (unsigned tx = block.x; tx-- > 0;) {
              threadIdx = uint3{tx, ty, tz};
              kernel(args...);
            }
      }
  tg_emu_launch_end();
  return cudaSuccess;
}

#endif
