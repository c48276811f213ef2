/* The striped .grad lock table (see grad_lock.h). */
#include "grad_lock.h"

#include <pthread.h>
#include <stdint.h>

enum { STRIPE_BITS = 6, STRIPES = 1 << STRIPE_BITS };

/* One cache line per stripe, so threads on different stripes do not share lines. */
typedef union stripe {
  pthread_mutex_t mutex;
  char pad[64];
} stripe;

#define TG_STRIPE_INIT                                                                             \
  { PTHREAD_MUTEX_INITIALIZER }
#define TG_STRIPES_8                                                                               \
  TG_STRIPE_INIT, TG_STRIPE_INIT, TG_STRIPE_INIT, TG_STRIPE_INIT, TG_STRIPE_INIT, TG_STRIPE_INIT,  \
      TG_STRIPE_INIT, TG_STRIPE_INIT
static stripe stripes[STRIPES] = {TG_STRIPES_8, TG_STRIPES_8, TG_STRIPES_8, TG_STRIPES_8,
                                  TG_STRIPES_8, TG_STRIPES_8, TG_STRIPES_8, TG_STRIPES_8};

static pthread_mutex_t *stripe_of(const tg_tensor *t) {
  /* Fibonacci hashing of the address: tensors are heap objects of a few hundred bytes, so
   * the low bits alone would crowd a few stripes. */
  uint64_t h = (uint64_t)(uintptr_t)t * UINT64_C(0x9E3779B97F4A7C15);
  return &stripes[h >> (64 - STRIPE_BITS)].mutex;
}

void tg__grad_lock(const tg_tensor *t) { pthread_mutex_lock(stripe_of(t)); }
void tg__grad_unlock(const tg_tensor *t) { pthread_mutex_unlock(stripe_of(t)); }
bool tg__grad_trylock(const tg_tensor *t) { return pthread_mutex_trylock(stripe_of(t)) == 0; }
