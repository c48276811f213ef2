/* Timing shared by bench/lltm_bench.c and examples/tg-lltm.c: a stopwatch that reads CUDA
 * events on tg's stream for CUDA work (kernel time, not launch time) and the host's
 * monotonic clock otherwise, and the median of a sample. Header-only: both are programs. */
#ifndef TG_BENCH_TIMING_H
#define TG_BENCH_TIMING_H

#include <stdlib.h>
#include <time.h>

#include "tg/tg.h"

static inline double tg_bench_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static inline int tg_bench_compare_doubles(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Sorts v in place. */
static inline double tg_bench_median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, tg_bench_compare_doubles);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

typedef struct tg_bench_stopwatch {
  tg_cuda_timer *timer; /* NULL: host clock */
  double t0;
} tg_bench_stopwatch;

static inline tg_status tg_bench_stopwatch_start(tg_bench_stopwatch *w) {
  if (w->timer) return tg_cuda_timer_start(w->timer);
  w->t0 = tg_bench_now_us();
  return TG_OK;
}

/* Microseconds since the last start. */
static inline tg_status tg_bench_stopwatch_us(tg_bench_stopwatch *w, double *us) {
  double ms;
  if (!w->timer) {
    *us = tg_bench_now_us() - w->t0;
    return TG_OK;
  }
  tg_status st = tg_cuda_timer_elapsed_ms(w->timer, &ms);
  *us = ms * 1000.0;
  return st;
}

#endif
