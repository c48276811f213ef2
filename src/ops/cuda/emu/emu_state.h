/* The emulation's shared state (internal to src/ops/cuda/emu/): the (emulated) devices,
 * device memory, streams, events, cuBLAS handles and the test controls, behind one mutex. */
#ifndef TG_EMU_STATE_H
#define TG_EMU_STATE_H

#include "cuda_emu.h"

#include <map>
#include <mutex>
#include <set>

namespace tg_emu {

/* Device memory is one reserved address range (the arena), handed out upwards in whole
 * pages and never reused, so that opening and closing it to the host is one mprotect
 * each, however many buffers are alive. Freed pages are given back to the kernel
 * (MADV_DONTNEED) but stay reserved. */
struct Allocation {
  char *pages;       /* its pages in the arena */
  size_t page_bytes; /* buffer + red zone, rounded up to pages */
  size_t size;       /* what was asked for, rounded to cudaMalloc's alignment */
};

struct State {
  std::mutex mu;
  char *arena = nullptr;
  size_t arena_bytes = 0, used = 0;       /* [arena, arena + used) has been handed out */
  std::map<uintptr_t, Allocation> allocs; /* by user pointer */
  std::set<const void *> streams, handles, events;
  int window_depth = 0;
  int device_count = -1; /* -1: not set, read $TG_EMU_DEVICES */
  bool driver_missing = false;
  int fail_mallocs = 0, fail_launches = 0, fail_blas = 0, fail_events = 0;
  size_t bytes = 0;
};

/* Made on first use, never at load time. Callers lock s.mu around what follows. */
State &state();

/* Keeps e as the thread's last error (unless cudaSuccess) and returns it. */
cudaError_t record(cudaError_t e);
/* What cudaGetDeviceCount would say: the count, or the error it fails with. */
cudaError_t device_state(State &s, int *count);
/* Whether stream is the default stream or one that was created and not destroyed. */
bool stream_ok(State &s, cudaStream_t stream);
/* Consumes one injected failure, if any is left. */
bool take_failure(int &counter);

/* Device memory: the host may touch it only between open_window and close_window
 * (nestable), which copies, launches and cuBLAS calls do. */
void open_window(State &s);
void close_window(State &s);
/* Whether [p, p + nbytes) lies inside one device buffer. */
bool in_device(State &s, const void *p, size_t nbytes);

} // namespace tg_emu

#endif
