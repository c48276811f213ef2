/* tg — tensors: creation, views, copies, element access, printing, RNG, lifetimes.
 *
 * Ownership (the one rule): arguments are borrowed. Every tensor a function returns is a
 * new reference owned by the innermost open scope of the calling thread, never by the
 * caller. Every thread always has a root scope, so "innermost open scope" is the root scope
 * when the program opened none: the same code means the same thing at any depth. The root
 * scope is drained when the thread exits (and, for the thread that calls exit, at exit), so
 * a long-running loop opens a scope per iteration or its results pile up until then:
 *
 *   for (int step = 0; step < n; step++) {
 *     tg_scope s = tg_scope_begin();
 *     tg_tensor *loss = ...;            // every result here belongs to s
 *     tg_scope_end(s);                  // and is released here
 *   }
 *
 * tg_release(y) on a returned y is therefore always wrong, unless the caller first took a
 * reference of its own with tg_retain(y) (to keep y past its scope). Debug and sanitizer
 * builds catch the mistake (the lifetime checker, CMake option TG_LIFETIME_CHECK): releasing
 * a result the caller does not own, releasing a tensor twice, or passing a freed one to tg
 * aborts with a message naming the tensor, what made it and what freed it. A function that
 * returns a tensor to its caller computes it in a scope of its own and hands the result out
 * with tg_scope_escape:
 *
 *   tg_tensor *f(const tg_tensor *x) {
 *     tg_scope s = tg_scope_begin();
 *     tg_tensor *y = tg_scope_escape(s, tg_exp(tg_neg(x)));  // y now belongs to the caller's scope
 *     tg_scope_end(s);                                         // the temporaries go
 *     return y;                                                // NULL with the error pending
 *   } */
#ifndef TG_TENSOR_H
#define TG_TENSOR_H

#include <stdio.h>

#include "types.h"

TG_API_BEGIN
#ifdef __cplusplus
extern "C" {
#endif

/* How a new tensor is made; the zero value is F32 on the CPU without grad. */
typedef struct tg_options {
  tg_dtype dtype;
  tg_device device;
  bool requires_grad;
} tg_options;

#define TG_OPTS(...) ((tg_options){__VA_ARGS__})
#define TG_OPTS_DEFAULT ((tg_options){0})

/* TG_SHAPE(2, 3) expands to the (ndim, sizes) pair the functions below take. */
#define TG_SHAPE(...)                                                                              \
  (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (const int64_t[]) { __VA_ARGS__ }

/* ---- lifetimes ----
 * A scope token: which level tg_scope_begin opened (depth, 1 = outermost; the root scope is
 * depth 0 and has no token) and a per-thread serial, so a token for a scope that was closed
 * since is told apart from the scope now at that depth. Tokens belong to their thread. */
typedef struct tg_scope {
  int depth;
  uint64_t serial;
} tg_scope;

/* Opens a scope inside the innermost one. Never aborts. The first 32 nesting levels of a
 * thread need no allocation; when a deeper level cannot be allocated it records
 * TG_ERR_MEMORY and opens a "failed" scope: every op that returns a tensor in it fails with
 * TG_ERR_MEMORY, and tg_scope_end with its token closes it as usual (tg_scope_depth counts
 * it), so begin/end stay paired. */
tg_scope tg_scope_begin(void);
/* Releases every tensor the scope s owns and closes it. s must be the innermost open scope;
 * otherwise TG_ERR_STATE: when s is open further out, every scope inside it is closed too
 * (so a forgotten inner end leaks nothing) and then s; when s is not open (closed already,
 * another thread's, never opened) nothing changes. TG_OK leaves the pending error alone. */
tg_status tg_scope_end(tg_scope s);
/* Hands t to the caller: registers a new reference to t in the scope that encloses s (the
 * root scope encloses a depth-1 scope) and returns t, so t outlives tg_scope_end(s). NULL t
 * returns NULL and keeps the pending error (so tg_scope_escape(s, tg_op(...)) needs no
 * check); NULL with TG_ERR_STATE if s is not open, TG_ERR_MEMORY if the reference cannot be
 * registered. */
tg_tensor *tg_scope_escape(tg_scope s, const tg_tensor *t);
/* Scopes open on this thread (the root scope not counted): 0 at top level. */
int tg_scope_depth(void);
/* Takes a reference the caller owns, outside every scope (drop it with tg_release).
 * Returns t. */
tg_tensor *tg_retain(const tg_tensor *t);
void tg_release(tg_tensor *t); /* NULL is a no-op */
/* Tensors, storages and tape nodes alive now (for leak tests). */
int64_t tg_live_objects(void);

/* ---- allocators ---- */
/* Per-device allocator. alloc returns NULL on failure; tg turns that into TG_ERR_MEMORY.
 * On the CPU, tg asks for more than a tensor's bytes: a tail of up to 16 KiB + 64 bytes that
 * no tensor addresses, because BLIS 0.9's small-matrix kernels read past an operand's end
 * (README, "BLIS"). free gets the size alloc was asked for. */
typedef struct tg_allocator {
  const char *name;
  void *(*alloc)(void *ctx, size_t nbytes);
  void (*free)(void *ctx, void *ptr, size_t nbytes);
  void *ctx;
} tg_allocator;
/* Installs an allocator for a device type (NULL restores the default); returns the previous. */
const tg_allocator *tg_set_allocator(tg_device_type type, const tg_allocator *allocator);
const tg_allocator *tg_get_allocator(tg_device_type type);

/* ---- properties ---- */
int tg_ndim(const tg_tensor *t);
int64_t tg_size(const tg_tensor *t, int dim); /* negative dims count from the end */
int64_t tg_stride(const tg_tensor *t, int dim);
const int64_t *tg_sizes(const tg_tensor *t);
const int64_t *tg_strides(const tg_tensor *t);
int64_t tg_offset(const tg_tensor *t); /* in elements */
int64_t tg_numel(const tg_tensor *t);
tg_dtype tg_tensor_dtype(const tg_tensor *t);
tg_device tg_tensor_device(const tg_tensor *t);
bool tg_is_contiguous(const tg_tensor *t);
bool tg_shares_storage(const tg_tensor *a, const tg_tensor *b);
/* Address of element 0 (storage data + offset). Device memory for CUDA tensors. */
void *tg_data_ptr(const tg_tensor *t);
/* Version counter of t's storage: bumped by every in-place write. */
uint64_t tg_version(const tg_tensor *t);

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

/* ---- printing (PyTorch style; the middle of large dims is elided) ---- */
/* Returns a malloc'd string the caller frees with free(); NULL on error. */
char *tg_to_string(const tg_tensor *t);
tg_status tg_fprint(FILE *f, const tg_tensor *t);
tg_status tg_print(const tg_tensor *t);

/* ---- accessors: the C form of ATen's accessor / packed_accessor ----
 * Passed by value to CPU loops and CUDA kernels alike; strides in elements; data already
 * includes the offset. */
typedef struct tg_accessor {
  void *data;
  int ndim;
  int64_t sizes[TG_MAX_DIMS];
  int64_t strides[TG_MAX_DIMS];
} tg_accessor;

/* Fails (zeroed accessor + TG_ERR_SHAPE/TG_ERR_DTYPE) unless t has ndim dims and dtype. */
tg_status tg_accessor_of(const tg_tensor *t, int ndim, tg_dtype dtype, tg_accessor *out);

#define TG_AT1(acc, T, i) (((T *)(acc).data)[(int64_t)(i) * (acc).strides[0]])
#define TG_AT2(acc, T, i, j)                                                                       \
  (((T *)(acc).data)[(int64_t)(i) * (acc).strides[0] + (int64_t)(j) * (acc).strides[1]])
#define TG_AT3(acc, T, i, j, k)                                                                    \
  (((T *)(acc).data)[(int64_t)(i) * (acc).strides[0] + (int64_t)(j) * (acc).strides[1] +           \
                     (int64_t)(k) * (acc).strides[2]])
#define TG_AT4(acc, T, i, j, k, l)                                                                 \
  (((T *)(acc).data)[(int64_t)(i) * (acc).strides[0] + (int64_t)(j) * (acc).strides[1] +           \
                     (int64_t)(k) * (acc).strides[2] + (int64_t)(l) * (acc).strides[3]])

#ifdef __cplusplus
}
#endif
TG_API_END
#endif
