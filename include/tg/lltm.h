/* tg — the LLTM cell (an LSTM without forget gate, ELU candidate), two ways:
 *
 *   X = cat([old_h, input], 1)            gates = addmm(bias, X, weights^T)
 *   i, o, c = chunk(gates, 3, 1)          i = sigmoid(i), o = sigmoid(o), c = elu(c)
 *   new_cell = old_cell + c * i           new_h = tanh(new_cell) * o
 *
 * Shapes: input [B, I], weights [3S, S+I] (columns: old_h's S first, then input's I),
 * bias [3S] (or [1, 3S]), old_h [B, S], old_cell [B, S]. One floating dtype (F32 or F64)
 * and one device for all five; any strides. new_h and new_cell are [B, S], scope-owned.
 * On error both are set to NULL and the status says why (TG_ERR_SHAPE, TG_ERR_DTYPE,
 * TG_ERR_DEVICE, TG_ERR_ARGUMENT naming the argument and its sizes). */
#ifndef TG_LLTM_H
#define TG_LLTM_H

#include "tensor.h"

TG_API_BEGIN
#ifdef __cplusplus
extern "C" {
#endif

/* Composed from generic ops (cat, addmm, chunk, sigmoid, elu, mul, add, tanh); the tape
 * records each and derives the backward, double backward included. */
tg_status tg_lltm_composed(const tg_tensor *input, const tg_tensor *weights, const tg_tensor *bias,
                           const tg_tensor *old_h, const tg_tensor *old_cell, tg_tensor **new_h,
                           tg_tensor **new_cell);

/* The registered fused op "lltm" (CPU and CUDA kernels): one GEMM-based gate computation
 * and one elementwise pass forward; a hand-written backward that computes only the
 * gradients asked for. Once-differentiable: double backward through it is a TG_ERR_STATE
 * error. Agrees with tg_lltm_composed to rounding for every finite input. */
tg_status tg_lltm(const tg_tensor *input, const tg_tensor *weights, const tg_tensor *bias,
                  const tg_tensor *old_h, const tg_tensor *old_cell, tg_tensor **new_h,
                  tg_tensor **new_cell);

#ifdef __cplusplus
}
#endif
TG_API_END
#endif
