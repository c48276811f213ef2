/* The one place tg allocates host memory, with a fault-injection hook for tests. */
#include "host_memory.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static atomic_llong attempts; /* allocation attempts so far */
static atomic_llong fail_at;  /* the attempt number that fails; 0: none armed */
static atomic_llong injected; /* failures injected so far */

/* Takes the next attempt number; true when this attempt is the one armed to fail. */
static bool injected_failure(void) {
  long long n = atomic_fetch_add(&attempts, 1) + 1;
  long long want = atomic_load(&fail_at);
  if (want == 0 || n != want) return false;
  /* Disarm first so exactly one attempt fails even if threads race for it. */
  if (!atomic_compare_exchange_strong(&fail_at, &want, 0)) return false;
  atomic_fetch_add(&injected, 1);
  return true;
}

void *tg__host_malloc(size_t n) {
  if (injected_failure()) return NULL;
  return malloc(n ? n : 1);
}

void *tg__host_calloc(size_t count, size_t size) {
  if (injected_failure()) return NULL;
  if (size != 0 && count > SIZE_MAX / size) return NULL;
  if (count == 0 || size == 0) count = size = 1;
  return calloc(count, size);
}

void *tg__host_realloc(void *p, size_t n) {
  if (injected_failure()) return NULL;
  return realloc(p, n ? n : 1); /* realloc(p, 0) may free p: never ask for it */
}

void *tg__host_aligned_alloc(size_t alignment, size_t n) {
  if (injected_failure()) return NULL;
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) return NULL;
  if (n == 0) n = alignment;
  if (n > SIZE_MAX - (alignment - 1)) return NULL;
  /* C11 requires the size to be a multiple of the alignment. */
  return aligned_alloc(alignment, (n + alignment - 1) & ~(alignment - 1));
}

void tg__host_free(void *p) { free(p); }

char *tg__host_strdup(const char *s) {
  const size_t n = strlen(s) + 1;
  char *c = tg__host_malloc(n);
  if (c) memcpy(c, s, n);
  return c;
}

bool tg__host_attempt(void) { return !injected_failure(); }

void tg__host_fail_allocation(int64_t k) {
  long long now = atomic_load(&attempts);
  atomic_store(&fail_at, k > 0 ? now + (long long)k : 0);
}

int64_t tg__host_allocation_count(void) { return (int64_t)atomic_load(&attempts); }

int64_t tg__host_injected_failures(void) { return (int64_t)atomic_load(&injected); }
