/* Lazy CUDA initialisation, devices, streams and cuBLAS handles; CUDA errors as tg errors;
 * the backend's device-memory entries (check_device, copy_bytes: ops/backend.h) and the
 * runtime half of tg/cuda.h. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "context.cuh"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static bool initialised;
static int device_count;
static char no_device_reason[192]; /* why device_count is 0 */
static tg_cu_device devices[TG_CU_MAX_DEVICES];
static bool device_ready[TG_CU_MAX_DEVICES];

/* Keeps only the function name of a call's source text ("cudaMalloc(&p, n)"). */
static int call_name_length(const char *what) {
  const char *paren = strchr(what, '(');
  return paren ? (int)(paren - what) : (int)strlen(what);
}

tg_status tg_cu_fail(const char *op, const char *what, cudaError_t err) {
  (void)cudaGetLastError();
  return tg_set_error(TG_ERR_DEVICE, "%s: %.*s failed: %s (%s)", op, call_name_length(what), what,
                      cudaGetErrorString(err), cudaGetErrorName(err));
}

tg_status tg_cu_blas_fail(const char *op, const char *what, cublasStatus_t status) {
  (void)cudaGetLastError();
  return tg_set_error(TG_ERR_DEVICE, "%s: %.*s failed: %s (cuBLAS status %d)", op,
                      call_name_length(what), what, cublasGetStatusString(status), (int)status);
}

/* The first call asks the driver; a failure there (no driver, a driver older than the
 * runtime, no GPU) means zero devices, and the reason is kept for error messages. */
int tg_cu_device_count(void) {
  pthread_mutex_lock(&lock);
  if (!initialised) {
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      n = 0;
      snprintf(no_device_reason, sizeof no_device_reason, "cudaGetDeviceCount: %s",
               cudaGetErrorString(err));
    } else if (n == 0) {
      snprintf(no_device_reason, sizeof no_device_reason, "no CUDA-capable device is present");
    }
    device_count = n < TG_CU_MAX_DEVICES ? n : TG_CU_MAX_DEVICES;
    initialised = true;
  }
  int n = device_count;
  pthread_mutex_unlock(&lock);
  return n;
}

static tg_status no_device(const char *op, int index) {
  int n = tg_cu_device_count();
  if (n == 0)
    return tg_set_error(TG_ERR_DEVICE,
                        "%s: device cuda:%d requested but no CUDA device is available (%s)", op,
                        index, no_device_reason);
  return tg_set_error(TG_ERR_DEVICE, "%s: device cuda:%d does not exist (%d CUDA device%s)", op,
                      index, n, n == 1 ? "" : "s");
}

tg_status tg_cu_device_get(const char *op, int index, tg_cu_device **out) {
  if (index < 0 || index >= tg_cu_device_count()) return no_device(op, index);
  TG_CU_TRY(op, cudaSetDevice(index));
  pthread_mutex_lock(&lock);
  tg_cu_device *dev = &devices[index];
  if (!device_ready[index]) {
    /* Non-blocking: tg's work never waits on the legacy default stream. */
    cudaError_t err = cudaStreamCreateWithFlags(&dev->stream, cudaStreamNonBlocking);
    if (err != cudaSuccess) {
      pthread_mutex_unlock(&lock);
      return tg_cu_fail(op, "cudaStreamCreateWithFlags", err);
    }
    dev->index = index;
    dev->blas = NULL;
    device_ready[index] = true;
  }
  pthread_mutex_unlock(&lock);
  *out = dev;
  return TG_OK;
}

tg_status tg_cu_blas_get(const char *op, tg_cu_device *dev, cublasHandle_t *out) {
  pthread_mutex_lock(&lock);
  if (!dev->blas) {
    cublasHandle_t handle = NULL;
    cublasStatus_t st = cublasCreate(&handle);
    if (st == CUBLAS_STATUS_SUCCESS) {
      st = cublasSetStream(handle, dev->stream);
      if (st != CUBLAS_STATUS_SUCCESS) cublasDestroy(handle);
    }
    if (st != CUBLAS_STATUS_SUCCESS) {
      pthread_mutex_unlock(&lock);
      return tg_cu_blas_fail(op, "cublasCreate", st);
    }
    dev->blas = handle;
  }
  *out = dev->blas;
  pthread_mutex_unlock(&lock);
  return TG_OK;
}

/* ---- the backend's device-memory entries (ops/backend.h) ---- */

/* Also makes the device current: the caching allocator allocates on the current device. */
tg_status tg_cu_check_device(const char *op, tg_device device) {
  tg_cu_device *dev;
  return tg_cu_device_get(op, device.index, &dev);
}

tg_status tg_cu_memcpy(const char *op, void *dst, tg_device dst_device, const void *src,
                       tg_device src_device, size_t nbytes) {
  if (nbytes == 0) return TG_OK;
  bool to_dev = dst_device.type == TG_CUDA, from_dev = src_device.type == TG_CUDA;
  if (!to_dev && !from_dev)
    return tg_set_error(TG_ERR_ARGUMENT, "%s: host to host copy routed to CUDA", op);
  tg_cu_device *dev;
  if (to_dev && from_dev && dst_device.index != src_device.index) {
    /* Between devices: the source's queue must be done before the destination's copies. */
    tg_status st = tg_cu_device_get(op, src_device.index, &dev);
    if (st != TG_OK) return st;
    TG_CU_TRY(op, cudaStreamSynchronize(dev->stream));
  }
  tg_status st = tg_cu_device_get(op, to_dev ? dst_device.index : src_device.index, &dev);
  if (st != TG_OK) return st;
  cudaMemcpyKind kind = to_dev ? (from_dev ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                               : cudaMemcpyDeviceToHost;
  TG_CU_TRY(op, cudaMemcpyAsync(dst, src, nbytes, kind, dev->stream));
  /* Copies that involve the host or two devices are complete when we return: the host may
   * read dst or free src at once (a pinned src is not consumed when cudaMemcpyAsync
   * returns), and a source on another device may go back to that device's cache. Copies
   * within one device stay queued on its stream. */
  if (kind != cudaMemcpyDeviceToDevice || dst_device.index != src_device.index)
    TG_CU_TRY(op, cudaStreamSynchronize(dev->stream));
  return TG_OK;
}

/* ---- tg/cuda.h ---- */

bool tg_cuda_is_built(void) { return true; }
int tg_cuda_device_count(void) { return tg_cu_device_count(); }
bool tg_cuda_is_available(void) { return tg_cu_device_count() > 0; }

tg_status tg_cuda_stream(int device_index, void **stream) {
  if (!stream) return tg_set_error(TG_ERR_ARGUMENT, "tg_cuda_stream: stream is NULL");
  *stream = NULL;
  tg_cu_device *dev;
  tg_status st = tg_cu_device_get("tg_cuda_stream", device_index, &dev);
  if (st != TG_OK) return st;
  *stream = (void *)dev->stream;
  return TG_OK;
}

tg_status tg_cuda_synchronize(void) {
  const char *op = "tg_cuda_synchronize";
  int n = tg_cu_device_count();
  if (n == 0) return no_device(op, 0);
  int current = 0;
  TG_CU_TRY(op, cudaGetDevice(&current));
  for (int i = 0; i < n; i++) {
    pthread_mutex_lock(&lock);
    bool ready = device_ready[i];
    pthread_mutex_unlock(&lock);
    if (!ready) continue;
    tg_cu_device *dev;
    tg_status st = tg_cu_device_get(op, i, &dev);
    if (st != TG_OK) return st;
    TG_CU_TRY(op, cudaStreamSynchronize(dev->stream));
  }
  TG_CU_TRY(op, cudaSetDevice(current));
  return TG_OK;
}
