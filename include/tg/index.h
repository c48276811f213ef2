/* tg — indexing along a dim: gather, scatter_add, index_select, index_add, argmax/argmin,
 * topk and one_hot, with PyTorch's names, shapes and semantics.
 *
 * Indices are TG_I64 tensors (any other dtype is TG_ERR_DTYPE). Every index is checked
 * against the size it picks from, negative ones included (PyTorch wraps none of them here):
 * a bad one is TG_ERR_INDEX naming the op, the index's position and its value, e.g.
 * "tg_gather: index[1, 0] = 4 is outside dim 1 of x [0, 4)". The check reads the indices on
 * the host (on CUDA, a copy to the host per call). dim is wrapped as everywhere in tg
 * (-1 is the last dim); a 0-dim x or index is taken as one of sizes [1].
 *
 * Gradients: gather's is a scatter_add into zeros and scatter_add's (for src) a gather, so
 * they are differentiable to any order; index_select and index_add are each other's likewise.
 * Repeated indices add up: in index order on the CPU (the same bits for any thread count), by
 * atomics on CUDA (the order of those sums, and so their last bits, may vary between runs). */
#ifndef TG_INDEX_H
#define TG_INDEX_H

#include "tensor_ops.h"

TG_API_BEGIN
#ifdef __cplusplus
extern "C" {
#endif

/* out[i][j][k] = x[i][index[i][j][k]][k] for dim 1 (likewise for any dim): out has index's
 * sizes; index has x's number of dims, and in every dim but dim no more elements than x. */
tg_tensor *tg_gather(const tg_tensor *x, int dim, const tg_tensor *index);

/* A copy of x with out[i][index[i][j][k]][k] += src[i][j][k] for dim 1 (likewise for any
 * dim), over the elements of index: x, index and src have one number of dims, index is no
 * larger than src in any dim and no larger than x in any dim but dim; src has x's dtype.
 * Differentiable in x and src (src's gradient is zero where index does not reach; PyTorch
 * refuses that case in backward). */
tg_tensor *tg_scatter_add(const tg_tensor *x, int dim, const tg_tensor *index,
                          const tg_tensor *src);

/* The slices of x at index along dim: index is 1-D or 0-dim (then a size-1 dim, as PyTorch);
 * out has x's sizes with dim's replaced by index's element count. */
tg_tensor *tg_index_select(const tg_tensor *x, int dim, const tg_tensor *index);

/* A copy of x with slice index[i] of dim += alpha * slice i of src: index 1-D or 0-dim, src
 * of x's sizes and dtype but index's element count in dim. Differentiable in x and src. */
tg_tensor *tg_index_add(const tg_tensor *x, int dim, const tg_tensor *index, const tg_tensor *src,
                        double alpha);

/* dim value for tg_argmax / tg_argmin: reduce over all elements (PyTorch's dim=None). */
#define TG_ALL_DIMS (-2147483647 - 1)

/* The I64 index of the largest element along dim (keepdim keeps it as size 1), or with
 * dim = TG_ALL_DIMS of the largest of all elements in row-major order (a 0-dim result; with
 * keepdim every dim of size 1, as PyTorch). A NaN counts as the largest; ties give the first.
 * An empty dim (or an empty x with TG_ALL_DIMS) is TG_ERR_SHAPE, as in PyTorch. F32, F64,
 * I64; not differentiable. */
tg_tensor *tg_argmax(const tg_tensor *x, int dim, bool keepdim);
/* The index of the smallest, as tg_argmax (a NaN still wins, as PyTorch's argmin). */
tg_tensor *tg_argmin(const tg_tensor *x, int dim, bool keepdim);

/* The k largest (largest = true) or smallest elements of x along dim: *values (x's dtype,
 * differentiable: its gradient goes back to the picked places, zeros elsewhere) and *indices
 * (I64), both of x's sizes with dim's replaced by k; 0 <= k <= the size of dim. NaN counts
 * as larger than every number (PyTorch). The results come largest first (smallest first
 * when largest = false); equal values, ±0 and NaNs included, come in index order. With
 * sorted = false the order is the same: PyTorch leaves it unspecified, and its tie order
 * even with sorted = true is its sort's, not a documented one, so compare index sets there.
 * values or indices may be NULL when not wanted. F32, F64, I64. */
tg_status tg_topk(const tg_tensor *x, int64_t k, int dim, bool largest, bool sorted,
                  tg_tensor **values, tg_tensor **indices);

/* out[..., c] = 1 where index[...] == c, else 0: I64 of index's sizes plus a last dim of
 * num_classes; num_classes = -1 takes max(index) + 1 (refused for an empty index, as
 * PyTorch). Every index must be in [0, num_classes). index I64 (PyTorch's LongTensor rule). */
tg_tensor *tg_one_hot(const tg_tensor *index, int64_t num_classes);

#ifdef __cplusplus
}
#endif
TG_API_END

#endif
