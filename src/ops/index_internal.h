/* Shared steps of the indexing ops (src/ops/index.c, index_select.c, topk.c, one_hot.c). */
#ifndef TG_INDEX_INTERNAL_H
#define TG_INDEX_INTERNAL_H

#include <stdint.h>

#include "tg/tensor_ops.h"

/* t, or for a 0-dim t its view of sizes [1] (PyTorch's indexing ops take a 0-dim tensor as
 * one of one element). */
tg_tensor *tg__index_at_least_1d(const tg_tensor *t);

/* zeros(ndim, sizes) of src's dtype and device with src added at index along dim: the
 * scatter_add op without re-checking index (checked when its forward pass ran), so that
 * gather's and topk's backwards are differentiable again. dim >= 0, ndim >= 1. */
tg_tensor *tg__scatter_add_into_zeros(int ndim, const int64_t *sizes, int dim,
                                      const tg_tensor *index, const tg_tensor *src);

/* true when every element of the I64 tensor t is in [0, n); else false with TG_ERR_INDEX
 * "<op>: index[1, 0] = 4 is outside dim 1 of x [0, 4)" (read on the host). */
bool tg__index_check_range(const char *op, const char *arg, const tg_tensor *t, int dim,
                           const char *of, int64_t n);

/* dims that move dim to the end: [0 .. dim-1, dim+1 .. ndim-1, dim]. */
void tg__index_dim_last(int ndim, int dim, int *perm);

#endif
