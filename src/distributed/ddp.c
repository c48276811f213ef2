/* Data-parallel training (tg/dist.h, "DDP"): the hooks that send a bucket as soon as its
 * gradients are final, synchronize, and the DDP's life. The layout is ddp_buckets.c, the
 * communication thread ddp_comm_thread.c. */
#include <stdio.h>
#include <string.h>

#include "distributed/comm.h"
#include "distributed/ddp_internal.h"
#include "tensor/check.h"
#include "tensor/host_memory.h"

#define DEFAULT_BUCKET_CAP ((size_t)1 << 20)

/* Keeps the round's first error and its message (later calls overwrite the thread's). */
static void note(tg_ddp *ddp, tg_status st) {
  if (st == TG_OK || ddp->round_error != TG_OK) return;
  ddp->round_error = st;
  snprintf(ddp->round_message, sizeof ddp->round_message, "%s", tg_last_error_message());
}

/* Makes dp's slot hold its gradient: when .grad is not the view (replaced by the user, or
 * there before the DDP attached), its values are copied in (none: zeros) and the view goes
 * back at synchronize, once backward is over (a hook may not replace .grad). */
static tg_status take_grad(ddp_param *dp) {
  tg_tensor *g = tg_grad(dp->param);
  if (g == dp->view) return TG_OK;
  dp->moved = true;
  tg_no_grad_begin();
  tg_status st = g ? tg_copy_(dp->view, g) : tg_zero_(dp->view);
  tg_no_grad_end();
  return st;
}

/* A parameter no hook reported since the last synchronize: its bucket is reduced anyway (the
 * same all-reduces on every rank), so its slot gets what it holds here: its .grad's values
 * (none: zeros), which is this rank's share of the mean should another rank have used it.
 * Unlike take_grad, .grad stays as it is until the ranks agree whether any used it
 * (settle_unused); where .grad is the slot itself, its values are saved for then. */
static tg_status hold_unused(ddp_param *dp) {
  tg_tensor *g = tg_grad(dp->param);
  tg_status st = TG_OK;
  tg_no_grad_begin();
  if (g == dp->view) {
    tg_scope sc = tg_scope_begin();
    tg_tensor *copy = tg_clone(dp->view);
    dp->saved = copy ? tg_retain(copy) : NULL;
    st = copy ? TG_OK : tg_last_error();
    tg_scope_end(sc);
  } else {
    st = g ? tg_copy_(dp->view, g) : tg_zero_(dp->view);
  }
  tg_no_grad_end();
  return st;
}

/* Once the ranks agree (any_used: some rank used dp), a parameter unused here gets the mean
 * as its .grad (the view), as a used one does; one that no rank used keeps its .grad as it
 * was before synchronize: none (so an optimizer skips it, as in one process), a tensor of the
 * user's, or the view with its own values back (PyTorch's DDP leaves it alone too). */
static tg_status settle_unused(ddp_param *dp, bool any_used) {
  tg_status st = TG_OK;
  if (any_used) {
    if (tg_grad(dp->param) != dp->view) st = tg_set_grad(dp->param, dp->view);
  } else if (dp->saved) {
    tg_no_grad_begin();
    st = tg_copy_(dp->view, dp->saved);
    tg_no_grad_end();
  }
  tg_release(dp->saved);
  dp->saved = NULL;
  return st;
}

/* One bucket all-reduced on the calling thread (routes NCCL and SYNC). */
static tg_status reduce_here(tg_ddp *ddp, int b, const char *name) {
  ddp_bucket *bk = &ddp->buckets[b];
  double t0 = tg__dist_now();
  tg_status st = tg__dist_allreduce_contiguous(name, bk->flat, TG_REDUCE_MEAN);
  ddp->stats.allreduce_seconds += tg__dist_now() - t0;
  return st;
}

/* Sends, in bucket order, every bucket whose gradients are all final and whose predecessors
 * have left: the same sequence of all-reduces on every rank, whatever order the hooks come
 * in. A bucket routed to synchronize only counts as gone. */
static tg_status send_ready(tg_ddp *ddp, bool from_hook, const char *name) {
  tg_status st = TG_OK;
  while (ddp->next_send < ddp->n_buckets && ddp->buckets[ddp->next_send].pending == 0) {
    int b = ddp->next_send++;
    ddp->round_begun = true;
    switch (ddp->buckets[b].route) {
    case DDP_ROUTE_THREAD:
      tg__ddp_comm_send(ddp, b);
      ddp->stats.buckets_during_backward += from_hook;
      break;
    case DDP_ROUTE_NCCL: { /* every rank queues the same sequence, error or not */
      tg_status one = reduce_here(ddp, b, name);
      if (st == TG_OK) st = one;
      ddp->stats.buckets_during_backward += from_hook;
      break;
    }
    case DDP_ROUTE_SYNC:
      break;
    }
  }
  return st;
}

/* The post-accumulate-grad hook: dp's gradient is final for this pass. */
static tg_status on_grad_final(void *user, tg_tensor *leaf) {
  (void)leaf;
  ddp_param *dp = user;
  tg_ddp *ddp = dp->ddp;
  dp->used = true;
  if (!ddp->sync) return TG_OK; /* accumulating (tg_ddp_set_sync(false)) */
  if (dp->ready) {
    tg_status st = tg_set_error(
        TG_ERR_STATE,
        "tg_ddp: a second backward reached a parameter (bucket %d) before tg_ddp_synchronize; "
        "to accumulate over several backward passes, turn sync off for all but the last "
        "(tg_ddp_set_sync)",
        dp->bucket);
    note(ddp, st);
    return st;
  }
  ddp->round_begun = true;
  tg_status st = take_grad(dp);
  dp->ready = true; /* even on failure: the bucket leaves anyway, so no rank waits for it */
  ddp->buckets[dp->bucket].pending--;
  tg_status sent = send_ready(ddp, true, "tg_ddp (backward hook)");
  if (st == TG_OK) st = sent;
  note(ddp, st);
  return st;
}

/* One more small all-reduce after the buckets, for two things every rank must know alike.
 * A rank whose step failed still sent its buckets (so nobody waits), which put its partial
 * gradients into everyone's mean: every rank learns it, so none steps on that mean with TG_OK
 * (a rank that failed keeps its own error). And which parameters some rank used: those unused
 * here are settled (settle_unused). */
static void agree_on_round(tg_ddp *ddp, const char *name) {
  /* ddp->agreed, not the stack: a collective that times out may still write its buffer after
   * we return (comm.h; destroy leaks it then). */
  int64_t *agreed = ddp->agreed;
  agreed[0] = tg__ddp_failure_key(ddp->round_error);
  for (int i = 0; i < ddp->n_params; i++) agreed[1 + i] = ddp->params[i].used;
  double t0 = tg__dist_now();
  tg_status st =
      tg__dist_allreduce_host(name, agreed, 1 + (int64_t)ddp->n_params, TG_I64, TG_REDUCE_MAX);
  ddp->stats.allreduce_seconds += tg__dist_now() - t0; /* communication too, never hidden */
  for (int i = 0; i < ddp->n_params; i++) {
    ddp_param *dp = &ddp->params[i];
    if (st == TG_OK && !dp->used) note(ddp, settle_unused(dp, agreed[1 + i] != 0));
    tg_release(dp->saved); /* when the all-reduce failed: .grad stays as it was */
    dp->saved = NULL;
  }
  const int64_t failed = agreed[0];
  if (st != TG_OK) {
    note(ddp, st);
  } else if (failed > 0) {
    note(ddp, tg_set_error(TG_ERR_DIST,
                           "%s: rank %d failed this step (%s): the averaged gradients hold "
                           "its partial ones, do not step on them",
                           name, tg__ddp_failed_rank(failed),
                           tg_status_name(tg__ddp_failed_status(failed))));
  }
}

/* Every rank's DDP does the same all-reduces in the same order, error or not (a rank that
 * skipped one would leave the others waiting until the timeout): errors are noted and
 * reported at the end. */
static tg_status synchronize(tg_ddp *ddp, const char *name) {
  if (!ddp->sync && !ddp->round_begun) return TG_OK;
  /* Parameters no hook reported in this pass go as their .grad is: what was accumulated
   * with sync off (used: it becomes the view, as in a hook), else this rank's share should
   * another rank have used it (hold_unused; agree_on_round settles their .grad). */
  for (int i = 0; i < ddp->n_params; i++) {
    ddp_param *dp = &ddp->params[i];
    if (dp->ready) continue;
    note(ddp, dp->used ? take_grad(dp) : hold_unused(dp));
    dp->ready = true;
    ddp->buckets[dp->bucket].pending--;
  }
  for (int i = 0; i < ddp->n_params; i++) {
    ddp_param *dp = &ddp->params[i];
    if (dp->moved) note(ddp, tg_set_grad(dp->param, dp->view));
    dp->moved = false;
  }
  note(ddp, send_ready(ddp, false, name));
  double t0 = tg__dist_now(), thread_seconds;
  note(ddp, tg__ddp_comm_wait(ddp, name, &thread_seconds));
  ddp->stats.allreduce_seconds += thread_seconds;
  /* Then the buckets left to this thread, in order, after the thread's (same on every rank). */
  for (int b = 0; b < ddp->n_buckets; b++)
    if (ddp->buckets[b].route == DDP_ROUTE_SYNC) note(ddp, reduce_here(ddp, b, name));
  agree_on_round(ddp, name);
  ddp->stats.exposed_seconds += tg__dist_now() - t0;
  ddp->stats.steps++;
  /* A new round. */
  for (int i = 0; i < ddp->n_params; i++) ddp->params[i].ready = ddp->params[i].used = false;
  for (int b = 0; b < ddp->n_buckets; b++) ddp->buckets[b].pending = ddp->buckets[b].count;
  ddp->next_send = 0;
  ddp->round_begun = false;
  tg_status st = ddp->round_error;
  ddp->round_error = TG_OK;
  if (st != TG_OK) return tg_set_error(st, "%s", ddp->round_message);
  return TG_OK;
}

tg_status tg_ddp_synchronize(tg_ddp *ddp) {
  if (!tg__check_not_null("tg_ddp_synchronize", "ddp", ddp)) return tg_last_error();
  return synchronize(ddp, "tg_ddp_synchronize");
}

tg_status tg_ddp_backward(tg_ddp *ddp, const tg_tensor *loss) {
  if (!tg__check_not_null("tg_ddp_backward", "ddp", ddp)) return tg_last_error();
  tg_status st = tg_backward(loss, NULL);
  if (!ddp->sync && !ddp->round_begun) return st;
  /* Synchronize even when backward failed, so that the other ranks are not left waiting for
   * this one's buckets; report backward's error. */
  note(ddp, st);
  return synchronize(ddp, "tg_ddp_backward");
}

void tg_ddp_set_sync(tg_ddp *ddp, bool sync) {
  if (ddp) ddp->sync = sync;
}

tg_status tg_ddp_stats_get(const tg_ddp *ddp, tg_ddp_stats *out) {
  if (!tg__check_not_null("tg_ddp_stats_get", "ddp", ddp) ||
      !tg__check_not_null("tg_ddp_stats_get", "out", out))
    return tg_last_error();
  *out = ddp->stats;
  return TG_OK;
}

void tg_ddp_stats_reset(tg_ddp *ddp) {
  if (!ddp) return;
  ddp->stats.steps = 0;
  ddp->stats.allreduce_seconds = ddp->stats.exposed_seconds = 0;
  ddp->stats.buckets_during_backward = 0;
}

static ddp_route route_of(const tg_ddp *ddp, const ddp_bucket *b) {
  if (ddp->opts.no_overlap || !tg__dist_threads_ok()) return DDP_ROUTE_SYNC;
  if (b->device.type == TG_CPU) return DDP_ROUTE_THREAD;
  return tg_dist_has_nccl() ? DDP_ROUTE_NCCL : DDP_ROUTE_SYNC;
}

/* Routes, the queue, the hooks and the thread: everything that can fail on one rank alone,
 * done before the ranks agree. */
static tg_status prepare(tg_ddp *ddp) {
  for (int b = 0; b < ddp->n_buckets; b++) {
    ddp->buckets[b].route = route_of(ddp, &ddp->buckets[b]);
    ddp->buckets[b].pending = ddp->buckets[b].count;
  }
  ddp->comm.queue = tg__host_calloc((size_t)ddp->n_buckets, sizeof *ddp->comm.queue);
  ddp->agreed = tg__host_calloc(1 + (size_t)ddp->n_params, sizeof *ddp->agreed);
  if (!ddp->comm.queue || !ddp->agreed)
    return tg_set_error(TG_ERR_MEMORY,
                        "tg_ddp_new: out of memory for a queue of %d buckets and %d flags",
                        ddp->n_buckets, ddp->n_params);
  for (int i = 0; i < ddp->n_params; i++) {
    ddp_param *dp = &ddp->params[i];
    tg_status st = tg_register_post_accumulate_grad_hook(dp->param, on_grad_final, dp, &dp->hook);
    if (st != TG_OK) {
      dp->hook = -1;
      return st;
    }
  }
  return tg__ddp_comm_start(ddp);
}

static void destroy(tg_ddp *ddp) {
  if (!ddp) return;
  tg__ddp_comm_stop(ddp); /* finishes what is queued first */
  for (int i = 0; i < ddp->n_params; i++)
    if (ddp->params[i].hook >= 0)
      tg_remove_post_accumulate_grad_hook(ddp->params[i].param, ddp->params[i].hook);
  for (int i = 0; i < ddp->n_params; i++) tg_release(ddp->params[i].saved);
  tg__ddp_release_layout(ddp); /* the .grad views keep their buffers alive */
  tg__host_free(ddp->comm.queue);
  if (!tg__dist_failed()) tg__host_free(ddp->agreed); /* else MPI may still write it */
  tg__host_free(ddp);
}

/* NCCL makes its communicator on first use, through MPI: made here, on the caller's thread,
 * before the communication thread can be inside MPI at the same time. */
static tg_status warm_up_nccl(tg_ddp *ddp) {
  for (int b = 0; b < ddp->n_buckets; b++)
    if (ddp->buckets[b].route == DDP_ROUTE_NCCL)
      return tg__dist_allreduce_contiguous("tg_ddp_new", ddp->buckets[b].flat, TG_REDUCE_MEAN);
  return TG_OK;
}

tg_ddp *tg_ddp_new(tg_module *m, tg_ddp_options opts) {
  if (!tg__check_not_null("tg_ddp_new", "m", m)) return NULL;
  if (!tg__dist_ready("tg_ddp_new")) return NULL;
  if (!opts.no_broadcast && tg_dist_broadcast_module(m, 0) != TG_OK) return NULL;
  size_t cap = opts.bucket_cap_bytes ? opts.bucket_cap_bytes : DEFAULT_BUCKET_CAP;
  tg_ddp *ddp = tg__host_calloc(1, sizeof *ddp);
  tg_status st = TG_OK;
  if (!ddp) {
    st = tg_set_error(TG_ERR_MEMORY, "tg_ddp_new: out of memory");
  } else {
    ddp->opts = opts;
    ddp->sync = true;
    st = tg__ddp_layout(ddp, m, cap);
    if (st == TG_OK) st = prepare(ddp);
  }
  /* Every rank learns whether all succeeded and laid the buckets out alike. */
  tg_ddp none = {0};
  st = tg__ddp_agree(ddp ? ddp : &none, st);
  if (st == TG_OK)
    st = tg__check_status(ddp->n_params > 0, TG_ERR_ARGUMENT, "tg_ddp_new",
                          "the module (%s) has no parameter that requires grad", tg_module_type(m));
  if (st == TG_OK) st = warm_up_nccl(ddp);
  if (st != TG_OK) {
    destroy(ddp);
    return NULL;
  }
  /* No .grad changes here: one that has none keeps none until a rank uses its parameter (an
   * optimizer skips it meanwhile, as in one process); synchronize then makes the slot its
   * .grad (a copy, once), as for a .grad the user replaced. */
  return ddp;
}

void tg_ddp_free(tg_ddp *ddp) { destroy(ddp); }
