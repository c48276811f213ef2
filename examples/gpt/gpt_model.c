/* The GPT-2 of gpt_model.h. */
#include "gpt_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "gpt_ops.h"

#define LN_EPS 1e-5

static tg_tensor *forward(tg_module *module, const tg_tensor *tokens, void *user) {
  (void)module;
  return gpt_model_logits(user, tokens);
}

/* Adds child to parent as name (parent owns it then); frees child if that fails. */
static tg_status adopt(tg_module *parent, const char *name, tg_module *child) {
  if (!child) return tg_last_error();
  tg_status st = tg_module_add_child(parent, name, child);
  if (st != TG_OK) tg_module_free(child);
  return st;
}

/* A new empty module "name" under parent (NULL with the error). */
static tg_module *add_container(tg_module *parent, const char *name) {
  tg_module *child = tg_module_new("container");
  return adopt(parent, name, child) == TG_OK ? child : NULL;
}

/* A linear layer in -> out under parent as name, weight normal(0, std), bias 0. */
static tg_linear *add_linear(tg_module *parent, const char *name, int64_t in, int64_t out,
                             double std, tg_options o, tg_generator *init) {
  tg_linear *l = tg_linear_new(in, out, true, o, init);
  if (!l) return NULL;
  tg_status st = tg_init_normal_(tg_linear_weight(l), 0.0, std, init);
  if (st == TG_OK) st = tg_init_zeros_(tg_linear_bias(l));
  if (st != TG_OK) {
    tg_linear_free(l);
    return NULL;
  }
  return adopt(parent, name, tg_linear_module(l)) == TG_OK ? l : NULL;
}

static tg_embedding_layer *add_embedding(tg_module *parent, const char *name, int64_t n,
                                         int64_t dim, tg_options o, tg_generator *init) {
  tg_embedding_layer *e = tg_embedding_layer_new(n, dim, o, init);
  if (!e) return NULL;
  if (tg_init_normal_(tg_embedding_layer_weight(e), 0.0, 0.02, init) != TG_OK) {
    tg_embedding_layer_free(e);
    return NULL;
  }
  return adopt(parent, name, tg_embedding_layer_module(e)) == TG_OK ? e : NULL;
}

static tg_module *add_layer_norm(tg_module *parent, const char *name, int64_t channels,
                                 tg_options o) {
  tg_module *ln = tg_layer_norm_layer_new(1, &channels, LN_EPS, true, o);
  return adopt(parent, name, ln) == TG_OK ? ln : NULL;
}

/* h.<i>: ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj, drawn in that order. */
static tg_status add_block(gpt_model *m, tg_module *h, int64_t i, tg_options o,
                           tg_generator *init) {
  const int64_t C = m->config.channels;
  const double proj_std = 0.02 / sqrt(2.0 * (double)m->config.layers);
  char name[24];
  snprintf(name, sizeof name, "%lld", (long long)i);
  gpt_block *b = &m->blocks[i];
  tg_module *block = add_container(h, name);
  tg_module *attn = block ? add_container(block, "attn") : NULL;
  tg_module *mlp = attn ? add_container(block, "mlp") : NULL;
  if (!mlp) return tg_last_error();
  if (!(b->ln_1 = add_layer_norm(block, "ln_1", C, o)) ||
      !(b->c_attn = add_linear(attn, "c_attn", C, 3 * C, 0.02, o, init)) ||
      !(b->attn_proj = add_linear(attn, "c_proj", C, C, proj_std, o, init)) ||
      !(b->ln_2 = add_layer_norm(block, "ln_2", C, o)) ||
      !(b->c_fc = add_linear(mlp, "c_fc", C, 4 * C, 0.02, o, init)) ||
      !(b->mlp_proj = add_linear(mlp, "c_proj", 4 * C, C, proj_std, o, init)))
    return tg_last_error();
  return TG_OK;
}

gpt_model *gpt_model_new(gpt_config c, gpt_attention_impl attention, tg_dtype dtype,
                         tg_generator *init) {
  if (c.layers < 1 || c.heads < 1 || c.channels < 1 || c.channels % c.heads || c.vocab < 1 ||
      c.max_seq < 1) {
    tg_set_error(TG_ERR_ARGUMENT,
                 "gpt_model_new: layers %lld, heads %lld, channels %lld, vocab %lld, max_seq "
                 "%lld: all positive, channels a multiple of heads",
                 (long long)c.layers, (long long)c.heads, (long long)c.channels, (long long)c.vocab,
                 (long long)c.max_seq);
    return NULL;
  }
  gpt_model *m = calloc(1, sizeof *m);
  gpt_block *blocks = calloc((size_t)c.layers, sizeof *blocks);
  if (!m || !blocks) {
    free(m);
    free(blocks);
    tg_set_error(TG_ERR_MEMORY, "gpt_model_new: out of memory");
    return NULL;
  }
  *m = (gpt_model){.config = c, .attention = attention, .dtype = dtype, .blocks = blocks};
  tg_options o = {.dtype = dtype};
  m->module = tg_module_new("gpt");
  tg_status st = m->module ? tg_module_set_forward(m->module, forward, m) : tg_last_error();
  if (st == TG_OK && (!(m->wte = add_embedding(m->module, "wte", c.vocab, c.channels, o, init)) ||
                      !(m->wpe = add_embedding(m->module, "wpe", c.max_seq, c.channels, o, init))))
    st = tg_last_error();
  tg_module *h = st == TG_OK ? add_container(m->module, "h") : NULL;
  if (st == TG_OK && !h) st = tg_last_error();
  for (int64_t i = 0; i < c.layers && st == TG_OK; i++) st = add_block(m, h, i, o, init);
  if (st == TG_OK && !(m->ln_f = add_layer_norm(m->module, "ln_f", c.channels, o)))
    st = tg_last_error();
  if (st != TG_OK) {
    gpt_model_free(m);
    return NULL;
  }
  return m;
}

void gpt_model_free(gpt_model *m) {
  if (!m) return;
  tg_module_free(m->module);
  free(m->blocks);
  free(m);
}

/* One block on the residual stream x [B * T, C]. */
static tg_tensor *block_forward(gpt_model *m, const gpt_block *b, tg_tensor *x, int64_t batch,
                                int64_t seq) {
  tg_tensor *qkv = tg_linear_forward(b->c_attn, tg_module_forward(b->ln_1, x));
  tg_tensor *y = gpt_attention(qkv, batch, seq, m->config.heads, m->attention);
  x = tg_add(x, tg_linear_forward(b->attn_proj, y));
  tg_tensor *hidden = gpt_gelu(tg_linear_forward(b->c_fc, tg_module_forward(b->ln_2, x)));
  return tg_add(x, tg_linear_forward(b->mlp_proj, hidden));
}

tg_tensor *gpt_model_logits(gpt_model *m, const tg_tensor *tokens) {
  if (!tokens) return NULL;
  const gpt_config *c = &m->config;
  if (tg_ndim(tokens) != 2 || tg_size(tokens, 1) < 1 || tg_size(tokens, 1) > c->max_seq) {
    tg_set_error(TG_ERR_SHAPE,
                 "gpt_model_logits: tokens must be [B, T] with 1 <= T <= max_seq %lld (got %d "
                 "dims, T %lld)",
                 (long long)c->max_seq, tg_ndim(tokens),
                 (long long)(tg_ndim(tokens) == 2 ? tg_size(tokens, 1) : -1));
    return NULL;
  }
  int64_t B = tg_size(tokens, 0), T = tg_size(tokens, 1);
  /* positions where the model is (tokens too: a CPU batch of a CUDA model is copied over) */
  const tg_device device = tg_tensor_device(tg_embedding_layer_weight(m->wte));
  tokens = tg_to_device(tokens, device);
  tg_tensor *pos = tg_arange(0, (double)T, 1, (tg_options){.dtype = TG_I64, .device = device});
  tg_tensor *x = tg_add(tg_embedding_layer_forward(m->wte, tokens),
                        tg_embedding_layer_forward(m->wpe, pos)); /* [B, T, C] */
  x = tg_reshape(x, TG_SHAPE(B * T, c->channels));
  for (int64_t i = 0; i < c->layers; i++) x = block_forward(m, &m->blocks[i], x, B, T);
  x = tg_module_forward(m->ln_f, x);
  return tg_mm(x, tg_t(tg_embedding_layer_weight(m->wte)));
}

tg_tensor *gpt_model_loss(gpt_model *m, const tg_tensor *tokens, const tg_tensor *targets) {
  tg_tensor *logits = gpt_model_logits(m, tokens);
  if (!logits || !targets) return NULL;
  targets = tg_to_device(targets, tg_tensor_device(logits));
  return tg_cross_entropy(logits, tg_reshape(targets, TG_SHAPE(tg_numel(targets))));
}
