/* Gradient destinations (grad_destination.h): handed out by tg__ctx_grad_destination, given
 * back by the engine after the backward (engine.c, release_destinations). */
#include "grad_destination.h"

#include "grad_lock.h"
#include "node.h"
#include "tensor/check.h"

enum { MAX_DESTINATION_INPUTS = 64 }; /* bits of tg_ctx.destinations */

tg_tensor *tg__ctx_grad_destination(tg_ctx *ctx, int i) {
  if (!ctx || !ctx->accumulating || !ctx->node || i < 0 || i >= ctx->n_inputs ||
      i >= MAX_DESTINATION_INPUTS || !ctx->needs_input_grad[i] || (ctx->destinations >> i) & 1)
    return NULL;
  const tg_edge *e = &ctx->node->edges[i];
  if (e->node || !e->leaf || !tg__grad_trylock(e->leaf)) return NULL;
  tg_tensor *g = e->leaf->grad;
  const tg_meta *m = &ctx->inputs[i];
  if (!g || g->grad_fn || g->requires_grad || g->dtype != m->dtype ||
      !tg_device_equal(g->storage->device, m->device) ||
      !tg__dims_equal(g->ndim, g->sizes, m->ndim, m->sizes)) {
    tg__grad_unlock(e->leaf);
    return NULL;
  }
  ctx->destinations |= (uint64_t)1 << i;
  return g;
}
