/* The DDP's communication thread: all-reduces the CPU buckets the hooks hand it, in the
 * order they come (the same on every rank), while backward goes on on the caller's thread.
 * MPI sees one thread at a time: the caller's makes no transport call from the first bucket
 * handed over until synchronize has waited for the last (comm.h). */
#include <stdio.h>
#include <string.h>

#include "distributed/comm.h"
#include "distributed/ddp_internal.h"

/* Reduces one bucket (on the thread); records the first error with its message. */
static void reduce(tg_ddp *ddp, int b) {
  ddp_comm *c = &ddp->comm;
  ddp_bucket *bk = &ddp->buckets[b];
  double t0 = tg__dist_now();
  tg_status st = tg__dist_allreduce_host("tg_ddp (communication thread)", tg_data_ptr(bk->flat),
                                         bk->numel, bk->dtype, TG_REDUCE_MEAN);
  double dt = tg__dist_now() - t0;
  pthread_mutex_lock(&c->mu);
  c->seconds += dt;
  if (st != TG_OK && c->error == TG_OK) {
    c->error = st;
    snprintf(c->message, sizeof c->message, "bucket %d of %d (%zu bytes): %s", b, ddp->n_buckets,
             bk->bytes, tg_last_error_message());
  }
  c->n_done++;
  pthread_cond_broadcast(&c->done);
  pthread_mutex_unlock(&c->mu);
  if (st != TG_OK) tg_clear_error(); /* moved to the caller's thread by tg__ddp_comm_wait */
}

static void *comm_main(void *arg) {
  tg_ddp *ddp = arg;
  ddp_comm *c = &ddp->comm;
  pthread_mutex_lock(&c->mu);
  for (;;) {
    /* Finish what is queued before stopping: tg_ddp_free mid-round waits for it. */
    while (c->n_done == c->n_queued && !c->stop) pthread_cond_wait(&c->work, &c->mu);
    if (c->n_done == c->n_queued) break;
    int b = c->queue[c->n_done];
    pthread_mutex_unlock(&c->mu);
    reduce(ddp, b);
    pthread_mutex_lock(&c->mu);
  }
  pthread_mutex_unlock(&c->mu);
  return NULL;
}

tg_status tg__ddp_comm_start(tg_ddp *ddp) {
  ddp_comm *c = &ddp->comm;
  bool needed = false;
  for (int b = 0; b < ddp->n_buckets; b++) needed |= ddp->buckets[b].route == DDP_ROUTE_THREAD;
  if (!needed || c->started) return TG_OK;
  if (pthread_mutex_init(&c->mu, NULL) != 0)
    return tg_set_error(TG_ERR_MEMORY, "tg_ddp_new: cannot make the communication thread's lock");
  if (pthread_cond_init(&c->work, NULL) != 0) {
    pthread_mutex_destroy(&c->mu);
    return tg_set_error(TG_ERR_MEMORY, "tg_ddp_new: cannot make a condition variable");
  }
  if (pthread_cond_init(&c->done, NULL) != 0) {
    pthread_cond_destroy(&c->work);
    pthread_mutex_destroy(&c->mu);
    return tg_set_error(TG_ERR_MEMORY, "tg_ddp_new: cannot make a condition variable");
  }
  int err = pthread_create(&c->thread, NULL, comm_main, ddp);
  if (err != 0) {
    pthread_cond_destroy(&c->done);
    pthread_cond_destroy(&c->work);
    pthread_mutex_destroy(&c->mu);
    return tg_set_error(TG_ERR_MEMORY, "tg_ddp_new: cannot start the communication thread: %s",
                        strerror(err));
  }
  c->started = true;
  return TG_OK;
}

void tg__ddp_comm_send(tg_ddp *ddp, int b) {
  ddp_comm *c = &ddp->comm;
  pthread_mutex_lock(&c->mu);
  c->queue[c->n_queued++] = b;
  pthread_cond_signal(&c->work);
  pthread_mutex_unlock(&c->mu);
}

tg_status tg__ddp_comm_wait(tg_ddp *ddp, const char *name, double *seconds) {
  ddp_comm *c = &ddp->comm;
  *seconds = 0;
  if (!c->started) return TG_OK;
  pthread_mutex_lock(&c->mu);
  /* Bounded: every all-reduce the thread runs gives up after the transport's timeout. */
  while (c->n_done < c->n_queued) pthread_cond_wait(&c->done, &c->mu);
  c->n_done = c->n_queued = 0;
  *seconds = c->seconds;
  c->seconds = 0;
  tg_status st = c->error;
  char message[sizeof c->message];
  memcpy(message, c->message, sizeof message);
  c->error = TG_OK;
  c->message[0] = '\0';
  pthread_mutex_unlock(&c->mu);
  if (st != TG_OK)
    return tg_set_error(st, "%s: the communication thread's all-reduce of %s", name, message);
  return TG_OK;
}

void tg__ddp_comm_stop(tg_ddp *ddp) {
  ddp_comm *c = &ddp->comm;
  if (!c->started) return;
  pthread_mutex_lock(&c->mu);
  c->stop = true;
  pthread_cond_signal(&c->work);
  pthread_mutex_unlock(&c->mu);
  pthread_join(c->thread, NULL);
  pthread_cond_destroy(&c->done);
  pthread_cond_destroy(&c->work);
  pthread_mutex_destroy(&c->mu);
  c->started = false;
}
