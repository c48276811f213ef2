/* Loads the CUDA device module (ops/device_module.h) on first use and forwards tg/cuda.h to
 * it. Where the module is looked for, in order:
 *  1. the path in the environment variable TG_CUDA_MODULE, if set (and only there);
 *  2. TG_CUDA_MODULE_FILE in the directory of the binary that holds this loader (libtg.so, or
 *     the program that linked libtg.a), then in its tg/ subdirectory;
 *  3. TG_CUDA_MODULE_FILE in TG_CUDA_MODULE_DIR, the directory baked in by the build (the
 *     install's libdir; the emulated module's directory for the tests' libraries).
 * Compiled once per library (not in tg_core), with that library's module file and directory. */
#define _GNU_SOURCE /* dladdr */
#include "ops/cuda_module.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "autograd/profile.h"
#include "tensor/host_memory.h"

#ifndef TG_CUDA_MODULE_FILE
#error "src/ops/cuda_module.c needs TG_CUDA_MODULE_FILE (the module's file name) from the build"
#endif
#ifndef TG_CUDA_MODULE_DIR
#error "src/ops/cuda_module.c needs TG_CUDA_MODULE_DIR (\"\" for none) from the build"
#endif

#define WHY_MAX 4096

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static const tg_device_module *loaded;
static char why_not[WHY_MAX]; /* the reason when loaded is NULL */

/* ---- the import table ---- */

static tg_status set_error_v(tg_status status, const char *fmt, va_list ap) {
  char message[1024];
  vsnprintf(message, sizeof message, fmt, ap);
  return tg_set_error(status, "%s", message);
}

static const tg_module_host host = {
    .abi = TG_DEVICE_MODULE_ABI,
    .size = sizeof(tg_module_host),
    .set_error_v = set_error_v,
    .last_error = tg_last_error,
    .data_ptr = tg_data_ptr,
    .ndim = tg_ndim,
    .sizes = tg_sizes,
    .strides = tg_strides,
    .tensor_device = tg_tensor_device,
    .tensor_dtype = tg_tensor_dtype,
    .dtype_name = tg_dtype_name,
    .dtype_size = tg_dtype_size,
    .device_type_name = tg_device_type_name,
    .host_malloc = tg__host_malloc,
    .host_calloc = tg__host_calloc,
    .host_free = tg__host_free,
};

/* ---- finding and checking the module ---- */

/* Writes <dir>/<sub><TG_CUDA_MODULE_FILE> into path; true when such a file exists. */
static bool candidate(char *path, size_t size, const char *dir, const char *sub) {
  if (!dir || !dir[0]) return false;
  int n = snprintf(path, size, "%s/%s%s", dir, sub, TG_CUDA_MODULE_FILE);
  return n > 0 && (size_t)n < size && access(path, F_OK) == 0;
}

/* The default module file (steps 2 and 3 above) into path; false (with why_not saying where
 * it looked) when there is none. */
static bool find_default(char *path, size_t size) {
  char self_dir[1024] = "";
  Dl_info info;
  if (dladdr((void *)tg__cuda_module_quiet, &info) && info.dli_fname) {
    snprintf(self_dir, sizeof self_dir, "%s", info.dli_fname);
    char *slash = strrchr(self_dir, '/');
    if (slash)
      *slash = '\0';
    else
      snprintf(self_dir, sizeof self_dir, ".");
  }
  if (candidate(path, size, self_dir, "") || candidate(path, size, self_dir, "tg/") ||
      candidate(path, size, TG_CUDA_MODULE_DIR, ""))
    return true;
  snprintf(why_not, sizeof why_not,
           "tg was built without CUDA or its device module is not installed (no %s in %s, "
           "%s/tg%s%s; set TG_CUDA_MODULE to its path)",
           TG_CUDA_MODULE_FILE, self_dir[0] ? self_dir : "(unknown)",
           self_dir[0] ? self_dir : "(unknown)", TG_CUDA_MODULE_DIR[0] ? " or " : "",
           TG_CUDA_MODULE_DIR);
  return false;
}

/* The checks between the entry's answer and its first use; false with why_not set. */
static bool check_module(const char *path, const tg_device_module *m) {
  const char *version = tg_version_string();
  if (!m)
    snprintf(why_not, sizeof why_not, "the CUDA device module '%s' answered NULL", path);
  else if (m->abi != TG_DEVICE_MODULE_ABI)
    snprintf(why_not, sizeof why_not,
             "the CUDA device module '%s' has module ABI %u, this tg needs %u (rebuild it "
             "with this tg)",
             path, m->abi, TG_DEVICE_MODULE_ABI);
  else if (m->size != sizeof(tg_device_module) || m->device_size != sizeof(tg_device_ops) ||
           m->drivers_size != sizeof(tg_device_drivers))
    snprintf(why_not, sizeof why_not,
             "the CUDA device module '%s' has other struct sizes (module %u, device %u, drivers "
             "%u; this tg: %zu, %zu, %zu)",
             path, m->size, m->device_size, m->drivers_size, sizeof(tg_device_module),
             sizeof(tg_device_ops), sizeof(tg_device_drivers));
  else if (!m->tg_version || strcmp(m->tg_version, version) != 0)
    snprintf(why_not, sizeof why_not,
             "the CUDA device module '%s' was built for tg %s, this is tg %s", path,
             m->tg_version ? m->tg_version : "(none)", version);
  else if (!m->device || m->device->abi != TG_DEVICE_ABI)
    snprintf(why_not, sizeof why_not,
             "the CUDA device module '%s' has no device table of this tg's device ABI %u", path,
             TG_DEVICE_ABI);
  else if (!m->device_name || strcmp(m->device_name, "cuda") != 0)
    snprintf(why_not, sizeof why_not, "the CUDA device module '%s' is not a CUDA device (%s)", path,
             m->device_name ? m->device_name : "no name");
  else
    return true;
  return false;
}

static void load(void) {
  char path[1024];
  const char *env = getenv("TG_CUDA_MODULE");
  if (env && env[0]) {
    snprintf(path, sizeof path, "%s", env);
  } else if (!find_default(path, sizeof path)) {
    return;
  }
  dlerror();
  void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *why = dlerror();
    snprintf(why_not, sizeof why_not, "cannot load the CUDA device module '%s'%s: %s", path,
             env && env[0] ? " (TG_CUDA_MODULE)" : "", why ? why : "unknown dlopen error");
    return;
  }
  tg_device_module_entry_fn entry;
  /* POSIX's way from dlsym's void * to a function pointer. */
  *(void **)&entry = dlsym(handle, TG_DEVICE_MODULE_ENTRY_NAME);
  if (!entry) {
    const char *why = dlerror();
    snprintf(why_not, sizeof why_not, "'%s' is not a tg device module (no entry point %s: %s)",
             path, TG_DEVICE_MODULE_ENTRY_NAME, why ? why : "not found");
    dlclose(handle);
    return;
  }
  const tg_device_module *m = entry(&host);
  if (!check_module(path, m)) {
    dlclose(handle);
    return;
  }
  loaded = m; /* the handle stays open for the process's lifetime */
  tg__profile_set_device_sync(m->cuda.synchronize); /* tg_profile_start(true) waits on it */
}

const tg_device_module *tg__cuda_module_quiet(void) {
  pthread_once(&load_once, load);
  return loaded;
}

const tg_device_module *tg__cuda_module(const char *op) {
  const tg_device_module *m = tg__cuda_module_quiet();
  if (!m) tg_set_error(TG_ERR_DEVICE, "%s: %s", op, why_not);
  return m;
}

bool tg__cuda_is_emulated(void) {
  const tg_device_module *m = tg__cuda_module_quiet();
  return m && m->emulated;
}

/* ---- tg/cuda.h: forwarders; without a module, the same clean errors as a CPU-only tg ---- */

bool tg_cuda_is_built(void) { return tg__cuda_module_quiet() != NULL; }
int tg_cuda_device_count(void) {
  const tg_device_module *m = tg__cuda_module_quiet();
  return m ? m->cuda.device_count() : 0;
}
bool tg_cuda_is_available(void) {
  const tg_device_module *m = tg__cuda_module_quiet();
  return m && m->cuda.is_available();
}
tg_status tg_cuda_synchronize(void) {
  const tg_device_module *m = tg__cuda_module("tg_cuda_synchronize");
  return m ? m->cuda.synchronize() : tg_last_error();
}
tg_status tg_cuda_stream(int device_index, void **stream) {
  if (stream) *stream = NULL;
  const tg_device_module *m = tg__cuda_module("tg_cuda_stream");
  return m ? m->cuda.stream(device_index, stream) : tg_last_error();
}
tg_status tg_cuda_memory_stats_get(tg_cuda_memory_stats *out) {
  if (out) *out = (tg_cuda_memory_stats){0};
  const tg_device_module *m = tg__cuda_module("tg_cuda_memory_stats_get");
  return m ? m->cuda.memory_stats_get(out) : tg_last_error();
}
tg_status tg_cuda_empty_cache(void) {
  const tg_device_module *m = tg__cuda_module("tg_cuda_empty_cache");
  return m ? m->cuda.empty_cache() : tg_last_error();
}
tg_cuda_timer *tg_cuda_timer_new(void) {
  const tg_device_module *m = tg__cuda_module("tg_cuda_timer_new");
  return m ? m->cuda.timer_new() : NULL;
}
tg_status tg_cuda_timer_start(tg_cuda_timer *timer) {
  const tg_device_module *m = tg__cuda_module("tg_cuda_timer_start");
  return m ? m->cuda.timer_start(timer) : tg_last_error();
}
tg_status tg_cuda_timer_elapsed_ms(tg_cuda_timer *timer, double *ms) {
  const tg_device_module *m = tg__cuda_module("tg_cuda_timer_elapsed_ms");
  return m ? m->cuda.timer_elapsed_ms(timer, ms) : tg_last_error();
}
/* Without a module no timer was ever made: nothing to free (NULL is a no-op either way). */
void tg_cuda_timer_free(tg_cuda_timer *timer) {
  const tg_device_module *m = timer ? tg__cuda_module_quiet() : NULL;
  if (m) m->cuda.timer_free(timer);
}
