/* Tensor reference counts and scopes (thread-local autorelease pools).
 *
 * Every thread has a root scope (depth 0) that is always open: a tensor returned while the
 * program has opened no scope belongs to it, so ownership never depends on whether a scope
 * happens to be open. The root scope is drained when the thread exits (a pthread key's
 * destructor) and, for the thread that calls exit (normally main), by an atexit handler. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "host_memory.h"

#include "autograd/node.h"
#include "tensor_impl.h"

typedef struct scope {
  tg_tensor **items;
  size_t count, capacity;
  uint64_t serial; /* matches the token tg_scope_begin returned for this level */
} scope;

/* The scope stack above the root: the first FIRST_BLOCK levels live in thread-local storage,
 * so opening a scope allocates nothing in practice; deeper nesting moves the stack to the
 * heap, freed again when the depth returns to 0. When even that cannot grow, the scope is
 * opened as a "failed" level above the stack: tensors returned in it cannot be registered,
 * so the ops fail with TG_ERR_MEMORY, and its token closes it, keeping begin/end balanced.
 * Failed levels are consecutive, so one serial (failed_serial) names all of them. */
enum { FIRST_BLOCK = 32 };
static _Thread_local scope root;
static _Thread_local scope first_block[FIRST_BLOCK];
static _Thread_local scope *scopes;
static _Thread_local int scope_count, scope_capacity, failed_count;
static _Thread_local uint64_t last_serial, failed_serial;
static _Thread_local bool root_armed; /* this thread's exit will drain the root scope */

static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

static void drain_thread(void);
static void drain_at_thread_exit(void *unused) {
  (void)unused;
  drain_thread();
}
static void install_exit_hooks(void) {
  (void)pthread_key_create(&exit_key, drain_at_thread_exit);
  (void)atexit(drain_thread);
}
/* Called when the root scope first grows: only then is there anything to drain. */
static void arm_root(void) {
  (void)pthread_once(&exit_once, install_exit_hooks);
  (void)pthread_setspecific(exit_key, &root);
  root_armed = true;
}

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

static int open_depth(void) { return scope_count + failed_count; }

/* Whether s names a scope of this thread that is open now. */
static bool is_open(tg_scope s) {
  if (s.depth < 1 || s.depth > open_depth()) return false;
  return s.depth <= scope_count ? scopes[s.depth - 1].serial == s.serial
                                : s.serial == failed_serial;
}

tg_status tg__scope_open(tg_scope *out) {
  uint64_t serial = ++last_serial;
  if (failed_count > 0 || (scope_count == scope_capacity && !grow_stack())) {
    if (failed_count++ == 0) failed_serial = serial;
    *out = (tg_scope){open_depth(), failed_serial};
    return tg_set_error(TG_ERR_MEMORY, "tg_scope_begin: out of memory for scope level %d",
                        open_depth());
  }
  scopes[scope_count++] = (scope){.serial = serial};
  *out = (tg_scope){scope_count, serial};
  return TG_OK;
}

tg_scope tg_scope_begin(void) {
  tg_scope s;
  (void)tg__scope_open(&s);
  return s;
}

static void drain(scope *s) {
  for (size_t i = s->count; i-- > 0;) tg_release(s->items[i]);
  tg__host_free(s->items);
  *s = (scope){0};
}

static void close_innermost(void) {
  if (failed_count > 0) {
    failed_count--;
    return;
  }
  scope s = scopes[--scope_count];
  drain(&s);
  if (scope_count == 0 && scopes != first_block) {
    tg__host_free(scopes);
    scopes = NULL;
    scope_capacity = 0;
  }
}

tg_status tg_scope_end(tg_scope s) {
  int depth = open_depth();
  if (!is_open(s))
    return tg_set_error(TG_ERR_STATE,
                        "tg_scope_end: the scope (depth %d) is not open (the innermost open "
                        "scope is at depth %d); nothing closed",
                        s.depth, depth);
  while (open_depth() >= s.depth) close_innermost();
  if (s.depth != depth)
    return tg_set_error(TG_ERR_STATE,
                        "tg_scope_end: the scope at depth %d is not the innermost (depth %d); "
                        "closed the scopes inside it as well",
                        s.depth, depth);
  return TG_OK;
}

/* Closes every scope of this thread and drains its root scope. */
static void drain_thread(void) {
  while (open_depth() > 0) close_innermost();
  drain(&root);
  if (root_armed) (void)pthread_setspecific(exit_key, NULL);
  root_armed = false;
}

int tg_scope_depth(void) { return open_depth(); }

static tg_status reserve_in(scope *s, size_t n) {
  if (s->capacity - s->count >= n) return TG_OK;
  size_t cap = s->capacity ? s->capacity : 16;
  while (cap - s->count < n) cap *= 2;
  tg_tensor **grown = tg__host_realloc(s->items, sizeof *grown * cap);
  if (!grown) return tg_set_error(TG_ERR_MEMORY, "tg_scope: out of memory registering a tensor");
  if (s == &root && !root_armed) arm_root();
  s->items = grown;
  s->capacity = cap;
  return TG_OK;
}

static scope *innermost(void) { return scope_count > 0 ? &scopes[scope_count - 1] : &root; }

tg_status tg__scope_reserve(size_t n) {
  if (failed_count > 0)
    return tg_set_error(TG_ERR_MEMORY, "tg_scope: out of memory: the innermost scope could "
                                       "not be opened");
  return reserve_in(innermost(), n);
}

tg_tensor *tg__scoped(tg_tensor *t) {
  if (!t) return t;
  if (tg__scope_reserve(1) != TG_OK) {
    tg_release(t);
    return NULL;
  }
  scope *s = innermost();
  s->items[s->count++] = t;
  return t;
}

tg_tensor *tg_scope_escape(tg_scope s, const tg_tensor *t) {
  if (!t) return NULL; /* the error that made t NULL stays the pending one */
  if (!is_open(s)) {
    tg_set_error(TG_ERR_STATE,
                 "tg_scope_escape: the scope (depth %d) is not open (the innermost open scope "
                 "is at depth %d)",
                 s.depth, open_depth());
    return NULL;
  }
  if (s.depth - 1 > scope_count) {
    tg_set_error(TG_ERR_MEMORY, "tg_scope_escape: out of memory: the enclosing scope (depth "
                                "%d) could not be opened",
                 s.depth - 1);
    return NULL;
  }
  scope *dst = s.depth == 1 ? &root : &scopes[s.depth - 2];
  if (reserve_in(dst, 1) != TG_OK) return NULL;
  dst->items[dst->count++] = tg_retain(t);
  return (tg_tensor *)t;
}

tg_tensor *tg_retain(const tg_tensor *t) {
  tg_tensor *m = (tg_tensor *)t;
  if (m) atomic_fetch_add(&m->refcount, 1);
  return m;
}

void tg_release(tg_tensor *t) {
  if (!t || atomic_fetch_sub(&t->refcount, 1) != 1) return;
  tg__storage_release(t->storage);
  tg_release(t->grad);
  tg__node_release(t->grad_fn);
  tg__host_free(t);
  tg__live_dec();
}
