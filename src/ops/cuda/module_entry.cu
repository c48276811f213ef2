/* The module's one exported symbol (ops/device_module.h): takes libtg's import table and
 * answers with the CUDA device's table (tg_cuda_device) and the tg/cuda.h functions. It always
 * answers, so that the loader can read the ABI number and say what does not match; it keeps the
 * table only when the ABI is its own (the loader then uses nothing of a mismatched module). */
#include "module_host.cuh"

#ifndef TG_VERSION_STRING
#error "module_entry.cu needs TG_VERSION_STRING (the tg version) from the build"
#endif

static const tg_device_module cuda_module = {
    TG_DEVICE_MODULE_ABI,
    sizeof(tg_device_module),
    sizeof(tg_device_ops),
    sizeof(tg_device_drivers),
    TG_VERSION_STRING,
    "cuda",
#ifdef TG_CUDA_EMULATION
    true,
#else
    false,
#endif
    &tg_cuda_device,
    {tg_cuda_device_count, tg_cuda_is_available, tg_cuda_synchronize, tg_cuda_stream,
     tg_cuda_memory_stats_get, tg_cuda_empty_cache, tg_cuda_timer_new, tg_cuda_timer_start,
     tg_cuda_timer_elapsed_ms, tg_cuda_timer_free},
};

extern "C" __attribute__((visibility("default"))) const tg_device_module *
tg_device_module_entry(const tg_module_host *host) {
  if (host && host->abi == TG_DEVICE_MODULE_ABI && host->size == sizeof(tg_module_host))
    tg_cu_host = host;
  return &cuda_module;
}
