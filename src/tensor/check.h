/* Argument checks shared by every layer: one vocabulary, one wording.
 *
 * Each check returns bool, true when the argument is fine, and on failure records a code and
 * a message "<fn>: <arg> ..." where fn is the public function the caller entered (e.g.
 * "tg_mm") and arg the parameter's name in its declaration, with sizes shown where sizes
 * matter. bool rather than tg_status because the checks chain with && and their callers
 * return different things (NULL, a status, false): a failed chain ends in `return NULL` or
 * `return tg_last_error()`. Checks are cheap on success: no allocation, no formatting.
 * t and ref are non-NULL except for tg__check_arg, which is what rules NULL out. */
#ifndef TG_CHECK_H
#define TG_CHECK_H

#include <stdbool.h>

#include "tensor/tensor_impl.h"

/* False if t is NULL, recording TG_ERR_ARGUMENT "<fn>: <arg> is NULL" unless an error is
 * already pending (a NULL from a failed call keeps that call's error). */
bool tg__check_arg(const char *fn, const char *arg, const tg_tensor *t);

/* TG_ERR_DTYPE "<fn>: <arg> is int64; expected float32 or float64" unless t is floating. */
bool tg__check_floating(const char *fn, const char *arg, const tg_tensor *t);

/* t is on ref's device: TG_ERR_DEVICE "<fn>: <arg> is on cuda:0 but <ref_arg> is on cpu:0".
 * For operands of different dtypes (class indices beside logits); else tg__check_alike. */
bool tg__check_same_device(const char *fn, const char *arg, const tg_tensor *t, const char *ref_arg,
                           const tg_tensor *ref);

/* t has ref's dtype (TG_ERR_DTYPE "<fn>: <arg> is float64 but <ref_arg> is float32") and
 * device (TG_ERR_DEVICE "<fn>: <arg> is on cuda:0 but <ref_arg> is on cpu:0"). */
bool tg__check_alike(const char *fn, const char *arg, const tg_tensor *t, const char *ref_arg,
                     const tg_tensor *ref);

/* t has ref's sizes: TG_ERR_SHAPE "<fn>: <arg> is [2, 3] but <ref_arg> is [3, 2]: sizes must
 * be equal". */
bool tg__check_same_sizes(const char *fn, const char *arg, const tg_tensor *t, const char *ref_arg,
                          const tg_tensor *ref);

/* t has ndim dims: TG_ERR_SHAPE "<fn>: <arg> must be 2-D, got [2, 3, 4]". */
bool tg__check_ndim(const char *fn, const char *arg, const tg_tensor *t, int ndim);

/* Any other condition: false with `code` and "<fn>: " followed by the printf-style message
 * unless cond holds. A macro so that the message's arguments (tg__sizes_str calls, say) are
 * evaluated only on failure. */
#define tg__check(cond, code, fn, ...) ((cond) || tg__fail((code), (fn), __VA_ARGS__))

/* tg__check for a function that returns a status: TG_OK when cond holds, else code (recorded
 * with "<fn>: " and the message), as `return tg_set_error(...)` would. For status chains:
 * `if (st == TG_OK) st = tg__check_status(n > 0, TG_ERR_ARGUMENT, fn, "n is %d", n);`. */
#define tg__check_status(cond, code, fn, ...)                                                      \
  (tg__check((cond), (code), (fn), __VA_ARGS__) ? TG_OK : (code))

/* A pointer argument that is not a tensor (a path, a name, an out pointer, a handle):
 * TG_ERR_ARGUMENT "<fn>: <arg> is NULL" unless p is set. Unlike tg__check_arg it always
 * records: such a NULL never comes from a failed tg call. */
#define tg__check_not_null(fn, arg, p)                                                             \
  tg__check((p) != NULL, TG_ERR_ARGUMENT, (fn), "%s is NULL", (arg))

/* Records code and "<fn>: <message>"; returns false. The failure half of tg__check. */
bool tg__fail(tg_status code, const char *fn, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Predicates behind the checks, for a caller that must build an argument's name ("tensors[3]")
 * only when something is wrong. */
static inline bool tg__is_alike(const tg_tensor *t, const tg_tensor *ref) {
  return t->dtype == ref->dtype && tg_device_equal(t->storage->device, ref->storage->device);
}
static inline bool tg__dims_equal(int ndim, const int64_t *sizes, int ref_ndim,
                                  const int64_t *ref_sizes) {
  if (ndim != ref_ndim) return false;
  for (int d = 0; d < ndim; d++)
    if (sizes[d] != ref_sizes[d]) return false;
  return true;
}
static inline bool tg__same_sizes(const tg_tensor *t, const tg_tensor *ref) {
  return tg__dims_equal(t->ndim, t->sizes, ref->ndim, ref->sizes);
}

/* Sizes as text, "[2, 3]" ("[]" for 0 dims), for error messages, with no buffer from the
 * caller: the text lives in one of TG__SIZES_STR_SLOTS thread-local buffers used in turn, so
 * it survives the next TG__SIZES_STR_SLOTS - 1 calls on the same thread and one message can
 * show up to TG__SIZES_STR_SLOTS sizes. Copy it to keep it longer. */
#define TG__SIZES_STR_SLOTS 4
const char *tg__dims_str(int ndim, const int64_t *sizes);
const char *tg__sizes_str(const tg_tensor *t);

#endif
