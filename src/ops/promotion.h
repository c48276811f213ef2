/* Type promotion (docs/dtypes.md): PyTorch's result type of two tensors, and the checks
 * the front ends share where dtypes meet or an int64 tensor meets a double scalar. */
#ifndef TG_PROMOTION_H
#define TG_PROMOTION_H

#include <stdbool.h>

#include "tensor/tensor_impl.h"

/* The dtype a binary op computes a (op) b in: tg_promote_types over the operands, except
 * that a 0-dim operand takes part only when its category (int < float) is higher than the
 * dimensioned operand's. a and b are non-NULL. */
tg_dtype tg__result_type(const tg_tensor *a, const tg_tensor *b);

/* "TG_F32", "TG_F64", "TG_I64": the spelling a user writes in the cast a message suggests. */
const char *tg__dtype_enum_name(tg_dtype dtype);

/* Whether s is a whole number that int64 holds exactly (what PyTorch's Python int is). */
bool tg__is_int64_value(double s);

/* An int64 x meets the double scalar s (named s_arg): TG_ERR_DTYPE "<op>: <x_arg> is int64
 * and <s_arg> = 0.5 is not a whole number; ..." naming the cast to write, unless s is a
 * whole number in int64's range or x is floating. */
bool tg__check_int_scalar(const char *op, const char *x_arg, const tg_tensor *x, const char *s_arg,
                          double s);

/* An in-place op writes a result of dtype `result` into target (named arg): PyTorch's rule,
 * a float result cannot be cast to an int64 target: TG_ERR_DTYPE naming both dtypes and
 * the cast to write. */
bool tg__check_inplace_cast(const char *op, const char *arg, const tg_tensor *target,
                            tg_dtype result);

#endif
