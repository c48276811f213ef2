/* Live tape nodes per registered user op, so that an extension's ops are not unregistered
 * (and its code unloaded) while a graph still calls into them. Internal. */
#ifndef TG_OP_REFS_H
#define TG_OP_REFS_H

#include <stdatomic.h>

#include "tg/autograd.h"

/* Set by the registry on the ops it registers at run time: only their nodes are counted. */
#define TG__OP_TRACKED (1u << 30)

/* Starts counting nodes of op (a registry-owned descriptor). TG_ERR_MEMORY on failure. */
tg_status tg__op_refs_track(const tg_op_desc *op);
/* The counter of op, incremented, or NULL when op is not tracked (a descriptor the user
 * applies without registering it, or a copy of a registered one). */
atomic_long *tg__op_refs_acquire(const tg_op_desc *op);
static inline void tg__op_refs_release(atomic_long *counter) {
  if (counter) atomic_fetch_sub(counter, 1);
}
/* Stops counting ops[0..n) if none has a live node; else TG_ERR_STATE naming the op and its
 * count (who: the caller, for the message), and every op stays tracked. Untracked ops are
 * skipped. */
tg_status tg__op_refs_untrack_unused(const char *who, int n, const tg_op_desc *const *ops);

#endif
