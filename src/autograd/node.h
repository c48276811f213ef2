/* Tape nodes and op-call contexts. Internal. */
#ifndef TG_NODE_H
#define TG_NODE_H

#include <stdatomic.h>

#include "tensor/host_memory.h"
#include "tensor/tensor_impl.h"
#include "tg/autograd.h"

/* Where the gradient of one input goes: another node's output, a leaf, or nowhere. */
typedef struct tg_edge {
  tg_node *node;   /* owned reference */
  int output_nr;   /* which output of node */
  tg_tensor *leaf; /* owned reference: a leaf that requires grad */
} tg_edge;

typedef struct tg_saved {
  tg_tensor *data;  /* owned; a detached alias when it is one of the node's outputs */
  uint64_t version; /* storage version when saved */
  int output_nr;    /* >= 0: output of this node (re-attached to the node on unpack) */
} tg_saved;

typedef struct tg_meta {
  int ndim;
  int64_t sizes[TG_MAX_DIMS];
  tg_dtype dtype;
  tg_device device;
} tg_meta;

struct tg_ctx {
  const tg_op_desc *op;
  tg_node *node; /* NULL when the call is not recorded */
  int n_inputs, n_outputs;
  tg_meta *inputs;  /* n_inputs */
  tg_meta *outputs; /* n_outputs; filled after forward */
  bool *needs_input_grad;
  bool *non_differentiable;        /* n_outputs */
  tg_tensor **forward_outputs;     /* the outputs array during forward, to recognise saves */
  const tg_tensor *inplace_target; /* input 0 of an in-place op during forward: output 0 */
  tg_saved *saved;
  int n_saved;
  double scalars[TG_CTX_MAX_SCALARS];
  int n_scalars;
  int64_t ints[TG_CTX_MAX_INTS];
  int n_ints;
  void *data;
  void (*free_data)(void *);
  bool materialize_grads;
  bool released; /* saved tensors freed by a backward without retain_graph */
  /* While the engine runs this node's backward into leaves' .grad without create_graph:
   * which inputs' .grad the backward took as its destination (tg__ctx_grad_destination),
   * each holding that leaf's grad lock until the backward returns. */
  bool accumulating;
  uint64_t destinations;
};

struct tg_node {
  tg_node_header header; /* first: the tensor layer releases grad_fn through it */
  uint64_t sequence_nr;
  tg_ctx ctx;
  tg_edge *edges; /* one per input */
  /* scratch of the backward engine */
  tg_tensor **grads; /* n_outputs */
  /* the backward pass that holds this node (its epoch), 0 when none: two passes must not
   * share the scratch above */
  atomic_ullong backward_owner;
  tg_node *release_next; /* tg__node_release's work list: freeing a graph allocates nothing */
  atomic_long *op_live;  /* the live-node count of a registered user op (op_refs.h), or NULL */
};

/* A flag the registry (src/ops/registry.c) sets on the built-in ops, whose errors name
 * their front end (tg_<name>); tg_op_register clears it on user ops. */
#define TG__OP_BUILTIN (1u << 31)
/* A built-in op that needs only a device's memory functions, no drivers (to_device). */
#define TG__OP_MEMORY_ONLY (1u << 30)

/* An internal op's forward on every device type: it runs over the device's drivers, so
 * the type decides nothing (tg_op_supported checks the device has them). */
#define TG__ON_EVERY_DEVICE(fn)                                                                    \
  { fn, fn, fn, fn, fn, fn, fn, fn }
_Static_assert(TG_NUM_DEVICE_TYPES == 8, "TG__ON_EVERY_DEVICE names one forward per type");

/* Releases a node; long chains are released with a work list, not recursion (the
 * header's destroy, see apply.c). */
static inline void tg__node_release(tg_node *node) { tg__node_drop(node); }
static inline void tg__node_retain(tg_node *node) {
  if (node) atomic_fetch_add(&node->header.refcount, 1);
}

/* A forward may save an output before storing it in outputs[]: turn such saves into
 * detached aliases now, as if the output had been recognised when saved (no cycle). On
 * out-of-memory the op must fail (a strong reference would be a cycle). */
tg_status tg__ctx_adopt_saved_outputs(tg_ctx *ctx, tg_tensor *const *outputs);

/* For an in-place forward that saved its target (as output 0) before writing it, so that
 * the save's allocations cannot fail after the write: dates those saved entries after the
 * write, since the value they stand for is the one written. */
void tg__ctx_saved_target_written(tg_ctx *ctx);

/* A kernel (name's forward or backward, pass) returned st != TG_OK: the pending error, or,
 * where the kernel set none (an extension's bug), a new one naming the op, the pass and what
 * it returned (st itself when it is a tg_status, else TG_ERR_STATE). */
tg_status tg__kernel_failed(const char *name, const char *pass, tg_status st);

/* Frees the saved tensors and user data of a context (idempotent). */
void tg__ctx_release_saved(tg_ctx *ctx);

/* A growable array of nodes (the engine's work lists, the saved-bytes walk). Zero-initialise;
 * free items with tg__host_free. */
typedef struct tg_node_list {
  tg_node **items;
  size_t count, capacity;
} tg_node_list;

/* Appends n; false when the array cannot grow (nothing changed). */
static inline bool tg__node_list_push(tg_node_list *l, tg_node *n) {
  if (l->count == l->capacity) {
    size_t cap = l->capacity ? l->capacity * 2 : 64;
    tg_node **grown = tg__host_realloc(l->items, sizeof *grown * cap);
    if (!grown) return false;
    l->items = grown;
    l->capacity = cap;
  }
  l->items[l->count++] = n;
  return true;
}

#endif
