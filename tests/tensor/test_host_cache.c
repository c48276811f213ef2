/* The host cache of freed blocks (src/tensor/host_cache.c) behind the CPU backend's
 * storages: reuse within a size class, fault injection on a cache hit, the bound on what it
 * holds, the sizes it leaves alone, the drain, and concurrent use. */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "tensor/host_memory.h"
#include "tensor/tensor_impl.h"
#include "testutil.h"

TG_TEST(host_cache, a_freed_block_serves_the_next_allocation_of_its_class) {
  tg__host_cache_drain();
  char *p = tg__host_cached_alloc(100000);
  cr_assert(p);
  cr_assert_eq((uintptr_t)p % TG_HOST_CACHE_ALIGN, 0);
  p[0] = 1, p[99999] = 2; /* all n bytes are usable */
  tg__host_cached_free(p, 100000);
  const size_t held = tg__host_cache_bytes();
  cr_assert(held >= 100000 && held <= 100000 + 100000 / 8, "holds %zu", held);
  char *q = tg__host_cached_alloc(99000); /* same class: the same block */
  cr_assert_eq(q, p);
  cr_assert_eq(tg__host_cache_bytes(), 0);
  char *r = tg__host_cached_alloc(100000); /* none cached: a new block */
  cr_assert(r && r != q);
  tg__host_cached_free(q, 99000);
  tg__host_cached_free(r, 100000);
  char *big = tg__host_cached_alloc(200000); /* another class: not those */
  cr_assert(big && big != q && big != r);
  tg__host_cached_free(big, 200000);
  tg__host_cache_drain();
  cr_assert_eq(tg__host_cache_bytes(), 0);
}

TG_TEST(host_cache, a_cache_hit_is_an_allocation_attempt_that_can_fail) {
  tg__host_cache_drain();
  void *p = tg__host_cached_alloc(50000);
  cr_assert(p);
  tg__host_cached_free(p, 50000);
  const int64_t before = tg__host_allocation_count(), injected = tg__host_injected_failures();
  tg__host_fail_allocation(1);
  cr_assert_null(tg__host_cached_alloc(50000));
  cr_assert_eq(tg__host_injected_failures(), injected + 1);
  cr_assert_eq(tg__host_cached_alloc(50000), p); /* still cached; the next attempt succeeds */
  cr_assert_eq(tg__host_allocation_count(), before + 2);
  tg__host_cached_free(p, 50000);
  tg__host_cache_drain();
}

/* Its bound is the peak of the bytes in use, 256 MiB at least. Blocks of 3/8 of the minimum
 * (never touched, so they cost address space only), in a fresh process (the peak is
 * process-wide): two in use at most keep the bound at the minimum, so of three freed blocks of
 * another size the third goes back to the system; three in use at once raise the bound to
 * what they held, and all three are kept. */
TG_TEST(host_cache, holds_at_most_the_peak_in_use) {
  tg__host_cache_drain();
  const size_t n = TG_HOST_CACHE_MIN_BOUND / 8 * 3, m = n + n / 4; /* another size class */
  size_t in_use, peak, bound;
  tg__host_cache_stats(&in_use, &peak, &bound);
  cr_assert_lt(peak, n, "a fresh process (peak %zu)", peak);
  void *p[3];
  for (int round = 0; round < 3; round++) { /* one at a time: in use stays at one block */
    cr_assert(p[round] = tg__host_cached_alloc(n));
    tg__host_cached_free(p[round], n);
  }
  for (int i = 0; i < 2; i++) cr_assert(p[i] = tg__host_cached_alloc(m));
  for (int i = 0; i < 2; i++) tg__host_cached_free(p[i], m);
  tg__host_cache_stats(&in_use, &peak, &bound);
  cr_assert_eq(bound, TG_HOST_CACHE_MIN_BOUND);
  cr_assert_leq(tg__host_cache_bytes(), bound, "cached %zu > bound %zu", tg__host_cache_bytes(),
                bound);
  tg__host_cache_drain();

  for (int i = 0; i < 3; i++) cr_assert(p[i] = tg__host_cached_alloc(n));
  tg__host_cache_stats(&in_use, &peak, &bound);
  cr_assert_geq(in_use, 3 * n);
  cr_assert_eq(bound, peak);
  cr_assert_gt(bound, TG_HOST_CACHE_MIN_BOUND);
  for (int i = 0; i < 3; i++) tg__host_cached_free(p[i], n);
  cr_assert_geq(tg__host_cache_bytes(), 3 * n, "all three kept");
  cr_assert_leq(tg__host_cache_bytes(), bound);
  /* Blocks of another size find the cache full: they go back. */
  for (int i = 0; i < 3; i++) cr_assert(p[i] = tg__host_cached_alloc(m));
  const size_t cached = tg__host_cache_bytes();
  for (int i = 0; i < 3; i++) tg__host_cached_free(p[i], m);
  cr_assert_eq(tg__host_cache_bytes(), cached);
  tg__host_cache_drain();
  cr_assert_eq(tg__host_cache_bytes(), 0);
}

TG_TEST(host_cache, public_stats_and_empty_cache) {
  void *p = tg__host_cached_alloc(1 << 20);
  cr_assert(p);
  tg_host_memory_stats s;
  cr_assert_eq(tg_host_memory_stats_get(&s), TG_OK);
  cr_assert_geq(s.bytes_in_use, (size_t)1 << 20);
  cr_assert_geq(s.peak_bytes_in_use, s.bytes_in_use);
  cr_assert_geq(s.cache_limit, TG_HOST_CACHE_MIN_BOUND);
  tg__host_cached_free(p, 1 << 20);
  cr_assert_eq(tg_host_memory_stats_get(&s), TG_OK);
  cr_assert_geq(s.bytes_cached, (size_t)1 << 20);
  tg_host_empty_cache();
  cr_assert_eq(tg_host_memory_stats_get(&s), TG_OK);
  cr_assert_eq(s.bytes_cached, 0);
  cr_assert_eq(tg_host_memory_stats_get(NULL), TG_ERR_ARGUMENT);
  cr_assert(strstr(tg_last_error_message(), "tg_host_memory_stats_get"));
  tg_clear_error();
}

TG_TEST(host_cache, blocks_start_at_different_offsets_in_their_pages) {
  /* (a kernel's operands all at one page offset alias in L1 and in store forwarding) */
  tg__host_cache_drain();
  enum { N = 8 };
  char *p[N];
  int distinct = 0;
  for (int i = 0; i < N; i++) {
    cr_assert(p[i] = tg__host_cached_alloc(1 << 20));
    cr_assert_eq((uintptr_t)p[i] % TG_HOST_CACHE_ALIGN, 0);
    bool seen = false;
    for (int j = 0; j < i; j++) seen |= (uintptr_t)p[j] % 4096 == (uintptr_t)p[i] % 4096;
    distinct += !seen;
  }
  cr_assert_eq(distinct, N);
  for (int i = 0; i < N; i++) tg__host_cached_free(p[i], 1 << 20);
  tg__host_cache_drain();
}

TG_TEST(host_cache, small_blocks_bypass_it) {
  tg__host_cache_drain();
  void *p = tg__host_cached_alloc(4096);
  cr_assert(p);
  cr_assert_eq((uintptr_t)p % TG_HOST_CACHE_ALIGN, 0);
  tg__host_cached_free(p, 4096);
  cr_assert_eq(tg__host_cache_bytes(), 0);
  tg__host_cached_free(NULL, 100000); /* as free(NULL) */
  cr_assert_eq(tg__host_cache_bytes(), 0);
}

TG_TEST(host_cache, cpu_storages_reuse_freed_data) {
  tg__host_cache_drain();
  tg_scope sc = tg_scope_begin();
  tg_tensor *a = tg_empty(TG_SHAPE(300, 100), TG_OPTS(.dtype = TG_F32));
  cr_assert(a);
  void *data = a->storage->data;
  tg_scope_end(sc);
  cr_assert(tg__host_cache_bytes() > 0);
  sc = tg_scope_begin();
  tg_tensor *b = tg_zeros(TG_SHAPE(100, 300), TG_OPTS(.dtype = TG_F32));
  cr_assert(b);
  cr_assert_eq(b->storage->data, data);
  cr_assert_eq(tg_test_at(b, 29999), 0.0);
  tg_scope_end(sc);
  tg__host_cache_drain();
}

/* Threads allocating and freeing blocks of a few classes at once (TSan sees this too). */
static void *churn(void *arg) {
  const size_t base = (size_t)(uintptr_t)arg;
  for (int i = 0; i < 2000; i++) {
    const size_t n = base + (size_t)(i % 4) * 8192;
    unsigned char *p = tg__host_cached_alloc(n);
    if (!p) return "allocation failed";
    p[0] = (unsigned char)i, p[n - 1] = (unsigned char)i;
    if (p[0] != p[n - 1]) return "block shared";
    tg__host_cached_free(p, n);
  }
  return NULL;
}

TG_TEST(host_cache, concurrent_use) {
  pthread_t t[4];
  for (int i = 0; i < 4; i++)
    cr_assert_eq(pthread_create(&t[i], NULL, churn, (void *)(uintptr_t)(8192 + 4096 * i)), 0);
  for (int i = 0; i < 4; i++) {
    void *err;
    cr_assert_eq(pthread_join(t[i], &err), 0);
    cr_assert_null(err, "%s", (const char *)err);
  }
  tg__host_cache_drain();
  cr_assert_eq(tg__host_cache_bytes(), 0);
}
