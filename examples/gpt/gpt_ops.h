/* The three pieces of train_gpt that are a dedicated tg op each, in one place: the causal
 * attention (tg/attention.h), GELU's tanh form and the optimizer (AdamW with llm.c's
 * settings, tg/optim.h). */
#ifndef GPT_OPS_H
#define GPT_OPS_H

#include "gpt_model.h"

/* Causal self-attention over qkv [B * T, 3C] (q, k, v side by side, each H heads of
 * D = C / H columns) -> [B * T, C] with the heads side by side again; scale 1 / sqrt(D).
 * Scope-owned. */
tg_tensor *gpt_attention(const tg_tensor *qkv, int64_t batch, int64_t seq, int64_t heads,
                         gpt_attention_impl impl);

/* GELU, tanh form (PyTorch's approximate='tanh', llm.c's gelu_forward):
 * 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))). Scope-owned. */
tg_tensor *gpt_gelu(const tg_tensor *x);

/* AdamW (tg_adamw_for) over every parameter of m as llm.c's CPU reference trains: betas 0.9,
 * 0.999, eps 1e-8, weight decay 0. */
tg_optimizer *gpt_optimizer_new(const tg_module *m, double lr);

#endif
