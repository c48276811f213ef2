/* Internals of the CPU backend: the strided-loop driver shared by every primitive, the
 * per-primitive entry points gathered into tg_cpu_backend (backend_cpu.c), and the
 * row functions the loops are written with. */
#ifndef TG_CPU_INTERNAL_H
#define TG_CPU_INTERNAL_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ops/backend.h"
#include "ops/coalesce.h"
#include "tensor/tensor_impl.h"
#include "tg/cpu.h"

/* Element counts from which loops run on the thread pool (thread_pool.h), per kind of pass,
 * measured with bench/parallel_thresholds.c on the 2-core AMD EPYC (Zen 3) KVM guest this
 * was written on (F32, 50 us of one-thread work before each pass, as in a training step;
 * the pool's workers poll 100 us, so they are still awake). 1-thread time over 2-thread
 * time, quiet machine (others' jobs ran now and then: single points are noisy):
 *   memory-bound (add_, copy): 0.68-0.96 up to 16384, 0.79-1.36 at 32768-65536, 1.09-1.33
 *     at 131072, 1.18-1.26 at 262144, 1.9 at 4M;
 *   exp (libm-like per element): 1.09 at 4096, 1.42 at 8192, 1.54 at 16384, 1.8-2.0 above;
 *   sum over dim 0 (strided), one range of outputs per thread (cpu_reduce.c): 0.78-1.22
 *     up to 16384, 1.15-1.27 at 32768, 1.17-1.53 from 65536 to 2M, 0.97-0.98 at 4M.
 * Beside a busy core (`--busy`) the pool's late joins soon run loops on one thread
 * (cpu_contention.c): 0.65-0.95 below 16384, 0.97-1.1 above (exp 1.19 at 16384). OpenMP's
 * team waited up to a time slice for a descheduled member at every join there (7.9 ms per
 * pass of any size while other processes held both cores). So the memory-bound threshold
 * stays where the busy case stops losing; libm-heavy passes pay from 16384. The fused
 * LLTM's passes have their own (cpu_lltm.c), as do GEMMs (cpu_gemm.c). */
#define TG_CPU_PARALLEL_MIN 131072
/* The thresholds above and TG_CPU_GEMM_PARALLEL_MIN_MACS were measured with the pool's
 * workers awake (back-to-back loops). A worker that slept (idle past its spin) starts a job
 * 5-50 us late, so a pass or GEMM below this many times its threshold runs on the caller alone
 * while every worker sleeps, except in deterministic mode (a split may round differently).
 * bench/small_models.c's CNN (many passes just above their thresholds, ~0.3 ms apart), Zen 3,
 * 2 cores, four alternating runs each: beside a spinning process 1t/2t 0.95-0.97 before,
 * 1.00-1.01 with this rule; quiet 0.97-0.98 before, 0.97-1.09 after; the LLTM at
 * 64x1024x128 (its GEMMs fork either way) kept its 1.81-1.92x two-thread speed-up. */
#define TG_CPU_ASLEEP_FACTOR 4
#define TG_CPU_PARALLEL_MIN_REDUCE 65536
#define TG_CPU_PARALLEL_MIN_TRANSCENDENTAL 16384

/* ---- the strided-loop driver ----
 * An iteration over the elements of up to TG_CPU_MAX_OPERANDS operands of the same
 * logical sizes (operand 0 is the one written). Its dims are coalesced as the CUDA kernels'
 * are (ops/coalesce.h), ordered by operand 0's strides first, so a contiguous or expanded
 * (stride 0) operand set becomes one long row. Rows are handed to a row function: the
 * unit of work that the compiler vectorizes. */
#define TG_CPU_MAX_OPERANDS TG_COALESCE_MAX_OPERANDS

typedef struct tg_cpu_operand {
  char *data;             /* element 0 (offset applied) */
  size_t elsize;          /* bytes per element */
  const int64_t *strides; /* in elements, one per dim of the iteration sizes */
} tg_cpu_operand;

typedef struct tg_cpu_iter {
  int nops;
  int64_t numel;
  tg_coalesced dims; /* dims.ndim >= 1; dim ndim-1 is the innermost */
  char *data[TG_CPU_MAX_OPERANDS];
  size_t elsize[TG_CPU_MAX_OPERANDS];
} tg_cpu_iter;

/* Processes n elements: operand k's first element is at ptrs[k] and the next ones are
 * strides[k] elements apart (0 for a broadcast operand). ctx is the caller's. */
typedef void (*tg_cpu_row_fn)(int64_t n, char *const *ptrs, const int64_t *strides,
                              const void *ctx);

/* The operand view of a tensor (its own strides). */
tg_cpu_operand tg_cpu_operand_of(const tg_tensor *t);
/* Builds the iteration over sizes (ndim may be 0: one element). */
void tg_cpu_iter_init(tg_cpu_iter *it, int ndim, const int64_t *sizes, int nops,
                      const tg_cpu_operand *ops);
/* Runs fn over every row, split into contiguous ranges of elements (multiples of 16) run
 * on the thread pool (thread_pool.h) when parallel is true. */
void tg_cpu_iter_run(const tg_cpu_iter *it, tg_cpu_row_fn fn, const void *ctx, bool parallel);
/* The same with ranges of a multiple of `align` elements. */
void tg_cpu_iter_run_aligned(const tg_cpu_iter *it, tg_cpu_row_fn fn, const void *ctx,
                             bool parallel, int64_t align);
/* True when a loop over numel elements should fork a team (and we are not in one). */
bool tg_cpu_should_parallelize(int64_t numel, int64_t min_numel);
/* Whether work of `size` (elements, multiply-adds) against its threshold `min` is too small to
 * wake the pool's sleeping workers for (TG_CPU_ASLEEP_FACTOR). */
bool tg_cpu_too_small_to_wake(int64_t size, int64_t min);

/* ---- contended cores (cpu_contention.c) ----
 * When other processes keep the cores busy, BLIS's thread teams wait for a descheduled
 * thread at every fork, and the pool's joins for a worker preempted inside a chunk; tg then
 * runs one-threaded for a while, judged from samples of its parallel GEMMs and from late
 * joins in a row. */
#define TG_CONTENDED_NS ((int64_t)100 * 1000 * 1000)
#define TG_CONTENDED_GEMM_MIN_MACS_PER_US 6000
#define TG_CONTENDED_WARMUP 2
#define TG_CONTENDED_SAMPLE 4
int64_t tg_cpu_now_ns(void);        /* CLOCK_MONOTONIC */
int64_t tg_cpu_thread_now_ns(void); /* CLOCK_THREAD_CPUTIME_ID: the calling thread's CPU time */
/* Whether tg is in a one-thread period after a sample of mostly slow parallel GEMMs. */
bool tg_cpu_contended(void);
/* Starts a one-thread period (doubling while samples stay late). */
void tg_cpu_note_contention(void);
/* After a GEMM that ran on more than one thread. */
void tg_cpu_note_parallel_gemm(int64_t macs, int64_t elapsed_ns);
/* After a thread-pool loop's join; late: it waited TG_POOL_LATE_JOIN_NS or more for a
 * worker (thread_pool.c). */
#define TG_CONTENDED_LATE_LOOPS 3
void tg_cpu_note_loop_join(bool late);
/* Tests: clears what was noticed. */
void tg__cpu_forget_contention(void);

/* Scalars handed to row functions. */
typedef struct tg_cpu_scalars {
  double a, b;
} tg_cpu_scalars;

/* ---- primitives (one file each area) ---- */
tg_status tg_cpu_fill(tg_tensor *out, double value);
tg_status tg_cpu_copy(tg_tensor *out, const tg_tensor *src);
tg_status tg_cpu_unary(int kind, double a, double b, tg_tensor *out, const tg_tensor *x);
tg_status tg_cpu_binary(int kind, double alpha, tg_tensor *out, const tg_tensor *a,
                        const tg_tensor *b);
tg_status tg_cpu_where(tg_tensor *out, const tg_tensor *cond, const tg_tensor *a,
                       const tg_tensor *b);
/* The I64 row of a unary / binary kind, or NULL for a kind that does not take int64
 * (cpu_pointwise_int.c). */
tg_cpu_row_fn tg_cpu_unary_row_i64(tg_unary_kind kind);
tg_cpu_row_fn tg_cpu_binary_row_i64(tg_binary_kind kind);
tg_status tg_cpu_reduce(int kind, tg_tensor *values, tg_tensor *indices, const tg_tensor *x,
                        int dim);
tg_status tg_cpu_gemm(tg_tensor *out, const tg_tensor *a, const tg_tensor *b, double alpha,
                      double beta);
/* c[m, n] = a[m, k] @ b[k, n] + beta c on F32 buffers by element strides (one of each pair
 * unit; c row-major), as tg_cpu_gemm runs a product (engine, threads): for kernels that keep
 * their own buffers. Each buffer must have the room behind it BLIS may read
 * (tg__cpu_tail_pad). */
tg_status tg_cpu_gemm_f32_raw(int64_t m, int64_t n, int64_t k, const float *a, int64_t a_rs,
                              int64_t a_cs, const float *b, int64_t b_rs, int64_t b_cs, float *c,
                              int64_t c_rs, double beta);
tg_status tg_cpu_gather_rows(tg_tensor *out, const tg_tensor *x, const tg_tensor *index);
tg_status tg_cpu_scatter_add_rows(tg_tensor *out, const tg_tensor *src, const tg_tensor *index);
tg_status tg_cpu_index_select_rows(tg_tensor *out, const tg_tensor *x, const tg_tensor *index);
tg_status tg_cpu_index_add_rows(tg_tensor *out, const tg_tensor *src, const tg_tensor *index);
tg_status tg_cpu_uniform(tg_tensor *out, uint64_t seed, uint64_t offset, double a, double b);
tg_status tg_cpu_normal(tg_tensor *out, uint64_t seed, uint64_t offset, double a, double b);

/* Chooses BLIS's kernel set once, before anything starts BLIS (src/ops/cpu/blis_kernels.c).
 * TG_ERR_ARGUMENT, naming op, while BLIS_ARCH_TYPE holds a value BLIS would misread, abort
 * on, or that this CPU cannot execute: then BLIS must not be called. */
tg_status tg_cpu_blis_ready(const char *op);

/* GEMMs of at least this many multiply-adds may run a second kernel set (blis_kernels.c).
 * Between the sizes measured (1M: the first set 2x faster; 28M: the second up to 1.7x). */
#define TG_BLIS_LARGE_MIN_MACS ((int64_t)1 << 22)
/* Whether the user pinned BLIS's kernel set (BLIS_ARCH_TYPE): then BLIS runs every GEMM. */
bool tg_cpu_blis_pinned(void);

/* Products past this many multiply-adds stay with BLIS under the built-in rules (libxsmm has no
 * cache blocking; gemm_engines.c). */
#define TG_XSMM_MAX_MACS ((int64_t)1 << 28)
/* Products below this many multiply-adds run on one thread: on 2 cores a BLIS thread team
 * costs more than it saves there, and far more when the other core is busy (a 16x384x160
 * GEMM measured 0.1 ms on one thread, 0.4 to 12 ms on two under load). */
#define TG_CPU_GEMM_PARALLEL_MIN_MACS ((int64_t)1 << 22)

/* Sets BLIS's thread count to tg's default once, unless the user chose one (through
 * tg_set_num_threads or BLIS's environment variables). Called before every GEMM, after
 * tg_cpu_blis_ready. */
void tg_cpu_blis_threads_init(void);

/* ---- small helpers ---- */
static inline char *tg_cpu_data(const tg_tensor *t) {
  return (char *)t->storage->data + (size_t)t->offset * tg_dtype_size(t->dtype);
}
static inline int64_t tg_cpu_numel(const tg_tensor *t) { return tg__numel(t->ndim, t->sizes); }

#endif
