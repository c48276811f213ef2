/* Thread counts of the CPU backend: OpenMP for tg's own loops, BLIS for GEMM.
 *
 * The default is OpenMP's default (OMP_NUM_THREADS, else the core count) for both. BLIS on
 * its own would run single-threaded unless BLIS_NUM_THREADS is set, so the first GEMM
 * hands it tg's count, unless the user configured BLIS through its environment. */
#include <blis.h>
#include <omp.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "ops/cpu/cpu_internal.h"

/* OpenMP's thread count as found before tg first changed it; 0 until looked up. */
static atomic_int default_threads;
/* Set once BLIS's count was chosen (by tg_set_num_threads or the first GEMM). */
static atomic_bool blis_configured;

static int tg_cpu_default_threads(void) {
  int d = atomic_load(&default_threads);
  if (d == 0) {
    int expected = 0;
    atomic_compare_exchange_strong(&default_threads, &expected, omp_get_max_threads());
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
    bli_thread_set_num_threads(tg_cpu_default_threads());
}

/* omp_set_num_threads sets the calling thread's count: call this from the thread that
 * runs the ops. An invalid BLIS_ARCH_TYPE leaves BLIS alone and its error pending. */
void tg_set_num_threads(int n) {
  const int fallback = tg_cpu_default_threads(); /* looked up before the first change */
  const int count = n > 0 ? n : fallback;
  omp_set_num_threads(count);
  /* BLIS must not start with an invalid BLIS_ARCH_TYPE: that error stays pending. */
  if (tg_cpu_blis_ready("tg_set_num_threads") != TG_OK) return;
  atomic_store(&blis_configured, true);
  bli_thread_set_num_threads(count);
}

int tg_get_num_threads(void) { return omp_get_max_threads(); }
