/* parallel_thresholds: where a second thread starts to pay, per kind of CPU pass.
 *
 * For each pass kind (a cheap binary add into an existing tensor, as gradient accumulation
 * does; a copy; an exp-like unary; a row sum) and each size, the median time of the pass
 * on 1 and on T threads. Each timed call follows a few microseconds of single-threaded
 * work, as in a real step (GEMMs and small ops between the parallel loops), so the other
 * threads' wake-up is part of the price. The ratio column is 1-thread time / T-thread
 * time: the smallest size where it stays above ~1.1 is the threshold to pick. Run it on a
 * quiet machine, and again with another process busy on a core (`--busy`). It sets
 * TG_CPU_PARALLEL_MIN=0 for itself, which makes every pass fork whatever its size.
 *
 *   parallel_thresholds [--threads T] [--iters N] [--gap US] [--busy]
 * --gap: microseconds of one-thread work before each timed call (default 50: a small
 * training step's GEMMs between two parallel passes). */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tg/tg.h"
#include "timing.h"

typedef enum pass { PASS_ADD, PASS_COPY, PASS_EXP, PASS_SUM_ROWS, N_PASSES } pass;
static const char *const pass_names[N_PASSES] = {"add_ (grad accumulate)", "copy", "exp",
                                                 "sum over dim 0"};

static volatile double sink;

/* gap_us of one-thread work between timed calls (the rest of a step). */
static double gap_us = 50;
static void serial_work(void) {
  double x = 0, t0 = tg_bench_now_us();
  while (tg_bench_now_us() - t0 < gap_us) x += 1e-9;
  sink = x;
}

static void run_pass(pass p, tg_tensor *a, tg_tensor *b) {
  tg_scope s = tg_scope_begin();
  tg_status st = TG_OK;
  switch (p) {
  case PASS_ADD:
    st = tg_add_(a, b);
    break;
  case PASS_COPY:
    st = tg_copy_(a, b);
    break;
  case PASS_EXP:
    st = tg_exp(b) ? TG_OK : tg_last_error();
    break;
  case PASS_SUM_ROWS:
    st = tg_sum_dim(b, 0, false) ? TG_OK : tg_last_error();
    break;
  default:
    break;
  }
  if (st != TG_OK) {
    fprintf(stderr, "parallel_thresholds: %s\n", tg_last_error_message());
    exit(1);
  }
  tg_scope_end(s);
}

static double time_pass(pass p, int threads, int64_t n, int iters) {
  tg_set_num_threads(threads);
  tg_scope s = tg_scope_begin();
  const int64_t cols = 256, rows = n / cols;
  tg_tensor *a = tg_zeros(TG_SHAPE(rows, cols), TG_OPTS_DEFAULT);
  tg_tensor *b = tg_ones(TG_SHAPE(rows, cols), TG_OPTS_DEFAULT);
  double *t = malloc(sizeof(double) * (size_t)iters);
  for (int i = 0; i < 5; i++) run_pass(p, a, b);
  for (int i = 0; i < iters; i++) {
    serial_work();
    double t0 = tg_bench_now_us();
    run_pass(p, a, b);
    t[i] = tg_bench_now_us() - t0;
  }
  double med = tg_bench_median(t, iters);
  free(t);
  tg_scope_end(s);
  return med;
}

static atomic_bool stop;
static void *spin(void *arg) {
  (void)arg;
  double x = 0;
  while (!atomic_load_explicit(&stop, memory_order_relaxed)) x += 1e-9;
  sink = x;
  return NULL;
}

int main(int argc, char **argv) {
  int threads = 2, iters = 200;
  bool busy = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--threads") && i + 1 < argc)
      threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
      iters = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--gap") && i + 1 < argc)
      gap_us = atof(argv[++i]);
    else if (!strcmp(argv[i], "--busy"))
      busy = true;
    else {
      fprintf(stderr, "usage: parallel_thresholds [--threads T] [--iters N] [--gap US] [--busy]\n");
      return 2;
    }
  }
  if (threads < 2 || iters < 1 || !(gap_us >= 0)) {
    fprintf(stderr, "parallel_thresholds: --threads must be at least 2, --iters at least 1\n");
    return 2;
  }
  /* Every pass forks at every size; the thread count alone decides (read once, so set
   * before the first op). */
  setenv("TG_CPU_PARALLEL_MIN", "0", 1);
  pthread_t spinner;
  if (busy && pthread_create(&spinner, NULL, spin, NULL) != 0) return 1;
  printf("# median us per pass, F32, 1 vs %d threads, %.0f us of serial work before each%s\n",
         threads, gap_us, busy ? ", another thread spinning" : "");
  printf("%-24s %9s %10s %10s %6s\n", "pass", "elements", "1 thread", "T threads", "ratio");
  for (int p = 0; p < N_PASSES; p++)
    for (int64_t n = 1 << 12; n <= (int64_t)1 << 22; n *= 2) {
      double one = time_pass((pass)p, 1, n, iters), many = time_pass((pass)p, threads, n, iters);
      printf("%-24s %9lld %10.2f %10.2f %6.2f\n", pass_names[p], (long long)n, one, many,
             one / many);
      fflush(stdout);
    }
  if (busy) {
    atomic_store(&stop, true);
    pthread_join(spinner, NULL);
  }
  return 0;
}
