/* Contended cores (src/ops/cpu/cpu_contention.c): what tg takes as a sign that another process
 * holds a core its teams need, how long it then stays on one thread, and that results do not
 * change. The signs are fed in directly: a real busy core is not reproducible in a test. */
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

TG_TEST(contention, late_team_member_means_one_thread) {
  fresh();
  tg_cpu_note_team_start(tg_cpu_now_ns()); /* on time */
  cr_assert_not(tg_cpu_contended());
  tg_cpu_note_team_start(tg_cpu_now_ns() - 2 * TG_CONTENDED_LATE_NS);
  cr_assert_not(tg_cpu_contended(), "one late start alone is often a one-off");
  tg_cpu_note_team_start(tg_cpu_now_ns() - 2 * TG_CONTENDED_LATE_NS);
  cr_assert(tg_cpu_contended());
  cr_assert_not(tg_cpu_should_parallelize((int64_t)1 << 30, 1));
  tg__cpu_forget_contention();
  tg_set_num_threads(0);
}

TG_TEST(contention, slow_parallel_gemm_means_one_thread) {
  fresh();
  const int64_t macs = 64 * 384 * 1152;        /* the LLTM's forward GEMM at 64 x 1024 x 128 */
  tg_cpu_note_parallel_gemm(macs, 300 * 1000); /* 0.3 ms: two quiet threads */
  cr_assert_not(tg_cpu_contended());
  tg_cpu_note_parallel_gemm(macs, 8 * 1000 * 1000); /* 8 ms: measured with the other core busy */
  cr_assert_not(tg_cpu_contended());
  tg_cpu_note_parallel_gemm(macs, 8 * 1000 * 1000);
  cr_assert(tg_cpu_contended());
  tg__cpu_forget_contention();
  tg_set_num_threads(0);
}

TG_TEST(contention, signs_far_apart_are_one_offs) {
  fresh();
  tg_cpu_note_team_start(tg_cpu_now_ns() - 2 * TG_CONTENDED_LATE_NS);
  sleep_ns(TG_CONTENDED_NS + 20 * 1000 * 1000);
  tg_cpu_note_team_start(tg_cpu_now_ns() - 2 * TG_CONTENDED_LATE_NS);
  cr_assert_not(tg_cpu_contended());
  tg__cpu_forget_contention();
  tg_set_num_threads(0);
}

TG_TEST(contention, teams_come_back_after_the_period) {
  fresh();
  tg_cpu_note_contention();
  cr_assert_not(tg_cpu_should_parallelize((int64_t)1 << 30, 1));
  sleep_ns(TG_CONTENDED_NS + 20 * 1000 * 1000);
  cr_assert_not(tg_cpu_contended());
  cr_assert(tg_cpu_should_parallelize((int64_t)1 << 30, 1));
  tg_set_num_threads(0);
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
  tg__cpu_forget_contention();
  tg_set_num_threads(0);
}
