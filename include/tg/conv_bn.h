/* tg — the fused Conv2d + BatchNorm2d of training (the reference's "Fusing Convolution and
 * Batch Normalization", applied to memory): one op that convolves and normalizes, keeping for
 * backward only the convolution's input and weight (and a few per-channel vectors), and
 * recomputing the convolution in backward. The composed tg_conv2d -> batch norm keeps the
 * convolution's output as well, a tensor as large as the result.
 *
 * Results are scope-owned; NULL on error with a status and a message naming the function, the
 * argument and the sizes. Once differentiable: a double backward through it is an error. */
#ifndef TG_CONV_BN_H
#define TG_CONV_BN_H

#include "conv.h"

TG_API_BEGIN
#ifdef __cplusplus
extern "C" {
#endif

/* Which normalization the op computes, per channel c of the conv output y:
 * TG_CONV_BN_PYTORCH: F.batch_norm in training, (y - mean) / sqrt(var + eps) with the biased
 *   batch variance, then * weight + bias.
 * TG_CONV_BN_REFERENCE: the reference's formula, (y - mean) / (sqrt(var) + eps) with the
 *   unbiased (Bessel) batch variance and eps outside the square root; then * weight + bias
 *   (the reference has no affine: pass NULL for both). It departs from PyTorch's batch_norm
 *   in both: PyTorch normalizes by the biased variance and adds eps under the square root
 *   (the unbiased one only feeds running_var); the reference also keeps no running
 *   statistics (here they are updated as PyTorch's would be) and fixes stride 1, no padding
 *   and eps 1e-3 (here the geometry is general and eps defaults to 1e-3). */
typedef enum tg_conv_bn_formula {
  TG_CONV_BN_PYTORCH = 0,
  TG_CONV_BN_REFERENCE,
} tg_conv_bn_formula;

/* Zero-initialised: PyTorch's defaults. eps: 0 means 1e-5 (TG_CONV_BN_PYTORCH) or 1e-3 (the
 * reference's); pass -0.0 for eps = 0 itself. momentum: 0 means 0.1; -0.0 for 0. Negative or
 * NaN values are an error. */
typedef struct tg_conv_bn_options {
  bool training; /* batch statistics (and running-stat updates) vs running statistics */
  tg_conv_bn_formula formula;
  double eps;
  double momentum;
} tg_conv_bn_options;

/* batch_norm(conv2d(x, w, NULL, conv), running_mean, running_var, weight, bias) in one op.
 * x [N, C_in, H, W] (batched only), w [C_out, C_in / groups, kh, kw], F32 or F64, one device;
 * conv: tg_conv2d's options (NULL: defaults; stride, padding, "same"/"valid", dilation,
 * groups). No conv bias: batch norm in training cancels it. weight, bias: [C_out] or NULL (1
 * and 0). running_mean, running_var: [C_out] or both NULL.
 * training: normalizes with the batch statistics (N * H_out * W_out must exceed 1, else
 * TG_ERR_SHAPE as PyTorch, except that an empty batch, N = 0, gives an empty output and
 * leaves the running statistics alone, as PyTorch's batch_norm does); the running statistics, when
 * given, are updated in place outside the tape with running = (1 - momentum) * running + momentum *
 * batch, the unbiased batch variance for running_var, both written only after everything else
 * succeeded. eval: conv2d, then (y - running_mean) / sqrt(running_var + eps) * weight + bias,
 * composed of tg ops (twice differentiable; running statistics required, TG_ERR_ARGUMENT otherwise;
 * the reference formula is training-only: TG_ERR_ARGUMENT). */
tg_tensor *tg_conv2d_batch_norm(const tg_tensor *x, const tg_tensor *w, const tg_tensor *weight,
                                const tg_tensor *bias, tg_tensor *running_mean,
                                tg_tensor *running_var, const tg_conv2d_opts *conv,
                                tg_conv_bn_options opts);

/* The same computation composed of tg ops (tg_conv2d, then the normalization from sums and
 * pointwise ops, each recorded on the tape): the reference that the fused op is checked and
 * measured against. Same arguments and errors, training only (TG_ERR_ARGUMENT otherwise);
 * running statistics are updated as the fused op does. */
tg_tensor *tg_conv2d_batch_norm_composed(const tg_tensor *x, const tg_tensor *w,
                                         const tg_tensor *weight, const tg_tensor *bias,
                                         tg_tensor *running_mean, tg_tensor *running_var,
                                         const tg_conv2d_opts *conv, tg_conv_bn_options opts);

#ifdef __cplusplus
}
#endif
TG_API_END
#endif
