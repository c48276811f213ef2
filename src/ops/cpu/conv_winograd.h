/* Winograd's F(2x2, 3x3) for the CPU's F32 conv2d passes (conv_winograd.c), and the choice per
 * shape between it and the direct convolution (conv_winograd_choice.c). Internal. */
#ifndef TG_CONV_WINOGRAD_H
#define TG_CONV_WINOGRAD_H

#include <stdbool.h>
#include <stdint.h>

#include "tg/tensor.h"

/* Whether the pass can run on it: F32, 3x3 windows, stride 1, dilation 1, one group, padding
 * of at most 2 before the image. t: x, w, y as the conv2d kernels take them; g their 13 ints. */
bool tg__cpu_conv_winograd_applies(tg_tensor *const *t, const int64_t *g);
/* Runs pass (0 forward: writes y; 1 backward_data: x; 2 backward_weights: w) after
 * tg__cpu_conv_winograd_applies and the kernels' checks (sizes, contiguity). TG_ERR_UNSUPPORTED,
 * nothing written and no error recorded, where an operand it reads holds an infinity or NaN
 * (the transforms would turn inf into NaN): the caller runs the direct convolution. */
tg_status tg__cpu_conv_winograd(int pass, tg_tensor *const *t, const int64_t *g);

/* The direct convolution the choice weighs it against: TG_OK, an error, or TG_ERR_UNSUPPORTED
 * (declined, nothing recorded). */
typedef tg_status (*tg_conv_direct_fn)(int pass, tg_tensor *const *t, const int64_t *g);
/* Runs the pass on whichever of Winograd and direct measured faster on this shape (sizes,
 * geometry, pass) and thread count: a shape's first call runs both, timed, and the faster
 * (Winograd only when 3% faster) runs its later calls; direct alone in deterministic mode,
 * with TG_CONV_WINOGRAD=off, where Winograd does not apply, and for a call it declines.
 * TG_CONV_WINOGRAD=on: Winograd wherever it applies (tests, benchmarks). */
tg_status tg__cpu_conv_winograd_or(int pass, tg_tensor *const *t, const int64_t *g,
                                   tg_conv_direct_fn direct);
/* Whether the choice may run Winograd (not TG_CONV_WINOGRAD=off, not deterministic mode). */
bool tg__cpu_conv_winograd_enabled(void);
/* Tests: how many calls Winograd has completed in this process, and forgets every shape's
 * choice (reading TG_CONV_WINOGRAD again). */
int64_t tg__cpu_conv_winograd_runs(void);
void tg__cpu_conv_winograd_reset(void);

#endif
