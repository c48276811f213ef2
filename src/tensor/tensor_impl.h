/* Internal layout of tensors and storages. Not part of the public API. */
#ifndef TG_TENSOR_IMPL_H
#define TG_TENSOR_IMPL_H

#include <stdatomic.h>

#include "tensor/lifetime_check.h"
#include "tg/tensor.h"

typedef struct tg_node tg_node;

/* What the tensor layer knows of a tape node: struct tg_node (src/autograd/node.h) starts
 * with this header. It carries the reference count, the op's name (for printing) and the
 * function that frees the node once the count reaches zero, so tg_release drops a grad_fn
 * without calling into autograd: the tensor layer depends on nothing above it. */
typedef struct tg_node_header {
  atomic_long refcount;
  const char *name;
  void (*destroy)(tg_node *node); /* called once, when refcount reaches 0 */
} tg_node_header;

static inline tg_node_header *tg__node_header(tg_node *node) {
  return (tg_node_header *)(void *)node; /* the header is the node's first member */
}
/* Drops one reference to node (NULL: nothing); the last one destroys it. */
void tg__node_drop(tg_node *node);

/* Moves nbytes between the host and a device (a backend's copy_bytes, ops/backend.h). */
typedef tg_status (*tg_copy_bytes_fn)(const char *op, void *dst, tg_device dst_device,
                                      const void *src, tg_device src_device, size_t nbytes);

typedef struct tg_storage {
  atomic_long refcount;
  void *data;
  size_t nbytes;   /* what tensors may address */
  size_t capacity; /* what was allocated: nbytes plus, on the CPU, tg__cpu_tail_pad(nbytes) */
  tg_device device;
  const tg_allocator *allocator; /* the one that allocated data; frees it (NULL: wrapped) */
  /* Memory tg did not allocate (tg__storage_wrap): release(release_ctx) instead of a free. */
  void (*release)(void *release_ctx);
  void *release_ctx;
  tg_copy_bytes_fn copy_bytes; /* its device's: how the tensor layer reads it (printing) */
  atomic_ullong version;       /* bumped by every in-place write through any view */
  atomic_ullong history;       /* bumped when a recorded in-place op rewrites a grad_fn */
#if TG_LIFETIME_CHECK
  char made_by[TG__LIFETIME_NAME]; /* the function that allocated it: its tensors' maker */
#endif
} tg_storage;

/* A leaf's post-accumulate grad hooks (tg/autograd.h), kept with the tensor so that they
 * die with it; registered and run by the autograd layer (src/autograd/hooks.c). */
typedef struct tg_grad_hook {
  tg_status (*fn)(void *user, tg_tensor *leaf);
  void *user;
  int id;
} tg_grad_hook;
typedef struct tg_grad_hooks {
  int count, capacity, last_id;
  tg_grad_hook items[]; /* capacity of them, count used, in registration order */
} tg_grad_hooks;

struct tg_tensor {
  atomic_long refcount;
  tg_storage *storage;
  int64_t offset; /* in elements */
  int ndim;
  tg_dtype dtype;
  int64_t sizes[TG_MAX_DIMS];
  int64_t strides[TG_MAX_DIMS];
  /* autograd */
  bool requires_grad;
  tg_tensor *grad;       /* owned reference or NULL */
  tg_node *grad_fn;      /* owned reference or NULL (leaves) */
  int output_nr;         /* which output of grad_fn this tensor is */
  bool is_view;          /* made by a view op: its grad_fn assumes its base's history */
  uint64_t view_history; /* storage->history when the view was made */
  tg_grad_hooks *post_accumulate_hooks; /* owned (tg__host_malloc) or NULL: autograd/hooks.c */
#if TG_LIFETIME_CHECK
  tg__lifetime lifetime; /* tensor/lifetime_check.h */
#endif
};

/* Records a live-object birth/death for tg_live_objects. */
void tg__live_inc(void);
void tg__live_dec(void);

/* New tensor object (refcount 1, not in any scope) over storage (retained), contiguous
 * strides for sizes. */
tg_tensor *tg__tensor_new(tg_storage *storage, int64_t offset, int ndim, const int64_t *sizes,
                          const int64_t *strides, tg_dtype dtype);
/* Storage for nbytes on device from allocator, which allocates on the current device (the
 * caller made device current: src/ops/creation.c); refcount 1. Errors name op. */
tg_storage *tg__storage_new_op(const char *op, size_t nbytes, tg_device device,
                               const tg_allocator *allocator, tg_copy_bytes_fn copy_bytes);
/* Storage over nbytes at data on device that tg did not allocate (DLPack import): no tail pad
 * (capacity == nbytes, so the CPU GEMM copies an operand at its end), and release(ctx) runs
 * once, when the storage dies (release may be NULL). data may be NULL when nbytes is 0. On
 * failure (TG_ERR_MEMORY naming op) release is not called: the memory stays the caller's. */
tg_storage *tg__storage_wrap(const char *op, void *data, size_t nbytes, tg_device device,
                             tg_copy_bytes_fn copy_bytes, void (*release)(void *ctx), void *ctx);
void tg__storage_retain(tg_storage *s);
void tg__storage_release(tg_storage *s);
/* Bytes every CPU storage gets past its end, owned but never addressed by a tensor: BLIS 0.9's
 * small-matrix (sup) kernels for haswell/zen read up to a vector, or one leading-dimension
 * stride, past an operand (flame/blis#635, #821). The pad covers a row of up to 16 KiB;
 * tg_cpu_gemm copies an operand that would need more (src/ops/cpu/cpu_gemm.c). */
size_t tg__cpu_tail_pad(size_t nbytes);

/* Same geometry/storage, fresh object, no autograd state, NOT in a scope. */
tg_tensor *tg__alias_raw(const tg_tensor *t);
/* Hands a fresh reference (refcount 1) to the innermost scope (the root scope when none is
 * open); returns t. For a result made here; a result computed in an inner scope goes out
 * with tg_scope_escape. When the scope
 * cannot grow it releases t, records TG_ERR_MEMORY and returns NULL. */
tg_tensor *tg__scoped(tg_tensor *t);
/* Makes room for n more tensors in the innermost scope, so the next n tg__scoped calls
 * cannot fail (call it before committing to something that cannot be undone). */
tg_status tg__scope_reserve(size_t n);
/* tg_scope_begin that says whether the scope was really opened (TG_ERR_MEMORY recorded
 * otherwise); either way *s is its token and tg_scope_end(*s) closes it. */
tg_status tg__scope_open(tg_scope *s);

void tg__contiguous_strides(int ndim, const int64_t *sizes, int64_t *strides);
int64_t tg__numel(int ndim, const int64_t *sizes);
/* Normalises a possibly negative dim against ndim; -1 and an error on failure. */
int tg__wrap_dim(const char *op, const char *arg, int dim, int ndim);
/* True if some two distinct index tuples map to the same element (stride 0 on a dim > 1,
 * or an as_strided overlap). Conservative: may say true for exotic non-overlapping views. */
bool tg__has_internal_overlap(const tg_tensor *t);
/* Whether an elementwise write of dst that reads src must read src whole first (into a
 * temporary): they may reach a common byte (one device, overlapping byte ranges; also two
 * storages wrapping the same memory; conservative: an interleaved pair says true) but do not
 * address the same elements in the same order. Empty views overlap nothing. The one rule
 * tg_copy_ and the in-place ops share. */
bool tg__needs_staging(const tg_tensor *dst, const tg_tensor *src);

/* Bumps the storage's version counter: call after every in-place write. */
static inline void tg__bump_version(tg_tensor *t) { atomic_fetch_add(&t->storage->version, 1); }

/* The argument checks (tg__check_arg and the rest) come with the tensor internals: every
 * file that reads a tensor's fields checks its arguments first. */
#include "tensor/check.h"

#endif
