/* tg — generic differentiable ops. PyTorch names; `_` suffix = in place (returns status,
 * leaves the target untouched on error); `_scalar` = a double operand. Binary ops
 * broadcast like NumPy. Every result is scope-owned (see tensor.h). */
#ifndef TG_OPS_H
#define TG_OPS_H

#include "autograd.h"
#include "tensor.h"

TG_API_BEGIN
#ifdef __cplusplus
extern "C" {
#endif

/* ---- pointwise, binary (broadcasting) ---- */
tg_tensor *tg_add(const tg_tensor *a, const tg_tensor *b);
tg_tensor *tg_sub(const tg_tensor *a, const tg_tensor *b);
tg_tensor *tg_mul(const tg_tensor *a, const tg_tensor *b);
tg_tensor *tg_div(const tg_tensor *a, const tg_tensor *b);
/* a + alpha * b */
tg_tensor *tg_add_scaled(const tg_tensor *a, const tg_tensor *b, double alpha);
tg_tensor *tg_add_scalar(const tg_tensor *a, double s);
tg_tensor *tg_sub_scalar(const tg_tensor *a, double s);
tg_tensor *tg_rsub_scalar(const tg_tensor *a, double s); /* s - a */
tg_tensor *tg_mul_scalar(const tg_tensor *a, double s);
tg_tensor *tg_div_scalar(const tg_tensor *a, double s);

/* ---- pointwise, unary ---- */
tg_tensor *tg_neg(const tg_tensor *x);
tg_tensor *tg_exp(const tg_tensor *x);
tg_tensor *tg_log(const tg_tensor *x);
tg_tensor *tg_sqrt(const tg_tensor *x);
tg_tensor *tg_pow_scalar(const tg_tensor *x, double exponent);
tg_tensor *tg_sigmoid(const tg_tensor *x);
tg_tensor *tg_tanh(const tg_tensor *x);
tg_tensor *tg_relu(const tg_tensor *x);
tg_tensor *tg_elu(const tg_tensor *x, double alpha);

/* ---- in place: modify a, bump its version; b broadcasts to a's sizes ----
 * b may overlap a in memory (a itself, its transpose, a row of it, a shifted window): the
 * result is a (op) b with b's values from before the write, as if b were copied first (tg
 * copies it when it overlaps a other than element for element; PyTorch refuses a partial
 * overlap instead: docs/conventions.md). */
tg_status tg_add_(tg_tensor *a, const tg_tensor *b);
tg_status tg_sub_(tg_tensor *a, const tg_tensor *b);
tg_status tg_mul_(tg_tensor *a, const tg_tensor *b);
tg_status tg_div_(tg_tensor *a, const tg_tensor *b);
tg_status tg_add_scaled_(tg_tensor *a, const tg_tensor *b, double alpha);
tg_status tg_add_scalar_(tg_tensor *a, double s);
tg_status tg_mul_scalar_(tg_tensor *a, double s);
tg_status tg_neg_(tg_tensor *x);
tg_status tg_exp_(tg_tensor *x);
tg_status tg_log_(tg_tensor *x);
tg_status tg_sqrt_(tg_tensor *x);
tg_status tg_pow_scalar_(tg_tensor *x, double exponent);
tg_status tg_sigmoid_(tg_tensor *x);
tg_status tg_tanh_(tg_tensor *x);
tg_status tg_relu_(tg_tensor *x);
tg_status tg_elu_(tg_tensor *x, double alpha);

/* ---- pointwise, more unary ops (with their in-place forms) and comparisons ----
 * abs: d/dx = sign(x), 0 at 0. reciprocal: 1/x.
 * Comparisons broadcast like the binary ops and give 1 where the relation holds and 0
 * elsewhere, in the inputs' (floating) dtype; they are not differentiable (the result
 * does not require grad). NaN compares unequal to everything, itself included. */
tg_tensor *tg_abs(const tg_tensor *x);
tg_tensor *tg_reciprocal(const tg_tensor *x);
tg_status tg_abs_(tg_tensor *x);
tg_status tg_reciprocal_(tg_tensor *x);
tg_tensor *tg_softplus(const tg_tensor *x); /* log(1 + exp(x)); x itself above 20 */
tg_status tg_softplus_(tg_tensor *x);
tg_tensor *tg_eq(const tg_tensor *a, const tg_tensor *b); /* a == b */
tg_tensor *tg_ne(const tg_tensor *a, const tg_tensor *b); /* a != b */
tg_tensor *tg_gt(const tg_tensor *a, const tg_tensor *b); /* a > b */
tg_tensor *tg_ge(const tg_tensor *a, const tg_tensor *b); /* a >= b */
tg_tensor *tg_lt(const tg_tensor *a, const tg_tensor *b); /* a < b */
tg_tensor *tg_le(const tg_tensor *a, const tg_tensor *b); /* a <= b */

/* ---- reductions ---- */
tg_tensor *tg_sum(const tg_tensor *x); /* all elements -> 0-dim */
tg_tensor *tg_sum_dim(const tg_tensor *x, int dim, bool keepdim);
tg_tensor *tg_mean(const tg_tensor *x);
tg_tensor *tg_mean_dim(const tg_tensor *x, int dim, bool keepdim);
tg_tensor *tg_max(const tg_tensor *x); /* all elements -> 0-dim */
/* values and (I64, non-differentiable) indices; either out pointer may be NULL. */
tg_status tg_max_dim(const tg_tensor *x, int dim, bool keepdim, tg_tensor **values,
                     tg_tensor **indices);
/* The minimum, as tg_max / tg_max_dim (first index wins ties, NaN propagates). */
tg_tensor *tg_min(const tg_tensor *x);
tg_status tg_min_dim(const tg_tensor *x, int dim, bool keepdim, tg_tensor **values,
                     tg_tensor **indices);
/* Sums x down to the given (broadcast-compatible) sizes: the backward of broadcasting. */
tg_tensor *tg_sum_to_size(const tg_tensor *x, int ndim, const int64_t *sizes);

/* ---- linear algebra (2-D); strided operands go to BLAS as strides, not copies ---- */
tg_tensor *tg_mm(const tg_tensor *a, const tg_tensor *b);
/* beta * input + alpha * (mat1 @ mat2); input broadcasts to [m, n]. */
tg_tensor *tg_addmm(const tg_tensor *input, const tg_tensor *mat1, const tg_tensor *mat2,
                    double beta, double alpha);
tg_tensor *tg_matmul(const tg_tensor *a, const tg_tensor *b); /* 1-D or 2-D operands */

/* ---- shape ---- */
tg_tensor *tg_cat(int n, const tg_tensor *const *tensors, int dim);
tg_tensor *tg_stack(int n, const tg_tensor *const *tensors, int dim);

/* ---- indexing ----
 * Rows of weight [n, d] picked by indices (I64, any shape, values in [0, n)): the result is
 * [*indices.shape, d]. The registered op "embedding"; its backward adds each output row's
 * gradient into the row it came from (indices that repeat add up). An index out of range
 * is TG_ERR_INDEX naming it. */
tg_tensor *tg_embedding(const tg_tensor *weight, const tg_tensor *indices);

/* ---- softmax and losses ---- */
tg_tensor *tg_log_softmax(const tg_tensor *x, int dim);
tg_tensor *tg_softmax(const tg_tensor *x, int dim);
/* mean((input - target)^2) */
tg_tensor *tg_mse_loss(const tg_tensor *input, const tg_tensor *target);
/* mean over rows of -log_softmax(logits)[i, target[i]]; logits [n, c], target I64 [n]. */
tg_tensor *tg_cross_entropy(const tg_tensor *logits, const tg_tensor *target);

#ifdef __cplusplus
}
#endif
TG_API_END
#endif
