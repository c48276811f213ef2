/* What the training examples (train_charlm.c, train_cnn.c, train_gpt.c) share that needs tg:
 * the thread setup, picking a run up from its checkpoint (--resume), saving one when due, and
 * the leak check at exit. Header-only (static functions); the rest of their plumbing is in
 * train_util.h. */
#ifndef TG_TRAIN_RUN_H
#define TG_TRAIN_RUN_H

#include <stdint.h>
#include <stdio.h>

#include "tg/tg.h"
#include "train_options.h"

/* --resume: loads model, optimizer and the batch sampler from path and puts the step to go on
 * from in *start (saying so unless quiet). 0 after writing why not into why (len bytes), for
 * the caller to print after its program's name. */
static inline int train_resume(const char *path, tg_module *model, tg_optimizer *opt,
                               tg_generator **sampler, long long steps, int quiet, long long *start,
                               char *why, size_t len) {
  int64_t step = 0;
  if (tg_checkpoint_load(path, model, opt, &step, 1, sampler) != TG_OK) {
    snprintf(why, len, "--resume: %s (%s)", tg_last_error_message(),
             tg_status_name(tg_last_error()));
    return 0;
  }
  if (step > steps) {
    snprintf(why, len, "the checkpoint is at step %lld, past --steps %lld", (long long)step, steps);
    return 0;
  }
  *start = step;
  if (!quiet) printf("resumed from %s at step %lld\n", path, *start);
  return 1;
}

/* After step `done`: saves model, optimizer, step and sampler to t->checkpoint (when given)
 * every t->checkpoint_every steps (0: never) and after the last step. */
static inline tg_status train_checkpoint_if_due(const train_options *t, const tg_module *model,
                                                const tg_optimizer *opt, tg_generator **sampler,
                                                long long done, long long steps) {
  int due = (t->checkpoint_every && done % t->checkpoint_every == 0) || done == steps;
  if (!t->checkpoint || !due) return TG_OK;
  return tg_checkpoint_save(t->checkpoint, model, opt, done, 1, sampler);
}

/* --threads (0: tg's default) and a checkpointed run's determinism: it must resume bit for bit
 * even on a busy machine (tensor.h). */
static inline void train_setup_threads(long long threads, const train_options *t) {
  if (threads) tg_set_num_threads((int)threads);
  if (t->checkpoint) tg_set_deterministic(true);
}

/* 0 after a warning when tg objects are still alive at exit (a leak). */
static inline int train_no_leaks(const char *prog) {
  int64_t live = tg_live_objects();
  if (live == 0) return 1;
  fprintf(stderr, "%s: warning: %lld tg objects still alive at exit (a leak)\n", prog,
          (long long)live);
  return 0;
}

#endif
