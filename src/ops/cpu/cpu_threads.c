/* Thread counts of the CPU backend: tg's thread pool for its own loops (thread_pool.c), BLIS
 * (its OpenMP threads) for GEMMs. One process-wide count drives both.
 *
 * The default is TG_NUM_THREADS, else OMP_NUM_THREADS (as before the pool, when tg's loops
 * were OpenMP's), else the CPUs this process may run on. BLIS on its own would run
 * single-threaded unless BLIS_NUM_THREADS is set, so the first GEMM hands it tg's count,
 * unless the user configured BLIS through its environment. */
#define _GNU_SOURCE /* sched_getaffinity */
#include <blis.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "ops/cpu/cpu_internal.h"
#include "ops/cpu/thread_pool.h"

/* A positive count from an environment variable (OMP_NUM_THREADS may be a list: its first
 * number is the outer level's), else 0. */
static int env_threads(const char *name) {
  const char *v = getenv(name);
  if (!v) return 0;
  char *end = NULL;
  long n = strtol(v, &end, 10);
  if (end == v || (*end != '\0' && *end != ',') || n < 1) return 0;
  return n > 4096 ? 4096 : (int)n;
}

int tg_cpu_default_threads(void) {
  int n = env_threads("TG_NUM_THREADS");
  if (n == 0) n = env_threads("OMP_NUM_THREADS");
  if (n > 0) return n;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  return online > 0 ? (int)online : 1;
}

/* The default as found before tg first changed the count; 0 until looked up. */
static atomic_int default_threads;
/* Set once BLIS's count was chosen (by tg_set_num_threads or the first GEMM). */
static atomic_bool blis_configured;

static int first_default_threads(void) {
  int d = atomic_load(&default_threads);
  if (d == 0) {
    int expected = 0;
    atomic_compare_exchange_strong(&default_threads, &expected, tg_cpu_default_threads());
    d = atomic_load(&default_threads);
  }
  return d;
}

static bool blis_env_configured(void) {
  static const char *const vars[] = {"BLIS_NUM_THREADS", "BLIS_JC_NT", "BLIS_PC_NT",
                                     "BLIS_IC_NT",       "BLIS_JR_NT", "BLIS_IR_NT"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
    if (getenv(vars[i])) return true;
  return false;
}

void tg_cpu_blis_threads_init(void) {
  if (atomic_load(&blis_configured)) return;
  if (!atomic_exchange(&blis_configured, true) && !blis_env_configured())
    bli_thread_set_num_threads(tg_cpu_pool_threads());
}

/* Process-wide: every thread's loops and GEMMs use the count. An invalid BLIS_ARCH_TYPE
 * leaves BLIS alone and its error pending (the pool's count changes all the same). */
void tg_set_num_threads(int n) {
  const int fallback = first_default_threads(); /* looked up before the first change */
  const int count = n > 0 ? n : fallback;
  tg_cpu_pool_set_threads(count);
  /* BLIS must not start with an invalid BLIS_ARCH_TYPE: that error stays pending. */
  if (tg_cpu_blis_ready("tg_set_num_threads") != TG_OK) return;
  atomic_store(&blis_configured, true);
  bli_thread_set_num_threads(count);
}

int tg_get_num_threads(void) { return tg_cpu_pool_threads(); }
