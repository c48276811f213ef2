/* The lifetime checker (tensor/lifetime_check.h): compiled only when TG_LIFETIME_CHECK is 1. */
#include "tensor/lifetime_check.h"

#if TG_LIFETIME_CHECK
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host_memory.h"
#include "tensor_impl.h"

#define TG__TENSOR_LIVE 0x7467204c49564521ull  /* "tg LIVE!" */
#define TG__TENSOR_FREED 0x74672046524545ddull /* "tg FREE" */

/* Freed headers kept poisoned before they go back to the allocator (ASan's quarantine, for
 * tensor headers): a stale handle to one of the last QUARANTINE frees is recognised. */
enum { QUARANTINE = 4096 };
static struct {
  pthread_mutex_t lock;
  tg_tensor *ring[QUARANTINE];
  size_t next; /* where the next freed header goes (the oldest is there when full) */
} quarantine = {.lock = PTHREAD_MUTEX_INITIALIZER};

static atomic_ullong last_serial;

static void copy_name(char *dst, const char *prefix, const char *name) {
  snprintf(dst, TG__LIFETIME_NAME, "%s%s", prefix ? prefix : "", name ? name : "?");
}

void tg__lifetime_born(tg_tensor *t, const char *made_by) {
  t->lifetime.magic = TG__TENSOR_LIVE;
  t->lifetime.serial = atomic_fetch_add(&last_serial, 1) + 1;
  atomic_init(&t->lifetime.scope_refs, 0);
  copy_name(t->lifetime.made_by, NULL, made_by);
  t->lifetime.freed_by[0] = '\0';
}

void tg__lifetime_made_by(tg_tensor *t, const char *prefix, const char *name) {
  copy_name(t->lifetime.made_by, prefix, name);
}

/* "tensor #12 (float32 [2, 3], made by tg_exp" + ", freed by tg_release" when freed. */
static void describe(char *buf, size_t n, const tg_tensor *t) {
  int len =
      snprintf(buf, n, "tensor #%llu (%s %s, made by %s", (unsigned long long)t->lifetime.serial,
               tg_dtype_name(t->dtype), tg__sizes_str(t), t->lifetime.made_by);
  if (len > 0 && (size_t)len < n && t->lifetime.magic == TG__TENSOR_FREED)
    snprintf(buf + len, n - (size_t)len, ", freed by %s", t->lifetime.freed_by);
}

static _Noreturn void fail(const char *fn, const char *what, const tg_tensor *t, const char *why) {
  char about[256];
  describe(about, sizeof about, t);
  fprintf(stderr, "tg: lifetime check: %s: %s is %s): %s\n", fn, what, about, why);
  fflush(stderr);
  abort();
}

static _Noreturn void fail_unknown(const char *fn, const char *what, const tg_tensor *t) {
  fprintf(stderr,
          "tg: lifetime check: %s: %s (%p) is not a live tensor: freed long ago (out of the "
          "quarantine of the last %d freed tensors) or never a tensor\n",
          fn, what, (const void *)t, QUARANTINE);
  fflush(stderr);
  abort();
}

void tg__lifetime_verify(const char *fn, const char *arg, const tg_tensor *t) {
  if (t->lifetime.magic == TG__TENSOR_LIVE) return;
  if (t->lifetime.magic == TG__TENSOR_FREED)
    fail(fn, arg, t, "it was freed: this is a use after free (its last reference was dropped)");
  fail_unknown(fn, arg, t);
}

void tg__lifetime_check_release(const char *fn, const tg_tensor *t) {
  if (t->lifetime.magic == TG__TENSOR_FREED)
    fail(fn, "the tensor", t, "it was freed already: this release is one too many");
  if (t->lifetime.magic != TG__TENSOR_LIVE) fail_unknown(fn, "the tensor", t);
  /* A consistent pair: a scope takes a reference (retain, then scope_refs + 1) or drops one
   * (scope_refs - 1, then release) on another thread between the reads: read again. */
  long refs, scoped;
  do {
    scoped = atomic_load(&t->lifetime.scope_refs);
    refs = atomic_load(&t->refcount);
  } while (scoped != atomic_load(&t->lifetime.scope_refs));
  if (refs <= scoped)
    fail(fn, "the tensor", t,
         "every reference left belongs to a scope, none to the caller: a result is owned by "
         "the innermost scope (tg/tensor.h); take a reference with tg_retain before releasing "
         "one");
}

void tg__lifetime_scope_ref(tg_tensor *t, long delta) {
  atomic_fetch_add(&t->lifetime.scope_refs, delta);
}

void tg__lifetime_bury(tg_tensor *t, const char *freed_by) {
  t->lifetime.magic = TG__TENSOR_FREED;
  copy_name(t->lifetime.freed_by, NULL, freed_by);
  /* What a stale handle could reach goes: its geometry stays, for the message. */
  t->storage = NULL;
  t->grad = NULL;
  t->grad_fn = NULL;
  t->post_accumulate_hooks = NULL;
  pthread_mutex_lock(&quarantine.lock);
  tg_tensor *oldest = quarantine.ring[quarantine.next];
  quarantine.ring[quarantine.next] = t;
  quarantine.next = (quarantine.next + 1) % QUARANTINE;
  pthread_mutex_unlock(&quarantine.lock);
  tg__host_free(oldest);
}
#else
typedef int tg__lifetime_check_is_off; /* an empty translation unit is not ISO C */
#endif
