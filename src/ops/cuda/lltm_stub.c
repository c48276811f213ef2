/* The fused LLTM's CUDA entry points in a build without CUDA: a clean error. */
#include "lltm_cuda.h"

tg_status tg__lltm_forward_cuda(const tg_tensor *input, const tg_tensor *weights,
                                const tg_tensor *bias, const tg_tensor *old_h,
                                const tg_tensor *old_cell, tg_tensor *new_h, tg_tensor *new_cell,
                                tg_tensor *X, tg_tensor *gates) {
  (void)input, (void)weights, (void)bias, (void)old_h, (void)old_cell, (void)new_h;
  (void)new_cell, (void)X, (void)gates;
  return tg_set_error(TG_ERR_DEVICE, "lltm (cuda forward): tg was built without CUDA");
}

tg_status tg__lltm_backward_cuda(const tg_tensor *grad_h, const tg_tensor *grad_cell,
                                 const tg_tensor *new_cell, const tg_tensor *X,
                                 const tg_tensor *gates, const tg_tensor *weights,
                                 tg_tensor *d_old_h, tg_tensor *d_input, tg_tensor *d_weights,
                                 tg_tensor *d_bias, tg_tensor *d_old_cell) {
  (void)grad_h, (void)grad_cell, (void)new_cell, (void)X, (void)gates, (void)weights;
  (void)d_old_h, (void)d_input, (void)d_weights, (void)d_bias, (void)d_old_cell;
  return tg_set_error(TG_ERR_DEVICE, "lltm (cuda backward): tg was built without CUDA");
}
