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
#include "tensor/tensor_impl.h"
#include "tg/norm.h"
#include "tg/ops.h"
#include "tg/tensor_ops.h"

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
  tg_tensor *scores = tg_mul_scalar(tg_matmul(q, tg_transpose(k, -2, -1)), scale);
  if (scores && opts.is_causal) {
    tg_tensor *minus_inf =
        tg_full(0, NULL, -INFINITY, (tg_options){q->dtype, q->storage->device, false});
    scores = minus_inf ? tg_where(causal_keep(scores, dims.tq, dims.tk), scores, minus_inf) : NULL;
  }
  tg_tensor *p = scores ? tg_softmax(scores, -1) : NULL;
  if (p && opts.dropout_p > 0) p = tg_dropout(p, opts.dropout_p, true, opts.gen);
  tg_tensor *out = p ? tg_matmul(p, v) : NULL;
  out = tg_scope_escape(s, out);
  tg_scope_end(s);
  if (!out) tg__error_prefix(api);
  return out;
}
