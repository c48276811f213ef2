/* The op profiler (tg/autograd.h, tg_profile_start): a fixed table of rows keyed by op name and
 * direction, filled under a mutex when a timed call ends. Nesting is per thread: a frame adds
 * its total to the enclosing frame's child time, so a row's self time leaves out the op calls
 * made inside it. No allocation anywhere: the table is static and the frames live on the
 * callers' stacks. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "profile.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tg/autograd.h"

#define OTHER_ROW "(other)" /* where ops go once the table is full */

static atomic_bool on;
static atomic_bool synchronize;
static _Atomic(tg_status (*)(void)) device_sync;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static tg_profile_row rows[TG_PROFILE_MAX_ROWS]; /* under lock */
static int64_t n_rows;                           /* under lock */
static _Thread_local tg__profile_frame *innermost;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Waits for the device where asked. Its error is not the op's: the thread's error is put back
 * as it was (an op that failed keeps its message; a sticky device fault shows at the next
 * op that touches the device). */
static void wait_for_device(void) {
  if (!atomic_load_explicit(&synchronize, memory_order_relaxed)) return;
  tg_status (*sync)(void) = atomic_load(&device_sync);
  if (!sync) return;
  const tg_status code = tg_last_error();
  char message[1024]; /* error.c's bound on a message */
  snprintf(message, sizeof message, "%s", tg_last_error_message());
  if (sync() == TG_OK && tg_last_error() == code) return;
  if (code == TG_OK)
    tg_clear_error();
  else
    tg_set_error(code, "%s", message);
}

void tg__profile_set_device_sync(tg_status (*sync)(void)) { atomic_store(&device_sync, sync); }

/* TG_PROFILE=N or N,sync: profile the whole program from its first op, and print N rows (0:
 * all) on stderr at exit; for programs one cannot or would rather not change. */
static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static atomic_bool env_read; /* set once read_env has run: op calls skip pthread_once after */
static int64_t env_rows;
static void start(bool synchronize_devices);

static void print_at_exit(void) {
  fprintf(stderr, "tg: op profile (TG_PROFILE), by self time:\n");
  (void)tg_profile_print(stderr, env_rows);
}

static void read_env_once(void) {
  const char *e = getenv("TG_PROFILE");
  if (!e || !e[0]) return;
  char *end;
  errno = 0;
  const long long n = strtoll(e, &end, 10);
  const bool sync = end != e && strcmp(end, ",sync") == 0;
  if (end == e || (*end && !sync) || n < 0 || errno) {
    fprintf(stderr,
            "tg: TG_PROFILE='%s' is not N or N,sync (the rows to print at exit, 0 for all): "
            "not profiling\n",
            e);
    return;
  }
  env_rows = n;
  if (atexit(print_at_exit) == 0) start(sync);
}

static void read_env_run(void) {
  read_env_once();
  atomic_store_explicit(&env_read, true, memory_order_release);
}

static void read_env(void) {
  if (!atomic_load_explicit(&env_read, memory_order_acquire)) pthread_once(&env_once, read_env_run);
}

void tg__profile_begin(tg__profile_frame *f) {
  read_env();
  f->on = atomic_load_explicit(&on, memory_order_relaxed);
  if (!f->on) return;
  wait_for_device();
  f->child_ns = 0;
  f->parent = innermost;
  innermost = f;
  f->start_ns = now_ns();
}

/* The row of (op, backward), made where there is room; once all but the last row are taken,
 * the last is "(other)" and takes every op without a row. Under lock. */
static tg_profile_row *row_of(const char *op, bool backward) {
  for (int64_t i = 0; i < n_rows; i++)
    if (rows[i].backward == backward && strncmp(rows[i].op, op, sizeof rows[i].op - 1) == 0)
      return &rows[i];
  tg_profile_row *r = &rows[n_rows < TG_PROFILE_MAX_ROWS ? n_rows : TG_PROFILE_MAX_ROWS - 1];
  if (n_rows == TG_PROFILE_MAX_ROWS) return r;
  const bool other = n_rows++ == TG_PROFILE_MAX_ROWS - 1;
  *r = (tg_profile_row){.backward = other ? false : backward};
  snprintf(r->op, sizeof r->op, "%s", other ? OTHER_ROW : op);
  return r;
}

void tg__profile_end(tg__profile_frame *f, const char *op, bool backward) {
  if (!f->on) return;
  wait_for_device();
  const int64_t total = now_ns() - f->start_ns;
  innermost = f->parent;
  if (f->parent) f->parent->child_ns += total;
  /* A call that began before a stop still counts: its start was under the profiler. */
  pthread_mutex_lock(&lock);
  tg_profile_row *r = row_of(op ? op : "(unnamed)", backward);
  r->calls++;
  r->total_ns += total;
  r->self_ns += total - f->child_ns;
  pthread_mutex_unlock(&lock);
}

static void start(bool synchronize_devices) {
  pthread_mutex_lock(&lock);
  n_rows = 0;
  memset(rows, 0, sizeof rows);
  pthread_mutex_unlock(&lock);
  atomic_store(&synchronize, synchronize_devices);
  atomic_store(&on, true);
}

tg_status tg_profile_start(bool synchronize_devices) {
  read_env(); /* TG_PROFILE first, so it cannot clear this start */
  start(synchronize_devices);
  return TG_OK;
}

void tg_profile_stop(void) {
  read_env();
  atomic_store(&on, false);
}

bool tg_profile_is_on(void) { return atomic_load(&on); }

static int by_self_time(const void *a, const void *b) {
  const tg_profile_row *x = a, *y = b;
  if (x->self_ns != y->self_ns) return x->self_ns > y->self_ns ? -1 : 1;
  const int names = strcmp(x->op, y->op);
  return names ? names : (int)x->backward - (int)y->backward;
}

int64_t tg_profile_rows(tg_profile_row *out, int64_t max) {
  pthread_mutex_lock(&lock);
  qsort(rows, (size_t)n_rows, sizeof rows[0], by_self_time);
  const int64_t n = n_rows;
  for (int64_t i = 0; out && i < n && i < max; i++) out[i] = rows[i];
  pthread_mutex_unlock(&lock);
  return n;
}

tg_status tg_profile_print(FILE *out, int64_t max_rows) {
  if (!out) return tg_set_error(TG_ERR_ARGUMENT, "tg_profile_print: out is NULL");
  if (max_rows < 0)
    return tg_set_error(TG_ERR_ARGUMENT, "tg_profile_print: max_rows is %lld (0: all rows)",
                        (long long)max_rows);
  static tg_profile_row copy[TG_PROFILE_MAX_ROWS]; /* a snapshot, printed outside the lock */
  static pthread_mutex_t copy_lock = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_lock(&copy_lock);
  const int64_t n = tg_profile_rows(copy, TG_PROFILE_MAX_ROWS);
  const int64_t shown = max_rows == 0 || max_rows > n ? n : max_rows;
  int64_t self_sum = 0;
  for (int64_t i = 0; i < n; i++) self_sum += copy[i].self_ns;
  int bad = fprintf(out, "%-40s %8s %12s %7s %12s %12s\n", "op", "calls", "self ms", "self %",
                    "total ms", "us/call") < 0;
  for (int64_t i = 0; i < shown && !bad; i++) {
    const tg_profile_row *r = &copy[i];
    char name[64];
    snprintf(name, sizeof name, "%.47s%s", r->op, r->backward ? " (backward)" : "");
    bad = fprintf(out, "%-40s %8lld %12.3f %6.1f%% %12.3f %12.2f\n", name, (long long)r->calls,
                  (double)r->self_ns / 1e6,
                  self_sum > 0 ? 100.0 * (double)r->self_ns / (double)self_sum : 0.0,
                  (double)r->total_ns / 1e6, (double)r->total_ns / 1e3 / (double)r->calls) < 0;
  }
  if (!bad && shown < n) bad = fprintf(out, "(%lld more rows)\n", (long long)(n - shown)) < 0;
  if (!bad && fprintf(out, "%-40s %8s %12.3f\n", "all ops (self)", "", (double)self_sum / 1e6) < 0)
    bad = 1;
  pthread_mutex_unlock(&copy_lock);
  if (bad || fflush(out) != 0)
    return tg_set_error(TG_ERR_IO, "tg_profile_print: writing the table failed: %s",
                        strerror(errno));
  return TG_OK;
}
