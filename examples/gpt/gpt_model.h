/* GPT-2 as llm.c's train_gpt2.c has it, in a file of its own so that the agreement tests
 * (tests/extra/gpt_*.c, bench/gpt_torch.py) run this very code:
 *
 *   tokens [B, T] -> wte[tokens] + wpe[0..T-1]
 *   L blocks:  x += attn_proj(causal_attention(qkv(ln_1(x))))       (H heads of C/H)
 *              x += mlp_proj(gelu_tanh(fc(ln_2(x))))                (C -> 4C -> C)
 *   ln_f -> logits = x @ wte^T (the LM head is tied to the token embedding)
 *
 * The state has the names of llm.c's train_gpt2.py without its "transformer." prefix:
 * wte.weight, wpe.weight, h.<i>.ln_1.{weight,bias}, h.<i>.attn.c_attn.{weight,bias},
 * h.<i>.attn.c_proj.*, h.<i>.ln_2.*, h.<i>.mlp.c_fc.*, h.<i>.mlp.c_proj.*, ln_f.*; linear
 * weights are [out, in]. Initialized as train_gpt2.py does: every weight normal(0, 0.02),
 * the two residual projections (attn.c_proj, mlp.c_proj) normal(0, 0.02 / sqrt(2 L)),
 * biases 0, layer norms weight 1 and bias 0 (eps 1e-5). Built on tg's public API only. */
#ifndef GPT_MODEL_H
#define GPT_MODEL_H

#include "tg/tg.h"

typedef struct gpt_config {
  int64_t layers, heads, channels; /* channels divisible by heads */
  int64_t vocab;                   /* token ids are in [0, vocab) */
  int64_t max_seq;                 /* rows of wpe: the longest sequence the model takes */
} gpt_config;

/* The causal self-attention: tg_scaled_dot_product_attention (fused: tiles, its own
 * backward, keeps no T x T matrix) or tg_attention_composed (matmul, mask, softmax, matmul). */
typedef enum gpt_attention_impl { GPT_ATTENTION_FUSED, GPT_ATTENTION_COMPOSED } gpt_attention_impl;

typedef struct gpt_block {
  tg_module *ln_1, *ln_2; /* borrowed from the model's module */
  tg_linear *c_attn, *attn_proj, *c_fc, *mlp_proj;
} gpt_block;

typedef struct gpt_model {
  tg_module *module; /* owns everything below */
  gpt_config config;
  gpt_attention_impl attention;
  tg_dtype dtype;
  tg_embedding_layer *wte, *wpe;
  gpt_block *blocks; /* [layers] */
  tg_module *ln_f;
} gpt_model;

/* NULL (with tg's error) on bad sizes or out of memory. init: the generator the weights are
 * drawn from (NULL: the thread's default), in the order of the state's names above. */
gpt_model *gpt_model_new(gpt_config config, gpt_attention_impl attention, tg_dtype dtype,
                         tg_generator *init);
void gpt_model_free(gpt_model *m); /* NULL is a no-op */

/* The logits [B * T, vocab] of tokens [B, T] (I64, T <= max_seq), row b * T + t for the
 * token after tokens[b, t]. Scope-owned. */
tg_tensor *gpt_model_logits(gpt_model *m, const tg_tensor *tokens);

/* The mean cross entropy of the logits of tokens [B, T] against targets [B, T] (I64): the
 * training loss, as llm.c's mean_loss. Scope-owned. */
tg_tensor *gpt_model_loss(gpt_model *m, const tg_tensor *tokens, const tg_tensor *targets);

#endif
