/* The forward the test extensions register when what the op computes does not matter
 * (each extension is its own library, so each includes its own copy). */
#ifndef TG_TEST_EXT_IDENTITY_OP_H
#define TG_TEST_EXT_IDENTITY_OP_H

#include <tg/extension.h>
#include <tg/ops.h>

static inline tg_status identity_forward(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  (void)ctx;
  out[0] = tg_clone(in[0]);
  return out[0] ? TG_OK : tg_last_error();
}

/* A one-input, one-output op of that forward, not differentiable. */
static inline tg_op_desc identity_op(const char *name) {
  return (tg_op_desc){
      .name = name, .n_inputs = 1, .n_outputs = 1, .forward = {[TG_CPU] = identity_forward}};
}

#endif
