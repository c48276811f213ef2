/* The caching allocator: cudaMalloc is slow and synchronises the device, so freed blocks
 * are kept in free lists, one per device and size class, and handed out again.
 *
 * Size classes: requests round up to a multiple of 512 B up to 1 MiB, to the next power of
 * two above. A block is reused only for its own class, so no block is ever split and the
 * waste is bounded (below 512 B per small block, below half of a large one). When the
 * driver is out of memory the device's cache is returned to it and the request retried.
 * The bookkeeping lives in host memory (device memory is not readable from the host). */
#include <pthread.h>
#include <stdlib.h>

#include "allocator.cuh"
#include "context.cuh"
#include "tensor/host_memory.h"

#define SMALL_STEP ((size_t)512)
#define SMALL_LIMIT ((size_t)1 << 20)
#define SMALL_CLASSES ((int)(SMALL_LIMIT / SMALL_STEP)) /* 2048: 512 B ... 1 MiB */
#define LARGE_CLASSES 44                                /* 2 MiB ... 2^63 B */
#define NUM_CLASSES (SMALL_CLASSES + LARGE_CLASSES)
#define LIVE_BUCKETS 4096

typedef struct block {
  void *ptr;
  size_t size; /* the class size */
  int device;
  struct block *next;
} block;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static block **free_lists[TG_CU_MAX_DEVICES]; /* [NUM_CLASSES] each, made on first use */
static block *live[LIVE_BUCKETS];             /* blocks handed out, by pointer */
static tg_cuda_memory_stats stats;

static size_t class_size(size_t nbytes) {
  if (nbytes <= SMALL_LIMIT)
    return nbytes ? (nbytes + SMALL_STEP - 1) / SMALL_STEP * SMALL_STEP : SMALL_STEP;
  size_t size = SMALL_LIMIT << 1;
  while (size < nbytes && size << 1 != 0) size <<= 1;
  return size;
}

static int class_index(size_t size) {
  if (size <= SMALL_LIMIT) return (int)(size / SMALL_STEP) - 1;
  int log2 = 0;
  while (((size_t)1 << log2) < size) log2++;
  return (int)SMALL_CLASSES + log2 - 21;
}

static size_t bucket(const void *ptr) { return ((uintptr_t)ptr >> 9) % LIVE_BUCKETS; }

/* Returns every cached block of device to the driver. Called with the lock held. */
static void release_cached(int device) {
  block **lists = free_lists[device];
  if (!lists) return;
  for (int c = 0; c < NUM_CLASSES; c++) {
    while (lists[c]) {
      block *b = lists[c];
      lists[c] = b->next;
      (void)cudaFree(b->ptr); /* only fails for a pointer it never gave: not the case */
      stats.bytes_cached -= b->size;
      stats.driver_frees++;
      tg__host_free(b);
    }
  }
  (void)cudaGetLastError();
}

void *tg_cu_alloc(const char *op, int device, size_t nbytes) {
  if (device < 0 || device >= TG_CU_MAX_DEVICES) {
    tg_set_error(TG_ERR_DEVICE, "%s: no CUDA device %d", op, device);
    return NULL;
  }
  size_t size = class_size(nbytes);
  if (size < nbytes) {
    tg_set_error(TG_ERR_MEMORY, "%s: %zu bytes cannot be allocated", op, nbytes);
    return NULL;
  }
  int c = class_index(size);
  pthread_mutex_lock(&lock);
  if (!free_lists[device])
    free_lists[device] = (block **)tg__host_calloc(NUM_CLASSES, sizeof(block *));
  block *b = free_lists[device] ? free_lists[device][c] : NULL;
  if (b) {
    free_lists[device][c] = b->next;
    stats.bytes_cached -= size;
  } else {
    b = (block *)tg__host_malloc(sizeof *b);
    void *ptr = NULL;
    cudaError_t err = b ? cudaErrorMemoryAllocation : cudaSuccess;
    if (b) {
      int current = -1;
      /* cudaMalloc allocates on the current device; make it the one asked for. */
      err = cudaGetDevice(&current);
      if (err == cudaSuccess && current != device) err = cudaSetDevice(device);
      if (err == cudaSuccess) err = cudaMalloc(&ptr, size);
      if (err == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        release_cached(device);
        err = cudaMalloc(&ptr, size);
      }
      if (current >= 0 && current != device) (void)cudaSetDevice(current);
    }
    if (!b || err != cudaSuccess) {
      pthread_mutex_unlock(&lock);
      tg__host_free(b);
      (void)cudaGetLastError();
      tg_set_error(TG_ERR_MEMORY, "%s: cannot allocate %zu bytes on cuda:%d (%s)", op, size, device,
                   b ? cudaGetErrorString(err) : "host out of memory");
      return NULL;
    }
    stats.driver_allocs++;
    b->ptr = ptr;
    b->size = size;
    b->device = device;
  }
  size_t h = bucket(b->ptr);
  b->next = live[h];
  live[h] = b;
  stats.bytes_in_use += size;
  if (stats.bytes_in_use > stats.peak_bytes_in_use) stats.peak_bytes_in_use = stats.bytes_in_use;
  void *ptr = b->ptr;
  pthread_mutex_unlock(&lock);
  return ptr;
}

void tg_cu_free(void *ptr) {
  if (!ptr) return;
  pthread_mutex_lock(&lock);
  block **link = &live[bucket(ptr)];
  while (*link && (*link)->ptr != ptr) link = &(*link)->next;
  block *b = *link;
  if (b) { /* a pointer tg never handed out is ignored: there is no one to report it to */
    *link = b->next;
    block **list = &free_lists[b->device][class_index(b->size)];
    b->next = *list;
    *list = b;
    stats.bytes_in_use -= b->size;
    stats.bytes_cached += b->size;
  }
  pthread_mutex_unlock(&lock);
}

/* ---- the storage allocator (tg_allocator) ---- */

/* Storages go on the current device, which tg_cu_check_device (the backend's check_device,
 * called before every CUDA storage) has just made the requested one. */
static void *storage_alloc(void *ctx, size_t nbytes) {
  (void)ctx;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    return NULL;
  }
  return tg_cu_alloc("tg_empty", device, nbytes);
}

static void storage_free(void *ctx, void *ptr, size_t nbytes) {
  (void)ctx, (void)nbytes;
  tg_cu_free(ptr);
}

const tg_allocator tg_cu_storage_allocator = {"cuda-caching", storage_alloc, storage_free, NULL};

/* ---- tg/cuda.h ---- */

tg_status tg_cuda_memory_stats_get(tg_cuda_memory_stats *out) {
  if (!out) return tg_set_error(TG_ERR_ARGUMENT, "tg_cuda_memory_stats_get: out is NULL");
  pthread_mutex_lock(&lock);
  *out = stats;
  pthread_mutex_unlock(&lock);
  return TG_OK;
}

tg_status tg_cuda_empty_cache(void) {
  pthread_mutex_lock(&lock);
  for (int d = 0; d < TG_CU_MAX_DEVICES; d++) release_cached(d);
  pthread_mutex_unlock(&lock);
  return TG_OK;
}
