/* Integer parameters of an op call (tg_apply_ex's ints), checked by the op's forward: tg_apply
 * and tg_apply_ex are public, so a forward cannot rely on a front end having wrapped its dims,
 * clamped its ranges or resolved its sizes. Each check returns false with an error
 * "<op>: ..." that names the parameter; true when it is fine. */
#ifndef TG_OP_PARAMS_H
#define TG_OP_PARAMS_H

#include <stdbool.h>
#include <stdint.h>

#include "tg/autograd.h"

/* ints[k] is a dim in [0, ndim): TG_ERR_INDEX otherwise. Sets *dim. */
bool tg__param_dim(const char *op, const tg_ctx *ctx, int k, int ndim, int *dim);

/* ints[first..] are sizes: at most TG_MAX_DIMS of them (TG_ERR_SHAPE), none negative, their
 * element count within int64. Sets *ndim and sizes[0..*ndim). */
bool tg__param_sizes(const char *op, const tg_ctx *ctx, int first, int *ndim, int64_t *sizes);

/* Every element of the int64 tensor t (an op's input) in [0, n), read on the host (one copy
 * of t): TG_ERR_INDEX "<op>: <arg>[1, 0] = -1 is outside <range> [0, 4)" naming the first one
 * that is not (no position for a 0-dim t); TG_ERR_MEMORY if the host copy cannot be
 * allocated. t's dtype is the caller's to check. */
bool tg__check_indices(const char *op, const char *arg, const tg_tensor *t, int64_t n,
                       const char *range);

#endif
