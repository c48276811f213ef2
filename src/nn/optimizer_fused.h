/* Adam's and AdamW's fused step (optimizer_fused.c), for tg_optimizer_step. Internal. */
#ifndef TG_NN_OPTIMIZER_FUSED_H
#define TG_NN_OPTIMIZER_FUSED_H

#include "nn/optimizer_impl.h"
#include "tg/device.h"

/* The kernel that updates parameter i (gradient g) in place, or NULL where the composed
 * update must run: not Adam or AdamW, a layout the kernel does not take (non-contiguous,
 * mixed dtypes or devices), moments someone else holds (a state dict the user kept), or a
 * device without the kernel. Sets no error. */
tg_kernel_fn tg__adam_fused_kernel(const tg_optimizer *opt, int i, const tg_tensor *g);
/* The kernels' host F64 params tensor, filled by each run (NULL: out of memory). */
tg_tensor *tg__adam_fused_params(void);
/* Runs kernel on parameter i (its step count is the caller's to advance). */
tg_status tg__adam_fused_run(tg_optimizer *opt, int i, tg_kernel_fn kernel, tg_tensor *params);

#endif
