/* Peak resident memory of a span of a benchmark (bench/lltm_bench.c, conv_bn_memory.c).
 * Header-only: both are programs. */
#ifndef TG_BENCH_RSS_H
#define TG_BENCH_RSS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "proc_status.h" /* examples/common: proc_status_kb */

/* The peak resident memory of one implementation's run, forward and backward, as growth over
 * what the process holds just before its first forward (inputs made, libraries loaded). On
 * Linux the process's high-water mark is reset first (writing 5 to /proc/self/clear_refs sets
 * VmHWM to the current VmRSS), so the growth is this run's peak even after larger runs in the
 * same process: VmHWM after the last step minus VmRSS before the first. It counts what a step
 * really costs: the outputs, what the graph saves, temporaries, the leaves' .grad buffers and
 * pages the allocator kept from earlier steps only as far as they are touched again. Without
 * the reset it falls back to ru_maxrss before and after, which is only this run's peak when no
 * earlier run in the process went higher: bench/compare.py --rss runs one per process. */
typedef struct tg_bench_rss {
  bool reset;      /* the high-water mark was reset: VmHWM is this run's */
  long long start; /* kB: VmRSS (reset) or ru_maxrss before the first forward; -1 unknown */
} tg_bench_rss;

static inline long long max_rss_kb(void) {
  struct rusage ru;
  return getrusage(RUSAGE_SELF, &ru) == 0 ? (long long)ru.ru_maxrss : -1;
}

static inline void tg_bench_rss_start(tg_bench_rss *r) {
  FILE *f = fopen("/proc/self/clear_refs", "w");
  r->reset = f && fputs("5", f) >= 0;
  if (f && fclose(f) != 0) r->reset = false;
  r->start = r->reset ? proc_status_kb("VmRSS") : max_rss_kb();
  if (r->start < 0) r->reset = false, r->start = max_rss_kb();
}

/* Bytes, or -1 when a reading failed. */
static inline int64_t tg_bench_rss_growth(const tg_bench_rss *r) {
  const long long peak = r->reset ? proc_status_kb("VmHWM") : max_rss_kb();
  if (r->start < 0 || peak < 0) return -1;
  return (int64_t)(peak > r->start ? peak - r->start : 0) * 1024;
}

#endif
