/* The module's side of the import table (ops/device_module.h): set once by the entry point
 * (module_entry.cu), read by the forwarders of module_host.cu. */
#ifndef TG_CUDA_MODULE_HOST_CUH
#define TG_CUDA_MODULE_HOST_CUH

#include "ops/device_module.h"

extern "C" const tg_module_host *tg_cu_host;

#endif
