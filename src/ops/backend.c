/* The built-in devices this library has (the registry, src/ops/device_registry.c, asks
 * once per type) and the tg/cuda.h functions of a library without CUDA. This file is compiled once
 * per library (not in tg_core): TG_WITH_CUDA=1 when that library links src/ops/cuda/ (real or
 * emulated), so there is no stub and no weak symbol: a build without CUDA names no CUDA code at
 * all. */
#include "ops/backend.h"
#include "tg/cuda.h"

#ifndef TG_WITH_CUDA
#error "src/ops/backend.c needs TG_WITH_CUDA (0 or 1) from the build"
#endif

const tg_device_ops *tg__builtin_device(tg_device_type type) {
  switch (type) {
  case TG_CPU:
    return &tg_cpu_device;
#if TG_WITH_CUDA
  case TG_CUDA:
    return &tg_cuda_device;
#endif
  default:
    return NULL;
  }
}

bool tg__cuda_is_emulated(void) {
#ifdef TG_CUDA_EMULATION
  return true;
#else
  return false;
#endif
}

#if !TG_WITH_CUDA
/* tg/cuda.h in a library without CUDA: every request for the device is a clean error. */
bool tg_cuda_is_built(void) { return false; }
int tg_cuda_device_count(void) { return 0; }
bool tg_cuda_is_available(void) { return false; }
tg_status tg_cuda_synchronize(void) {
  return tg_set_error(TG_ERR_DEVICE, "tg_cuda_synchronize: tg was built without CUDA");
}
tg_status tg_cuda_stream(int device_index, void **stream) {
  if (stream) *stream = NULL;
  return tg_set_error(TG_ERR_DEVICE, "tg_cuda_stream: tg was built without CUDA (device %d)",
                      device_index);
}
tg_status tg_cuda_memory_stats_get(tg_cuda_memory_stats *out) {
  if (out) *out = (tg_cuda_memory_stats){0};
  return tg_set_error(TG_ERR_DEVICE, "tg_cuda_memory_stats_get: tg was built without CUDA");
}
tg_status tg_cuda_empty_cache(void) {
  return tg_set_error(TG_ERR_DEVICE, "tg_cuda_empty_cache: tg was built without CUDA");
}
/* There is no device to time: the timer cannot be made, and nothing can be timed. */
tg_cuda_timer *tg_cuda_timer_new(void) {
  tg_set_error(TG_ERR_DEVICE, "tg_cuda_timer_new: tg was built without CUDA");
  return NULL;
}
tg_status tg_cuda_timer_start(tg_cuda_timer *timer) {
  (void)timer;
  return tg_set_error(TG_ERR_DEVICE, "tg_cuda_timer_start: tg was built without CUDA");
}
tg_status tg_cuda_timer_elapsed_ms(tg_cuda_timer *timer, double *ms) {
  (void)timer, (void)ms;
  return tg_set_error(TG_ERR_DEVICE, "tg_cuda_timer_elapsed_ms: tg was built without CUDA");
}
void tg_cuda_timer_free(tg_cuda_timer *timer) { (void)timer; }
#endif
