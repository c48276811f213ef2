/* Running post-accumulate grad hooks (hooks.c). Internal to the autograd layer. */
#ifndef TG_HOOKS_H
#define TG_HOOKS_H

#include "tensor/tensor_impl.h"

bool tg__has_post_accumulate_hooks(const tg_tensor *leaf);
/* Runs leaf's hooks in order, each in a scope of its own, with grad mode set to grad_mode;
 * stops at the first error. */
tg_status tg__run_post_accumulate_hooks(tg_tensor *leaf, bool grad_mode);

#endif
