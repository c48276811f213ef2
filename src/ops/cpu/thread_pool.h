/* tg's CPU thread pool (thread_pool.c): the threads of tg's own loops (pointwise, copies,
 * reductions, random, index, the fused passes). BLIS keeps its own OpenMP threads for GEMMs.
 *
 * A job is n chunks; the calling thread takes chunks too, and the join waits only for chunks
 * other threads already started: a worker the scheduler has not run yet never delays the
 * caller, who then takes the rest itself. On 2 cores beside a busy process an OpenMP team
 * waited up to a scheduler time slice at every join instead. */
#ifndef TG_CPU_THREAD_POOL_H
#define TG_CPU_THREAD_POOL_H

#include <stdbool.h>
#include <stdint.h>

/* Runs chunk `chunk` (0 <= chunk < n_chunks) of a job; ctx is the caller's. */
typedef void (*tg_cpu_chunk_fn)(int64_t chunk, void *ctx);
/* Runs the elements [begin, end) of a job over a range. */
typedef void (*tg_cpu_range_fn)(int64_t begin, int64_t end, void *ctx);

/* Runs fn once for every chunk in [0, n_chunks), in any order, on the caller and the
 * pool's workers, and returns when all have run. Serially on the caller: from inside a
 * chunk (nested), while another thread's job holds the pool, with one thread. */
void tg_cpu_parallel_for(int64_t n_chunks, tg_cpu_chunk_fn fn, void *ctx);

/* Chunks per thread of a split: a worker that starts late leaves less to the others. */
#define TG_CPU_CHUNKS_PER_THREAD 4
/* How many chunks to split `units` independent units of work into (1..units). */
int64_t tg_cpu_chunk_count(int64_t units);
/* Runs fn over [0, n) split into ranges of a multiple of `align` elements each (16 for a
 * contiguous F32 output: threads then never share its cache lines), in parallel when
 * `parallel` (tg_cpu_should_parallelize), else as one range on the caller. */
void tg_cpu_parallel_ranges(int64_t n, int64_t align, bool parallel, tg_cpu_range_fn fn, void *ctx);

/* The pool's thread count, the caller included (tg_set_num_threads): process-wide. */
int tg_cpu_pool_threads(void);
/* n >= 1; workers start or stop at the next job. */
void tg_cpu_pool_set_threads(int n);
/* True on a pool worker and on a caller while it runs chunks: a loop there runs serially. */
bool tg_cpu_pool_busy_here(void);
/* The default count: TG_NUM_THREADS, else OMP_NUM_THREADS (its first number), else the CPUs
 * this process may run on (sched_getaffinity). cpu_threads.c. */
int tg_cpu_default_threads(void);

/* Whether every worker sleeps now (idle past its spin): a job would start them late. */
bool tg_cpu_pool_asleep(void);

/* ---- tests ---- */
/* While held, workers claim no chunk (as if the scheduler did not run them). */
void tg__cpu_pool_hold_workers(bool hold);
/* Workers running now. */
int tg__cpu_pool_workers(void);

#endif
