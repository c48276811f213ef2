/* tg — DLPack: hand tensors to other libraries (PyTorch, NumPy, CuPy, JAX) and take theirs,
 * zero-copy, under the ownership rules of dlpack/dlpack.h (version 0.6, DLManagedTensor).
 *
 * This header needs only a declaration of the struct; include <dlpack/dlpack.h> (Debian's
 * libdlpack-dev) to look inside it. */
#ifndef TG_DLPACK_H
#define TG_DLPACK_H

#include "tensor.h"

TG_API_BEGIN
#ifdef __cplusplus
extern "C" {
#endif

struct DLManagedTensor;

/* A DLManagedTensor that views t's memory (sizes, strides in elements, byte offset 0 and
 * data at element 0, device kDLCPU or kDLCUDA) and keeps t's storage alive until the
 * consumer calls its deleter, exactly once. t's grad and graph are not exported (like
 * torch.utils.dlpack.to_dlpack on a detached tensor). A CUDA tensor's device is synchronised
 * first (DLPack 0.6 names no stream). NULL + error on NULL t or out of memory. */
struct DLManagedTensor *tg_to_dlpack(const tg_tensor *t);
/* A tensor (scope-owned) that views the managed tensor's memory; tg takes ownership of m
 * and calls its deleter once, when the last tensor or view of that memory is released.
 * Accepted: float32, float64 and int64 with lanes 1; kDLCPU, kDLCUDAHost (pinned host
 * memory, imported as a CPU tensor) and kDLCUDA when tg has CUDA; NULL strides (compact
 * row-major); at most TG_MAX_DIMS dims. Anything else, or out of memory, is an error that
 * names what is wrong, and ownership stays with the caller: m's deleter is not called. */
tg_tensor *tg_from_dlpack(struct DLManagedTensor *m);

#ifdef __cplusplus
}
#endif
TG_API_END
#endif
