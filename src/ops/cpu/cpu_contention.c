/* Contended cores: when other processes keep the cores tg's threads need busy, a thread team
 * waits for a member the scheduler does not run, up to a time slice at every fork. Measured on
 * 2 cores while another program ran its own 2-thread OpenMP loops: a 2-thread GEMM of 28M
 * multiply-adds (the LLTM at 64 x 1024 x 128) took 8.0 ms instead of 0.3 ms, every call; on
 * one thread it takes 0.6. A lighter load (one busy loop on the other core) costs a team only
 * now and then, and two threads still win (0.35 against 0.65 ms).
 *
 * So tg times its multi-threaded GEMMs (most of a step's work): one under
 * TG_CONTENDED_GEMM_MIN_MACS_PER_US is a late region (2 quiet threads run 90 or more
 * multiply-adds per ns, 1 thread 45-55; under the heavy load above 3.5; under the lighter one
 * a GEMM that wakes sleeping threads ran at 9 or more). Every TG_CONTENDED_SAMPLE of them are
 * judged together: when all were late, tg runs one-threaded (tg_cpu_should_parallelize says
 * no, GEMMs take one thread) for a period that starts at TG_CONTENDED_NS and doubles while
 * the next sample after it is late again, up to 16 periods; a quiet sample resets it. The
 * first TG_CONTENDED_WARMUP GEMMs after a period are not judged: the team's threads slept
 * through it and wake late even on a lightly loaded machine. (Late starts of team members
 * were tried as a sign too: under the lighter load they are common while two threads still
 * win, and taking them as contention halved that speed.) */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <stdatomic.h>
#include <time.h>

#include "ops/cpu/cpu_internal.h"

static atomic_llong contended_until; /* monotonic ns; 0: never */
static atomic_int sample_regions, sample_late;
static atomic_int backoff;        /* periods of one-thread mode the next contended sample sets */
static atomic_int warmup;         /* parallel GEMMs still to skip after a period */
static atomic_bool deterministic; /* tg_set_deterministic: never judge, never drop threads */

void tg_set_deterministic(bool on) {
  atomic_store(&deterministic, on);
  if (on) tg__cpu_forget_contention(); /* a period in progress ends now */
}

bool tg_is_deterministic(void) { return atomic_load(&deterministic); }

int64_t tg_cpu_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t tg_cpu_thread_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

bool tg_cpu_contended(void) {
  if (atomic_load_explicit(&deterministic, memory_order_relaxed)) return false;
  const long long until = atomic_load_explicit(&contended_until, memory_order_relaxed);
  return until != 0 && tg_cpu_now_ns() < until;
}

void tg_cpu_note_contention(void) {
  int periods = atomic_load_explicit(&backoff, memory_order_relaxed);
  if (periods < 1) periods = 1;
  atomic_store_explicit(&contended_until, (long long)(tg_cpu_now_ns() + periods * TG_CONTENDED_NS),
                        memory_order_relaxed);
  atomic_store_explicit(&backoff, periods < 16 ? 2 * periods : 16, memory_order_relaxed);
  atomic_store_explicit(&warmup, TG_CONTENDED_WARMUP, memory_order_relaxed);
}

/* One parallel region seen, late or not; the region completing a sample judges it (two
 * threads completing samples at once at worst judge one sample twice or skip one). */
static void note_region(bool late) {
  if (atomic_load_explicit(&warmup, memory_order_relaxed) > 0 &&
      atomic_fetch_sub_explicit(&warmup, 1, memory_order_relaxed) > 0)
    return;
  if (late) atomic_fetch_add_explicit(&sample_late, 1, memory_order_relaxed);
  if (atomic_fetch_add_explicit(&sample_regions, 1, memory_order_relaxed) + 1 < TG_CONTENDED_SAMPLE)
    return;
  const int n_late = atomic_exchange_explicit(&sample_late, 0, memory_order_relaxed);
  atomic_store_explicit(&sample_regions, 0, memory_order_relaxed);
  if (n_late == TG_CONTENDED_SAMPLE)
    tg_cpu_note_contention();
  else
    atomic_store_explicit(&backoff, 1, memory_order_relaxed);
  atomic_store_explicit(&warmup, 0, memory_order_relaxed);
}

void tg_cpu_note_parallel_gemm(int64_t macs, int64_t elapsed_ns) {
  note_region(elapsed_ns > 0 && macs / (elapsed_ns / 1000 + 1) < TG_CONTENDED_GEMM_MIN_MACS_PER_US);
}

/* Joins of the thread pool's loops (thread_pool.c) that waited for a preempted worker, in a
 * row: TG_CONTENDED_LATE_LOOPS of them start a one-thread period as a late GEMM sample does
 * (a loop saves microseconds on a second thread; each such wait costs a millisecond or more). */
static atomic_int late_loops;

void tg_cpu_note_loop_join(bool late) {
  if (!late) {
    if (atomic_load_explicit(&late_loops, memory_order_relaxed) != 0)
      atomic_store_explicit(&late_loops, 0, memory_order_relaxed);
    return;
  }
  if (atomic_fetch_add_explicit(&late_loops, 1, memory_order_relaxed) + 1 >=
      TG_CONTENDED_LATE_LOOPS) {
    atomic_store_explicit(&late_loops, 0, memory_order_relaxed);
    tg_cpu_note_contention();
  }
}

void tg__cpu_forget_contention(void) {
  atomic_store_explicit(&late_loops, 0, memory_order_relaxed);
  atomic_store_explicit(&contended_until, 0, memory_order_relaxed);
  atomic_store_explicit(&sample_regions, 0, memory_order_relaxed);
  atomic_store_explicit(&sample_late, 0, memory_order_relaxed);
  atomic_store_explicit(&backoff, 1, memory_order_relaxed);
  atomic_store_explicit(&warmup, 0, memory_order_relaxed);
}
