/* libFuzzer target: tg_npy_parse on the input. A refusal must be a clean error (a format,
 * dtype or unsupported-rank code, or out of memory, with a message naming tg_npy_parse); a
 * tensor must be a contiguous CPU tensor without grad whose bytes fit in the input. Then
 * serialize it and parse that again: the same dtype, sizes and element bits; serializing
 * the second tensor gives the same bytes (tg's output is a fixed point). No object may be
 * alive after each input. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tg/tg.h"

static void check(bool ok, const char *what) {
  if (ok) return;
  fprintf(stderr, "fuzz_npy: %s (error: %s)\n", what, tg_last_error_message());
  abort();
}

static bool same_tensor(const tg_tensor *a, const tg_tensor *b) {
  if (tg_tensor_dtype(a) != tg_tensor_dtype(b) || tg_ndim(a) != tg_ndim(b)) return false;
  for (int d = 0; d < tg_ndim(a); d++)
    if (tg_size(a, d) != tg_size(b, d)) return false;
  size_t bytes = (size_t)tg_numel(a) * tg_dtype_size(tg_tensor_dtype(a));
  return bytes == 0 || memcmp(tg_data_ptr(a), tg_data_ptr(b), bytes) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  int64_t live = tg_live_objects();
  tg_clear_error();
  tg_scope sc = tg_scope_begin();
  tg_tensor *t = tg_npy_parse(data, size);
  if (!t) {
    tg_status st = tg_last_error();
    check(st == TG_ERR_FORMAT || st == TG_ERR_DTYPE || st == TG_ERR_UNSUPPORTED ||
              st == TG_ERR_MEMORY,
          "a refusal with an unexpected code");
    check(strncmp(tg_last_error_message(), "tg_npy_parse: ", 14) == 0,
          "a message that does not name tg_npy_parse");
  } else {
    check(tg_last_error() == TG_OK, "a success with an error pending");
    check(tg_tensor_device(t).type == TG_CPU && tg_is_contiguous(t) && !tg_requires_grad(t),
          "not a contiguous CPU tensor without grad");
    check((size_t)tg_numel(t) * tg_dtype_size(tg_tensor_dtype(t)) <= size,
          "more bytes than the input");
    size_t n1 = 0, n2 = 0;
    void *first = tg_npy_serialize(t, &n1);
    check(first != NULL, "cannot serialize what was parsed");
    tg_tensor *u = tg_npy_parse(first, n1);
    check(u != NULL, "cannot parse what was serialized");
    check(same_tensor(t, u), "the round trip changed the tensor");
    void *second = tg_npy_serialize(u, &n2);
    check(second != NULL && n1 == n2 && memcmp(first, second, n1) == 0,
          "serializing twice gave different bytes");
    free(first);
    free(second);
  }
  tg_clear_error();
  tg_scope_end(sc);
  check(tg_live_objects() == live, "objects alive after the input");
  return 0;
}
