/* The CNN of cnn_model.h. */
#include "cnn_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* The fused Conv2d+BatchNorm2d (tg/conv_bn.h): the same contract as the composed path below
 * (x [N, C_in, H, W], weight [C_out, C_in, 3, 3], padding 1, no conv bias, PyTorch's
 * batch_norm with the training flag, running stats updated in place), but its graph keeps
 * only x and the weight and recomputes the convolution in backward. */
static tg_tensor *cnn_fused_conv_bn(const tg_tensor *x, const tg_tensor *weight,
                                    const tg_tensor *bn_weight, const tg_tensor *bn_bias,
                                    tg_tensor *running_mean, tg_tensor *running_var,
                                    tg_batch_norm_options bn) {
  const tg_conv2d_opts conv = {.padding = {1, 1}};
  const tg_conv_bn_options opts = {.training = bn.training,
                                   .formula = TG_CONV_BN_PYTORCH,
                                   .eps = bn.eps,
                                   .momentum = bn.momentum};
  return tg_conv2d_batch_norm(x, weight, bn_weight, bn_bias, running_mean, running_var, &conv,
                              opts);
}

static tg_tensor *composed_conv_bn(const tg_tensor *x, const tg_tensor *weight,
                                   const tg_tensor *bn_weight, const tg_tensor *bn_bias,
                                   tg_tensor *running_mean, tg_tensor *running_var,
                                   tg_batch_norm_options bn) {
  const tg_conv2d_opts conv = {.padding = {1, 1}};
  return tg_batch_norm(tg_conv2d(x, weight, NULL, &conv), running_mean, running_var, bn_weight,
                       bn_bias, bn);
}

/* conv -> batch norm -> ReLU -> max pool 2 */
static tg_tensor *block(cnn_model *m, int i, const tg_tensor *x) {
  tg_batch_norm_options bn = {
      .training = tg_module_is_training(m->module), .momentum = m->bn_momentum, .eps = m->bn_eps};
  tg_tensor *y = (m->conv_bn == CNN_FUSED ? cnn_fused_conv_bn : composed_conv_bn)(
      x, m->conv_weight[i], m->bn_weight[i], m->bn_bias[i], m->running_mean[i], m->running_var[i],
      bn);
  const int64_t window[2] = {2, 2};
  return tg_max_pool2d(tg_relu(y), window, (tg_max_pool2d_options){.ceil_mode = false});
}

tg_tensor *cnn_model_logits(cnn_model *m, const tg_tensor *x) {
  tg_tensor *h = block(m, 1, block(m, 0, x));
  const cnn_sizes *s = &m->sizes;
  int64_t n = h ? tg_size(h, 0) : 0;
  return tg_linear_forward(m->fc,
                           tg_reshape(h, TG_SHAPE(n, s->c2 * (s->height / 4) * (s->width / 4))));
}

static tg_tensor *forward(tg_module *module, const tg_tensor *x, void *user) {
  (void)module;
  return cnn_model_logits(user, x);
}

/* A child module "name" of m->module holding the given tensors; returns the child. */
static tg_module *add_layer(cnn_model *m, const char *name, const char *type) {
  tg_module *child = tg_module_new(type);
  if (child && tg_module_add_child(m->module, name, child) != TG_OK) {
    tg_module_free(child);
    return NULL;
  }
  return child;
}

/* conv{i+1} and bn{i+1}: in -> out channels. */
static tg_status add_conv_bn(cnn_model *m, int i, int64_t in, int64_t out, tg_options o,
                             tg_generator *init) {
  char conv_name[8], bn_name[8];
  snprintf(conv_name, sizeof conv_name, "conv%d", i + 1);
  snprintf(bn_name, sizeof bn_name, "bn%d", i + 1);
  tg_module *conv = add_layer(m, conv_name, "conv2d");
  tg_module *bn = conv ? add_layer(m, bn_name, "batch_norm2d") : NULL;
  if (!bn) return tg_last_error();
  tg_scope sc = tg_scope_begin(); /* the module keeps the only references */
  m->conv_weight[i] = tg_empty(TG_SHAPE(out, in, 3, 3), o);
  m->bn_weight[i] = tg_ones(TG_SHAPE(out), o);
  m->bn_bias[i] = tg_zeros(TG_SHAPE(out), o);
  m->running_mean[i] = tg_zeros(TG_SHAPE(out), o);
  m->running_var[i] = tg_ones(TG_SHAPE(out), o);
  tg_status st = m->conv_weight[i] && m->bn_weight[i] && m->bn_bias[i] && m->running_mean[i] &&
                         m->running_var[i]
                     ? TG_OK
                     : tg_last_error();
  /* torch.nn.Conv2d's reset_parameters */
  if (st == TG_OK)
    st = tg_init_kaiming_uniform_(m->conv_weight[i], sqrt(5.0), TG_FAN_IN, TG_NL_LEAKY_RELU, init);
  if (st == TG_OK) st = tg_module_register_parameter(conv, "weight", m->conv_weight[i]);
  if (st == TG_OK) st = tg_module_register_parameter(bn, "weight", m->bn_weight[i]);
  if (st == TG_OK) st = tg_module_register_parameter(bn, "bias", m->bn_bias[i]);
  if (st == TG_OK) st = tg_module_register_buffer(bn, "running_mean", m->running_mean[i]);
  if (st == TG_OK) st = tg_module_register_buffer(bn, "running_var", m->running_var[i]);
  tg_scope_end(sc);
  return st;
}

cnn_model *cnn_model_new(cnn_sizes s, cnn_conv_bn conv_bn, tg_dtype dtype, tg_generator *init) {
  if (s.channels < 1 || s.c1 < 1 || s.c2 < 1 || s.classes < 1 || s.height < 4 || s.width < 4 ||
      s.height % 4 || s.width % 4) {
    tg_set_error(TG_ERR_ARGUMENT,
                 "cnn_model_new: sizes channels %lld, %lldx%lld images, c1 %lld, c2 %lld, "
                 "classes %lld: all positive, height and width multiples of 4",
                 (long long)s.channels, (long long)s.height, (long long)s.width, (long long)s.c1,
                 (long long)s.c2, (long long)s.classes);
    return NULL;
  }
  cnn_model *m = calloc(1, sizeof *m);
  if (!m) {
    tg_set_error(TG_ERR_MEMORY, "cnn_model_new: out of memory");
    return NULL;
  }
  *m = (cnn_model){.sizes = s, .conv_bn = conv_bn, .bn_momentum = 0.1, .bn_eps = 1e-5};
  tg_options o = {.dtype = dtype};
  m->module = tg_module_new("cnn");
  tg_status st = m->module ? tg_module_set_forward(m->module, forward, m) : tg_last_error();
  if (st == TG_OK) st = add_conv_bn(m, 0, s.channels, s.c1, o, init);
  if (st == TG_OK) st = add_conv_bn(m, 1, s.c1, s.c2, o, init);
  if (st == TG_OK) {
    m->fc = tg_linear_new(s.c2 * (s.height / 4) * (s.width / 4), s.classes, true, o, init);
    st = m->fc ? tg_module_add_child(m->module, "fc", tg_linear_module(m->fc)) : tg_last_error();
    if (st != TG_OK) tg_linear_free(m->fc);
  }
  if (st != TG_OK) {
    cnn_model_free(m);
    return NULL;
  }
  return m;
}

void cnn_model_free(cnn_model *m) {
  if (!m) return;
  tg_module_free(m->module);
  free(m);
}
