/* A test extension whose second op clashes with the built-in "mul": loading it must leave
 * the registry as it was ("ext_clash_new" not registered either). */
#include <tg/extension.h>
#include <tg/ops.h>

static tg_status identity_forward(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  (void)ctx;
  out[0] = tg_clone(in[0]);
  return out[0] ? TG_OK : tg_last_error();
}

TG_EXTENSION(api) {
  tg_op_desc fresh = {.name = "ext_clash_new",
                      .n_inputs = 1,
                      .n_outputs = 1,
                      .forward = {[TG_CPU] = identity_forward}};
  tg_op_desc clash = fresh;
  clash.name = "mul";
  tg_status st = api->register_op(api, &fresh);
  return st == TG_OK ? api->register_op(api, &clash) : st;
}
