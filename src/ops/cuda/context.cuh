/* The CUDA runtime state of tg: lazy initialisation, the devices, their streams and cuBLAS
 * handles. Nothing here runs before the first CUDA use (Criterion forks a process per
 * test, and CUDA does not survive a fork). */
#ifndef TG_CUDA_CONTEXT_CUH
#define TG_CUDA_CONTEXT_CUH

#include "cuda_common.cuh"

#define TG_CU_MAX_DEVICES 16

/* One device's queue: every tg kernel, copy and cuBLAS call for it goes on stream, so the
 * caching allocator may hand a freed block to the next request at once. */
typedef struct tg_cu_device {
  int index;
  cudaStream_t stream;
  cublasHandle_t blas; /* created on first use */
} tg_cu_device;

/* Devices present (0 when there is no driver or no GPU); initialises CUDA once. */
int tg_cu_device_count(void);
/* Makes device index current on this thread and returns its queue, creating it on first
 * use; TG_ERR_DEVICE naming op if the device does not exist or CUDA fails. */
tg_status tg_cu_device_get(const char *op, int index, tg_cu_device **out);
/* The device's cuBLAS handle, bound to its stream. */
tg_status tg_cu_blas_get(const char *op, tg_cu_device *dev, cublasHandle_t *out);

/* The backend's device-memory entries (ops/backend.h). Checks that device exists, lazily
 * initialising CUDA, and makes it current; TG_ERR_DEVICE naming op otherwise. */
tg_status tg_cu_check_device(const char *op, tg_device device);
/* Copies nbytes between host and device or device and device (not host to host). */
tg_status tg_cu_memcpy(const char *op, void *dst, tg_device dst_device, const void *src,
                       tg_device src_device, size_t nbytes);

#endif
