/* The DDP's state, shared by ddp.c (the public calls and the hooks), ddp_buckets.c (the
 * layout) and ddp_comm_thread.c (the communication thread). Internal to src/distributed/. */
#ifndef TG_DIST_DDP_INTERNAL_H
#define TG_DIST_DDP_INTERNAL_H

#include <pthread.h>

#include "tg/dist.h"
#include "tg/ops.h"

/* Where a bucket is all-reduced once every gradient in it is final. */
typedef enum ddp_route {
  DDP_ROUTE_THREAD, /* a CPU bucket: the communication thread, while backward goes on */
  DDP_ROUTE_NCCL,   /* a CUDA bucket with NCCL: queued on tg's stream from the hook */
  DDP_ROUTE_SYNC,   /* at synchronize, on the caller's thread (no_overlap, no thread
                     * support, CUDA through a host copy) */
} ddp_route;

typedef struct ddp_param {
  struct tg_ddp *ddp;
  tg_tensor *param; /* a reference of ours */
  tg_tensor *view;  /* ours: the param's slot in its bucket, its .grad while attached */
  int bucket;
  int hook;   /* the hook's handle; -1 when none is registered */
  bool ready; /* final for this round (hook fired, or synchronize took it) */
  bool used;  /* a hook fired since the last synchronize (sync on or off): used here */
  bool moved; /* .grad was not the view: its values were copied in, the view goes back */
  /* Unused here, with .grad the view: its values before the reduction, put back if no rank
   * used it either (a reference of ours; NULL otherwise). */
  tg_tensor *saved;
} ddp_param;

typedef struct ddp_bucket {
  tg_tensor *flat; /* ours: 1-D, contiguous; every param's view lies in it */
  tg_dtype dtype;
  tg_device device;
  int64_t numel;
  size_t bytes;
  int first, count; /* its params: ddp->params[first .. first + count) */
  int pending;      /* params not yet final this round */
  ddp_route route;
} ddp_bucket;

/* The communication thread and its queue. Buckets enter in bucket order, at most once a
 * round, so the queue is an array of bucket numbers with three counters. */
typedef struct ddp_comm {
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t work; /* the thread waits here for a bucket or stop */
  pthread_cond_t done; /* synchronize waits here for the queue to drain */
  bool started;        /* the thread runs (mu, the conditions are initialised) */
  bool stop;
  int *queue;      /* n_buckets slots */
  int n_queued;    /* handed to the thread this round */
  int n_done;      /* finished by it (success or not) */
  double seconds;  /* time spent in all-reduces, added up by the thread */
  tg_status error; /* the thread's first error since synchronize reported the last */
  char message[512];
} ddp_comm;

struct tg_ddp {
  tg_ddp_options opts;
  int n_params;
  ddp_param *params; /* in bucket order */
  int n_buckets;
  ddp_bucket *buckets;
  int next_send;    /* buckets [0, next_send) have left this round */
  bool round_begun; /* a hook fired or a bucket left since the last synchronize */
  bool sync;
  /* The round's first error (a hook's, a copy's, an all-reduce's) with its message, which
   * later calls would overwrite: synchronize reports it once every bucket has been reduced. */
  tg_status round_error;
  char round_message[512];
  ddp_comm comm;
  /* The round's agreement, all-reduced (MAX) after the buckets: [0] a failure key
   * (tg__ddp_failure_key), [1 + i] whether params[i] was used on the rank. */
  int64_t *agreed;
  tg_ddp_stats stats;
};

/* ---- ddp_buckets.c ---- */
/* Lays the module's parameters that require grad out in buckets (reverse module order,
 * up to cap bytes per bucket, one dtype and device each), making every flat buffer (zeros)
 * and view, and filling ddp->params and ddp->buckets. Attaches nothing. On failure ddp
 * holds what was made so far, for tg__ddp_release_layout. */
tg_status tg__ddp_layout(tg_ddp *ddp, tg_module *m, size_t cap);
/* Every rank agrees on ok and the layout (one all-reduce): TG_ERR_ARGUMENT naming both
 * sides on every rank when the layouts differ; when a rank is not ok, its own error there
 * and on the others a failed rank's status with a message naming it. */
tg_status tg__ddp_agree(const tg_ddp *ddp, tg_status local);
/* Releases params, views and flat buffers (the flat buffers are kept alive, leaked, after a
 * failed collective: MPI may still write them). */
void tg__ddp_release_layout(tg_ddp *ddp);

/* ---- ddp_comm_thread.c ---- */
/* Starts the thread (once; a no-op when no bucket is routed to it). */
tg_status tg__ddp_comm_start(tg_ddp *ddp);
/* Hands bucket b to the thread. */
void tg__ddp_comm_send(tg_ddp *ddp, int b);
/* Waits until the thread has finished every bucket handed to it, then starts a new round of
 * the queue; *seconds gets the time its all-reduces took since the last call. Returns the thread's
 * error (moved onto the caller's thread with its message) since the last call. */
tg_status tg__ddp_comm_wait(tg_ddp *ddp, const char *name, double *seconds);
/* Finishes what is queued, stops and joins the thread. */
void tg__ddp_comm_stop(tg_ddp *ddp);

/* This rank and a failure's status in one int64 (0 when st is TG_OK), so that a MAX
 * all-reduce keeps a rank and its own status together (the highest failed rank's); two
 * values maxed apart could name one rank with another's status. */
static inline int64_t tg__ddp_failure_key(tg_status st) {
  return st == TG_OK ? 0 : ((int64_t)tg_dist_rank() + 1) * 65536 + (int64_t)st;
}
static inline int tg__ddp_failed_rank(int64_t key) { return (int)(key / 65536) - 1; }
static inline tg_status tg__ddp_failed_status(int64_t key) { return (tg_status)(key % 65536); }

#endif
