/* A JIT test extension (tests/ext/test_jit.c): jit_square(x) = JIT_SCALE * x * x, written with
 * tg ops so that it is twice differentiable. Compile with -DJIT_SCALE=k for another one. */
#include <tg/extension.h>
#include <tg/tg.h>

#ifndef JIT_SCALE
#define JIT_SCALE 1.0
#endif

static tg_status square_forward(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  out[0] = tg_mul_scalar(tg_mul(in[0], in[0]), JIT_SCALE);
  if (!out[0]) return tg_last_error();
  return tg_ctx_save_for_backward(ctx, 1, in);
}

static tg_status square_backward(tg_ctx *ctx, const tg_tensor *const *grad_out,
                                 tg_tensor **grad_in) {
  tg_tensor *x = tg_ctx_saved(ctx, 0);
  if (!x) return tg_last_error();
  grad_in[0] = tg_mul(grad_out[0], tg_mul_scalar(x, 2.0 * JIT_SCALE));
  return grad_in[0] ? TG_OK : tg_last_error();
}

TG_EXTENSION(api) {
  tg_op_desc square = {.name = "jit_square",
                       .n_inputs = 1,
                       .n_outputs = 1,
                       .forward = {[TG_CPU] = square_forward},
                       .backward = square_backward};
  return api->register_op(api, &square);
}
