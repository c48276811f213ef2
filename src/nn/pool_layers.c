/* The pooling layers (torch.nn.MaxPool2d, AvgPool2d, AdaptiveAvgPool2d): their settings,
 * checked at construction, and the op of tg/pool.h. No parameters; train and eval alike. */
#include "nn/module_impl.h"
#include "tensor/error_impl.h"
#include "tensor/host_memory.h"
#include "tensor/tensor_impl.h"
#include "tg/nn.h"

typedef struct pool_layer {
  tg_module module;
  int64_t kernel[2]; /* the adaptive pool's output size */
  tg_max_pool2d_options max;
  tg_avg_pool2d_options avg;
} pool_layer;

static void pool_destroy(tg_module *m) {
  tg__host_free(TG_MODULE_CONTAINER(m, pool_layer, module));
}

static tg_tensor *max_pool2d_forward(tg_module *m, const tg_tensor *x) {
  const pool_layer *p = TG_MODULE_CONTAINER(m, pool_layer, module);
  return tg_max_pool2d(x, p->kernel, p->max);
}
static tg_tensor *avg_pool2d_forward(tg_module *m, const tg_tensor *x) {
  const pool_layer *p = TG_MODULE_CONTAINER(m, pool_layer, module);
  return tg_avg_pool2d(x, p->kernel, p->avg);
}
/* -1 in the output size keeps the input's size in that dim (PyTorch's None). */
static tg_tensor *adaptive_avg_pool2d_forward(tg_module *m, const tg_tensor *x) {
  const pool_layer *p = TG_MODULE_CONTAINER(m, pool_layer, module);
  int64_t size[2] = {p->kernel[0], p->kernel[1]};
  for (int i = 0; i < 2; i++)
    if (size[i] < 0 && x->ndim >= 2) size[i] = x->sizes[x->ndim - 2 + i];
  return tg_adaptive_avg_pool2d(x, size);
}
static const tg__module_class max_pool2d_class = {"max_pool2d", pool_destroy, max_pool2d_forward};
static const tg__module_class avg_pool2d_class = {"avg_pool2d", pool_destroy, avg_pool2d_forward};
static const tg__module_class adaptive_avg_pool2d_class = {"adaptive_avg_pool2d", pool_destroy,
                                                           adaptive_avg_pool2d_forward};

/* kernel >= 1; stride and dilation >= 0 and not 0 in one dim only (both 0: the default);
 * 0 <= padding <= kernel / 2, as the ops require. dilation NULL for the average pool. */
static bool check_window(const char *fn, const int64_t *kernel, const int64_t *stride,
                         const int64_t *padding, const int64_t *dilation) {
  if (!tg__check_not_null(fn, "kernel_size", kernel)) return false;
  for (int i = 0; i < 2; i++)
    if (!tg__check(kernel[i] >= 1, TG_ERR_ARGUMENT, fn, "kernel_size[%d] (%lld) must be >= 1", i,
                   (long long)kernel[i]) ||
        !tg__check(stride[i] >= 0, TG_ERR_ARGUMENT, fn,
                   "stride[%d] (%lld) must be >= 1 ({0, 0}: the kernel size)", i,
                   (long long)stride[i]) ||
        !tg__check(!dilation || dilation[i] >= 0, TG_ERR_ARGUMENT, fn,
                   "dilation[%d] (%lld) must be >= 1 ({0, 0}: 1)", i,
                   (long long)(dilation ? dilation[i] : 0)) ||
        !tg__check(padding[i] >= 0 && padding[i] <= kernel[i] / 2, TG_ERR_ARGUMENT, fn,
                   "padding[%d] (%lld) must be >= 0 and at most half the kernel size (%lld)", i,
                   (long long)padding[i], (long long)kernel[i]))
      return false;
  return tg__check((stride[0] == 0) == (stride[1] == 0), TG_ERR_ARGUMENT, fn,
                   "stride {%lld, %lld} has one 0: give both numbers, or {0, 0} for the kernel "
                   "size",
                   (long long)stride[0], (long long)stride[1]) &&
         tg__check(!dilation || (dilation[0] == 0) == (dilation[1] == 0), TG_ERR_ARGUMENT, fn,
                   "dilation {%lld, %lld} has one 0: give both numbers, or {0, 0} for 1",
                   (long long)(dilation ? dilation[0] : 0),
                   (long long)(dilation ? dilation[1] : 0));
}

static pool_layer *pool_new(const char *fn, const tg__module_class *cls, const int64_t size[2]) {
  pool_layer *p = tg__host_calloc(1, sizeof *p);
  if (!p) {
    tg_set_error(TG_ERR_MEMORY, "%s: out of memory", fn);
    return NULL;
  }
  tg__module_init(&p->module, cls);
  p->kernel[0] = size[0];
  p->kernel[1] = size[1];
  return p;
}

tg_module *tg_max_pool2d_layer_new(const int64_t kernel_size[2], tg_max_pool2d_options opts) {
  static const char *fn = "tg_max_pool2d_layer_new";
  if (!check_window(fn, kernel_size, opts.stride, opts.padding, opts.dilation)) return NULL;
  pool_layer *p = pool_new(fn, &max_pool2d_class, kernel_size);
  if (!p) return NULL;
  p->max = opts;
  return &p->module;
}

tg_module *tg_avg_pool2d_layer_new(const int64_t kernel_size[2], tg_avg_pool2d_options opts) {
  static const char *fn = "tg_avg_pool2d_layer_new";
  if (!check_window(fn, kernel_size, opts.stride, opts.padding, NULL) ||
      !tg__check(opts.divisor_override >= 0, TG_ERR_ARGUMENT, fn,
                 "divisor_override (%lld) must be >= 1 (0: none)",
                 (long long)opts.divisor_override))
    return NULL;
  pool_layer *p = pool_new(fn, &avg_pool2d_class, kernel_size);
  if (!p) return NULL;
  p->avg = opts;
  return &p->module;
}

tg_module *tg_adaptive_avg_pool2d_layer_new(const int64_t output_size[2]) {
  static const char *fn = "tg_adaptive_avg_pool2d_layer_new";
  if (!tg__check_not_null(fn, "output_size", output_size)) return NULL;
  for (int i = 0; i < 2; i++)
    if (!tg__check(output_size[i] >= -1, TG_ERR_ARGUMENT, fn,
                   "output_size[%d] (%lld) must be >= 0, or -1 for the input's size", i,
                   (long long)output_size[i]))
      return NULL;
  pool_layer *p = pool_new(fn, &adaptive_avg_pool2d_class, output_size);
  return p ? &p->module : NULL;
}
