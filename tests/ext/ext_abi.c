/* A test extension built for another extension ABI (by hand: TG_EXTENSION would say 2). */
#include <tg/extension.h>

TG_EXTENSION_EXPORT const uint32_t tg_extension_abi = 999;
TG_EXTENSION_EXPORT tg_status tg_extension_init(const tg_extension_api *api);
tg_status tg_extension_init(const tg_extension_api *api) {
  (void)api;
  return TG_OK;
}
