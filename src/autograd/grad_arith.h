/* The engine's arithmetic: the one seam between autograd and the ops above it.
 *
 * Backward needs a few tensor operations of its own: summing two gradients (recorded on
 * the tape under create_graph, so the sum is differentiable again), zeros for a missing
 * gradient, ones for an implicit root gradient, and unrecorded copies, adds and fills for
 * .grad. Autograd sits below ops and names none of them; the ops layer installs this
 * table (src/ops/grad_arith.c) before any tensor exists: every storage is made by
 * src/ops/creation.c, which installs it first. docs/design.md, "Layers", names this seam. */
#ifndef TG_GRAD_ARITH_H
#define TG_GRAD_ARITH_H

#include "tensor/tensor_impl.h"

typedef struct tg_grad_arith {
  /* a + b, recorded when grad mode is on (create_graph); owned by the innermost scope. */
  tg_tensor *(*add)(const tg_tensor *a, const tg_tensor *b);
  /* Zeros of these sizes, and ones like t; owned by the innermost scope. */
  tg_tensor *(*zeros)(int ndim, const int64_t *sizes, tg_options opts);
  tg_tensor *(*ones_like)(const tg_tensor *t);
  /* An uninitialised contiguous tensor, refcount 1, in no scope. */
  tg_tensor *(*empty)(int ndim, const int64_t *sizes, tg_dtype dtype, tg_device device);
  /* Not recorded, errors naming op: out = a + b (out may be a), out = src, t[...] = value. */
  tg_status (*add_into)(const char *op, tg_tensor *out, const tg_tensor *a, const tg_tensor *b);
  tg_status (*copy_into)(const char *op, tg_tensor *out, const tg_tensor *src);
  tg_status (*fill)(const char *op, tg_tensor *t, double value);
  /* Anomaly mode's test: *where = the flat (row-major) index of t's first NaN or infinity
   * and *value = it, or *where = -1 when there is none (always for I64). Not recorded; any
   * device (a device tensor is read through a host copy). */
  tg_status (*first_nonfinite)(const tg_tensor *t, int64_t *where, double *value);
} tg_grad_arith;

/* Installs the table (idempotent; the ops layer calls it). */
void tg__grad_arith_install(const tg_grad_arith *arith);
/* The installed table; never NULL once a tensor exists. */
const tg_grad_arith *tg__grad_arith(void);

#endif
