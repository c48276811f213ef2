/* The C side of tests/io/python/safetensors_interop.py:
 *   safetensors_interop_tool write PATH   writes a fixed dict (values from formulas the
 *                                         script computes too) with tg_safetensors_save
 *   safetensors_interop_tool dump PATH    reads PATH with tg_safetensors_load and prints
 *                                         each tensor and metadata item, one per line:
 *     tensor <name> <dtype> <d0,d1,...> <little-endian bytes in hex>
 *     meta <key> <value>
 * Exits 1 with tg's error message on stderr when a call fails, 2 on bad usage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tg/tg.h"

static int failed(const char *what) {
  fprintf(stderr, "safetensors_interop_tool: %s: %s (%s)\n", what, tg_last_error_message(),
          tg_status_name(tg_last_error()));
  return 1;
}

static tg_status set(tg_tensor_dict *d, const char *name, tg_tensor *t) {
  return t ? tg_tensor_dict_set(d, name, t) : tg_last_error();
}

/* The formulas must match expected_from_c() in the script. */
static int write_file(const char *path) {
  float w[12];
  double x[5], t[12];
  int64_t k[6];
  for (int i = 0; i < 12; i++) w[i] = (float)(i * 0.25 - 1);
  for (int i = 0; i < 5; i++) x[i] = 1.0 / (i + 1);
  for (int i = 0; i < 6; i++) k[i] = (i - 3) * (int64_t)1000000000000000;
  for (int i = 0; i < 12; i++) t[i] = i;
  const double s = 2.5;
  tg_tensor_dict *d = tg_tensor_dict_new();
  if (!d) return failed("tg_tensor_dict_new");
  tg_status st = set(d, "layer.weight", tg_from_data(TG_SHAPE(3, 4), w, TG_OPTS(.dtype = TG_F32)));
  if (st == TG_OK) st = set(d, "x", tg_from_data(TG_SHAPE(5), x, TG_OPTS(.dtype = TG_F64)));
  if (st == TG_OK) st = set(d, "k", tg_from_data(TG_SHAPE(2, 3), k, TG_OPTS(.dtype = TG_I64)));
  if (st == TG_OK) st = set(d, "s", tg_from_data(0, NULL, &s, TG_OPTS(.dtype = TG_F64)));
  if (st == TG_OK) st = set(d, "empty", tg_empty(TG_SHAPE(0, 4), TG_OPTS(.dtype = TG_F32)));
  /* a non-contiguous view: the transpose of arange(12).reshape(3, 4) */
  if (st == TG_OK)
    st = set(d, "t", tg_t(tg_from_data(TG_SHAPE(3, 4), t, TG_OPTS(.dtype = TG_F64))));
  if (st == TG_OK) st = tg_tensor_dict_set_meta(d, "format", "tg");
  if (st == TG_OK) st = tg_tensor_dict_set_meta(d, "note", "caf\xc3\xa9 \"quoted\"");
  if (st == TG_OK) st = tg_safetensors_save(path, d);
  tg_tensor_dict_free(d);
  return st == TG_OK ? 0 : failed("write");
}

static int dump_file(const char *path) {
  tg_tensor_dict *d = tg_safetensors_load(path);
  if (!d) return failed("dump");
  static const char *const dtype_names[] = {[TG_F32] = "F32", [TG_F64] = "F64", [TG_I64] = "I64"};
  int rc = 0;
  for (int i = 0; i < tg_tensor_dict_size(d) && rc == 0; i++) {
    const tg_tensor *t = tg_tensor_dict_at(d, i);
    printf("tensor %s %s ", tg_tensor_dict_name(d, i), dtype_names[tg_tensor_dtype(t)]);
    for (int k = 0; k < tg_ndim(t); k++) printf("%s%lld", k ? "," : "", (long long)tg_size(t, k));
    size_t n = (size_t)tg_numel(t) * tg_dtype_size(tg_tensor_dtype(t));
    unsigned char *b = malloc(n + 1);
    if (!b || tg_to_host_array(t, b, n) != TG_OK) {
      rc = failed("tg_to_host_array");
    } else {
      printf(" ");
      for (size_t j = 0; j < n; j++) printf("%02x", b[j]); /* the test host is little-endian */
      printf("\n");
    }
    free(b);
  }
  for (int i = 0; i < tg_tensor_dict_meta_size(d); i++)
    printf("meta %s %s\n", tg_tensor_dict_meta_key(d, i), tg_tensor_dict_meta_value(d, i));
  tg_tensor_dict_free(d);
  return rc;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "write") == 0) return write_file(argv[2]);
  if (argc == 3 && strcmp(argv[1], "dump") == 0) return dump_file(argv[2]);
  fprintf(stderr, "usage: safetensors_interop_tool write|dump PATH\n");
  return 2;
}
