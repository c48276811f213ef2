/* tg — the CUDA device. Every call works in a build without CUDA: it reports zero devices
 * or TG_ERR_DEVICE. The device is a module, libtg_cuda.so, that tg loads on the first use
 * of a CUDA device (beside libtg, or the path in the environment variable TG_CUDA_MODULE);
 * a program that never uses one never maps the CUDA runtime. A missing or mismatched module
 * is TG_ERR_DEVICE naming its path and why. CUDA is initialised lazily on first use. */
#ifndef TG_CUDA_H
#define TG_CUDA_H

#include "types.h"

TG_API_BEGIN
#ifdef __cplusplus
extern "C" {
#endif

/* Whether the CUDA module loads (and so whether tg was built with CUDA); loads it. */
bool tg_cuda_is_built(void);
/* Devices present (0 when not built, no driver, or no GPU). */
int tg_cuda_device_count(void);
bool tg_cuda_is_available(void);
tg_status tg_cuda_synchronize(void);
/* The stream (a cudaStream_t) on which tg queues every kernel, copy and cuBLAS call for
 * device index, created on first use. An extension's CUDA kernels launch on it, so that they
 * run in order with tg's ops (the stream is non-blocking: the legacy default stream does
 * not order with it). TG_ERR_DEVICE without CUDA or that device. */
tg_status tg_cuda_stream(int device_index, void **stream);

typedef struct tg_cuda_memory_stats {
  size_t bytes_in_use; /* held by live storages */
  size_t bytes_cached; /* freed by tg, kept for reuse */
  size_t peak_bytes_in_use;
  uint64_t driver_allocs; /* cudaMalloc calls so far */
  uint64_t driver_frees;
} tg_cuda_memory_stats;
tg_status tg_cuda_memory_stats_get(tg_cuda_memory_stats *out);
/* Returns cached blocks to the driver. */
tg_status tg_cuda_empty_cache(void);

/* ---- timing with CUDA events on the device's stream ----
 * start records an event now; elapsed records a second one, waits for it and gives the
 * milliseconds between them (cudaEventElapsedTime). For benchmarks: host timers would
 * measure launch time, not kernel time. */
typedef struct tg_cuda_timer tg_cuda_timer;
tg_cuda_timer *tg_cuda_timer_new(void); /* NULL + TG_ERR_DEVICE without CUDA or a device */
tg_status tg_cuda_timer_start(tg_cuda_timer *timer);
tg_status tg_cuda_timer_elapsed_ms(tg_cuda_timer *timer, double *ms);
void tg_cuda_timer_free(tg_cuda_timer *timer); /* NULL is a no-op */

#ifdef __cplusplus
}
#endif
TG_API_END
#endif
