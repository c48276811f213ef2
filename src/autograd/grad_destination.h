/* Gradient destinations: a backward may add an input's gradient straight into the leaf's
 * .grad instead of returning it for the engine to add (saving a pass over it, and its
 * allocation). Internal: for tg's own ops, whose backward takes no grad lock itself. */
#ifndef TG_GRAD_DESTINATION_H
#define TG_GRAD_DESTINATION_H

#include "tg/autograd.h"

/* In backward: the .grad that input i's gradient may be added to in place (+=, never =), or
 * NULL. Offered when the engine accumulates into leaves without create_graph, input i is a
 * leaf that needs its gradient, its .grad already exists (a plain tensor of the input's
 * shape, dtype and device) and its grad lock is free. The lock is held until the backward
 * returns; a backward that takes the destination must add its whole gradient for input i
 * into it and leave grad_inputs[i] NULL. */
tg_tensor *tg__ctx_grad_destination(tg_ctx *ctx, int i);

#endif
