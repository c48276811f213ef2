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
/* "libxsmm" when tg is built with it (TG_XSMM): one-thread products of up to 2^28
 * multiply-adds whose layouts it takes run its JIT kernels, faster than BLIS's there;
 * unless BLIS_ARCH_TYPE pins BLIS for every GEMM. NULL otherwise. */
const char *tg_small_gemm_engine(void);

#ifdef __cplusplus
}
#endif
TG_API_END
#endif
