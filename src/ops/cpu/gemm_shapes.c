/* Exact shapes (gemm_engine.h): a class's engine is measured at two shapes of the class, and
 * a product of another shape can run faster on another engine. So the first call of each
 * exact shape (with its team size) times every engine that takes it, as it will run (3
 * rounds, into a scratch output; one thread on its CPU clock, a team on the wall clock), and
 * the fastest runs it from then on, that first call included: within a process one shape
 * always runs on one engine, so its results do not change from call to call (gradcheck runs a
 * backward twice and wants the same bits).
 *
 * The table is fixed (SLOTS entries, no eviction): a shape that finds no slot, or no memory
 * for the scratch output, keeps its class's engine. An entry's key is written once, under the
 * lock, before its state leaves EMPTY (release); a settled entry is read without the lock. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/checked.h"
#include "tensor/host_memory.h"

#include "ops/cpu/cpu_internal.h"
#include "ops/cpu/gemm_engine.h"

enum { SLOTS = 1024, PROBES = 16, EMPTY = 0, SETTLED = 1 };

typedef struct entry {
  atomic_int state;
  atomic_int chosen; /* SETTLED: the engine */
  int64_t m, n, k;
  int code; /* dtype, layouts and team (shape_code) */
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
  return (p->threads * TG_NUM_DTYPES + (int)p->dtype) * 4 + (a_t ? 2 : 0) + (b_t ? 1 : 0);
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
      return e; /* the caller settles it */
    }
    if (same_key(e, p->m, p->n, p->k, code)) return e;
  }
  return NULL;
}

static bool applies(const tg_gemm_problem *p) {
  pthread_once(&table.once, read_env);
  if (table.off || tg_is_deterministic() || !tg__gemm_choice_measured()) return false;
  const tg_gemm_problem block = tg__gemm_block_of(p);
  const double macs = (double)block.m * (double)block.n * (double)block.k;
  return macs < (double)TG_GEMM_SHAPE_MAX_MACS;
}

/* One thread's product on its CPU clock (preemption does not count); a team's on the wall
 * clock, the time the caller waits. */
static int64_t now_ns(int engine, bool team) {
  if (table.fake_clock) return table.fake_clock(engine);
  return team ? tg_cpu_now_ns() : tg_cpu_thread_now_ns();
}

/* The fastest engine; the class's unless another is 3% faster (as calibration decides). */
static int fastest(const float *best_ns, int class_engine, int engines) {
  int best = class_engine;
  for (int j = 0; j < engines; j++)
    if (best_ns[j] < best_ns[best]) best = j;
  if (best != class_engine &&
      best_ns[best] * (float)(1 + TG_GEMM_CHOICE_MARGIN) > best_ns[class_engine])
    best = class_engine;
  return best;
}

/* Times every engine that takes p, 3 rounds, as p will run: one thread's product alone, a
 * team's split on tg's pool (an engine fastest on a team's block alone need not be in the
 * team: on Zen 3 MKL won 256 x 2048 x 3072's block alone, then ran at 92-108 GF/s on two
 * threads against BLIS's 137, tg 1.18x the best). Into a zeroed scratch output laid out as
 * p's (with the room behind it BLIS may read); the engine to settle on, or -1 without memory
 * for it. */
static int tune(const tg_gemm_problem *p, int class_engine) {
  tg_gemm_problem q = *p;
  const bool team = p->threads > 1;
  const size_t elsize = q.dtype == TG_F64 ? sizeof(double) : sizeof(float);
  const int64_t longer = q.m > q.n ? q.m : q.n;
  int64_t bytes; /* m * n elements, one more row or column and a vector: what BLIS may read */
  if (tg__mul_ovf(q.m, q.n, &bytes) || tg__add_ovf(bytes, longer, &bytes) ||
      tg__mul_ovf(bytes, (int64_t)elsize, &bytes) || tg__add_ovf(bytes, 64, &bytes))
    return -1;
  char *scratch = tg__host_aligned_alloc(64, (size_t)bytes);
  if (!scratch) return -1;
  memset(scratch, 0, (size_t)bytes);
  const bool c_column_major = q.c_rs == 1 && q.c_cs != 1;
  q.c = scratch;
  q.c_rs = c_column_major ? 1 : q.n;
  q.c_cs = c_column_major ? q.m : 1;
  const int engines = tg__gemm_engine_count();
  float best_ns[TG_GEMM_MAX_ENGINES], fastest_ns = INFINITY;
  bool timed[TG_GEMM_MAX_ENGINES];
  for (int e = 0; e < engines; e++) {
    best_ns[e] = INFINITY;
    timed[e] = tg__gemm_engine_takes(e, p);
  }
  for (int round = 0; round < TG_GEMM_SHAPE_ROUNDS; round++)
    for (int e = 0; e < engines; e++) {
      /* Far behind after two rounds (the first may pay for a JIT or a cold buffer): done. */
      if (!timed[e] || (round >= 2 && best_ns[e] > 3 * fastest_ns)) continue;
      const int64_t t0 = now_ns(e, team);
      const bool ran = tg__gemm_engine_run(e, &q);
      const float ns = (float)(now_ns(e, team) - t0);
      if (ran && ns < best_ns[e]) best_ns[e] = ns;
      if (best_ns[e] < fastest_ns) fastest_ns = best_ns[e];
    }
  tg__host_free(scratch);
  return fastest(best_ns, class_engine, engines);
}

int tg__gemm_shape_engine(const tg_gemm_problem *p, int class_engine) {
  if (class_engine < 0 || !applies(p)) return class_engine;
  entry *e = find(p, false);
  if (e && atomic_load_explicit(&e->state, memory_order_acquire) == SETTLED)
    return atomic_load_explicit(&e->chosen, memory_order_relaxed);
  /* A first call: tuned under the lock (once per shape; other first calls wait). */
  pthread_mutex_lock(&table.lock);
  int engine = class_engine;
  e = find(p, true);
  if (e && atomic_load_explicit(&e->state, memory_order_relaxed) == SETTLED) {
    engine = atomic_load_explicit(&e->chosen, memory_order_relaxed);
  } else if (e) {
    const int tuned = tune(p, class_engine);
    if (tuned >= 0) {
      engine = tuned;
      atomic_store_explicit(&e->chosen, tuned, memory_order_relaxed);
      atomic_store_explicit(&e->state, SETTLED, memory_order_release);
      atomic_fetch_add(&table.settled, 1);
    }
  }
  pthread_mutex_unlock(&table.lock);
  return engine;
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
