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

#endif
