/* A process-wide cache of freed 64-byte-aligned host blocks (the CPU backend's storage
 * data), so a loop that allocates the same large temporaries every step reuses them
 * instead of paying malloc/free and the page faults of fresh memory each time.
 *
 * Sizes are rounded up to a class (8 per power of two: at most 12.5% more than asked);
 * each class keeps a LIFO list linked through the free blocks themselves, so caching
 * allocates nothing. The blocks held are bounded in total (a block freed beyond the bound
 * goes back to the system): by the peak of the bytes the cache's blocks had in use at one
 * time, and 256 MiB at least. A program's working set is then cached whole, whatever its size
 * (GPT-2 small's step frees about 700 MB of activations that the next step allocates again:
 * with a fixed 256 MiB the rest went back to the system and was faulted in again every step,
 * 10-30% of the step on 1 and 2 threads), and the cache never holds more than the program
 * itself once used. A mutex guards the lists and the counts: storages are freed by whichever
 * thread drops the last reference. The cache is drained by tg__host_cache_drain and at
 * process exit (an atexit handler, after which frees bypass it, so a release that runs
 * later in the exit sequence cannot leak).
 *
 * Every tg__host_cached_alloc is an allocation attempt of host_memory.h, a cache hit
 * included, so fault injection reaches it as before. Under ASan and valgrind the cached
 * blocks are marked inaccessible (a use after free is still reported) and a reused block
 * is marked uninitialised again, as a fresh one is. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "host_memory.h"

/* POISON: a block goes into the cache (no access until reused); LINK: its first bytes,
 * the list link written before POISON, are read again; REUSE: it comes out, uninitialised
 * as a fresh block is. */
#if defined(__SANITIZE_ADDRESS__) /* GCC; clang defines it too since version 11 */
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define LINK(p) ASAN_UNPOISON_MEMORY_REGION(p, sizeof(free_block))
#define REUSE(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#elif __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define POISON(p, n) VALGRIND_MAKE_MEM_NOACCESS(p, n)
#define LINK(p) VALGRIND_MAKE_MEM_DEFINED(p, sizeof(free_block))
#define REUSE(p, n) VALGRIND_MAKE_MEM_UNDEFINED(p, n)
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define LINK(p) ((void)(p))
#define REUSE(p, n) ((void)(p), (void)(n))
#endif

enum {
  MIN_SHIFT = 12, /* blocks below 4 KiB: malloc's own bins serve them as fast */
  MAX_SHIFT = 31, /* and above 2 GiB: rare, and the bound would not hold many */
  STEPS = 8,      /* classes per power of two */
  CLASSES = (MAX_SHIFT - MIN_SHIFT) * STEPS,
};

typedef struct free_block {
  struct free_block *next;
} free_block;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static free_block *lists[CLASSES];
static size_t cached_bytes;
static size_t live_bytes, peak_live_bytes; /* blocks of the classes handed out, not yet freed */
static bool closed;                        /* set at exit: frees go straight to the system */
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

/* The class of an n-byte block, -1 for sizes the cache leaves alone; *size is the class's
 * block size (n rounded up). */
static int class_of(size_t n, size_t *size) {
  if (n <= (size_t)1 << MIN_SHIFT || n > (size_t)1 << MAX_SHIFT) return -1;
  int e = 63 - __builtin_clzll((unsigned long long)(n - 1)); /* 2^e < n <= 2^(e+1) */
  const size_t step = (size_t)1 << (e - 3);
  const size_t k = (n - 1 - ((size_t)1 << e)) / step; /* 0..7 */
  *size = ((size_t)1 << e) + (k + 1) * step;
  return (e - MIN_SHIFT) * STEPS + (int)k;
}

/* Where blocks start. Fresh from malloc, every large block would start at the same offset
 * in its page (each is an mmap of its own), so a kernel's operands would all alias in the
 * L1 cache and in the 4 KiB check of store forwarding: composed LLTM backward 3-4% slower
 * than with malloc, whose recycled blocks land anywhere. Each block is placed at its own
 * multiple of 64 bytes in its first page instead, the system block's address kept in the
 * 8 bytes before it. */
#define STAGGER 4096
static atomic_uint next_block;

static void *placed(char *base) {
  const unsigned k = atomic_fetch_add_explicit(&next_block, 1, memory_order_relaxed);
  char *p = base + TG_HOST_CACHE_ALIGN * (1 + k * 23 % (STAGGER / TG_HOST_CACHE_ALIGN - 1));
  memcpy(p - sizeof base, &base, sizeof base);
  return p;
}
static void release(void *p) {
  char *base;
  memcpy(&base, (char *)p - sizeof base, sizeof base);
  free(base);
}

/* The block size of class c (the inverse of class_of). */
static size_t class_size(int c) {
  const int e = c / STEPS + MIN_SHIFT;
  return ((size_t)1 << e) + (size_t)(c % STEPS + 1) * ((size_t)1 << (e - 3));
}

static void drain_locked(void) {
  for (int c = 0; c < CLASSES; c++) {
    while (lists[c]) {
      free_block *b = lists[c];
      LINK(b);
      lists[c] = b->next;
      REUSE(b, class_size(c)); /* free() of a poisoned block would be reported */
      release(b);
    }
  }
  cached_bytes = 0;
}

static void drain_at_exit(void) {
  pthread_mutex_lock(&lock);
  closed = true;
  drain_locked();
  pthread_mutex_unlock(&lock);
}
static void install_exit_hook(void) { (void)atexit(drain_at_exit); }

/* A block of `size` handed out (under the lock). */
static void count_in_use_locked(size_t size) {
  live_bytes += size;
  if (live_bytes > peak_live_bytes) peak_live_bytes = live_bytes;
}

void *tg__host_cached_alloc(size_t n) {
  size_t size;
  const int c = class_of(n, &size);
  if (c < 0) return tg__host_aligned_alloc(TG_HOST_CACHE_ALIGN, n);
  if (!tg__host_attempt()) return NULL;
  pthread_mutex_lock(&lock);
  free_block *b = lists[c];
  if (b) {
    LINK(b);
    lists[c] = b->next;
    REUSE(b, size);
    cached_bytes -= size;
    count_in_use_locked(size);
  }
  pthread_mutex_unlock(&lock);
  if (b) return b;
  char *base = aligned_alloc(TG_HOST_CACHE_ALIGN, size + STAGGER);
  if (!base) return NULL;
  pthread_mutex_lock(&lock);
  count_in_use_locked(size);
  pthread_mutex_unlock(&lock);
  return placed(base);
}

/* Under the lock. */
static size_t bound_locked(void) {
  return peak_live_bytes > TG_HOST_CACHE_MIN_BOUND ? peak_live_bytes : TG_HOST_CACHE_MIN_BOUND;
}

void tg__host_cached_free(void *p, size_t n) {
  size_t size;
  const int c = p ? class_of(n, &size) : -1;
  if (c < 0) {
    free(p);
    return;
  }
  (void)pthread_once(&exit_once, install_exit_hook);
  pthread_mutex_lock(&lock);
  live_bytes -= size;
  const size_t bound = bound_locked();
  const bool keep = !closed && cached_bytes <= bound && size <= bound - cached_bytes;
  if (keep) {
    free_block *b = p;
    b->next = lists[c];
    lists[c] = b;
    cached_bytes += size;
    POISON(p, size);
  }
  pthread_mutex_unlock(&lock);
  if (!keep) release(p);
}

void tg__host_cache_drain(void) {
  pthread_mutex_lock(&lock);
  drain_locked();
  pthread_mutex_unlock(&lock);
}

size_t tg__host_cache_bytes(void) {
  pthread_mutex_lock(&lock);
  const size_t n = cached_bytes;
  pthread_mutex_unlock(&lock);
  return n;
}

void tg__host_cache_stats(size_t *in_use, size_t *peak_in_use, size_t *bound) {
  pthread_mutex_lock(&lock);
  *in_use = live_bytes;
  *peak_in_use = peak_live_bytes;
  *bound = bound_locked();
  pthread_mutex_unlock(&lock);
}
