/* Helpers shared by the pointwise op files (and by other ops built on the same kernels). */
#ifndef TG_POINTWISE_INTERNAL_H
#define TG_POINTWISE_INTERNAL_H

#include "ops/backend.h"
#include "tensor/tensor_impl.h"
#include "tg/autograd.h"

/* x <= 0 ? 0 : 1 in x's dtype (1 at NaN, where relu passes its gradient as PyTorch's does);
 * not differentiable (its gradient is zero almost everywhere). Used by the backward of
 * relu, elu, abs and softplus. */
tg_tensor *tg__step(const tg_tensor *x);

/* Checks the operands of a binary op's forward (the front ends have promoted them): both
 * non-NULL (else keeps the first error), of one dtype ("<op>: a is float32 but b is float64")
 * and on one device. */
bool tg__check_binary_operands(const char *op, const char *a_name, const tg_tensor *a,
                               const char *b_name, const tg_tensor *b);

/* Checks the target of an in-place op: non-NULL, without overlapping elements (an expanded
 * view cannot be written elementwise). Its dtype is the op's to check (docs/dtypes.md). */
bool tg__check_inplace_target(const char *op, const char *arg, const tg_tensor *t);

/* out = f(x) through out's device backend; out and x have equal sizes. */
tg_status tg__unary_into(const char *op, tg_unary_kind kind, double a, double b, tg_tensor *out,
                         const tg_tensor *x);
/* A new scope-owned tensor holding f(x). */
tg_tensor *tg__unary_new(const char *op, tg_unary_kind kind, double a, double b,
                         const tg_tensor *x);
/* out = a (op) b with a and b broadcast to out's sizes (they must broadcast to them). */
tg_status tg__binary_into(const char *op, tg_binary_kind kind, double alpha, tg_tensor *out,
                          const tg_tensor *a, const tg_tensor *b);
/* out = cond != 0 ? a : b with cond, a and b broadcast to out's sizes; a and b of out's
 * dtype, cond of any. */
tg_status tg__where_into(const char *op, tg_tensor *out, const tg_tensor *cond, const tg_tensor *a,
                         const tg_tensor *b);

/* What a binary op's backward reads (ops/def/binary.def). */
enum { TG__SAVE_A = 1, TG__SAVE_B = 2, TG__SAVE_OUT = 4 };

/* Forward of an in-place binary op: saves what `need` (TG__SAVE_* bits) asks, all before
 * the write (b, then a's old value from input 2, then the target as the output), then
 * a = a (op) b, bumps a's version and returns a. */
tg_status tg__binary_inplace_forward(tg_ctx *ctx, const char *op, tg_binary_kind kind, double alpha,
                                     int need, const tg_tensor *const *in, tg_tensor **out);
/* Front end of an in-place binary op of kind `kind`: checks a and b (b broadcasts to a; the
 * result type must be castable to a's dtype, and an int64 a takes a whole alpha), casts b to
 * a's dtype on the tape when they differ, then runs desc on (a, b[, a copy of a's old value
 * when the call will be recorded and an input whose gradient reads it (a_for_a, a_for_b)
 * requires grad]) inside a scope. */
tg_status tg__binary_inplace_call(const char *op, tg_binary_kind kind, const tg_op_desc *desc,
                                  tg_tensor *a, const tg_tensor *b, bool a_for_a, bool a_for_b,
                                  int n_scalars, const double *scalars);

/* Front end of an in-place unary op: checks the target x, then runs desc on (x[, a copy of
 * x's old value when with_old and the call will be recorded]) inside a scope. */
tg_status tg__unary_inplace_call(const char *op, const tg_op_desc *desc, tg_tensor *x,
                                 bool with_old, int n_scalars, const double *scalars);

/* issue 25, helper "pointwise" (ops/pointwise_activation.c). g silu'(x) through the op
 * silu_backward (one pass, differentiable again): silu's derivative in its list entry. */
tg_tensor *tg__silu_backward(const tg_tensor *g, const tg_tensor *x);
/* The gradient of one input of maximum / minimum at the output's sizes: 0 where `loses` is
 * nonzero, g/2 where a == b (a tie shares it, as PyTorch), else g. */
tg_tensor *tg__select_grad(const tg_tensor *g, const tg_tensor *loses, const tg_tensor *a,
                           const tg_tensor *b);

#endif
