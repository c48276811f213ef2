/* The llm.c writers of llmc_io.h. */
#include "llmc_io.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int64_t gpt_llmc_padded_vocab(int64_t vocab) { return (vocab + 127) / 128 * 128; }

static tg_status io_error(const char *fn, const char *path) {
  return tg_set_error(TG_ERR_IO, "%s: cannot write '%s': %s", fn, path, strerror(errno));
}

/* t as F32 into f; rows past t's (pad_rows more) as zeros. */
static tg_status write_f32(FILE *f, const tg_tensor *t, int64_t pad_rows) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *c = tg_contiguous(tg_to_dtype(t, TG_F32));
  int64_t n = c ? tg_numel(c) : 0, row = c ? n / tg_size(c, 0) : 0;
  float *buf = calloc((size_t)(n + pad_rows * row) + 1, sizeof *buf);
  tg_status st = !c     ? tg_last_error()
                 : !buf ? tg_set_error(TG_ERR_MEMORY, "gpt_llmc_write_model: out of memory")
                        : tg_to_host_array(c, buf, sizeof *buf * (size_t)n);
  size_t count = (size_t)(n + pad_rows * row);
  if (st == TG_OK && fwrite(buf, sizeof *buf, count, f) != count) st = TG_ERR_IO;
  free(buf);
  tg_scope_end(sc);
  return st;
}

/* Each layer's linear (weight or bias) of one kind, layer after layer. */
typedef tg_linear *(*pick_linear)(const gpt_block *b);
static tg_linear *c_attn(const gpt_block *b) { return b->c_attn; }
static tg_linear *attn_proj(const gpt_block *b) { return b->attn_proj; }
static tg_linear *c_fc(const gpt_block *b) { return b->c_fc; }
static tg_linear *mlp_proj(const gpt_block *b) { return b->mlp_proj; }

/* Each layer's layer norm parameter ("weight" or "bias") of ln_1 (first) or ln_2. */
static tg_status write_ln(FILE *f, const gpt_model *m, int second, const char *what) {
  tg_status st = TG_OK;
  for (int64_t i = 0; i < m->config.layers && st == TG_OK; i++) {
    const gpt_block *b = &m->blocks[i];
    st = write_f32(f, tg_module_find(second ? b->ln_2 : b->ln_1, what), 0);
  }
  return st;
}

static tg_status write_linears(FILE *f, const gpt_model *m, pick_linear pick, int bias) {
  tg_status st = TG_OK;
  for (int64_t i = 0; i < m->config.layers && st == TG_OK; i++) {
    tg_linear *l = pick(&m->blocks[i]);
    st = write_f32(f, bias ? tg_linear_bias(l) : tg_linear_weight(l), 0);
  }
  return st;
}

tg_status gpt_llmc_write_model(const char *path, const gpt_model *m) {
  const gpt_config *c = &m->config;
  int64_t vp = gpt_llmc_padded_vocab(c->vocab);
  if (vp > INT32_MAX || c->max_seq > INT32_MAX || c->channels > INT32_MAX ||
      c->layers > INT32_MAX || c->heads > INT32_MAX)
    return tg_set_error(TG_ERR_ARGUMENT,
                        "gpt_llmc_write_model: padded vocab %lld or another size does not fit "
                        "llm.c's int32 header",
                        (long long)vp);
  int32_t header[GPT_LLMC_HEADER_INTS] = {
      GPT_LLMC_MODEL_MAGIC, GPT_LLMC_MODEL_VERSION, (int32_t)c->max_seq,  (int32_t)c->vocab,
      (int32_t)c->layers,   (int32_t)c->heads,      (int32_t)c->channels, (int32_t)vp};
  FILE *f = fopen(path, "wb");
  if (!f) return io_error("gpt_llmc_write_model", path);
  tg_status st = fwrite(header, sizeof header, 1, f) == 1 ? TG_OK : TG_ERR_IO;
  if (st == TG_OK) st = write_f32(f, tg_embedding_layer_weight(m->wte), vp - c->vocab);
  if (st == TG_OK) st = write_f32(f, tg_embedding_layer_weight(m->wpe), 0);
  if (st == TG_OK) st = write_ln(f, m, 0, "weight");
  if (st == TG_OK) st = write_ln(f, m, 0, "bias");
  const pick_linear attn[2] = {c_attn, attn_proj};
  for (int i = 0; i < 2 && st == TG_OK; i++) {
    st = write_linears(f, m, attn[i], 0);
    if (st == TG_OK) st = write_linears(f, m, attn[i], 1);
  }
  if (st == TG_OK) st = write_ln(f, m, 1, "weight");
  if (st == TG_OK) st = write_ln(f, m, 1, "bias");
  const pick_linear mlp[2] = {c_fc, mlp_proj};
  for (int i = 0; i < 2 && st == TG_OK; i++) {
    st = write_linears(f, m, mlp[i], 0);
    if (st == TG_OK) st = write_linears(f, m, mlp[i], 1);
  }
  if (st == TG_OK) st = write_f32(f, tg_module_find(m->ln_f, "weight"), 0);
  if (st == TG_OK) st = write_f32(f, tg_module_find(m->ln_f, "bias"), 0);
  if (fclose(f) != 0 && st == TG_OK) st = TG_ERR_IO;
  if (st == TG_ERR_IO) io_error("gpt_llmc_write_model", path);
  return st;
}

tg_status gpt_llmc_write_tokens(const char *path, const int64_t *tokens, int64_t n) {
  if (n < 1 || n > INT32_MAX)
    return tg_set_error(TG_ERR_ARGUMENT,
                        "gpt_llmc_write_tokens: %lld tokens: llm.c's header holds 1 to %d",
                        (long long)n, INT32_MAX);
  uint16_t *buf = malloc(sizeof *buf * (size_t)n);
  if (!buf) return tg_set_error(TG_ERR_MEMORY, "gpt_llmc_write_tokens: out of memory");
  for (int64_t i = 0; i < n; i++) {
    if (tokens[i] < 0 || tokens[i] > UINT16_MAX) {
      free(buf);
      return tg_set_error(TG_ERR_ARGUMENT,
                          "gpt_llmc_write_tokens: token %lld is %lld: llm.c stores uint16 (0 to "
                          "65535)",
                          (long long)i, (long long)tokens[i]);
    }
    buf[i] = (uint16_t)tokens[i];
  }
  int32_t header[GPT_LLMC_HEADER_INTS] = {GPT_LLMC_TOKENS_MAGIC, GPT_LLMC_TOKENS_VERSION,
                                          (int32_t)n};
  FILE *f = fopen(path, "wb");
  int ok = f && fwrite(header, sizeof header, 1, f) == 1 &&
           fwrite(buf, sizeof *buf, (size_t)n, f) == (size_t)n;
  if (f && fclose(f) != 0) ok = 0;
  free(buf);
  return ok ? TG_OK : io_error("gpt_llmc_write_tokens", path);
}
