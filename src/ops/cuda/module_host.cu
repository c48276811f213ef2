/* The tg functions the module's sources call, defined by forwarding to the import table libtg
 * passed to the entry point: the module does not link libtg (ops/device_module.h). The link
 * keeps these local to the module (module.map, emu/module.map), so they never interpose on
 * libtg's own definitions in the same process. */
#include <stdio.h>
#include <stdlib.h>

#include "module_host.cuh"
#include "tensor/host_memory.h"
#include "tg/tensor.h"

const tg_module_host *tg_cu_host = NULL;

/* A call before libtg ran the entry point is a bug in the caller (a test naming the backend
 * table before the first use of the device), not a caller error: stop with a message. */
static const tg_module_host *host() {
  if (!tg_cu_host) {
    fputs("tg CUDA module: used before libtg loaded it (call a tg_cuda_* function first)\n",
          stderr);
    abort();
  }
  return tg_cu_host;
}

extern "C" {

tg_status tg_set_error(tg_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  tg_status st = host()->set_error_v(status, fmt, ap);
  va_end(ap);
  return st;
}
tg_status tg_last_error(void) { return host()->last_error(); }
void *tg_data_ptr(const tg_tensor *t) { return host()->data_ptr(t); }
int tg_ndim(const tg_tensor *t) { return host()->ndim(t); }
const int64_t *tg_sizes(const tg_tensor *t) { return host()->sizes(t); }
const int64_t *tg_strides(const tg_tensor *t) { return host()->strides(t); }
tg_device tg_tensor_device(const tg_tensor *t) { return host()->tensor_device(t); }
tg_dtype tg_tensor_dtype(const tg_tensor *t) { return host()->tensor_dtype(t); }
const char *tg_dtype_name(tg_dtype dtype) { return host()->dtype_name(dtype); }
size_t tg_dtype_size(tg_dtype dtype) { return host()->dtype_size(dtype); }
const char *tg_device_type_name(tg_device_type type) { return host()->device_type_name(type); }
void *tg__host_malloc(size_t n) { return host()->host_malloc(n); }
void *tg__host_calloc(size_t count, size_t size) { return host()->host_calloc(count, size); }
void tg__host_free(void *p) { host()->host_free(p); }

} // extern "C"
