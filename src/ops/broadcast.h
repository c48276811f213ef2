/* NumPy broadcasting of shapes, shared by every op that combines tensors elementwise. */
#ifndef TG_BROADCAST_H
#define TG_BROADCAST_H

#include "tensor/tensor_impl.h"

/* The broadcast of shapes a and b (right-aligned; a size 1 stretches) into out/out_ndim.
 * On failure records TG_ERR_SHAPE as
 * "<op>: <a_name> is [2, 3] and <b_name> is [4]: sizes are not broadcastable at dim 1"
 * (dim numbered in the result) and returns false. */
bool tg__broadcast_shapes(const char *op, const char *a_name, int a_ndim, const int64_t *a_sizes,
                          const char *b_name, int b_ndim, const int64_t *b_sizes, int *out_ndim,
                          int64_t *out_sizes);

/* True if shape src broadcasts to shape dst without dst changing (src has no more dims, and
 * each of its sizes equals dst's or is 1). */
bool tg__broadcasts_to(int src_ndim, const int64_t *src_sizes, int dst_ndim,
                       const int64_t *dst_sizes);

/* Like tg__broadcasts_to but records TG_ERR_SHAPE naming op and arguments on failure:
 * "<op>: <src_name> is [4] and <dst_name> is [2, 3]: <src_name> does not broadcast to ..." */
bool tg__check_broadcasts_to(const char *op, const char *src_name, int src_ndim,
                             const int64_t *src_sizes, const char *dst_name, int dst_ndim,
                             const int64_t *dst_sizes);

/* A stride-0 view of t broadcast to sizes (which t must broadcast to), outside the tape:
 * refcount 1, in no scope (wrap it in tg__scoped or release it). For kernels' operands. */
tg_tensor *tg__broadcast_view(const tg_tensor *t, int ndim, const int64_t *sizes);

#endif
