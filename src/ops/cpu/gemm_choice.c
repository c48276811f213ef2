/* Which engine runs a GEMM: decided once per process, on the first GEMM.
 *
 *   BLIS_ARCH_TYPE set        that BLIS set runs every GEMM (the built-in rules, one engine)
 *   TG_GEMM_ENGINE=builtin    tg's fixed rules (cpu_gemm.c), nothing measured
 *   TG_GEMM_ENGINE=<engine>   that engine for every GEMM it takes, the rules for the rest;
 *                             a name this process has not: every GEMM fails, saying which it has
 *   unset (or "auto")         per shape class, the engine measured fastest on this CPU: read
 *                             from the cache, else calibrated now (seconds) and cached
 *
 * A cache that cannot be read as this CPU's is ignored with a message on stderr, and replaced.
 * tg_gemm_calibrate measures again on request, whatever was chosen before. */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cpu/cpu_internal.h"
#include "ops/cpu/gemm_engine.h"

typedef enum mode { MODE_BUILTIN, MODE_PINNED, MODE_TABLE, MODE_ERROR } mode;

static struct {
  pthread_once_t once;
  pthread_mutex_t lock; /* table, source, seconds: replaced by tg_gemm_calibrate */
  atomic_int mode;
  atomic_int pinned;
  atomic_int chosen[TG_GEMM_CLASSES];
  tg_gemm_table table;
  const char *source;
  double seconds; /* the last calibration's */
  bool have_path;
  char path[PATH_MAX];
  char error[512];
} state = {.once = PTHREAD_ONCE_INIT, .lock = PTHREAD_MUTEX_INITIALIZER};

/* The engines the built-in rules name, looked up once (not by name on every GEMM): -1 where
 * the process has none. */
static struct {
  pthread_once_t once;
  int xsmm, large;
} rules = {PTHREAD_ONCE_INIT, -1, -1};

static void find_rule_engines(void) {
  rules.xsmm = tg__gemm_engine_named("libxsmm");
  const char *large = tg_blis_large_kernels();
  if (large) {
    char name[32];
    snprintf(name, sizeof name, "blis-%s", large);
    rules.large = tg__gemm_engine_named(name);
  }
}

static int builtin_engine(int64_t m, int64_t n, int64_t k, bool b_t, int threads) {
  pthread_once(&rules.once, find_rule_engines);
  const double macs = (double)m * (double)n * (double)k;
  if (rules.xsmm >= 0 && threads == 1 && !b_t && macs < (double)TG_XSMM_MAX_MACS) return rules.xsmm;
  if (rules.large >= 0 && macs >= (double)TG_BLIS_LARGE_MIN_MACS) return rules.large;
  return 0;
}

int tg__gemm_builtin_engine(const tg_gemm_problem *p) {
  return builtin_engine(p->m, p->n, p->k, p->b_cs != 1, p->threads);
}

static void builtin_per_class(int builtin[TG_GEMM_CLASSES], int threads) {
  for (int cls = 0; cls < TG_GEMM_CLASSES; cls++) {
    int64_t m, n, k;
    bool a_t, b_t, many;
    tg__gemm_class_shape(cls, &m, &n, &k, &a_t, &b_t, &many);
    builtin[cls] = builtin_engine(m, n, k, b_t, many ? threads : 1);
  }
}

static void use_table(const tg_gemm_table *t, const char *source) {
  state.table = *t;
  state.source = source;
  for (int cls = 0; cls < TG_GEMM_CLASSES; cls++)
    atomic_store_explicit(&state.chosen[cls], t->chosen[cls], memory_order_relaxed);
  atomic_store(&state.mode, MODE_TABLE);
}

/* Measures and caches; TG_OK or the calibration's error. Called under state.lock or once. */
static tg_status calibrate_now(void) {
  int builtin[TG_GEMM_CLASSES];
  builtin_per_class(builtin, tg_get_num_threads());
  static tg_gemm_table t; /* 4 KB: not on the caller's stack; guarded by lock/once */
  const int64_t t0 = tg_cpu_now_ns();
  bool noisy = false;
  tg_status st = tg__gemm_calibrate(&t, builtin, &noisy);
  if (st != TG_OK) return st;
  state.seconds = (double)(tg_cpu_now_ns() - t0) / 1e9;
  use_table(&t, "calibrated");
  char why[256];
  if (state.have_path && noisy)
    fprintf(stderr,
            "tg: the GEMM calibration's timings were disturbed (other programs busy on these "
            "cores?): its choice is not cached in %s\n",
            state.path);
  else if (state.have_path && !tg__gemm_cache_write(state.path, &t, why, sizeof why))
    fprintf(stderr, "tg: could not write the GEMM engine cache %s: %s\n", state.path, why);
  return TG_OK;
}

static void choose(void) {
  atomic_store(&state.mode, MODE_BUILTIN);
  state.have_path = false;
  state.error[0] = '\0';
  if (tg_cpu_blis_pinned()) {
    state.source = "BLIS_ARCH_TYPE";
    return;
  }
  const char *env = getenv("TG_GEMM_ENGINE");
  if (env && strcmp(env, "builtin") == 0) {
    state.source = "TG_GEMM_ENGINE";
    return;
  }
  if (env && env[0] && strcmp(env, "auto") != 0) {
    const int e = tg__gemm_engine_named(env);
    if (e < 0) {
      char names[256] = "";
      size_t used = 0;
      for (int i = 0; i < tg__gemm_engine_count() && used < sizeof names; i++)
        used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "",
                                 tg__gemm_engine_at(i)->name);
      snprintf(state.error, sizeof state.error,
               "TG_GEMM_ENGINE='%s' is not an engine of this process (it has: %s; or builtin, "
               "auto)",
               env, names);
      atomic_store(&state.mode, MODE_ERROR);
      return;
    }
    state.source = "TG_GEMM_ENGINE";
    atomic_store(&state.pinned, e);
    atomic_store(&state.mode, MODE_PINNED);
    return;
  }
  state.have_path = tg__gemm_cache_path(state.path, sizeof state.path);
  if (state.have_path) {
    static tg_gemm_table t;
    char why[256];
    const int read = tg__gemm_cache_read(state.path, &t, why, sizeof why);
    if (read > 0) {
      use_table(&t, "cache");
      return;
    }
    if (read < 0)
      fprintf(stderr, "tg: ignoring the GEMM engine cache %s: %s; calibrating again\n", state.path,
              why);
  }
  state.source = "builtin";
  if (calibrate_now() != TG_OK) {
    fprintf(stderr, "tg: GEMM calibration failed (%s): the built-in rules choose engines\n",
            tg_last_error_message());
    tg_clear_error();
  }
}

static void choose_once(void) { choose(); }

static void ensure_chosen(void) { pthread_once(&state.once, choose_once); }

static void nothing(void) {}

int tg__gemm_engine_choice(const tg_gemm_problem *p, tg_status *status) {
  ensure_chosen();
  *status = TG_OK;
  switch ((mode)atomic_load_explicit(&state.mode, memory_order_acquire)) {
  case MODE_ERROR:
    *status = tg_set_error(TG_ERR_ARGUMENT, "gemm: %s", state.error);
    return -1;
  case MODE_PINNED:
    return atomic_load_explicit(&state.pinned, memory_order_relaxed);
  case MODE_TABLE: {
    const int cls = tg__gemm_class_of(p->m, p->n, p->k, p->a_rs == 1 && p->a_cs != 1,
                                      p->b_rs == 1 && p->b_cs != 1, p->threads);
    return atomic_load_explicit(&state.chosen[cls], memory_order_relaxed);
  }
  case MODE_BUILTIN:
    break;
  }
  return -1;
}

bool tg__gemm_choice_measured(void) {
  return atomic_load_explicit(&state.mode, memory_order_acquire) == MODE_TABLE;
}

/* ---- the public API (tg/cpu.h) ---- */

tg_status tg_gemm_calibrate(void) {
  if (tg_cpu_blis_ready("tg_gemm_calibrate") != TG_OK) return tg_last_error();
  /* Where no GEMM chose yet, this calibration is the choice (not one on first use, then
   * this one); a failure leaves the built-in rules. */
  pthread_once(&state.once, nothing);
  pthread_mutex_lock(&state.lock);
  if (!state.source) state.source = "builtin";
  if (!state.have_path) state.have_path = tg__gemm_cache_path(state.path, sizeof state.path);
  const tg_status st = calibrate_now();
  pthread_mutex_unlock(&state.lock);
  return st;
}

const char *tg_gemm_engine_source(void) {
  if (tg_cpu_blis_ready("tg_gemm_engine_source") != TG_OK) return NULL;
  ensure_chosen();
  if (atomic_load(&state.mode) == MODE_ERROR) {
    tg_set_error(TG_ERR_ARGUMENT, "tg_gemm_engine_source: %s", state.error);
    return NULL;
  }
  pthread_mutex_lock(&state.lock);
  const char *source = state.source;
  pthread_mutex_unlock(&state.lock);
  return source;
}

const char *tg_gemm_engine_for(int64_t m, int64_t n, int64_t k, bool a_transposed,
                               bool b_transposed, int threads) {
  if (tg_cpu_blis_ready("tg_gemm_engine_for") != TG_OK) return NULL;
  if (m < 0 || n < 0 || k < 0 || threads < 1) {
    tg_set_error(TG_ERR_ARGUMENT,
                 "tg_gemm_engine_for: sizes %lld x %lld x %lld and threads %d: sizes must be "
                 "non-negative and threads at least 1",
                 (long long)m, (long long)n, (long long)k, threads);
    return NULL;
  }
  /* As cpu_gemm.c does: small products run one thread. */
  const double macs = (double)m * (double)n * (double)k;
  if (macs < (double)TG_CPU_GEMM_PARALLEL_MIN_MACS) threads = 1;
  tg_gemm_problem p = {0};
  p.m = m, p.n = n, p.k = k, p.threads = threads;
  p.a_rs = a_transposed ? 1 : k, p.a_cs = a_transposed ? m : 1;
  p.b_rs = b_transposed ? 1 : n, p.b_cs = b_transposed ? k : 1;
  tg_status st;
  int e = tg__gemm_engine_choice(&p, &st);
  if (st != TG_OK) return NULL;
  /* What cpu_gemm.c does when the engine does not take the product: the rules decide. */
  const int settled = tg__gemm_shape_settled(&p);
  if (settled >= 0) e = settled;
  pthread_once(&rules.once, find_rule_engines);
  if (e < 0 || (e == rules.xsmm && b_transposed))
    e = builtin_engine(m, n, k, b_transposed, threads);
  return tg__gemm_engine_at(e)->name;
}

/* snprintf into buf at *used, tracking the length a large enough buffer would need. */
static void put(char *buf, size_t size, size_t *used, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  const int n =
      vsnprintf(*used < size ? buf + *used : NULL, *used < size ? size - *used : 0, fmt, ap);
  va_end(ap);
  if (n > 0) *used += (size_t)n;
}

size_t tg_gemm_engine_report(char *buf, size_t size, bool per_class) {
  if (buf && size) buf[0] = '\0';
  if (!buf) size = 0;
  size_t used = 0;
  const char *source = tg_gemm_engine_source();
  if (!source) {
    put(buf, size, &used, "GEMM engines: %s", tg_last_error_message());
    return used;
  }
  pthread_mutex_lock(&state.lock);
  const int engines = tg__gemm_engine_count();
  put(buf, size, &used, "GEMM engines:");
  for (int e = 0; e < engines; e++) put(buf, size, &used, " %s", tg__gemm_engine_at(e)->name);
  put(buf, size, &used, "; chosen by %s", state.source);
  const int m = atomic_load(&state.mode);
  if (m == MODE_PINNED) {
    put(buf, size, &used, " (%s for every product it takes)",
        tg__gemm_engine_at(atomic_load(&state.pinned))->name);
  } else if (m == MODE_TABLE) {
    if (strcmp(state.source, "calibrated") == 0) put(buf, size, &used, " in %.1f s", state.seconds);
    if (state.have_path) put(buf, size, &used, ", cache %s", state.path);
    int count[TG_GEMM_MAX_ENGINES] = {0};
    for (int cls = 0; cls < TG_GEMM_CLASSES; cls++) count[state.table.chosen[cls]]++;
    put(buf, size, &used, "; classes per engine:");
    for (int e = 0; e < engines; e++)
      if (count[e]) put(buf, size, &used, " %s %d", tg__gemm_engine_at(e)->name, count[e]);
    put(buf, size, &used, "; exact shapes settled: %d", tg__gemm_shapes_settled_count());
    if (per_class) {
      put(buf, size, &used, "\n%-24s %-14s", "class (size/aspect/ab/threads)", "chosen");
      for (int e = 0; e < engines; e++) put(buf, size, &used, " %12s", tg__gemm_engine_at(e)->name);
      for (int cls = 0; cls < TG_GEMM_CLASSES; cls++) {
        if (!tg__gemm_class_measured(cls)) continue;
        char name[48];
        tg__gemm_class_name(cls, name, sizeof name);
        put(buf, size, &used, "\n%-30s %-14s", name,
            tg__gemm_engine_at(state.table.chosen[cls])->name);
        for (int e = 0; e < engines; e++) {
          const float us = state.table.us[cls][e];
          if (us >= 0)
            put(buf, size, &used, " %9.1f us", (double)us);
          else
            put(buf, size, &used, " %12s", us < -1.5f ? "wrong" : "-");
        }
      }
      put(buf, size, &used,
          "\n(tiny and small products run one thread: their tN classes "
          "are their t1 classes; times are F32, the choice holds for F64)");
    }
  }
  pthread_mutex_unlock(&state.lock);
  return used;
}

void tg__gemm_choice_again(void) {
  pthread_once(&state.once, nothing); /* the first choice is this one */
  pthread_mutex_lock(&state.lock);
  choose();
  pthread_mutex_unlock(&state.lock);
  tg__gemm_shapes_reset();
}
