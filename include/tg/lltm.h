/* tg — the LLTM cell (an LSTM without forget gate, ELU candidate), two ways:
 *
 *   X = cat([old_h, input], 1)            gates = addmm(bias, X, weights^T)
 *   i, o, c = chunk(gates, 3, 1)          i = sigmoid(i), o = sigmoid(o), c = elu(c)
 *   new_cell = old_cell + c * i           new_h = tanh(new_cell) * o
 *
 * Shapes: input [B, I], weights [3S, I+S], bias [3S], old_h [B, S], old_cell [B, S]. */
#ifndef TG_LLTM_H
#define TG_LLTM_H

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Composed from generic ops; the tape derives the backward. */
tg_status tg_lltm_composed(const tg_tensor *input, const tg_tensor *weights, const tg_tensor *bias,
                           const tg_tensor *old_h, const tg_tensor *old_cell, tg_tensor **new_h,
                           tg_tensor **new_cell);
/* The registered fused op "lltm": one GEMM + one pass forward, a hand-written
 * once-differentiable backward. Same results as tg_lltm_composed. */
tg_status tg_lltm(const tg_tensor *input, const tg_tensor *weights, const tg_tensor *bias,
                  const tg_tensor *old_h, const tg_tensor *old_cell, tg_tensor **new_h,
                  tg_tensor **new_cell);

#ifdef __cplusplus
}
#endif
#endif
