/* Calibration: every engine timed on every measured shape class, on this CPU, now.
 *
 * Per class, at each of its two shapes (gemm_classes.c) in F32: one untimed run per engine
 * (which also checks its result against the first engine's: an engine that disagrees is
 * never chosen), then rounds in which the engines alternate, one timed run each
 * (TG_CALIBRATION_ROUNDS at the representative shape, TG_CALIBRATION_FAR_ROUNDS at the far
 * one, where the first run is the time: the engines' buffers are warm by then); an engine's
 * time at a shape is its fastest run, and its score the sum of the two. An engine
 * already 3x slower than the best on its untimed run is not timed further. The engine the built-in
 * rules run keeps the class unless another is more than TG_GEMM_CHOICE_MARGIN faster, so noise does
 * not move choices about. F64 products use the F32 choice. About 3 s on 2 idle Zen 3 cores.
 *
 * A busy machine: one-thread runs are timed in the thread's CPU time, which a descheduled
 * thread does not accumulate, and every time is a minimum; two-thread runs can only be timed
 * on the wall clock. Measured while two compilers held both cores, two-thread runs took up
 * to 20x as long as one-thread ones, and chose at random. So a calibration is used by this
 * process but not cached (the next process measures again) when more than a quarter of its
 * classes were disturbed: runs spread widely (the median over 1.5x the fastest), or more
 * threads were not faster than one (over 0.9x the one-thread twin's time). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ops/cpu/cpu_internal.h"
#include "ops/cpu/gemm_engine.h"
#include "tensor/host_memory.h"

#define TG_CALIBRATION_ROUNDS 3
#define TG_CALIBRATION_FAR_ROUNDS 0
#define TG_CALIBRATION_SKIP_RATIO 3.0

static atomic_bool quick, assume_noisy;

void tg__gemm_calibration_quick(bool on) { atomic_store(&quick, on); }
void tg__gemm_calibration_assume_noisy(bool on) { atomic_store(&assume_noisy, on); }

/* A matrix of rows x cols (column-major when transposed), with the room behind it that BLIS's
 * kernels may read (cpu_gemm.c pads every storage the same way), filled from a generator. */
typedef struct buffer {
  float *data;
  int64_t rs, cs;
} buffer;

static bool make(buffer *b, int64_t rows, int64_t cols, bool transposed, uint64_t *seed) {
  const int64_t longer = rows > cols ? rows : cols;
  const size_t elems = (size_t)(rows * cols + longer + 64);
  b->data = tg__host_aligned_alloc(64, elems * sizeof(float));
  if (!b->data) return false;
  for (size_t i = 0; i < elems; i++) {
    *seed = *seed * 6364136223846793005u + 1442695040888963407u;
    b->data[i] = (float)((double)(*seed >> 40) / (double)(1u << 24) * 2.0 - 1.0);
  }
  b->rs = transposed ? 1 : cols;
  b->cs = transposed ? rows : 1;
  return true;
}

static int cmp_float(const void *x, const void *y) {
  const float a = *(const float *)x, b = *(const float *)y;
  return (a > b) - (a < b);
}

/* Nanoseconds on the thread's CPU clock (one-thread runs) or the wall clock. */
static int64_t now_ns(bool thread_clock) {
  return thread_clock ? tg_cpu_thread_now_ns() : tg_cpu_now_ns();
}

/* One timed run in microseconds; negative when the engine does not take p. */
static float time_run(int e, const tg_gemm_problem *p) {
  const bool thread_clock = p->threads == 1;
  const int64_t t0 = now_ns(thread_clock);
  if (!tg__gemm_engine_run(e, p)) return -1;
  return (float)(now_ns(thread_clock) - t0) / 1000.0f;
}

static bool agrees(const float *c, const float *ref, int64_t count, int64_t k) {
  const double tol = 1e-5 * (double)(k + 16);
  for (int64_t i = 0; i < count; i++)
    if (!(fabs((double)c[i] - (double)ref[i]) <= tol)) return false;
  return true;
}

/* Times every engine at one shape of class cls: us[e] its fastest of `rounds` timed runs
 * (after an untimed one), its untimed run when that was TG_CALIBRATION_SKIP_RATIO slower
 * than the best, -1 when it does not take the shape or disagrees with the first engine. */
static tg_status measure_shape(int cls, int64_t m, int64_t n, int64_t k, int threads, int rounds,
                               float us[TG_GEMM_MAX_ENGINES], bool *noisy) {
  bool a_t, b_t, many;
  int64_t unused;
  tg__gemm_class_shape(cls, &unused, &unused, &unused, &a_t, &b_t, &many);
  if (atomic_load(&quick)) { /* tests: the tiny class's shape, same aspect and layout */
    m = m > 32 ? 32 : m, n = n > 32 ? 32 : n, k = k > 32 ? 32 : k;
  }
  uint64_t seed = (uint64_t)cls * 2654435761u + 1;
  buffer a = {0}, b = {0}, c = {0}, ref = {0};
  tg_status st = TG_OK;
  if (!make(&a, m, k, a_t, &seed) || !make(&b, k, n, b_t, &seed) || !make(&c, m, n, false, &seed) ||
      !make(&ref, m, n, false, &seed)) {
    st = tg_set_error(TG_ERR_MEMORY,
                      "tg_gemm_calibrate: out of memory for a %ld x %ld x %ld "
                      "product's operands",
                      (long)m, (long)n, (long)k);
    goto done;
  }
  tg_gemm_problem p = {TG_F32,
                       m,
                       n,
                       k,
                       (char *)c.data,
                       c.rs,
                       c.cs,
                       (const char *)a.data,
                       a.rs,
                       a.cs,
                       (const char *)b.data,
                       b.rs,
                       b.cs,
                       1.0,
                       0.0,
                       many ? threads : 1};
  const int engines = tg__gemm_engine_count();
  float first[TG_GEMM_MAX_ENGINES], runs[TG_GEMM_MAX_ENGINES][TG_CALIBRATION_ROUNDS] = {{0}};
  bool have_ref = false;
  float best_first = INFINITY;
  for (int e = 0; e < engines; e++) {
    first[e] = time_run(e, &p);
    if (first[e] < 0) continue;
    if (!have_ref) {
      memcpy(ref.data, c.data, (size_t)(m * n) * sizeof(float));
      have_ref = true;
    } else if (!agrees(c.data, ref.data, m * n, k)) {
      char name[48];
      tg__gemm_class_name(cls, name, sizeof name);
      fprintf(stderr, "tg: GEMM calibration: %s disagrees with %s at %s: never chosen there\n",
              tg__gemm_engine_at(e)->name, tg__gemm_engine_at(0)->name, name);
      first[e] = -2;
      continue;
    }
    if (first[e] < best_first) best_first = first[e];
  }
  for (int r = 0; r < rounds; r++)
    for (int e = 0; e < engines; e++)
      if (first[e] >= 0 && first[e] <= TG_CALIBRATION_SKIP_RATIO * best_first)
        runs[e][r] = time_run(e, &p);
  for (int e = 0; e < TG_GEMM_MAX_ENGINES; e++) {
    us[e] = -1;
    if (e >= engines || first[e] < 0) continue;
    if (rounds > 0 && first[e] <= TG_CALIBRATION_SKIP_RATIO * best_first) {
      qsort(runs[e], (size_t)rounds, sizeof(float), cmp_float);
      us[e] = runs[e][0];
      if (rounds >= 3 && runs[e][rounds / 2] > 1.5f * runs[e][0]) *noisy = true;
    } else {
      us[e] = first[e]; /* no rounds, or too slow to time: its first run */
    }
  }
done:
  tg__host_free(a.data);
  tg__host_free(b.data);
  tg__host_free(c.data);
  tg__host_free(ref.data);
  return st;
}

/* A class's engines are scored by their time at the representative shape plus their time at
 * the far one (one run there: it is the larger for HUGE), so an engine that wins small
 * operands but falls off when they leave the caches does not take the class. */
static tg_status measure_class(int cls, int threads, tg_gemm_table *table, int builtin,
                               bool *noisy) {
  int64_t m, n, k;
  bool a_t, b_t, many;
  tg__gemm_class_shape(cls, &m, &n, &k, &a_t, &b_t, &many);
  float near[TG_GEMM_MAX_ENGINES], far[TG_GEMM_MAX_ENGINES];
  tg_status st = measure_shape(cls, m, n, k, threads, TG_CALIBRATION_ROUNDS, near, noisy);
  if (st != TG_OK) return st;
  tg__gemm_class_far_shape(cls, &m, &n, &k);
  st = measure_shape(cls, m, n, k, threads, TG_CALIBRATION_FAR_ROUNDS, far, noisy);
  if (st != TG_OK) return st;
  int best = -1;
  for (int e = 0; e < TG_GEMM_MAX_ENGINES; e++) {
    table->us[cls][e] = near[e] >= 0 && far[e] >= 0 ? near[e] + far[e] : -1;
    if (table->us[cls][e] >= 0 && (best < 0 || table->us[cls][e] < table->us[cls][best])) best = e;
  }
  /* The built-in choice stays unless beaten by the margin. */
  if (best >= 0 && builtin >= 0 && table->us[cls][builtin] >= 0 &&
      table->us[cls][best] * (1 + TG_GEMM_CHOICE_MARGIN) >= table->us[cls][builtin])
    best = builtin;
  table->chosen[cls] = best >= 0 ? best : 0;
  return TG_OK;
}

static float fastest(const tg_gemm_table *t, int cls) {
  float best = INFINITY;
  for (int e = 0; e < TG_GEMM_MAX_ENGINES; e++)
    if (t->us[cls][e] >= 0 && t->us[cls][e] < best) best = t->us[cls][e];
  return best;
}

tg_status tg__gemm_calibrate(tg_gemm_table *table, const int builtin[TG_GEMM_CLASSES],
                             bool *noisy) {
  const int threads = tg_get_num_threads();
  int measured = 0, noisy_classes = 0;
  table->threads = threads;
  for (int cls = 0; cls < TG_GEMM_CLASSES; cls++) {
    for (int e = 0; e < TG_GEMM_MAX_ENGINES; e++) table->us[cls][e] = -1;
    table->chosen[cls] = 0;
  }
  for (int cls = 0; cls < TG_GEMM_CLASSES; cls++) {
    if (!tg__gemm_class_measured(cls)) continue;
    bool many = cls % TG_GEMM_THREAD_CLASSES;
    if (many && threads <= 1) continue; /* copied from the one-thread twin below */
    bool class_noisy = false;
    tg_status st = measure_class(cls, threads, table, builtin[cls], &class_noisy);
    if (st != TG_OK) return st;
    measured++;
    /* More threads no faster than one (the twin class, measured just before): the other
     * threads were not running. */
    const int twin = cls - 1;
    if (many && fastest(table, cls) > 0.9f * fastest(table, twin)) class_noisy = true;
    noisy_classes += class_noisy;
  }
  /* Quick (test) calibrations time microseconds, too short to judge the spread of. */
  *noisy = atomic_load(&assume_noisy) || (!atomic_load(&quick) && 4 * noisy_classes > measured);
  for (int cls = 0; cls < TG_GEMM_CLASSES; cls++) {
    bool many = cls % TG_GEMM_THREAD_CLASSES;
    if (!tg__gemm_class_measured(cls) || (many && threads <= 1)) {
      const int twin = cls - 1;
      table->chosen[cls] = table->chosen[twin];
      memcpy(table->us[cls], table->us[twin], sizeof table->us[cls]);
    }
  }
  return TG_OK;
}
