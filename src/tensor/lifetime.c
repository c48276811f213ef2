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
/* One thread-local struct, so a call reaches all of it through one TLS address lookup
 * (in libtg.so each distinct thread-local variable costs a __tls_get_addr call). */
typedef struct thread_scopes {
  scope *stack;
  int count, capacity, failed; /* real levels on the stack, its room, failed levels above */
  uint64_t last_serial, failed_serial;
  bool root_armed; /* this thread's exit will drain the root scope */
  scope root;
  scope first_block[FIRST_BLOCK];
} thread_scopes;
static _Thread_local thread_scopes ts;
/* This thread's scopes, looked up once per call: GCC otherwise recomputes &ts (another
 * __tls_get_addr in libtg.so) at each use, and these functions run on every op. */
#if defined(__GNUC__)
#define THIS_THREAD(t)                                                                             \
  thread_scopes *t = &ts;                                                                          \
  __asm__("" : "+r"(t))
#else
#define THIS_THREAD(t) thread_scopes *t = &ts
#endif

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
static void arm_root(thread_scopes *t) {
  (void)pthread_once(&exit_once, install_exit_hooks);
  (void)pthread_setspecific(exit_key, &t->root);
  t->root_armed = true;
}

static bool grow_stack(thread_scopes *t) {
  if (!t->stack) {
    t->stack = t->first_block;
    t->capacity = FIRST_BLOCK;
    return true;
  }
  int cap = t->capacity * 2;
  scope *grown;
  if (t->stack == t->first_block) {
    grown = tg__host_malloc(sizeof *grown * (size_t)cap);
    if (grown) memcpy(grown, t->first_block, sizeof t->first_block);
  } else {
    grown = tg__host_realloc(t->stack, sizeof *grown * (size_t)cap);
  }
  if (!grown) return false;
  t->stack = grown;
  t->capacity = cap;
  return true;
}

static inline int open_depth(const thread_scopes *t) { return t->count + t->failed; }

/* Whether s names a scope of this thread that is open now. */
static bool is_open(const thread_scopes *t, tg_scope s) {
  if (s.depth < 1 || s.depth > open_depth(t)) return false;
  return s.depth <= t->count ? t->stack[s.depth - 1].serial == s.serial
                             : s.serial == t->failed_serial;
}

tg_status tg__scope_open(tg_scope *out) {
  THIS_THREAD(t);
  uint64_t serial = ++t->last_serial;
  if (t->failed > 0 || (t->count == t->capacity && !grow_stack(t))) {
    if (t->failed++ == 0) t->failed_serial = serial;
    *out = (tg_scope){open_depth(t), t->failed_serial};
    return tg_set_error(TG_ERR_MEMORY, "tg_scope_begin: out of memory for scope level %d",
                        open_depth(t));
  }
  t->stack[t->count++] = (scope){.serial = serial};
  *out = (tg_scope){t->count, serial};
  return TG_OK;
}

tg_scope tg_scope_begin(void) {
  tg_scope s;
  (void)tg__scope_open(&s);
  return s;
}

static void release_as(tg_tensor *t, const char *by);

/* by: what is releasing the scope's tensors, for the lifetime checker's history. */
static void drain(scope *s, const char *by) {
  for (size_t i = s->count; i-- > 0;) {
    tg__lifetime_verify(by, "a tensor the scope owns", s->items[i]);
    tg__lifetime_scope_ref(s->items[i], -1);
    release_as(s->items[i], by);
  }
  tg__host_free(s->items);
  *s = (scope){0};
}

static void close_innermost(thread_scopes *t) {
  if (t->failed > 0) {
    t->failed--;
    return;
  }
  drain(&t->stack[--t->count], "tg_scope_end");
  if (t->count == 0 && t->stack != t->first_block) {
    tg__host_free(t->stack);
    t->stack = NULL;
    t->capacity = 0;
  }
}

static tg_status end_error(const thread_scopes *t, tg_scope s, int depth) {
  if (depth == open_depth(t)) /* nothing was closed: s was not open */
    return tg_set_error(TG_ERR_STATE,
                        "tg_scope_end: the scope (depth %d) is not open (the innermost open "
                        "scope is at depth %d); nothing closed",
                        s.depth, depth);
  return tg_set_error(TG_ERR_STATE,
                      "tg_scope_end: the scope at depth %d is not the innermost (depth %d); "
                      "closed the scopes inside it as well",
                      s.depth, depth);
}

tg_status tg_scope_end(tg_scope s) {
  THIS_THREAD(t);
  int depth = open_depth(t);
  if (!is_open(t, s)) return end_error(t, s, depth);
  while (open_depth(t) >= s.depth) close_innermost(t);
  return s.depth == depth ? TG_OK : end_error(t, s, depth);
}

/* Closes every scope of this thread and drains its root scope. */
static void drain_thread(void) {
  THIS_THREAD(t);
  while (open_depth(t) > 0) close_innermost(t);
  drain(&t->root, "the root scope's drain at thread exit");
  if (t->root_armed) (void)pthread_setspecific(exit_key, NULL);
  t->root_armed = false;
}

int tg_scope_depth(void) { return open_depth(&ts); }

static tg_status grow_items(thread_scopes *t, scope *s, size_t n) {
  size_t cap = s->capacity ? s->capacity : 16;
  while (cap - s->count < n) cap *= 2;
  tg_tensor **grown = tg__host_realloc(s->items, sizeof *grown * cap);
  if (!grown) return tg_set_error(TG_ERR_MEMORY, "tg_scope: out of memory registering a tensor");
  if (s == &t->root && !t->root_armed) arm_root(t);
  s->items = grown;
  s->capacity = cap;
  return TG_OK;
}

static inline tg_status reserve_in(thread_scopes *t, scope *s, size_t n) {
  return s->capacity - s->count >= n ? TG_OK : grow_items(t, s, n);
}

static inline scope *innermost(thread_scopes *t) {
  return t->count > 0 ? &t->stack[t->count - 1] : &t->root;
}

static tg_status failed_level_error(void) {
  return tg_set_error(TG_ERR_MEMORY,
                      "tg_scope: out of memory: the innermost scope could not be opened");
}

tg_status tg__scope_reserve(size_t n) {
  THIS_THREAD(t);
  return t->failed > 0 ? failed_level_error() : reserve_in(t, innermost(t), n);
}

tg_tensor *tg__scoped(tg_tensor *t) {
  if (!t) return t;
  THIS_THREAD(th);
  scope *s = innermost(th);
  if (th->failed > 0 || reserve_in(th, s, 1) != TG_OK) {
    if (th->failed > 0) failed_level_error();
    tg_release(t);
    return NULL;
  }
  s->items[s->count++] = t;
  tg__lifetime_scope_ref(t, 1);
  return t;
}

tg_tensor *tg_scope_escape(tg_scope s, const tg_tensor *t) {
  if (!t) return NULL; /* the error that made t NULL stays the pending one */
  tg__lifetime_verify("tg_scope_escape", "t", t);
  THIS_THREAD(th);
  if (!is_open(th, s)) {
    tg_set_error(TG_ERR_STATE,
                 "tg_scope_escape: the scope (depth %d) is not open (the innermost open scope "
                 "is at depth %d)",
                 s.depth, open_depth(th));
    return NULL;
  }
  if (s.depth - 1 > th->count) {
    tg_set_error(TG_ERR_MEMORY,
                 "tg_scope_escape: out of memory: the enclosing scope (depth "
                 "%d) could not be opened",
                 s.depth - 1);
    return NULL;
  }
  scope *dst = s.depth == 1 ? &th->root : &th->stack[s.depth - 2];
  if (reserve_in(th, dst, 1) != TG_OK) return NULL;
  dst->items[dst->count++] = tg_retain(t);
  tg__lifetime_scope_ref((tg_tensor *)t, 1);
  return (tg_tensor *)t;
}

tg_tensor *tg_retain(const tg_tensor *t) {
  tg_tensor *m = (tg_tensor *)t;
  if (m) {
    tg__lifetime_verify("tg_retain", "t", m);
    atomic_fetch_add(&m->refcount, 1);
  }
  return m;
}

void tg__node_drop(tg_node *node) {
  if (!node) return;
  tg_node_header *h = tg__node_header(node);
  if (atomic_fetch_sub(&h->refcount, 1) == 1) h->destroy(node);
}

/* Drops a reference; by names the caller for the lifetime checker (tg_release, or the scope
 * draining its tensors). */
static void release_as(tg_tensor *t, const char *by) {
  if (!t) return;
  tg__lifetime_check_release(by, t);
  if (atomic_fetch_sub(&t->refcount, 1) != 1) return;
  tg__storage_release(t->storage);
  tg_release(t->grad);
  tg__node_drop(t->grad_fn);
  tg__host_free(t->post_accumulate_hooks);
#if TG_LIFETIME_CHECK
  tg__lifetime_bury(t, by); /* poisoned and quarantined, not yet freed */
#else
  tg__host_free(t);
#endif
  tg__live_dec();
}

void tg_release(tg_tensor *t) { release_as(t, "tg_release"); }
