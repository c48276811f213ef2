/* tg — generic differentiable ops. PyTorch names; `_` suffix = in place (returns status,
 * leaves the target untouched on error); `_scalar` = a double operand. Binary ops
 * broadcast like NumPy. Every result is scope-owned (see tensor.h).
 *
 * Dtypes (docs/dtypes.md): where two dtypes meet, tg promotes as PyTorch does (int64 <
 * float32 < float64, with PyTorch's rule for 0-dim operands: tg_result_type); the cast is
 * recorded on the tape, so each input's gradient comes back in its own dtype. Each group
 * below says which dtypes it takes; int64 tensors never require grad. */
#ifndef TG_OPS_H
#define TG_OPS_H

#include "autograd.h"
#include "tensor.h"

TG_API_BEGIN
#ifdef __cplusplus
extern "C" {
#endif

/* ---- the op registry ----
 * Built-in ops are always there; user ops are added at run time (the desc is copied; its
 * name must be new). Where an op runs: tg_op_supported (tg/device.h). */
tg_status tg_op_register(const tg_op_desc *desc);
const tg_op_desc *tg_op_lookup(const char *name); /* NULL + TG_ERR_ARGUMENT if unknown */
int tg_op_count(void);
const tg_op_desc *tg_op_at(int index);

/* The dtype a binary op between a and b computes in (before div's int64 rule): the
 * promotion of both (tg_promote_types), except that a 0-dim operand counts only when its
 * category (int < float) is higher than the other's: F32[3] + F64 0-dim -> F32,
 * I64[3] + F32 0-dim -> F32. TG_NUM_DTYPES with TG_ERR_ARGUMENT for a NULL operand. */
tg_dtype tg_result_type(const tg_tensor *a, const tg_tensor *b);

/* ---- pointwise, binary (broadcasting) ----
 * Any dtypes, promoted (tg_result_type). add, sub, mul of int64 give int64 and wrap around
 * modulo 2^64 (as PyTorch); div is true division: int64 / int64 gives F32. add_scaled
 * with int64 operands takes a whole alpha (else TG_ERR_DTYPE, as PyTorch).
 * Scalar ops: float32, float64 and int64. tg's scalar is a double: on an int64 tensor a
 * whole number s (within int64) keeps int64, like a Python int; any other s is
 * TG_ERR_DTYPE (PyTorch would promote to float: cast first with tg_to_dtype(a, TG_F32)).
 * div_scalar of int64 is true division, in F32. */
/* Generated: tg_add, tg_sub, tg_mul, tg_div and their in-place forms are defined by
 * TG_BINARY_OP in src/ops/pointwise_binary.c from src/ops/def/binary.def. */
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

/* ---- pointwise, unary ----
 * float32 and float64. int64: neg, abs, relu keep int64 (neg and abs wrap at INT64_MIN);
 * exp, log, sqrt, sigmoid, tanh, reciprocal promote to F32, as PyTorch; pow_scalar keeps
 * int64 for a whole exponent >= 0 (wrapping), gives F32 for a fractional one and refuses a
 * negative whole one (as PyTorch); elu and softplus refuse int64 (TG_ERR_DTYPE naming the
 * cast to write). */
/* Generated: these (and abs, reciprocal, softplus below), with their in-place forms, are
 * defined by TG_UNARY_OP / TG_UNARY_OP1 in src/ops/pointwise_unary.c from
 * src/ops/def/unary.def. */
tg_tensor *tg_neg(const tg_tensor *x);
tg_tensor *tg_exp(const tg_tensor *x);
tg_tensor *tg_log(const tg_tensor *x);
tg_tensor *tg_sqrt(const tg_tensor *x);
/* x^exponent as PyTorch computes it: exponent 0.5 is sqrt(x) (-0 -> -0, -inf -> NaN) and
 * -0.5 is 1/sqrt(x) (-0 -> -inf, -inf -> NaN), where C's pow gives +0, +inf, +inf, 0. The
 * gradient is exponent * x^(exponent - 1) with the same rules, and 0 for exponent 0. */
tg_tensor *tg_pow_scalar(const tg_tensor *x, double exponent);
tg_tensor *tg_sigmoid(const tg_tensor *x);
tg_tensor *tg_tanh(const tg_tensor *x);
/* The gradient passes where x > 0 or x is NaN, 0 elsewhere (PyTorch's threshold_backward). */
tg_tensor *tg_relu(const tg_tensor *x);
/* The gradient at x = NaN is NaN (PyTorch's CPU gives g or NaN depending on the length:
 * docs/conventions.md). */
tg_tensor *tg_elu(const tg_tensor *x, double alpha);

/* ---- in place: modify a, bump its version; b broadcasts to a's sizes ----
 * b may overlap a in memory (a itself, its transpose, a row of it, a shifted window): the
 * result is a (op) b with b's values from before the write, as if b were copied first (tg
 * copies it when it overlaps a other than element for element; PyTorch refuses a partial
 * overlap instead: docs/conventions.md). While gradients are recorded, a target that is a view
 * (a slice, a transpose, a select) is refused with TG_ERR_UNSUPPORTED, where PyTorch records
 * the write (CopySlices): use the out-of-place op, write into a clone, or write inside
 * tg_no_grad_begin/end (docs/conventions.md).
 * Dtypes, PyTorch's rule: the result type must be castable to a's dtype: a float result into
 * an int64 a is TG_ERR_DTYPE (int64 a with a float b, div_ of int64, exp_ of int64, ...); a
 * float32 a with a float64 or int64 b is fine (b is cast to float32 first: PyTorch computes
 * float32 + float64 in float64 and rounds once, so the last bit can differ). */
/* Generated: tg_add_ .. tg_div_ by TG_BINARY_OP (src/ops/pointwise_binary.c, from
 * src/ops/def/binary.def); tg_neg_ .. tg_elu_ by TG_UNARY_OP / TG_UNARY_OP1
 * (src/ops/pointwise_unary.c, from src/ops/def/unary.def). */
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
 * Comparisons broadcast and promote like the binary ops and give 1 where the relation
 * holds and 0 elsewhere, in the promoted dtype (tg has no bool dtype: eq of two int64
 * tensors is an int64 of 1/0, which tg_sum counts); they are not differentiable (the
 * result does not require grad). NaN compares unequal to everything, itself included. */
/* Generated: abs, reciprocal, softplus (and _) by TG_UNARY_OP in src/ops/pointwise_unary.c,
 * the comparisons by TG_BINARY_CMP in src/ops/pointwise_binary.c, from
 * src/ops/def/unary.def and src/ops/def/binary.def. */
tg_tensor *tg_abs(const tg_tensor *x);
tg_tensor *tg_reciprocal(const tg_tensor *x);
tg_status tg_abs_(tg_tensor *x);
tg_status tg_reciprocal_(tg_tensor *x);
/* log(1 + exp(x)); x itself above 20, where the gradient is exactly 1 (else sigmoid(x)),
 * as PyTorch's softplus with beta 1, threshold 20. */
tg_tensor *tg_softplus(const tg_tensor *x);
tg_status tg_softplus_(tg_tensor *x);
tg_tensor *tg_eq(const tg_tensor *a, const tg_tensor *b); /* a == b */
tg_tensor *tg_ne(const tg_tensor *a, const tg_tensor *b); /* a != b */
tg_tensor *tg_gt(const tg_tensor *a, const tg_tensor *b); /* a > b */
tg_tensor *tg_ge(const tg_tensor *a, const tg_tensor *b); /* a >= b */
tg_tensor *tg_lt(const tg_tensor *a, const tg_tensor *b); /* a < b */
tg_tensor *tg_le(const tg_tensor *a, const tg_tensor *b); /* a <= b */
/* torch.where: a where cond is nonzero, else b, elementwise. cond, a and b broadcast
 * together; cond has any dtype (tg has no bool: nonzero is true, NaN too, as in a bool
 * cast); a and b are promoted like the binary ops' operands (F32, F64 or I64 result). A
 * selection, not arithmetic: an inf or NaN in the branch not taken never reaches the
 * result. Differentiable in a and b (their gradients are where(cond, g, 0) and
 * where(cond, 0, g), summed to their sizes); cond gets none. */
tg_tensor *tg_where(const tg_tensor *cond, const tg_tensor *a, const tg_tensor *b);

/* ---- reductions ----
 * float32 and float64; int64 for sum, sum_dim, sum_to_size (an int64 sum, wrapping) and
 * max, min, max_dim, min_dim (int64 values); mean, mean_dim refuse int64 (as PyTorch). */
/* Generated: sum, mean, max, min and their _dim forms are defined by TG_REDUCE_SUM,
 * TG_REDUCE_SCALED and TG_REDUCE_SELECT in src/ops/reduce.c from src/ops/def/reduction.def
 * (tg_sum_to_size is written out). */
tg_tensor *tg_sum(const tg_tensor *x); /* all elements -> 0-dim */
tg_tensor *tg_sum_dim(const tg_tensor *x, int dim, bool keepdim);
tg_tensor *tg_mean(const tg_tensor *x);
tg_tensor *tg_mean_dim(const tg_tensor *x, int dim, bool keepdim);
/* All elements -> 0-dim. The gradient is shared evenly among the elements equal to the
 * result, or among the NaNs when the result is NaN (as PyTorch's). */
tg_tensor *tg_max(const tg_tensor *x);
/* values and (I64, non-differentiable) indices; either out pointer may be NULL. A row
 * holding NaN gives NaN at the index of its first NaN; the gradient goes to that index. */
tg_status tg_max_dim(const tg_tensor *x, int dim, bool keepdim, tg_tensor **values,
                     tg_tensor **indices);
/* The minimum, as tg_max / tg_max_dim (first index wins ties, NaN propagates). */
tg_tensor *tg_min(const tg_tensor *x);
tg_status tg_min_dim(const tg_tensor *x, int dim, bool keepdim, tg_tensor **values,
                     tg_tensor **indices);
/* Sums x down to the given (broadcast-compatible) sizes: the backward of broadcasting. */
tg_tensor *tg_sum_to_size(const tg_tensor *x, int ndim, const int64_t *sizes);

/* ---- linear algebra (issue 25, helper bmm: batched matmul, bmm, tril/triu, masked_fill);
 * strided operands go to BLAS as strides, not copies ----
 * float32 or float64, one dtype for all operands: no promotion, as PyTorch. The order in
 * which products are summed is BLAS's, not PyTorch's: F32 sums whose partial sums pass
 * FLT_MAX may stay finite in tg where PyTorch's overflow to inf, or the reverse
 * (docs/conventions.md). */
tg_tensor *tg_mm(const tg_tensor *a, const tg_tensor *b);
/* beta * input + alpha * (mat1 @ mat2); input broadcasts to [m, n]. As BLAS (and PyTorch):
 * with alpha 0 the product is not computed (inf and NaN in mat1, mat2 do not reach the
 * result), with beta 0 input is not read. The gradients are beta * g for input (g summed to
 * input's sizes), (g @ mat2^T) * alpha and (mat1^T @ g) * alpha, so alpha 0 gives 0 times
 * the product there, NaN where it is not finite, as PyTorch's. mat1 [m, 0] @ mat2 [0, n]
 * (also in tg_mm and tg_matmul) is zeros. */
tg_tensor *tg_addmm(const tg_tensor *input, const tg_tensor *mat1, const tg_tensor *mat2,
                    double beta, double alpha);
/* torch.matmul. 1-D and 2-D operands: dot, matrix @ vector, vector @ matrix, mm. Batched
 * (either operand 3-D or more): the last two dims are matrices, the dims before them batch
 * dims, which broadcast (an operand is broadcast by a stride-0 view, not copied); a 1-D a is
 * a row [1, k] and a 1-D b a column [k, 1], dropped from the result, as PyTorch. [*, m, k] @
 * [k, n] is folded into one [(*) m, k] @ [k, n] GEMM (PyTorch's rule). The gradients are
 * matmuls summed over the broadcast dims back to each operand's sizes (any order).
 * TG_ERR_SHAPE: a 0-dim operand, inner sizes that differ, batch dims that do not broadcast;
 * TG_ERR_DTYPE: operands of two dtypes (no promotion) or int64. */
tg_tensor *tg_matmul(const tg_tensor *a, const tg_tensor *b);
/* torch.bmm: a [B, m, k] @ b [B, k, n] -> [B, m, n], both 3-D with equal B (no
 * broadcasting), one floating dtype. On the CPU, batches of small GEMMs run split across the
 * thread pool and large ones thread themselves; on CUDA one strided-batched cuBLAS call. */
tg_tensor *tg_bmm(const tg_tensor *a, const tg_tensor *b);
/* torch.tril / torch.triu over the last two dims (x at least 2-D, any batch dims, any
 * dtype): the elements with j - i <= diagonal (tril) or j - i >= diagonal (triu) kept, the
 * others 0 (inf and NaN there too). The gradient is the same triangle of g. */
tg_tensor *tg_tril(const tg_tensor *x, int64_t diagonal);
tg_tensor *tg_triu(const tg_tensor *x, int64_t diagonal);
/* torch.masked_fill: x with value where mask is nonzero (any dtype; NaN counts as true, tg
 * has no bool), mask broadcast to x's sizes (TG_ERR_SHAPE otherwise); x's sizes and dtype.
 * x's gradient is g where mask is zero and 0 where it filled. */
tg_tensor *tg_masked_fill(const tg_tensor *x, const tg_tensor *mask, double value);

/* ---- shape ----
 * Any dtypes: pieces of different dtypes are cast to their promotion (as torch.cat). */
/* All tensors need the same number of dims: PyTorch's legacy rule that skips 1-D empty
 * tensors ([0]) of another rank is refused (TG_ERR_SHAPE; docs/conventions.md). */
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
/* mean((input - target)^2); input and target need equal sizes (TG_ERR_SHAPE; PyTorch
 * broadcasts them with a warning that it is likely a mistake: docs/conventions.md). */
tg_tensor *tg_mse_loss(const tg_tensor *input, const tg_tensor *target);
/* mean over rows of -log_softmax(logits)[i, target[i]]; logits [n, c], target I64 [n]. */
tg_tensor *tg_cross_entropy(const tg_tensor *logits, const tg_tensor *target);

/* ---- activations, clamp, maximum / minimum, cumsum, logsumexp (issue 25, helper
 * "pointwise") ----
 * PyTorch's semantics. F32 and F64; int64 as docs/dtypes.md says per op. All are
 * differentiable twice (and beyond). */
/* gelu(x) = x Phi(x): TG_GELU_NONE is the exact erf form x/2 (1 + erf(x / sqrt 2)),
 * TG_GELU_TANH the tanh approximation x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) that
 * GPT-2 uses (PyTorch's approximate="tanh"). int64 is refused. */
typedef enum tg_gelu_approximate { TG_GELU_NONE, TG_GELU_TANH } tg_gelu_approximate;
tg_tensor *tg_gelu(const tg_tensor *x, tg_gelu_approximate approximate);
/* silu(x) = x sigmoid(x) (swish); int64 is refused. */
tg_tensor *tg_silu(const tg_tensor *x);
tg_status tg_silu_(tg_tensor *x);
/* min(max(x, min), max) elementwise; NAN for min or max means no bound on that side (one of
 * them must be set). min > max gives max everywhere, a NaN x stays NaN. The gradient is
 * PyTorch 2.15's: g strictly between the bounds, 0 at a bound and outside. An int64 x stays
 * int64 when the bounds are whole numbers, else it is computed in F32. */
tg_tensor *tg_clamp(const tg_tensor *x, double min, double max);
/* The elementwise maximum / minimum of a and b, broadcast and promoted like tg_add; NaN
 * propagates; where a == b the gradient is split half and half between them (PyTorch's
 * rule). */
tg_tensor *tg_maximum(const tg_tensor *a, const tg_tensor *b);
tg_status tg_maximum_(tg_tensor *a, const tg_tensor *b);
tg_tensor *tg_minimum(const tg_tensor *a, const tg_tensor *b);
tg_status tg_minimum_(tg_tensor *a, const tg_tensor *b);
/* Running sums along dim (sizes kept): F32 (summed in double, as PyTorch's CPU), F64, and
 * I64, which stays I64 (wrapping). The backward is the reversed cumsum of the gradient. */
tg_tensor *tg_cumsum(const tg_tensor *x, int dim);
/* log(sum(exp(x))) over dims[0..n_dims) (n_dims 0: all dims), computed stably (shifted by
 * the maximum): a slice of all -inf gives -inf, one holding +inf gives inf, NaN propagates,
 * an empty slice gives -inf. The gradient is g softmax(x) over the dims. int64 is computed
 * in F32, as PyTorch. */
tg_tensor *tg_logsumexp(const tg_tensor *x, int n_dims, const int *dims, bool keepdim);

#ifdef __cplusplus
}
#endif
TG_API_END
#endif
