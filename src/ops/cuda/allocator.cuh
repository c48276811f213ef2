/* The CUDA caching allocator, for storages (the backend's allocator entry) and for the
 * temporaries of kernels and cuBLAS calls. */
#ifndef TG_CUDA_ALLOCATOR_CUH
#define TG_CUDA_ALLOCATOR_CUH

#include "cuda_common.cuh"

/* nbytes of device memory on device (index), from the cache when a block of its size class
 * is free; NULL with TG_ERR_MEMORY naming op when the driver has none to give. */
void *tg_cu_alloc(const char *op, int device, size_t nbytes);
/* Returns a block from tg_cu_alloc to the cache (NULL is a no-op). Safe while kernels
 * queued on the device's stream still use it: every later user is queued behind them. */
void tg_cu_free(void *ptr);
/* The storage allocator over the cache: allocates on the current device (see
 * tg_cu_check_device). The backend table's allocator entry. */
extern const tg_allocator tg_cu_storage_allocator;

/* A temporary device buffer released at the end of its scope, error paths included. */
struct tg_cu_temp {
  void *ptr = nullptr;
  tg_cu_temp() = default;
  tg_cu_temp(const tg_cu_temp &) = delete;
  tg_cu_temp &operator=(const tg_cu_temp &) = delete;
  ~tg_cu_temp() { tg_cu_free(ptr); }
};

#endif
