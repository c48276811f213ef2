/* tg_cuda_timer (tg/cuda.h): two CUDA events on the stream of cuda:0, where tg queues all of
 * that device's work, so the time between them is the device's time for the work queued in
 * between, not the host's time to launch it. */
#include <stdlib.h>

#include "context.cuh"
#include "tensor/host_memory.h"

/* The device whose stream the timer measures: benchmarks and demos run on cuda:0. */
#define TIMER_DEVICE 0

struct tg_cuda_timer {
  tg_cu_device *dev;
  cudaEvent_t start, stop; /* created on dev */
  bool started;
};

static tg_status create_event(const char *op, cudaEvent_t *out) {
  cudaEvent_t event = NULL;
  TG_CU_TRY(op, cudaEventCreate(&event));
  *out = event;
  return TG_OK;
}

/* Destroys the events that exist. A failure here is a sticky error of an earlier call
 * showing up: it is cleared so that the next launch does not report it as its own. */
static void destroy_events(tg_cuda_timer *timer) {
  if (timer->start && cudaEventDestroy(timer->start) != cudaSuccess) (void)cudaGetLastError();
  if (timer->stop && cudaEventDestroy(timer->stop) != cudaSuccess) (void)cudaGetLastError();
}

tg_cuda_timer *tg_cuda_timer_new(void) {
  const char *op = "tg_cuda_timer_new";
  tg_cu_device *dev;
  /* Initialises CUDA if needed and makes the device current: events belong to it. */
  if (tg_cu_device_get(op, TIMER_DEVICE, &dev) != TG_OK) return NULL;
  tg_cuda_timer *timer = (tg_cuda_timer *)tg__host_calloc(1, sizeof *timer);
  if (!timer) {
    tg_set_error(TG_ERR_MEMORY, "%s: out of host memory", op);
    return NULL;
  }
  timer->dev = dev;
  if (create_event(op, &timer->start) != TG_OK || create_event(op, &timer->stop) != TG_OK) {
    destroy_events(timer);
    tg__host_free(timer);
    return NULL;
  }
  return timer;
}

tg_status tg_cuda_timer_start(tg_cuda_timer *timer) {
  const char *op = "tg_cuda_timer_start";
  if (!timer) return tg_set_error(TG_ERR_ARGUMENT, "%s: timer is NULL", op);
  TG_CU_TRY(op, cudaEventRecord(timer->start, timer->dev->stream));
  timer->started = true;
  return TG_OK;
}

tg_status tg_cuda_timer_elapsed_ms(tg_cuda_timer *timer, double *ms) {
  const char *op = "tg_cuda_timer_elapsed_ms";
  if (!timer) return tg_set_error(TG_ERR_ARGUMENT, "%s: timer is NULL", op);
  if (!ms) return tg_set_error(TG_ERR_ARGUMENT, "%s: ms is NULL", op);
  if (!timer->started)
    return tg_set_error(TG_ERR_STATE, "%s: the timer was not started (call tg_cuda_timer_start)",
                        op);
  TG_CU_TRY(op, cudaEventRecord(timer->stop, timer->dev->stream));
  TG_CU_TRY(op, cudaEventSynchronize(timer->stop));
  float elapsed = 0.0f;
  TG_CU_TRY(op, cudaEventElapsedTime(&elapsed, timer->start, timer->stop));
  *ms = (double)elapsed;
  return TG_OK;
}

void tg_cuda_timer_free(tg_cuda_timer *timer) {
  if (!timer) return;
  destroy_events(timer);
  tg__host_free(timer);
}
