/* The convolution layers (torch.nn.Conv1d, Conv2d): a weight and an optional bias run through
 * tg_conv1d / tg_conv2d. One struct serves both: a Conv1d is a Conv2d over one dim. */
#include <math.h>

#include "nn/module_impl.h"
#include "nn/params.h"
#include "tensor/error_impl.h"
#include "tensor/host_memory.h"
#include "tensor/tensor_impl.h"
#include "tg/nn.h"

typedef struct conv_layer {
  tg_module module;  /* owns the parameters "weight" and "bias" */
  tg_tensor *weight; /* [out, in / groups, k...]; borrowed from module */
  tg_tensor *bias;   /* [out] or NULL; borrowed */
  tg_conv2d_opts conv2d;
  tg_conv1d_opts conv1d;
} conv_layer;

struct tg_conv2d_layer {
  conv_layer c;
};
struct tg_conv1d_layer {
  conv_layer c;
};

static void conv_destroy(tg_module *m) {
  tg__host_free(TG_MODULE_CONTAINER(m, conv_layer, module));
}
static tg_tensor *conv2d_forward(tg_module *m, const tg_tensor *x) {
  const conv_layer *c = TG_MODULE_CONTAINER(m, conv_layer, module);
  return tg_conv2d(x, c->weight, c->bias, &c->conv2d);
}
static tg_tensor *conv1d_forward(tg_module *m, const tg_tensor *x) {
  const conv_layer *c = TG_MODULE_CONTAINER(m, conv_layer, module);
  return tg_conv1d(x, c->weight, c->bias, &c->conv1d);
}
static const tg__module_class conv2d_class = {"conv2d", conv_destroy, conv2d_forward};
static const tg__module_class conv1d_class = {"conv1d", conv_destroy, conv1d_forward};

/* The settings of an n-dim convolution (n = 1 or 2), as the constructors check them. */
typedef struct conv_settings {
  int n;
  int64_t in, out, kernel[2], stride[2], padding[2], dilation[2], groups;
  tg_conv_padding_mode padding_mode;
  tg_conv_padding_fill fill;
} conv_settings;

/* Each of the n numbers of arg >= min; "<arg>[i]" in the message when n is 2. */
static bool check_each(const char *fn, const char *arg, const int64_t *v, int n, int64_t min,
                       const char *hint) {
  for (int i = 0; i < n; i++) {
    char name[32];
    if (n > 1)
      snprintf(name, sizeof name, "%s[%d]", arg, i);
    else
      snprintf(name, sizeof name, "%s", arg);
    if (!tg__check(v[i] >= min, TG_ERR_ARGUMENT, fn, "%s (%lld) must be >= %lld%s", name,
                   (long long)v[i], (long long)min, hint))
      return false;
  }
  return true;
}

static bool check_settings(const char *fn, const conv_settings *s, tg_options opts) {
  if (!tg__check(s->in >= 1 && s->out >= 1, TG_ERR_ARGUMENT, fn,
                 "in_channels (%lld) and out_channels (%lld) must be >= 1", (long long)s->in,
                 (long long)s->out) ||
      !check_each(fn, "kernel_size", s->kernel, s->n, 1, "") ||
      !check_each(fn, "stride", s->stride, s->n, 0, " (0 means 1)") ||
      !check_each(fn, "padding", s->padding, s->n, 0, "") ||
      !check_each(fn, "dilation", s->dilation, s->n, 0, " (0 means 1)") ||
      !tg__check(s->groups >= 0, TG_ERR_ARGUMENT, fn, "groups (%lld) must be >= 1 (0 means 1)",
                 (long long)s->groups))
    return false;
  int64_t groups = s->groups ? s->groups : 1;
  if (!tg__check(s->in % groups == 0 && s->out % groups == 0, TG_ERR_ARGUMENT, fn,
                 "groups (%lld) must divide in_channels (%lld) and out_channels (%lld)",
                 (long long)groups, (long long)s->in, (long long)s->out) ||
      !tg__check(s->padding_mode >= TG_CONV_PADDING_EXPLICIT &&
                     s->padding_mode <= TG_CONV_PADDING_SAME,
                 TG_ERR_ARGUMENT, fn, "padding_mode (%d) is not a tg_conv_padding_mode",
                 (int)s->padding_mode) ||
      !tg__check(s->fill >= TG_CONV_FILL_ZEROS && s->fill <= TG_CONV_FILL_CIRCULAR, TG_ERR_ARGUMENT,
                 fn, "fill (%d) is not a tg_conv_padding_fill", (int)s->fill))
    return false;
  for (int i = 0; i < s->n; i++)
    if (!tg__check(s->padding_mode != TG_CONV_PADDING_SAME || s->stride[i] <= 1, TG_ERR_ARGUMENT,
                   fn, "padding \"same\" is not supported for strided convolutions (stride%s%lld)",
                   s->n > 1 ? (i ? "[1] " : "[0] ") : " ", (long long)s->stride[i]))
      return false;
  return tg__check(tg_dtype_is_floating(opts.dtype), TG_ERR_DTYPE, fn,
                   "dtype %s is not floating (F32 or F64)", tg_dtype_name(opts.dtype));
}

/* Allocates the layer of class cls and its parameters, PyTorch's reset_parameters. */
static conv_layer *conv_new(const char *fn, const tg__module_class *cls, const conv_settings *s,
                            bool bias, tg_options opts, tg_generator *gen) {
  if (!check_settings(fn, s, opts)) return NULL;
  conv_layer *c = tg__host_calloc(1, sizeof *c);
  if (!c) {
    tg_set_error(TG_ERR_MEMORY, "%s: out of memory", fn);
    return NULL;
  }
  tg__module_init(&c->module, cls);
  int64_t groups = s->groups ? s->groups : 1;
  int64_t sizes[4] = {s->out, s->in / groups, s->kernel[0], s->kernel[1]};
  int64_t fan_in = s->in / groups * s->kernel[0] * (s->n > 1 ? s->kernel[1] : 1);
  tg_tensor *w = tg__nn_kaiming_uniform_param(2 + s->n, sizes, sqrt(5.0), opts, gen);
  tg_tensor *b = w && bias
                     ? tg__nn_uniform_param(TG_SHAPE(s->out), 1.0 / sqrt((double)fan_in), opts, gen)
                     : NULL;
  tg_status st = w && (b || !bias) ? TG_OK : tg_last_error();
  if (st == TG_OK) st = tg_module_register_parameter(&c->module, "weight", w);
  if (st == TG_OK && b) st = tg_module_register_parameter(&c->module, "bias", b);
  tg_release(w); /* the module holds its own references */
  tg_release(b);
  if (st != TG_OK) {
    tg_module_free(&c->module);
    tg__error_prefix(fn);
    return NULL;
  }
  c->weight = w;
  c->bias = b;
  return c;
}

tg_conv2d_layer *tg_conv2d_layer_new(int64_t in_channels, int64_t out_channels,
                                     const int64_t kernel_size[2], const tg_conv2d_opts *conv,
                                     bool bias, tg_options opts, tg_generator *gen) {
  static const char *fn = "tg_conv2d_layer_new";
  if (!tg__check_not_null(fn, "kernel_size", kernel_size)) return NULL;
  tg_conv2d_opts o = conv ? *conv : (tg_conv2d_opts){0};
  conv_settings s = {.n = 2,
                     .in = in_channels,
                     .out = out_channels,
                     .groups = o.groups,
                     .padding_mode = o.padding_mode,
                     .fill = o.fill};
  for (int i = 0; i < 2; i++) {
    s.kernel[i] = kernel_size[i];
    s.stride[i] = o.stride[i];
    s.padding[i] = o.padding[i];
    s.dilation[i] = o.dilation[i];
  }
  conv_layer *c = conv_new(fn, &conv2d_class, &s, bias, opts, gen);
  if (!c) return NULL;
  c->conv2d = o;
  return (tg_conv2d_layer *)c;
}

tg_conv1d_layer *tg_conv1d_layer_new(int64_t in_channels, int64_t out_channels, int64_t kernel_size,
                                     const tg_conv1d_opts *conv, bool bias, tg_options opts,
                                     tg_generator *gen) {
  tg_conv1d_opts o = conv ? *conv : (tg_conv1d_opts){0};
  conv_settings s = {.n = 1,
                     .in = in_channels,
                     .out = out_channels,
                     .kernel = {kernel_size, 1},
                     .stride = {o.stride},
                     .padding = {o.padding},
                     .dilation = {o.dilation},
                     .groups = o.groups,
                     .padding_mode = o.padding_mode,
                     .fill = o.fill};
  conv_layer *c = conv_new("tg_conv1d_layer_new", &conv1d_class, &s, bias, opts, gen);
  if (!c) return NULL;
  c->conv1d = o;
  return (tg_conv1d_layer *)c;
}

void tg_conv2d_layer_free(tg_conv2d_layer *c) {
  if (c) tg__module_free_typed(&c->c.module, "tg_conv2d_layer_free", "conv2d layer");
}
void tg_conv1d_layer_free(tg_conv1d_layer *c) {
  if (c) tg__module_free_typed(&c->c.module, "tg_conv1d_layer_free", "conv1d layer");
}
tg_module *tg_conv2d_layer_module(tg_conv2d_layer *c) { return c ? &c->c.module : NULL; }
tg_module *tg_conv1d_layer_module(tg_conv1d_layer *c) { return c ? &c->c.module : NULL; }
tg_tensor *tg_conv2d_layer_weight(const tg_conv2d_layer *c) { return c ? c->c.weight : NULL; }
tg_tensor *tg_conv2d_layer_bias(const tg_conv2d_layer *c) { return c ? c->c.bias : NULL; }
tg_tensor *tg_conv1d_layer_weight(const tg_conv1d_layer *c) { return c ? c->c.weight : NULL; }
tg_tensor *tg_conv1d_layer_bias(const tg_conv1d_layer *c) { return c ? c->c.bias : NULL; }
