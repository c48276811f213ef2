/* tg — scaled dot-product attention (PyTorch's F.scaled_dot_product_attention), two ways:
 *
 *   scores = q @ k^T * scale           (scale 0: 1 / sqrt(D))
 *   causal: scores[i, j] = -inf for j > i (top-left aligned, as torch's is_causal: with
 *           Tq != Tk, query i sees keys 0..i, so a row never loses every key while Tk > 0)
 *   p = softmax(scores, -1); p = dropout(p, dropout_p, gen); out = p @ v
 *
 * Shapes: q [*, Tq, D], k [*, Tk, D], v [*, Tk, Dv] with the same leading dims * (PyTorch's
 * [B, H, T, D] layout, or any number of leading dims, none included); out [*, Tq, Dv]. One
 * floating dtype (F32 or F64) and one device for all three; any strides. Tk = 0 gives zeros
 * (a softmax over no keys, then a product over none). Results are scope-owned; NULL on error
 * with a status and a message naming the function, the argument and the sizes.
 *
 * Dropout draws from gen (NULL: the thread's default generator) exactly what
 * tg_dropout(p, dropout_p, true, gen) would draw for a [*, Tq, Tk] p: the same Philox stream
 * positions, so the fused op and the composed one drop the same elements for one seed, on
 * every device, and the generator advances by the same amount. Guide: docs/attention.md. */
#ifndef TG_ATTENTION_H
#define TG_ATTENTION_H

#include "tensor_ops.h"

TG_API_BEGIN
#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_attention_options {
  int is_causal;    /* nonzero: the causal mask above */
  double dropout_p; /* in [0, 1); 0: no dropout (the generator is not touched) */
  tg_generator *gen;
  double scale; /* 0: 1 / sqrt(D); else > 0 and finite */
} tg_attention_options;

/* Not causal, no dropout, the default scale, the default generator. */
tg_attention_options tg_attention_defaults(void);

/* The registered fused op "scaled_dot_product_attention" (CPU and CUDA kernels): the
 * FlashAttention scheme. Forward runs an online softmax over blocks of keys, so the
 * [Tq, Tk] scores are never materialised on the CPU; it keeps for backward q, k, v, the
 * output and each row's log-sum-exp, and backward recomputes the probabilities tile by tile
 * (dropout's mask is regenerated from the generator's state, never stored). Once
 * differentiable: a double backward through it is a TG_ERR_STATE error (use the composed
 * form for that). */
tg_tensor *tg_scaled_dot_product_attention(const tg_tensor *q, const tg_tensor *k,
                                           const tg_tensor *v, tg_attention_options opts);

/* The same computation composed of tg ops (matmul, where, softmax, tg_dropout, matmul), each
 * recorded on the tape: twice differentiable, and the reference that the fused op is checked
 * and measured against. Same arguments, errors and generator use. */
tg_tensor *tg_attention_composed(const tg_tensor *q, const tg_tensor *k, const tg_tensor *v,
                                 tg_attention_options opts);

#ifdef __cplusplus
}
#endif
TG_API_END
#endif
