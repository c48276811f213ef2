/* tg — normalization, variance and dropout, with PyTorch's names and semantics:
 * torch.var/std, F.batch_norm, F.layer_norm, F.group_norm, F.dropout. Every result is
 * scope-owned and differentiable (twice, except where said); bad input is NULL with the
 * error set (status and a message naming function, argument and sizes). */
#ifndef TG_NORM_H
#define TG_NORM_H
#include "tensor_ops.h"
TG_API_BEGIN
#ifdef __cplusplus
extern "C" {
#endif

/* ---- variance and standard deviation (torch.var / torch.std) ----
 * Over the n_dims dims listed in dims (negative ones count from the end; n_dims 0 means
 * every dim, as dim=None does), each at most once. correction: the divisor is
 * max(0, N - correction) for N elements per result; PyTorch's default is 1 (Bessel), 0
 * gives the biased estimate; any non-negative value is allowed, and where the divisor is 0
 * the result is inf, or NaN for 0/0 (N = 1, an empty input), as in PyTorch. keepdim keeps
 * the reduced dims with size 1. x must be F32 or F64. std's gradient is 0 where std is 0
 * (PyTorch's rule), not NaN. Where the divisor is 0 the gradient of var is NaN (PyTorch
 * special-cases it to inf there). Composed from sums: every device, twice differentiable. */
tg_tensor *tg_var(const tg_tensor *x, int n_dims, const int *dims, double correction, bool keepdim);
tg_tensor *tg_std(const tg_tensor *x, int n_dims, const int *dims, double correction, bool keepdim);

/* Options: zero-initialised means PyTorch's defaults. eps (added to the variance under the
 * square root): 0 means 1e-5; momentum (batch_norm's weight of the new batch in the running
 * statistics): 0 means 0.1. Zero itself cannot be spelled 0 here: pass TG_NORM_ZERO (that
 * is -0.0, told apart from +0.0 by its sign) for eps = 0 or momentum = 0. Negative or NaN
 * values are an error. PyTorch's momentum=None (a cumulative average over the batches seen)
 * is the module's business: it passes momentum = 1 / num_batches_tracked each step. */
#define TG_NORM_ZERO (-0.0)

typedef struct tg_batch_norm_options {
  bool training; /* batch statistics (and running-stat updates) vs running statistics */
  double momentum;
  double eps;
} tg_batch_norm_options;

/* F.batch_norm. x: [N, C], [N, C, L] or [N, C, H, W], F32 or F64. running_mean and
 * running_var: [C] of x's dtype and device, or both NULL. weight and bias: [C] or NULL (no
 * affine: 1 and 0).
 * training: normalizes with each channel's batch mean and biased variance; N * L (or
 * N * H * W) must exceed 1, else TG_ERR_SHAPE "Expected more than 1 value per channel when
 * training" as PyTorch raises. When running statistics are given they are updated in place,
 * outside the tape, with running = (1 - momentum) * running + momentum * batch, using the
 * unbiased variance for running_var; both are written only after everything else succeeded
 * (all or nothing).
 * eval: normalizes with running_mean and running_var (required: TG_ERR_ARGUMENT otherwise).
 * Twice differentiable with respect to x, weight and bias; running statistics get no
 * gradient. */
tg_tensor *tg_batch_norm(const tg_tensor *x, tg_tensor *running_mean, tg_tensor *running_var,
                         const tg_tensor *weight, const tg_tensor *bias,
                         tg_batch_norm_options opts);

typedef struct tg_layer_norm_options {
  double eps;
} tg_layer_norm_options;

/* F.layer_norm: normalizes over the last n_normalized dims of x, which must equal
 * normalized_shape (1 <= n_normalized <= x's ndim). weight and bias: normalized_shape, or
 * NULL (no affine). */
tg_tensor *tg_layer_norm(const tg_tensor *x, int n_normalized, const int64_t *normalized_shape,
                         const tg_tensor *weight, const tg_tensor *bias,
                         tg_layer_norm_options opts);

typedef struct tg_group_norm_options {
  double eps;
} tg_group_norm_options;

/* F.group_norm: x [N, C, *] (at least 2-D); the C channels fall into num_groups groups
 * (num_groups must divide C), each normalized over its channels and all spatial elements of
 * one sample. weight and bias: [C] or NULL (no affine). */
tg_tensor *tg_group_norm(const tg_tensor *x, int64_t num_groups, const tg_tensor *weight,
                         const tg_tensor *bias, tg_group_norm_options opts);

/* F.dropout: in training with 0 < p < 1, each element is kept with probability 1 - p and
 * scaled by 1 / (1 - p), zeroed otherwise; the mask comes from gen (NULL: this thread's
 * default generator; tg_rand's Philox draw, so a seeded run repeats on every device). p = 1
 * gives x * 0 (zeros; NaN where x is inf or NaN, as PyTorch). Not training, or p = 0: the
 * identity (a new reference to x itself, as PyTorch returns its input; no random draw).
 * p outside [0, 1] is TG_ERR_ARGUMENT. The backward multiplies by the same scaled mask. */
tg_tensor *tg_dropout(const tg_tensor *x, double p, bool training, tg_generator *gen);

#ifdef __cplusplus
}
#endif
TG_API_END
#endif
