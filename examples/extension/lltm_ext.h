/* lltm_ext: what lltm_ext.c and the CUDA kernels of lltm_ext.cu share (the tutorial's
 * split between the host code and the CUDA kernels). Built only when the extension is built with
 * CUDA (TG_EXTENSION_CUDA); every tensor passed is a contiguous CUDA tensor of one
 * floating dtype, [B, S] unless said otherwise. */
#ifndef LLTM_EXT_H
#define LLTM_EXT_H

#include <tg/tg.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The forward pass's elementwise part, one thread per (row, column) of the state:
 * gate_weights [B, 3S] (X @ W^T + bias) -> the gates, new_h and new_cell. */
tg_status lltm_ext_cuda_forward_pointwise(const tg_tensor *gate_weights, const tg_tensor *old_cell,
                                          tg_tensor *new_h, tg_tensor *new_cell,
                                          tg_tensor *input_gate, tg_tensor *output_gate,
                                          tg_tensor *candidate_cell);

/* The backward pass's elementwise part: d_old_cell [B, S] and d_gates [B, 3S] from the
 * upstream gradients and what forward saved. */
tg_status lltm_ext_cuda_backward_pointwise(const tg_tensor *grad_h, const tg_tensor *grad_cell,
                                           const tg_tensor *new_cell, const tg_tensor *input_gate,
                                           const tg_tensor *output_gate,
                                           const tg_tensor *candidate_cell,
                                           const tg_tensor *gate_weights, tg_tensor *d_old_cell,
                                           tg_tensor *d_gates);

#ifdef __cplusplus
}
#endif
#endif
