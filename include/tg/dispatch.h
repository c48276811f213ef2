/* tg — dtype dispatch, the C twin of AT_DISPATCH_FLOATING_TYPES.
 *
 *   TG_DISPATCH_FLOATING_TYPES(tg_tensor_dtype(x), "my_op", {
 *     scalar_t *p = tg_data_ptr(x); ...
 *   });
 *
 * The body runs with scalar_t typedef'd to the element type. An unsupported dtype records
 * TG_ERR_DTYPE naming the op and makes the enclosing function return TG_ERR_DTYPE, so use
 * the macros in functions returning tg_status (kernels do). */
#ifndef TG_DISPATCH_H
#define TG_DISPATCH_H

#include "types.h"

#define TG__DISPATCH_CASE(ENUM, TYPE, ...)                                                         \
  case ENUM: {                                                                                     \
    typedef TYPE scalar_t;                                                                         \
    __VA_ARGS__;                                                                                   \
    break;                                                                                         \
  }

#define TG__DISPATCH_FAIL(DTYPE, NAME, KIND)                                                       \
  default:                                                                                         \
    return tg_set_error(TG_ERR_DTYPE, "%s: dtype %s is not supported (" KIND " only)", (NAME),     \
                        tg_dtype_name(DTYPE));

#define TG_DISPATCH_FLOATING_TYPES(DTYPE, NAME, ...)                                               \
  do {                                                                                             \
    switch (DTYPE) {                                                                               \
      TG__DISPATCH_CASE(TG_F32, float, __VA_ARGS__)                                                \
      TG__DISPATCH_CASE(TG_F64, double, __VA_ARGS__)                                               \
      TG__DISPATCH_FAIL(DTYPE, NAME, "F32, F64")                                                   \
    }                                                                                              \
  } while (0)

#define TG_DISPATCH_ALL_TYPES(DTYPE, NAME, ...)                                                    \
  do {                                                                                             \
    switch (DTYPE) {                                                                               \
      TG__DISPATCH_CASE(TG_F32, float, __VA_ARGS__)                                                \
      TG__DISPATCH_CASE(TG_F64, double, __VA_ARGS__)                                               \
      TG__DISPATCH_CASE(TG_I64, int64_t, __VA_ARGS__)                                              \
      TG__DISPATCH_FAIL(DTYPE, NAME, "F32, F64, I64")                                              \
    }                                                                                              \
  } while (0)

#endif
