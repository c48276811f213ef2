/* A test extension: "ext_square" (y = x^2, differentiable, with sample inputs) and
 * "ext_negate" (y = -x, forward only). */
#include <tg/extension.h>
#include <tg/ops.h>

static tg_status square_forward(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  out[0] = tg_mul(in[0], in[0]);
  if (!out[0]) return tg_last_error();
  return tg_ctx_save_for_backward(ctx, 1, in);
}

static tg_status square_backward(tg_ctx *ctx, const tg_tensor *const *grad_out,
                                 tg_tensor **grad_in) {
  tg_tensor *x = tg_ctx_saved(ctx, 0);
  grad_in[0] = x ? tg_mul(grad_out[0], tg_mul_scalar(x, 2.0)) : NULL;
  return grad_in[0] ? TG_OK : tg_last_error();
}

static int square_samples(const tg_sample_request *request, tg_sample *samples) {
  int64_t small[] = {3, 4}, large[] = {1024, 1024};
  tg_tensor *x =
      tg_randn(2, request->bench ? large : small,
               TG_OPTS(.dtype = request->dtype, .device = request->device), request->gen);
  if (!x || tg_set_requires_grad(x, true) != TG_OK) return -1;
  samples[0] = (tg_sample){.label = "matrix", .n_inputs = 1, .inputs = {x}, .n_outputs = 1};
  return 1;
}

static tg_status negate_forward(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  (void)ctx;
  out[0] = tg_neg(in[0]);
  return out[0] ? TG_OK : tg_last_error();
}

TG_EXTENSION(api) {
  tg_op_desc square = {.name = "ext_square",
                       .n_inputs = 1,
                       .n_outputs = 1,
                       .forward = {[TG_CPU] = square_forward},
                       .backward = square_backward,
                       .sample_inputs = square_samples};
  tg_op_desc negate = {
      .name = "ext_negate", .n_inputs = 1, .n_outputs = 1, .forward = {[TG_CPU] = negate_forward}};
  tg_status st = api->register_op(api, &square);
  return st == TG_OK ? api->register_op(api, &negate) : st;
}
