/* tg_graph_saved_bytes: the memory a graph keeps for backward, to compare what the fused
 * and composed LLTM save. Walks the nodes reachable from the outputs and sums the sizes of
 * the distinct storages their saved tensors hold. */
#include <stdlib.h>

#include "autograd/node.h"
#include "tensor/host_memory.h"
#include "tg/autograd.h"

/* A set of pointers: open addressing, linear probing, grown at half full. */
typedef struct ptr_set {
  const void **slots;
  size_t capacity, count;
} ptr_set;

static size_t ptr_hash(const void *p) {
  uint64_t x = (uint64_t)(uintptr_t)p;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return (size_t)x;
}

/* Adds p; 1 if it was new, 0 if already there, -1 when out of memory. */
static int ptr_set_add(ptr_set *s, const void *p) {
  if (2 * (s->count + 1) > s->capacity) {
    size_t cap = s->capacity ? 2 * s->capacity : 64;
    const void **slots = tg__host_calloc(cap, sizeof *slots);
    if (!slots) return -1;
    for (size_t i = 0; i < s->capacity; i++) {
      if (!s->slots[i]) continue;
      size_t h = ptr_hash(s->slots[i]) & (cap - 1);
      while (slots[h]) h = (h + 1) & (cap - 1);
      slots[h] = s->slots[i];
    }
    tg__host_free(s->slots);
    s->slots = slots;
    s->capacity = cap;
  }
  size_t h = ptr_hash(p) & (s->capacity - 1);
  while (s->slots[h]) {
    if (s->slots[h] == p) return 0;
    h = (h + 1) & (s->capacity - 1);
  }
  s->slots[h] = p;
  s->count++;
  return 1;
}

/* Pushes node unless it was seen; false when out of memory. */
static bool visit(ptr_set *seen, tg_node_list *todo, tg_node *node) {
  if (!node) return true;
  int fresh = ptr_set_add(seen, node);
  return fresh == 0 || (fresh > 0 && tg__node_list_push(todo, node));
}

int64_t tg_graph_saved_bytes(int n_outputs, const tg_tensor *const *outputs, int n_exclude,
                             const tg_tensor *const *exclude) {
  if (n_outputs < 0 || (n_outputs > 0 && !outputs) || n_exclude < 0 ||
      (n_exclude > 0 && !exclude)) {
    tg_set_error(TG_ERR_ARGUMENT, "tg_graph_saved_bytes: bad output or exclude list");
    return -1;
  }
  ptr_set nodes = {0}, storages = {0};
  tg_node_list todo = {0};
  int64_t bytes = 0;
  bool ok = true;
  /* Excluded storages count as already seen. */
  for (int i = 0; i < n_exclude && ok; i++)
    if (exclude[i]) ok = ptr_set_add(&storages, exclude[i]->storage) >= 0;
  for (int i = 0; i < n_outputs && ok; i++)
    if (outputs[i]) ok = visit(&nodes, &todo, outputs[i]->grad_fn);
  while (ok && todo.count > 0) {
    tg_node *node = todo.items[--todo.count];
    const tg_ctx *ctx = &node->ctx;
    for (int k = 0; k < ctx->n_saved && ok; k++) {
      const tg_storage *st = ctx->saved[k].data->storage;
      int fresh = ptr_set_add(&storages, st);
      ok = fresh >= 0;
      if (fresh > 0) bytes += (int64_t)st->nbytes;
    }
    for (int e = 0; e < ctx->n_inputs && ok; e++) ok = visit(&nodes, &todo, node->edges[e].node);
  }
  tg__host_free(todo.items);
  tg__host_free(nodes.slots);
  tg__host_free(storages.slots);
  if (!ok) {
    tg_set_error(TG_ERR_MEMORY, "tg_graph_saved_bytes: out of memory walking the graph");
    return -1;
  }
  return bytes;
}
