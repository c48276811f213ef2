/* The op profiler (tg_profile_start): every op call through tg_apply and every backward
 * function is counted in its op's row, with self time leaving out the op calls made inside
 * it; off by default; all threads; a full table spills into "(other)"; the device wait
 * (synchronize) leaves the thread's error as the op left it. */
#define _POSIX_C_SOURCE 200809L /* nanosleep, clock_gettime, fmemopen */
#include <pthread.h>
#include <stdio.h>
#include <time.h>

#include "autograd/profile.h"
#include "testutil.h"

static const tg_options f64 = {.dtype = TG_F64};
static const tg_options f64_grad = {.dtype = TG_F64, .requires_grad = true};

static void sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, NULL);
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The row of (op, backward), or a zeroed row with calls 0. */
static tg_profile_row row(const char *op, bool backward) {
  tg_profile_row all[TG_PROFILE_MAX_ROWS];
  const int64_t n = tg_profile_rows(all, TG_PROFILE_MAX_ROWS);
  for (int64_t i = 0; i < n; i++)
    if (all[i].backward == backward && strcmp(all[i].op, op) == 0) return all[i];
  return (tg_profile_row){0};
}

/* A composite op: its forward sleeps 2 ms and calls tg_exp; its backward sleeps 1 ms and
 * calls tg_mul. */
static tg_status composite_forward(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  (void)ctx;
  sleep_us(2000);
  out[0] = tg_exp(in[0]);
  return out[0] ? TG_OK : tg_last_error();
}

static tg_status composite_backward(tg_ctx *ctx, const tg_tensor *const *grad_out,
                                    tg_tensor **grad_in) {
  (void)ctx;
  sleep_us(1000);
  grad_in[0] = tg_mul(grad_out[0], grad_out[0]);
  return grad_in[0] ? TG_OK : tg_last_error();
}

static const tg_op_desc composite = {"test_profiled_composite", 1, 1,   {composite_forward},
                                     composite_backward,        0, NULL};

TG_TEST(profile, off_by_default_counts_nothing) {
  cr_assert_eq(tg_profile_is_on(), false);
  tg_tensor *x = tg_ones(TG_SHAPE(4), f64);
  cr_assert_not_null(tg_add(x, x));
  cr_assert_eq(tg_profile_rows(NULL, 0), 0);
}

TG_TEST(profile, counts_forward_and_backward_calls_per_op) {
  tg_tensor *x = tg_ones(TG_SHAPE(3, 3), f64_grad);
  cr_assert_eq(tg_profile_start(false), TG_OK);
  cr_assert(tg_profile_is_on());
  tg_tensor *y = x;
  for (int i = 0; i < 3; i++) y = tg_apply1(&composite, 1, (const tg_tensor *[]){y}, 0, NULL);
  cr_assert_not_null(y, "%s", tg_last_error_message());
  tg_tensor *loss = tg_sum(y);
  cr_assert_eq(tg_backward(loss, NULL), TG_OK, "%s", tg_last_error_message());
  tg_profile_stop();
  cr_assert_eq(row("test_profiled_composite", false).calls, 3);
  cr_assert_eq(row("test_profiled_composite", true).calls, 3);
  cr_assert_eq(row("exp", false).calls, 3, "called inside the forward: a row of its own");
  cr_assert_eq(row("mul", false).calls, 3, "called inside the backward");
  cr_assert_eq(row("sum", false).calls, 1);
  cr_assert_eq(row("sum", true).calls, 1);
  cr_assert_eq(row("exp", true).calls, 0, "ops inside a forward record no tape");
}

/* Self time is the total less the op calls made inside: to the nanosecond, per call. */
TG_TEST(profile, self_time_leaves_out_the_ops_called_inside) {
  tg_tensor *x = tg_randn(TG_SHAPE(256, 256), f64_grad, NULL);
  cr_assert_eq(tg_profile_start(false), TG_OK);
  const int64_t t0 = now_ns();
  tg_tensor *y = tg_apply1(&composite, 1, (const tg_tensor *[]){x}, 0, NULL);
  cr_assert_not_null(y, "%s", tg_last_error_message());
  cr_assert_eq(tg_backward(y, tg_ones_like(y)), TG_OK, "%s", tg_last_error_message());
  const int64_t wall = now_ns() - t0;
  tg_profile_stop();
  const tg_profile_row f = row("test_profiled_composite", false);
  const tg_profile_row b = row("test_profiled_composite", true);
  const tg_profile_row e = row("exp", false), m = row("mul", false);
  cr_assert(f.total_ns >= 2000000, "the forward slept 2 ms: %lld ns", (long long)f.total_ns);
  cr_assert(b.total_ns >= 1000000, "the backward slept 1 ms: %lld ns", (long long)b.total_ns);
  cr_assert(e.total_ns > 0 && m.total_ns > 0);
  cr_assert_eq(f.self_ns + e.total_ns, f.total_ns);
  cr_assert_eq(b.self_ns + m.total_ns, b.total_ns);
  cr_assert_eq(e.self_ns, e.total_ns, "exp calls no op");
  int64_t self_sum = 0;
  tg_profile_row all[TG_PROFILE_MAX_ROWS];
  const int64_t n = tg_profile_rows(all, TG_PROFILE_MAX_ROWS);
  for (int64_t i = 0; i < n; i++) {
    self_sum += all[i].self_ns;
    cr_assert(all[i].self_ns <= all[i].total_ns, "%s", all[i].op);
    if (i > 0) cr_assert(all[i - 1].self_ns >= all[i].self_ns, "largest self time first");
  }
  cr_assert(self_sum <= wall, "self times add up to time in ops: %lld of %lld ns",
            (long long)self_sum, (long long)wall);
}

TG_TEST(profile, stop_keeps_the_table_and_start_clears_it) {
  tg_tensor *x = tg_ones(TG_SHAPE(4), f64);
  cr_assert_eq(tg_profile_start(false), TG_OK);
  cr_assert_not_null(tg_add(x, x));
  tg_profile_stop();
  cr_assert_not_null(tg_add(x, x));
  cr_assert_eq(row("add", false).calls, 1, "nothing counted while stopped");
  cr_assert_eq(tg_profile_rows(NULL, 0), 1);
  tg_profile_row one;
  cr_assert_eq(tg_profile_rows(&one, 1), 1);
  cr_assert_str_eq(one.op, "add");
  cr_assert_eq(tg_profile_start(false), TG_OK);
  cr_assert_eq(tg_profile_rows(NULL, 0), 0, "a start clears the table");
  tg_profile_stop();
}

static void *add_many(void *arg) {
  const tg_tensor *x = arg;
  for (int i = 0; i < 200; i++) {
    tg_scope s = tg_scope_begin();
    if (!tg_add(x, x)) return (void *)1;
    tg_scope_end(s);
  }
  return NULL;
}

TG_TEST(profile, counts_every_threads_calls) {
  tg_tensor *x = tg_ones(TG_SHAPE(16), f64);
  cr_assert_eq(tg_profile_start(false), TG_OK);
  pthread_t t[2];
  for (int i = 0; i < 2; i++) cr_assert_eq(pthread_create(&t[i], NULL, add_many, x), 0);
  for (int i = 0; i < 2; i++) {
    void *failed = NULL;
    pthread_join(t[i], &failed);
    cr_assert_null(failed);
  }
  tg_profile_stop();
  cr_assert_eq(row("add", false).calls, 400);
}

static tg_status copy_forward(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  (void)ctx;
  out[0] = tg_clone(in[0]);
  return out[0] ? TG_OK : tg_last_error();
}

/* Past TG_PROFILE_MAX_ROWS - 1 ops the rest share "(other)"; no op is lost. */
TG_TEST(profile, a_full_table_spills_into_other) {
  enum { OPS = TG_PROFILE_MAX_ROWS + 20 };
  static char names[OPS][24];
  static tg_op_desc descs[OPS];
  tg_tensor *x = tg_ones(TG_SHAPE(2), f64);
  cr_assert_eq(tg_profile_start(false), TG_OK);
  for (int i = 0; i < OPS; i++) {
    snprintf(names[i], sizeof names[i], "test_profiled_%d", i);
    descs[i] = (tg_op_desc){names[i], 1, 1, {copy_forward}, NULL, 0, NULL};
    tg_scope s = tg_scope_begin();
    cr_assert_not_null(tg_apply1(&descs[i], 1, (const tg_tensor *[]){x}, 0, NULL), "%s",
                       tg_last_error_message());
    tg_scope_end(s);
  }
  tg_profile_stop();
  cr_assert_eq(tg_profile_rows(NULL, 0), TG_PROFILE_MAX_ROWS);
  tg_profile_row all[TG_PROFILE_MAX_ROWS];
  tg_profile_rows(all, TG_PROFILE_MAX_ROWS);
  int64_t calls = 0;
  for (int i = 0; i < TG_PROFILE_MAX_ROWS; i++) calls += all[i].calls;
  const int64_t clones = row("clone", false).calls;
  cr_assert_eq(calls, OPS + clones, "every call in some row");
  const tg_profile_row other = row("(other)", false);
  cr_assert(other.calls >= OPS - (TG_PROFILE_MAX_ROWS - 2), "(other) has %lld calls",
            (long long)other.calls);
}

TG_TEST(profile, prints_a_table) {
  tg_tensor *x = tg_ones(TG_SHAPE(3), f64_grad);
  cr_assert_eq(tg_profile_start(false), TG_OK);
  tg_tensor *y = tg_apply1(&composite, 1, (const tg_tensor *[]){x}, 0, NULL);
  cr_assert_eq(tg_backward(tg_sum(y), NULL), TG_OK, "%s", tg_last_error_message());
  tg_profile_stop();
  char text[8192] = "";
  FILE *f = fmemopen(text, sizeof text - 1, "w");
  cr_assert_not_null(f);
  cr_assert_eq(tg_profile_print(f, 0), TG_OK, "%s", tg_last_error_message());
  fclose(f);
  cr_assert(strstr(text, "op ") && strstr(text, "self ms") && strstr(text, "us/call"), "%s", text);
  cr_assert(strstr(text, "test_profiled_composite (backward)"), "%s", text);
  cr_assert(strstr(text, "all ops (self)"), "%s", text);
  /* The largest self time first: the forward's 2 ms sleep. */
  const char *first = strchr(text, '\n') + 1;
  cr_assert(strncmp(first, "test_profiled_composite ", 24) == 0, "%s", text);

  memset(text, 0, sizeof text);
  f = fmemopen(text, sizeof text - 1, "w");
  cr_assert_eq(tg_profile_print(f, 1), TG_OK);
  fclose(f);
  const int64_t n = tg_profile_rows(NULL, 0);
  char more[64];
  snprintf(more, sizeof more, "(%lld more rows)", (long long)(n - 1));
  cr_assert(strstr(text, more), "%s", text);
}

TG_TEST(profile, print_refuses_bad_arguments_and_reports_a_failed_write) {
  cr_assert_eq(tg_profile_print(NULL, 0), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_profile_print", "out is NULL");
  cr_assert_eq(tg_profile_print(stdout, -1), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_profile_print", "max_rows is -1");
  FILE *read_only = fopen("/dev/null", "r");
  cr_assert_not_null(read_only);
  cr_assert_eq(tg_profile_print(read_only, 0), TG_ERR_IO);
  tg_expect_error(TG_ERR_IO, "tg_profile_print: writing the table failed");
  fclose(read_only);
}

/* ---- the device wait (synchronize) ---- */
static tg_status failing_forward(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  (void)ctx, (void)in, (void)out;
  return tg_set_error(TG_ERR_ARGUMENT, "test: the forward failed");
}

static const tg_op_desc failing = {"test_profiled_failing", 1, 1, {failing_forward}, NULL, 0, NULL};

static int syncs;
static tg_status failing_sync(void) {
  syncs++;
  return tg_set_error(TG_ERR_DEVICE, "test: the device wait failed");
}

TG_TEST(profile, synchronize_waits_around_each_call_and_keeps_the_ops_error) {
  tg__profile_set_device_sync(failing_sync);
  tg_tensor *x = tg_ones(TG_SHAPE(2, 3), f64);
  cr_assert_eq(tg_profile_start(true), TG_OK);
  syncs = 0;
  cr_assert_not_null(tg_add(x, x));
  cr_assert_eq(syncs, 2, "before and after the call");
  tg_expect_ok(); /* the wait's error is not the op's */
  cr_assert_null(tg_apply1(&failing, 1, (const tg_tensor *[]){x}, 0, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "test: the forward failed");
  cr_assert_eq(syncs, 4);
  cr_assert_eq(row("test_profiled_failing", false).calls, 1, "a failed call counts too");
  tg_profile_stop();
  cr_assert_not_null(tg_add(x, x));
  cr_assert_eq(syncs, 4, "nothing waits while stopped");
  cr_assert_eq(tg_profile_start(false), TG_OK);
  cr_assert_not_null(tg_add(x, x));
  cr_assert_eq(syncs, 4, "nor without synchronize");
  tg_profile_stop();
  tg__profile_set_device_sync(NULL);
}
