/* examples/gpt/llmc_io.c against a reader of llm.c's formats written here from llm.c's
 * description (train_gpt2.c's gpt2_build_from_checkpoint and fill_in_parameter_sizes,
 * llmc/dataloader.h): the model file of an F32 and an F64 model reads back to the model's
 * parameters (F32-rounded) in llm.c's order, the padded vocabulary rows are 0, the token
 * file reads back to its tokens, and what llm.c cannot hold is refused with a clear error. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt/llmc_io.h"

static int failures;
#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      failures++;                                                                                  \
      printf("FAIL line %d: ", __LINE__);                                                          \
      printf(__VA_ARGS__);                                                                         \
      printf("\n");                                                                                \
    }                                                                                              \
  } while (0)

/* The whole file (NULL if it cannot be read); its size in *n. */
static unsigned char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *buf = malloc(size > 0 ? (size_t)size : 1);
  *n = buf ? fread(buf, 1, (size_t)size, f) : 0;
  fclose(f);
  return buf;
}

/* The values of the tensor named name (rows rows of it, padded with 0 to rows_padded) must
 * be the next ones in the file, as F32; advances *at. */
static void expect_tensor(const gpt_model *m, const char *name, const float *file, size_t *at,
                          int64_t rows_padded) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *t = tg_contiguous(tg_to_dtype(tg_module_find(m->module, name), TG_F32));
  CHECK(t != NULL, "%s: %s", name, tg_last_error_message());
  if (t) {
    int64_t n = tg_numel(t), row = n / tg_size(t, 0);
    float *want = calloc((size_t)(rows_padded ? rows_padded * row : n), sizeof *want);
    tg_to_host_array(t, want, sizeof *want * (size_t)n);
    int64_t total = rows_padded ? rows_padded * row : n, bad = 0;
    for (int64_t i = 0; i < total; i++) bad += memcmp(&want[i], &file[*at + (size_t)i], 4) != 0;
    CHECK(bad == 0, "%s: %lld of %lld values differ", name, (long long)bad, (long long)total);
    *at += (size_t)total;
    free(want);
  }
  tg_scope_end(sc);
}

static void check_model(tg_dtype dtype) {
  const gpt_config c = {.layers = 2, .heads = 2, .channels = 8, .vocab = 200, .max_seq = 16};
  tg_generator *g = tg_generator_new(3);
  gpt_model *m = gpt_model_new(c, GPT_ATTENTION_COMPOSED, dtype, g);
  tg_generator_free(g);
  CHECK(m != NULL, "gpt_model_new: %s", tg_last_error_message());
  if (!m) return;
  const char *path = "gpt_llmc_io_test_model.bin";
  CHECK(gpt_llmc_write_model(path, m) == TG_OK, "write: %s", tg_last_error_message());
  size_t n = 0;
  unsigned char *bytes = slurp(path, &n);
  const int32_t *h = (const int32_t *)bytes;
  const int64_t L = c.layers, C = c.channels, Vp = 256, T = c.max_seq;
  /* fill_in_parameter_sizes */
  const int64_t sizes[16] = {Vp * C,        T * C, L * C, L * C, L * 3 * C * C, L * 3 * C,
                             L * C * C,     L * C, L * C, L * C, L * 4 * C * C, L * 4 * C,
                             L * C * 4 * C, L * C, C,     C};
  size_t total = 0;
  for (int i = 0; i < 16; i++) total += (size_t)sizes[i];
  CHECK(bytes && n == 256 * 4 + total * 4, "model file: %zu bytes, want %zu", n,
        256 * 4 + total * 4);
  if (bytes && n == 256 * 4 + total * 4) {
    const int32_t want[8] = {20240326, 3, 16, 200, 2, 2, 8, 256};
    for (int i = 0; i < 256; i++)
      CHECK(h[i] == (i < 8 ? want[i] : 0), "header[%d] = %d, want %d", i, h[i],
            i < 8 ? want[i] : 0);
    const float *p = (const float *)(bytes + 256 * 4);
    size_t at = 0;
    expect_tensor(m, "wte.weight", p, &at, Vp);
    expect_tensor(m, "wpe.weight", p, &at, 0);
    const char *per_layer[12] = {"ln_1.weight",      "ln_1.bias",          "attn.c_attn.weight",
                                 "attn.c_attn.bias", "attn.c_proj.weight", "attn.c_proj.bias",
                                 "ln_2.weight",      "ln_2.bias",          "mlp.c_fc.weight",
                                 "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias"};
    for (int k = 0; k < 12; k++)
      for (int64_t l = 0; l < L; l++) {
        char name[64];
        snprintf(name, sizeof name, "h.%lld.%s", (long long)l, per_layer[k]);
        expect_tensor(m, name, p, &at, 0);
      }
    expect_tensor(m, "ln_f.weight", p, &at, 0);
    expect_tensor(m, "ln_f.bias", p, &at, 0);
    CHECK(at == total, "read %zu floats of %zu", at, total);
  }
  free(bytes);
  remove(path);
  CHECK(gpt_llmc_write_model("/nonexistent/dir/model.bin", m) == TG_ERR_IO &&
            strstr(tg_last_error_message(), "gpt_llmc_write_model: cannot write "
                                            "'/nonexistent/dir/model.bin'"),
        "unwritable path: %s", tg_last_error_message());
  gpt_model_free(m);
}

static void check_tokens(void) {
  const int64_t tokens[5] = {0, 1, 255, 50256, 65535};
  const char *path = "gpt_llmc_io_test_tokens.bin";
  CHECK(gpt_llmc_write_tokens(path, tokens, 5) == TG_OK, "write: %s", tg_last_error_message());
  size_t n = 0;
  unsigned char *bytes = slurp(path, &n);
  CHECK(bytes && n == 256 * 4 + 5 * 2, "token file: %zu bytes", n);
  if (bytes && n == 256 * 4 + 5 * 2) {
    const int32_t *h = (const int32_t *)bytes;
    CHECK(h[0] == 20240520 && h[1] == 1 && h[2] == 5, "header %d %d %d", h[0], h[1], h[2]);
    for (int i = 3; i < 256; i++) CHECK(h[i] == 0, "header[%d] = %d", i, h[i]);
    const uint16_t *t = (const uint16_t *)(bytes + 256 * 4);
    for (int i = 0; i < 5; i++) CHECK(t[i] == tokens[i], "token %d: %u", i, t[i]);
  }
  free(bytes);
  remove(path);
  const int64_t too_big[2] = {7, 65536};
  CHECK(gpt_llmc_write_tokens(path, too_big, 2) == TG_ERR_ARGUMENT &&
            strstr(tg_last_error_message(), "token 1 is 65536"),
        "65536: %s", tg_last_error_message());
  const int64_t negative[1] = {-1};
  CHECK(gpt_llmc_write_tokens(path, negative, 1) == TG_ERR_ARGUMENT, "-1: %s",
        tg_last_error_message());
  CHECK(gpt_llmc_write_tokens(path, tokens, 0) == TG_ERR_ARGUMENT &&
            strstr(tg_last_error_message(), "0 tokens"),
        "none: %s", tg_last_error_message());
  FILE *f = fopen(path, "rb");
  CHECK(f == NULL, "a refused write left %s behind", path);
  if (f) fclose(f);
  CHECK(gpt_llmc_write_tokens("/nonexistent/dir/t.bin", tokens, 5) == TG_ERR_IO, "unwritable: %s",
        tg_last_error_message());
}

int main(void) {
  check_model(TG_F32);
  check_model(TG_F64);
  check_tokens();
  CHECK(gpt_llmc_padded_vocab(50257) == 50304 && gpt_llmc_padded_vocab(256) == 256,
        "padded vocab %lld", (long long)gpt_llmc_padded_vocab(50257));
  CHECK(tg_live_objects() == 0, "%lld tg objects alive", (long long)tg_live_objects());
  if (failures) return printf("%d failures\n", failures), 1;
  printf("gpt_llmc_io_test: ok\n");
  return 0;
}
