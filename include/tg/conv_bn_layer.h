/* tg — the Conv2dBatchNorm2d layer: a Conv2d (no bias) and a BatchNorm2d run as the fused op
 * of tg/conv_bn.h, with the state of the two torch layers it replaces: children "conv" and
 * "bn", so its state dict holds "conv.weight", "bn.weight", "bn.bias", "bn.running_mean",
 * "bn.running_var" and "bn.num_batches_tracked", the names of a torch module holding
 * nn.Conv2d(bias=False) as .conv and nn.BatchNorm2d as .bn. */
#ifndef TG_CONV_BN_LAYER_H
#define TG_CONV_BN_LAYER_H

#include "conv_bn.h"
#include "module.h"

TG_API_BEGIN
#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_conv2d_bn tg_conv2d_bn;

/* in_channels -> out_channels with a kernel_size x kernel_size kernel; conv: tg_conv2d's
 * options (NULL: defaults; groups must divide both channel counts); bn: eps, momentum and the
 * formula (its training flag is ignored: the module's flag decides). PyTorch's
 * initialization: conv.weight kaiming_uniform(a = sqrt(5)) from gen, bn.weight ones, bn.bias
 * zeros, running_mean zeros, running_var ones, num_batches_tracked a 0-dim I64 zero; opts:
 * the floating dtype and device. A bad argument is an error naming it. */
tg_conv2d_bn *tg_conv2d_bn_new(int64_t in_channels, int64_t out_channels, int64_t kernel_size,
                               const tg_conv2d_opts *conv, tg_conv_bn_options bn, tg_options opts,
                               tg_generator *gen);
void tg_conv2d_bn_free(tg_conv2d_bn *m); /* NULL is a no-op */
tg_module *tg_conv2d_bn_module(tg_conv2d_bn *m);
/* Training (the module's flag): the fused op with batch statistics, the running statistics
 * updated and num_batches_tracked incremented. Evaluation: the running statistics. */
tg_tensor *tg_conv2d_bn_forward(tg_conv2d_bn *m, const tg_tensor *x);

#ifdef __cplusplus
}
#endif
TG_API_END
#endif
