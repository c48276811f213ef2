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

TG_TEST(host_cache, holds_at_most_its_bound) {
  tg__host_cache_drain();
  /* Blocks of 3/8 of the bound (never touched, so they cost address space only): the third
   * does not fit and goes back to the system. */
  const size_t n = TG_HOST_CACHE_MAX_BYTES / 8 * 3;
  void *p[3];
  for (int i = 0; i < 3; i++) cr_assert(p[i] = tg__host_cached_alloc(n));
  for (int i = 0; i < 3; i++) tg__host_cached_free(p[i], n);
  cr_assert_eq(tg__host_cache_bytes(), 2 * n);
  tg__host_cache_drain();
  cr_assert_eq(tg__host_cache_bytes(), 0);
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
