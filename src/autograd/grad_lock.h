/* Locks guarding each tensor's .grad slot, so that threads running backward into shared
 * leaves accumulate safely (hogwild-style training). Internal. */
#ifndef TG_GRAD_LOCK_H
#define TG_GRAD_LOCK_H

#include "tensor/tensor_impl.h"

/* A striped table keyed by the tensor's address: no per-tensor state to create or destroy,
 * and two tensors that share a stripe only contend, never deadlock, because no code path
 * holds one stripe while taking another. Hold it only around code that takes no other
 * grad lock (the accumulation itself, the grad swap). */
void tg__grad_lock(const tg_tensor *t);
void tg__grad_unlock(const tg_tensor *t);
/* Takes t's lock only if it is free (false: held, by another thread or this one); the one
 * way to hold a stripe while taking another, since it never waits. */
bool tg__grad_trylock(const tg_tensor *t);

#endif
