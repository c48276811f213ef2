/* The optimizer's fields, shared by its steps (optimizer.c) and its state (optimizer_state.c).
 * Not part of the public API. */
#ifndef TG_NN_OPTIMIZER_IMPL_H
#define TG_NN_OPTIMIZER_IMPL_H

#include "tg/nn.h"

typedef enum optimizer_kind { OPT_SGD, OPT_ADAM } optimizer_kind;

/* A parameter has state once it was updated (steps[i] > 0) or its state was loaded: SGD's
 * momentum buffer (state1, NULL until then or without momentum), Adam's moments (state1,
 * state2: zeros until then) and step count. */
struct tg_optimizer {
  optimizer_kind kind;
  int n;
  tg_tensor **params; /* owned references */
  char **names;       /* each parameter's dotted name, or its index; owned */
  tg_tensor **state1; /* SGD: momentum buffers; Adam: first moments; owned references */
  tg_tensor **state2; /* Adam: second moments */
  tg_sgd_options sgd;
  tg_adam_options adam;
  int64_t *steps; /* updates made to each parameter (Adam's bias correction) */
};

/* tg_optimizer_load_state_dict in two steps, for a caller that loads several things all or
 * nothing (a checkpoint): stage checks everything and makes every allocation, leaving the
 * optimizer untouched (on failure *out is NULL); then commit (reference moves only: it
 * cannot fail) or abort. Both free the staged load. */
typedef struct tg__optimizer_load tg__optimizer_load;
tg_status tg__optimizer_load_stage(tg_optimizer *opt, const tg_tensor_dict *state,
                                   tg__optimizer_load **out);
void tg__optimizer_load_commit(tg__optimizer_load *l);
void tg__optimizer_load_abort(tg__optimizer_load *l); /* NULL is a no-op */

#endif
