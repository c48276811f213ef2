/* The built-in devices this library has (the registry, src/ops/device_registry.c, asks
 * once per type). The CUDA device lives in a module that libtg loads on that first ask
 * (ops/cuda_module.c): a CPU-only program never maps the CUDA runtime. Compiled once per
 * library (not in tg_core), with the loader. */
#include "ops/backend.h"
#include "ops/cuda_module.h"

const tg_device_ops *tg__builtin_device(tg_device_type type) {
  switch (type) {
  case TG_CPU:
    return &tg_cpu_device;
  case TG_CUDA: {
    const tg_device_module *m = tg__cuda_module_quiet();
    return m ? m->device : NULL;
  }
  default:
    return NULL;
  }
}
