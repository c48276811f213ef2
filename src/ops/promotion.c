/* Type promotion (docs/dtypes.md): the result type of two tensors and the checks shared by
 * the front ends where dtypes meet. */
#include "ops/promotion.h"

#include <math.h>

#include "tensor/check.h"
#include "tg/ops.h"

/* int (0) < float (1) */
static int category(tg_dtype dtype) { return tg_dtype_is_floating(dtype) ? 1 : 0; }

tg_dtype tg__result_type(const tg_tensor *a, const tg_tensor *b) {
  const bool a0 = a->ndim == 0, b0 = b->ndim == 0;
  if (a0 == b0) return tg_promote_types(a->dtype, b->dtype);
  const tg_dtype dim = a0 ? b->dtype : a->dtype, zero = a0 ? a->dtype : b->dtype;
  return category(zero) > category(dim) ? tg_promote_types(dim, zero) : dim;
}

tg_dtype tg_result_type(const tg_tensor *a, const tg_tensor *b) {
  if (!tg__check_arg("tg_result_type", "a", a) || !tg__check_arg("tg_result_type", "b", b))
    return TG_NUM_DTYPES;
  return tg__result_type(a, b);
}

const char *tg__dtype_enum_name(tg_dtype dtype) {
  switch (dtype) {
  case TG_F32:
    return "TG_F32";
  case TG_F64:
    return "TG_F64";
  case TG_I64:
    return "TG_I64";
  default:
    return "TG_NUM_DTYPES";
  }
}

bool tg__is_int64_value(double s) {
  /* -2^63 is an int64, 2^63 is not; NaN fails every comparison */
  return s >= -9223372036854775808.0 && s < 9223372036854775808.0 && s == floor(s);
}

bool tg__check_int_scalar(const char *op, const char *x_arg, const tg_tensor *x, const char *s_arg,
                          double s) {
  return tg__check(tg_dtype_is_floating(x->dtype) || tg__is_int64_value(s), TG_ERR_DTYPE, op,
                   "%s is int64 and %s = %g is not a whole number within int64 (tg's scalar is a "
                   "double, so an int64 tensor takes whole numbers only); cast first with "
                   "tg_to_dtype(%s, TG_F32)",
                   x_arg, s_arg, s, x_arg);
}

bool tg__check_inplace_cast(const char *op, const char *arg, const tg_tensor *target,
                            tg_dtype result) {
  return tg__check(tg_dtype_is_floating(target->dtype) || !tg_dtype_is_floating(result),
                   TG_ERR_DTYPE, op,
                   "the result type %s cannot be cast to %s's dtype %s in place; cast %s first "
                   "(%s = tg_to_dtype(%s, %s)) or use the out-of-place op",
                   tg_dtype_name(result), arg, tg_dtype_name(target->dtype), arg, arg, arg,
                   tg__dtype_enum_name(result));
}
