/* llm.c's file formats (karpathy/llm.c, train_gpt2.c), written from tg:
 *
 * Model file: 256 int32 (little-endian as the host: llm.c freads them): magic 20240326,
 * version 3 (F32, padded vocabulary), max_seq, vocab, layers, heads, channels, padded vocab
 * (vocab rounded up to a multiple of 128), the rest 0. Then the F32 parameters in llm.c's
 * order, each stacked over the layers: wte [Vp, C] (rows past vocab are 0), wpe [maxT, C],
 * ln1w, ln1b [L, C], qkvw [L, 3C, C], qkvb [L, 3C], attprojw [L, C, C], attprojb [L, C],
 * ln2w, ln2b [L, C], fcw [L, 4C, C], fcb [L, 4C], fcprojw [L, C, 4C], fcprojb [L, C],
 * lnfw, lnfb [C]. Weights are [out, in], as tg's linear layers hold them. An F64 model is
 * rounded to F32.
 *
 * Token file: 256 int32: magic 20240520, version 1, the token count, the rest 0; then the
 * tokens as uint16. */
#ifndef GPT_LLMC_IO_H
#define GPT_LLMC_IO_H

#include "gpt_model.h"

#define GPT_LLMC_MODEL_MAGIC 20240326
#define GPT_LLMC_MODEL_VERSION 3
#define GPT_LLMC_TOKENS_MAGIC 20240520
#define GPT_LLMC_TOKENS_VERSION 1
#define GPT_LLMC_HEADER_INTS 256

/* vocab rounded up to a multiple of 128, as llm.c's export pads it. */
int64_t gpt_llmc_padded_vocab(int64_t vocab);

/* TG_ERR_ARGUMENT for sizes an int32 header cannot hold, TG_ERR_IO naming path when it
 * cannot be written. */
tg_status gpt_llmc_write_model(const char *path, const gpt_model *m);

/* tokens[0..n-1], each in [0, 65535] (TG_ERR_ARGUMENT naming the first that is not), n in
 * [1, INT32_MAX]. */
tg_status gpt_llmc_write_tokens(const char *path, const int64_t *tokens, int64_t n);

#endif
