/* tg_matmul: torch.matmul over mm (1-D and 2-D operands; src/ops/linalg.c) and bmm
 * (batched; src/ops/bmm.c), composed with views, so it has no registry entry of its own.
 *
 * A 1-D a is the row [1, k] and a 1-D b the column [k, 1], removed again from the result.
 * The batch dims (all but the last two) broadcast; an operand is broadcast by an expanded
 * view (stride 0), never materialised, and the expand's backward sums its gradient back.
 * A batched operand times a matrix is folded into one mm, as PyTorch does: [*, m, k] @
 * [k, n] is [(*) m, k] @ [k, n], one large GEMM instead of many small ones, and the
 * matrix's gradient is one GEMM instead of a batch of them summed afterwards. */
#include "ops/linalg_internal.h"
#include "tensor/tensor_impl.h"
#include "tg/autograd.h"
#include "tg/ops.h"

/* ---- checks ---- */

static bool check_operands(const char *op, const tg_tensor *a, const tg_tensor *b) {
  if (!tg__check_arg(op, "a", a) || !tg__check_arg(op, "b", b)) return false;
  if (!tg__check(a->ndim > 0 && b->ndim > 0, TG_ERR_SHAPE, op,
                 "a is %s and b is %s: both operands need at least 1 dim", tg__sizes_str(a),
                 tg__sizes_str(b)))
    return false;
  if (!tg__check_floating(op, "a", a) || !tg__check_alike(op, "b", b, "a", a)) return false;
  const int64_t k_a = a->sizes[a->ndim - 1];
  const int64_t k_b = b->ndim == 1 ? b->sizes[0] : b->sizes[b->ndim - 2];
  return tg__check(k_a == k_b, TG_ERR_SHAPE, op, "a is %s but b is %s: inner sizes differ",
                   tg__sizes_str(a), tg__sizes_str(b));
}

/* The broadcast of the batch dims of left [*, m, k] and right [*, k, n] (both >= 2-D) into
 * batch / *batch_ndim; false with TG_ERR_SHAPE naming a and b when they do not broadcast. */
static bool batch_sizes(const char *op, const tg_tensor *a, const tg_tensor *b,
                        const tg_tensor *left, const tg_tensor *right, int *batch_ndim,
                        int64_t *batch) {
  const int nl = left->ndim - 2, nr = right->ndim - 2, n = nl > nr ? nl : nr;
  for (int d = 0; d < n; d++) { /* right-aligned */
    const int dl = d - (n - nl), dr = d - (n - nr);
    const int64_t sl = dl >= 0 ? left->sizes[dl] : 1, sr = dr >= 0 ? right->sizes[dr] : 1;
    if (!tg__check(sl == sr || sl == 1 || sr == 1, TG_ERR_SHAPE, op,
                   "a is %s and b is %s: batch dims do not broadcast (%lld against %lld at batch "
                   "dim %d)",
                   tg__sizes_str(a), tg__sizes_str(b), (long long)sl, (long long)sr, d))
      return false;
    batch[d] = sl == 1 ? sr : sl;
  }
  *batch_ndim = n;
  return true;
}

/* ---- the products ---- */

/* big [*, r, k] @ small [k, c] as one mm: big's leading dims merged (a view where its strides
 * allow, else a copy), the result viewed back as [*, r, c]. */
static tg_tensor *folded(const tg_tensor *big, const tg_tensor *small) {
  const int nd = big->ndim;
  const int64_t k = big->sizes[nd - 1];
  int64_t rows = 1, sizes[TG_MAX_DIMS];
  for (int d = 0; d < nd - 1; d++) rows *= big->sizes[d], sizes[d] = big->sizes[d];
  sizes[nd - 1] = small->sizes[1];
  tg_tensor *flat = small ? tg_reshape(big, 2, (const int64_t[]){rows, k}) : NULL;
  return flat ? tg_reshape(tg_mm(flat, small), nd, sizes) : NULL;
}

/* Whether big's leading dims (all but the last) merge into one without a copy. */
static bool merges_in_place(const tg_tensor *big) {
  for (int d = 0; d + 2 < big->ndim; d++)
    if (big->sizes[d + 1] != 1 && big->strides[d] != big->strides[d + 1] * big->sizes[d + 1])
      return false;
  return true;
}

/* PyTorch's rule (should_fold): fold when the matrix operand needs its gradient (the batched
 * form would materialise a batch of its gradients), or when the batched operand merges
 * without a copy. */
static bool should_fold(const tg_tensor *big, const tg_tensor *small) {
  if (big->ndim < 3 || small->ndim != 2) return false;
  if (tg_is_grad_enabled() && tg_requires_grad(small)) return true;
  return tg__numel(big->ndim, big->sizes) == 0 || merges_in_place(big);
}

/* left [*, m, k] @ right [*, k, n], at least one of them batched. */
static tg_tensor *batched(const char *op, const tg_tensor *a, const tg_tensor *b,
                          const tg_tensor *left, const tg_tensor *right) {
  if (should_fold(left, right)) return folded(left, right);
  if (left->ndim == 2) { /* (right^T @ left^T)^T */
    tg_tensor *right_t = tg_transpose(right, -2, -1);
    if (!right_t) return NULL;
    if (should_fold(right_t, left))
      return tg_transpose(folded(right_t, tg_transpose(left, -2, -1)), -2, -1);
  }
  int nb;
  int64_t ls[TG_MAX_DIMS], rs[TG_MAX_DIMS];
  if (!batch_sizes(op, a, b, left, right, &nb, ls)) return NULL;
  if (!tg__check(nb + 2 <= TG_MAX_DIMS, TG_ERR_SHAPE, op, "a is %s and b is %s: too many dims",
                 tg__sizes_str(a), tg__sizes_str(b)))
    return NULL;
  for (int d = 0; d < nb; d++) rs[d] = ls[d];
  ls[nb] = left->sizes[left->ndim - 2], ls[nb + 1] = left->sizes[left->ndim - 1];
  rs[nb] = right->sizes[right->ndim - 2], rs[nb + 1] = right->sizes[right->ndim - 1];
  tg_tensor *l = tg_expand(left, nb + 2, ls), *r = l ? tg_expand(right, nb + 2, rs) : NULL;
  return r ? tg__bmm(l, r) : NULL;
}

tg_tensor *tg_matmul(const tg_tensor *a, const tg_tensor *b) {
  static const char *op = "tg_matmul";
  if (!check_operands(op, a, b)) return NULL;
  if (a->ndim == 2 && b->ndim == 2) return tg_mm(a, b);

  tg_scope s = tg_scope_begin(); /* the views around the product are temporaries */
  const tg_tensor *left = a->ndim == 1 ? tg_unsqueeze(a, 0) : a;
  const tg_tensor *right = b->ndim == 1 ? tg_unsqueeze(b, 1) : b;
  tg_tensor *product = !left || !right                       ? NULL
                       : left->ndim == 2 && right->ndim == 2 ? tg_mm(left, right)
                                                             : batched(op, a, b, left, right);
  if (product && a->ndim == 1 && b->ndim == 1) product = tg_reshape(product, 0, NULL); /* dot */
  if (product && a->ndim == 1 && b->ndim > 1) product = tg_squeeze(product, product->ndim - 2);
  if (product && b->ndim == 1 && a->ndim > 1) product = tg_squeeze(product, product->ndim - 1);
  tg_tensor *result = tg_scope_escape(s, product);
  tg_scope_end(s);
  return result;
}
