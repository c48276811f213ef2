/* tg — tensors: lifetimes, properties, printing, accessors (the data layer, src/tensor/);
 * making, viewing and copying them is tg/tensor_ops.h (ops, src/ops/), included below.
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
/* tg_set_allocator / tg_get_allocator: tg/device.h (the device registry keeps them). */

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
/* Making, viewing and copying tensors: ops (home src/ops/), declared apart so that each
 * public header has one home folder; every includer of tensor.h gets them. */
#include "tensor_ops.h"

#endif
