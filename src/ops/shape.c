/* cat and stack: joining tensors along a dim.
 *
 * cat writes each piece into a narrow view of one output; its backward hands each input
 * the matching narrow view of the gradient (no copies). stack is unsqueeze + cat. Pieces of
 * different dtypes are first cast to the dtype they promote to, as torch.cat does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/host_memory.h"
#include "ops/backend.h"
#include "ops/op_params.h"
#include "ops/registry.h"
#include "tensor/checked.h"
#include "tensor/tensor_impl.h"
#include "tg/ops.h"

/* ---- argument checks ---- */

/* A non-empty list without NULL entries (a NULL entry keeps the error that produced it). */
static bool check_list(const char *op, int n, const tg_tensor *const *tensors) {
  if (!tg__check(n > 0 && tensors, TG_ERR_ARGUMENT, op,
                 "expects a non-empty list of tensors, got %d%s", n,
                 tensors ? "" : " (tensors is NULL)"))
    return false;
  for (int i = 0; i < n; i++) {
    if (tensors[i]) continue;
    char arg[32]; /* the name is built only when it is needed */
    snprintf(arg, sizeof arg, "tensors[%d]", i);
    return tg__check_arg(op, arg, tensors[i]);
  }
  return true;
}

/* tensors[i] fits tensors[0]: same ndim, same sizes except in dim skip (-1: in none), same
 * dtype and device. */
static bool check_piece(const char *op, int i, const tg_tensor *t, const tg_tensor *first,
                        int skip) {
  bool fits = t->ndim == first->ndim;
  for (int d = 0; fits && d < t->ndim; d++) fits = d == skip || t->sizes[d] == first->sizes[d];
  if (fits && tg__is_alike(t, first)) return true;
  char arg[32];
  snprintf(arg, sizeof arg, "tensors[%d]", i);
  if (t->ndim != first->ndim || skip < 0)
    return tg__check(t->ndim == first->ndim, TG_ERR_SHAPE, op,
                     "%s is %s but tensors[0] is %s: all need the same number of dims", arg,
                     tg__sizes_str(t), tg__sizes_str(first)) &&
           tg__check_same_sizes(op, arg, t, "tensors[0]", first) &&
           tg__check_alike(op, arg, t, "tensors[0]", first);
  return tg__check(fits, TG_ERR_SHAPE, op,
                   "%s is %s but tensors[0] is %s: sizes must match except in dim %d", arg,
                   tg__sizes_str(t), tg__sizes_str(first), skip) &&
         tg__check_alike(op, arg, t, "tensors[0]", first);
}

/* ---- cat ---- */

/* The pieces fit each other along dim (ints[0], a dim of tensors[0]) and the result's sizes
 * fit int64: checked here, not in tg_cat, since tg_apply_ex may run the op directly. */
static bool check_cat(const char *op, const tg_ctx *ctx, int n, const tg_tensor *const *tensors,
                      int64_t *sizes, int *dim) {
  if (!tg__check(n > 0, TG_ERR_ARGUMENT, op, "expects a non-empty list of tensors, got %d", n))
    return false;
  const tg_tensor *first = tensors[0];
  if (!tg__check(first->ndim > 0, TG_ERR_SHAPE, op,
                 "tensors[0] is 0-dim; only tensors with at least 1 dim can be concatenated "
                 "(use tg_stack)") ||
      !tg__param_dim(op, ctx, 0, first->ndim, dim))
    return false;
  const int d = *dim;
  for (int i = 1; i < n; i++)
    if (!check_piece(op, i, tensors[i], first, d)) return false;
  /* Expanded inputs can be huge: the joined size and the result's extent must fit int64. */
  int64_t extent;
  memcpy(sizes, first->sizes, sizeof(int64_t) * (size_t)first->ndim);
  bool overflow = false;
  for (int i = 1; i < n; i++) overflow |= tg__add_ovf(sizes[d], tensors[i]->sizes[d], &sizes[d]);
  return tg__check(!overflow && !tg__extent_ovf(first->ndim, sizes, &extent), TG_ERR_SHAPE, op,
                   "%d tensors of shape %s along dim %d: the result's number of elements "
                   "overflows int64",
                   n, tg__sizes_str(first), d);
}

tg_status tg__fwd_cat(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  const int n = tg_ctx_num_inputs(ctx);
  int dim;
  int64_t sizes[TG_MAX_DIMS];
  if (!check_cat("tg_cat", ctx, n, in, sizes, &dim)) return tg_last_error();
  const tg_tensor *first = in[0];
  const tg_backend *be = tg__backend("tg_cat", first->storage->device);
  tg_tensor *o =
      be ? tg_empty(first->ndim, sizes, (tg_options){first->dtype, first->storage->device, false})
         : NULL;
  if (!o) return tg_last_error();
  int64_t start = 0;
  for (int i = 0; i < n; i++) {
    int64_t len = in[i]->sizes[dim];
    if (len == 0) continue;
    tg_tensor *window = tg_narrow(o, dim, start, len);
    if (!window || be->copy(window, in[i]) != TG_OK) return tg_last_error();
    start += len;
  }
  out[0] = o;
  return TG_OK;
}

tg_status tg__bwd_cat(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  const int n = tg_ctx_num_inputs(ctx), dim = (int)tg_ctx_int(ctx, 0);
  int64_t start = 0;
  for (int i = 0; i < n; i++) {
    int64_t len = tg_ctx_input_sizes(ctx, i)[dim];
    if (tg_ctx_needs_input_grad(ctx, i)) {
      gi[i] = tg_narrow(g[0], dim, start, len);
      if (!gi[i]) return tg_last_error();
    }
    start += len;
  }
  return TG_OK;
}

/* ---- promotion ---- */

typedef tg_tensor *(*join_fn)(int n, const tg_tensor *const *tensors, int dim);

/* The dtype the pieces meet in (tg_promote_types over all, as torch.cat). */
static tg_dtype joined_dtype(int n, const tg_tensor *const *tensors) {
  tg_dtype dtype = tensors[0]->dtype;
  for (int i = 1; i < n; i++) dtype = tg_promote_types(dtype, tensors[i]->dtype);
  return dtype;
}

/* join over the pieces cast to dtype (on the tape: each gradient comes back in its piece's
 * own dtype). */
static tg_tensor *join_promoted(const char *op, join_fn join, int n,
                                const tg_tensor *const *tensors, int dim, tg_dtype dtype) {
  const tg_tensor **cast = tg__host_malloc(sizeof *cast * (size_t)n);
  if (!cast) {
    tg_set_error(TG_ERR_MEMORY, "%s: out of memory for %d pieces", op, n);
    return NULL;
  }
  tg_scope s = tg_scope_begin(); /* the casts are temporaries */
  bool ok = true;
  for (int i = 0; i < n && ok; i++) ok = (cast[i] = tg_to_dtype(tensors[i], dtype)) != NULL;
  tg_tensor *result = ok ? join(n, cast, dim) : NULL;
  result = tg_scope_escape(s, result);
  tg_scope_end(s);
  tg__host_free(cast);
  return result;
}

tg_tensor *tg_cat(int n, const tg_tensor *const *tensors, int dim) {
  static const char *op = "tg_cat";
  if (!check_list(op, n, tensors)) return NULL;
  tg_dtype dtype = joined_dtype(n, tensors);
  for (int i = 0; i < n; i++)
    if (tensors[i]->dtype != dtype) return join_promoted(op, tg_cat, n, tensors, dim, dtype);
  const tg_tensor *first = tensors[0];
  if (!tg__check(first->ndim > 0, TG_ERR_SHAPE, op,
                 "tensors[0] is 0-dim; only tensors with at least 1 dim can be concatenated "
                 "(use tg_stack)"))
    return NULL;
  int d = tg__wrap_dim(op, "dim", dim, first->ndim);
  if (d < 0) return NULL;
  for (int i = 1; i < n; i++) /* here too, for tg_cat's names ahead of tg_apply's device check */
    if (!check_piece(op, i, tensors[i], first, d)) return NULL;
  return tg_apply1_ex(TG__OP(cat), n, tensors, TG__NO_SC, TG__INTS(d)); /* checks the sizes */
}

/* ---- stack ---- */

tg_tensor *tg_stack(int n, const tg_tensor *const *tensors, int dim) {
  static const char *op = "tg_stack";
  if (!check_list(op, n, tensors)) return NULL;
  tg_dtype dtype = joined_dtype(n, tensors);
  for (int i = 0; i < n; i++)
    if (tensors[i]->dtype != dtype) return join_promoted(op, tg_stack, n, tensors, dim, dtype);
  const tg_tensor *first = tensors[0];
  if (!tg__check(first->ndim < TG_MAX_DIMS, TG_ERR_SHAPE, op,
                 "tensors[0] is %s: it already has the maximum of %d dims", tg__sizes_str(first),
                 TG_MAX_DIMS))
    return NULL;
  int d = tg__wrap_dim(op, "dim", dim, first->ndim + 1);
  if (d < 0) return NULL;
  for (int i = 1; i < n; i++)
    if (!check_piece(op, i, tensors[i], first, -1)) return NULL;
  const tg_tensor **pieces = tg__host_malloc(sizeof *pieces * (size_t)n);
  if (!pieces) {
    tg_set_error(TG_ERR_MEMORY, "tg_stack: out of memory for %d pieces", n);
    return NULL;
  }
  tg_scope s = tg_scope_begin(); /* the unsqueezed views are temporaries */
  bool ok = true;
  for (int i = 0; i < n && ok; i++) ok = (pieces[i] = tg_unsqueeze(tensors[i], d)) != NULL;
  tg_tensor *result = ok ? tg_cat(n, pieces, d) : NULL;
  result = tg_scope_escape(s, result);
  tg_scope_end(s);
  tg__host_free(pieces);
  return result;
}
