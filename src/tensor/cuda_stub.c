/* CUDA hooks for a build without CUDA: every request for the device is a clean error. */
#include "device.h"
#include "tg/cuda.h"

const tg_backend *tg__cuda_backend(void) { return NULL; }
const tg_allocator *tg__cuda_allocator(void) { return NULL; }

tg_status tg__cuda_memcpy(const char *op, void *dst, tg_device dst_device, const void *src,
                          tg_device src_device, size_t nbytes) {
  (void)dst, (void)dst_device, (void)src, (void)src_device, (void)nbytes;
  return tg_set_error(TG_ERR_DEVICE, "%s: tg was built without CUDA", op);
}

tg_status tg__cuda_check_device(const char *op, tg_device device) {
  return tg_set_error(TG_ERR_DEVICE, "%s: device cuda:%d requested but tg was built without CUDA",
                      op, device.index);
}

bool tg_cuda_is_built(void) { return false; }
int tg_cuda_device_count(void) { return 0; }
bool tg_cuda_is_available(void) { return false; }
tg_status tg_cuda_synchronize(void) {
  return tg_set_error(TG_ERR_DEVICE, "tg_cuda_synchronize: tg was built without CUDA");
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
