/* BLIS's kernel sets: which one tg picks for a CPU, which ones a CPU can execute. Internal;
 * tg_cpu_blis_ready (cpu_internal.h) is what the CPU backend calls. */
#ifndef TG_BLIS_KERNELS_H
#define TG_BLIS_KERNELS_H

#include <stdbool.h>

#include "ops/cpu/cpu_features.h"

/* The set tg names itself for a CPU BLIS 0.9 misjudges, or NULL: BLIS's own choice. */
const char *tg__blis_default_kernels(const tg_cpu_features *f);
/* Whether f executes every instruction the named set's kernels use (false: unknown name). */
bool tg__blis_can_run(const tg_cpu_features *f, const char *name);

/* The set tg runs large GEMMs with on f when BLIS runs in_use for the rest, or NULL. */
const char *tg__blis_large_kernels(const tg_cpu_features *f, const char *in_use);
/* Tests: run GEMMs of at least TG_BLIS_LARGE_MIN_MACS on the named set (NULL: one set for
 * all), whatever tg would choose. Effective only before BLIS starts; ignored when
 * BLIS_ARCH_TYPE is set, the CPU cannot run the set, or this build cannot reach it. */
void tg__blis_prefer_large_kernels(const char *name);

/* The BLIS context (a cntx_t *) of the named set, or NULL where this build cannot reach it
 * (BLIS not linked statically) or the name is unknown. The caller checks that the CPU runs
 * it (tg__blis_can_run). */
void *tg__blis_context_named(const char *name);

#endif
