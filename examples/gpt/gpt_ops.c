/* The pieces of gpt_ops.h, composed from tg's generic ops. */
#include "gpt_ops.h"

#include <math.h>
#include <stdlib.h>

/* [T, T]: 0 on and below the diagonal, -inf above it (added to the scores, softmax then
 * gives the future weight 0 and its gradient passes through unchanged). */
static tg_tensor *causal_mask(int64_t seq, tg_dtype dtype) {
  double *m = malloc(sizeof *m * (size_t)(seq * seq));
  if (!m) {
    tg_set_error(TG_ERR_MEMORY, "gpt_attention: out of memory for a %lldx%lld mask", (long long)seq,
                 (long long)seq);
    return NULL;
  }
  for (int64_t i = 0; i < seq; i++)
    for (int64_t j = 0; j < seq; j++) m[i * seq + j] = j > i ? -INFINITY : 0.0;
  tg_tensor *mask =
      tg_to_dtype(tg_from_data(TG_SHAPE(seq, seq), m, (tg_options){.dtype = TG_F64}), dtype);
  free(m);
  return mask;
}

/* q, k, v [B, H, T, D] of qkv [B * T, 3C]: views, no copy. */
static void split_heads(const tg_tensor *qkv, int64_t batch, int64_t seq, int64_t heads,
                        tg_tensor **q, tg_tensor **k, tg_tensor **v) {
  int64_t C = tg_size(qkv, 1) / 3;
  static const int order[5] = {2, 0, 3, 1, 4}; /* [B, T, 3, H, D] -> [3, B, H, T, D] */
  tg_tensor *x = tg_permute(tg_view(qkv, TG_SHAPE(batch, seq, 3, heads, C / heads)), 5, order);
  *q = tg_select(x, 0, 0);
  *k = tg_select(x, 0, 1);
  *v = tg_select(x, 0, 2);
}

/* softmax(q k^T / sqrt(D) + mask) v with batched matmuls over [B, H]. */
static tg_tensor *attention_composed(const tg_tensor *q, const tg_tensor *k, const tg_tensor *v) {
  int64_t seq = tg_size(q, 2), D = tg_size(q, 3);
  tg_tensor *scores = tg_mul_scalar(tg_matmul(q, tg_transpose(k, 2, 3)), 1.0 / sqrt((double)D));
  tg_tensor *p = tg_softmax(tg_add(scores, causal_mask(seq, tg_tensor_dtype(q))), 3);
  return tg_matmul(p, v);
}

tg_tensor *gpt_attention(const tg_tensor *qkv, int64_t batch, int64_t seq, int64_t heads,
                         gpt_attention_impl impl) {
  tg_tensor *q, *k, *v;
  split_heads(qkv, batch, seq, heads, &q, &k, &v);
  /* tg_scaled_dot_product_attention is not on this branch yet: both run the composed form */
  (void)impl;
  tg_tensor *y = attention_composed(q, k, v); /* [B, H, T, D] */
  return tg_reshape(tg_transpose(y, 1, 2), TG_SHAPE(batch * seq, tg_size(qkv, 1) / 3));
}

tg_tensor *gpt_gelu(const tg_tensor *x) { return tg_gelu(x, TG_GELU_TANH); }

tg_optimizer *gpt_optimizer_new(const tg_module *m, double lr) {
  tg_adamw_options o = tg_adamw_defaults(); /* betas 0.9, 0.999, eps 1e-8 */
  o.lr = lr;
  o.weight_decay = 0.0;
  return tg_adamw_for(m, o);
}
