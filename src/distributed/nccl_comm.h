/* NCCL for CUDA tensors (nccl.c, built only with TG_WITH_NCCL): the CUDA branch of
 * tg__dist_allreduce_contiguous. */
#ifndef TG_DIST_NCCL_COMM_H
#define TG_DIST_NCCL_COMM_H

#include "comm.h"

/* In place on a contiguous CUDA tensor, queued on tg's stream for its device. The
 * communicator is made on first use (rank 0's unique id broadcast over MPI). */
tg_status tg__dist_nccl_allreduce(const char *name, tg_tensor *t, tg_reduce_op op);
/* TG_ERR_UNSUPPORTED when this rank's communicator is made and on another device than
 * device (NCCL reduces on one device per rank): a local check for before the cross-rank one. */
tg_status tg__dist_nccl_check_device(const char *name, int device);
/* Destroys the communicator (tg_dist_finalize); after a failure it is aborted instead. */
void tg__dist_nccl_release(void);

#endif
