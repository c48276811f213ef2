/* What every CUDA source of tg includes: the CUDA runtime and cuBLAS (real, or emulated
 * on the host when TG_CUDA_EMULATION is defined), the tg headers it needs, launches and
 * error checks. */
#ifndef TG_CUDA_COMMON_CUH
#define TG_CUDA_COMMON_CUH

/* The CUDA runtime (real, or the emulation under TG_CUDA_EMULATION) and tg_cuda_launch, the
 * kernel launch (a template rather than the <<<>>> syntax, so plain C++ can compile it),
 * which tg's kernels share with extensions' (tg/cuda_ext.cuh). */
#include "tg/cuda_ext.cuh"
#ifndef TG_CUDA_EMULATION
#include <cublas_v2.h>
#endif

#include <stdint.h>

/* tg's internal headers are C without extern "C" guards of their own. */
extern "C" {
#include "ops/backend.h"
#include "tg/cuda.h"
#include "tg/dispatch.h"
#include "tg/tensor.h"
}

#include "tensor/hostdevice.h"

/* Threads per block of the one-thread-per-element kernels, and the grid cap beyond which
 * the grid-stride loops take over. */
#define TG_CU_BLOCK 256
#define TG_CU_MAX_BLOCKS 65535

/* Blocks for n elements (n > 0). */
static inline unsigned tg_cu_blocks(int64_t n) {
  int64_t blocks = (n + TG_CU_BLOCK - 1) / TG_CU_BLOCK;
  return (unsigned)(blocks < TG_CU_MAX_BLOCKS ? blocks : TG_CU_MAX_BLOCKS);
}

/* The grid-stride loop of a one-dimensional launch: i runs over [0, n). */
#define TG_CU_GRID_STRIDE(i, n)                                                                    \
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                        \
       i += (int64_t)blockDim.x * gridDim.x)

/* CUDA and cuBLAS failures become tg errors: TG_ERR_DEVICE naming op, the failed call
 * (what: its name, or its source text of which the name is kept) and the runtime's message.
 * Both clear the runtime's last error so it is not reported twice. */
tg_status tg_cu_fail(const char *op, const char *what, cudaError_t err);
tg_status tg_cu_blas_fail(const char *op, const char *what, cublasStatus_t status);

#define TG_CU_TRY(op, call)                                                                        \
  do {                                                                                             \
    cudaError_t tg_cu_err_ = (call);                                                               \
    if (tg_cu_err_ != cudaSuccess) return tg_cu_fail((op), #call, tg_cu_err_);                     \
  } while (0)

/* what: the cuBLAS function's name, for the message. */
#define TG_CU_BLAS_TRY(op, what, call)                                                             \
  do {                                                                                             \
    cublasStatus_t tg_cu_st_ = (call);                                                             \
    if (tg_cu_st_ != CUBLAS_STATUS_SUCCESS) return tg_cu_blas_fail((op), (what), tg_cu_st_);       \
  } while (0)

/* Launches kernel(args...) over a one-dimensional grid for n > 0 elements on stream;
 * a failed launch returns the tg error from the enclosing function. */
#define TG_CU_LAUNCH(op, n, stream, ...)                                                           \
  do {                                                                                             \
    cudaError_t tg_cu_err_ = tg_launch_1d((n), (stream), __VA_ARGS__);                             \
    if (tg_cu_err_ != cudaSuccess) return tg_cu_fail((op), "kernel launch", tg_cu_err_);           \
  } while (0)

template <typename... KArgs, typename... Args>
static inline cudaError_t tg_launch_1d(int64_t n, cudaStream_t stream, void (*kernel)(KArgs...),
                                       const Args &...args) {
  return tg_cuda_launch(kernel, dim3(tg_cu_blocks(n)), dim3(TG_CU_BLOCK), stream, args...);
}

#endif
