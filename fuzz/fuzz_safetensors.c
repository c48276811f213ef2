/* libFuzzer target: tg_safetensors_parse on the input bytes. A refused input must leave a
 * clean error (TG_ERR_FORMAT or TG_ERR_DTYPE, or TG_ERR_MEMORY, with a message naming
 * tg_safetensors_parse, never from cJSON: the header text is checked before it) and nothing
 * alive. An accepted one must describe its bytes exactly
 * (the tensors' bytes add up to the data buffer), serialize again, parse back to the same
 * names, dtypes, shapes, bytes and metadata in the same order, and serializing that must
 * give the same bytes (the writer's output is a fixed point). Zero live objects after each
 * input. Seeds: fuzz/corpus/safetensors/ (valid files and one of each kind of damage). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tg/tg.h"

#define FAIL(...)                                                                                  \
  do {                                                                                             \
    fprintf(stderr, "fuzz_safetensors: ");                                                         \
    fprintf(stderr, __VA_ARGS__);                                                                  \
    fprintf(stderr, "\n");                                                                         \
    abort();                                                                                       \
  } while (0)

static size_t tensor_bytes(const tg_tensor *t) {
  return (size_t)tg_numel(t) * tg_dtype_size(tg_tensor_dtype(t));
}

/* The elements of t, little-endian (malloc'd). */
static unsigned char *bytes_of(const tg_tensor *t) {
  size_t n = tensor_bytes(t);
  unsigned char *b = malloc(n + 1);
  if (!b) FAIL("out of memory");
  if (tg_to_host_array(t, b, n) != TG_OK) FAIL("tg_to_host_array: %s", tg_last_error_message());
  return b;
}

static void expect_same(const tg_tensor_dict *a, const tg_tensor_dict *b) {
  if (tg_tensor_dict_size(a) != tg_tensor_dict_size(b))
    FAIL("%d tensors read back as %d", tg_tensor_dict_size(a), tg_tensor_dict_size(b));
  for (int i = 0; i < tg_tensor_dict_size(a); i++) {
    const char *name = tg_tensor_dict_name(a, i);
    if (strcmp(name, tg_tensor_dict_name(b, i)) != 0)
      FAIL("entry %d: \"%s\" read back as \"%s\"", i, name, tg_tensor_dict_name(b, i));
    const tg_tensor *x = tg_tensor_dict_at(a, i), *y = tg_tensor_dict_at(b, i);
    if (tg_tensor_dtype(x) != tg_tensor_dtype(y) || tg_ndim(x) != tg_ndim(y))
      FAIL("\"%s\": dtype or rank changed", name);
    for (int d = 0; d < tg_ndim(x); d++)
      if (tg_size(x, d) != tg_size(y, d)) FAIL("\"%s\": size of dim %d changed", name, d);
    unsigned char *p = bytes_of(x), *q = bytes_of(y);
    if (memcmp(p, q, tensor_bytes(x)) != 0) FAIL("\"%s\": elements changed", name);
    free(p);
    free(q);
  }
  if (tg_tensor_dict_meta_size(a) != tg_tensor_dict_meta_size(b)) FAIL("metadata count changed");
  for (int i = 0; i < tg_tensor_dict_meta_size(a); i++)
    if (strcmp(tg_tensor_dict_meta_key(a, i), tg_tensor_dict_meta_key(b, i)) != 0 ||
        strcmp(tg_tensor_dict_meta_value(a, i), tg_tensor_dict_meta_value(b, i)) != 0)
      FAIL("metadata item %d changed", i);
}

static void check_refusal(void) {
  tg_status st = tg_last_error();
  const char *msg = tg_last_error_message();
  if (st != TG_ERR_FORMAT && st != TG_ERR_DTYPE && st != TG_ERR_MEMORY)
    FAIL("refused with %s: %s", tg_status_name(st), msg);
  if (strncmp(msg, "tg_safetensors_parse: ", 22) != 0) FAIL("message \"%s\" lacks the name", msg);
  /* The header's text is checked before cJSON parses it: cJSON must never be the one that
   * refuses (it would mean the check is laxer than cJSON somewhere). */
  static const char cjson[] = "tg_safetensors_parse: data: cJSON ";
  if (strncmp(msg, cjson, sizeof cjson - 1) == 0) FAIL("%s", msg);
  tg_clear_error();
}

static void check_accepted(const uint8_t *data, size_t size, tg_tensor_dict *d) {
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; i--) header_len = header_len << 8 | data[i];
  size_t total = 0;
  for (int i = 0; i < tg_tensor_dict_size(d); i++) {
    const tg_tensor *t = tg_tensor_dict_at(d, i);
    if (!tg_is_contiguous(t)) FAIL("a tensor read is not contiguous");
    total += tensor_bytes(t);
  }
  if (total != size - 8 - header_len)
    FAIL("tensors of %zu bytes accepted from a %llu-byte buffer", total,
         (unsigned long long)(size - 8 - header_len));

  size_t n1 = 0, n2 = 0;
  void *once = tg_safetensors_serialize(d, &n1);
  if (!once) FAIL("serializing what was read: %s", tg_last_error_message());
  tg_tensor_dict *back = tg_safetensors_parse(once, n1);
  if (!back) FAIL("reading what was written: %s", tg_last_error_message());
  expect_same(d, back);
  void *twice = tg_safetensors_serialize(back, &n2);
  if (!twice) FAIL("serializing again: %s", tg_last_error_message());
  if (n1 != n2 || memcmp(once, twice, n1) != 0) FAIL("serializing is not a fixed point");
  free(once);
  free(twice);
  tg_tensor_dict_free(back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (tg_live_objects() != 0)
    FAIL("%lld objects alive before the run", (long long)tg_live_objects());
  tg_clear_error();
  tg_scope sc = tg_scope_begin();
  static const uint8_t empty[1];
  if (!data) data = empty; /* NULL data is an argument error, not what is fuzzed */
  tg_tensor_dict *d = tg_safetensors_parse(data, size);
  if (d)
    check_accepted(data, size, d);
  else
    check_refusal();
  tg_tensor_dict_free(d);
  tg_scope_end(sc);
  if (tg_live_objects() != 0) FAIL("%lld objects leaked", (long long)tg_live_objects());
  if (tg_last_error() != TG_OK) FAIL("an error is pending: %s", tg_last_error_message());
  return 0;
}
