/* The loader of the CUDA device module (ops/device_module.h): libtg's only way to the CUDA
 * device. The module is dlopen()ed on the first call that needs it; a failure is remembered
 * and repeated (naming the path and the reason) by every later call. */
#ifndef TG_CUDA_MODULE_H
#define TG_CUDA_MODULE_H

#include "ops/device_module.h"

/* The loaded module, or NULL with TG_ERR_DEVICE recorded as "<op>: <why>". */
const tg_device_module *tg__cuda_module(const char *op);
/* The same without recording an error (for lookups that answer NULL quietly). */
const tg_device_module *tg__cuda_module_quiet(void);

#endif
