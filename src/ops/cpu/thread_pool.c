/* tg's CPU thread pool (thread_pool.h): pthreads started at the first parallel job, one fewer
 * than tg_set_num_threads' count (the caller is the other one).
 *
 * A job is published in `claim`, one 64-bit word: generation << 32 | next chunk. A thread
 * takes a chunk by a compare-exchange of next + 1, made only while the word still holds the
 * generation of the job description it read (`desc`: generation << 32 | chunk count) and
 * next < count. The caller publishes a job only after all chunks of the previous one ran, so
 * a successful exchange proves the fn and ctx read just before it are that job's. Each run
 * chunk adds one to `done`; the caller, after taking what is left, waits until done equals
 * the count: only for chunks other threads already took (polling about two chunks' time,
 * then on a futex: a worker preempted inside a chunk then gets the caller's core).
 *
 * Idle workers spin TG_POOL_SPIN_NS on the claim word (back-to-back loops of a step start
 * without a wake-up), then sleep on a futex; the caller wakes them only when some sleep. */
#define _GNU_SOURCE /* syscall, sched_yield */
#include "ops/cpu/thread_pool.h"

#include "ops/cpu/cpu_internal.h"

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

/* How long an idle worker polls for the next job before it sleeps: the loops of a step come
 * this close together (GEMMs and small ops between them), and a worker woken from a futex
 * starts 5-50 us late. parallel_thresholds (50 us between loops), 2-core Zen 3 guest: with
 * 30 us a 4096-element copy took 17 us on 2 threads (0.6 on 1), with 100 us 2.4 us. */
#define TG_POOL_SPIN_NS 100000
#define TG_POOL_MAX_WORKERS 255
/* A join that waited this long, and 8 chunks' time, waited for a preempted worker: a sign of
 * contended cores (cpu_contention.c). A scheduler time slice is 0.75-3 ms. */
#define TG_POOL_LATE_JOIN_NS 1000000

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

/* ---- the job ---- */
static _Atomic uint64_t claim; /* generation << 32 | next chunk */
static _Atomic uint64_t desc;  /* generation << 32 | chunk count */
static _Atomic(tg_cpu_chunk_fn) job_fn;
static _Atomic(void *) job_ctx;
static atomic_uint job_done;      /* chunks of the current job that ran; a futex word */
static atomic_bool caller_asleep; /* the caller sleeps on job_done: wake it */

/* ---- the workers ---- */
static pthread_mutex_t busy = PTHREAD_MUTEX_INITIALIZER; /* held by the thread running a job */
static pthread_t workers[TG_POOL_MAX_WORKERS];           /* under busy */
static int started;                                      /* under busy */
static atomic_int active;          /* workers [0, active) serve; the others exit */
static atomic_int threads;         /* tg_set_num_threads' count; 0: the default, not read yet */
static atomic_bool held;           /* tests: workers claim nothing */
static _Thread_local bool in_pool; /* a worker, or a caller running its job */

/* ---- sleeping ---- */
static atomic_uint wake_seq; /* the futex word: bumped by each wake-up */
static atomic_int sleepers;
#ifndef __linux__
static pthread_mutex_t sleep_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sleep_cond = PTHREAD_COND_INITIALIZER;
#endif

static void sleep_while(unsigned seq) {
#ifdef __linux__
  syscall(SYS_futex, &wake_seq, FUTEX_WAIT_PRIVATE, seq, NULL, NULL, 0);
#else
  pthread_mutex_lock(&sleep_lock);
  while (atomic_load(&wake_seq) == seq) pthread_cond_wait(&sleep_cond, &sleep_lock);
  pthread_mutex_unlock(&sleep_lock);
#endif
}

static void wake_all(void) {
  atomic_fetch_add(&wake_seq, 1);
#ifdef __linux__
  syscall(SYS_futex, &wake_seq, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
#else
  pthread_mutex_lock(&sleep_lock);
  pthread_cond_broadcast(&sleep_cond);
  pthread_mutex_unlock(&sleep_lock);
#endif
}

static void wake_caller(void) {
#ifdef __linux__
  syscall(SYS_futex, &job_done, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
#else
  pthread_mutex_lock(&sleep_lock);
  pthread_cond_broadcast(&sleep_cond);
  pthread_mutex_unlock(&sleep_lock);
#endif
}

static void caller_sleep_while(unsigned done) {
#ifdef __linux__
  syscall(SYS_futex, &job_done, FUTEX_WAIT_PRIVATE, done, NULL, NULL, 0);
#else
  pthread_mutex_lock(&sleep_lock);
  while (atomic_load(&job_done) == done) pthread_cond_wait(&sleep_cond, &sleep_lock);
  pthread_mutex_unlock(&sleep_lock);
#endif
}

/* Whether claim word c has a chunk left (desc of the same generation). */
static bool has_chunk(uint64_t c) {
  const uint64_t d = atomic_load_explicit(&desc, memory_order_relaxed);
  return d >> 32 == c >> 32 && (uint32_t)c < (uint32_t)d;
}

/* Takes and runs chunks of the current job until none is left; how many it ran. A worker
 * stops while the workers are held (tests). */
static unsigned run_chunks(bool worker) {
  unsigned ran = 0;
  uint64_t c = atomic_load_explicit(&claim, memory_order_acquire);
  while (has_chunk(c) && !(worker && atomic_load_explicit(&held, memory_order_relaxed))) {
    const tg_cpu_chunk_fn fn = atomic_load_explicit(&job_fn, memory_order_relaxed);
    void *const ctx = atomic_load_explicit(&job_ctx, memory_order_relaxed);
    /* Release: whoever takes a later chunk, and so the caller, sees this thread's reads of
     * the job done before the next job is written. */
    if (!atomic_compare_exchange_weak_explicit(&claim, &c, c + 1, memory_order_acq_rel,
                                               memory_order_acquire))
      continue;
    fn((int64_t)(uint32_t)c, ctx);
    /* Sequentially consistent, against the caller's caller_asleep (finish_job). */
    atomic_fetch_add(&job_done, 1);
    if (atomic_load(&caller_asleep)) wake_caller();
    ran++;
    c = atomic_load_explicit(&claim, memory_order_acquire);
  }
  return ran;
}

static bool worker_has_work(int index) {
  return index >= atomic_load_explicit(&active, memory_order_relaxed) ||
         (!atomic_load_explicit(&held, memory_order_relaxed) &&
          has_chunk(atomic_load_explicit(&claim, memory_order_acquire)));
}

static void *worker_main(void *arg) {
  const int index = (int)(intptr_t)arg;
  in_pool = true;
  for (;;) {
    if (index >= atomic_load(&active)) return NULL;
    if (run_chunks(true)) continue;
    /* Idle: poll a while, yielding every microsecond or so: a woken worker often lands on
     * its caller's core, and BLIS's threads need the cores for the GEMMs in between. */
    const int64_t until = tg_cpu_now_ns() + TG_POOL_SPIN_NS;
    bool work = false;
    for (int spins = 1; !(work = worker_has_work(index)); spins++) {
      cpu_relax();
      if (spins % 16 == 0) {
        if (tg_cpu_now_ns() > until) break;
        sched_yield();
      }
    }
    if (work) continue;
    /* Sleep. Counted first, then the job re-checked: a caller that published after this
     * check sees the count and wakes (both sequentially consistent). */
    atomic_fetch_add(&sleepers, 1);
    const unsigned seq = atomic_load(&wake_seq);
    if (!worker_has_work(index)) sleep_while(seq);
    atomic_fetch_sub(&sleepers, 1);
  }
}

bool tg_cpu_pool_asleep(void) {
  const int asleep = atomic_load_explicit(&sleepers, memory_order_relaxed);
  return asleep > 0 && asleep >= atomic_load_explicit(&active, memory_order_relaxed);
}

/* ---- the count ---- */
int tg_cpu_pool_threads(void) {
  int n = atomic_load_explicit(&threads, memory_order_relaxed);
  if (n == 0) {
    int expected = 0;
    atomic_compare_exchange_strong(&threads, &expected, tg_cpu_default_threads());
    n = atomic_load(&threads);
  }
  return n;
}

void tg_cpu_pool_set_threads(int n) { atomic_store(&threads, n < 1 ? 1 : n); }

bool tg_cpu_pool_busy_here(void) { return in_pool; }

/* ---- starting and stopping workers (under busy) ---- */
static void after_fork_in_child(void) {
  /* The child has only the forking thread: no worker, no job in flight. */
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  busy = fresh;
  started = 0;
  atomic_store(&active, 0);
  atomic_store(&sleepers, 0);
  atomic_store(&desc, atomic_load(&claim) & ~(uint64_t)0xffffffffu);
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static void register_atfork(void) { pthread_atfork(NULL, NULL, after_fork_in_child); }

static void stop_workers_from(int first) {
  if (started <= first) return;
  atomic_store(&active, first);
  wake_all();
  for (int i = first; i < started; i++) pthread_join(workers[i], NULL);
  started = first;
}

/* Makes the started workers match the count; fewer where pthread_create fails. */
static void match_workers(void) {
  int want = tg_cpu_pool_threads() - 1;
  if (want > TG_POOL_MAX_WORKERS) want = TG_POOL_MAX_WORKERS;
  if (want < started) stop_workers_from(want);
  if (want <= started) return;
  pthread_once(&atfork_once, register_atfork);
  atomic_store(&active, want);
  /* Workers take no signal: those go to the program's own threads. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  while (started < want &&
         pthread_create(&workers[started], NULL, worker_main, (void *)(intptr_t)started) == 0)
    started++;
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  atomic_store(&active, started);
}

/* At exit: workers are joined, not left running (leak checkers, valgrind). A job in flight on
 * another thread keeps its workers. */
__attribute__((destructor)) static void pool_shutdown(void) {
  if (pthread_mutex_trylock(&busy) != 0) return;
  stop_workers_from(0);
  pthread_mutex_unlock(&busy);
}

/* ---- jobs ---- */
/* Every chunk is taken: waits for those that other threads are running. Polls for about two
 * chunks' time (chunk_ns: the caller's own), then sleeps: a worker still not done was likely
 * preempted by another process, and a core left idle lets the scheduler move it there. */
static void finish_job(unsigned n_chunks, int64_t chunk_ns) {
  const int64_t start = tg_cpu_now_ns();
  const int64_t until = start + (chunk_ns > 2500 ? 2 * chunk_ns : 5000);
  unsigned done;
  for (int spins = 1; (done = atomic_load_explicit(&job_done, memory_order_acquire)) < n_chunks;
       spins++) {
    cpu_relax();
    if (spins % 16 == 0 && tg_cpu_now_ns() > until) break;
  }
  while (done < n_chunks) {
    atomic_store(&caller_asleep, true);
    done = atomic_load(&job_done);
    if (done < n_chunks) caller_sleep_while(done);
    done = atomic_load_explicit(&job_done, memory_order_acquire);
  }
  const int64_t waited = tg_cpu_now_ns() - start;
  tg_cpu_note_loop_join(waited > TG_POOL_LATE_JOIN_NS && waited > 8 * chunk_ns);
}

static void run_serially(int64_t n_chunks, tg_cpu_chunk_fn fn, void *ctx) {
  for (int64_t i = 0; i < n_chunks; i++) fn(i, ctx);
}

void tg_cpu_parallel_for(int64_t n_chunks, tg_cpu_chunk_fn fn, void *ctx) {
  if (n_chunks <= 0) return;
  if (n_chunks == 1 || n_chunks > INT32_MAX || in_pool || tg_cpu_pool_threads() < 2 ||
      pthread_mutex_trylock(&busy) != 0) {
    run_serially(n_chunks, fn, ctx);
    return;
  }
  match_workers();
  if (started == 0) {
    pthread_mutex_unlock(&busy);
    run_serially(n_chunks, fn, ctx);
    return;
  }
  in_pool = true;
  const uint64_t gen = (atomic_load_explicit(&claim, memory_order_relaxed) >> 32) + 1;
  atomic_store_explicit(&job_done, 0, memory_order_relaxed);
  atomic_store_explicit(&caller_asleep, false, memory_order_relaxed);
  atomic_store_explicit(&job_fn, fn, memory_order_relaxed);
  atomic_store_explicit(&job_ctx, ctx, memory_order_relaxed);
  atomic_store_explicit(&desc, gen << 32 | (uint64_t)n_chunks, memory_order_relaxed);
  atomic_store(&claim, gen << 32); /* sequentially consistent: against sleepers below */
  if (atomic_load(&sleepers) > 0) wake_all();
  const int64_t t0 = tg_cpu_now_ns();
  const unsigned own = run_chunks(false);
  finish_job((unsigned)n_chunks, own ? (tg_cpu_now_ns() - t0) / own : 0);
  in_pool = false;
  pthread_mutex_unlock(&busy);
}

int64_t tg_cpu_chunk_count(int64_t units) {
  const int64_t most = (int64_t)tg_cpu_pool_threads() * TG_CPU_CHUNKS_PER_THREAD;
  return units < most ? (units < 1 ? 1 : units) : most;
}

typedef struct ranges_job {
  tg_cpu_range_fn fn;
  void *ctx;
  int64_t n, per_chunk;
} ranges_job;

static void run_range_chunk(int64_t chunk, void *arg) {
  const ranges_job *j = arg;
  const int64_t begin = chunk * j->per_chunk;
  const int64_t end = begin + j->per_chunk < j->n ? begin + j->per_chunk : j->n;
  if (begin < end) j->fn(begin, end, j->ctx);
}

void tg_cpu_parallel_ranges(int64_t n, int64_t align, bool parallel, tg_cpu_range_fn fn,
                            void *ctx) {
  if (n <= 0) return;
  if (align < 1) align = 1;
  const int64_t units = (n + align - 1) / align;
  const int64_t chunks = parallel ? tg_cpu_chunk_count(units) : 1;
  if (chunks <= 1) {
    fn(0, n, ctx);
    return;
  }
  ranges_job j = {fn, ctx, n, (units + chunks - 1) / chunks * align};
  tg_cpu_parallel_for((n + j.per_chunk - 1) / j.per_chunk, run_range_chunk, &j);
}

/* ---- tests ---- */
void tg__cpu_pool_hold_workers(bool hold) {
  atomic_store(&held, hold);
  if (!hold) wake_all();
}

int tg__cpu_pool_workers(void) {
  pthread_mutex_lock(&busy);
  const int n = started;
  pthread_mutex_unlock(&busy);
  return n;
}
