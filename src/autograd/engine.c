/* The backward engine: runs the nodes reachable from the roots from newest to oldest
 * (sequence numbers give a valid reverse topological order), summing gradients that meet. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "anomaly.h"
#include "profile.h"
#include "grad_arith.h"
#include "grad_lock.h"
#include "hooks.h"
#include "node.h"
#include "tensor/error_impl.h"
#include "tensor/check.h"
#include "tensor/host_memory.h"

static atomic_ullong visit_epoch_counter;

static int newest_first(const void *a, const void *b) {
  uint64_t x = (*(tg_node *const *)a)->sequence_nr, y = (*(tg_node *const *)b)->sequence_nr;
  return x < y ? 1 : x > y ? -1 : 0;
}

/* Every node reachable from the roots, newest first, each with a zeroed grads array and
 * claimed for this pass. A node another pass holds (a backward on another thread through a
 * shared part of the graph, or one called from inside a backward) is an error: the passes
 * would share its scratch grads. run_backward gives the claims back. */
static tg_status collect(const char *name, int n_roots, tg_node *const *roots,
                         tg_node_list *order) {
  uint64_t epoch = atomic_fetch_add(&visit_epoch_counter, 1) + 1;
  tg_node_list stack = {0};
  tg_status st = TG_OK;
  const tg_node *busy = NULL;
  for (int r = 0; r < n_roots && st == TG_OK; r++)
    if (roots[r] && !tg__node_list_push(&stack, roots[r])) st = TG_ERR_MEMORY;
  while (st == TG_OK && stack.count > 0) {
    tg_node *n = stack.items[--stack.count];
    unsigned long long owner = 0;
    if (!atomic_compare_exchange_strong(&n->backward_owner, &owner, epoch)) {
      if (owner == epoch) continue; /* reached twice */
      busy = n;
      st = TG_ERR_STATE;
      break;
    }
    if (!tg__node_list_push(order, n)) {
      atomic_store(&n->backward_owner, 0);
      st = TG_ERR_MEMORY;
      break;
    }
    n->grads = tg__host_calloc((size_t)n->ctx.n_outputs, sizeof *n->grads);
    if (!n->grads) {
      st = TG_ERR_MEMORY;
      break;
    }
    for (int i = 0; i < n->ctx.n_inputs && st == TG_OK; i++) {
      tg_node *next = n->edges[i].node;
      if (next && atomic_load(&next->backward_owner) != epoch && !tg__node_list_push(&stack, next))
        st = TG_ERR_MEMORY;
    }
  }
  tg__host_free(stack.items);
  if (busy)
    return tg_set_error(TG_ERR_STATE,
                        "%s: the graph through %s is being differentiated by another backward "
                        "at the same time (on another thread, or one called from a backward); "
                        "threads may share leaves but not tensors with a grad_fn",
                        name, busy->ctx.op->name);
  if (st != TG_OK) return tg_set_error(st, "%s: out of memory walking the graph", name);
  if (order->count > 1) qsort(order->items, order->count, sizeof *order->items, newest_first);
  return TG_OK;
}

/* Whether the engine holds the only reference to t and to its memory, so that adding into
 * it changes nothing anyone else can see: a contiguous gradient that no scope, node or
 * other tensor (a view) holds. */
static bool engine_owns(const tg_tensor *t) {
  return atomic_load(&t->refcount) == 1 && atomic_load(&t->storage->refcount) == 1 && !t->grad_fn &&
         tg_is_contiguous(t);
}

/* *slot += g. Without create_graph the sum is computed outside the tape: into *slot itself
 * when the engine owns it (no new buffer, and the one written is already in cache). */
static tg_status accumulate(tg_tensor **slot, const tg_tensor *g, bool create_graph) {
  if (!*slot) {
    *slot = tg_retain(g);
    return TG_OK;
  }
  const tg_grad_arith *arith = tg__grad_arith();
  if (!create_graph && engine_owns(*slot)) return arith->add_into("tg_backward", *slot, *slot, g);
  tg_tensor *sum;
  if (create_graph) {
    sum = tg_retain(arith->add(*slot, g));
  } else {
    sum = arith->empty(g->ndim, g->sizes, g->dtype, g->storage->device);
    if (sum && arith->add_into("tg_backward", sum, *slot, g) != TG_OK) {
      tg_release(sum);
      sum = NULL;
    }
  }
  if (!sum) return tg_last_error();
  tg_release(*slot);
  *slot = sum;
  return TG_OK;
}

/* leaf.grad += g (a contiguous copy the first time, so .grad never aliases graph memory).
 * Called with leaf's grad lock held. */
static tg_status accumulate_leaf_locked(tg_tensor *leaf, const tg_tensor *g, bool create_graph) {
  if (create_graph) return accumulate(&leaf->grad, g, true);
  const tg_grad_arith *arith = tg__grad_arith();
  if (!leaf->grad) {
    tg_tensor *copy = arith->empty(g->ndim, g->sizes, g->dtype, g->storage->device);
    if (!copy) return tg_last_error();
    if (arith->copy_into("tg_backward", copy, g) != TG_OK) {
      tg_release(copy);
      return tg_last_error();
    }
    leaf->grad = copy;
    return TG_OK;
  }
  if (leaf->grad->grad_fn) return accumulate(&leaf->grad, g, false); /* from a create_graph run */
  tg_status st = arith->add_into("tg_backward", leaf->grad, leaf->grad, g);
  if (st == TG_OK) tg__bump_version(leaf->grad);
  return st;
}

/* Threads running backward into a shared leaf (hogwild) serialise on its grad lock: the
 * check-and-set of .grad and the in-place sum would otherwise lose one thread's gradient. */
static tg_status accumulate_leaf(tg_tensor *leaf, const tg_tensor *g, bool create_graph) {
  tg__grad_lock(leaf);
  tg_status st = accumulate_leaf_locked(leaf, g, create_graph);
  tg__grad_unlock(leaf);
  return st;
}

/* Leaves with post-accumulate grad hooks that a pass may add into (tg_backward's passes only):
 * how many of the pass's edges into each are still to run, and whether the pass has added
 * anything yet. A leaf's hooks run when its count reaches zero: no node left could add to
 * its .grad. Sorted by address. */
typedef struct hooked_leaf {
  tg_tensor *leaf;
  int pending;
  bool added;
} hooked_leaf;
typedef struct hook_table {
  hooked_leaf *items;
  size_t count;
} hook_table;

static int by_address(const void *a, const void *b) {
  uintptr_t x = (uintptr_t)((const hooked_leaf *)a)->leaf;
  uintptr_t y = (uintptr_t)((const hooked_leaf *)b)->leaf;
  return x < y ? -1 : x > y;
}

static hooked_leaf *hooked(const hook_table *t, const tg_tensor *leaf) {
  if (!t || !t->count) return NULL;
  hooked_leaf key = {.leaf = (tg_tensor *)leaf};
  return bsearch(&key, t->items, t->count, sizeof key, by_address);
}

/* Whether edge i of node counts towards a hooked leaf (the edges run_node adds through). */
static bool edge_to_hooked_leaf(const tg_node *node, int i) {
  const tg_edge *e = &node->edges[i];
  return node->ctx.needs_input_grad[i] && !e->node && e->leaf &&
         tg__has_post_accumulate_hooks(e->leaf);
}

static void mark_added(const hook_table *t, const tg_tensor *leaf) {
  hooked_leaf *h = hooked(t, leaf);
  if (h) h->added = true;
}

/* One edge into leaf has run: its hooks run if it was the last and the pass added to it. */
static tg_status edge_done(const hook_table *t, const tg_tensor *leaf, bool grad_mode) {
  hooked_leaf *h = hooked(t, leaf);
  if (!h || --h->pending > 0 || !h->added) return TG_OK;
  return tg__run_post_accumulate_hooks(h->leaf, grad_mode);
}

static tg_status check_grad(const char *name, const tg_node *node, int i, const tg_tensor *g) {
  const tg_meta *m = &node->ctx.inputs[i];
  const char *op = node->ctx.op->name;
  tg_device gd = g->storage->device;
  bool ok = tg__check(tg__dims_equal(g->ndim, g->sizes, m->ndim, m->sizes), TG_ERR_SHAPE, name,
                      "backward of %s returned a gradient of shape %s for input %d, expected %s",
                      op, tg__sizes_str(g), i, tg__dims_str(m->ndim, m->sizes)) &&
            tg__check(g->dtype == m->dtype, TG_ERR_DTYPE, name,
                      "backward of %s returned a %s gradient for input %d, expected %s", op,
                      tg_dtype_name(g->dtype), i, tg_dtype_name(m->dtype)) &&
            tg__check(tg_device_equal(gd, m->device), TG_ERR_DEVICE, name,
                      "backward of %s returned a gradient on %s:%d for input %d, expected %s:%d",
                      op, tg_device_type_name(gd.type), gd.index, i,
                      tg_device_type_name(m->device.type), m->device.index);
  return ok ? TG_OK : tg_last_error();
}

/* Marks grads flowing out of a once-differentiable backward so double backward fails. */
static tg_status fwd_once_diff_guard(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  (void)ctx;
  out[0] = tg_detach(in[0]);
  return out[0] ? TG_OK : tg_last_error();
}
static tg_status bwd_once_diff_guard(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  (void)g, (void)gi;
  /* No prefix: run_backward puts the entry point the caller used in front. */
  return tg_set_error(TG_ERR_STATE,
                      "%s is once-differentiable; double backward through it is not supported",
                      ctx->data ? (const char *)ctx->data : "a function");
}
static const tg_op_desc once_diff_guard = {.name = "once_differentiable_guard",
                                           .n_inputs = 1,
                                           .n_outputs = 1,
                                           .forward = TG__ON_EVERY_DEVICE(fwd_once_diff_guard),
                                           .backward = bwd_once_diff_guard};

static tg_tensor *guard_once_differentiable(const tg_tensor *g, const char *op_name) {
  /* g was computed with grad mode off, so it does not require grad: guard a detached alias
   * that does (as PyTorch's once_differentiable does), or no guard node would be recorded. */
  tg_tensor *alias = tg_detach(g), *out = NULL;
  if (!alias || tg_set_requires_grad(alias, true) != TG_OK) return NULL;
  if (tg_apply(&once_diff_guard, 1, (const tg_tensor *const[]){alias}, 0, NULL, 1, &out) != TG_OK)
    return NULL;
  if (out->grad_fn) out->grad_fn->ctx.data = (void *)op_name; /* static string, not freed */
  return out;
}

/* After a backward: the .grad it added into changed (version bump) and is unlocked. A
 * backward that both took input i's destination and returned a gradient for it would have
 * that gradient counted twice: an error. */
static tg_status release_destinations(const char *name, tg_node *node, tg_tensor **grad_inputs,
                                      tg_status st, const hook_table *hooks) {
  tg_ctx *ctx = &node->ctx;
  for (int i = 0; ctx->destinations && i < ctx->n_inputs; i++) {
    if (!((ctx->destinations >> i) & 1)) continue;
    ctx->destinations &= ~((uint64_t)1 << i);
    tg_tensor *leaf = node->edges[i].leaf;
    mark_added(hooks, leaf);
    tg__bump_version(leaf->grad);
    tg__grad_unlock(leaf);
    if (st == TG_OK && grad_inputs[i])
      st = tg_set_error(TG_ERR_STATE,
                        "%s: backward of %s added input %d's gradient into its .grad and also "
                        "returned one",
                        name, ctx->op->name, i);
  }
  ctx->accumulating = false;
  return st;
}

static tg_status run_node(const char *name, tg_node *node, const tg_backward_options *opts,
                          bool accumulate_leaves, tg_tensor **grad_inputs,
                          const hook_table *hooks) {
  tg_ctx *ctx = &node->ctx;
  const tg_op_desc *op = ctx->op;
  bool once = (op->flags & TG_OP_ONCE_DIFFERENTIABLE) != 0;
  tg_status st = TG_OK;
  for (int j = 0; j < ctx->n_outputs; j++) {
    if (!node->grads[j] && ctx->materialize_grads) {
      const tg_meta *m = &ctx->outputs[j];
      node->grads[j] = tg_retain(tg__grad_arith()->zeros(
          m->ndim, m->sizes, (tg_options){.dtype = m->dtype, .device = m->device}));
      if (!node->grads[j]) return tg_last_error();
    }
  }
  bool record = opts->create_graph && !once;
  bool was = tg_set_grad_enabled(record);
  ctx->accumulating = accumulate_leaves && !opts->create_graph;
  bool anomaly = tg__anomaly_begin_op(); /* false unless anomaly mode is on */
  tg__profile_frame timed;
  tg__profile_begin(&timed);
  st = op->backward(ctx, (const tg_tensor *const *)node->grads, grad_inputs);
  tg__profile_end(&timed, op->name, true);
  tg__anomaly_end_op(anomaly);
  if (st != TG_OK) st = tg__kernel_failed(op->name, "backward", st);
  st = release_destinations(name, node, grad_inputs, st, hooks);
  tg_set_grad_enabled(was);
  if (st != TG_OK) return st;
  /* Every gradient is judged before any is passed on: a failed check adds nothing. */
  for (int i = 0; anomaly && i < ctx->n_inputs; i++)
    if (grad_inputs[i] && ctx->needs_input_grad[i] &&
        ((st = check_grad(name, node, i, grad_inputs[i])) != TG_OK ||
         (st = tg__anomaly_check_grad(name, op->name, i, grad_inputs[i])) != TG_OK))
      return st;
  for (int i = 0; i < ctx->n_inputs; i++) {
    tg_tensor *g = grad_inputs[i];
    if (!g || !ctx->needs_input_grad[i]) continue;
    if ((st = check_grad(name, node, i, g)) != TG_OK) return st;
    /* Guarded even when the incoming grads are constants: the gradient still depends on the
     * inputs, so double backward must fail rather than silently miss those terms. */
    if (opts->create_graph && once) {
      g = grad_inputs[i] = guard_once_differentiable(g, op->name);
      if (!g) return tg_last_error();
    }
    tg_edge *e = &node->edges[i];
    if (e->node && e->node->grads)
      st = accumulate(&e->node->grads[e->output_nr], g, opts->create_graph);
    else if (e->leaf && accumulate_leaves) {
      st = accumulate_leaf(e->leaf, g, opts->create_graph);
      if (st == TG_OK) mark_added(hooks, e->leaf);
    }
    if (st != TG_OK) return st;
  }
  return TG_OK;
}

typedef struct capture {
  int n;
  const tg_tensor *const *inputs; /* tensors whose gradient is wanted (tg_autograd_grad) */
  tg_tensor **grads;              /* owned references */
} capture;

/* Gradients reaching a captured input are collected instead of flowing on. */
static tg_status capture_from_node(tg_node *node, capture *cap, tg_tensor **grad_inputs,
                                   bool create_graph) {
  for (int i = 0; i < node->ctx.n_inputs; i++) {
    if (!grad_inputs[i] || !node->ctx.needs_input_grad[i]) continue;
    tg_edge *e = &node->edges[i];
    for (int k = 0; k < cap->n; k++) {
      const tg_tensor *want = cap->inputs[k];
      bool hit = want->grad_fn ? (e->node == want->grad_fn && e->output_nr == want->output_nr)
                               : e->leaf == want;
      if (!hit || want->grad_fn) continue; /* non-leaf targets are read from node grads */
      tg_status st = accumulate(&cap->grads[k], grad_inputs[i], create_graph);
      if (st != TG_OK) return st;
    }
  }
  return TG_OK;
}

/* The gradient that starts root r: the caller's (checked against the root) or, for a
 * one-element root, an implicit one. A reference of ours in *out. */
static tg_status root_grad(const char *name, int r, const tg_tensor *root, const tg_tensor *g,
                           tg_tensor **out, bool *callers_error) {
  if (!root->requires_grad)
    return tg_set_error(TG_ERR_STATE, "%s: output %d %s does not require grad and has no grad_fn",
                        name, r, tg__sizes_str(root));
  /* A NULL grad while an error is pending is the failed result of an earlier call (as
   * for any op input), not a request for an implicit one: report that error. */
  if (!g && tg_last_error() != TG_OK) {
    *callers_error = true;
    return tg_last_error();
  }
  if (!g) {
    if (!tg__check(tg__numel(root->ndim, root->sizes) == 1, TG_ERR_SHAPE, name,
                   "grad can be implicitly created only for one-element outputs, output %d is %s",
                   r, tg__sizes_str(root)))
      return tg_last_error();
    g = tg__grad_arith()->ones_like(root);
    if (!g) return tg_last_error();
  } else {
    char output[32];
    if (!tg__check(tg__same_sizes(g, root), TG_ERR_SHAPE, name,
                   "grad %s does not match output %d %s", tg__sizes_str(g), r, tg__sizes_str(root)))
      return tg_last_error();
    if (!tg__is_alike(g, root)) {
      snprintf(output, sizeof output, "output %d", r);
      tg__check_alike(name, "grad", g, output, root);
      return tg_last_error();
    }
  }
  *out = tg_retain(g);
  return TG_OK;
}

/* One backward pass: its roots, their starting gradients and the nodes it holds. */
typedef struct pass {
  const char *name;
  int n_roots;
  const tg_tensor *const *roots;
  tg_backward_options opts;
  capture *cap;         /* tg_autograd_grad's targets; NULL for tg_backward */
  tg_node **root_nodes; /* roots' grad_fn (NULL for a leaf root) */
  tg_tensor **grads0;   /* owned: the starting gradient of each root */
  tg_node_list order;   /* the reachable nodes, newest first, claimed */
  hook_table hooks;     /* leaves with post-accumulate hooks (tg_backward only) */
  bool callers_error;   /* a pending error handed in as a NULL grad: kept as it is */
} pass;

static tg_status take_root_grads(pass *p, const tg_tensor *const *root_grads) {
  p->root_nodes = tg__host_calloc((size_t)p->n_roots, sizeof *p->root_nodes);
  p->grads0 = tg__host_calloc((size_t)p->n_roots, sizeof *p->grads0);
  if (!p->root_nodes || !p->grads0)
    return tg_set_error(TG_ERR_MEMORY, "%s: out of memory", p->name);
  for (int r = 0; r < p->n_roots; r++) {
    const tg_tensor *root = p->roots[r];
    tg_status st = root_grad(p->name, r, root, root_grads ? root_grads[r] : NULL, &p->grads0[r],
                             &p->callers_error);
    if (st != TG_OK) return st;
    p->root_nodes[r] = root->grad_fn;
  }
  return TG_OK;
}

/* Each root's gradient goes to its node's slot, a captured target, or its leaf's .grad. */
static tg_status seed_roots(pass *p) {
  bool create = p->opts.create_graph;
  tg_status st = TG_OK;
  for (int r = 0; r < p->n_roots && st == TG_OK; r++) {
    const tg_tensor *root = p->roots[r];
    if (root->grad_fn)
      st = accumulate(&root->grad_fn->grads[root->output_nr], p->grads0[r], create);
    else if (p->cap) {
      for (int k = 0; k < p->cap->n && st == TG_OK; k++)
        if (p->cap->inputs[k] == root) st = accumulate(&p->cap->grads[k], p->grads0[r], create);
    } else {
      st = accumulate_leaf((tg_tensor *)root, p->grads0[r], create);
      if (st == TG_OK) mark_added(&p->hooks, root);
      if (st == TG_OK) st = edge_done(&p->hooks, root, create);
    }
  }
  return st;
}

/* Non-leaf targets of tg_autograd_grad: their gradient is complete once their node is
 * reached. */
static tg_status capture_node_outputs(pass *p, tg_node *node) {
  tg_status st = TG_OK;
  for (int c = 0; c < p->cap->n && st == TG_OK; c++) {
    const tg_tensor *want = p->cap->inputs[c];
    if (want->grad_fn == node && node->grads[want->output_nr])
      st = accumulate(&p->cap->grads[c], node->grads[want->output_nr], p->opts.create_graph);
  }
  return st;
}

/* Runs one node's backward in a scope of its own and passes its gradients on; then drops
 * its incoming gradients and, without retain_graph, its saved tensors. */
static tg_status backward_node(pass *p, tg_node *node) {
  if (node->ctx.released)
    return tg_set_error(TG_ERR_STATE,
                        "%s: trying to backward through the graph a second time (%s's saved "
                        "tensors were freed); pass retain_graph to the first backward",
                        p->name, node->ctx.op->name);
  tg_tensor **grad_inputs = tg__host_calloc((size_t)node->ctx.n_inputs, sizeof *grad_inputs);
  if (!grad_inputs) return tg_set_error(TG_ERR_MEMORY, "%s: out of memory", p->name);
  tg_scope scope;
  tg_status st = tg__scope_open(&scope);
  if (st == TG_OK) st = run_node(p->name, node, &p->opts, p->cap == NULL, grad_inputs, &p->hooks);
  if (st == TG_OK && p->cap)
    st = capture_from_node(node, p->cap, grad_inputs, p->opts.create_graph);
  tg_scope_end(scope);
  tg__host_free(grad_inputs);
  for (int j = 0; j < node->ctx.n_outputs; j++) {
    tg_release(node->grads[j]);
    node->grads[j] = NULL;
  }
  if (st == TG_OK && !p->opts.retain_graph) {
    tg__ctx_release_saved(&node->ctx);
    node->ctx.released = true;
  }
  return st;
}

/* The nodes newest first; one that no gradient reached is skipped. */
static tg_status run_nodes(pass *p) {
  for (size_t k = 0; k < p->order.count; k++) {
    tg_node *node = p->order.items[k];
    bool any = false;
    for (int j = 0; j < node->ctx.n_outputs; j++) any |= node->grads[j] != NULL;
    tg_status st = p->cap ? capture_node_outputs(p, node) : TG_OK;
    if (st == TG_OK && any) st = backward_node(p, node);
    for (int i = 0; p->hooks.count && i < node->ctx.n_inputs && st == TG_OK; i++)
      if (edge_to_hooked_leaf(node, i))
        st = edge_done(&p->hooks, node->edges[i].leaf, p->opts.create_graph);
    if (st != TG_OK) return st;
  }
  return TG_OK;
}

/* The pass's hook table: one entry per hooked leaf, pending = the edges (and leaf roots) that
 * reach it. Nothing is allocated when no leaf has hooks. */
static tg_status build_hook_table(pass *p) {
  size_t n = 0;
  for (int pass_over = 0; pass_over < 2; pass_over++) {
    if (pass_over == 1) {
      if (n == 0) return TG_OK;
      p->hooks.items = tg__host_calloc(n, sizeof *p->hooks.items);
      if (!p->hooks.items) return tg_set_error(TG_ERR_MEMORY, "%s: out of memory", p->name);
      n = 0;
    }
    for (size_t k = 0; k < p->order.count; k++) {
      tg_node *node = p->order.items[k];
      for (int i = 0; i < node->ctx.n_inputs; i++)
        if (edge_to_hooked_leaf(node, i)) {
          if (pass_over == 1) p->hooks.items[n] = (hooked_leaf){node->edges[i].leaf, 1, false};
          n++;
        }
    }
    for (int r = 0; r < p->n_roots; r++) {
      tg_tensor *root = (tg_tensor *)p->roots[r];
      if (root->grad_fn || !tg__has_post_accumulate_hooks(root)) continue;
      if (pass_over == 1) p->hooks.items[n] = (hooked_leaf){root, 1, false};
      n++;
    }
  }
  qsort(p->hooks.items, n, sizeof *p->hooks.items, by_address);
  size_t unique = 0;
  for (size_t k = 0; k < n; k++) {
    if (unique > 0 && p->hooks.items[unique - 1].leaf == p->hooks.items[k].leaf)
      p->hooks.items[unique - 1].pending++;
    else
      p->hooks.items[unique++] = p->hooks.items[k];
  }
  p->hooks.count = unique;
  return TG_OK;
}

/* Frees the pass's scratch and gives its nodes back for the next pass. */
static void end_pass(pass *p) {
  for (size_t k = 0; k < p->order.count; k++) {
    tg_node *node = p->order.items[k];
    if (node->grads)
      for (int j = 0; j < node->ctx.n_outputs; j++) tg_release(node->grads[j]);
    tg__host_free(node->grads);
    node->grads = NULL;
    atomic_store(&node->backward_owner, 0); /* last: the scratch is free for the next pass */
  }
  tg__host_free(p->order.items);
  tg__host_free(p->hooks.items);
  if (p->grads0)
    for (int r = 0; r < p->n_roots; r++) tg_release(p->grads0[r]);
  tg__host_free(p->grads0);
  tg__host_free(p->root_nodes);
}

static tg_status run_backward(const char *name, int n_roots, const tg_tensor *const *roots,
                              const tg_tensor *const *root_grads, tg_backward_options opts,
                              capture *cap) {
  if (opts.create_graph) opts.retain_graph = true;
  pass p = {.name = name, .n_roots = n_roots, .roots = roots, .opts = opts, .cap = cap};
  tg_status st = take_root_grads(&p, root_grads);
  if (st == TG_OK) st = collect(name, n_roots, p.root_nodes, &p.order);
  if (st == TG_OK && !cap) st = build_hook_table(&p);
  if (st == TG_OK) st = seed_roots(&p);
  if (st == TG_OK) st = run_nodes(&p);
  /* An error raised below (a backward formula's op, a saved tensor's version check, a custom
   * backward) is reported as this call's: its message starts with name. */
  if (st != TG_OK && !p.callers_error) tg__error_prefix(name);
  end_pass(&p);
  return st;
}

/* One backward pass from roots (checked non-NULL) in a scope of its own: a leaf root gets its
 * grad added. */
static tg_status backward_roots(const char *name, int n_roots, const tg_tensor *const *roots,
                                const tg_tensor *const *grads, tg_backward_options opts) {
  tg_scope scope;
  tg_status st = tg__scope_open(&scope);
  if (st == TG_OK) st = run_backward(name, n_roots, roots, grads, opts, NULL);
  tg_scope_end(scope);
  return st;
}

static tg_status backward_impl(const char *name, const tg_tensor *root, const tg_tensor *grad,
                               tg_backward_options opts) {
  if (!tg__check_arg(name, "root", root)) return tg_last_error();
  return backward_roots(name, 1, &root, (const tg_tensor *const[]){grad}, opts);
}

tg_status tg_backward_ex(const tg_tensor *root, const tg_tensor *grad, tg_backward_options opts) {
  return backward_impl("tg_backward_ex", root, grad, opts);
}

tg_status tg_backward(const tg_tensor *root, const tg_tensor *grad) {
  return backward_impl("tg_backward", root, grad, (tg_backward_options){0});
}

tg_status tg_backward_multi(int n_roots, const tg_tensor *const *roots,
                            const tg_tensor *const *grads, tg_backward_options opts) {
  const char *name = "tg_backward_multi";
  if (n_roots <= 0 || !roots)
    return tg_set_error(TG_ERR_ARGUMENT, "%s: need at least one root (got %d, roots %s)", name,
                        n_roots, roots ? "given" : "NULL");
  for (int r = 0; r < n_roots; r++)
    if (!roots[r])
      return tg_last_error() != TG_OK
                 ? tg_last_error()
                 : tg_set_error(TG_ERR_ARGUMENT, "%s: root %d is NULL", name, r);
  return backward_roots(name, n_roots, roots, grads, opts);
}

tg_status tg_autograd_grad(int n_outputs, const tg_tensor *const *outputs,
                           const tg_tensor *const *grad_outputs, int n_inputs,
                           const tg_tensor *const *inputs, tg_tensor **grads_out,
                           tg_backward_options opts, bool allow_unused) {
  if (n_outputs <= 0 || n_inputs <= 0)
    return tg_set_error(TG_ERR_ARGUMENT,
                        "tg_autograd_grad: need at least one output and one input (n_outputs is "
                        "%d, n_inputs %d)",
                        n_outputs, n_inputs);
  if (!outputs || !inputs || !grads_out)
    return tg_set_error(TG_ERR_ARGUMENT, "tg_autograd_grad: %s is NULL",
                        !outputs  ? "outputs"
                        : !inputs ? "inputs"
                                  : "grads_out");
  for (int k = 0; k < n_inputs; k++) grads_out[k] = NULL;
  for (int r = 0; r < n_outputs; r++)
    if (!tg__check_arg("tg_autograd_grad", "output", outputs[r])) return tg_last_error();
  for (int k = 0; k < n_inputs; k++) {
    if (!tg__check_arg("tg_autograd_grad", "input", inputs[k])) return tg_last_error();
    if (!inputs[k]->requires_grad)
      return tg_set_error(TG_ERR_STATE, "tg_autograd_grad: input %d does not require grad", k);
  }
  /* Room in the caller's scope for the results first, so handing them over cannot fail. */
  if (tg__scope_reserve((size_t)n_inputs) != TG_OK) return tg_last_error();
  tg_tensor **owned = tg__host_calloc((size_t)n_inputs, sizeof *owned);
  if (!owned) return tg_set_error(TG_ERR_MEMORY, "tg_autograd_grad: out of memory");
  capture cap = {n_inputs, inputs, owned};
  tg_scope scope;
  tg_status st = tg__scope_open(&scope);
  if (st == TG_OK)
    st = run_backward("tg_autograd_grad", n_outputs, outputs, grad_outputs, opts, &cap);
  tg_scope_end(scope);
  for (int k = 0; k < n_inputs && st == TG_OK; k++)
    if (!owned[k] && !allow_unused)
      st = tg_set_error(TG_ERR_STATE,
                        "tg_autograd_grad: input %d was not used to compute the outputs "
                        "(pass allow_unused)",
                        k);
  for (int k = 0; k < n_inputs; k++) {
    if (st == TG_OK)
      grads_out[k] = tg__scoped(owned[k]); /* cannot fail: reserved above */
    else
      tg_release(owned[k]);
  }
  tg__host_free(owned);
  return st;
}
