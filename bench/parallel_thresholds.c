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
 *   parallel_thresholds [--threads T] [--iters N] [--gap US] [--busy] [--help]
 * --gap: microseconds of one-thread work before each timed call (default 50: a small
 * training step's GEMMs between two parallel passes). */
#define _POSIX_C_SOURCE 200809L
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_parse.h"
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

static const char usage[] =
    "usage: parallel_thresholds [--threads T] [--iters N] [--gap US] [--busy]\n"
    "Times CPU passes on 1 and on T threads per size. Defaults: 2 threads, 200 iterations,\n"
    "50 us of serial work before each timed call, no other busy thread.\n";

/* Returns 0 to run, else the exit status: CLI_EXIT_USAGE on a bad command line, -1 (for 0)
 * after --help. */
static int parse_args(int argc, char **argv, int *threads, int *iters, bool *busy) {
  const char *me = "parallel_thresholds";
  enum { THREADS = 256, ITERS, GAP, BUSY };
  static const struct option options[] = {{"threads", required_argument, NULL, THREADS},
                                          {"iters", required_argument, NULL, ITERS},
                                          {"gap", required_argument, NULL, GAP},
                                          {"busy", no_argument, NULL, BUSY},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
    bool ok = true;
    switch (c) {
    case 'h':
      fputs(usage, stdout);
      return -1;
    case THREADS:
      ok = cli_parse_int(me, "--threads", optarg, 2, 4096, threads);
      break;
    case ITERS:
      ok = cli_parse_int(me, "--iters", optarg, 1, 1000000, iters);
      break;
    case GAP:
      ok = cli_parse_double(me, "--gap", optarg, 0, 1e6, &gap_us);
      break;
    case BUSY:
      *busy = true;
      break;
    default:
      return cli_usage_error(me);
    }
    if (!ok) return CLI_EXIT_USAGE;
  }
  if (optind < argc) {
    fprintf(stderr, "%s: unexpected argument '%s'\n", me, argv[optind]);
    return cli_usage_error(me);
  }
  return 0;
}

int main(int argc, char **argv) {
  int threads = 2, iters = 200;
  bool busy = false;
  int parsed = parse_args(argc, argv, &threads, &iters, &busy);
  if (parsed) return parsed < 0 ? 0 : parsed;
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
