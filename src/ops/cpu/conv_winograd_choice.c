/* Winograd or the direct convolution, per shape (conv_winograd.h): measured on the shape's
 * first call, as GEMM engines are per exact shape (gemm_shapes.c).
 *
 * The first call of a shape runs Winograd, then the direct convolution, twice each
 * alternating, on the wall clock (both run tg's threads); Winograd settles the shape when its
 * faster run is 3% faster than direct's, and then runs once more, so that the call's result is
 * the settled method's: one shape's results never change within a process (gradcheck runs a
 * backward twice and wants the same bits). Every pass overwrites its output whole, so running
 * it again is harmless. The table is fixed (SLOTS entries): a shape that finds no slot runs
 * direct. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cpu/conv_winograd.h"
#include "ops/cpu/cpu_internal.h"
#include "tensor/tensor_impl.h"

enum { SLOTS = 256, KEY_INTS = 19, ROUNDS = 2, EMPTY = 0, DIRECT = 1, WINOGRAD = 2 };
enum { MODE_AUTO, MODE_OFF, MODE_ON };

static struct {
  pthread_mutex_t lock;
  pthread_once_t once;
  int mode;
  int64_t keys[SLOTS][KEY_INTS];
  atomic_int state[SLOTS];
  atomic_llong runs;
} table = {.lock = PTHREAD_MUTEX_INITIALIZER, .once = PTHREAD_ONCE_INIT};

static void read_env(void) {
  const char *env = getenv("TG_CONV_WINOGRAD");
  table.mode = env && strcmp(env, "off") == 0  ? MODE_OFF
               : env && strcmp(env, "on") == 0 ? MODE_ON
                                               : MODE_AUTO;
}

/* pass, threads, the three tensors' sizes and the geometry's first 4 ints (strides, padding;
 * the rest follows from the sizes where Winograd applies). */
static void key_of(int pass, tg_tensor *const *t, const int64_t *g, int64_t key[KEY_INTS]) {
  int at = 0;
  key[at++] = pass;
  key[at++] = tg_get_num_threads();
  for (int i = 0; i < 3; i++)
    for (int d = 0; d < 4; d++) key[at++] = t[i]->sizes[d];
  for (int i = 0; i < 5; i++) key[at++] = g[i];
}

/* The slot of the key (under the lock), or -1 when the table is full. */
static int slot_of(const int64_t key[KEY_INTS]) {
  uint64_t h = 1469598103934665603ull;
  for (int i = 0; i < KEY_INTS; i++) h = (h ^ (uint64_t)key[i]) * 1099511628211ull;
  for (int probe = 0; probe < SLOTS; probe++) {
    const int s = (int)((h + (uint64_t)probe) % SLOTS);
    if (atomic_load(&table.state[s]) == EMPTY) {
      memcpy(table.keys[s], key, sizeof table.keys[s]);
      return s;
    }
    if (memcmp(table.keys[s], key, sizeof table.keys[s]) == 0) return s;
  }
  return -1;
}

static tg_status winograd(int pass, tg_tensor *const *t, const int64_t *g) {
  const tg_status st = tg__cpu_conv_winograd(pass, t, g);
  if (st == TG_OK) atomic_fetch_add(&table.runs, 1);
  return st;
}

/* The first call of a shape: both timed; the method settled (DIRECT or WINOGRAD) through
 * *settled, or EMPTY when a run declined (nothing settled). */
static tg_status measure(int pass, tg_tensor *const *t, const int64_t *g, tg_conv_direct_fn direct,
                         int *settled) {
  int64_t best[2] = {INT64_MAX, INT64_MAX};
  *settled = EMPTY;
  for (int round = 0; round < ROUNDS; round++)
    for (int m = 0; m < 2; m++) {
      const int64_t t0 = tg_cpu_now_ns();
      const tg_status st = m == 0 ? winograd(pass, t, g) : direct(pass, t, g);
      const int64_t ns = tg_cpu_now_ns() - t0;
      if (st != TG_OK) {
        if (st != TG_ERR_UNSUPPORTED) return st;
        /* declined: whichever declined, direct (or the caller's generic path) runs the call */
        return m == 0 ? direct(pass, t, g) : TG_ERR_UNSUPPORTED;
      }
      if (ns < best[m]) best[m] = ns;
    }
  if ((double)best[0] * 1.03 < (double)best[1]) {
    *settled = WINOGRAD;
    return winograd(pass, t, g); /* the call's result is the settled method's */
  }
  *settled = DIRECT; /* direct ran last */
  return TG_OK;
}

tg_status tg__cpu_conv_winograd_or(int pass, tg_tensor *const *t, const int64_t *g,
                                   tg_conv_direct_fn direct) {
  pthread_once(&table.once, read_env);
  if (table.mode == MODE_OFF || tg_is_deterministic() || !tg__cpu_conv_winograd_applies(t, g))
    return direct(pass, t, g);
  if (table.mode == MODE_ON) {
    const tg_status st = winograd(pass, t, g);
    return st == TG_ERR_UNSUPPORTED ? direct(pass, t, g) : st;
  }
  int64_t key[KEY_INTS];
  key_of(pass, t, g, key);
  pthread_mutex_lock(&table.lock);
  const int s = slot_of(key);
  const int state = s < 0 ? DIRECT : atomic_load(&table.state[s]);
  if (state != EMPTY) {
    pthread_mutex_unlock(&table.lock);
    if (state == WINOGRAD) {
      const tg_status st = winograd(pass, t, g);
      if (st != TG_ERR_UNSUPPORTED) return st;
    }
    return direct(pass, t, g);
  }
  /* Measured under the lock: another thread's first call of the same shape waits for it. */
  int settled;
  const tg_status st = measure(pass, t, g, direct, &settled);
  if (settled != EMPTY) atomic_store(&table.state[s], settled);
  pthread_mutex_unlock(&table.lock);
  return st;
}

bool tg__cpu_conv_winograd_enabled(void) {
  pthread_once(&table.once, read_env);
  return table.mode != MODE_OFF && !tg_is_deterministic();
}

int64_t tg__cpu_conv_winograd_runs(void) { return atomic_load(&table.runs); }

void tg__cpu_conv_winograd_reset(void) {
  pthread_once(&table.once, read_env);
  pthread_mutex_lock(&table.lock);
  read_env();
  for (int s = 0; s < SLOTS; s++) atomic_store(&table.state[s], EMPTY);
  pthread_mutex_unlock(&table.lock);
}
