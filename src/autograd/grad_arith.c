/* Where the ops layer leaves the engine's arithmetic (grad_arith.h). */
#include "autograd/grad_arith.h"

static _Atomic(const tg_grad_arith *) installed;

void tg__grad_arith_install(const tg_grad_arith *arith) {
  /* Called for every new storage: a relaxed load keeps that cheap, and every caller
   * installs the same table. */
  if (!atomic_load_explicit(&installed, memory_order_relaxed))
    atomic_store_explicit(&installed, arith, memory_order_release);
}

const tg_grad_arith *tg__grad_arith(void) {
  return atomic_load_explicit(&installed, memory_order_acquire);
}
