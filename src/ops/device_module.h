/* The contract between libtg and a device module: a shared object (libtg_cuda.so, or
 * libtg_cuda_emu.so over the CPU emulation) that libtg dlopen()s on the first use of the
 * device (src/ops/cuda_module.c), so a CPU-only program never maps the device's runtime.
 *
 * The module exports one symbol, TG_DEVICE_MODULE_ENTRY_NAME, of type
 * tg_device_module_entry_fn. libtg calls it once with its import table (tg_module_host) and
 * checks the answer: the ABI numbers, the struct sizes and the tg version must all be libtg's.
 * The module does not link libtg (a program may hold libtg statically; two copies of tg's
 * state would be a bug): what its sources call of tg reaches it through the import table
 * (src/ops/cuda/module_host.cu forwards each function to it).
 *
 * Bump TG_DEVICE_MODULE_ABI whenever tg_device_module, tg_module_host or the device tables
 * (tg_device_ops, tg_device_drivers) change (the asserts below fail to compile when their
 * sizes do). Included by C (the loader)
 * and by C++ (the module's .cu sources). */
#ifndef TG_DEVICE_MODULE_H
#define TG_DEVICE_MODULE_H

#include <stdarg.h>
#include <stdint.h>

#include "ops/backend.h"
#include "tg/cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TG_DEVICE_MODULE_ABI 1u
#define TG_DEVICE_MODULE_ENTRY_NAME "tg_device_module_entry"

/* The device tables at ABI 1: tg_device_ops (tg/device.h, 64 bytes) and its drivers
 * (tg_device_drivers, 72 bytes) on a 64-bit target. */
#ifdef __cplusplus
#define TG__MODULE_ASSERT static_assert
#else
#define TG__MODULE_ASSERT _Static_assert
#endif
TG__MODULE_ASSERT(sizeof(void *) != 8 || sizeof(tg_device_ops) == 64,
                  "tg_device_ops changed: bump TG_DEVICE_MODULE_ABI and this size");
TG__MODULE_ASSERT(sizeof(void *) != 8 || sizeof(tg_device_drivers) == 72,
                  "tg_device_drivers changed: bump TG_DEVICE_MODULE_ABI and this size");
#undef TG__MODULE_ASSERT

/* What libtg gives the module: the tg functions its sources use. */
typedef struct tg_module_host {
  uint32_t abi;  /* TG_DEVICE_MODULE_ABI of the loading libtg */
  uint32_t size; /* sizeof(tg_module_host) */
  /* tg_set_error with a va_list (tg_set_error itself is variadic) */
  tg_status (*set_error_v)(tg_status status, const char *fmt, va_list ap);
  tg_status (*last_error)(void);
  void *(*data_ptr)(const tg_tensor *t);
  int (*ndim)(const tg_tensor *t);
  const int64_t *(*sizes)(const tg_tensor *t);
  const int64_t *(*strides)(const tg_tensor *t);
  tg_device (*tensor_device)(const tg_tensor *t);
  tg_dtype (*tensor_dtype)(const tg_tensor *t);
  const char *(*dtype_name)(tg_dtype dtype);
  size_t (*dtype_size)(tg_dtype dtype);
  const char *(*device_type_name)(tg_device_type type);
  void *(*host_malloc)(size_t n);
  void *(*host_calloc)(size_t count, size_t size);
  void (*host_free)(void *p);
} tg_module_host;

/* The tg/cuda.h functions, as the module implements them (libtg's are forwarders). */
typedef struct tg_cuda_module_api {
  int (*device_count)(void);
  bool (*is_available)(void);
  tg_status (*synchronize)(void);
  tg_status (*stream)(int device_index, void **stream);
  tg_status (*memory_stats_get)(tg_cuda_memory_stats *out);
  tg_status (*empty_cache)(void);
  tg_cuda_timer *(*timer_new)(void);
  tg_status (*timer_start)(tg_cuda_timer *timer);
  tg_status (*timer_elapsed_ms)(tg_cuda_timer *timer, double *ms);
  void (*timer_free)(tg_cuda_timer *timer);
} tg_cuda_module_api;

/* What the module gives libtg. */
typedef struct tg_device_module {
  uint32_t abi;                /* TG_DEVICE_MODULE_ABI the module was built with */
  uint32_t size;               /* sizeof(tg_device_module) */
  uint32_t device_size;        /* sizeof(tg_device_ops) */
  uint32_t drivers_size;       /* sizeof(tg_device_drivers) */
  const char *tg_version;      /* the tg version (tg_version_string) it was built from */
  const char *device_name;     /* "cuda" */
  bool emulated;               /* the CPU emulation of CUDA (what the JIT compiles .cu for) */
  const tg_device_ops *device; /* its drivers, kernels and memory functions (tg/device.h) */
  tg_cuda_module_api cuda;
} tg_device_module;

/* The entry point, called once. It answers even when host has another ABI (so the loader can
 * name both numbers) but then keeps nothing of host. */
typedef const tg_device_module *(*tg_device_module_entry_fn)(const tg_module_host *host);

#ifdef __cplusplus
}
#endif
#endif
