/* Tensor reference counts and scopes (thread-local autorelease pools). */
#include <stdlib.h>

#include "autograd/node.h"
#include "tensor_impl.h"

typedef struct scope {
  tg_tensor **items;
  size_t count, capacity;
} scope;

static _Thread_local scope *scopes;
static _Thread_local int scope_count, scope_capacity;

void tg_scope_begin(void) {
  if (scope_count == scope_capacity) {
    int cap = scope_capacity ? scope_capacity * 2 : 8;
    scope *grown = realloc(scopes, sizeof *grown * (size_t)cap);
    if (!grown) abort(); /* a scope header is a few bytes: nothing sane is left to do */
    scopes = grown;
    scope_capacity = cap;
  }
  scopes[scope_count++] = (scope){0};
}

void tg_scope_end(void) {
  if (scope_count == 0) return;
  scope s = scopes[--scope_count];
  for (size_t i = s.count; i-- > 0;) tg_release(s.items[i]);
  free(s.items);
  if (scope_count == 0) {
    free(scopes);
    scopes = NULL;
    scope_capacity = 0;
  }
}

int tg_scope_depth(void) { return scope_count; }

tg_tensor *tg__scoped(tg_tensor *t) {
  if (!t || scope_count == 0) return t;
  scope *s = &scopes[scope_count - 1];
  if (s->count == s->capacity) {
    size_t cap = s->capacity ? s->capacity * 2 : 16;
    tg_tensor **grown = realloc(s->items, sizeof *grown * cap);
    if (!grown) {
      tg_release(t);
      tg_set_error(TG_ERR_MEMORY, "tg_scope: out of memory registering a tensor");
      return NULL;
    }
    s->items = grown;
    s->capacity = cap;
  }
  s->items[s->count++] = t;
  return t;
}

tg_tensor *tg_retain(const tg_tensor *t) {
  tg_tensor *m = (tg_tensor *)t;
  if (m) atomic_fetch_add(&m->refcount, 1);
  return m;
}

tg_tensor *tg_keep(const tg_tensor *t) { return tg_retain(t); }

void tg_release(tg_tensor *t) {
  if (!t || atomic_fetch_sub(&t->refcount, 1) != 1) return;
  tg__storage_release(t->storage);
  tg_release(t->grad);
  tg__node_release(t->grad_fn);
  free(t);
  tg__live_dec();
}
