/* Internals of the LLTM: argument checks shared by the fused and composed paths, and the
 * CPU elementwise passes of the fused op (src/ops/cpu/cpu_lltm.c). */
#ifndef TG_LLTM_INTERNAL_H
#define TG_LLTM_INTERNAL_H

#include "tensor/tensor_impl.h"

/* The sizes of one LLTM call. */
typedef struct tg_lltm_dims {
  int64_t batch, features, state;
} tg_lltm_dims;

/* Validates the five inputs of an LLTM call for op (its name starts every message):
 * none NULL; one floating dtype; one device; input [B, I], old_h and old_cell [B, S],
 * weights [3S, S+I], bias [3S] (or [1, 3S]). Fills dims on success. */
tg_status tg__lltm_check(const char *op, const tg_tensor *input, const tg_tensor *weights,
                         const tg_tensor *bias, const tg_tensor *old_h, const tg_tensor *old_cell,
                         tg_lltm_dims *dims);

/* The CPU device's LLTM passes (src/ops/cpu/cpu_lltm.c), behind its kernels
 * lltm.forward_pointwise / lltm.backward_pointwise (the contract: src/ops/def/lltm.def). */
tg_status tg_cpu_lltm_forward_pointwise(tg_tensor *gates, const tg_tensor *bias,
                                        const tg_tensor *old_cell, tg_tensor *new_h,
                                        tg_tensor *new_cell);
tg_status tg_cpu_lltm_backward_pointwise(const tg_tensor *grad_h, const tg_tensor *grad_cell,
                                         const tg_tensor *gates, const tg_tensor *old_cell,
                                         tg_tensor *d_gates, tg_tensor *d_old_cell,
                                         tg_tensor *d_bias);

#endif
