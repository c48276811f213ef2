/* Shared by the normalization family (norm.c, norm_front.c, var.c, dropout.c). */
#ifndef TG_OPS_NORM_INTERNAL_H
#define TG_OPS_NORM_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "tg/tensor.h"

/* x summed over n dims (ascending, distinct, in range), recorded on the tape: one
 * tg_sum_dim per dim, from the last, so the earlier dims keep their numbers. */
tg_tensor *tg__sum_dims(const tg_tensor *x, int n, const int *dims, bool keepdim);

/* The layout of one normalize_groups call (src/ops/def/norm.def): x read as [A, R, C, K],
 * G groups, channel c's weight and bias. */
typedef struct tg_norm_layout {
  int64_t A, R, C, K, G;
} tg_norm_layout;

/* Runs normalize_groups: y, and when mean/var are not NULL the per-group mean and biased
 * var (differentiable too). weight and bias: [C] of x's dtype and device. */
tg_tensor *tg__normalize_groups(const tg_tensor *x, const tg_tensor *weight, const tg_tensor *bias,
                                tg_norm_layout layout, double eps, tg_tensor **mean,
                                tg_tensor **var);

#endif
