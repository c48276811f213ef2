/* Exact small shapes (gemm_engine.h): a class's engine is measured at two shapes of the
 * class, and a small product of another shape can run faster on another engine. So the first
 * calls of each exact one-thread small shape run once on every engine in turn, timed on the
 * thread's CPU clock, and the fastest runs it from then on. The work is the caller's own:
 * nothing runs twice, nothing is allocated.
 *
 * The table is fixed (SLOTS entries, no eviction): a shape that finds no slot keeps its
 * class's engine. An entry's key is written once, under the lock, before its state leaves
 * EMPTY (release); a settled entry is read without the lock. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ops/cpu/cpu_internal.h"
#include "ops/cpu/gemm_engine.h"

enum { SLOTS = 1024, PROBES = 16, EMPTY = 0, EXPLORING = 1, SETTLED = 2 };

typedef struct entry {
  atomic_int state;
  atomic_int chosen; /* SETTLED: the engine */
  int64_t m, n, k;
  int code;                           /* dtype and layouts (shape_code) */
  int handed;                         /* timed calls handed out */
  int records;                        /* timed calls that came back */
  float best_ns[TG_GEMM_MAX_ENGINES]; /* fastest run per engine; INFINITY: not taken */
} entry;

static struct {
  pthread_mutex_t lock;
  pthread_once_t once;
  bool off; /* TG_GEMM_SHAPES=off */
  atomic_int settled;
  int64_t (*fake_clock)(int engine);
  entry slots[SLOTS];
} table = {.lock = PTHREAD_MUTEX_INITIALIZER, .once = PTHREAD_ONCE_INIT};

static void read_env(void) {
  const char *env = getenv("TG_GEMM_SHAPES");
  table.off = env && strcmp(env, "off") == 0;
}

static int shape_code(const tg_gemm_problem *p) {
  const bool a_t = p->a_rs == 1 && p->a_cs != 1, b_t = p->b_rs == 1 && p->b_cs != 1;
  return (int)p->dtype * 4 + (a_t ? 2 : 0) + (b_t ? 1 : 0);
}

static size_t hash_of(int64_t m, int64_t n, int64_t k, int code) {
  uint64_t h = 1469598103934665603ull;
  const uint64_t parts[4] = {(uint64_t)m, (uint64_t)n, (uint64_t)k, (uint64_t)code};
  for (int i = 0; i < 4; i++) h = (h ^ parts[i]) * 1099511628211ull;
  return (size_t)(h ^ (h >> 29));
}

static bool same_key(const entry *e, int64_t m, int64_t n, int64_t k, int code) {
  return e->m == m && e->n == n && e->k == k && e->code == code;
}

/* The entry of the shape, or NULL; with create, a new one where the probe window has room
 * (under the lock). */
static entry *find(const tg_gemm_problem *p, bool create) {
  const int code = shape_code(p);
  const size_t h = hash_of(p->m, p->n, p->k, code);
  for (int i = 0; i < PROBES; i++) {
    entry *e = &table.slots[(h + (size_t)i) % SLOTS];
    const int state = atomic_load_explicit(&e->state, memory_order_acquire);
    if (state == EMPTY) {
      if (!create) return NULL;
      e->m = p->m, e->n = p->n, e->k = p->k, e->code = code;
      e->handed = e->records = 0;
      for (int j = 0; j < TG_GEMM_MAX_ENGINES; j++) e->best_ns[j] = INFINITY;
      atomic_store_explicit(&e->state, EXPLORING, memory_order_release);
      return e;
    }
    if (same_key(e, p->m, p->n, p->k, code)) return e;
  }
  return NULL;
}

static bool applies(const tg_gemm_problem *p) {
  pthread_once(&table.once, read_env);
  if (table.off || p->threads != 1 || tg_is_deterministic() || !tg__gemm_choice_measured())
    return false;
  const double macs = (double)p->m * (double)p->n * (double)p->k;
  return macs < (double)TG_CPU_GEMM_PARALLEL_MIN_MACS;
}

static int64_t thread_now_ns(int engine) {
  if (table.fake_clock) return table.fake_clock(engine);
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int tg__gemm_shape_engine(const tg_gemm_problem *p, int class_engine, tg_gemm_shape_probe *probe) {
  probe->slot = -1;
  if (class_engine < 0 || !applies(p)) return class_engine;
  entry *e = find(p, false);
  if (e && atomic_load_explicit(&e->state, memory_order_acquire) == SETTLED)
    return atomic_load_explicit(&e->chosen, memory_order_relaxed);
  pthread_mutex_lock(&table.lock);
  if (!e) e = find(p, true);
  int engine = class_engine;
  const int engines = tg__gemm_engine_count();
  if (e && atomic_load_explicit(&e->state, memory_order_relaxed) == SETTLED) {
    engine = atomic_load_explicit(&e->chosen, memory_order_relaxed);
  } else if (e && e->handed < TG_GEMM_SHAPE_ROUNDS * engines) {
    engine = e->handed % engines;
    e->handed++;
    probe->slot = (int)(e - table.slots);
    probe->engine = engine;
  }
  /* else: every timed call is out (other threads') or no slot: the class's engine, untimed */
  pthread_mutex_unlock(&table.lock);
  if (probe->slot >= 0) probe->t0 = thread_now_ns(engine);
  return engine;
}

/* The fastest engine; the class's unless another is 3% faster (as calibration decides). */
static int fastest(const entry *e, int class_engine, int engines) {
  int best = class_engine;
  for (int j = 0; j < engines; j++)
    if (e->best_ns[j] < e->best_ns[best]) best = j;
  if (best != class_engine && e->best_ns[best] * 1.03f > e->best_ns[class_engine])
    best = class_engine;
  return best;
}

void tg__gemm_shape_done(const tg_gemm_shape_probe *probe, int class_engine, bool ran) {
  if (probe->slot < 0) return;
  const int64_t t1 = thread_now_ns(probe->engine);
  entry *e = &table.slots[probe->slot];
  pthread_mutex_lock(&table.lock);
  const float ns = ran ? (float)(t1 - probe->t0) : INFINITY;
  if (ns < e->best_ns[probe->engine]) e->best_ns[probe->engine] = ns;
  const int engines = tg__gemm_engine_count();
  if (++e->records == TG_GEMM_SHAPE_ROUNDS * engines) {
    atomic_store_explicit(&e->chosen, fastest(e, class_engine, engines), memory_order_relaxed);
    atomic_store_explicit(&e->state, SETTLED, memory_order_release);
    atomic_fetch_add(&table.settled, 1);
  }
  pthread_mutex_unlock(&table.lock);
}

int tg__gemm_shape_settled(const tg_gemm_problem *p) {
  if (!applies(p)) return -1;
  const entry *e = find(p, false);
  if (!e || atomic_load_explicit(&((entry *)e)->state, memory_order_acquire) != SETTLED) return -1;
  return atomic_load_explicit(&((entry *)e)->chosen, memory_order_relaxed);
}

int tg__gemm_shapes_settled_count(void) { return atomic_load(&table.settled); }

void tg__gemm_shapes_reset(void) {
  pthread_once(&table.once, read_env);
  pthread_mutex_lock(&table.lock);
  read_env();
  for (int i = 0; i < SLOTS; i++) atomic_store(&table.slots[i].state, EMPTY);
  atomic_store(&table.settled, 0);
  pthread_mutex_unlock(&table.lock);
}

void tg__gemm_shapes_fake_clock(int64_t (*clock)(int engine)) { table.fake_clock = clock; }
