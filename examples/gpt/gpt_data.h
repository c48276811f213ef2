/* train_gpt's tokens: the bytes of a text file (token = byte, so a vocabulary of 256 holds
 * them) or a stream of uniformly random ids (for vocabularies like GPT-2's 50257, where only
 * the speed matters), split into training (the first 90%) and validation (the rest). */
#ifndef GPT_DATA_H
#define GPT_DATA_H

#include "tg/tg.h"

typedef struct gpt_data {
  int64_t *tokens, n; /* the whole stream */
  int64_t n_train;    /* tokens[0, n_train) train, the rest validates */
  double unigram;     /* entropy of the token frequencies (nats/token) of a text; NAN else */
} gpt_data;

/* TG_ERR_IO naming path when it cannot be read, TG_ERR_MEMORY. */
tg_status gpt_data_read_text(const char *path, gpt_data *d);
/* n ids uniform in [0, vocab) from a generator seeded seed. */
tg_status gpt_data_random(int64_t n, int64_t vocab, uint64_t seed, gpt_data *d);
void gpt_data_free(gpt_data *d);

/* Windows [starts[b], starts[b] + T] (T + 1 tokens each) as inputs x [B * T] and targets
 * y [B * T] (shifted by one). */
void gpt_data_windows(const gpt_data *d, const int64_t *starts, int64_t batch, int64_t seq,
                      int64_t *x, int64_t *y);

/* llm.c's DataLoader without shuffling: step s reads B * T + 1 tokens from batch
 * (s mod (n_train - 1) / (B * T)) * B * T of the training tokens, sequence b starting b * T
 * into it. Fills starts[0, B). */
void gpt_data_sequential_starts(const gpt_data *d, int64_t step, int64_t batch, int64_t seq,
                                int64_t *starts);

#endif
