/* The tokens of gpt_data.h. */
#include "gpt_data.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void split(gpt_data *d) { d->n_train = d->n - d->n / 10; }

tg_status gpt_data_read_text(const char *path, gpt_data *d) {
  *d = (gpt_data){.unigram = NAN};
  FILE *f = fopen(path, "rb");
  if (!f) return tg_set_error(TG_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
  size_t cap = 1 << 16, n = 0, got;
  unsigned char *bytes = malloc(cap);
  while (bytes && (got = fread(bytes + n, 1, cap - n, f)) > 0) {
    n += got;
    if (n == cap) {
      unsigned char *bigger = realloc(bytes, cap *= 2);
      if (!bigger) free(bytes);
      bytes = bigger;
    }
  }
  int read_error = ferror(f);
  fclose(f);
  if (!bytes || read_error) {
    free(bytes);
    return read_error ? tg_set_error(TG_ERR_IO, "cannot read '%s'", path)
                      : tg_set_error(TG_ERR_MEMORY, "out of memory reading '%s'", path);
  }
  d->tokens = malloc(sizeof *d->tokens * (n ? n : 1));
  if (!d->tokens) {
    free(bytes);
    return tg_set_error(TG_ERR_MEMORY, "out of memory for the tokens of '%s'", path);
  }
  int64_t count[256] = {0};
  for (size_t i = 0; i < n; i++) count[bytes[i]]++, d->tokens[i] = bytes[i];
  free(bytes);
  d->n = (int64_t)n;
  d->unigram = 0;
  for (int b = 0; b < 256; b++)
    if (count[b]) {
      double p = (double)count[b] / (double)n;
      d->unigram -= p * log(p);
    }
  split(d);
  return TG_OK;
}

tg_status gpt_data_random(int64_t n, int64_t vocab, uint64_t seed, gpt_data *d) {
  *d = (gpt_data){.unigram = NAN};
  d->tokens = malloc(sizeof *d->tokens * (size_t)(n > 0 ? n : 1));
  double *u = malloc(sizeof *u * (size_t)(n > 0 ? n : 1));
  tg_generator *g = tg_generator_new(seed);
  tg_scope sc = tg_scope_begin();
  tg_tensor *draw =
      d->tokens && u && g ? tg_rand(TG_SHAPE(n), (tg_options){.dtype = TG_F64}, g) : NULL;
  tg_status st = !d->tokens || !u || !g ? tg_set_error(TG_ERR_MEMORY,
                                                       "out of memory for %lld "
                                                       "random tokens",
                                                       (long long)n)
                 : draw                 ? tg_to_host_array(draw, u, sizeof *u * (size_t)n)
                                        : tg_last_error();
  tg_scope_end(sc);
  tg_generator_free(g);
  for (int64_t i = 0; i < n && st == TG_OK; i++) {
    int64_t t = (int64_t)(u[i] * (double)vocab);
    d->tokens[i] = t < vocab ? t : vocab - 1;
  }
  free(u);
  d->n = n;
  split(d);
  if (st != TG_OK) gpt_data_free(d);
  return st;
}

void gpt_data_free(gpt_data *d) {
  free(d->tokens);
  d->tokens = NULL;
}

void gpt_data_windows(const gpt_data *d, const int64_t *starts, int64_t batch, int64_t seq,
                      int64_t *x, int64_t *y) {
  for (int64_t b = 0; b < batch; b++)
    for (int64_t t = 0; t < seq; t++) {
      x[b * seq + t] = d->tokens[starts[b] + t];
      y[b * seq + t] = d->tokens[starts[b] + t + 1];
    }
}

void gpt_data_sequential_starts(const gpt_data *d, int64_t step, int64_t batch, int64_t seq,
                                int64_t *starts) {
  int64_t per_batch = batch * seq, n_batches = (d->n_train - 1) / per_batch;
  int64_t first = (step % n_batches) * per_batch;
  for (int64_t b = 0; b < batch; b++) starts[b] = first + b * seq;
}
