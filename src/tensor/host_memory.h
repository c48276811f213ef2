/* Host memory: every allocation tg itself makes (tensor and storage headers, the default CPU
 * allocator's data, tape nodes, scope arrays, work lists, scratch) goes through these, so a
 * test can make any one of them fail. Not part of the public API. */
#ifndef TG_HOST_MEMORY_H
#define TG_HOST_MEMORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* malloc/calloc/realloc/aligned_alloc with one meaning for NULL: out of memory. A size of 0
 * allocates a minimal block (so NULL never means "empty"); calloc's count * size and the
 * aligned rounding are overflow-checked. tg__host_aligned_alloc rounds n up to a multiple of
 * alignment (a power of two, at least sizeof(void *)) itself. A failed realloc leaves p as it
 * was. All blocks are freed with tg__host_free (which accepts NULL). */
void *tg__host_malloc(size_t n);
void *tg__host_calloc(size_t count, size_t size);
void *tg__host_realloc(void *p, size_t n);
void *tg__host_aligned_alloc(size_t alignment, size_t n);
void tg__host_free(void *p);
/* A copy of the NUL-terminated s (NULL when out of memory), freed with tg__host_free. */
char *tg__host_strdup(const char *s);

/* The cache of freed blocks the CPU backend's storages use (host_cache.c): 64-byte-aligned
 * blocks of n bytes (rounded up, which the caller never sees), freed with
 * tg__host_cached_free(p, n) with the n they were allocated with, where they wait for the next
 * allocation of their size class. Blocks of 4 KiB and less, or above 2 GiB, bypass it. It
 * holds at most the larger of TG_HOST_CACHE_MIN_BOUND and the peak of the bytes its blocks
 * had in use at one time (tg__host_cache_stats); tg__host_cache_drain returns everything it
 * holds to the system (done at exit too); tg__host_cache_bytes says how much that is. */
#define TG_HOST_CACHE_ALIGN 64
#define TG_HOST_CACHE_MIN_BOUND ((size_t)256 << 20)
void *tg__host_cached_alloc(size_t n);
void tg__host_cached_free(void *p, size_t n);
void tg__host_cache_drain(void);
size_t tg__host_cache_bytes(void);
/* Blocks of the cache's sizes in use now and at most so far (class sizes), and its bound. */
void tg__host_cache_stats(size_t *in_use, size_t *peak_in_use, size_t *bound);

/* Fault injection, for tests. Every allocation attempt above (free excepted) takes a number
 * from one process-wide atomic counter. tg__host_fail_allocation(k) makes the k-th attempt
 * from now (k = 1: the next one) fail as if out of memory, once; k = 0 disarms it. The
 * counter is global, so the k-th attempt is well defined only while a single thread
 * allocates. A test counts the attempts of a step with tg__host_allocation_count (before and
 * after), then runs the step once for each k in 1..N. tg__host_injected_failures counts the
 * failures injected so far: whether the armed one has fired. */
void tg__host_fail_allocation(int64_t k);
/* One allocation attempt, for an allocator built on these (the cache): false when it is the
 * one armed to fail. */
bool tg__host_attempt(void);
int64_t tg__host_allocation_count(void);
int64_t tg__host_injected_failures(void);

#ifdef __cplusplus
}
#endif

#endif
