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

/* --device: the device named (cpu, cuda, cuda:1, ...; the CPU when not given) in *device. 0
 * after a message naming the option when tg cannot parse the name (a usage error). */
static inline int train_parse_device(const char *prog, const train_options *t, tg_device *device) {
  *device = TG_DEVICE_CPU;
  if (!t->device || tg_device_parse(t->device, device) == TG_OK) return 1;
  fprintf(stderr, "%s: --device %s: %s\n", prog, t->device, tg_last_error_message());
  return 0;
}

/* 0 after a message naming --device when the device is not there (no CUDA module, no GPU,
 * no such index): a real use of it, which loads its module and checks the index. */
static inline int train_device_ready(const char *prog, const train_options *t, tg_device device) {
  tg_scope sc = tg_scope_begin();
  int ok = tg_zeros(TG_SHAPE(1), (tg_options){.device = device}) != NULL;
  tg_scope_end(sc);
  if (!ok)
    fprintf(stderr, "%s: --device %s: %s (%s)\n", prog, t->device ? t->device : "cpu",
            tg_last_error_message(), tg_status_name(tg_last_error()));
  return ok;
}

/* Waits for the device's queued work (a CUDA stream), so that a step's time is its own. */
static inline tg_status train_sync(tg_device device) {
  return device.type == TG_CUDA ? tg_cuda_synchronize() : TG_OK;
}

/* The summary's line for a CUDA run: its allocator's peak memory in use (nothing on the CPU). */
static inline void train_print_device_memory(tg_device device) {
  tg_cuda_memory_stats mem;
  if (device.type == TG_CUDA && tg_cuda_memory_stats_get(&mem) == TG_OK)
    printf("peak CUDA memory in use %.1f MB\n", (double)mem.peak_bytes_in_use / 1e6);
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
