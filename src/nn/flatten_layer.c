/* Flatten (torch.nn.Flatten): dims start_dim..end_dim of the input merged into one. */
#include "nn/module_impl.h"
#include "tensor/error_impl.h"
#include "tensor/host_memory.h"
#include "tensor/tensor_impl.h"
#include "tg/nn.h"

typedef struct flatten_layer {
  tg_module module;
  int start_dim, end_dim; /* as given: negative ones count from the end of each input */
} flatten_layer;

static void flatten_destroy(tg_module *m) {
  tg__host_free(TG_MODULE_CONTAINER(m, flatten_layer, module));
}

/* torch.flatten(x, start_dim, end_dim): a 0-dim x counts as 1-dim and becomes [1]. */
static tg_tensor *flatten_forward(tg_module *m, const tg_tensor *x) {
  static const char *fn = "tg_module_forward (flatten)";
  const flatten_layer *f = TG_MODULE_CONTAINER(m, flatten_layer, module);
  int start = tg__wrap_dim(fn, "start_dim", f->start_dim, x->ndim);
  int end = start < 0 ? -1 : tg__wrap_dim(fn, "end_dim", f->end_dim, x->ndim);
  if (start < 0 || end < 0) return NULL;
  if (!tg__check(start <= end, TG_ERR_ARGUMENT, fn,
                 "start_dim %d comes after end_dim %d for x of sizes %s (dims %d and %d)",
                 f->start_dim, f->end_dim, tg__sizes_str(x), start, end))
    return NULL;
  int64_t sizes[TG_MAX_DIMS];
  int n = 0;
  for (int d = 0; d < start; d++) sizes[n++] = x->sizes[d];
  int64_t merged = 1;
  for (int d = start; d <= end && d < x->ndim; d++) merged *= x->sizes[d];
  sizes[n++] = merged;
  for (int d = end + 1; d < x->ndim; d++) sizes[n++] = x->sizes[d];
  return tg_reshape(x, n, sizes);
}

static const tg__module_class flatten_class = {"flatten", flatten_destroy, flatten_forward};

tg_module *tg_flatten_layer_new(int start_dim, int end_dim) {
  flatten_layer *f = tg__host_calloc(1, sizeof *f);
  if (!f) {
    tg_set_error(TG_ERR_MEMORY, "tg_flatten_layer_new: out of memory");
    return NULL;
  }
  tg__module_init(&f->module, &flatten_class);
  f->start_dim = start_dim;
  f->end_dim = end_dim;
  return &f->module;
}
