/* The cross-rank checks before a collective moves data: every rank learns whether every
 * other rank's call is fine and alike, so a mismatch is the same error on every rank, never
 * a hang. Small fixed-size buffers (static: the collectives are called from one thread), so
 * a check itself cannot fail to allocate on one rank and leave the others waiting. */
#ifndef TG_DIST_CHECK_H
#define TG_DIST_CHECK_H

#include "comm.h"

/* Whether every rank's call passed its local checks. local is this rank's status (its
 * error pending when not TG_OK). Returns local when it failed; else the status of the
 * lowest failing rank with a message naming it; TG_OK when all are fine (or TG_ERR_DIST
 * from the transport). One small all-reduce. */
tg_status tg__dist_agree(const char *name, tg_status local);

/* What a collective's tensor argument must share across ranks. */
typedef struct tg__dist_desc {
  int64_t arg;    /* the op of an all-reduce, the root of a broadcast */
  int64_t device; /* tg_device_type */
  int64_t dtype;
  int64_t ndim;
  int64_t numel;
  int64_t sizes[TG_MAX_DIMS];
} tg__dist_desc;

/* t's description (t may be NULL: this rank failed locally, its fields are then 0). */
tg__dist_desc tg__dist_describe(const tg_tensor *t, int64_t arg);

/* tg__dist_agree and, when every rank is fine, that every rank's description equals this
 * one's. A mismatch: on every rank the same error, naming rank 0's and the first differing
 * rank's tensors (TG_ERR_DEVICE, TG_ERR_DTYPE, TG_ERR_SHAPE, or TG_ERR_ARGUMENT when
 * arg_name — "op", "root" — differs). One small all-reduce when all agree. */
tg_status tg__dist_check_peers(const char *name, tg_status local, const tg__dist_desc *mine,
                               const char *arg_name);

#endif
