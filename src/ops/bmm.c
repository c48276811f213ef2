/* The batched matrix product (op "bmm"): tg_bmm, and the batched half of tg_matmul
 * (src/ops/matmul.c). a [*, m, k] @ b [*, k, n] over equal batch dims; the device's kernel
 * (bmm.gemm) runs its GEMM per batch entry on the operands' own strides, so a transposed
 * view or a batch dim expanded to stride 0 (matmul's broadcasting) is never copied here.
 * Backward is bmm again on transposed views, so every order of derivative works. */
#include "ops/backend.h"
#include "ops/linalg_internal.h"
#include "ops/registry.h"
#include "tensor/tensor_impl.h"
#include "tg/ops.h"

/* Context int slots: whether a's (b's) matrices are column-major. */
enum { A_COLUMN_MAJOR = 0, B_COLUMN_MAJOR = 1 };

/* Gradients come back in their operand's layout, as mm's do (linalg.c): the gradient of
 * k^T in attention's q @ k^T then reaches k contiguous. */
static bool column_major(const tg_tensor *t) {
  const int r = t->ndim - 2, c = t->ndim - 1;
  return t->strides[r] == 1 && t->strides[c] != 1 && t->sizes[r] > 1;
}

tg_tensor *tg__bmm(const tg_tensor *a, const tg_tensor *b) {
  return tg_apply1(TG__OP(bmm), TG__IN(a, b), TG__NO_SC);
}

/* The last two dims swapped: a view. */
static tg_tensor *mT(const tg_tensor *t) { return tg_transpose(t, -2, -1); }

tg_status tg__fwd_bmm(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  const tg_tensor *a = in[0], *b = in[1];
  const int nd = a->ndim;
  int64_t sizes[TG_MAX_DIMS];
  for (int d = 0; d < nd - 1; d++) sizes[d] = a->sizes[d];
  sizes[nd - 1] = b->sizes[nd - 1];
  tg_kernel_fn gemm = tg__kernel("tg_bmm", "bmm.gemm", a->storage->device);
  tg_tensor *o =
      gemm ? tg_empty(nd, sizes, (tg_options){a->dtype, a->storage->device, false}) : NULL;
  if (!o || gemm(3, (tg_tensor *const[]){o, (tg_tensor *)a, (tg_tensor *)b}) != TG_OK)
    return tg_last_error();
  out[0] = o;
  tg_ctx_set_int(ctx, A_COLUMN_MAJOR, column_major(a));
  tg_ctx_set_int(ctx, B_COLUMN_MAJOR, column_major(b));
  /* b for d a, a for d b: an operand that needs no gradient is not held by the tape */
  if (tg_ctx_needs_input_grad(ctx, 0) &&
      tg_ctx_save_for_backward(ctx, 1, (const tg_tensor *const[]){b}) != TG_OK)
    return tg_last_error();
  if (tg_ctx_needs_input_grad(ctx, 1) &&
      tg_ctx_save_for_backward(ctx, 1, (const tg_tensor *const[]){a}) != TG_OK)
    return tg_last_error();
  return TG_OK;
}

/* d a = g @ b^T, d b = a^T @ g; for a column-major operand the transposed product is
 * computed and handed back as a view. */
tg_status tg__bwd_bmm(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  int slot = 0;
  if (tg_ctx_needs_input_grad(ctx, 0)) {
    tg_tensor *b = tg_ctx_saved(ctx, slot++);
    gi[0] = tg_ctx_int(ctx, A_COLUMN_MAJOR) ? mT(tg__bmm(b, mT(g[0]))) : tg__bmm(g[0], mT(b));
    if (!gi[0]) return tg_last_error();
  }
  if (tg_ctx_needs_input_grad(ctx, 1)) {
    tg_tensor *a = tg_ctx_saved(ctx, slot++);
    gi[1] = tg_ctx_int(ctx, B_COLUMN_MAJOR) ? mT(tg__bmm(mT(g[0]), a)) : tg__bmm(mT(a), g[0]);
    if (!gi[1]) return tg_last_error();
  }
  return TG_OK;
}

tg_tensor *tg_bmm(const tg_tensor *a, const tg_tensor *b) {
  static const char *op = "tg_bmm";
  if (!tg__check_arg(op, "a", a) || !tg__check_arg(op, "b", b) || !tg__check_ndim(op, "a", a, 3) ||
      !tg__check_ndim(op, "b", b, 3) || !tg__check_floating(op, "a", a) ||
      !tg__check_alike(op, "b", b, "a", a))
    return NULL;
  if (!tg__check(a->sizes[0] == b->sizes[0], TG_ERR_SHAPE, op,
                 "a is %s but b is %s: batch sizes differ", tg__sizes_str(a), tg__sizes_str(b)) ||
      !tg__check(a->sizes[2] == b->sizes[1], TG_ERR_SHAPE, op,
                 "a is %s but b is %s: inner sizes differ", tg__sizes_str(a), tg__sizes_str(b)))
    return NULL;
  return tg__bmm(a, b);
}
