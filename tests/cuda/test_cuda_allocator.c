/* The caching allocator: freed blocks are reused without going back to the driver, sizes
 * round to classes, the stats add up, empty_cache returns the cache, and a training step
 * repeated allocates nothing new from the driver. */
#include "cuda_testutil.h"

static tg_cuda_memory_stats stats(void) {
  tg_cuda_memory_stats s;
  cr_assert_eq(tg_cuda_memory_stats_get(&s), TG_OK);
  return s;
}

static tg_tensor *device_floats(int64_t n) {
  tg_tensor *t = tg_empty(TG_SHAPE(n), TG_OPTS(.device = TG_CUDA0));
  cr_assert(t, "%s", tg_last_error_message());
  return t;
}

TG_CUDA_TEST(cuda_allocator, freed_blocks_are_reused) {
  tg_cuda_empty_cache();
  tg_cuda_memory_stats s0 = stats();
  tg_scope sc = tg_scope_begin();
  device_floats(1000); /* 4000 B: the 4096 B class */
  tg_cuda_memory_stats s1 = stats();
  cr_assert_eq(s1.driver_allocs, s0.driver_allocs + 1);
  cr_assert_eq(s1.bytes_in_use, s0.bytes_in_use + 4096);
  tg_scope_end(sc);
  tg_cuda_memory_stats s2 = stats();
  cr_assert_eq(s2.bytes_in_use, s0.bytes_in_use);
  cr_assert_eq(s2.bytes_cached, s0.bytes_cached + 4096);
  cr_assert_eq(s2.driver_frees, s0.driver_frees); /* kept, not freed */
  /* same class (3600 B -> 4096 B): the cached block, no driver call */
  sc = tg_scope_begin();
  device_floats(900);
  cr_assert_eq(stats().driver_allocs, s1.driver_allocs);
  cr_assert_eq(stats().bytes_cached, s0.bytes_cached);
  /* another class: a new block */
  device_floats(2000);
  cr_assert_eq(stats().driver_allocs, s1.driver_allocs + 1);
  tg_scope_end(sc);
}

TG_CUDA_TEST(cuda_allocator, size_classes) {
  tg_cuda_empty_cache();
  tg_cuda_memory_stats s0 = stats();
  tg_scope sc = tg_scope_begin();
  device_floats(1);                   /* 4 B -> 512 B */
  device_floats(129);                 /* 516 B -> 1024 B */
  device_floats(3 * 1024 * 1024 / 4); /* 3 MiB -> 4 MiB */
  device_floats((1 << 20) / 4);       /* exactly 1 MiB -> 1 MiB */
  size_t expected = 512 + 1024 + (4u << 20) + (1u << 20);
  cr_assert_eq(stats().bytes_in_use, s0.bytes_in_use + expected);
  cr_assert_geq(stats().peak_bytes_in_use, s0.bytes_in_use + expected);
  tg_scope_end(sc);
  tg_cuda_memory_stats s1 = stats();
  cr_assert_eq(s1.bytes_cached, s0.bytes_cached + expected);
  cr_assert_eq(tg_cuda_empty_cache(), TG_OK);
  tg_cuda_memory_stats s2 = stats();
  cr_assert_eq(s2.bytes_cached, 0);
  cr_assert_eq(s2.driver_frees, s1.driver_frees + 4);
  cr_assert_geq(s2.peak_bytes_in_use, expected);
}

/* One step of a small model: forward, loss, backward, SGD update. */
static void training_step(tg_tensor *w, tg_tensor *b, tg_generator *gen) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_randn(TG_SHAPE(16, 24), TG_OPTS(.device = TG_CUDA0), gen);
  tg_tensor *y = tg_tanh(tg_addmm(b, x, w, 1.0, 1.0));
  tg_tensor *loss = tg_mean(tg_mul(y, y));
  cr_assert(loss, "%s", tg_last_error_message());
  cr_assert_eq(tg_backward(loss, NULL), TG_OK, "%s", tg_last_error_message());
  tg_no_grad_begin();
  cr_assert_eq(tg_add_scaled_(w, tg_grad(w), -0.1), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(tg_add_scaled_(b, tg_grad(b), -0.1), TG_OK, "%s", tg_last_error_message());
  tg_no_grad_end();
  cr_assert_eq(tg_zero_grad(w), TG_OK);
  cr_assert_eq(tg_zero_grad(b), TG_OK);
  tg_scope_end(sc);
}

TG_CUDA_TEST(cuda_allocator, a_repeated_training_step_allocates_nothing_new) {
  tg_generator *gen = tg_generator_new(3);
  tg_tensor *w = tg_retain(tg_randn(TG_SHAPE(24, 8), TG_OPTS(.device = TG_CUDA0), gen));
  tg_tensor *b = tg_retain(tg_zeros(TG_SHAPE(8), TG_OPTS(.device = TG_CUDA0)));
  tg_set_requires_grad(w, true);
  tg_set_requires_grad(b, true);
  /* The first step makes w.grad and b.grad; from the second on, backward accumulates into
   * them, so every step from there holds the same blocks at the same times. */
  training_step(w, b, gen);
  training_step(w, b, gen);
  tg_cuda_memory_stats warm = stats();
  for (int i = 0; i < 3; i++) training_step(w, b, gen);
  tg_cuda_memory_stats after = stats();
  cr_assert_eq(after.driver_allocs, warm.driver_allocs, "%llu new cudaMalloc calls",
               (unsigned long long)(after.driver_allocs - warm.driver_allocs));
  cr_assert_eq(after.bytes_in_use, warm.bytes_in_use);
  tg_release(w);
  tg_release(b);
  tg_generator_free(gen);
}

#ifdef TG_CUDA_EMULATION

TG_CUDA_TEST(cuda_allocator, out_of_memory_empties_the_cache_and_retries) {
  tg_cuda_empty_cache();
  tg_scope sc = tg_scope_begin();
  device_floats(5000);
  tg_scope_end(sc);
  tg_cuda_memory_stats s0 = stats();
  cr_assert_gt(s0.bytes_cached, 0);
  tg_emu_fail_mallocs(1); /* the first cudaMalloc fails, the retry after emptying works */
  tg_tensor *t = device_floats(7000);
  tg_cuda_memory_stats s1 = stats();
  cr_assert_eq(s1.bytes_cached, 0);
  cr_assert_eq(s1.driver_frees, s0.driver_frees + 1);
  cr_assert_eq(s1.driver_allocs, s0.driver_allocs + 1);
  (void)t;
}

TG_CUDA_TEST(cuda_allocator, out_of_memory_is_a_memory_error) {
  tg_emu_fail_mallocs(2);
  cr_assert_null(tg_empty(TG_SHAPE(100), TG_OPTS(.device = TG_CUDA0)));
  tg_expect_error(TG_ERR_MEMORY);
  /* nothing was left half-made */
  cr_assert_eq(stats().bytes_in_use, 0);
}

TG_CUDA_TEST(cuda_allocator, every_driver_buffer_is_freed_by_empty_cache) {
  tg_scope sc = tg_scope_begin();
  device_floats(10);
  device_floats(100000);
  tg_scope_end(sc);
  cr_assert_gt(tg_emu_device_allocations(), 0);
  cr_assert_eq(tg_cuda_empty_cache(), TG_OK);
  cr_assert_eq(tg_emu_device_allocations(), 0);
}

#endif
