/* A test extension whose entry point offers an op and then fails: nothing may be
 * registered, and the error reaches the caller. */
#include <string.h>

#include "identity_op.h"

TG_EXTENSION(api) {
  tg_op_desc op = identity_op("ext_failing_op");
  if (api->register_op(api, &op) != TG_OK) return tg_last_error();
  if (api->abi_version != TG_EXTENSION_ABI_VERSION || api->size < sizeof *api)
    return tg_set_error(TG_ERR_STATE, "ext_failing: unexpected table");
  /* A table that is not the one tg passed is refused, naming the misuse (else the message
   * the test expects below is not the last one). */
  tg_extension_api forged = *api;
  forged.loader = NULL;
  if (api->register_op(&forged, &op) != TG_ERR_ARGUMENT ||
      !strstr(tg_last_error_message(), "register_op: api is NULL or not the one tg passed"))
    return tg_set_error(TG_ERR_STATE, "ext_failing: a forged table was accepted");
  if (api->register_op(NULL, &op) != TG_ERR_ARGUMENT)
    return tg_set_error(TG_ERR_STATE, "ext_failing: a NULL table was accepted");
  return tg_set_error(TG_ERR_UNSUPPORTED, "ext_failing: the device it needs is missing");
}
