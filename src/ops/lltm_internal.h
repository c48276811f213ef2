/* Internals of the LLTM: argument checks shared by the fused and composed paths, and the
 * CPU elementwise passes of the fused op (src/ops/lltm_cpu.c). */
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

/* F32 or F64 (checked by the caller). Forward pass over gates [B, 3S] (contiguous, holding X @ W^T
 * on entry): adds bias
 * ([3S] or [1, 3S], any strides), computes the cell with old_cell [B, S] (any strides) and
 * writes new_h, new_cell [B, S] (contiguous). gates is overwritten with the activations
 * (input gate, output gate, candidate) that backward reads. */
tg_status tg__lltm_cpu_forward(tg_tensor *gates, const tg_tensor *bias, const tg_tensor *old_cell,
                               tg_tensor *new_h, tg_tensor *new_cell);

/* Backward pass: from grad_h, grad_cell [B, S] (any strides; NULL = zero), the activations
 * in gates [B, 3S] (contiguous) and old_cell, writes d_gates [B, 3S] (any strides without
 * overlap; fastest with unit column stride or as the transpose of a contiguous [3S, B]),
 * accumulates the column sums of d_gates into d_bias [3S] (contiguous, zeroed by the
 * caller; NULL = not wanted) and writes d_old_cell [B, S] (contiguous; NULL = not wanted). */
tg_status tg__lltm_cpu_backward(const tg_tensor *grad_h, const tg_tensor *grad_cell,
                                const tg_tensor *gates, const tg_tensor *old_cell,
                                tg_tensor *d_gates, tg_tensor *d_bias, tg_tensor *d_old_cell);

#endif
