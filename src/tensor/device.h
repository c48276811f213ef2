/* The hooks the device-independent core calls for CUDA. Implemented by src/ops/cuda/ when
 * CUDA (real or emulated) is built, else by src/tensor/cuda_stub.c. */
#ifndef TG_DEVICE_H
#define TG_DEVICE_H

#include "../ops/backend.h"
#include "tg/tensor.h"

/* The CUDA backend's primitive table, NULL when not built. */
const tg_backend *tg__cuda_backend(void);
/* The CUDA caching allocator (device memory), NULL when not built. The allocator interface
 * has no device argument: it allocates on the current device, which tg__cuda_check_device
 * sets — call that first (tg__storage_new does). */
const tg_allocator *tg__cuda_allocator(void);
/* Copies nbytes between host and device or device and device. CPU<->CPU is not routed
 * here. Records TG_ERR_DEVICE (naming op) when CUDA is missing. */
tg_status tg__cuda_memcpy(const char *op, void *dst, tg_device dst_device, const void *src,
                          tg_device src_device, size_t nbytes);
/* Checks that device index exists (lazily initialising CUDA); records TG_ERR_DEVICE naming op
 * otherwise. */
tg_status tg__cuda_check_device(const char *op, tg_device device);

#endif
