/* The pieces of gpt_ops.h, each a call of its tg op. */
#include "gpt_ops.h"

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

tg_tensor *gpt_attention(const tg_tensor *qkv, int64_t batch, int64_t seq, int64_t heads,
                         gpt_attention_impl impl) {
  tg_tensor *q, *k, *v;
  split_heads(qkv, batch, seq, heads, &q, &k, &v);
  tg_attention_options opts = tg_attention_defaults(); /* scale 1 / sqrt(D), no dropout */
  opts.is_causal = 1;
  tg_tensor *y = impl == GPT_ATTENTION_FUSED ? tg_scaled_dot_product_attention(q, k, v, opts)
                                             : tg_attention_composed(q, k, v, opts);
  /* [B, H, T, D] -> [B, T, H, D] -> [B * T, C] */
  return tg_reshape(tg_transpose(y, 1, 2), TG_SHAPE(batch * seq, tg_size(qkv, 1) / 3));
}

tg_tensor *gpt_gelu(const tg_tensor *x) { return tg_gelu(x, TG_GELU_TANH); }

tg_optimizer *gpt_optimizer_new(const tg_module *m, double lr) {
  tg_adamw_options o = tg_adamw_defaults(); /* betas 0.9, 0.999, eps 1e-8 */
  o.lr = lr;
  o.weight_decay = 0.0;
  return tg_adamw_for(m, o);
}
