/* Contended cores (src/ops/cpu/cpu_contention.c): what tg takes as a sign that other
 * processes keep the cores busy, how long it then stays on one thread, and that results do
 * not change. The regions are fed in directly: a busy machine is not reproducible in a test. */
#define _POSIX_C_SOURCE 200809L
#include <time.h>

#include "ops/cpu/cpu_internal.h"
#include "testutil.h"

static void sleep_ns(int64_t ns) {
  struct timespec ts = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
  nanosleep(&ts, NULL);
}

/* Two threads, nothing noticed yet. */
static void fresh(void) {
  tg_set_num_threads(2);
  tg__cpu_forget_contention();
  cr_assert_not(tg_cpu_contended());
  cr_assert(tg_cpu_should_parallelize((int64_t)1 << 30, 1), "a huge loop forks a team");
}

static void done(void) {
  tg__cpu_forget_contention();
  tg_set_num_threads(0);
}

static const int64_t gemm_macs = 64 * 384 * 1152; /* the LLTM's forward at 64 x 1024 x 128 */

static void gemm(bool late) {
  /* 0.3 ms: two quiet threads; 8 ms: measured with the cores busy */
  tg_cpu_note_parallel_gemm(gemm_macs, late ? 8000 * 1000 : 300 * 1000);
}

TG_TEST(contention, a_sample_of_slow_gemms_means_one_thread) {
  fresh();
  for (int i = 0; i < TG_CONTENDED_SAMPLE - 1; i++) gemm(true);
  gemm(false);
  cr_assert_not(tg_cpu_contended(), "3 of 4 slow: a loaded machine where 2 threads may still win");
  for (int i = 0; i < TG_CONTENDED_SAMPLE - 1; i++) gemm(true);
  cr_assert_not(tg_cpu_contended(), "judged once a sample is complete");
  gemm(true);
  cr_assert(tg_cpu_contended(), "4 of 4 slow");
  cr_assert_not(tg_cpu_should_parallelize((int64_t)1 << 30, 1));
  done();
}

TG_TEST(contention, a_slow_gemm_now_and_then_is_not_contention) {
  fresh();
  for (int s = 0; s < 5; s++) {
    gemm(true); /* one slice lost: a lightly loaded machine, where 2 threads still win */
    for (int i = 1; i < TG_CONTENDED_SAMPLE; i++) gemm(false);
    cr_assert_not(tg_cpu_contended());
  }
  done();
}

TG_TEST(contention, period_ends_and_doubles_while_late) {
  fresh();
  tg_cpu_note_contention(); /* one period */
  sleep_ns(TG_CONTENDED_NS + 20 * 1000 * 1000);
  cr_assert_not(tg_cpu_contended());
  cr_assert(tg_cpu_should_parallelize((int64_t)1 << 30, 1), "the next teams probe again");
  /* Still busy: after the first GEMMs (threads waking, not judged), two periods. */
  for (int i = 0; i < TG_CONTENDED_WARMUP + TG_CONTENDED_SAMPLE - 1; i++) gemm(true);
  cr_assert_not(tg_cpu_contended());
  gemm(true);
  sleep_ns(TG_CONTENDED_NS + 20 * 1000 * 1000);
  cr_assert(tg_cpu_contended(), "the second period is twice as long");
  done();
}

/* While contended, ops that would fork and GEMMs that would use two threads give the same
 * values on one. */
TG_TEST(contention, same_results_on_one_thread) {
  fresh();
  tg_manual_seed(9);
  tg_tensor *a = tg_uniform(TG_SHAPE(300, 257), -1, 1, TG_OPTS(.dtype = TG_F64), NULL);
  tg_tensor *b = tg_uniform(TG_SHAPE(257, 290), -1, 1, TG_OPTS(.dtype = TG_F64), NULL);
  tg_tensor *x = tg_uniform(TG_SHAPE(600, 400), -3, 3, TG_OPTS(.dtype = TG_F64), NULL);
  tg_tensor *mm_free = tg_mm(a, b), *tanh_free = tg_tanh(x), *sum_free = tg_sum_dim(x, 0, false);
  cr_assert(mm_free && tanh_free && sum_free, "%s", tg_last_error_message());
  tg_cpu_note_contention();
  tg_tensor *mm_busy = tg_mm(a, b), *tanh_busy = tg_tanh(x), *sum_busy = tg_sum_dim(x, 0, false);
  cr_assert(mm_busy && tanh_busy && sum_busy, "%s", tg_last_error_message());
  tg_assert_close(mm_busy, mm_free, 1e-12, 1e-12);
  tg_assert_close(tanh_busy, tanh_free, 0, 0);
  tg_assert_close(sum_busy, sum_free, 1e-12, 1e-12);
  done();
}

TG_TEST(contention, deterministic_mode_keeps_the_thread_count) {
  fresh();
  cr_assert_not(tg_is_deterministic());
  tg_cpu_note_contention();
  cr_assert(tg_cpu_contended());
  tg_set_deterministic(true); /* ends the period in progress */
  cr_assert(tg_is_deterministic());
  cr_assert_not(tg_cpu_contended());
  tg_manual_seed(9);
  tg_tensor *a = tg_uniform(TG_SHAPE(300, 257), -1, 1, TG_OPTS(.dtype = TG_F64), NULL);
  tg_tensor *b = tg_uniform(TG_SHAPE(257, 290), -1, 1, TG_OPTS(.dtype = TG_F64), NULL);
  tg_tensor *quiet = tg_mm(a, b);
  for (int i = 0; i < 64; i++) gemm(true); /* samples of late GEMMs: ignored */
  tg_cpu_note_contention();
  cr_assert_not(tg_cpu_contended());
  cr_assert(tg_cpu_should_parallelize((int64_t)1 << 30, 1), "still forks a team");
  tg_tensor *busy = tg_mm(a, b);
  cr_assert(quiet && busy, "%s", tg_last_error_message());
  tg_assert_close(busy, quiet, 0, 0); /* bit for bit */
  tg_set_deterministic(false);
  cr_assert_not(tg_is_deterministic());
  done();
}

/* The thread pool's joins (thread_pool.c): TG_CONTENDED_LATE_LOOPS late ones in a row start a
 * period; an on-time join in between starts the count again. */
TG_TEST(contention, late_loop_joins_in_a_row_start_a_period) {
  fresh();
  for (int i = 0; i < TG_CONTENDED_LATE_LOOPS - 1; i++) tg_cpu_note_loop_join(true);
  tg_cpu_note_loop_join(false);
  for (int i = 0; i < TG_CONTENDED_LATE_LOOPS - 1; i++) tg_cpu_note_loop_join(true);
  cr_assert_not(tg_cpu_contended(), "an on-time join breaks the row");
  tg_cpu_note_loop_join(true);
  cr_assert(tg_cpu_contended());
  cr_assert_not(tg_cpu_should_parallelize((int64_t)1 << 30, 1));
  done();
}
