/* tg_cuda_timer: CUDA events on tg's stream of cuda:0. Readings are compared only with each
 * other (a later reading includes more work), never with a fixed duration. */
#include "cuda_testutil.h"

/* Queues real work on the device: an elementwise product of n floats. */
static void queue_work(int64_t n) {
  tg_tensor *a = tg_full(TG_SHAPE(n), 1.5, TG_OPTS(.device = TG_CUDA0));
  tg_tensor *b = tg_full(TG_SHAPE(n), 2.0, TG_OPTS(.device = TG_CUDA0));
  cr_assert(tg_mul(a, b), "%s", tg_last_error_message());
}

static void assert_no_events_alive(void) {
#ifdef TG_CUDA_EMULATION
  cr_assert_eq(tg_emu_live_events(), 0, "%zu CUDA events alive", tg_emu_live_events());
#endif
}

TG_CUDA_TEST(cuda_timer, elapsed_grows_across_work) {
  tg_cuda_timer *timer = tg_cuda_timer_new();
  cr_assert(timer, "%s", tg_last_error_message());
  cr_assert_eq(tg_cuda_timer_start(timer), TG_OK, "%s", tg_last_error_message());
  double before = -1, after = -1;
  cr_assert_eq(tg_cuda_timer_elapsed_ms(timer, &before), TG_OK, "%s", tg_last_error_message());
  cr_assert_geq(before, 0.0);
  queue_work((int64_t)1 << 20);
  /* Measured from the same start: the second reading includes the product. */
  cr_assert_eq(tg_cuda_timer_elapsed_ms(timer, &after), TG_OK, "%s", tg_last_error_message());
  cr_assert_gt(after, before, "%g ms after the work, %g ms before it", after, before);
  /* A new start measures from there. */
  cr_assert_eq(tg_cuda_timer_start(timer), TG_OK, "%s", tg_last_error_message());
  double again = -1;
  cr_assert_eq(tg_cuda_timer_elapsed_ms(timer, &again), TG_OK, "%s", tg_last_error_message());
  cr_assert_geq(again, 0.0);
  tg_cuda_timer_free(timer);
  assert_no_events_alive();
}

TG_CUDA_TEST(cuda_timer, elapsed_before_start_is_a_state_error) {
  tg_cuda_timer *timer = tg_cuda_timer_new();
  cr_assert(timer, "%s", tg_last_error_message());
  double ms = 42;
  cr_assert_eq(tg_cuda_timer_elapsed_ms(timer, &ms), TG_ERR_STATE);
  tg_expect_error(TG_ERR_STATE, "tg_cuda_timer_elapsed_ms", "not started");
  cr_assert_eq(ms, 42, "a failed reading wrote %g", ms);
  cr_assert_eq(tg_cuda_timer_elapsed_ms(timer, NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_cuda_timer_elapsed_ms", "ms is NULL");
  tg_cuda_timer_free(timer);
  assert_no_events_alive();
}

/* Needs no device: NULL is rejected before CUDA is touched. */
TG_TEST(cuda_timer_any, null_timer_is_an_argument_error) {
  double ms = 0;
  cr_assert_eq(tg_cuda_timer_start(NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_cuda_timer_start", "timer is NULL");
  cr_assert_eq(tg_cuda_timer_elapsed_ms(NULL, &ms), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_cuda_timer_elapsed_ms", "timer is NULL");
  tg_cuda_timer_free(NULL);
}

/* With the real runtime and no GPU (or no driver) this is the clean-error path; with one,
 * a timer is made and freed. */
TG_TEST(cuda_timer_any, no_device_is_a_clean_error) {
  tg_cuda_timer *timer = tg_cuda_timer_new();
  if (tg_cuda_device_count() > 0) {
    cr_assert(timer, "%s", tg_last_error_message());
    tg_cuda_timer_free(timer);
    return;
  }
  cr_assert_null(timer);
  tg_expect_error(TG_ERR_DEVICE, "tg_cuda_timer_new", "no CUDA device is available");
}

#ifdef TG_CUDA_EMULATION

TG_TEST(cuda_timer_emu, no_device_is_a_device_error) {
  tg_emu_set_device_count(0);
  cr_assert_null(tg_cuda_timer_new());
  tg_expect_error(TG_ERR_DEVICE, "tg_cuda_timer_new", "no CUDA device is available",
                  "no CUDA-capable device");
  assert_no_events_alive();
}

TG_TEST(cuda_timer_emu, failed_event_creation_is_a_device_error) {
  tg_emu_fail_events(1);
  cr_assert_null(tg_cuda_timer_new());
  tg_expect_error(TG_ERR_DEVICE, "tg_cuda_timer_new", "cudaEventCreate failed",
                  "unspecified launch failure");
  assert_no_events_alive();
}

TG_CUDA_TEST(cuda_timer_emu, failed_event_calls_are_device_errors) {
  tg_cuda_timer *timer = tg_cuda_timer_new();
  cr_assert(timer, "%s", tg_last_error_message());
  /* a start that failed did not start the timer */
  tg_emu_fail_events(1);
  cr_assert_eq(tg_cuda_timer_start(timer), TG_ERR_DEVICE);
  tg_expect_error(TG_ERR_DEVICE, "tg_cuda_timer_start", "cudaEventRecord failed");
  double ms = 0;
  cr_assert_eq(tg_cuda_timer_elapsed_ms(timer, &ms), TG_ERR_STATE);
  tg_expect_error(TG_ERR_STATE, "not started");

  cr_assert_eq(tg_cuda_timer_start(timer), TG_OK, "%s", tg_last_error_message());
  tg_emu_fail_events(1);
  cr_assert_eq(tg_cuda_timer_elapsed_ms(timer, &ms), TG_ERR_DEVICE);
  tg_expect_error(TG_ERR_DEVICE, "tg_cuda_timer_elapsed_ms", "cudaEventRecord failed");
  /* the runtime's error was consumed: the next launch is not blamed for it, and the timer
   * still works */
  queue_work(64);
  cr_assert_eq(tg_cuda_timer_elapsed_ms(timer, &ms), TG_OK, "%s", tg_last_error_message());
  cr_assert_geq(ms, 0.0);
  tg_cuda_timer_free(timer);
  assert_no_events_alive();
}

#endif
