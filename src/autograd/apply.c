/* tg_apply: runs an op's forward on its inputs' device and records a tape node. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node.h"
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
  tg__host_free(node->edges);
  tg__host_free(node->ctx.inputs);
  tg__host_free(node->ctx.outputs);
  tg__host_free(node->ctx.needs_input_grad);
  tg__host_free(node->ctx.non_differentiable);
  tg__host_free(node);
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

/* Allocates the per-input/output arrays of a context; false on out-of-memory. */
static bool ctx_alloc(tg_ctx *ctx, int n_inputs, int n_outputs) {
  size_t ni = (size_t)(n_inputs > 0 ? n_inputs : 1), no = (size_t)(n_outputs > 0 ? n_outputs : 1);
  ctx->inputs = tg__host_calloc(ni, sizeof *ctx->inputs);
  ctx->outputs = tg__host_calloc(no, sizeof *ctx->outputs);
  ctx->needs_input_grad = tg__host_calloc(ni, sizeof *ctx->needs_input_grad);
  ctx->non_differentiable = tg__host_calloc(no, sizeof *ctx->non_differentiable);
  return ctx->inputs && ctx->outputs && ctx->needs_input_grad && ctx->non_differentiable;
}

static void ctx_free_arrays(tg_ctx *ctx) {
  tg__host_free(ctx->inputs);
  tg__host_free(ctx->outputs);
  tg__host_free(ctx->needs_input_grad);
  tg__host_free(ctx->non_differentiable);
}

static tg_node *node_new(const tg_op_desc *op, int n_inputs, int n_outputs) {
  tg_node *node = tg__host_calloc(1, sizeof *node);
  if (!node) return NULL;
  atomic_init(&node->header.refcount, 1);
  node->header.name = op->name;
  node->header.destroy = destroy_node;
  node->sequence_nr = atomic_fetch_add(&next_sequence_nr, 1);
  node->edges = tg__host_calloc((size_t)(n_inputs > 0 ? n_inputs : 1), sizeof *node->edges);
  if (!node->edges || !ctx_alloc(&node->ctx, n_inputs, n_outputs)) {
    ctx_free_arrays(&node->ctx);
    tg__host_free(node->edges);
    tg__host_free(node);
    return NULL;
  }
  node->ctx.op = op;
  node->ctx.node = node;
  tg__live_inc();
  return node;
}

/* ---- apply ---- */

/* Errors name the function the caller called: tg_<name> for a built-in op (tg_sigmoid, not
 * sigmoid; the front ends are named so), the registered name for a user op. */
static const char *api_name(const tg_op_desc *op, char *buf, size_t size) {
  if (!(op->flags & TG__OP_BUILTIN)) return op->name;
  snprintf(buf, size, "tg_%s", op->name);
  return buf;
}

static tg_status check_call(const tg_op_desc *op, int n_inputs, const tg_tensor *const *inputs,
                            int n_scalars, const double *scalars, int n_ints, const int64_t *ints,
                            int n_outputs, tg_tensor **outputs, tg_device *device) {
  if (!op) return tg_set_error(TG_ERR_ARGUMENT, "tg_apply: op is NULL");
  char buf[96];
  const char *name = api_name(op, buf, sizeof buf);
  if (!outputs || n_outputs <= 0)
    return tg_set_error(TG_ERR_ARGUMENT, "%s: need at least one output slot", name);
  if ((op->n_inputs >= 0 && n_inputs != op->n_inputs) || n_inputs < 0)
    return tg_set_error(TG_ERR_ARGUMENT, "%s: takes %d inputs, %d given", name, op->n_inputs,
                        n_inputs);
  if (op->n_outputs >= 0 && n_outputs != op->n_outputs)
    return tg_set_error(TG_ERR_ARGUMENT, "%s: has %d outputs, %d slots given", name,
                        op->n_outputs, n_outputs);
  if (n_scalars < 0 || n_scalars > TG_CTX_MAX_SCALARS || (n_scalars > 0 && !scalars))
    return tg_set_error(TG_ERR_ARGUMENT, "%s: %d scalars (at most %d)", name, n_scalars,
                        TG_CTX_MAX_SCALARS);
  if (n_ints < 0 || n_ints > TG_CTX_MAX_INTS || (n_ints > 0 && !ints))
    return tg_set_error(TG_ERR_ARGUMENT, "%s: %d integer parameters (at most %d)", name, n_ints,
                        TG_CTX_MAX_INTS);
  if (n_inputs > 0 && !inputs)
    return tg_set_error(TG_ERR_ARGUMENT, "%s: inputs is NULL", name);
  for (int i = 0; i < n_inputs; i++) {
    if (!inputs[i]) {
      /* NULL in, NULL out: keep the error that produced the NULL. */
      if (tg_last_error() == TG_OK) tg_set_error(TG_ERR_ARGUMENT, "%s: input %d is NULL", name, i);
      return tg_last_error();
    }
  }
  *device = n_inputs > 0 ? inputs[0]->storage->device : TG_DEVICE_CPU;
  for (int i = 1; i < n_inputs; i++) {
    tg_device d = inputs[i]->storage->device;
    if (!tg_device_equal(d, *device))
      return tg_set_error(TG_ERR_DEVICE, "%s: input %d is on %s:%d but input 0 is on %s:%d", name,
                          i, tg_device_type_name(d.type), d.index,
                          tg_device_type_name(device->type), device->index);
  }
  if ((unsigned)device->type >= TG_NUM_DEVICE_TYPES || !op->forward[device->type])
    return tg_set_error(TG_ERR_DEVICE, "%s: no kernel for device %s", name,
                        tg_device_type_name(device->type));
  return TG_OK;
}

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

tg_status tg_apply(const tg_op_desc *op, int n_inputs, const tg_tensor *const *inputs,
                   int n_scalars, const double *scalars, int n_outputs, tg_tensor **outputs) {
  return tg_apply_ex(op, n_inputs, inputs, n_scalars, scalars, 0, NULL, n_outputs, outputs);
}

tg_status tg_apply_ex(const tg_op_desc *op, int n_inputs, const tg_tensor *const *inputs,
                      int n_scalars, const double *scalars, int n_ints, const int64_t *ints,
                      int n_outputs, tg_tensor **outputs) {
  if (outputs)
    for (int j = 0; j < n_outputs; j++) outputs[j] = NULL;
  tg_device device;
  tg_status st = check_call(op, n_inputs, inputs, n_scalars, scalars, n_ints, ints, n_outputs,
                            outputs, &device);
  if (st != TG_OK) return st;
  char api_buf[96];
  const char *api = api_name(op, api_buf, sizeof api_buf);

  bool inplace = (op->flags & TG_OP_INPLACE) != 0;
  bool any_requires = false;
  for (int i = 0; i < n_inputs; i++) any_requires |= inputs[i]->requires_grad;
  bool record = any_requires && op->backward && tg_is_grad_enabled();
  if (inplace && n_inputs > 0 && inputs[0]->requires_grad && tg_is_grad_enabled()) {
    if (!inputs[0]->grad_fn)
      return tg_set_error(TG_ERR_STATE,
                          "%s: a leaf tensor that requires grad is used in an in-place "
                          "operation; use tg_no_grad_begin or an out-of-place op",
                          api);
  }

  if (record) {
    /* A view's tape node assumes its base's history; a recorded in-place op on either would
     * leave the other with a wrong graph, which tg does not rebuild (PyTorch does): refuse. */
    if (inplace && inputs[0]->is_view)
      return tg_set_error(TG_ERR_UNSUPPORTED,
                          "%s: in-place operation on a view while recording gradients is not "
                          "supported; apply it to a contiguous copy (tg_clone)",
                          api);
    for (int i = 0; i < n_inputs; i++) {
      const tg_tensor *t = inputs[i];
      if (t->is_view && t->requires_grad &&
          atomic_load(&t->storage->history) != t->view_history)
        return tg_set_error(TG_ERR_STATE,
                            "%s: input %d is a view whose base was modified by an in-place "
                            "operation after the view was taken; take the view again",
                            api, i);
    }
  }

  /* Room for the outputs in the caller's scope first: once forward ran (an in-place op wrote
   * its target) registering them must not fail. */
  if (tg__scope_reserve((size_t)n_outputs) != TG_OK) return tg_last_error();

  tg_ctx local = {0};
  tg_node *node = NULL;
  tg_ctx *ctx = &local;
  if (record) {
    node = node_new(op, n_inputs, n_outputs);
    if (!node) return tg_set_error(TG_ERR_MEMORY, "%s: out of memory for a tape node", api);
    ctx = &node->ctx;
  } else if (!ctx_alloc(ctx, n_inputs, n_outputs)) {
    ctx_free_arrays(ctx);
    return tg_set_error(TG_ERR_MEMORY, "%s: out of memory for a call context", api);
  }
  ctx->op = op;
  ctx->n_inputs = n_inputs;
  ctx->n_outputs = n_outputs;
  ctx->materialize_grads = !(op->flags & TG_OP_NO_MATERIALIZE_GRADS);
  ctx->n_scalars = n_scalars;
  if (n_scalars > 0) memcpy(ctx->scalars, scalars, sizeof(double) * (size_t)n_scalars);
  ctx->n_ints = n_ints;
  if (n_ints > 0) memcpy(ctx->ints, ints, sizeof(int64_t) * (size_t)n_ints);
  for (int i = 0; i < n_inputs; i++) {
    fill_meta(&ctx->inputs[i], inputs[i]);
    ctx->needs_input_grad[i] = record && inputs[i]->requires_grad;
  }
  /* Edges are taken before forward: an in-place op replaces input 0's grad_fn. */
  if (node)
    for (int i = 0; i < n_inputs; i++) node->edges[i] = edge_to(inputs[i]);

  ctx->forward_outputs = outputs;
  ctx->inplace_target = inplace && n_inputs > 0 ? inputs[0] : NULL;
  uint64_t version_before = ctx->inplace_target ? tg_version(inputs[0]) : 0;
  bool was_enabled = tg_set_grad_enabled(false);
  tg_scope scope;
  st = tg__scope_open(&scope);
  if (st == TG_OK) st = op->forward[device.type](ctx, inputs, outputs);
  if (st != TG_OK) tg__error_prefix(api); /* a backend's "gemm: ..." becomes "tg_mm: gemm: ..." */
  for (int j = 0; j < n_outputs; j++) {
    if (st == TG_OK && !outputs[j])
      st = tg_last_error() != TG_OK
               ? tg_last_error()
               : tg_set_error(TG_ERR_STATE, "%s: forward left output %d unset", api, j);
    tg_retain(outputs[j]);
  }
  tg_scope_end(scope);
  tg_set_grad_enabled(was_enabled);
  ctx->forward_outputs = NULL;
  ctx->inplace_target = NULL;
  /* An in-place forward wrote input 0. Built-in kernels bump its version; a user op that
   * writes through the data pointer does not, so bump it here (once: PyTorch's mark_dirty)
   * and what other nodes saved of it is invalidated: a later backward through them fails. */
  bool wrote = st == TG_OK && inplace && n_inputs > 0;
  if (wrote && tg_version(inputs[0]) == version_before) tg__bump_version((tg_tensor *)inputs[0]);

  if (st == TG_OK && node) st = tg__ctx_adopt_saved_outputs(ctx, outputs);
  if (st == TG_OK && node && wrote) stamp_saved_outputs(ctx, inputs[0]->storage);
  if (st == TG_OK) {
    for (int j = 0; j < n_outputs; j++) {
      tg_tensor *out = outputs[j];
      /* An output that is an existing tensor with history (e.g. contiguous returning its
       * input) becomes a fresh alias, so recording never rewrites someone else's grad_fn. */
      bool is_input0_inplace = inplace && j == 0 && out == inputs[0];
      bool is_an_input = false;
      for (int i = 0; i < n_inputs; i++) is_an_input |= out == inputs[i];
      if (node && !is_input0_inplace && (is_an_input || out->grad_fn || out->requires_grad)) {
        tg_tensor *alias = tg__alias_raw(out);
        tg_release(out);
        outputs[j] = out = alias;
        if (!out) {
          st = tg_last_error();
          break;
        }
      }
      fill_meta(&ctx->outputs[j], out);
    }
  }
  if (st != TG_OK) {
    for (int j = 0; j < n_outputs; j++) {
      tg_release(outputs[j]);
      outputs[j] = NULL;
    }
    if (node)
      tg__node_release(node);
    else {
      tg__ctx_release_saved(ctx);
      ctx_free_arrays(ctx);
    }
    return st;
  }

  for (int j = 0; j < n_outputs; j++) {
    tg_tensor *out = outputs[j];
    if (node && !ctx->non_differentiable[j] && tg_dtype_is_floating(out->dtype)) {
      tg_node *old = out->grad_fn;
      tg__node_retain(node);
      out->grad_fn = node;
      out->output_nr = j;
      out->requires_grad = true;
      tg__node_release(old);
    }
    if (op->flags & TG_OP_VIEW) { /* recorded or not: an in-place write through it matters */
      out->is_view = true;
      out->view_history = atomic_load(&out->storage->history);
    }
    if (inplace && j == 0 && out == inputs[0]) {
      if (node) atomic_fetch_add(&out->storage->history, 1);
      tg_release(out); /* the caller keeps its own reference to the target */
    }
    else
      tg__scoped(out); /* cannot fail: reserved above */
  }
  if (node)
    tg__node_release(node); /* outputs hold it now */
  else {
    tg__ctx_release_saved(ctx);
    ctx_free_arrays(ctx);
  }
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
