/* A tg device module that does not match the loading tg: compiled with WRONG_ABI it has another
 * module ABI number, with WRONG_VERSION another tg version. The loader must refuse it before
 * using anything in it (its device table is NULL: a use would crash). */
#include "ops/device_module.h"

#if defined(WRONG_ABI)
#define ABI (TG_DEVICE_MODULE_ABI + 998u)
#define VERSION TG_VERSION_STRING
#else
#define ABI TG_DEVICE_MODULE_ABI
#define VERSION "0.0.0-other"
#endif

static const tg_device_module wrong = {
    .abi = ABI,
    .size = sizeof(tg_device_module),
    .device_size = sizeof(tg_device_ops),
    .drivers_size = sizeof(tg_device_drivers),
    .tg_version = VERSION,
    .device_name = "cuda",
};

__attribute__((visibility("default"))) const tg_device_module *
tg_device_module_entry(const tg_module_host *host);
const tg_device_module *tg_device_module_entry(const tg_module_host *host) {
  (void)host;
  return &wrong;
}
