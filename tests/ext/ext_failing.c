/* A test extension whose entry point offers an op and then fails: nothing may be
 * registered, and the error reaches the caller. */
#include "identity_op.h"

TG_EXTENSION(api) {
  tg_op_desc op = identity_op("ext_failing_op");
  if (api->register_op(api, &op) != TG_OK) return tg_last_error();
  if (api->abi_version != TG_EXTENSION_ABI_VERSION || api->size < sizeof *api)
    return tg_set_error(TG_ERR_STATE, "ext_failing: unexpected table");
  return tg_set_error(TG_ERR_UNSUPPORTED, "ext_failing: the device it needs is missing");
}
