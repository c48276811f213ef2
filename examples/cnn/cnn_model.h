/* The small CNN that examples/train_cnn.c trains, in a file of its own so that the PyTorch
 * agreement test (tests/nn/cnn_torch_tool.c) runs this very code:
 *
 *   x [N, C, H, W] -> conv 3x3 (padding 1, no bias) -> batch norm -> ReLU -> max pool 2
 *                  -> conv 3x3 (padding 1, no bias) -> batch norm -> ReLU -> max pool 2
 *                  -> flatten -> linear -> logits [N, classes]
 *
 * The module's state has PyTorch's names for such a model: conv1.weight, bn1.weight,
 * bn1.bias, bn1.running_mean, bn1.running_var, conv2.*, bn2.*, fc.weight, fc.bias (a
 * torch.nn.Module with attributes conv1, bn1, conv2, bn2, fc loads it; its extra
 * num_batches_tracked buffers are not used with momentum 0.1). Initialized as PyTorch's
 * layers are: conv weights kaiming_uniform(a = sqrt(5)), batch norm weight 1 and bias 0,
 * running mean 0 and variance 1, Linear's default. Built on tg's public API only. */
#ifndef CNN_MODEL_H
#define CNN_MODEL_H

#include "tg/tg.h"

typedef enum cnn_conv_bn {
  CNN_COMPOSED, /* tg_conv2d then tg_batch_norm: the graph keeps both ops' saved tensors */
  CNN_FUSED,    /* the fused op: keeps only the conv's input and weight, recomputes the conv */
} cnn_conv_bn;

typedef struct cnn_sizes {
  int64_t channels, height, width; /* of an image; height and width divisible by 4 */
  int64_t c1, c2;                  /* the two convolutions' output channels */
  int64_t classes;
} cnn_sizes;

typedef struct cnn_model {
  tg_module *module; /* owns everything below */
  cnn_sizes sizes;
  cnn_conv_bn conv_bn;
  double bn_momentum, bn_eps; /* PyTorch's BatchNorm2d defaults: 0.1, 1e-5 */
  /* borrowed from module (loads copy into them in place, so they stay valid) */
  tg_tensor *conv_weight[2], *bn_weight[2], *bn_bias[2], *running_mean[2], *running_var[2];
  tg_linear *fc;
} cnn_model;

/* NULL (with tg's error) on bad sizes or out of memory. init: the generator the weights
 * are drawn from (NULL: the thread's default). */
cnn_model *cnn_model_new(cnn_sizes sizes, cnn_conv_bn conv_bn, tg_dtype dtype, tg_generator *init);
void cnn_model_free(cnn_model *m); /* NULL is a no-op */

/* The logits [N, classes] of images x [N, channels, height, width] (owned by the innermost
 * scope). In training mode (tg_module_train) batch norm uses the batch's statistics and
 * updates the running ones; in eval mode it uses the running ones. */
tg_tensor *cnn_model_logits(cnn_model *m, const tg_tensor *x);

#endif
