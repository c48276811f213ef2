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

/* softmax(q k^T / sqrt(D) + mask) v for each (sequence, head), each a [T, D] slice of qkv. */
static tg_tensor *attention_composed(const tg_tensor *qkv, int64_t batch, int64_t seq,
                                     int64_t heads) {
  int64_t C = tg_size(qkv, 1) / 3, D = C / heads;
  tg_tensor *mask = causal_mask(seq, tg_tensor_dtype(qkv));
  tg_tensor **rows = malloc(sizeof *rows * (size_t)batch);
  tg_tensor **cols = malloc(sizeof *cols * (size_t)heads);
  tg_tensor *out = NULL;
  if (!rows || !cols) tg_set_error(TG_ERR_MEMORY, "gpt_attention: out of memory");
  for (int64_t b = 0; mask && rows && cols && b < batch; b++) {
    tg_tensor *x = tg_narrow(qkv, 0, b * seq, seq);
    for (int64_t h = 0; h < heads; h++) {
      tg_tensor *q = tg_narrow(x, 1, h * D, D), *k = tg_narrow(x, 1, C + h * D, D),
                *v = tg_narrow(x, 1, 2 * C + h * D, D);
      tg_tensor *scores = tg_add(tg_mul_scalar(tg_mm(q, tg_t(k)), 1.0 / sqrt((double)D)), mask);
      cols[h] = tg_mm(tg_softmax(scores, 1), v);
    }
    rows[b] = tg_cat((int)heads, (const tg_tensor *const *)cols, 1);
  }
  if (mask && rows && cols) out = tg_cat((int)batch, (const tg_tensor *const *)rows, 0);
  free(rows);
  free(cols);
  return out;
}

tg_tensor *gpt_attention(const tg_tensor *qkv, int64_t batch, int64_t seq, int64_t heads,
                         gpt_attention_impl impl) {
  /* tg_scaled_dot_product_attention is not on this branch yet: both run the composed form */
  (void)impl;
  return attention_composed(qkv, batch, seq, heads);
}

tg_tensor *gpt_gelu(const tg_tensor *x) { return tg_gelu(x, TG_GELU_TANH); }

tg_optimizer *gpt_optimizer_new(const tg_module *m, double lr) {
  return tg_adam_for(m, (tg_adam_options){.lr = lr, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8});
}
