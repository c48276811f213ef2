/* The Conv2dBatchNorm2d layer (tg/conv_bn_layer.h): children "conv" (weight) and "bn"
 * (weight, bias and the running-statistics buffers), run as one fused op. Tensors are looked
 * up by name at each forward, so tg_module_to_device and state loading need nothing here. */
#include <math.h>

#include "nn/module_impl.h"
#include "nn/params.h"
#include "tensor/error_impl.h"
#include "tensor/host_memory.h"
#include "tensor/tensor_impl.h"
#include "tg/autograd.h"
#include "tg/conv_bn_layer.h"
#include "tg/ops.h"
#include "tg/tensor_ops.h"

struct tg_conv2d_bn {
  tg_module module; /* owns the children "conv" and "bn" */
  tg_conv2d_opts conv;
  tg_conv_bn_options bn;
};

static void conv2d_bn_destroy(tg_module *m) {
  tg__host_free(TG_MODULE_CONTAINER(m, tg_conv2d_bn, module));
}
static tg_tensor *conv2d_bn_module_forward(tg_module *m, const tg_tensor *x) {
  return tg_conv2d_bn_forward(TG_MODULE_CONTAINER(m, tg_conv2d_bn, module), x);
}
static const tg__module_class conv2d_bn_class = {"conv2d_batch_norm", conv2d_bn_destroy,
                                                 conv2d_bn_module_forward};

/* A [c] leaf of value v that requires grad, registered as name. */
static tg_status register_constant(tg_module *m, const char *name, int64_t c, double v,
                                   tg_options opts, bool parameter) {
  tg_scope s = tg_scope_begin();
  tg_tensor *t = tg_full(1, &c, v, opts);
  tg_status st = t ? TG_OK : tg_last_error();
  if (st == TG_OK)
    st = parameter ? tg_module_register_parameter(m, name, t)
                   : tg_module_register_buffer(m, name, t);
  tg_scope_end(s);
  return st;
}

/* The children and their tensors, PyTorch's initialization in its order of draws. */
static tg_status build(tg_conv2d_bn *l, int64_t in_channels, int64_t out_channels,
                       int64_t kernel_size, tg_options opts, tg_generator *gen) {
  tg_module *conv = tg_module_new("conv2d");
  if (!conv) return tg_last_error();
  tg_status st = tg_module_add_child(&l->module, "conv", conv);
  if (st != TG_OK) {
    tg_module_free(conv);
    return st;
  }
  const int64_t groups = l->conv.groups ? l->conv.groups : 1;
  tg_tensor *w = tg__nn_kaiming_uniform_param(
      4, (const int64_t[]){out_channels, in_channels / groups, kernel_size, kernel_size}, sqrt(5.0),
      opts, gen);
  st = w ? tg_module_register_parameter(conv, "weight", w) : tg_last_error();
  tg_release(w);
  tg_module *bn = st == TG_OK ? tg_module_new("batch_norm2d") : NULL;
  if (st == TG_OK && !bn) st = tg_last_error();
  if (st == TG_OK && (st = tg_module_add_child(&l->module, "bn", bn)) != TG_OK) tg_module_free(bn);
  if (st == TG_OK) st = register_constant(bn, "weight", out_channels, 1.0, opts, true);
  if (st == TG_OK) st = register_constant(bn, "bias", out_channels, 0.0, opts, true);
  if (st == TG_OK) st = register_constant(bn, "running_mean", out_channels, 0.0, opts, false);
  if (st == TG_OK) st = register_constant(bn, "running_var", out_channels, 1.0, opts, false);
  if (st == TG_OK) {
    tg_scope s = tg_scope_begin();
    tg_tensor *count = tg_zeros(0, NULL, (tg_options){.dtype = TG_I64, .device = opts.device});
    st = count ? tg_module_register_buffer(bn, "num_batches_tracked", count) : tg_last_error();
    tg_scope_end(s);
  }
  return st;
}

tg_conv2d_bn *tg_conv2d_bn_new(int64_t in_channels, int64_t out_channels, int64_t kernel_size,
                               const tg_conv2d_opts *conv, tg_conv_bn_options bn, tg_options opts,
                               tg_generator *gen) {
  static const char *const fn = "tg_conv2d_bn_new";
  const int64_t groups = conv && conv->groups ? conv->groups : 1;
  if (in_channels < 1 || out_channels < 1 || kernel_size < 1 || groups < 1 ||
      in_channels % groups || out_channels % groups) {
    tg_set_error(TG_ERR_ARGUMENT,
                 "%s: in_channels (%lld), out_channels (%lld) and kernel_size (%lld) must be >= 1 "
                 "and groups (%lld) must divide both channel counts",
                 fn, (long long)in_channels, (long long)out_channels, (long long)kernel_size,
                 (long long)groups);
    return NULL;
  }
  if (!tg_dtype_is_floating(opts.dtype)) {
    tg_set_error(TG_ERR_DTYPE, "%s: dtype %s is not floating (F32 or F64)", fn,
                 tg_dtype_name(opts.dtype));
    return NULL;
  }
  if (bn.formula != TG_CONV_BN_PYTORCH && bn.formula != TG_CONV_BN_REFERENCE) {
    tg_set_error(TG_ERR_ARGUMENT, "%s: formula %d is not a tg_conv_bn_formula", fn,
                 (int)bn.formula);
    return NULL;
  }
  tg_conv2d_bn *l = tg__host_calloc(1, sizeof *l);
  if (!l) {
    tg_set_error(TG_ERR_MEMORY, "%s: out of memory", fn);
    return NULL;
  }
  tg__module_init(&l->module, &conv2d_bn_class);
  l->conv = conv ? *conv : (tg_conv2d_opts){0};
  l->bn = bn;
  opts.requires_grad = false;
  if (build(l, in_channels, out_channels, kernel_size, opts, gen) != TG_OK) {
    tg_module_free(&l->module);
    tg__error_prefix(fn);
    return NULL;
  }
  return l;
}

void tg_conv2d_bn_free(tg_conv2d_bn *m) {
  if (!m) return;
  tg__module_free_typed(&m->module, "tg_conv2d_bn_free", "conv2d_batch_norm");
}

tg_module *tg_conv2d_bn_module(tg_conv2d_bn *m) { return m ? &m->module : NULL; }

tg_tensor *tg_conv2d_bn_forward(tg_conv2d_bn *m, const tg_tensor *x) {
  static const char *const fn = "tg_conv2d_bn_forward";
  if (!m) {
    tg_set_error(TG_ERR_ARGUMENT, "%s: m is NULL", fn);
    return NULL;
  }
  const tg_module *mod = &m->module;
  tg_conv_bn_options opts = m->bn;
  opts.training = tg_module_is_training(mod);
  tg_tensor *count = tg_module_find(mod, "bn.num_batches_tracked");
  tg_tensor *y =
      tg_conv2d_batch_norm(x, tg_module_find(mod, "conv.weight"), tg_module_find(mod, "bn.weight"),
                           tg_module_find(mod, "bn.bias"), tg_module_find(mod, "bn.running_mean"),
                           tg_module_find(mod, "bn.running_var"), &m->conv, opts);
  if (y && opts.training && count) { /* after the op succeeded, outside the tape */
    tg_scope s = tg_scope_begin();
    tg_no_grad_begin();
    tg_tensor *next = tg_add_scalar(count, 1);
    const tg_status st = next ? tg_copy_(count, next) : tg_last_error();
    tg_no_grad_end();
    tg_scope_end(s);
    if (st != TG_OK) y = NULL;
  }
  if (!y) tg__error_prefix(fn);
  return y;
}
