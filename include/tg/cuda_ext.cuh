/* tg — for the CUDA sources (.cu) of extensions: the CUDA runtime, and tg_cuda_launch, which
 * launches a kernel on a stream (use tg_cuda_stream's: the stream tg's own work runs on).
 *
 * Launch through tg_cuda_launch rather than kernel<<<grid, block, 0, stream>>>(...): under
 * nvcc it is exactly that launch; and the same source then also compiles as plain C++
 * against tg's CPU emulation of CUDA (TG_CUDA_EMULATION, which tg's tests build and the JIT
 * of an emulated tg uses), so an extension's kernels run, and are tested, without a GPU. */
#ifndef TG_CUDA_EXT_CUH
#define TG_CUDA_EXT_CUH

#ifdef TG_CUDA_EMULATION
#include "ops/cuda/emu/cuda_emu.h" /* from tg's source tree (src/): tests only */
#else
#include <cuda_runtime.h>
#endif

#include "tg.h"

/* kernel<<<grid, block, 0, stream>>>(args...); returns the launch's error (cudaSuccess). */
template <typename... KernelArgs, typename... Args>
static inline cudaError_t tg_cuda_launch(void (*kernel)(KernelArgs...), dim3 grid, dim3 block,
                                         cudaStream_t stream, const Args &...args) {
#ifdef TG_CUDA_EMULATION
  (void)tg_emu_launch(kernel, grid, block, stream, args...);
#else
  kernel<<<grid, block, 0, stream>>>(args...);
#endif
  return cudaGetLastError();
}

#endif
