/* tg_apply: runs an op's forward on its inputs' device and records a tape node. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "anomaly.h"
#include "profile.h"
#include "node.h"
#include "op_refs.h"
#include "tensor/check.h"
#include "tensor/error_impl.h"
#include "tensor/host_memory.h"

static atomic_ullong next_sequence_nr;

/* ---- nodes ---- */

/* Frees one node whose count reached 0; children whose count reaches 0 too are pushed on the
 * intrusive list *todo instead of recursing, so a long chain needs no stack and no memory. */
static void free_node(tg_node *node, tg_node **todo) {
  tg__ctx_release_saved(&node->ctx);
  for (int i = 0; i < node->ctx.n_inputs; i++) {
    tg_edge *e = &node->edges[i];
    tg_release(e->leaf);
    if (e->node && atomic_fetch_sub(&e->node->header.refcount, 1) == 1) {
      e->node->release_next = *todo;
      *todo = e->node;
    }
  }
  atomic_long *op_live = node->op_live; /* after the context's data: its free_fn may be the op's */
  tg__host_free(node);                  /* its arrays with it: one block */
  tg__op_refs_release(op_live);
  tg__live_dec();
}

/* The header's destroy: node's count has reached 0. */
static void destroy_node(tg_node *node) {
  tg_node *todo = NULL;
  free_node(node, &todo);
  while (todo) {
    tg_node *next = todo;
    todo = next->release_next;
    free_node(next, &todo);
  }
}

static void fill_meta(tg_meta *m, const tg_tensor *t) {
  m->ndim = t->ndim;
  memcpy(m->sizes, t->sizes, sizeof(int64_t) * (size_t)t->ndim);
  m->dtype = t->dtype;
  m->device = t->storage->device;
}

/* A context's per-input and per-output arrays live in one block with what holds them (a
 * node, or a call's stack buffer), not in allocations of their own: a call would otherwise
 * pay four to six mallocs and frees. Layout: the metas of the inputs, then of the outputs,
 * then the flags (bools last, so the metas stay aligned). */
static size_t ctx_arrays_bytes(size_t ni, size_t no) {
  return (ni + no) * sizeof(tg_meta) + (ni + no) * sizeof(bool);
}
/* Points ctx's arrays into p (zeroed, ctx_arrays_bytes(ni, no) bytes, aligned for tg_meta). */
static void ctx_carve(tg_ctx *ctx, char *p, size_t ni, size_t no) {
  ctx->inputs = (tg_meta *)p;
  ctx->outputs = ctx->inputs + ni;
  ctx->needs_input_grad = (bool *)(ctx->outputs + no);
  ctx->non_differentiable = ctx->needs_input_grad + ni;
}

/* Counts above this would overflow the sizes below (a node of INT_MAX inputs still fits). */
#define MAX_ARRAY_COUNT ((SIZE_MAX - sizeof(tg_node)) / 2 / (sizeof(tg_edge) + sizeof(tg_meta) + 1))

/* One block: the node, its edges (one per input), then its context's arrays. */
static tg_node *node_new(const tg_op_desc *op, int n_inputs, int n_outputs) {
  size_t ni = (size_t)(n_inputs > 0 ? n_inputs : 1), no = (size_t)(n_outputs > 0 ? n_outputs : 1);
  if (ni > MAX_ARRAY_COUNT || no > MAX_ARRAY_COUNT) return NULL;
  _Static_assert(sizeof(tg_node) % _Alignof(tg_edge) == 0 &&
                     sizeof(tg_edge) % _Alignof(tg_meta) == 0,
                 "the block's parts stay aligned");
  char *block =
      tg__host_calloc(1, sizeof(tg_node) + ni * sizeof(tg_edge) + ctx_arrays_bytes(ni, no));
  if (!block) return NULL;
  tg_node *node = (tg_node *)block;
  atomic_init(&node->header.refcount, 1);
  node->header.name = op->name;
  node->header.destroy = destroy_node;
  node->sequence_nr = atomic_fetch_add(&next_sequence_nr, 1);
  node->edges = (tg_edge *)(block + sizeof(tg_node));
  ctx_carve(&node->ctx, (char *)(node->edges + ni), ni, no);
  node->ctx.op = op;
  node->ctx.node = node;
  if (op->flags & TG__OP_TRACKED) node->op_live = tg__op_refs_acquire(op);
  tg__live_inc();
  return node;
}

/* ---- apply ---- */

/* What an in-place op saved of its outputs is its result: stamp it with the version after
 * the write and tg_apply's bump, or its own backward would see it as modified. */
static void stamp_saved_outputs(tg_ctx *ctx, const tg_storage *written) {
  for (int i = 0; i < ctx->n_saved; i++) {
    tg_saved *s = &ctx->saved[i];
    if (s->output_nr >= 0 && s->data->storage == written) s->version = tg_version(s->data);
  }
}

static tg_edge edge_to(const tg_tensor *input) {
  tg_edge e = {0};
  if (!input->requires_grad) return e;
  if (input->grad_fn) {
    tg__node_retain(input->grad_fn);
    e.node = input->grad_fn;
    e.output_nr = input->output_nr;
  } else {
    e.leaf = tg_retain(input);
  }
  return e;
}

/* Inputs and outputs an unrecorded call's context holds without allocating. */
enum { LOCAL_COUNT = 4 };

/* One tg_apply call as it goes through the steps below. */
typedef struct apply_call {
  const tg_op_desc *op;
  int n_inputs, n_outputs;
  const tg_tensor *const *inputs;
  tg_tensor **outputs;
  tg_device device; /* where forward runs: input 0's device */
  bool inplace;     /* TG_OP_INPLACE: output 0 is input 0, written */
  bool record;      /* a tape node is made */
  bool wrote;       /* the in-place forward succeeded: input 0 holds the new value */
  tg_node *node;    /* when recorded */
  tg_ctx *ctx;      /* node's context, or local's */
  tg_ctx local;
  /* local's arrays: here for up to LOCAL_COUNT inputs and outputs, else local_heap */
  _Alignas(tg_meta) char local_arrays[LOCAL_COUNT * 2 * (sizeof(tg_meta) + sizeof(bool))];
  void *local_heap;
  char api_buf[96];
} apply_call;

/* Errors name the function the caller called: tg_<name> for a built-in op (tg_sigmoid, not
 * sigmoid; the front ends are named so), the registered name for a user op. Formatted only
 * when an error needs it, not on every call. */
static const char *api_name(apply_call *c) {
  if (!(c->op->flags & TG__OP_BUILTIN)) return c->op->name;
  if (!c->api_buf[0]) snprintf(c->api_buf, sizeof c->api_buf, "tg_%s", c->op->name);
  return c->api_buf;
}

static tg_status check_counts(apply_call *c, int n_scalars, const double *scalars, int n_ints,
                              const int64_t *ints) {
  const tg_op_desc *op = c->op;
  if (!c->outputs || c->n_outputs <= 0)
    return tg_set_error(TG_ERR_ARGUMENT, "%s: need at least one output slot", api_name(c));
  if ((op->n_inputs >= 0 && c->n_inputs != op->n_inputs) || c->n_inputs < 0)
    return tg_set_error(TG_ERR_ARGUMENT, "%s: takes %d inputs, %d given", api_name(c), op->n_inputs,
                        c->n_inputs);
  if (op->n_outputs >= 0 && c->n_outputs != op->n_outputs)
    return tg_set_error(TG_ERR_ARGUMENT, "%s: has %d outputs, %d slots given", api_name(c),
                        op->n_outputs, c->n_outputs);
  if (n_scalars < 0 || n_scalars > TG_CTX_MAX_SCALARS || (n_scalars > 0 && !scalars))
    return tg_set_error(TG_ERR_ARGUMENT, "%s: %d scalars (at most %d)", api_name(c), n_scalars,
                        TG_CTX_MAX_SCALARS);
  if (n_ints < 0 || n_ints > TG_CTX_MAX_INTS || (n_ints > 0 && !ints))
    return tg_set_error(TG_ERR_ARGUMENT, "%s: %d integer parameters (at most %d)", api_name(c),
                        n_ints, TG_CTX_MAX_INTS);
  return TG_OK;
}

/* Inputs present and on one device that has a kernel; sets c->device. */
static tg_status check_inputs(apply_call *c) {
  const tg_tensor *const *inputs = c->inputs;
  if (c->n_inputs > 0 && !inputs)
    return tg_set_error(TG_ERR_ARGUMENT, "%s: inputs is NULL", api_name(c));
  char arg[32], ref[32];
  for (int i = 0; i < c->n_inputs; i++) {
    if (!inputs[i]) { /* named only on failure; a pending error (NULL in, NULL out) is kept */
      snprintf(arg, sizeof arg, "inputs[%d]", i);
      tg__check_arg(api_name(c), arg, inputs[i]);
      return tg_last_error();
    }
#if TG_LIFETIME_CHECK
    snprintf(arg, sizeof arg, "inputs[%d]", i);
    tg__lifetime_verify(api_name(c), arg, inputs[i]);
#endif
  }
  tg_device *device = &c->device;
  *device = c->n_inputs > 0 ? inputs[0]->storage->device : TG_DEVICE_CPU;
  for (int i = 1; i < c->n_inputs; i++) {
    if (!tg_device_equal(inputs[i]->storage->device, *device)) {
      snprintf(arg, sizeof arg, "inputs[%d]", i);
      snprintf(ref, sizeof ref, "inputs[0]");
      tg__check_same_device(api_name(c), arg, inputs[i], ref, inputs[0]);
      return tg_last_error();
    }
  }
  if ((unsigned)device->type >= TG_NUM_DEVICE_TYPES)
    return tg_set_error(TG_ERR_DEVICE, "%s: invalid device type %d", api_name(c),
                        (int)device->type);
  /* A built-in op has a forward for every type: it asks the device for drivers and kernels
   * and fails the same way when the device lacks them (tg_op_supported asks first). */
  if (!c->op->forward[device->type])
    return tg_set_error(TG_ERR_UNSUPPORTED, "%s: op '%s' has no kernel for device %s", api_name(c),
                        c->op->name, tg_device_type_name(device->type));
  return TG_OK;
}

/* Decides whether the call is recorded, and refuses the in-place writes the tape cannot
 * represent. */
static tg_status check_recording(apply_call *c) {
  const tg_tensor *const *inputs = c->inputs;
  bool any_requires = false;
  for (int i = 0; i < c->n_inputs; i++) any_requires |= inputs[i]->requires_grad;
  bool grad_on = tg_is_grad_enabled();
  c->record = any_requires && c->op->backward && grad_on;
  if (c->inplace && c->n_inputs > 0 && inputs[0]->requires_grad && grad_on && !inputs[0]->grad_fn)
    return tg_set_error(TG_ERR_STATE,
                        "%s: a leaf tensor that requires grad is used in an in-place "
                        "operation; use tg_no_grad_begin or an out-of-place op",
                        api_name(c));
  if (!c->record) return TG_OK;
  /* A view's tape node assumes its base's history; a recorded in-place op on either would
   * leave the other with a wrong graph, which tg does not rebuild (PyTorch does): refuse. */
  if (c->inplace && inputs[0]->is_view) {
    /* Say what to write instead: the out-of-place op (tg_add for tg_add_) where there is one. */
    const char *name = api_name(c);
    size_t len = strlen(name);
    bool has_out_of_place = (c->op->flags & TG__OP_BUILTIN) && len > 1 && name[len - 1] == '_' &&
                            strcmp(name, "tg_copy_") != 0;
    return tg_set_error(TG_ERR_UNSUPPORTED,
                        "%s: in-place operation on a view while recording gradients is not "
                        "supported (PyTorch records it; tg does not rebuild the base's history): "
                        "%s%.*s%swrite into a clone of the view (tg_clone) instead, or do the "
                        "write inside tg_no_grad_begin/end if no gradient should flow through it",
                        name, has_out_of_place ? "use the out-of-place " : "",
                        has_out_of_place ? (int)(len - 1) : 0, name,
                        has_out_of_place ? " or " : "");
  }
  for (int i = 0; i < c->n_inputs; i++) {
    const tg_tensor *t = inputs[i];
    if (t->is_view && t->requires_grad && atomic_load(&t->storage->history) != t->view_history)
      return tg_set_error(TG_ERR_STATE,
                          "%s: input %d is a view whose base was modified by an in-place "
                          "operation after the view was taken; take the view again",
                          api_name(c), i);
  }
  return TG_OK;
}

/* The call's context: a tape node's when recorded, else a local one; filled with the
 * parameters and the inputs' metadata, and (recorded) the edges to the inputs' history. */
static tg_status open_context(apply_call *c, int n_scalars, const double *scalars, int n_ints,
                              const int64_t *ints) {
  if (c->record) {
    c->node = node_new(c->op, c->n_inputs, c->n_outputs);
    if (!c->node)
      return tg_set_error(TG_ERR_MEMORY, "%s: out of memory for a tape node", api_name(c));
    c->ctx = &c->node->ctx;
  } else {
    c->ctx = &c->local;
    size_t ni = (size_t)c->n_inputs, no = (size_t)c->n_outputs; /* n_outputs >= 1 */
    char *arrays = c->local_arrays;
    if (ni > LOCAL_COUNT || no > LOCAL_COUNT) {
      arrays = c->local_heap = ni > MAX_ARRAY_COUNT || no > MAX_ARRAY_COUNT
                                   ? NULL
                                   : tg__host_calloc(1, ctx_arrays_bytes(ni, no));
      if (!arrays)
        return tg_set_error(TG_ERR_MEMORY, "%s: out of memory for a call context", api_name(c));
    }
    ctx_carve(c->ctx, arrays, ni, no);
  }
  tg_ctx *ctx = c->ctx;
  ctx->op = c->op;
  ctx->n_inputs = c->n_inputs;
  ctx->n_outputs = c->n_outputs;
  ctx->materialize_grads = !(c->op->flags & TG_OP_NO_MATERIALIZE_GRADS);
  ctx->n_scalars = n_scalars;
  if (n_scalars > 0) memcpy(ctx->scalars, scalars, sizeof(double) * (size_t)n_scalars);
  ctx->n_ints = n_ints;
  if (n_ints > 0) memcpy(ctx->ints, ints, sizeof(int64_t) * (size_t)n_ints);
  for (int i = 0; i < c->n_inputs; i++) {
    fill_meta(&ctx->inputs[i], c->inputs[i]);
    ctx->needs_input_grad[i] = c->record && c->inputs[i]->requires_grad;
  }
  /* Edges are taken before forward: an in-place op replaces input 0's grad_fn. */
  if (c->node)
    for (int i = 0; i < c->n_inputs; i++) c->node->edges[i] = edge_to(c->inputs[i]);
  return TG_OK;
}

tg_status tg__kernel_failed(const char *name, const char *pass, tg_status st) {
  if (tg_last_error() != TG_OK) return tg_last_error();
  bool known = st > TG_OK && st < TG_NUM_STATUS;
  char code[48];
  if (known)
    snprintf(code, sizeof code, "%s", tg_status_name(st));
  else
    snprintf(code, sizeof code, "%d, not a tg_status", (int)st);
  return tg_set_error(known ? st : TG_ERR_STATE,
                      "%s: %s failed (returned %s) without setting an error (tg_set_error)", name,
                      pass, code);
}

/* Runs the kernel with grad mode off inside a scope of its own; each output comes back
 * with a reference of ours. Errors get the front end's name in front. */
static tg_status run_forward(apply_call *c) {
  tg_ctx *ctx = c->ctx;
  const tg_tensor *target = c->inplace && c->n_inputs > 0 ? c->inputs[0] : NULL;
  ctx->forward_outputs = c->outputs;
  ctx->inplace_target = target;
  uint64_t version_before = target ? tg_version(target) : 0;
  bool was_enabled = tg_set_grad_enabled(false);
  tg_scope scope;
  tg_status st = tg__scope_open(&scope);
  if (st == TG_OK) {
    st = c->op->forward[c->device.type](ctx, c->inputs, c->outputs);
    if (st != TG_OK) st = tg__kernel_failed(api_name(c), "forward", st);
  }
  /* a backend's "gemm: ..." becomes "tg_mm: gemm: ..." */
  if (st != TG_OK) tg__error_prefix(api_name(c));
  for (int j = 0; j < c->n_outputs; j++) {
    if (st == TG_OK && !c->outputs[j])
      st = tg_last_error() != TG_OK
               ? tg_last_error()
               : tg_set_error(TG_ERR_STATE, "%s: forward returned TG_OK but left output %d NULL",
                              api_name(c), j);
    tg_retain(c->outputs[j]);
  }
  tg_scope_end(scope);
  tg_set_grad_enabled(was_enabled);
  ctx->forward_outputs = NULL;
  ctx->inplace_target = NULL;
  /* An in-place forward wrote input 0. Built-in kernels bump its version; a user op that
   * writes through the data pointer does not, so bump it here (once: PyTorch's mark_dirty)
   * and what other nodes saved of it is invalidated: a later backward through them fails. */
  c->wrote = st == TG_OK && target;
  if (c->wrote && tg_version(target) == version_before) tg__bump_version((tg_tensor *)target);
  return st;
}

/* After forward: saves of outputs become aliases, an in-place op's saves of its target are
 * dated after the write, and (recorded) an output that already has history is replaced by a
 * fresh alias, so recording never rewrites someone else's grad_fn. Fills the outputs' meta. */
static tg_status settle_outputs(apply_call *c) {
  tg_ctx *ctx = c->ctx;
  if (c->node) {
    tg_status st = tg__ctx_adopt_saved_outputs(ctx, c->outputs);
    if (st != TG_OK) return st;
    if (c->wrote) stamp_saved_outputs(ctx, c->inputs[0]->storage);
  }
  for (int j = 0; j < c->n_outputs; j++) {
    tg_tensor *out = c->outputs[j];
    bool is_input0_inplace = c->inplace && j == 0 && out == c->inputs[0];
    bool is_an_input = false;
    for (int i = 0; i < c->n_inputs; i++) is_an_input |= out == c->inputs[i];
    if (c->node && !is_input0_inplace && (is_an_input || out->grad_fn || out->requires_grad)) {
      tg_tensor *alias = tg__alias_raw(out);
      tg_release(out);
      c->outputs[j] = out = alias;
      if (!out) return tg_last_error();
    }
    fill_meta(&ctx->outputs[j], out);
  }
  return TG_OK;
}

/* Drops the call's context: the outputs hold the node now; a local context is freed. */
static void close_context(apply_call *c) {
  if (c->node) {
    tg__node_release(c->node);
  } else {
    tg__ctx_release_saved(c->ctx);
    tg__host_free(c->local_heap);
  }
}

/* A failure after the context was opened: the outputs and the context go. */
static tg_status abandon_call(apply_call *c, tg_status st) {
  for (int j = 0; j < c->n_outputs; j++) {
    tg_release(c->outputs[j]);
    c->outputs[j] = NULL;
  }
  close_context(c);
  return st;
}

/* Attaches the node to the differentiable outputs and hands each output to the caller's
 * scope (an in-place op's target stays the caller's). Cannot fail. */
static void hand_out_outputs(apply_call *c) {
  for (int j = 0; j < c->n_outputs; j++) {
    tg_tensor *out = c->outputs[j];
    if (c->node && !c->ctx->non_differentiable[j] && tg_dtype_is_floating(out->dtype)) {
      tg_node *old = out->grad_fn;
      tg__node_retain(c->node);
      out->grad_fn = c->node;
      out->output_nr = j;
      out->requires_grad = true;
      tg__node_release(old);
    }
    if (c->op->flags & TG_OP_VIEW) { /* recorded or not: an in-place write through it matters */
      out->is_view = true;
      out->view_history = atomic_load(&out->storage->history);
    }
    if (c->inplace && j == 0 && out == c->inputs[0]) {
      if (c->node) atomic_fetch_add(&out->storage->history, 1);
      tg_release(out); /* the caller keeps its own reference to the target */
    } else {
      tg__lifetime_made_by(out, c->op->flags & TG__OP_BUILTIN ? "tg_" : NULL, c->op->name);
      tg__scoped(out); /* cannot fail: reserved by tg_apply_ex */
    }
  }
}

tg_status tg_apply(const tg_op_desc *op, int n_inputs, const tg_tensor *const *inputs,
                   int n_scalars, const double *scalars, int n_outputs, tg_tensor **outputs) {
  return tg_apply_ex(op, n_inputs, inputs, n_scalars, scalars, 0, NULL, n_outputs, outputs);
}

tg_status tg_apply_ex(const tg_op_desc *op, int n_inputs, const tg_tensor *const *inputs,
                      int n_scalars, const double *scalars, int n_ints, const int64_t *ints,
                      int n_outputs, tg_tensor **outputs) {
  if (outputs)
    for (int j = 0; j < n_outputs; j++) outputs[j] = NULL;
  /* NULL from a failed tg_op_lookup: its error ("no op named ...") is the one to keep */
  if (!op)
    return tg_last_error() != TG_OK ? tg_last_error()
                                    : tg_set_error(TG_ERR_ARGUMENT, "tg_apply: op is NULL");
  apply_call c = {.op = op,
                  .n_inputs = n_inputs,
                  .n_outputs = n_outputs,
                  .inputs = inputs,
                  .outputs = outputs,
                  .inplace = (op->flags & TG_OP_INPLACE) != 0};
  tg_status st = check_counts(&c, n_scalars, scalars, n_ints, ints);
  if (st == TG_OK) st = check_inputs(&c);
  if (st == TG_OK) st = check_recording(&c);
  if (st != TG_OK) return st;
  /* Room for the outputs in the caller's scope first: once forward ran (an in-place op wrote
   * its target) registering them must not fail. */
  if (tg__scope_reserve((size_t)n_outputs) != TG_OK) return tg_last_error();
  if ((st = open_context(&c, n_scalars, scalars, n_ints, ints)) != TG_OK) return st;
  bool anomaly = tg__anomaly_begin_op(); /* false unless anomaly mode is on */
  tg__profile_frame timed;
  tg__profile_begin(&timed);
  st = run_forward(&c);
  tg__profile_end(&timed, op->name, false);
  tg__anomaly_end_op(anomaly);
  if (st == TG_OK) st = settle_outputs(&c);
  for (int j = 0; anomaly && st == TG_OK && j < n_outputs; j++)
    st = tg__anomaly_check_output(api_name(&c), j, c.outputs[j]);
  if (st != TG_OK) return abandon_call(&c, st);
  hand_out_outputs(&c);
  close_context(&c);
  return TG_OK;
}

tg_tensor *tg_apply1(const tg_op_desc *op, int n_inputs, const tg_tensor *const *inputs,
                     int n_scalars, const double *scalars) {
  tg_tensor *out = NULL;
  if (tg_apply(op, n_inputs, inputs, n_scalars, scalars, 1, &out) != TG_OK) return NULL;
  return out;
}

tg_tensor *tg_apply1_ex(const tg_op_desc *op, int n_inputs, const tg_tensor *const *inputs,
                        int n_scalars, const double *scalars, int n_ints, const int64_t *ints) {
  tg_tensor *out = NULL;
  if (tg_apply_ex(op, n_inputs, inputs, n_scalars, scalars, n_ints, ints, 1, &out) != TG_OK)
    return NULL;
  return out;
}
