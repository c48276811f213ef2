/* A test extension that offers one name twice (the second offer is refused; the entry point
 * ignores that, and loading must fail anyway). */
#include <tg/extension.h>
#include <tg/ops.h>

static tg_status identity_forward(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  (void)ctx;
  out[0] = tg_clone(in[0]);
  return out[0] ? TG_OK : tg_last_error();
}

TG_EXTENSION(api) {
  tg_op_desc op = {.name = "ext_twice_op",
                   .n_inputs = 1,
                   .n_outputs = 1,
                   .forward = {[TG_CPU] = identity_forward}};
  api->register_op(api, &op);
  api->register_op(api, &op);
  return TG_OK;
}
