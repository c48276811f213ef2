/* The one registration point of the device backends: which backend serves which device
 * type, and the default allocators. The CUDA backend lives in a module that libtg loads on
 * its first use (ops/cuda_module.c): a CPU-only program never maps the CUDA runtime. Not in
 * tg_core: the one place allowed to name every backend, it is compiled into each library. */
#include "ops/backend.h"

#include <stdio.h>

#include "ops/cuda_module.h"
#include "tg/cuda.h"

static const tg_backend *const backends[TG_NUM_DEVICE_TYPES] = {
    [TG_CPU] = &tg_cpu_backend,
};

/* The CUDA module's backend; quiet: NULL without recording an error. */
static const tg_backend *cuda_backend(void) {
  const tg_device_module *m = tg__cuda_module_quiet();
  return m ? m->backend : NULL;
}

const tg_backend *tg__backend(const char *op, tg_device device) {
  if (device.type == TG_CUDA) {
    char what[160];
    snprintf(what, sizeof what, "%s: device cuda:%d", op, device.index);
    const tg_device_module *m = tg__cuda_module(what);
    return m ? m->backend : NULL;
  }
  const tg_backend *be = (unsigned)device.type < TG_NUM_DEVICE_TYPES ? backends[device.type] : NULL;
  if (!be)
    tg_set_error(TG_ERR_DEVICE, "%s: device %s is not available in this build", op,
                 tg_device_type_name(device.type));
  return be;
}

/* ---- allocators (tg/tensor.h) ---- */

static const tg_allocator *installed[TG_NUM_DEVICE_TYPES];

const tg_allocator *tg_get_allocator(tg_device_type type) {
  if ((unsigned)type >= TG_NUM_DEVICE_TYPES) return NULL;
  if (installed[type]) return installed[type];
  const tg_backend *be = type == TG_CUDA ? cuda_backend() : backends[type];
  return be ? be->allocator : NULL;
}

const tg_allocator *tg_set_allocator(tg_device_type type, const tg_allocator *allocator) {
  if ((unsigned)type >= TG_NUM_DEVICE_TYPES) {
    tg_set_error(TG_ERR_ARGUMENT, "tg_set_allocator: invalid device type %d", (int)type);
    return NULL;
  }
  const tg_allocator *previous = tg_get_allocator(type);
  installed[type] = allocator;
  return previous;
}
