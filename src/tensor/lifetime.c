/* Tensor reference counts and scopes (thread-local autorelease pools). */
#include <string.h>

#include "host_memory.h"

#include "tensor_impl.h"

typedef struct scope {
  tg_tensor **items;
  size_t count, capacity;
} scope;

/* The scope stack: the first FIRST_BLOCK levels live in thread-local storage, so opening a
 * scope allocates nothing in practice; deeper nesting moves the stack to the heap, freed
 * again when the depth returns to 0 (so nothing is left at thread exit). When even that
 * cannot grow, the scope is opened as a "failed" level above the stack: tensors returned
 * in it cannot be registered, so the ops fail with TG_ERR_MEMORY, and the matching
 * tg_scope_end closes it, keeping begin/end balanced. */
enum { FIRST_BLOCK = 32 };
static _Thread_local scope first_block[FIRST_BLOCK];
static _Thread_local scope *scopes;
static _Thread_local int scope_count, scope_capacity, failed_count;

static bool grow_stack(void) {
  if (!scopes) {
    scopes = first_block;
    scope_capacity = FIRST_BLOCK;
    return true;
  }
  int cap = scope_capacity * 2;
  scope *grown;
  if (scopes == first_block) {
    grown = tg__host_malloc(sizeof *grown * (size_t)cap);
    if (grown) memcpy(grown, first_block, sizeof first_block);
  } else {
    grown = tg__host_realloc(scopes, sizeof *grown * (size_t)cap);
  }
  if (!grown) return false;
  scopes = grown;
  scope_capacity = cap;
  return true;
}

tg_status tg__scope_open(void) {
  if (failed_count > 0 || (scope_count == scope_capacity && !grow_stack())) {
    failed_count++;
    return tg_set_error(TG_ERR_MEMORY, "tg_scope_begin: out of memory for scope level %d",
                        scope_count + failed_count);
  }
  scopes[scope_count++] = (scope){0};
  return TG_OK;
}

void tg_scope_begin(void) { (void)tg__scope_open(); }

void tg_scope_end(void) {
  if (failed_count > 0) {
    failed_count--;
    return;
  }
  if (scope_count == 0) return;
  scope s = scopes[--scope_count];
  for (size_t i = s.count; i-- > 0;) tg_release(s.items[i]);
  tg__host_free(s.items);
  if (scope_count == 0 && scopes != first_block) {
    tg__host_free(scopes);
    scopes = NULL;
    scope_capacity = 0;
  }
}

int tg_scope_depth(void) { return scope_count + failed_count; }

tg_status tg__scope_reserve(size_t n) {
  if (failed_count > 0)
    return tg_set_error(TG_ERR_MEMORY, "tg_scope: out of memory: the innermost scope could "
                                       "not be opened");
  if (scope_count == 0) return TG_OK;
  scope *s = &scopes[scope_count - 1];
  if (s->capacity - s->count >= n) return TG_OK;
  size_t cap = s->capacity ? s->capacity : 16;
  while (cap - s->count < n) cap *= 2;
  tg_tensor **grown = tg__host_realloc(s->items, sizeof *grown * cap);
  if (!grown) return tg_set_error(TG_ERR_MEMORY, "tg_scope: out of memory registering a tensor");
  s->items = grown;
  s->capacity = cap;
  return TG_OK;
}

tg_tensor *tg__scoped(tg_tensor *t) {
  if (!t || (scope_count == 0 && failed_count == 0)) return t;
  if (tg__scope_reserve(1) != TG_OK) {
    tg_release(t);
    return NULL;
  }
  scope *s = &scopes[scope_count - 1];
  s->items[s->count++] = t;
  return t;
}

tg_tensor *tg_retain(const tg_tensor *t) {
  tg_tensor *m = (tg_tensor *)t;
  if (m) atomic_fetch_add(&m->refcount, 1);
  return m;
}

tg_tensor *tg_keep(const tg_tensor *t) { return tg_retain(t); }

void tg__node_drop(tg_node *node) {
  if (!node) return;
  tg_node_header *h = tg__node_header(node);
  if (atomic_fetch_sub(&h->refcount, 1) == 1) h->destroy(node);
}

void tg_release(tg_tensor *t) {
  if (!t || atomic_fetch_sub(&t->refcount, 1) != 1) return;
  tg__storage_release(t->storage);
  tg_release(t->grad);
  tg__node_drop(t->grad_fn);
  tg__host_free(t);
  tg__live_dec();
}
