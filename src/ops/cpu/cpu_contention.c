/* Contended cores: when another process holds a core tg's threads need, a thread team waits
 * for a member the scheduler does not run, up to a time slice at every fork. Measured on
 * 2 cores with the other one busy: a 2-thread GEMM of 28M multiply-adds (the LLTM at
 * 64 x 1024 x 128) took 8.0 ms instead of 0.3 ms, every call; on one thread it takes 0.6.
 * So tg watches for it and runs one-threaded for a while when it sees it:
 *  - a team member that starts more than TG_CONTENDED_LATE_NS after the fork (a woken
 *    OpenMP thread starts within tens of microseconds; a descheduled one a slice later);
 *  - a multi-threaded GEMM slower than TG_CONTENDED_GEMM_MIN_MACS_PER_US (2 quiet threads
 *    run 90 or more multiply-adds per ns, 1 thread 45-55).
 * Two such signs within TG_CONTENDED_NS set a deadline TG_CONTENDED_NS ahead (one alone is
 * often a one-off: the first team's thread creation, BLIS allocating its packing buffers);
 * until then tg_cpu_should_parallelize says no and GEMMs run on one thread. After it, the
 * next teams probe again, so a busy core costs two slow forks per period. */
#include <stdatomic.h>
#include <time.h>

#include "ops/cpu/cpu_internal.h"

static atomic_llong contended_until; /* monotonic ns; 0: never */
static atomic_llong first_sign;      /* monotonic ns of an unconfirmed sign; 0: none */

int64_t tg_cpu_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

bool tg_cpu_contended(void) {
  const long long until = atomic_load_explicit(&contended_until, memory_order_relaxed);
  return until != 0 && tg_cpu_now_ns() < until;
}

void tg_cpu_note_contention(void) {
  atomic_store_explicit(&contended_until, (long long)(tg_cpu_now_ns() + TG_CONTENDED_NS),
                        memory_order_relaxed);
}

/* A sign: the second within the period confirms (a race between two threads noting at once
 * at worst confirms one sign early or drops one). */
static void note_sign(void) {
  const int64_t now = tg_cpu_now_ns();
  const long long first =
      atomic_exchange_explicit(&first_sign, (long long)now, memory_order_relaxed);
  if (first != 0 && now - first < TG_CONTENDED_NS) {
    tg_cpu_note_contention();
    atomic_store_explicit(&first_sign, 0, memory_order_relaxed);
  }
}

void tg_cpu_note_team_start(int64_t fork_ns) {
  if (tg_cpu_now_ns() - fork_ns > TG_CONTENDED_LATE_NS) note_sign();
}

void tg_cpu_note_parallel_gemm(int64_t macs, int64_t elapsed_ns) {
  if (elapsed_ns > 0 && macs / (elapsed_ns / 1000 + 1) < TG_CONTENDED_GEMM_MIN_MACS_PER_US)
    note_sign();
}

void tg__cpu_forget_contention(void) {
  atomic_store_explicit(&contended_until, 0, memory_order_relaxed);
  atomic_store_explicit(&first_sign, 0, memory_order_relaxed);
}
