/* Scopes, reference counts, allocators and the error state. */
#include <stdint.h>
#include <stdlib.h>

#include "ops/creation.h"
#include "tensor/tensor_impl.h"
#include "testutil.h"

TG_TEST(lifetime, scope_end_releases_what_the_scope_owns) {
  int64_t before = tg_live_objects();
  tg_scope_begin();
  tg_tensor *t = tg_zeros(TG_SHAPE(4), TG_OPTS_DEFAULT);
  tg_tensor *v = tg_view(t, TG_SHAPE(2, 2));
  cr_assert_not_null(v);
  cr_assert_gt(tg_live_objects(), before);
  tg_scope_end();
  cr_assert_eq(tg_live_objects(), before);
}

TG_TEST(lifetime, scopes_nest) {
  tg_scope_begin();
  tg_tensor *outer = tg_ones(TG_SHAPE(2), TG_OPTS_DEFAULT);
  tg_scope_begin();
  cr_assert_eq(tg_scope_depth(), 2);
  tg_tensor *inner = tg_ones(TG_SHAPE(2), TG_OPTS_DEFAULT);
  (void)inner;
  int64_t with_inner = tg_live_objects();
  tg_scope_end();
  cr_assert_lt(tg_live_objects(), with_inner);
  cr_assert_eq(tg_test_at(outer, 1), 1.0); /* still alive */
  tg_scope_end();
}

TG_TEST(lifetime, keep_lets_a_tensor_outlive_its_scope) {
  tg_scope_begin();
  tg_tensor *t = tg_keep(tg_full(TG_SHAPE(3), 2.0, TG_OPTS_DEFAULT));
  tg_tensor *view = tg_keep(tg_narrow(t, 0, 1, 2));
  tg_scope_end();
  cr_assert_eq(tg_test_at(view, 0), 2.0);
  tg_release(t); /* the view keeps the storage alive */
  cr_assert_eq(tg_test_at(view, 1), 2.0);
  tg_release(view);
}

TG_TEST(lifetime, without_a_scope_the_caller_owns_results) {
  tg_tensor *t = tg_zeros(TG_SHAPE(2), TG_OPTS_DEFAULT);
  tg_tensor *u = tg_unsqueeze(t, 0);
  tg_retain(u);
  tg_release(u);
  tg_release(u);
  tg_release(t);
  tg_release(NULL); /* no-op */
}

typedef struct failing_allocator {
  int allowed; /* allocations that still succeed */
  int calls;
} failing_allocator;

static void *fail_alloc(void *ctx, size_t n) {
  failing_allocator *f = ctx;
  f->calls++;
  return f->allowed-- > 0 ? malloc(n) : NULL;
}
static void fail_free(void *ctx, void *p, size_t n) {
  (void)ctx, (void)n;
  free(p);
}

TG_TEST(lifetime, allocation_failure_is_reported_and_leaves_nothing_half_made) {
  failing_allocator state = {0, 0};
  tg_allocator failing = {"failing", fail_alloc, fail_free, &state};
  tg_scope_begin();
  tg_tensor *keep = tg_ones(TG_SHAPE(4, 4), TG_OPTS_DEFAULT);
  tg_tensor *transposed = tg_t(keep);
  const tg_allocator *previous = tg_set_allocator(TG_CPU, &failing);
  int64_t live = tg_live_objects();
  cr_assert_null(tg_zeros(TG_SHAPE(16, 32), TG_OPTS_DEFAULT));
  tg_expect_error(TG_ERR_MEMORY, "failing", "2048 bytes");
  cr_assert_eq(tg_live_objects(), live);
  cr_assert_null(tg_clone(keep));
  tg_expect_error(TG_ERR_MEMORY, "64 bytes");
  cr_assert_null(tg_reshape(transposed, TG_SHAPE(16)));
  tg_expect_error(TG_ERR_MEMORY);
  cr_assert_eq(tg_live_objects(), live);
  cr_assert_gt(state.calls, 2);
  tg_set_allocator(TG_CPU, previous);
  cr_assert_eq(tg_get_allocator(TG_CPU), previous);
  cr_assert_not_null(tg_clone(keep));
  tg_scope_end();
}

static int handler_calls;
static tg_status handler_status;
static void count_errors(tg_status status, const char *message, void *user) {
  (void)message;
  handler_calls++;
  handler_status = status;
  *(int *)user += 1;
}

TG_TEST(lifetime, error_handler_sees_new_errors_not_propagation) {
  int seen = 0;
  tg_set_error_handler(count_errors, &seen);
  tg_scope_begin();
  tg_tensor *t = tg_zeros(TG_SHAPE(2, 2), TG_OPTS_DEFAULT);
  cr_assert_null(tg_unsqueeze(tg_select(t, 0, 9), 0));
  cr_assert_eq(seen, 1);
  cr_assert_eq(handler_status, TG_ERR_INDEX);
  tg_set_error_handler(NULL, NULL);
  tg_expect_error(TG_ERR_INDEX, "tg_select");
  tg_scope_end();
}

TG_TEST(lifetime, clear_error_resets_code_and_message) {
  tg_set_error(TG_ERR_STATE, "custom: %d", 3);
  cr_assert_eq(tg_last_error(), TG_ERR_STATE);
  cr_assert_str_eq(tg_last_error_message(), "custom: 3");
  tg_clear_error();
  cr_assert_eq(tg_last_error(), TG_OK);
  cr_assert_str_eq(tg_last_error_message(), "");
  cr_assert_str_eq(tg_status_name(TG_ERR_SHAPE), "TG_ERR_SHAPE");
}

TG_TEST(lifetime, set_allocator_rejects_an_invalid_device) {
  cr_assert_null(tg_set_allocator((tg_device_type)5, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_set_allocator");
}

/* CPU storages ask the allocator for a tail past their bytes (BLIS reads past operands:
 * README, "BLIS"), free gets the same size, and a size that leaves no room for the tail is
 * a clean TG_ERR_MEMORY naming the caller. */
static size_t asked, freed;
static void *counting_alloc(void *ctx, size_t nbytes) {
  (void)ctx;
  asked = nbytes;
  return malloc(nbytes);
}
static void counting_free(void *ctx, void *ptr, size_t nbytes) {
  (void)ctx;
  freed = nbytes;
  free(ptr);
}

TG_TEST(lifetime, cpu_storages_carry_an_owned_tail) {
  static const tg_allocator counting = {"counting", counting_alloc, counting_free, NULL};
  const tg_allocator *previous = tg_set_allocator(TG_CPU, &counting);
  tg_tensor *t = tg_zeros(TG_SHAPE(3, 5), TG_OPTS_DEFAULT);
  cr_assert(t, "%s", tg_last_error_message());
  cr_assert_eq(asked, 60 + tg__cpu_tail_pad(60));
  cr_assert_eq(tg__cpu_tail_pad(60), 128); /* 60 rounded to 64, plus a 64-byte vector */
  cr_assert_eq(tg__cpu_tail_pad(1 << 20), 16384 + 64);
  tg_release(t);
  cr_assert_eq(freed, asked);
  tg_set_allocator(TG_CPU, previous);

  cr_assert_null(tg__storage_new(SIZE_MAX - 100, TG_DEVICE_CPU));
  tg_expect_error(TG_ERR_MEMORY, "tg_empty: ", "bytes cannot be allocated");
}
