/* tg — the CPU device's knobs (src/ops/cpu/): threads, deterministic mode, the GEMM engines.
 * Included by tg/tg.h. */
#ifndef TG_CPU_H
#define TG_CPU_H

#include "types.h"

TG_API_BEGIN
#ifdef __cplusplus
extern "C" {
#endif

/* ---- CPU threads (tg's thread pool for its loops, BLIS's OpenMP threads for GEMMs) ----
 * One count for both, process-wide (every thread's ops use it). n <= 0 restores the default:
 * TG_NUM_THREADS, else OMP_NUM_THREADS, else the CPUs this process may run on
 * (sched_getaffinity). */
void tg_set_num_threads(int n);
int tg_get_num_threads(void);
/* Deterministic mode (off by default): CPU results then depend only on the inputs and the
 * thread count, never on the machine's load. By default tg runs one-threaded for a while
 * when other processes keep the cores busy (faster then, src/ops/cpu/cpu_contention.c), and
 * one thread rounds sums and GEMMs differently from two: a run repeated or resumed from a
 * checkpoint on a busy machine may then differ in the last bits. Process-wide. */
void tg_set_deterministic(bool deterministic);
bool tg_is_deterministic(void);

/* ---- CPU memory: the cache of freed storage ----
 * Freed CPU storage of more than 4 KiB (up to 2 GiB) waits in tg's cache for the next
 * allocation of its size class (sizes rounded up by at most 12.5%), so that a training
 * loop's temporaries are reused each step instead of going back to the system and being
 * faulted in again. The cache holds at most the larger of 256 MiB and the peak of the bytes
 * in use (so never more than the program itself once used); tg_host_empty_cache gives what it
 * holds back to the system, as tg_cuda_empty_cache (torch.cuda.empty_cache) does on CUDA.
 * Process-wide. (Named tg_host_*: tg_cpu_* names are the CPU backend's internals.) */
typedef struct tg_host_memory_stats {
  size_t bytes_in_use;      /* blocks of the cache's sizes held by live storages (and scratch) */
  size_t peak_bytes_in_use; /* the most at one time so far */
  size_t bytes_cached;      /* freed, kept for reuse */
  size_t cache_limit;       /* what bytes_cached may reach now */
} tg_host_memory_stats;
/* TG_ERR_ARGUMENT when out is NULL. */
tg_status tg_host_memory_stats_get(tg_host_memory_stats *out);
void tg_host_empty_cache(void);

/* ---- BLIS, the CPU's GEMM engine ----
 * The kernel set BLIS runs ("zen3", "haswell", "skx", "generic", ...), chosen once, before
 * BLIS starts: BLIS_ARCH_TYPE if set (a number BLIS 0.9 reads as meant, for a set this CPU
 * can execute: otherwise every GEMM fails with TG_ERR_ARGUMENT saying why), else tg's choice
 * where it measured BLIS 0.9's own to be slower (AMD Zen 4 and Zen 5: haswell), else BLIS's.
 * NULL, with the error pending, while BLIS_ARCH_TYPE is invalid. */
const char *tg_blis_kernels(void);
/* Who chose it: "BLIS_ARCH_TYPE", "tg" or "BLIS"; NULL as above. */
const char *tg_blis_kernels_source(void);
/* The set large GEMMs (2^22 multiply-adds and more) run instead, where tg measured one
 * faster there ("skx" on Intel CPUs with AVX-512), or NULL: tg_blis_kernels() runs all
 * GEMMs (always so while BLIS_ARCH_TYPE is set, and when BLIS is not linked statically). */
const char *tg_blis_large_kernels(void);
/* "libxsmm" when tg is built with it (TG_XSMM) and BLIS_ARCH_TYPE does not pin BLIS for every
 * GEMM: its JIT kernels are then one of the engines (one thread, row-major out and b). NULL
 * otherwise. */
const char *tg_small_gemm_engine(void);

/* ---- Convolutions ----
 * What runs F32 conv2d, conv_transpose2d and their gradients on the CPU: "oneDNN 2.6.3" where
 * oneDNN's libdnnl.so.2 is found at run time (TG_ONEDNN_LIBRARY: a path to load instead, or
 * "off") and tg was built with its headers (Debian's libdnnl-dev), else "im2col + GEMM",
 * tg's own (which also runs F64, and any call oneDNN declines: docs/cnn.md). With oneDNN,
 * "oneDNN 2.6.3, Winograd F(2x2,3x3) where faster": 3x3 windows of stride 1 may run tg's
 * Winograd convolution instead, per shape and pass where its first call measured it faster
 * (not in deterministic mode, nor with TG_CONV_WINOGRAD=off; =on: wherever it applies). */
const char *tg_conv_engine(void);

/* ---- The GEMM engine per shape class ----
 * Every CPU GEMM runs on one of the engines this process has: BLIS's kernel set, other BLIS
 * sets the CPU executes ("blis-haswell", "blis-zen3", "blis-skx"; BLIS linked statically),
 * each set again as "<set>-packed" (BLIS's small/unpacked path off: every product packed),
 * "libxsmm" (built with it), "mkl" (MKL's libmkl_rt found at run time: TG_MKL_LIBRARY,
 * the loader's path or $VIRTUAL_ENV/lib) and "openblas" (TG_OPENBLAS_LIBRARY, Debian's
 * libopenblas0-serial or libopenblas.so.0; neither required). Which one is decided per shape
 * class (size by multiply-adds, which of m, n, k is short, the layouts of a and b, one thread
 * or more), once per process, on the first GEMM:
 *   BLIS_ARCH_TYPE set: that set for everything;
 *   TG_GEMM_ENGINE=builtin: tg's fixed rules (libxsmm for one-thread products below 2^28
 *     multiply-adds, tg_blis_large_kernels() from 2^22, else BLIS's set);
 *   TG_GEMM_ENGINE=<engine>: that engine for every product it takes, the rules for the rest
 *     (a name this process lacks: every GEMM fails with TG_ERR_ARGUMENT listing the engines);
 *   otherwise: the engine measured fastest per class on this CPU, read from the cache
 *     (TG_GEMM_CACHE, else $XDG_CACHE_HOME/tg or ~/.cache/tg, one file per CPU model, thread
 *     count and library versions; "off": none), else measured now (seconds) and cached
 *     (written atomically). A cache that is corrupt or another machine's is ignored with a
 *     message on stderr. Times are taken in F32; F64 products follow the same choice.
 *     Products whose per-thread block is under 2^30 multiply-adds are then also tuned per
 *     exact shape (sizes, layouts, dtype, thread count): a shape's first call times every
 *     engine that takes it as it will run (one thread, or a team split on tg's pool; into
 *     scratch memory) and the fastest runs it from then on, that call included (a class
 *     is measured at two of its shapes and mispredicts others). Not in deterministic mode,
 *     nor with TG_GEMM_SHAPES=off. */
/* Measures every engine on every class now, uses the result and writes the cache (a failed
 * write is reported on stderr). TG_ERR_MEMORY when the operands cannot be allocated. */
tg_status tg_gemm_calibrate(void);
/* How the engines are chosen: "calibrated" (measured in this process), "cache",
 * "TG_GEMM_ENGINE", "BLIS_ARCH_TYPE", or "builtin" (a calibration failed). Makes the choice
 * if no GEMM has yet. NULL, with the error pending, while TG_GEMM_ENGINE or BLIS_ARCH_TYPE is
 * invalid. */
const char *tg_gemm_engine_source(void);
/* The engine a product out[m, n] = a[m, k] @ b[k, n] runs on: a_transposed / b_transposed
 * for a column-major operand, threads the team it would get (products under 2^22
 * multiply-adds always run one thread); for an F32 shape tuned and settled, its engine. NULL with
 * the error pending for negative sizes or threads < 1. */
const char *tg_gemm_engine_for(int64_t m, int64_t n, int64_t k, bool a_transposed,
                               bool b_transposed, int threads);
/* Writes a description of the choice into buf (snprintf's rules: the length it needed is
 * returned, buf may be NULL with size 0): the engines, who chose, the classes per engine and
 * how many exact shapes have settled; with per_class, a line per class with each engine's measured
 * time. */
size_t tg_gemm_engine_report(char *buf, size_t size, bool per_class);

#ifdef __cplusplus
}
#endif
TG_API_END
#endif
