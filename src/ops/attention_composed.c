/* tg_attention_composed (tg/attention.h): scaled dot-product attention from generic tg ops,
 * each recorded on the tape (twice differentiable): the reference the fused op is checked and
 * measured against. PyTorch's math path in the textbook order:
 *   s = (q @ k^T) * scale; causal: where(j <= i, s, -inf); p = softmax(s, -1);
 *   p = tg_dropout(p, dropout_p, gen); out = p @ v.
 * tg_dropout draws exactly the mask the fused op regenerates (src/ops/attention_math.h). */
#include <math.h>

#include "ops/attention_internal.h"
#include "tensor/check.h"
#include "tensor/error_impl.h"
#include "tensor/host_memory.h"
#include "tensor/tensor_impl.h"
#include "tg/norm.h"
#include "tg/ops.h"
#include "tg/tensor_ops.h"

/* a [*, m, p] @ b [*, p, n] over equal leading dims, one tg_mm per leading index: a stand-in
 * until tg_matmul takes batches (issue 25's helper "bmm"), whose result it is the moment
 * tg_matmul accepts them. Its backward slices each gradient back into a full-size zero
 * tensor (select's backward), so its cost grows with the square of the batch. */
static tg_tensor *batched_matmul(const tg_tensor *a, const tg_tensor *b) {
  if (a->ndim <= 2) return tg_matmul(a, b);
  tg_tensor *r = tg_matmul(a, b);
  if (r || tg_last_error() != TG_ERR_UNSUPPORTED) return r;
  tg_clear_error(); /* "no batched matmul" (main before issue 25): the loop below */
  const int lead = a->ndim - 2;
  int64_t n = 1, sizes[TG_MAX_DIMS];
  for (int d = 0; d < lead; d++) n *= sizes[d] = a->sizes[d];
  const int64_t m = a->sizes[lead], p = a->sizes[lead + 1], cols = b->sizes[lead + 1];
  sizes[lead] = m;
  sizes[lead + 1] = cols;
  tg_tensor *a3 = tg_reshape(a, 3, (const int64_t[]){n, m, p});
  tg_tensor *b3 = a3 ? tg_reshape(b, 3, (const int64_t[]){n, p, cols}) : NULL;
  if (!b3) return NULL;
  if (n == 0) /* an empty product that still depends on a and b */
    return tg_reshape(tg_mul_scalar(tg_add(tg_sum_dim(a3, 2, true), tg_sum_dim(b3, 1, true)), 0),
                      lead + 2, sizes);
  tg_tensor **parts = tg__host_calloc((size_t)n, sizeof *parts);
  if (!parts) return tg_set_error(TG_ERR_MEMORY, "tg_attention_composed: out of memory"), NULL;
  bool ok = true;
  for (int64_t i = 0; i < n && ok; i++)
    ok = (parts[i] = tg_mm(tg_select(a3, 0, i), tg_select(b3, 0, i))) != NULL;
  r = ok ? tg_stack((int)n, (const tg_tensor *const *)parts, 0) : NULL;
  tg__host_free(parts);
  return r ? tg_reshape(r, lead + 2, sizes) : NULL;
}

/* The causal mask [tq, tk] as 1 (j <= i, kept) and 0, in s's dtype and device. */
static tg_tensor *causal_keep(const tg_tensor *s, int64_t tq, int64_t tk) {
  const tg_options o = {s->dtype, s->storage->device, false};
  tg_tensor *rows = tg_arange(0, (double)tq, 1, o),
            *cols = rows ? tg_arange(0, (double)tk, 1, o) : NULL;
  return cols ? tg_ge(tg_reshape(rows, 2, (const int64_t[]){tq, 1}), cols) : NULL;
}

tg_tensor *tg_attention_composed(const tg_tensor *q, const tg_tensor *k, const tg_tensor *v,
                                 tg_attention_options opts) {
  static const char *const api = "tg_attention_composed";
  tg_attention_dims dims;
  double scale;
  if (!tg__attention_check(api, q, k, v, &dims) ||
      !tg__attention_options_check(api, &opts, &dims, &scale))
    return NULL;
  tg_scope s = tg_scope_begin();
  tg_tensor *scores = tg_mul_scalar(batched_matmul(q, tg_transpose(k, -2, -1)), scale);
  if (scores && opts.is_causal) {
    tg_tensor *minus_inf =
        tg_full(0, NULL, -INFINITY, (tg_options){q->dtype, q->storage->device, false});
    scores = minus_inf ? tg_where(causal_keep(scores, dims.tq, dims.tk), scores, minus_inf) : NULL;
  }
  tg_tensor *p = scores ? tg_softmax(scores, -1) : NULL;
  if (p && opts.dropout_p > 0) p = tg_dropout(p, opts.dropout_p, true, opts.gen);
  tg_tensor *out = p ? batched_matmul(p, v) : NULL;
  out = tg_scope_escape(s, out);
  tg_scope_end(s);
  if (!out) tg__error_prefix(api);
  return out;
}
