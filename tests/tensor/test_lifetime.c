/* Scopes, reference counts, allocators and the error state. */
#include <stdint.h>
#include <stdlib.h>

#include "ops/creation.h"
#include "tensor/host_memory.h"
#include "tensor/tensor_impl.h"
#include "testutil.h"

TG_TEST(lifetime, scope_end_releases_what_the_scope_owns) {
  int64_t before = tg_live_objects();
  tg_scope sc = tg_scope_begin();
  tg_tensor *t = tg_zeros(TG_SHAPE(4), TG_OPTS_DEFAULT);
  tg_tensor *v = tg_view(t, TG_SHAPE(2, 2));
  cr_assert_not_null(v);
  cr_assert_gt(tg_live_objects(), before);
  tg_scope_end(sc);
  cr_assert_eq(tg_live_objects(), before);
}

TG_TEST(lifetime, scopes_nest) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *outer = tg_ones(TG_SHAPE(2), TG_OPTS_DEFAULT);
  tg_scope sc2 = tg_scope_begin();
  cr_assert_eq(tg_scope_depth(), 3); /* tg_test_scope, sc, sc2 */
  tg_tensor *inner = tg_ones(TG_SHAPE(2), TG_OPTS_DEFAULT);
  (void)inner;
  int64_t with_inner = tg_live_objects();
  tg_scope_end(sc2);
  cr_assert_lt(tg_live_objects(), with_inner);
  cr_assert_eq(tg_test_at(outer, 1), 1.0); /* still alive */
  tg_scope_end(sc);
}

TG_TEST(lifetime, retain_lets_a_tensor_outlive_its_scope) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *t = tg_retain(tg_full(TG_SHAPE(3), 2.0, TG_OPTS_DEFAULT));
  tg_tensor *view = tg_retain(tg_narrow(t, 0, 1, 2));
  tg_scope_end(sc);
  cr_assert_eq(tg_test_at(view, 0), 2.0);
  tg_release(t); /* the view keeps the storage alive */
  cr_assert_eq(tg_test_at(view, 1), 2.0);
  tg_release(view);
}

TG_TEST(lifetime, a_retained_reference_is_released_once) {
  tg_tensor *t = tg_zeros(TG_SHAPE(2), TG_OPTS_DEFAULT);
  tg_tensor *u = tg_unsqueeze(t, 0);
  cr_assert_eq(tg_retain(u), u);
  tg_release(u); /* the scope's reference remains */
  cr_assert_eq(tg_test_at(u, 1), 0.0);
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
  tg_scope sc = tg_scope_begin();
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
  tg_scope_end(sc);
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
  tg_scope sc = tg_scope_begin();
  tg_tensor *t = tg_zeros(TG_SHAPE(2, 2), TG_OPTS_DEFAULT);
  cr_assert_null(tg_unsqueeze(tg_select(t, 0, 9), 0));
  cr_assert_eq(seen, 1);
  cr_assert_eq(handler_status, TG_ERR_INDEX);
  tg_set_error_handler(NULL, NULL);
  tg_expect_error(TG_ERR_INDEX, "tg_select");
  tg_scope_end(sc);
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
  tg_scope sc = tg_scope_begin();
  tg_tensor *t = tg_zeros(TG_SHAPE(3, 5), TG_OPTS_DEFAULT);
  cr_assert(t, "%s", tg_last_error_message());
  cr_assert_eq(asked, 60 + tg__cpu_tail_pad(60));
  cr_assert_eq(tg__cpu_tail_pad(60), 128); /* 60 rounded to 64, plus a 64-byte vector */
  cr_assert_eq(tg__cpu_tail_pad(1 << 20), 16384 + 64);
  tg_scope_end(sc);
  cr_assert_eq(freed, asked);
  tg_set_allocator(TG_CPU, previous);

  cr_assert_null(tg__storage_new(SIZE_MAX - 100, TG_DEVICE_CPU));
  tg_expect_error(TG_ERR_MEMORY, "tg_empty: ", "bytes cannot be allocated");
}

/* ---- scope tokens, tg_scope_escape and the root scope ---- */

#include <pthread.h>

TG_TEST(lifetime, ending_an_outer_scope_unwinds_the_inner_ones_and_errors) {
  int base = tg_scope_depth();
  int64_t before = tg_live_objects();
  tg_scope outer = tg_scope_begin();
  tg_zeros(TG_SHAPE(2), TG_OPTS_DEFAULT);
  tg_scope middle = tg_scope_begin();
  tg_zeros(TG_SHAPE(2), TG_OPTS_DEFAULT);
  (void)tg_scope_begin(); /* an inner end forgotten */
  tg_zeros(TG_SHAPE(2), TG_OPTS_DEFAULT);
  cr_assert_eq(tg_scope_end(middle), TG_ERR_STATE);
  char depths[64];
  snprintf(depths, sizeof depths, "depth %d is not the innermost (depth %d)", base + 2, base + 3);
  tg_expect_error(TG_ERR_STATE, "tg_scope_end: ", depths);
  cr_assert_eq(tg_scope_depth(), base + 1, "middle and the scope inside it are closed");
  cr_assert_eq(tg_scope_end(middle), TG_ERR_STATE, "middle is closed now");
  tg_expect_error(TG_ERR_STATE, "tg_scope_end: ", "not open");
  cr_assert_eq(tg_scope_end(outer), TG_OK);
  cr_assert_eq(tg_scope_depth(), base);
  cr_assert_eq(tg_live_objects(), before);
}

TG_TEST(lifetime, a_stale_token_changes_nothing) {
  int base = tg_scope_depth();
  tg_scope first = tg_scope_begin();
  cr_assert_eq(tg_scope_end(first), TG_OK);
  tg_scope second = tg_scope_begin(); /* the same depth as first */
  cr_assert_eq(second.depth, first.depth);
  tg_tensor *t = tg_ones(TG_SHAPE(2), TG_OPTS_DEFAULT);
  cr_assert_eq(tg_scope_end(first), TG_ERR_STATE);
  tg_expect_error(TG_ERR_STATE, "tg_scope_end: ", "is not open", "nothing closed");
  cr_assert_eq(tg_scope_depth(), base + 1);
  cr_assert_eq(tg_test_at(t, 1), 1.0, "second's tensor is still alive");
  cr_assert_eq(tg_scope_end((tg_scope){0}), TG_ERR_STATE, "a zero token names no scope");
  tg_expect_error(TG_ERR_STATE, "tg_scope_end: ");
  cr_assert_eq(tg_scope_end((tg_scope){.depth = 99, .serial = second.serial}), TG_ERR_STATE);
  tg_expect_error(TG_ERR_STATE, "tg_scope_end: ");
  cr_assert_eq(tg_scope_end(second), TG_OK);
  cr_assert_eq(tg_scope_depth(), base);
}

/* exp(-x), as a library function would write it: temporaries in its own scope, the result
 * handed to the caller's. */
static tg_tensor *exp_neg(const tg_tensor *x) {
  tg_scope s = tg_scope_begin();
  tg_tensor *y = tg_scope_escape(s, tg_exp(tg_neg(x)));
  tg_scope_end(s);
  return y;
}

TG_TEST(lifetime, escape_hands_a_result_to_the_callers_scope) {
  tg_tensor *x = tg_zeros(TG_SHAPE(3), TG_OPTS_DEFAULT);
  tg_scope caller = tg_scope_begin();
  int64_t before = tg_live_objects();
  tg_tensor *y = exp_neg(x);
  cr_assert_not_null(y, "%s", tg_last_error_message());
  /* The result alone (a tensor and its storage) reached the caller's scope. */
  cr_assert_eq(tg_live_objects(), before + 2);
  cr_assert_eq(tg_test_at(y, 2), 1.0);
  cr_assert_eq(tg_scope_end(caller), TG_OK);
  cr_assert_eq(tg_live_objects(), before);
  tg_expect_ok();
}

TG_TEST(lifetime, escape_of_null_keeps_the_pending_error) {
  tg_scope s = tg_scope_begin();
  cr_assert_null(tg_zeros(TG_SHAPE(-1), TG_OPTS_DEFAULT));
  tg_status pending = tg_last_error();
  cr_assert_neq(pending, TG_OK);
  cr_assert_null(tg_scope_escape(s, NULL));
  cr_assert_eq(tg_last_error(), pending, "the escape replaced the error");
  tg_clear_error();
  cr_assert_eq(tg_scope_end(s), TG_OK);
  /* A token that is not open: the tensor stays where it was, the error says why. */
  tg_tensor *t = tg_ones(TG_SHAPE(1), TG_OPTS_DEFAULT);
  cr_assert_null(tg_scope_escape(s, t));
  tg_expect_error(TG_ERR_STATE, "tg_scope_escape: ", "not open");
}

/* Tensors made on a thread of its own: live_objects counts every thread's. */
typedef struct root_case {
  bool escape; /* through a depth-1 scope into the root scope, else straight into it */
  bool ok;
} root_case;

static void *make_at_top_level(void *arg) {
  root_case *c = arg;
  tg_tensor *t;
  if (c->escape) {
    tg_scope s = tg_scope_begin();
    t = tg_scope_escape(s, tg_add_scalar(tg_ones(TG_SHAPE(4), TG_OPTS_DEFAULT), 1.0));
    c->ok = tg_scope_end(s) == TG_OK;
  } else {
    t = tg_add_scalar(tg_ones(TG_SHAPE(4), TG_OPTS_DEFAULT), 1.0); /* no scope at all */
    c->ok = tg_scope_depth() == 0;
  }
  double v = 0;
  c->ok = c->ok && t && tg_get(t, (const int64_t[]){3}, &v) == TG_OK && v == 2.0 &&
          tg_live_objects() > 0;
  return NULL; /* the thread's exit drains its root scope */
}

static void run_on_a_thread(root_case *c) {
  int64_t before = tg_live_objects();
  pthread_t thread;
  cr_assert_eq(pthread_create(&thread, NULL, make_at_top_level, c), 0);
  cr_assert_eq(pthread_join(thread, NULL), 0);
  cr_assert(c->ok, "the thread's tensor was not usable at top level");
  cr_assert_eq(tg_live_objects(), before, "the root scope was not drained at thread exit");
}

TG_TEST(lifetime, the_root_scope_is_drained_at_thread_exit) {
  run_on_a_thread(&(root_case){.escape = false});
}

TG_TEST(lifetime, escape_from_a_top_level_scope_reaches_the_root_scope) {
  run_on_a_thread(&(root_case){.escape = true});
}

/* A level whose allocation fails still has a token; tokens close and unwind failed levels as
 * they do real ones. */
TG_TEST(lifetime, a_failed_scope_has_a_working_token) {
  int base = tg_scope_depth();
  tg_scope outer = tg_scope_begin();
  tg_tensor *made = tg_ones(TG_SHAPE(2), TG_OPTS_DEFAULT);
  cr_assert_not_null(made);
  tg_scope failed = outer;
  bool did_fail = false;
  for (int d = base + 2; d <= 200 && !did_fail; d++) { /* until the stack must grow */
    int64_t fired = tg__host_injected_failures();
    tg__host_fail_allocation(1);
    failed = tg_scope_begin();
    tg__host_fail_allocation(0);
    did_fail = tg__host_injected_failures() != fired;
  }
  cr_assert(did_fail, "no scope level allocated");
  tg_expect_error(TG_ERR_MEMORY, "tg_scope_begin");
  cr_assert_eq(failed.depth, tg_scope_depth());
  cr_assert_null(tg_ones(TG_SHAPE(2), TG_OPTS_DEFAULT));
  tg_expect_error(TG_ERR_MEMORY);
  tg_scope inner = tg_scope_begin(); /* inside a failed level: fails too */
  tg_expect_error(TG_ERR_MEMORY);
  cr_assert_eq(inner.depth, failed.depth + 1);
  /* Out of inner, into the failed level: refused; out of failed, into a real one: fine. */
  cr_assert_null(tg_scope_escape(inner, made));
  tg_expect_error(TG_ERR_MEMORY, "tg_scope_escape: ");
  cr_assert_eq(tg_scope_escape(failed, made), made);
  tg_expect_ok();
  cr_assert_eq(tg_scope_end(failed), TG_ERR_STATE, "inner is still open");
  tg_expect_error(TG_ERR_STATE, "tg_scope_end: ");
  cr_assert_eq(tg_scope_depth(), failed.depth - 1);
  cr_assert_eq(tg_scope_end(inner), TG_ERR_STATE, "closed by the unwinding");
  tg_clear_error();
  cr_assert_eq(tg_scope_end(outer), failed.depth - 1 > outer.depth ? TG_ERR_STATE : TG_OK);
  tg_clear_error();
  cr_assert_eq(tg_scope_depth(), base);
  tg_scope again = tg_scope_begin(); /* scopes work again */
  cr_assert_not_null(tg_ones(TG_SHAPE(2), TG_OPTS_DEFAULT));
  cr_assert_eq(tg_scope_end(again), TG_OK);
}
