/* The emulated CUDA runtime: errors, devices, streams, events, kernel launches, test
 * controls.
 * See cuda_emu.h for what is emulated and why. */
#include <stdlib.h>
#include <time.h>

#include "emu_state.h"

thread_local uint3 threadIdx;
thread_local uint3 blockIdx;
thread_local dim3 blockDim;
thread_local dim3 gridDim;

namespace tg_emu {

namespace {
thread_local cudaError_t last_error = cudaSuccess;
thread_local int current_device = 0;
} // namespace

State &state() {
  static State s;
  return s;
}

cudaError_t record(cudaError_t e) {
  if (e != cudaSuccess) last_error = e;
  return e;
}

cudaError_t device_state(State &s, int *count) {
  if (s.device_count < 0) {
    const char *env = getenv("TG_EMU_DEVICES");
    s.device_count = env ? atoi(env) : 1;
  }
  *count = s.device_count;
  if (s.driver_missing) return cudaErrorInsufficientDriver;
  if (s.device_count <= 0) return cudaErrorNoDevice;
  return cudaSuccess;
}

bool stream_ok(State &s, cudaStream_t stream) {
  return stream == NULL || s.streams.count(stream) != 0;
}

bool take_failure(int &counter) {
  if (counter <= 0) return false;
  counter--;
  return true;
}

} // namespace tg_emu

using namespace tg_emu;

/* ---- runtime ---- */

const char *cudaGetErrorName(cudaError_t error) {
  switch (error) {
  case cudaSuccess:
    return "cudaSuccess";
  case cudaErrorInvalidValue:
    return "cudaErrorInvalidValue";
  case cudaErrorMemoryAllocation:
    return "cudaErrorMemoryAllocation";
  case cudaErrorInvalidConfiguration:
    return "cudaErrorInvalidConfiguration";
  case cudaErrorInsufficientDriver:
    return "cudaErrorInsufficientDriver";
  case cudaErrorNoDevice:
    return "cudaErrorNoDevice";
  case cudaErrorInvalidDevice:
    return "cudaErrorInvalidDevice";
  case cudaErrorInvalidResourceHandle:
    return "cudaErrorInvalidResourceHandle";
  case cudaErrorLaunchFailure:
    return "cudaErrorLaunchFailure";
  }
  return "cudaErrorUnknown";
}

/* The runtime's own wording, so messages read the same as on a GPU machine. */
const char *cudaGetErrorString(cudaError_t error) {
  switch (error) {
  case cudaSuccess:
    return "no error";
  case cudaErrorInvalidValue:
    return "invalid argument";
  case cudaErrorMemoryAllocation:
    return "out of memory";
  case cudaErrorInvalidConfiguration:
    return "invalid configuration argument";
  case cudaErrorInsufficientDriver:
    return "CUDA driver version is insufficient for CUDA runtime version";
  case cudaErrorNoDevice:
    return "no CUDA-capable device is detected";
  case cudaErrorInvalidDevice:
    return "invalid device ordinal";
  case cudaErrorInvalidResourceHandle:
    return "invalid resource handle";
  case cudaErrorLaunchFailure:
    return "unspecified launch failure";
  }
  return "unknown error";
}

cudaError_t cudaGetLastError(void) {
  cudaError_t e = last_error;
  last_error = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError(void) { return last_error; }

cudaError_t cudaGetDeviceCount(int *count) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  int n = 0;
  cudaError_t e = device_state(s, &n);
  *count = e == cudaSuccess ? n : 0;
  return record(e);
}

cudaError_t cudaSetDevice(int device) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  int n = 0;
  cudaError_t e = device_state(s, &n);
  if (e != cudaSuccess) return record(e);
  if (device < 0 || device >= n) return record(cudaErrorInvalidDevice);
  current_device = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device) {
  *device = current_device;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  int n = 0;
  return record(device_state(s, &n));
}

struct tg_emu_stream {
  int device;
};

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags) {
  (void)flags;
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  int n = 0;
  cudaError_t e = device_state(s, &n);
  if (e != cudaSuccess) return record(e);
  *stream = new tg_emu_stream{current_device};
  s.streams.insert(*stream);
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!stream || !s.streams.erase(stream)) return record(cudaErrorInvalidResourceHandle);
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return stream_ok(s, stream) ? cudaSuccess : record(cudaErrorInvalidResourceHandle);
}

/* ---- events ---- */

/* Work on a stream is complete when its call returns, so an event completes when it is
 * recorded: its time is the host's monotonic clock then. */
struct tg_emu_event {
  int device;
  bool recorded;
  double ms; /* CLOCK_MONOTONIC in milliseconds, when recorded */
};

static bool event_ok(State &s, cudaEvent_t event) { return event && s.events.count(event); }

cudaError_t cudaEventCreate(cudaEvent_t *event) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  int n = 0;
  cudaError_t e = device_state(s, &n);
  if (e != cudaSuccess) return record(e);
  if (!event) return record(cudaErrorInvalidValue);
  if (take_failure(s.fail_events)) return record(cudaErrorLaunchFailure);
  *event = new tg_emu_event{current_device, false, 0.0};
  s.events.insert(*event);
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!event_ok(s, event)) return record(cudaErrorInvalidResourceHandle);
  s.events.erase(event);
  delete event;
  return cudaSuccess;
}

/* As on a GPU, the event and the stream (the default stream: the current device's) must
 * belong to one device. */
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!event_ok(s, event) || !stream_ok(s, stream)) return record(cudaErrorInvalidResourceHandle);
  int stream_device = stream ? stream->device : current_device;
  if (stream_device != event->device) return record(cudaErrorInvalidResourceHandle);
  if (take_failure(s.fail_events)) return record(cudaErrorLaunchFailure);
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  event->ms = (double)now.tv_sec * 1e3 + (double)now.tv_nsec * 1e-6;
  event->recorded = true;
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!event_ok(s, event)) return record(cudaErrorInvalidResourceHandle);
  if (take_failure(s.fail_events)) return record(cudaErrorLaunchFailure);
  return cudaSuccess;
}

/* Both events must have been recorded (cudaErrorInvalidResourceHandle otherwise, as the
 * runtime says). */
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!ms) return record(cudaErrorInvalidValue);
  if (!event_ok(s, start) || !event_ok(s, end) || !start->recorded || !end->recorded)
    return record(cudaErrorInvalidResourceHandle);
  if (take_failure(s.fail_events)) return record(cudaErrorLaunchFailure);
  *ms = (float)(end->ms - start->ms);
  return cudaSuccess;
}

/* ---- launches ---- */

cudaError_t tg_emu_launch_begin(dim3 grid, dim3 block, cudaStream_t stream) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  int n = 0;
  cudaError_t e = device_state(s, &n);
  if (e != cudaSuccess) return record(e);
  if (!stream_ok(s, stream)) return record(cudaErrorInvalidResourceHandle);
  unsigned long threads = (unsigned long)block.x * block.y * block.z;
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 0x7fffffffu || grid.y > 65535 ||
      grid.z > 65535 || threads == 0 || threads > 1024 || block.z > 64)
    return record(cudaErrorInvalidConfiguration);
  if (take_failure(s.fail_launches)) return record(cudaErrorLaunchFailure);
  open_window(s);
  return cudaSuccess;
}

void tg_emu_launch_end(void) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  close_window(s);
}

/* ---- test controls ---- */

void tg_emu_set_device_count(int count) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.device_count = count;
}
void tg_emu_set_driver_missing(bool missing) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.driver_missing = missing;
}
void tg_emu_fail_mallocs(int n) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.fail_mallocs = n;
}
void tg_emu_fail_launches(int n) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.fail_launches = n;
}
void tg_emu_fail_blas(int n) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.fail_blas = n;
}
void tg_emu_fail_events(int n) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.fail_events = n;
}
size_t tg_emu_live_events(void) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.events.size();
}
