/* The optimizer's fields, shared by its steps (optimizer.c) and its state (optimizer_state.c).
 * Not part of the public API. */
#ifndef TG_NN_OPTIMIZER_IMPL_H
#define TG_NN_OPTIMIZER_IMPL_H

#include "tg/nn.h"

typedef enum optimizer_kind { OPT_SGD, OPT_ADAM, OPT_ADAMW } optimizer_kind;

/* Adam and AdamW keep the same state (moments and step counts). */
static inline bool tg__opt_adam_like(optimizer_kind k) { return k == OPT_ADAM || k == OPT_ADAMW; }

/* A parameter group's own hyperparameters (tg/optim.h); the rest are the optimizer's. */
typedef struct optimizer_group {
  double lr, weight_decay;
  int size; /* parameters in the group */
} optimizer_group;

/* A parameter has state once it was updated (steps[i] > 0) or its state was loaded: SGD's
 * momentum buffer (state1, NULL until then or without momentum), Adam's moments (state1,
 * state2: zeros until then) and step count. */
struct tg_optimizer {
  optimizer_kind kind;
  int n;
  tg_tensor **params;   /* owned references */
  char **names;         /* each parameter's dotted name, or its index; owned */
  tg_tensor **state1;   /* SGD: momentum buffers; Adam: first moments; owned references */
  tg_tensor **state2;   /* Adam: second moments */
  tg_sgd_options sgd;   /* lr and weight_decay: the defaults a new group inherits */
  tg_adam_options adam; /* Adam and AdamW (whose options are the same five) */
  int64_t *steps;       /* updates made to each parameter (Adam's bias correction) */
  int *group_of;        /* each parameter's group */
  int n_groups;
  optimizer_group *groups; /* the source of each parameter's lr and weight_decay */
};

/* Appends a group of n parameters (n may be 0) named names[i] (NULL: by their index in the
 * optimizer) with the given lr and weight_decay, already checked; all or nothing. For the
 * constructors (group 0) and tg_optimizer_add_param_group. */
tg_status tg__optimizer_append_group(const char *fn, tg_optimizer *opt, int n,
                                     tg_tensor *const *params, char *const *names, double lr,
                                     double weight_decay);

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
