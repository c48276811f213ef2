/* The lifetime checker of debug and sanitizer builds (TG_LIFETIME_CHECK, CMake option of the
 * same name): tensors carry a magic word, a serial number and their history (what made them,
 * what dropped their last reference); a freed tensor's header is poisoned and kept in a
 * bounded quarantine instead of going back to the allocator, so a stale handle is still
 * recognised. A release of a freed tensor, a release of a reference the caller does not own
 * (a scope-owned result) and the use of a freed tensor through the public API abort with a
 * message on stderr naming the function, the tensor and its history. Compiled out (every
 * call below is an empty inline) when TG_LIFETIME_CHECK is 0: Release builds pay nothing. */
#ifndef TG_LIFETIME_CHECK_H
#define TG_LIFETIME_CHECK_H

#include <stdatomic.h>
#include <stdint.h>

#include "tg/types.h"

#ifndef TG_LIFETIME_CHECK
#define TG_LIFETIME_CHECK 0
#endif

enum { TG__LIFETIME_NAME = 40 };

/* A tensor's lifetime record (a member of struct tg_tensor in checked builds). */
typedef struct tg__lifetime {
  uint64_t magic;                   /* TG__TENSOR_LIVE, then TG__TENSOR_FREED */
  uint64_t serial;                  /* birth number, process-wide: "tensor #12" */
  atomic_long scope_refs;           /* how many of its references scopes hold */
  char made_by[TG__LIFETIME_NAME];  /* the op or creation function that made it */
  char freed_by[TG__LIFETIME_NAME]; /* what dropped its last reference */
} tg__lifetime;

#if TG_LIFETIME_CHECK
/* A new tensor: live, numbered, made by made_by (NULL: "?"). */
void tg__lifetime_born(tg_tensor *t, const char *made_by);
/* Names what made t (prefix + name: "tg_" "exp"); tg_apply calls it for its outputs. */
void tg__lifetime_made_by(tg_tensor *t, const char *prefix, const char *name);
/* Aborts unless t (not NULL) is a live tensor: fn's argument arg is used after its free. */
void tg__lifetime_verify(const char *fn, const char *arg, const tg_tensor *t);
/* Before fn drops a reference the caller owns: aborts when t is freed already, or when every
 * reference left is a scope's (the caller owns none: a scope-owned result). */
void tg__lifetime_check_release(const char *fn, const tg_tensor *t);
/* A scope takes (+1) or gives up (-1) one of t's references. */
void tg__lifetime_scope_ref(tg_tensor *t, long delta);
/* t's last reference is gone (freed_by dropped it): poisons it and quarantines its header;
 * the oldest quarantined header goes back to the allocator. */
void tg__lifetime_bury(tg_tensor *t, const char *freed_by);
#else
static inline void tg__lifetime_born(tg_tensor *t, const char *made_by) { (void)t, (void)made_by; }
static inline void tg__lifetime_made_by(tg_tensor *t, const char *prefix, const char *name) {
  (void)t, (void)prefix, (void)name;
}
static inline void tg__lifetime_verify(const char *fn, const char *arg, const tg_tensor *t) {
  (void)fn, (void)arg, (void)t;
}
static inline void tg__lifetime_check_release(const char *fn, const tg_tensor *t) {
  (void)fn, (void)t;
}
static inline void tg__lifetime_scope_ref(tg_tensor *t, long delta) { (void)t, (void)delta; }
#endif

#endif
