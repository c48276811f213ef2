/* tg's CPU thread pool (src/ops/cpu/thread_pool.c): every chunk runs once, the caller never
 * waits for a worker that has not started (the scheduler's late thread), nested and
 * concurrent jobs, the thread count, fork; and that loops give the same results on 1 and 2
 * threads.
 *
 * Built twice: as the Criterion test test_thread_pool, and with TG_POOL_STANDALONE as the
 * plain program thread_pool_standalone, which scripts/test-tsan.sh runs under
 * ThreadSanitizer (Criterion's runner cannot start under TSan). */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ops/cpu/cpu_internal.h"
#include "ops/cpu/thread_pool.h"

#ifdef TG_POOL_STANDALONE
#include "tg/tg.h"
#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "%s:%d: check failed: %s:", __FILE__, __LINE__, #cond);                      \
      fprintf(stderr, " " __VA_ARGS__);                                                            \
      fputc('\n', stderr);                                                                         \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)
#define POOL_TEST(name) static void pool_test_##name(void)
#else
#include "testutil.h"
#define CHECK(cond, ...) cr_assert(cond, "" __VA_ARGS__)
#define POOL_TEST(name) TG_TEST(thread_pool, name)
#endif

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void sleep_s(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  nanosleep(&ts, NULL);
}

/* ---- counting chunks ---- */
#define MAX_CHUNKS 5000

typedef struct counts {
  atomic_int runs[MAX_CHUNKS];
  pthread_t caller;
  atomic_int by_caller, by_others;
} counts;

static void count_chunk(int64_t chunk, void *arg) {
  counts *c = arg;
  atomic_fetch_add(&c->runs[chunk], 1);
  atomic_fetch_add(pthread_equal(pthread_self(), c->caller) ? &c->by_caller : &c->by_others, 1);
}

/* Runs a job of n chunks; every chunk ran exactly once. */
static void check_job(counts *c, int64_t n) {
  memset(c, 0, sizeof *c);
  c->caller = pthread_self();
  tg_cpu_parallel_for(n, count_chunk, c);
  for (int64_t i = 0; i < n; i++)
    CHECK(atomic_load(&c->runs[i]) == 1, "chunk %lld of %lld ran %d times", (long long)i,
          (long long)n, atomic_load(&c->runs[i]));
  CHECK(atomic_load(&c->by_caller) + atomic_load(&c->by_others) == n);
}

static counts shared_counts;

POOL_TEST(every_chunk_runs_once) {
  static const int64_t sizes[] = {0, 1, 2, 3, 7, 8, 9, 31, 64, 65, 257, 1000, MAX_CHUNKS};
  static const int threads[] = {1, 2, 3, 4, 8, 2};
  for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
    tg_set_num_threads(threads[t]);
    for (int rep = 0; rep < 20; rep++)
      for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        check_job(&shared_counts, sizes[s]);
  }
  tg_set_num_threads(0);
}

/* ---- element ranges ---- */
typedef struct coverage {
  atomic_int hits[70000];
  int64_t align, n;
  atomic_int bad_start;
} coverage;

static void cover_range(int64_t begin, int64_t end, void *arg) {
  coverage *c = arg;
  if (begin % c->align != 0 || begin >= end || end > c->n) atomic_fetch_add(&c->bad_start, 1);
  for (int64_t i = begin; i < end; i++) atomic_fetch_add(&c->hits[i], 1);
}

static coverage shared_coverage;

POOL_TEST(ranges_cover_every_element_once_aligned) {
  static const int64_t sizes[] = {1, 15, 16, 17, 100, 1023, 4096, 65537};
  static const int64_t aligns[] = {1, 16, 64};
  tg_set_num_threads(2);
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
    for (size_t a = 0; a < sizeof aligns / sizeof aligns[0]; a++)
      for (int parallel = 0; parallel < 2; parallel++) {
        coverage *c = &shared_coverage;
        memset(c, 0, sizeof *c);
        c->align = aligns[a];
        c->n = sizes[s];
        tg_cpu_parallel_ranges(c->n, c->align, parallel, cover_range, c);
        CHECK(atomic_load(&c->bad_start) == 0, "a range of %lld started off a multiple of %lld",
              (long long)c->n, (long long)c->align);
        for (int64_t i = 0; i < c->n; i++) CHECK(atomic_load(&c->hits[i]) == 1);
      }
  tg_set_num_threads(0);
}

/* ---- a worker that never gets to run ---- */
static void *release_later(void *arg) {
  sleep_s(*(const double *)arg);
  tg__cpu_pool_hold_workers(false);
  return NULL;
}

/* Workers held back (as if descheduled by a busy neighbour): the caller does every chunk
 * and returns long before they are let go. A join that waits for every team member (an
 * OpenMP barrier) returns only after the release. */
POOL_TEST(caller_finishes_without_held_workers) {
  tg_set_num_threads(2);
  check_job(&shared_counts, 64); /* starts the worker */
  CHECK(tg__cpu_pool_workers() == 1);
  tg__cpu_pool_hold_workers(true);
  static double delay = 1.0;
  pthread_t releaser;
  CHECK(pthread_create(&releaser, NULL, release_later, &delay) == 0);
  const double t0 = now_s();
  for (int i = 0; i < 10; i++) check_job(&shared_counts, 64);
  const double elapsed = now_s() - t0;
  CHECK(elapsed < 0.5 * delay, "10 jobs took %.3f s: the caller waited for a held worker", elapsed);
  CHECK(atomic_load(&shared_counts.by_caller) == 64, "held workers ran %d chunks",
        atomic_load(&shared_counts.by_others));
  pthread_join(releaser, NULL);
  check_job(&shared_counts, 64);
  tg_set_num_threads(0);
}

/* A chunk that is slow to run is waited for (never skipped). */
static void slow_chunk(int64_t chunk, void *arg) {
  if (chunk == 0) sleep_s(0.05);
  count_chunk(chunk, arg);
}

POOL_TEST(slow_chunks_are_waited_for) {
  tg_set_num_threads(2);
  for (int rep = 0; rep < 5; rep++) {
    counts *c = &shared_counts;
    memset(c, 0, sizeof *c);
    c->caller = pthread_self();
    tg_cpu_parallel_for(4, slow_chunk, c);
    for (int i = 0; i < 4; i++) CHECK(atomic_load(&c->runs[i]) == 1);
  }
  tg__cpu_forget_contention(); /* a worker's 50 ms chunk is a late join */
  tg_set_num_threads(0);
}

/* ---- nesting ---- */
typedef struct nested {
  atomic_int outer_runs, inner_runs, inner_elsewhere;
} nested;

typedef struct inner_ctx {
  nested *n;
  pthread_t outer_thread;
} inner_ctx;

static void inner_chunk(int64_t chunk, void *arg) {
  (void)chunk;
  inner_ctx *c = arg;
  atomic_fetch_add(&c->n->inner_runs, 1);
  if (!pthread_equal(pthread_self(), c->outer_thread)) atomic_fetch_add(&c->n->inner_elsewhere, 1);
}

static void outer_chunk(int64_t chunk, void *arg) {
  (void)chunk;
  nested *n = arg;
  atomic_fetch_add(&n->outer_runs, 1);
  inner_ctx c = {n, pthread_self()};
  tg_cpu_parallel_for(8, inner_chunk, &c);
  /* and a tg loop in a chunk: serial too (it asks should_parallelize) */
  if (tg_cpu_should_parallelize((int64_t)1 << 40, 1)) atomic_fetch_add(&n->inner_elsewhere, 1);
}

POOL_TEST(nested_jobs_run_serially_on_their_thread) {
  tg_set_num_threads(2);
  for (int rep = 0; rep < 20; rep++) {
    nested n = {0};
    tg_cpu_parallel_for(16, outer_chunk, &n);
    CHECK(atomic_load(&n.outer_runs) == 16);
    CHECK(atomic_load(&n.inner_runs) == 16 * 8);
    CHECK(atomic_load(&n.inner_elsewhere) == 0, "a nested job left its thread");
  }
  tg_set_num_threads(0);
}

/* ---- two user threads ---- */
typedef struct user_thread {
  counts c;
  int failures;
} user_thread;

static void *user_jobs(void *arg) {
  user_thread *u = arg;
  unsigned seed = 7;
  for (int job = 0; job < 300; job++) {
    seed = seed * 1103515245u + 12345u;
    const int64_t n = 1 + (seed >> 16) % 200;
    memset(&u->c, 0, sizeof u->c);
    u->c.caller = pthread_self();
    tg_cpu_parallel_for(n, count_chunk, &u->c);
    for (int64_t i = 0; i < n; i++)
      if (atomic_load(&u->c.runs[i]) != 1) u->failures++;
  }
  return NULL;
}

static user_thread users[2];

static void no_chunk_work(int64_t chunk, void *ctx) { (void)chunk, (void)ctx; }

/* Workers asleep: work just above its threshold runs on the caller, work TG_CPU_ASLEEP_FACTOR
 * times it still forks (and wakes them); deterministic mode forks by the threshold alone. */
POOL_TEST(asleep_workers_are_woken_only_for_larger_work) {
  tg_set_num_threads(2);
  tg_cpu_parallel_for(4, no_chunk_work, NULL); /* the worker exists */
  const struct timespec ms = {0, 1000000};
  for (int i = 0; i < 1000 && !tg_cpu_pool_asleep(); i++) nanosleep(&ms, NULL);
  CHECK(tg_cpu_pool_asleep(), "the worker never went to sleep");
  const int64_t min = 1000;
  CHECK(tg_cpu_too_small_to_wake(min, min));
  CHECK(tg_cpu_too_small_to_wake(TG_CPU_ASLEEP_FACTOR * min - 1, min));
  CHECK(!tg_cpu_too_small_to_wake(TG_CPU_ASLEEP_FACTOR * min, min));
  if (!tg_cpu_contended()) { /* (a loaded machine may run everything on one thread) */
    CHECK(!tg_cpu_should_parallelize(min, min), "forked for a pass just above its threshold");
    CHECK(tg_cpu_should_parallelize(TG_CPU_ASLEEP_FACTOR * min, min));
  }
  tg_set_deterministic(true);
  CHECK(!tg_cpu_too_small_to_wake(min, min), "deterministic mode depends on timing");
  tg_set_deterministic(false);
  tg_set_num_threads(0);
}

POOL_TEST(two_user_threads_share_the_pool) {
  tg_set_num_threads(2);
  pthread_t t[2];
  memset(users, 0, sizeof users);
  for (int i = 0; i < 2; i++) CHECK(pthread_create(&t[i], NULL, user_jobs, &users[i]) == 0);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  CHECK(users[0].failures == 0 && users[1].failures == 0, "chunks lost or repeated: %d, %d",
        users[0].failures, users[1].failures);
  tg_set_num_threads(0);
}

/* ---- the count ---- */
POOL_TEST(workers_follow_the_thread_count) {
  tg_set_num_threads(3);
  check_job(&shared_counts, 64);
  CHECK(tg__cpu_pool_workers() == 2, "%d workers for 3 threads", tg__cpu_pool_workers());
  tg_set_num_threads(2);
  check_job(&shared_counts, 64);
  CHECK(tg__cpu_pool_workers() == 1, "%d workers for 2 threads", tg__cpu_pool_workers());
  tg_set_num_threads(1);
  check_job(&shared_counts, 64);
  CHECK(atomic_load(&shared_counts.by_caller) == 64, "1 thread: the caller runs every chunk");
  tg_set_num_threads(0);
}

POOL_TEST(default_count_from_the_environment) {
  setenv("TG_NUM_THREADS", "3", 1);
  setenv("OMP_NUM_THREADS", "5", 1);
  CHECK(tg_cpu_default_threads() == 3);
  unsetenv("TG_NUM_THREADS");
  CHECK(tg_cpu_default_threads() == 5);
  setenv("OMP_NUM_THREADS", "4,2", 1); /* nested levels: the outer one */
  CHECK(tg_cpu_default_threads() == 4);
  setenv("OMP_NUM_THREADS", "many", 1);
  const int cpus = tg_cpu_default_threads();
  unsetenv("OMP_NUM_THREADS");
  CHECK(cpus >= 1 && cpus == tg_cpu_default_threads());
}

/* ---- fork ---- (not under ThreadSanitizer: it cannot start threads after a fork) */
#ifndef TG_POOL_STANDALONE
POOL_TEST(a_forked_child_gets_its_own_workers) {
  tg_set_num_threads(2);
  check_job(&shared_counts, 64);
  fflush(NULL);
  const pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    /* No worker came along; the pool starts new ones and every chunk runs once. */
    int bad = tg__cpu_pool_workers() != 0;
    for (int rep = 0; rep < 50; rep++) {
      memset(&shared_counts, 0, sizeof shared_counts);
      tg_cpu_parallel_for(64, count_chunk, &shared_counts);
      for (int i = 0; i < 64; i++) bad |= atomic_load(&shared_counts.runs[i]) != 1;
    }
    bad |= tg__cpu_pool_workers() != 1;
    _exit(bad);
  }
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child's jobs failed");
  check_job(&shared_counts, 64);
  tg_set_num_threads(0);
}
#endif

/* ---- loops: the same values on 1 and 2 threads ---- */
static bool bitwise_equal(tg_tensor *a, tg_tensor *b) {
  const int64_t n = tg_numel(a);
  if (n != tg_numel(b)) return false;
  return memcmp(tg_data_ptr(a), tg_data_ptr(b), (size_t)n * sizeof(float)) == 0;
}

/* Elementwise, random and reductions over a dim (one thread per output element: no split
 * sum) give bitwise the same values on 1 and 2 threads. */
static void compute(int threads, tg_tensor **out) {
  tg_set_num_threads(threads);
  tg_manual_seed(11);
  tg_tensor *x = tg_randn(TG_SHAPE(1024, 300), TG_OPTS_DEFAULT, NULL);
  tg_tensor *u = tg_rand(TG_SHAPE(1024, 300), TG_OPTS_DEFAULT, NULL);
  out[0] = x;
  out[1] = u;
  out[2] = tg_mul(tg_tanh(x), tg_exp(u));
  out[3] = tg_sum_dim(x, 0, false);
  out[4] = tg_sum_dim(x, 1, false);
  out[5] = tg_relu(tg_add(x, u));
}

POOL_TEST(loops_match_on_one_and_two_threads) {
  tg_scope s = tg_scope_begin();
  tg_tensor *one[6], *two[6];
  compute(1, one);
  compute(2, two);
  tg_set_num_threads(0);
  for (int i = 0; i < 6; i++) {
    CHECK(one[i] && two[i], "result %d: %s", i, tg_last_error_message());
    CHECK(bitwise_equal(one[i], two[i]), "result %d differs between 1 and 2 threads", i);
  }
  tg_scope_end(s);
}

#ifdef TG_POOL_STANDALONE
static void run(const char *name, void (*test)(void)) {
  test();
  printf("thread_pool_standalone: %s passed\n", name);
}

int main(void) {
  run("every_chunk_runs_once", pool_test_every_chunk_runs_once);
  run("ranges_cover_every_element_once_aligned", pool_test_ranges_cover_every_element_once_aligned);
  run("caller_finishes_without_held_workers", pool_test_caller_finishes_without_held_workers);
  run("slow_chunks_are_waited_for", pool_test_slow_chunks_are_waited_for);
  run("nested_jobs_run_serially_on_their_thread",
      pool_test_nested_jobs_run_serially_on_their_thread);
  run("asleep_workers_are_woken_only_for_larger_work",
      pool_test_asleep_workers_are_woken_only_for_larger_work);
  run("two_user_threads_share_the_pool", pool_test_two_user_threads_share_the_pool);
  run("workers_follow_the_thread_count", pool_test_workers_follow_the_thread_count);
  run("default_count_from_the_environment", pool_test_default_count_from_the_environment);
  run("loops_match_on_one_and_two_threads", pool_test_loops_match_on_one_and_two_threads);
  return 0;
}
#endif
