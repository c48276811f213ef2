/* The transport under tg_dist (internal to src/distributed/): MPI when tg_dist is built with it
 * (comm_mpi.c), otherwise comm_none.c, whose every call is TG_ERR_UNSUPPORTED.
 *
 * One thread at a time makes these calls: the caller's, or the DDP's communication thread
 * while the caller's thread makes none (tg__dist_threads_ok). Errors are set on the calling
 * thread (tg's error is thread-local). */
#ifndef TG_DIST_COMM_H
#define TG_DIST_COMM_H

#include "tg/dist.h"

/* False with the error set (TG_ERR_UNSUPPORTED not built, TG_ERR_STATE not initialised,
 * TG_ERR_DIST after a failed collective), name first in the message. */
bool tg__dist_ready(const char *name);
/* Whether MPI gave the thread support (MPI_THREAD_SERIALIZED or better) for the DDP's
 * communication thread. */
bool tg__dist_threads_ok(void);
/* Whether a collective has failed (timed out): the job is broken. Buffers given to the
 * collective that failed must stay allocated (MPI may still write them): leak them. */
bool tg__dist_failed(void);

/* Blocking, bounded by the timeout, in place on host memory: count elements of dtype
 * (F32, F64, I64). MEAN divides the sum by the world size. No cross-rank check of count or
 * dtype: the caller guarantees them (or checked them before). */
tg_status tg__dist_allreduce_host(const char *name, void *buf, int64_t count, tg_dtype dtype,
                                  tg_reduce_op op);
tg_status tg__dist_broadcast_host(const char *name, void *buf, int64_t bytes, int root);
tg_status tg__dist_barrier_host(const char *name);

/* A monotonic clock in seconds: the transport's deadlines, the DDP's statistics. */
double tg__dist_now(void);

/* In place on a contiguous tensor on any device, no cross-rank check: a CPU tensor through
 * MPI on its memory; a CUDA tensor through NCCL on tg's stream (queued, ordered with tg's
 * later ops) when tg_dist_has_nccl(), else through a host copy. */
tg_status tg__dist_allreduce_contiguous(const char *name, tg_tensor *t, tg_reduce_op op);

#endif
