/* The argument checks of check.h. Failure paths only format; success paths only compare. */
#include <stdio.h>

#include "tensor/check.h"

/* Room for TG_MAX_DIMS sizes of up to 20 characters each, ", " between them and "[]". */
#define SIZES_STR_MAX (TG_MAX_DIMS * 22 + 3)

const char *tg__dims_str(int ndim, const int64_t *sizes) {
  static _Thread_local char slots[TG__SIZES_STR_SLOTS][SIZES_STR_MAX];
  static _Thread_local unsigned next;
  char *buf = slots[next++ % TG__SIZES_STR_SLOTS];
  return tg_format_sizes(buf, SIZES_STR_MAX, ndim, sizes);
}

const char *tg__sizes_str(const tg_tensor *t) { return tg__dims_str(t->ndim, t->sizes); }

bool tg__check_arg(const char *fn, const char *arg, const tg_tensor *t) {
  if (t) {
    tg__lifetime_verify(fn, arg, t);
    return true;
  }
  if (tg_last_error() == TG_OK) tg_set_error(TG_ERR_ARGUMENT, "%s: %s is NULL", fn, arg);
  return false;
}

bool tg__check_floating(const char *fn, const char *arg, const tg_tensor *t) {
  return tg__check(tg_dtype_is_floating(t->dtype), TG_ERR_DTYPE, fn,
                   "%s is %s; expected float32 or float64", arg, tg_dtype_name(t->dtype));
}

bool tg__check_same_device(const char *fn, const char *arg, const tg_tensor *t, const char *ref_arg,
                           const tg_tensor *ref) {
  tg_device d = t->storage->device, rd = ref->storage->device;
  return tg__check(tg_device_equal(d, rd), TG_ERR_DEVICE, fn, "%s is on %s:%d but %s is on %s:%d",
                   arg, tg_device_type_name(d.type), d.index, ref_arg, tg_device_type_name(rd.type),
                   rd.index);
}

bool tg__check_alike(const char *fn, const char *arg, const tg_tensor *t, const char *ref_arg,
                     const tg_tensor *ref) {
  if (!tg__check(t->dtype == ref->dtype, TG_ERR_DTYPE, fn, "%s is %s but %s is %s", arg,
                 tg_dtype_name(t->dtype), ref_arg, tg_dtype_name(ref->dtype)))
    return false;
  return tg__check_same_device(fn, arg, t, ref_arg, ref);
}

bool tg__check_same_sizes(const char *fn, const char *arg, const tg_tensor *t, const char *ref_arg,
                          const tg_tensor *ref) {
  return tg__check(tg__same_sizes(t, ref), TG_ERR_SHAPE, fn,
                   "%s is %s but %s is %s: sizes must be equal", arg, tg__sizes_str(t), ref_arg,
                   tg__sizes_str(ref));
}

bool tg__check_ndim(const char *fn, const char *arg, const tg_tensor *t, int ndim) {
  return tg__check(t->ndim == ndim, TG_ERR_SHAPE, fn, "%s must be %d-D, got %s", arg, ndim,
                   tg__sizes_str(t));
}
