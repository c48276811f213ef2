/* Matrix products: mm and addmm (matmul, composed from them and bmm: src/ops/matmul.c).
 *
 * Operands reach the backend's gemm with their own strides: a transposed or sliced view
 * is never copied here (the backend copies only what its BLAS cannot take). Backward is
 * written with these same ops on transposed views, so double backward works. */
#include "ops/backend.h"
#include "ops/broadcast.h"
#include "ops/registry.h"
#include "tensor/tensor_impl.h"
#include "tg/ops.h"

/* ---- argument checks (the vocabulary is tensor/check.h) ---- */

/* The inner size of a (its last dim) against b's first dim. */
static bool check_inner(const char *op, const char *a_arg, const tg_tensor *a, const char *b_arg,
                        const tg_tensor *b) {
  return tg__check(a->sizes[a->ndim - 1] == b->sizes[0], TG_ERR_SHAPE, op,
                   "%s is %s but %s is %s: inner sizes differ", a_arg, tg__sizes_str(a), b_arg,
                   tg__sizes_str(b));
}

/* a [m, k] @ b [k, n], both floating, alike and on one device; a_arg and b_arg are the
 * names the public function gives them. Arguments non-NULL. */
static bool check_product(const char *op, const char *a_arg, const tg_tensor *a, const char *b_arg,
                          const tg_tensor *b) {
  return tg__check_ndim(op, a_arg, a, 2) && tg__check_ndim(op, b_arg, b, 2) &&
         tg__check_floating(op, a_arg, a) && tg__check_alike(op, b_arg, b, a_arg, a) &&
         check_inner(op, a_arg, a, b_arg, b);
}

/* ---- shared forward/backward pieces ---- */

static tg_tensor *mm_op(const tg_tensor *mat1, const tg_tensor *mat2, double alpha) {
  return tg_apply1(TG__OP(mm), TG__IN(mat1, mat2), TG__SC(alpha));
}

/* Saves what the gradients need: mat2 for d mat1, mat1 for d mat2 (in that order), so an
 * operand that needs no gradient is not held (nor version-checked) by the tape. */
/* Context integer slots (flags, not scalars) remembering each operand's layout. */
enum { MAT1_COLUMN_MAJOR = 0, MAT2_COLUMN_MAJOR = 1 };

static bool column_major(const tg_tensor *m) {
  return m->strides[0] == 1 && m->strides[1] != 1 && m->sizes[0] > 1;
}

static tg_status save_operands(tg_ctx *ctx, int mat1_index, const tg_tensor *mat1,
                               const tg_tensor *mat2) {
  /* Gradients come back in their operand's layout, as ATen does: the grad of a transposed
   * weight view then reaches the weight contiguous, and accumulating it stays a plain add. */
  tg_ctx_set_int(ctx, MAT1_COLUMN_MAJOR, column_major(mat1));
  tg_ctx_set_int(ctx, MAT2_COLUMN_MAJOR, column_major(mat2));
  if (tg_ctx_needs_input_grad(ctx, mat1_index) &&
      tg_ctx_save_for_backward(ctx, 1, (const tg_tensor *const[]){mat2}) != TG_OK)
    return tg_last_error();
  if (tg_ctx_needs_input_grad(ctx, mat1_index + 1) &&
      tg_ctx_save_for_backward(ctx, 1, (const tg_tensor *const[]){mat1}) != TG_OK)
    return tg_last_error();
  return TG_OK;
}

/* The product scaled by alpha; alpha +-0 as PyTorch's backward does it, the product times
 * alpha (NaN where it is not finite, signed zeros elsewhere), where a gemm with alpha 0
 * would skip the product. */
static tg_tensor *grad_product(const tg_tensor *a, const tg_tensor *b, double alpha) {
  return alpha == 0 ? tg_mul_scalar(mm_op(a, b, 1.0), alpha) : mm_op(a, b, alpha);
}

/* d mat1 = alpha * g @ mat2^T, d mat2 = alpha * mat1^T @ g, on transposed views; for a
 * column-major operand the transposed product is computed and handed back as a view. */
static tg_status operand_grads(tg_ctx *ctx, int mat1_index, const tg_tensor *g, double alpha,
                               tg_tensor **gi) {
  int slot = 0;
  if (tg_ctx_needs_input_grad(ctx, mat1_index)) {
    tg_tensor *mat2 = tg_ctx_saved(ctx, slot++);
    gi[mat1_index] = tg_ctx_int(ctx, MAT1_COLUMN_MAJOR) != 0
                         ? tg_t(grad_product(mat2, tg_t(g), alpha))
                         : grad_product(g, tg_t(mat2), alpha);
    if (!gi[mat1_index]) return tg_last_error();
  }
  if (tg_ctx_needs_input_grad(ctx, mat1_index + 1)) {
    tg_tensor *mat1 = tg_ctx_saved(ctx, slot++);
    gi[mat1_index + 1] = tg_ctx_int(ctx, MAT2_COLUMN_MAJOR) != 0
                             ? tg_t(grad_product(tg_t(g), mat1, alpha))
                             : grad_product(tg_t(mat1), g, alpha);
    if (!gi[mat1_index + 1]) return tg_last_error();
  }
  return TG_OK;
}

static tg_tensor *product_output(const tg_tensor *mat1, const tg_tensor *mat2) {
  return tg_empty(2, (const int64_t[]){mat1->sizes[0], mat2->sizes[1]},
                  (tg_options){mat1->dtype, mat1->storage->device, false});
}

/* ---- mm ---- */

tg_status tg__fwd_mm(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  const tg_tensor *mat1 = in[0], *mat2 = in[1];
  const tg_backend *be = tg__backend("tg_mm", mat1->storage->device);
  tg_tensor *o = be ? product_output(mat1, mat2) : NULL;
  if (!o || be->gemm(o, mat1, mat2, tg_ctx_scalar(ctx, 0), 0.0) != TG_OK ||
      save_operands(ctx, 0, mat1, mat2) != TG_OK)
    return tg_last_error();
  out[0] = o;
  return TG_OK;
}

tg_status tg__bwd_mm(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  return operand_grads(ctx, 0, g[0], tg_ctx_scalar(ctx, 0), gi);
}

tg_tensor *tg_mm(const tg_tensor *a, const tg_tensor *b) {
  if (!tg__check_arg("tg_mm", "a", a) || !tg__check_arg("tg_mm", "b", b) ||
      !check_product("tg_mm", "a", a, "b", b))
    return NULL;
  return mm_op(a, b, 1.0);
}

/* ---- addmm ---- */

tg_status tg__fwd_addmm(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  const tg_tensor *input = in[0], *mat1 = in[1], *mat2 = in[2];
  double beta = tg_ctx_scalar(ctx, 0), alpha = tg_ctx_scalar(ctx, 1);
  const tg_backend *be = tg__backend("tg_addmm", mat1->storage->device);
  tg_tensor *o = be ? product_output(mat1, mat2) : NULL;
  if (!o) return tg_last_error();
  /* beta == 0: input is not read at all, so a NaN in it does not leak into out. */
  if (beta != 0) {
    tg_tensor *broadcast = tg_expand(input, 2, o->sizes);
    if (!broadcast || be->copy(o, broadcast) != TG_OK) return tg_last_error();
  }
  if (be->gemm(o, mat1, mat2, alpha, beta) != TG_OK || save_operands(ctx, 1, mat1, mat2) != TG_OK)
    return tg_last_error();
  out[0] = o;
  return TG_OK;
}

tg_status tg__bwd_addmm(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  double beta = tg_ctx_scalar(ctx, 0), alpha = tg_ctx_scalar(ctx, 1);
  if (tg_ctx_needs_input_grad(ctx, 0)) {
    tg_tensor *summed = tg_sum_to_size(g[0], tg_ctx_input_ndim(ctx, 0), tg_ctx_input_sizes(ctx, 0));
    gi[0] = beta == 1 ? summed : tg_mul_scalar(summed, beta);
    if (!gi[0]) return tg_last_error();
  }
  return operand_grads(ctx, 1, g[0], alpha, gi);
}

tg_tensor *tg_addmm(const tg_tensor *input, const tg_tensor *mat1, const tg_tensor *mat2,
                    double beta, double alpha) {
  static const char *op = "tg_addmm";
  if (!tg__check_arg(op, "input", input) || !tg__check_arg(op, "mat1", mat1) ||
      !tg__check_arg(op, "mat2", mat2) || !check_product(op, "mat1", mat1, "mat2", mat2) ||
      !tg__check_alike(op, "input", input, "mat1", mat1))
    return NULL;
  const int64_t out_sizes[2] = {mat1->sizes[0], mat2->sizes[1]};
  if (!tg__check(tg__broadcasts_to(input->ndim, input->sizes, 2, out_sizes), TG_ERR_SHAPE, op,
                 "input is %s but mat1 @ mat2 is %s: input does not broadcast to it",
                 tg__sizes_str(input), tg__dims_str(2, out_sizes)))
    return NULL;
  return tg_apply1(TG__OP(addmm), TG__IN(input, mat1, mat2), TG__SC(beta, alpha));
}
