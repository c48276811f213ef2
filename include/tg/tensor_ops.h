/* tg — making, viewing and copying tensors: creation, random numbers, views, copies, elements.
 *
 * These are ops (home src/ops/: creation.c, views.c, copy.c, random.c): they allocate through
 * a device, record on the tape or run kernels. tg/tensor.h, the data layer they act on,
 * includes this header, so either include gives both. Ownership is tensor.h's rule: every
 * returned tensor belongs to the innermost open scope. */
#ifndef TG_TENSOR_OPS_H
#define TG_TENSOR_OPS_H

#include "tensor.h"

TG_API_BEGIN
#ifdef __cplusplus
extern "C" {
#endif

/* ---- creation ---- */
tg_tensor *tg_empty(int ndim, const int64_t *sizes, tg_options opts);
tg_tensor *tg_zeros(int ndim, const int64_t *sizes, tg_options opts);
tg_tensor *tg_ones(int ndim, const int64_t *sizes, tg_options opts);
tg_tensor *tg_full(int ndim, const int64_t *sizes, double value, tg_options opts);
/* Values start, start+step, ... below end (above end for a negative step). Like
 * torch.arange, refuses (TG_ERR_ARGUMENT) a zero or non-finite step, non-finite bounds, and
 * bounds on the wrong side for the step's sign (arange(0, 5, -1)); start == end is empty.
 * I64 values beyond int64 are refused too (PyTorch wraps them: docs/conventions.md). */
tg_tensor *tg_arange(double start, double end, double step, tg_options opts);
/* Copies numel elements from a host array whose element type is opts.dtype. */
tg_tensor *tg_from_data(int ndim, const int64_t *sizes, const void *data, tg_options opts);
tg_tensor *tg_empty_like(const tg_tensor *t);
tg_tensor *tg_zeros_like(const tg_tensor *t);
tg_tensor *tg_ones_like(const tg_tensor *t);
tg_tensor *tg_full_like(const tg_tensor *t, double value);
/* A 0-dim tensor holding value (torch.scalar_tensor(3.0)); refuses what tg_fill_ refuses. */
tg_tensor *tg_scalar(double value, tg_options opts);

/* ---- random numbers ----
 * Counter-based (Philox 4x32-10): element i of a draw depends only on (seed, offset + i),
 * so the same seed gives the same numbers on every device and thread count. */
typedef struct tg_generator tg_generator;
tg_generator *tg_generator_new(uint64_t seed); /* caller frees with tg_generator_free */
void tg_generator_free(tg_generator *gen);
void tg_generator_seed(tg_generator *gen, uint64_t seed);
/* Seeds this thread's default generator (used where gen is NULL). */
void tg_manual_seed(uint64_t seed);
/* A generator's whole state (seed and counter offset), to save and restore: restoring it
 * makes the following draws repeat exactly. gen NULL: this thread's default generator. */
typedef struct tg_generator_state {
  uint64_t seed;
  uint64_t offset;
} tg_generator_state;
tg_generator_state tg_generator_get_state(const tg_generator *gen);
void tg_generator_set_state(tg_generator *gen, tg_generator_state state);
tg_tensor *tg_rand(int ndim, const int64_t *sizes, tg_options opts, tg_generator *gen);
tg_tensor *tg_randn(int ndim, const int64_t *sizes, tg_options opts, tg_generator *gen);
/* Uniform in [low, high): low <= high, both within the dtype's finite range and high - low
 * too, as PyTorch's uniform_ checks (TG_ERR_ARGUMENT otherwise). */
tg_tensor *tg_uniform(int ndim, const int64_t *sizes, double low, double high, tg_options opts,
                      tg_generator *gen);
tg_status tg_uniform_(tg_tensor *t, double low, double high, tg_generator *gen);
tg_status tg_normal_(tg_tensor *t, double mean, double std, tg_generator *gen);

/* ---- views: share storage, never copy. Negative dims count from the end. ----
 * Every function here records on the tape (a view op, TG_OP_VIEW) and is differentiable:
 * tg_view, tg_reshape (a view or a copy, both recorded), tg_flatten, tg_transpose, tg_t,
 * tg_permute, tg_narrow, tg_slice, tg_select, tg_chunk, tg_split, tg_expand, tg_expand_as,
 * tg_squeeze, tg_squeeze_all, tg_unsqueeze and tg_as_strided (up to 7 dims). The one view
 * that does not record is tg_detach (autograd.h): it cuts the result from the graph. */
/* view: sizes may hold one -1; fails when the strides forbid a view. */
tg_tensor *tg_view(const tg_tensor *t, int ndim, const int64_t *sizes);
/* reshape: a view when the strides allow one, else a contiguous copy. */
tg_tensor *tg_reshape(const tg_tensor *t, int ndim, const int64_t *sizes);
tg_tensor *tg_flatten(const tg_tensor *t);
tg_tensor *tg_transpose(const tg_tensor *t, int dim0, int dim1);
tg_tensor *tg_t(const tg_tensor *t); /* 2-D transpose */
tg_tensor *tg_permute(const tg_tensor *t, int ndim, const int *dims);
tg_tensor *tg_narrow(const tg_tensor *t, int dim, int64_t start, int64_t length);
/* Python-style slice [start:end:step] on one dim, step > 0; start/end clamp like Python. */
tg_tensor *tg_slice(const tg_tensor *t, int dim, int64_t start, int64_t end, int64_t step);
tg_tensor *tg_select(const tg_tensor *t, int dim, int64_t index);
/* Splits into ceil(size/ceil(size/chunks)) views, like torch.chunk, and a dim of size 0
 * into `chunks` empty views (as torch.chunk does); out holds >= chunks. */
tg_status tg_chunk(const tg_tensor *t, int chunks, int dim, tg_tensor **out, int *n_out);
/* Views of split_size along dim (the last may be smaller); out holds max_out. A dim of
 * size 0 gives one empty view, and only it may be split with split_size 0 (as torch.split). */
tg_status tg_split(const tg_tensor *t, int64_t split_size, int dim, tg_tensor **out, int max_out,
                   int *n_out);
/* expand: sizes of -1 keep the dim; only size-1 dims grow (stride 0); new dims on the left. */
tg_tensor *tg_expand(const tg_tensor *t, int ndim, const int64_t *sizes);
tg_tensor *tg_expand_as(const tg_tensor *t, const tg_tensor *other);
tg_tensor *tg_squeeze(const tg_tensor *t, int dim); /* no-op if that dim is not 1 */
tg_tensor *tg_squeeze_all(const tg_tensor *t);
tg_tensor *tg_unsqueeze(const tg_tensor *t, int dim);
/* Low-level view with explicit geometry (torch.as_strided). offset is in elements from the
 * start of t's STORAGE (PyTorch's storage_offset), not from t's first element: on a narrowed
 * or sliced t, 0 reads the storage before t; pass tg_offset(t) + k to start k elements into
 * t. A view that would reach an element outside the storage is TG_ERR_INDEX naming the
 * elements reached. Differentiable (for at most 7 dims; more is TG_ERR_UNSUPPORTED while t
 * requires grad and grad mode is on): the gradient of each output element is added into the
 * element of t it read, so overlapping windows (im2col) add up, and elements of the storage
 * outside t get none. */
tg_tensor *tg_as_strided(const tg_tensor *t, int ndim, const int64_t *sizes, const int64_t *strides,
                         int64_t offset);

/* ---- copies and element access ---- */
tg_tensor *tg_contiguous(const tg_tensor *t); /* t itself (a new reference) if already contiguous */
tg_tensor *tg_clone(const tg_tensor *t);
/* Copies src into dst, broadcasting src and converting its dtype; devices may differ. src
 * may overlap dst in memory (its transpose, a shifted window): dst gets src's values from
 * before the copy (tg reads src through a temporary then; PyTorch refuses a partial
 * overlap: docs/conventions.md). Recorded on the tape as PyTorch's copy_ when src requires grad
 * or dst has history: dst's old value gets gradient 0, src gets it summed over the broadcast
 * dims, in its dtype (a view dst is refused then, as by every in-place op: ops.h). */
tg_status tg_copy_(tg_tensor *dst, const tg_tensor *src);
/* Refuses (TG_ERR_ARGUMENT) a value that overflows t's dtype, as PyTorch does: for F32 a
 * finite value beyond FLT_MAX (inf and NaN are written), for I64 NaN, inf and values outside
 * [-2^63, 2^63) (others truncate toward zero). tg_full, tg_full_like, tg_scalar and tg_set
 * check the same way. */
tg_status tg_fill_(tg_tensor *t, double value);
tg_status tg_zero_(tg_tensor *t);
/* One element by index (one per dim; a negative index counts from the end, as in
 * tg_select). tg_set refuses a value that overflows t's dtype, as tg_fill_ does. */
tg_status tg_get(const tg_tensor *t, const int64_t *index, double *out);
tg_status tg_set(tg_tensor *t, const int64_t *index, double value);
/* The value of a one-element tensor. */
tg_status tg_item(const tg_tensor *t, double *out);
/* Copies all elements, in logical row-major order, into a host array of t's dtype. */
tg_status tg_to_host_array(const tg_tensor *t, void *out, size_t out_bytes);
/* t itself if equal. Floating to I64 truncates toward zero; NaN, +-inf and values outside
 * [-2^63, 2^63) become INT64_MIN, as PyTorch's .to(torch.int64) on x86-64 (on CPU and CUDA
 * alike: no undefined behaviour). tg_fill_, tg_set, tg_full and tg_scalar refuse such a
 * value instead, as PyTorch does. */
tg_tensor *tg_to_dtype(const tg_tensor *t, tg_dtype dtype);
tg_tensor *tg_to_device(const tg_tensor *t, tg_device device); /* t itself if equal */

#ifdef __cplusplus
}
#endif
TG_API_END

#endif
