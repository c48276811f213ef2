/* Emulated device memory: cudaMalloc/cudaFree over a reserved arena kept PROT_NONE, the
 * host-access window, and cudaMemcpyAsync. See cuda_emu.h for what is emulated and why. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "emu_state.h"

namespace tg_emu {

namespace {

/* cudaMalloc's alignment, and the size of the red zone behind every buffer. */
constexpr size_t kAlign = 256;
constexpr unsigned char kPoison = 0xff;  /* fresh memory: NaN as float/double, -1 as I64 */
constexpr unsigned char kRedZone = 0xa5; /* behind each buffer: checked when it is freed */

size_t page_size() { return (size_t)sysconf(_SC_PAGESIZE); }

void set_protection(char *p, size_t n, bool open) {
  if (n && mprotect(p, n, open ? PROT_READ | PROT_WRITE : PROT_NONE) != 0)
    abort(); /* the emulation itself is broken: nothing sensible to report */
}

/* Reserves the arena on first use: as much address space as the system grants, up to
 * 64 GiB (address space only: nothing is committed until touched). */
bool reserve_arena(State &s) {
  for (size_t bytes = (size_t)64 << 30; !s.arena && bytes >= ((size_t)1 << 30); bytes /= 2) {
    void *p = mmap(NULL, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p != MAP_FAILED) s.arena = (char *)p, s.arena_bytes = bytes;
  }
  return s.arena != nullptr;
}

} // namespace

void open_window(State &s) {
  if (s.window_depth++ == 0) set_protection(s.arena, s.used, true);
}
void close_window(State &s) {
  if (--s.window_depth == 0) set_protection(s.arena, s.used, false);
}

/* Whether [p, p + nbytes) lies inside one device allocation. */
bool in_device(State &s, const void *p, size_t nbytes) {
  uintptr_t a = (uintptr_t)p;
  auto it = s.allocs.upper_bound(a);
  if (it == s.allocs.begin()) return false;
  --it;
  return a >= it->first && a - it->first <= it->second.size &&
         nbytes <= it->second.size - (a - it->first);
}

} // namespace tg_emu

using namespace tg_emu;

cudaError_t cudaMalloc(void **ptr, size_t size) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  *ptr = NULL;
  int n = 0;
  cudaError_t e = device_state(s, &n);
  if (e != cudaSuccess) return record(e);
  if (take_failure(s.fail_mallocs) || !reserve_arena(s)) return record(cudaErrorMemoryAllocation);
  size_t page = page_size();
  size_t rounded = ((size ? size : 1) + kAlign - 1) / kAlign * kAlign;
  if (rounded < size || rounded > s.arena_bytes) return record(cudaErrorMemoryAllocation);
  size_t page_bytes = (rounded + kAlign + page - 1) / page * page;
  if (page_bytes > s.arena_bytes - s.used) return record(cudaErrorMemoryAllocation);
  Allocation a{s.arena + s.used, page_bytes, rounded};
  s.used += page_bytes;
  /* The buffer ends one red zone before its last page ends. */
  char *user = a.pages + page_bytes - kAlign - rounded;
  if (s.window_depth == 0) set_protection(a.pages, page_bytes, true);
  memset(a.pages, kPoison, page_bytes - kAlign);
  memset(user + rounded, kRedZone, kAlign);
  set_protection(a.pages, page_bytes, s.window_depth > 0);
  s.allocs[(uintptr_t)user] = a;
  s.bytes += rounded;
  *ptr = user;
  return cudaSuccess;
}

cudaError_t cudaFree(void *ptr) {
  if (!ptr) return cudaSuccess;
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.allocs.find((uintptr_t)ptr);
  if (it == s.allocs.end()) return record(cudaErrorInvalidValue);
  const Allocation &a = it->second;
  /* A kernel that wrote past its buffer hit the red zone: no GPU would say so, but a
   * silent overrun must not pass the tests. */
  const unsigned char *zone = (const unsigned char *)ptr + a.size;
  if (s.window_depth == 0) set_protection(a.pages, a.page_bytes, true);
  for (size_t i = 0; i < kAlign; i++)
    if (zone[i] != kRedZone) {
      fprintf(stderr, "tg CUDA emulation: a write past the end of a %zu-byte device buffer\n",
              a.size);
      abort();
    }
  madvise(a.pages, a.page_bytes, MADV_DONTNEED);
  set_protection(a.pages, a.page_bytes, s.window_depth > 0);
  s.bytes -= a.size;
  s.allocs.erase(it);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!stream_ok(s, stream)) return record(cudaErrorInvalidResourceHandle);
  if (count == 0) return cudaSuccess;
  bool dst_dev = in_device(s, dst, count), src_dev = in_device(s, src, count);
  bool ok = true;
  switch (kind) {
  case cudaMemcpyHostToHost:
    ok = !dst_dev && !src_dev;
    break;
  case cudaMemcpyHostToDevice:
    ok = dst_dev && !src_dev;
    break;
  case cudaMemcpyDeviceToHost:
    ok = !dst_dev && src_dev;
    break;
  case cudaMemcpyDeviceToDevice:
    ok = dst_dev && src_dev;
    break;
  case cudaMemcpyDefault:
    break;
  }
  /* A pointer that starts in device memory but runs past its buffer is an error too. */
  if (!dst_dev && in_device(s, dst, 1)) ok = false;
  if (!src_dev && in_device(s, src, 1)) ok = false;
  if (!ok) return record(cudaErrorInvalidValue);
  open_window(s);
  memmove(dst, src, count);
  close_window(s);
  return cudaSuccess;
}

size_t tg_emu_device_allocations(void) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.allocs.size();
}
size_t tg_emu_device_bytes(void) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.bytes;
}
bool tg_emu_is_device_pointer(const void *p) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return in_device(s, p, 1);
}
