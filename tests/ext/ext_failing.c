/* A test extension whose entry point offers an op and then fails: nothing may be
 * registered, and the error reaches the caller. */
#include <tg/extension.h>
#include <tg/ops.h>

static tg_status identity_forward(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  (void)ctx;
  out[0] = tg_clone(in[0]);
  return out[0] ? TG_OK : tg_last_error();
}

TG_EXTENSION(api) {
  tg_op_desc op = {.name = "ext_failing_op",
                   .n_inputs = 1,
                   .n_outputs = 1,
                   .forward = {[TG_CPU] = identity_forward}};
  if (api->register_op(api, &op) != TG_OK) return tg_last_error();
  if (api->abi_version != TG_EXTENSION_ABI_VERSION || api->size < sizeof *api)
    return tg_set_error(TG_ERR_STATE, "ext_failing: unexpected table");
  return tg_set_error(TG_ERR_UNSUPPORTED, "ext_failing: the device it needs is missing");
}
