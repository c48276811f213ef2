/* The fused LLTM on CUDA: the entry points the "lltm" op's CUDA kernels point at.
 * Plain C; implemented in lltm_cuda.cu (real or emulated CUDA build).
 *
 * Math (S = state size, gate columns [0,S) input, [S,2S) output, [2S,3S) candidate):
 *   X = cat([old_h, input], 1)          gates = X @ weights^T + bias   (pre-activations)
 *   ig = sigmoid(g0), og = sigmoid(g1), cand = elu(g2, alpha = 1)
 *   new_cell = old_cell + cand * ig     new_h = tanh(new_cell) * og
 * Backward, per element, then d_weights = d_gates^T @ X, d_bias = sum_rows(d_gates),
 * d_old_h = d_gates @ weights[:, :S], d_input = d_gates @ weights[:, S:].
 *
 * Contract: every tensor lives on the same CUDA device and has one floating dtype (F32 or
 * F64). Inputs may have any strides (expanded included). Outputs are allocated by the
 * caller with the shapes below, on that device and dtype, and any non-overlapping strides.
 * Both calls return TG_OK or record an error (TG_ERR_DEVICE for CUDA/cuBLAS failures) and
 * return its code. Work is queued on the device's stream; no synchronisation. */
#ifndef TG_LLTM_CUDA_H
#define TG_LLTM_CUDA_H

#include "tg/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* input [B, I], weights [3S, S+I], bias [3S] (or [1, 3S]), old_h [B, S], old_cell [B, S].
 * Writes new_h [B, S], new_cell [B, S], and the two tensors backward needs:
 * X [B, S+I] (cat of old_h and input) and gates [B, 3S] (pre-activations). */
tg_status tg__lltm_forward_cuda(const tg_tensor *input, const tg_tensor *weights,
                                const tg_tensor *bias, const tg_tensor *old_h,
                                const tg_tensor *old_cell, tg_tensor *new_h, tg_tensor *new_cell,
                                tg_tensor *X, tg_tensor *gates);

/* grad_h, grad_cell [B, S]: gradients of new_h and new_cell; either may be NULL (zero).
 * new_cell, X, gates: as written by the forward; weights as given to it.
 * Writes d_old_h [B, S], d_input [B, I], d_weights [3S, S+I], d_bias [3S],
 * d_old_cell [B, S]; any of them may be NULL (not needed, not computed). */
tg_status tg__lltm_backward_cuda(const tg_tensor *grad_h, const tg_tensor *grad_cell,
                                 const tg_tensor *new_cell, const tg_tensor *X,
                                 const tg_tensor *gates, const tg_tensor *weights,
                                 tg_tensor *d_old_h, tg_tensor *d_input, tg_tensor *d_weights,
                                 tg_tensor *d_bias, tg_tensor *d_old_cell);

#ifdef __cplusplus
}
#endif
#endif
