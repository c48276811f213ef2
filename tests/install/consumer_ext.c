/* An extension outside the tg tree: "install_cube" (y = x^3), built against an installed tg
 * by check_install.sh twice, with tg_add_extension and with one cc line from pkg-config. */
#include <tg/extension.h>
#include <tg/ops.h>

static tg_status cube_forward(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  out[0] = tg_pow_scalar(in[0], 3.0);
  if (!out[0]) return tg_last_error();
  return tg_ctx_save_for_backward(ctx, 1, in);
}

static tg_status cube_backward(tg_ctx *ctx, const tg_tensor *const *grad_out, tg_tensor **grad_in) {
  tg_tensor *x = tg_ctx_saved(ctx, 0);
  grad_in[0] = x ? tg_mul(grad_out[0], tg_mul_scalar(tg_mul(x, x), 3.0)) : NULL;
  return grad_in[0] ? TG_OK : tg_last_error();
}

TG_EXTENSION(api) {
  tg_op_desc cube = {.name = "install_cube",
                     .n_inputs = 1,
                     .n_outputs = 1,
                     .forward = {[TG_CPU] = cube_forward},
                     .backward = cube_backward};
  return api->register_op(api, &cube);
}
