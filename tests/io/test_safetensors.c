/* safetensors (tg/io.h): round trips of every dtype and layout, the exact bytes written,
 * every malformed header and data layout the reader must refuse (code and message), I/O
 * errors, allocation failures in parsing, serializing, saving and loading (cJSON's own
 * allocations included), and concurrent first use of cJSON. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

#include "alloc_sweep.h"
#include "io/file_io.h"

/* ---- helpers ---- */

/* A file: the 8-byte length of header (or header_len when it is not SIZE_MAX), header, and
 * data_len bytes of data (byte i holds i). malloc'd; *len its size. */
static unsigned char *file_with_len(uint64_t header_len, const char *header, size_t data_len,
                                    size_t *len) {
  size_t h = strlen(header);
  *len = 8 + h + data_len;
  unsigned char *b = malloc(*len);
  cr_assert(b);
  for (int i = 0; i < 8; i++) b[i] = (unsigned char)(header_len >> (8 * i));
  memcpy(b + 8, header, h);
  for (size_t i = 0; i < data_len; i++) b[8 + h + i] = (unsigned char)i;
  return b;
}

static unsigned char *file_of(const char *header, size_t data_len, size_t *len) {
  return file_with_len(strlen(header), header, data_len, len);
}

/* Parses header + data_len bytes and expects failure with code and the fragments. */
#define expect_refused(header, data_len, code, ...)                                                \
  do {                                                                                             \
    size_t len_;                                                                                   \
    unsigned char *b_ = file_of((header), (data_len), &len_);                                      \
    int64_t live_ = tg_live_objects();                                                             \
    cr_assert_null(tg_safetensors_parse(b_, len_), "accepted: %s", (header));                      \
    cr_assert_eq(tg_live_objects(), live_);                                                        \
    tg_expect_error((code), "tg_safetensors_parse: data: ", ##__VA_ARGS__);                        \
    free(b_);                                                                                      \
  } while (0)

static void expect_bytes_equal(const tg_tensor *got, const tg_tensor *want) {
  cr_assert_eq(tg_tensor_dtype(got), tg_tensor_dtype(want));
  cr_assert_eq(tg_ndim(got), tg_ndim(want));
  for (int d = 0; d < tg_ndim(want); d++) cr_assert_eq(tg_size(got, d), tg_size(want, d));
  size_t n = (size_t)tg_numel(want) * tg_dtype_size(tg_tensor_dtype(want));
  unsigned char *a = malloc(n + 1), *b = malloc(n + 1);
  cr_assert_eq(tg_to_host_array(got, a, n), TG_OK);
  cr_assert_eq(tg_to_host_array(want, b, n), TG_OK);
  cr_assert(memcmp(a, b, n) == 0, "elements differ");
  free(a);
  free(b);
}

/* A dict of every kind of tensor the format holds: each dtype with its extreme values, a
 * 0-dim tensor, zero-size ones, a transposed and a strided view, and metadata. */
static tg_tensor_dict *sample_dict(void) {
  tg_tensor_dict *d = tg_tensor_dict_new();
  cr_assert(d);
  const float f32[6] = {1.5f, -0.0f, 3.4028235e38f, 1.4e-45f, -2.25f, 7};
  const double f64[4] = {3.141592653589793, -1e308, 4.9e-324, 0.1};
  const int64_t i64[4] = {INT64_MIN, -1, 0, INT64_MAX};
  const double scalar = -3.5;
  tg_tensor *a = tg_from_data(TG_SHAPE(2, 3), f32, TG_OPTS(.dtype = TG_F32));
  tg_tensor *base = tg_arange(0, 24, 1, TG_OPTS(.dtype = TG_F64));
  tg_tensor *strided = tg_slice(tg_reshape(base, TG_SHAPE(4, 6)), 1, 1, 6, 2); /* [4, 3] */
  cr_assert(a && strided);
  cr_assert_not(tg_is_contiguous(strided));
  cr_assert_eq(tg_tensor_dict_set(d, "layer.weight", a), TG_OK);
  cr_assert_eq(
      tg_tensor_dict_set(d, "f64", tg_from_data(TG_SHAPE(4), f64, TG_OPTS(.dtype = TG_F64))),
      TG_OK);
  cr_assert_eq(
      tg_tensor_dict_set(d, "i64", tg_from_data(TG_SHAPE(2, 2), i64, TG_OPTS(.dtype = TG_I64))),
      TG_OK);
  cr_assert_eq(
      tg_tensor_dict_set(d, "scalar", tg_from_data(0, NULL, &scalar, TG_OPTS(.dtype = TG_F64))),
      TG_OK);
  cr_assert_eq(tg_tensor_dict_set(d, "empty", tg_empty(TG_SHAPE(0, 3), TG_OPTS_DEFAULT)), TG_OK);
  cr_assert_eq(tg_tensor_dict_set(d, "transposed", tg_t(a)), TG_OK);
  cr_assert_eq(tg_tensor_dict_set(d, "strided", strided), TG_OK);
  cr_assert_eq(
      tg_tensor_dict_set(d, "empty_i64", tg_empty(TG_SHAPE(5, 0), TG_OPTS(.dtype = TG_I64))),
      TG_OK);
  cr_assert_eq(tg_tensor_dict_set_meta(d, "format", "pt"), TG_OK);
  cr_assert_eq(tg_tensor_dict_set_meta(d, "note", "quote \" backslash \\ tab \t \xc3\xa9"), TG_OK);
  return d;
}

static void expect_dicts_equal(const tg_tensor_dict *got, const tg_tensor_dict *want) {
  cr_assert_eq(tg_tensor_dict_size(got), tg_tensor_dict_size(want));
  for (int i = 0; i < tg_tensor_dict_size(want); i++) {
    const char *name = tg_tensor_dict_name(want, i);
    cr_assert_str_eq(tg_tensor_dict_name(got, i), name, "entry %d", i);
    expect_bytes_equal(tg_tensor_dict_at(got, i), tg_tensor_dict_at(want, i));
    cr_assert(tg_is_contiguous(tg_tensor_dict_at(got, i)));
  }
  cr_assert_eq(tg_tensor_dict_meta_size(got), tg_tensor_dict_meta_size(want));
  for (int i = 0; i < tg_tensor_dict_meta_size(want); i++) {
    cr_assert_str_eq(tg_tensor_dict_meta_key(got, i), tg_tensor_dict_meta_key(want, i));
    cr_assert_str_eq(tg_tensor_dict_meta_value(got, i), tg_tensor_dict_meta_value(want, i));
  }
}

static char tmpdir[256];
static void make_tmpdir(void) {
  const char *base = getenv("TMPDIR");
  snprintf(tmpdir, sizeof tmpdir, "%s/tg-safetensors.XXXXXX", base && base[0] ? base : "/tmp");
  cr_assert_not_null(mkdtemp(tmpdir));
}
static void remove_tmpdir(void) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  cr_assert_eq(system(cmd), 0);
}
static void path_in_tmp(char *out, size_t n, const char *name) {
  snprintf(out, n, "%s/%s", tmpdir, name);
}

static unsigned char *read_whole(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  cr_assert(f, "cannot open %s", path);
  unsigned char *b = malloc(1 << 16);
  *len = fread(b, 1, 1 << 16, f);
  fclose(f);
  return b;
}

/* ---- round trips ---- */

TG_TEST(safetensors, round_trip_every_dtype_and_layout) {
  tg_tensor_dict *d = sample_dict();
  size_t n = 0;
  void *bytes = tg_safetensors_serialize(d, &n);
  cr_assert(bytes, "%s", tg_last_error_message());
  tg_tensor_dict *back = tg_safetensors_parse(bytes, n);
  cr_assert(back, "%s", tg_last_error_message());
  expect_dicts_equal(back, d); /* data order is the dict's order */
  tg_assert_sizes(tg_tensor_dict_get(back, "strided"), 4, 3);
  cr_assert_eq(tg_ndim(tg_tensor_dict_get(back, "scalar")), 0);
  cr_assert_not(tg_requires_grad(tg_tensor_dict_get(back, "f64")));
  /* serializing what was read gives the same bytes */
  size_t n2 = 0;
  void *again = tg_safetensors_serialize(back, &n2);
  cr_assert_eq(n2, n);
  cr_assert(memcmp(again, bytes, n) == 0);
  free(again);
  free(bytes);
  tg_tensor_dict_free(back);
  tg_tensor_dict_free(d);
}

TG_TEST(safetensors, exact_layout_written) {
  tg_tensor_dict *d = tg_tensor_dict_new();
  const float v[2] = {1.0f, -2.0f};
  const int64_t w[1] = {0x0102030405060708};
  cr_assert_eq(tg_tensor_dict_set(d, "b", tg_from_data(TG_SHAPE(2), v, TG_OPTS_DEFAULT)), TG_OK);
  cr_assert_eq(
      tg_tensor_dict_set(d, "a", tg_from_data(TG_SHAPE(1, 1), w, TG_OPTS(.dtype = TG_I64))), TG_OK);
  cr_assert_eq(tg_tensor_dict_set_meta(d, "format", "pt"), TG_OK);
  size_t n = 0;
  unsigned char *b = tg_safetensors_serialize(d, &n);
  cr_assert(b);
  const char *json = "{\"__metadata__\":{\"format\":\"pt\"},"
                     "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                     "\"a\":{\"dtype\":\"I64\",\"shape\":[1,1],\"data_offsets\":[8,16]}}";
  size_t j = strlen(json), padded = (j + 7) / 8 * 8;
  cr_assert_eq(n, 8 + padded + 16);
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; i--) hlen = hlen << 8 | b[i];
  cr_assert_eq(hlen, padded);
  cr_assert(memcmp(b + 8, json, j) == 0, "header: %.*s", (int)j, (const char *)b + 8);
  for (size_t i = j; i < padded; i++) cr_assert_eq(b[8 + i], ' ');
  const unsigned char data[16] = {0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0, 8, 7, 6, 5, 4, 3, 2, 1};
  cr_assert(memcmp(b + 8 + padded, data, 16) == 0, "data is not little-endian");
  free(b);
  tg_tensor_dict_free(d);
}

TG_TEST(safetensors, empty_dict_round_trip) {
  tg_tensor_dict *d = tg_tensor_dict_new();
  size_t n = 0;
  unsigned char *b = tg_safetensors_serialize(d, &n);
  cr_assert(b);
  cr_assert_eq(n, 16);
  cr_assert(memcmp(b + 8, "{}      ", 8) == 0);
  tg_tensor_dict *back = tg_safetensors_parse(b, n);
  cr_assert(back);
  cr_assert_eq(tg_tensor_dict_size(back), 0);
  cr_assert_eq(tg_tensor_dict_meta_size(back), 0);
  tg_tensor_dict_free(back);
  tg_tensor_dict_free(d);
  free(b);
}

TG_TEST(safetensors, read_in_data_order_with_python_layout) {
  /* As Python writes it (spaces allowed, keys in any order), tensors listed out of data
   * order, zero-size ones sharing an offset. */
  const char *h = "{\"z\": {\"shape\": [0], \"dtype\": \"F64\", \"data_offsets\": [8, 8]},\n"
                  " \"b\": {\"data_offsets\": [8, 16], \"dtype\": \"F32\", \"shape\": [2]},\n"
                  " \"y\": {\"dtype\": \"I64\", \"shape\": [0, 2], \"data_offsets\": [8, 8]},\n"
                  " \"a\": {\"dtype\": \"F64\", \"shape\": [], \"data_offsets\": [0, 8]},\n"
                  " \"__metadata__\": {\"k\": \"v\"}}   ";
  size_t len;
  unsigned char *b = file_of(h, 16, &len);
  tg_tensor_dict *d = tg_safetensors_parse(b, len);
  cr_assert(d, "%s", tg_last_error_message());
  const char *order[4] = {"a", "z", "y", "b"};
  cr_assert_eq(tg_tensor_dict_size(d), 4);
  for (int i = 0; i < 4; i++) cr_assert_str_eq(tg_tensor_dict_name(d, i), order[i]);
  cr_assert_str_eq(tg_tensor_dict_get_meta(d, "k"), "v");
  double a;
  memcpy(&a, b + 8 + strlen(h), 8);
  double got;
  cr_assert_eq(tg_item(tg_tensor_dict_get(d, "a"), &got), TG_OK);
  cr_assert(memcmp(&got, &a, 8) == 0);
  tg_assert_sizes(tg_tensor_dict_get(d, "y"), 0, 2);
  tg_tensor_dict_free(d);
  free(b);
}

TG_TEST(safetensors, save_load_round_trip_and_replace) {
  make_tmpdir();
  char path[512];
  path_in_tmp(path, sizeof path, "model.safetensors");
  tg_tensor_dict *d = sample_dict();
  cr_assert_eq(tg_safetensors_save(path, d), TG_OK, "%s", tg_last_error_message());
  tg_tensor_dict *back = tg_safetensors_load(path);
  cr_assert(back, "%s", tg_last_error_message());
  expect_dicts_equal(back, d);
  tg_tensor_dict_free(back);
  /* saving again replaces the file whole */
  tg_tensor_dict *small = tg_tensor_dict_new();
  cr_assert_eq(tg_tensor_dict_set(small, "x", tg_ones(TG_SHAPE(3), TG_OPTS_DEFAULT)), TG_OK);
  cr_assert_eq(tg_safetensors_save(path, small), TG_OK);
  back = tg_safetensors_load(path);
  cr_assert(back);
  expect_dicts_equal(back, small);
  tg_tensor_dict_free(back);
  tg_tensor_dict_free(small);
  tg_tensor_dict_free(d);
  remove_tmpdir();
}

/* ---- malformed input: the header's length and text ---- */

TG_TEST(safetensors, refuses_bad_header_length) {
  size_t len;
  unsigned char *b = file_of("{}", 0, &len);
  cr_assert_null(tg_safetensors_parse(b, 5));
  tg_expect_error(TG_ERR_FORMAT, "tg_safetensors_parse: data: 5 bytes, too short");
  free(b);
  b = file_with_len(100, "{}", 6, &len);
  cr_assert_null(tg_safetensors_parse(b, len));
  tg_expect_error(TG_ERR_FORMAT, "header length 100 is beyond the end (8 bytes follow it)");
  free(b);
  b = file_with_len((uint64_t)TG_SAFETENSORS_MAX_HEADER + 1, "{}", 0, &len);
  cr_assert_null(tg_safetensors_parse(b, len));
  tg_expect_error(TG_ERR_FORMAT, "header length 104857601 is more than the 104857600 read");
  free(b);
  b = file_with_len(UINT64_MAX, "{}", 0, &len);
  cr_assert_null(tg_safetensors_parse(b, len));
  tg_expect_error(TG_ERR_FORMAT, "header length 18446744073709551615 is more than");
  free(b);
  b = file_with_len(0, "", 0, &len);
  cr_assert_null(tg_safetensors_parse(b, len));
  tg_expect_error(TG_ERR_FORMAT, "the 0-byte header does not start with '{'");
  free(b);
  cr_assert_null(tg_safetensors_parse(NULL, 8));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_safetensors_parse: data is NULL");
}

TG_TEST(safetensors, refuses_bad_header_text) {
  expect_refused("[1]", 0, TG_ERR_FORMAT, "does not start with '{'");
  expect_refused(" {}", 0, TG_ERR_FORMAT, "does not start with '{'");
  expect_refused("\xef\xbb\xbf{}", 0, TG_ERR_FORMAT, "does not start with '{'"); /* a BOM */
  expect_refused("{\"\xff\": 1}", 0, TG_ERR_FORMAT, "not valid UTF-8");
  expect_refused("{\"\xc0\xaf\": 1}", 0, TG_ERR_FORMAT, "not valid UTF-8");     /* overlong */
  expect_refused("{\"\xed\xa0\x80\": 1}", 0, TG_ERR_FORMAT, "not valid UTF-8"); /* surrogate */
  expect_refused("{\"a\":", 0, TG_ERR_FORMAT, "the header ends inside its JSON object (5 bytes)");
  expect_refused("{\"a\":{},}", 0, TG_ERR_FORMAT, "expected a name in quotes at header byte 8");
  expect_refused("{\"a\" 1}", 0, TG_ERR_FORMAT, "expected ':' at header byte 5");
  expect_refused("{\"a\":[1 2]}", 0, TG_ERR_FORMAT, "expected ',' or ']' at header byte 8");
  expect_refused("{\"a\":tru}", 0, TG_ERR_FORMAT, "unexpected 't' at header byte 5");
  expect_refused("{\"a\":\"x}", 0, TG_ERR_FORMAT, "the string at header byte 5 is not closed");
  expect_refused("{\"a\\x\":1}", 0, TG_ERR_FORMAT, "invalid escape in a string at header byte 3");
  expect_refused("{\"a\\u12g4\":1}", 0, TG_ERR_FORMAT, "invalid \\u escape at header byte 3");
  expect_refused("{\"\\ud800\":1}", 0, TG_ERR_FORMAT,
                 "unpaired surrogate \\ud800 at header byte 2");
  expect_refused("{\"\\udc00\\ud800\":1}", 0, TG_ERR_FORMAT, "unpaired surrogate \\udc00");
  expect_refused("{}x", 0, TG_ERR_FORMAT, "more after its JSON object (at byte 2 of 3)");
  expect_refused("{}{}", 0, TG_ERR_FORMAT, "more after its JSON object");
  expect_refused("{\x01}", 0, TG_ERR_FORMAT, "control character 0x01 at header byte 1");
  expect_refused("{\"a\":\x7f}", 0, TG_ERR_FORMAT, "unexpected '\x7f' at header byte 5");
  expect_refused("{\"a\tb\":1}", 0, TG_ERR_FORMAT, "control character 0x09 in a string");
  expect_refused("{\"a\\u0000b\":1}", 0, TG_ERR_FORMAT, "\\u0000 in a string at header byte 3");
  expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[+1],\"data_offsets\":[0,4]}}", 4,
                 TG_ERR_FORMAT, "unexpected '+' at header byte 29");
  expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[01],\"data_offsets\":[0,4]}}", 4,
                 TG_ERR_FORMAT, "'01' at header byte 29 is not a JSON number");
  expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1.],\"data_offsets\":[0,4]}}", 4,
                 TG_ERR_FORMAT, "'1.' at header byte 29 is not a JSON number");
  expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1.0],\"data_offsets\":[0,4]}}", 4,
                 TG_ERR_FORMAT, "'1.0' at header byte 29 is not an integer");
  expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1e0],\"data_offsets\":[0,4]}}", 4,
                 TG_ERR_FORMAT, "'1e0' at header byte 29 is not an integer");
  /* deeper than a header ever is (cJSON's own limit is 1000) */
  char deep[4200] = "{\"a\":";
  size_t at = strlen(deep);
  for (int i = 0; i < 2000; i++) deep[at++] = '[';
  for (int i = 0; i < 2000; i++) deep[at++] = ']';
  deep[at++] = '}';
  deep[at] = '\0';
  expect_refused(deep, 0, TG_ERR_FORMAT,
                 "nesting at header byte 7 is deeper than a header's 3 levels");
  expect_refused("{\"__metadata__\":{\"a\":{}}}", 0, TG_ERR_FORMAT,
                 "__metadata__ \"a\" is not a string");
}

/* ---- malformed input: the entries ---- */

#define ENTRY(name, body) "{\"" name "\":" body "}"

TG_TEST(safetensors, refuses_bad_entries) {
  expect_refused(ENTRY("a", "1"), 0, TG_ERR_FORMAT, "tensor \"a\" is not a JSON object");
  expect_refused(ENTRY("a", "[]"), 0, TG_ERR_FORMAT, "tensor \"a\" is not a JSON object");
  expect_refused(ENTRY("a", "{\"dtype\":\"F32\",\"shape\":[1]}"), 4, TG_ERR_FORMAT,
                 "tensor \"a\" has no \"data_offsets\"");
  expect_refused(ENTRY("a", "{\"shape\":[1],\"data_offsets\":[0,4]}"), 4, TG_ERR_FORMAT,
                 "tensor \"a\" has no \"dtype\"");
  expect_refused(ENTRY("a", "{\"dtype\":\"F32\",\"data_offsets\":[0,4]}"), 4, TG_ERR_FORMAT,
                 "tensor \"a\" has no \"shape\"");
  expect_refused(ENTRY("a", "{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}"), 4,
                 TG_ERR_FORMAT, "tensor \"a\": unexpected key \"x\"");
  expect_refused(
      ENTRY("a", "{\"dtype\":\"F32\",\"shape\":[1],\"dtype\":\"F32\",\"data_offsets\":[0,4]}"), 4,
      TG_ERR_FORMAT, "tensor \"a\": key \"dtype\" appears twice");
  expect_refused(ENTRY("", "{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}"), 4,
                 TG_ERR_FORMAT, "a tensor name is empty");
  char long_name[1200] = "{\"";
  memset(long_name + 2, 'n', 1025);
  strcpy(long_name + 2 + 1025, "\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}");
  expect_refused(long_name, 4, TG_ERR_FORMAT, "is 1025 bytes, more than 1024");
}

TG_TEST(safetensors, refuses_bad_dtype) {
  expect_refused(ENTRY("w", "{\"dtype\":5,\"shape\":[1],\"data_offsets\":[0,4]}"), 4, TG_ERR_FORMAT,
                 "tensor \"w\": dtype is not a string");
  expect_refused(ENTRY("w", "{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]}"), 4,
                 TG_ERR_DTYPE, "tensor \"w\" has dtype \"F16\" (tg reads F32, F64, I64)");
  expect_refused(ENTRY("w", "{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,4]}"), 4,
                 TG_ERR_DTYPE, "dtype \"BF16\"");
  expect_refused(ENTRY("w", "{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}"), 4,
                 TG_ERR_DTYPE, "dtype \"f32\"");
}

TG_TEST(safetensors, refuses_bad_shape) {
  expect_refused(ENTRY("w", "{\"dtype\":\"F32\",\"shape\":3,\"data_offsets\":[0,12]}"), 12,
                 TG_ERR_FORMAT, "tensor \"w\": shape is not an array");
  expect_refused(ENTRY("w", "{\"dtype\":\"F32\",\"shape\":[\"3\"],\"data_offsets\":[0,12]}"), 12,
                 TG_ERR_FORMAT, "tensor \"w\": shape[0] is not a number");
  expect_refused(ENTRY("w", "{\"dtype\":\"F32\",\"shape\":[1,-3],\"data_offsets\":[0,12]}"), 12,
                 TG_ERR_FORMAT, "tensor \"w\": shape[1] is -3, not an integer in [0, 2^53)");
  expect_refused(
      ENTRY("w", "{\"dtype\":\"F32\",\"shape\":[0,9007199254740992],\"data_offsets\":[0,0]}"), 0,
      TG_ERR_FORMAT, "shape[1] is 9007199254740992, not an integer");
  expect_refused(
      ENTRY("w", "{\"dtype\":\"F32\",\"shape\":[0,9007199254740993],\"data_offsets\":[0,0]}"), 0,
      TG_ERR_FORMAT, "shape[1] is 9007199254740992, not an integer");
  expect_refused(
      ENTRY("w", "{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}"), 4,
      TG_ERR_FORMAT, "tensor \"w\": shape has 9 dims, more than 8");
  expect_refused(
      ENTRY("w", "{\"dtype\":\"F32\",\"shape\":[0,4294967296,4294967296],"
                 "\"data_offsets\":[0,0]}"),
      0, TG_ERR_FORMAT,
      "tensor \"w\": shape [0, 4294967296, 4294967296] has more elements than fit int64");
  expect_refused(ENTRY("w", "{\"dtype\":\"F64\",\"shape\":[1125899906842624,1024],"
                            "\"data_offsets\":[0,8]}"),
                 8, TG_ERR_FORMAT,
                 "shape [1125899906842624, 1024] of F64 is more bytes than fit int64");
  expect_refused(ENTRY("w", "{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,16]}"), 16,
                 TG_ERR_FORMAT,
                 "tensor \"w\": shape [2, 3] of F32 is 24 bytes, "
                 "data_offsets [0, 16] hold 16");
  expect_refused(ENTRY("w", "{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[0,4]}"), 4,
                 TG_ERR_FORMAT, "shape [] of I64 is 8 bytes, data_offsets [0, 4] hold 4");
}

TG_TEST(safetensors, refuses_bad_offsets) {
  expect_refused(ENTRY("w", "{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":4}"), 4,
                 TG_ERR_FORMAT, "tensor \"w\": data_offsets is not [begin, end]");
  expect_refused(ENTRY("w", "{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4]}"), 4,
                 TG_ERR_FORMAT, "data_offsets is not [begin, end]");
  expect_refused(ENTRY("w", "{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}"), 8,
                 TG_ERR_FORMAT, "data_offsets is not [begin, end]");
  expect_refused(ENTRY("w", "{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}"), 4,
                 TG_ERR_FORMAT, "data_offsets is not [begin, end]");
  expect_refused(ENTRY("w", "{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,\"4\"]}"), 4,
                 TG_ERR_FORMAT, "data_offsets is not [begin, end]");
  expect_refused(ENTRY("w", "{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}"), 8,
                 TG_ERR_FORMAT, "tensor \"w\": data_offsets [8, 4] end before they begin");
  expect_refused(ENTRY("w", "{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}"), 4,
                 TG_ERR_FORMAT, "data_offsets [0, 8] reach beyond the 4-byte data buffer");
  expect_refused(ENTRY("w", "{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[9007199254740991,"
                            "9007199254740991]}"),
                 0, TG_ERR_FORMAT, "reach beyond the 0-byte data buffer");
}

TG_TEST(safetensors, refuses_overlaps_holes_and_duplicates) {
  const char *f32_2 = "{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":";
  char h[512];
  snprintf(h, sizeof h, "{\"a\":%s[0,8]},\"b\":%s[4,12]}}", f32_2, f32_2);
  expect_refused(h, 12, TG_ERR_FORMAT,
                 "tensor \"b\" at data_offsets [4, 12] overlaps tensor \"a\" at [0, 8]");
  snprintf(h, sizeof h, "{\"b\":%s[0,8]},\"a\":%s[0,8]}}", f32_2, f32_2);
  expect_refused(h, 8, TG_ERR_FORMAT, "tensor \"a\" at data_offsets [0, 8] overlaps tensor \"b\"");
  snprintf(h, sizeof h,
           "{\"a\":%s[0,8]},\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]}}",
           f32_2);
  expect_refused(h, 8, TG_ERR_FORMAT, "tensor \"z\" at data_offsets [4, 4] overlaps tensor \"a\"");
  snprintf(h, sizeof h, "{\"a\":%s[0,8]},\"b\":%s[12,20]}}", f32_2, f32_2);
  expect_refused(h, 20, TG_ERR_FORMAT,
                 "bytes [8, 12) of the data buffer belong to no tensor (a hole before tensor "
                 "\"b\")");
  snprintf(h, sizeof h, "{\"a\":%s[4,12]}}", f32_2);
  expect_refused(h, 12, TG_ERR_FORMAT, "bytes [0, 4) of the data buffer belong to no tensor");
  snprintf(h, sizeof h, "{\"a\":%s[0,8]}}", f32_2);
  expect_refused(h, 9, TG_ERR_FORMAT, "bytes [8, 9) of the data buffer belong to no tensor (after");
  expect_refused("{}", 1, TG_ERR_FORMAT, "bytes [0, 1) of the data buffer belong to no tensor");
  snprintf(h, sizeof h, "{\"a\":%s[0,8]},\"a\":%s[8,16]}}", f32_2, f32_2);
  expect_refused(h, 16, TG_ERR_FORMAT, "tensor \"a\" appears twice");
}

TG_TEST(safetensors, refuses_bad_metadata) {
  expect_refused("{\"__metadata__\":[]}", 0, TG_ERR_FORMAT, "__metadata__ is not a JSON object");
  expect_refused("{\"__metadata__\":{\"a\":1}}", 0, TG_ERR_FORMAT,
                 "__metadata__ \"a\" is not a string");
  expect_refused("{\"__metadata__\":{\"a\":null}}", 0, TG_ERR_FORMAT,
                 "__metadata__ \"a\" is not a string");
  expect_refused("{\"__metadata__\":{\"\":\"x\"}}", 0, TG_ERR_FORMAT, "a metadata key is empty");
  expect_refused("{\"__metadata__\":{\"a\":\"x\",\"b\":\"y\",\"a\":\"z\"}}", 0, TG_ERR_FORMAT,
                 "__metadata__ key \"a\" appears twice");
  expect_refused("{\"__metadata__\":{},\"__metadata__\":{}}", 0, TG_ERR_FORMAT,
                 "\"__metadata__\" appears twice");
}

/* ---- writing: what the file cannot hold ---- */

TG_TEST(safetensors, serialize_refuses_what_the_format_cannot_hold) {
  size_t n = 7;
  cr_assert_null(tg_safetensors_serialize(NULL, &n));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_safetensors_serialize: d is NULL");
  cr_assert_eq(n, 0);
  tg_tensor_dict *d = tg_tensor_dict_new();
  cr_assert_null(tg_safetensors_serialize(d, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_safetensors_serialize: nbytes is NULL");
  tg_tensor *x = tg_zeros(TG_SHAPE(1), TG_OPTS_DEFAULT);
  cr_assert_eq(tg_tensor_dict_set(d, "__metadata__", x), TG_OK);
  cr_assert_null(tg_safetensors_serialize(d, &n));
  tg_expect_error(TG_ERR_ARGUMENT, "a tensor is named \"__metadata__\"");
  tg_tensor_dict_free(d);

  d = tg_tensor_dict_new();
  cr_assert_eq(tg_tensor_dict_set(d, "bad\xff", x), TG_OK);
  cr_assert_null(tg_safetensors_serialize(d, &n));
  tg_expect_error(TG_ERR_ARGUMENT, "tensor 0's name is not valid UTF-8");
  tg_tensor_dict_free(d);

  d = tg_tensor_dict_new();
  cr_assert_eq(tg_tensor_dict_set_meta(d, "k", "\xc3"), TG_OK);
  cr_assert_null(tg_safetensors_serialize(d, &n));
  tg_expect_error(TG_ERR_ARGUMENT, "metadata item 0 is not valid UTF-8");
  tg_tensor_dict_free(d);

  d = tg_tensor_dict_new();
  cr_assert_eq(tg_tensor_dict_set(d, "huge", tg_expand(x, TG_SHAPE(0, (int64_t)1 << 53))), TG_OK);
  cr_assert_null(tg_safetensors_serialize(d, &n));
  tg_expect_error(TG_ERR_ARGUMENT, "tensor \"huge\": size 9007199254740992 of dim 1 is not below");
  tg_tensor_dict_free(d);

  /* Every size below 2^53 but the bytes (2^52 elements of 4) are not: data_offsets cannot
   * hold them. */
  d = tg_tensor_dict_new();
  cr_assert_eq(tg_tensor_dict_set(d, "small", x), TG_OK);
  cr_assert_eq(
      tg_tensor_dict_set(d, "wide", tg_expand(x, TG_SHAPE((int64_t)1 << 26, (int64_t)1 << 26))),
      TG_OK);
  cr_assert_null(tg_safetensors_serialize(d, &n));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_safetensors_serialize: the tensors up to \"wide\" reach "
                                   "2^53 bytes");
  cr_assert_eq(n, 0);
  tg_tensor_dict_free(d);

  cr_assert_eq(tg_safetensors_save(NULL, d), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_safetensors_save: path is NULL");
  cr_assert_eq(tg_safetensors_save("x.safetensors", NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_safetensors_save: d is NULL");
}

/* ---- files and I/O errors ---- */

/* A FIFO (no writer) would block the open forever: refused at once. So are a tensor dict's,
 * a module's and a checkpoint's loads, which read through tg_safetensors_load. */
TG_TEST(safetensors, fifo_is_refused_without_waiting, .timeout = 20) {
  make_tmpdir();
  char path[512];
  path_in_tmp(path, sizeof path, "pipe.safetensors");
  cr_assert_eq(mkfifo(path, 0600), 0);
  cr_assert_null(tg_safetensors_load(path));
  tg_expect_error(TG_ERR_IO, "tg_safetensors_load: '", path,
                  "' is not a regular file: it is a FIFO");
  remove_tmpdir();
}

/* Another format's file is named as such, not read as a header length. */
TG_TEST(safetensors, names_a_file_of_another_format) {
  static const unsigned char npy[] = "\x93NUMPY\x01\x00\x76\x00{'descr': '<f4', 'fortran_order': "
                                     "False, 'shape': (2,), }          \n";
  cr_assert_null(tg_safetensors_parse(npy, sizeof npy - 1));
  tg_expect_error(TG_ERR_FORMAT, "tg_safetensors_parse: data: not a safetensors file",
                  "a .npy file", "tg_npy_load");
  static const unsigned char zip[] = "PK\x03\x04\x14\x00\x00\x00\x08\x00archive/data.pkl";
  cr_assert_null(tg_safetensors_parse(zip, sizeof zip - 1));
  tg_expect_error(TG_ERR_FORMAT, "not a safetensors file", "a zip archive");
  /* 8 bytes of length and then no '{': the length is not believed */
  static const unsigned char text[] = "hello, world: some text";
  cr_assert_null(tg_safetensors_parse(text, sizeof text - 1));
  tg_expect_error(TG_ERR_FORMAT, "not a safetensors file",
                  "the 8-byte header length is not followed by '{' (byte 8 is 0x6f)");
  /* a file on disk, as a user would load a .npy by mistake */
  make_tmpdir();
  char path[512];
  path_in_tmp(path, sizeof path, "x.npy");
  tg_tensor *t = tg_zeros(TG_SHAPE(3), TG_OPTS_DEFAULT);
  cr_assert_eq(tg_npy_save(path, t), TG_OK);
  cr_assert_null(tg_safetensors_load(path));
  tg_expect_error(TG_ERR_FORMAT, "tg_safetensors_load: '", path,
                  "': not a safetensors file: it is a .npy file");
  remove_tmpdir();
}

TG_TEST(safetensors, load_names_the_file) {
  make_tmpdir();
  char path[512];
  path_in_tmp(path, sizeof path, "missing.safetensors");
  cr_assert_null(tg_safetensors_load(path));
  tg_expect_error(TG_ERR_IO, "tg_safetensors_load: cannot open '", path, "No such file");
  cr_assert_null(tg_safetensors_load(tmpdir));
  tg_expect_error(TG_ERR_IO, "is not a regular file");
  cr_assert_null(tg_safetensors_load(NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_safetensors_load: path is NULL");

  path_in_tmp(path, sizeof path, "bad.safetensors");
  size_t len;
  unsigned char *b =
      file_of(ENTRY("w", "{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]}"), 4, &len);
  FILE *f = fopen(path, "wb");
  cr_assert(f && fwrite(b, 1, len, f) == len);
  fclose(f);
  free(b);
  cr_assert_null(tg_safetensors_load(path));
  tg_expect_error(TG_ERR_DTYPE, "tg_safetensors_load: '", path,
                  "': tensor \"w\" has dtype \"F16\"");
  f = fopen(path, "wb");
  cr_assert(f && fwrite("\x02\0\0\0\0\0\0\0{}", 1, 9, f) == 9); /* truncated */
  fclose(f);
  cr_assert_null(tg_safetensors_load(path));
  tg_expect_error(TG_ERR_FORMAT, path, "header length 2 is beyond the end (1 bytes follow it)");
  remove_tmpdir();
}

static bool failing_write(size_t written, void *user) {
  (void)written;
  (void)user;
  return false;
}

TG_TEST(safetensors, failed_save_leaves_the_old_file) {
  make_tmpdir();
  char path[512];
  path_in_tmp(path, sizeof path, "m.safetensors");
  tg_tensor_dict *d = sample_dict();
  cr_assert_eq(tg_safetensors_save(path, d), TG_OK);
  size_t len0, len1;
  unsigned char *before = read_whole(path, &len0);
  tg_tensor_dict *other = tg_tensor_dict_new();
  cr_assert_eq(tg_tensor_dict_set(other, "x", tg_ones(TG_SHAPE(3), TG_OPTS_DEFAULT)), TG_OK);
  tg__set_write_hook(failing_write, NULL);
  tg_status st = tg_safetensors_save(path, other);
  tg__set_write_hook(NULL, NULL);
  cr_assert_eq(st, TG_ERR_IO);
  tg_expect_error(TG_ERR_IO, "tg_safetensors_save", path);
  unsigned char *after = read_whole(path, &len1);
  cr_assert_eq(len1, len0);
  cr_assert(memcmp(before, after, len0) == 0);
  free(before);
  free(after);
  /* a directory that does not exist */
  path_in_tmp(path, sizeof path, "no/such/dir.safetensors");
  cr_assert_eq(tg_safetensors_save(path, d), TG_ERR_IO);
  tg_expect_error(TG_ERR_IO, "tg_safetensors_save: cannot", path);
  tg_tensor_dict_free(other);
  tg_tensor_dict_free(d);
  remove_tmpdir();
}

/* ---- allocation failures ---- */

/* A dict's names, metadata and elements as results. */
static tg_status append_dict(const tg_tensor_dict *d, double *out, int *n_out) {
  tg_status st = TG_OK;
  for (int i = 0; i < tg_tensor_dict_size(d) && st == TG_OK; i++) {
    out[(*n_out)++] = (double)strlen(tg_tensor_dict_name(d, i));
    st = append(tg_tensor_dict_at(d, i), out, n_out);
  }
  for (int i = 0; i < tg_tensor_dict_meta_size(d); i++)
    out[(*n_out)++] = (double)strlen(tg_tensor_dict_meta_value(d, i));
  return st;
}

static const char sweep_header[] =
    "{\"__metadata__\":{\"format\":\"pt\",\"k\":\"v\"},"
    "\"b\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[16,32]},"
    "\"a\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[0,16]},"
    "\"s\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[32,40]},"
    "\"e\":{\"dtype\":\"F64\",\"shape\":[0],\"data_offsets\":[40,40]}}";

static tg_status parse_step(void *user, double *out, int *n_out) {
  (void)user;
  size_t len;
  unsigned char *b = file_of(sweep_header, 40, &len);
  tg_tensor_dict *d = tg_safetensors_parse(b, len);
  free(b);
  tg_status st = status_of(d);
  if (st == TG_OK) st = append_dict(d, out, n_out);
  tg_tensor_dict_free(d);
  return st;
}

/* A small dict made in the step (a transposed view among its tensors), serialized. */
static tg_status serialize_step(void *user, double *out, int *n_out) {
  (void)user;
  tg_tensor_dict *d = tg_tensor_dict_new();
  tg_tensor *a = tg_arange(0, 6, 1, TG_OPTS(.dtype = TG_F64));
  tg_tensor *m = a ? tg_t(tg_reshape(a, TG_SHAPE(2, 3))) : NULL;
  tg_status st = status_of(d);
  if (st == TG_OK) st = status_of(m);
  if (st == TG_OK) st = tg_tensor_dict_set(d, "m", m);
  tg_tensor *i = NULL;
  if (st == TG_OK) st = status_of(i = tg_full(TG_SHAPE(3), 7, TG_OPTS(.dtype = TG_I64)));
  if (st == TG_OK) st = tg_tensor_dict_set(d, "i", i);
  if (st == TG_OK) st = tg_tensor_dict_set_meta(d, "format", "pt");
  size_t n = 0;
  unsigned char *b = NULL;
  if (st == TG_OK) st = status_of(b = tg_safetensors_serialize(d, &n));
  if (st == TG_OK) {
    cr_assert(n <= MAX_RESULTS);
    for (size_t i = 0; i < n; i++) out[(*n_out)++] = b[i];
  }
  free(b);
  tg_tensor_dict_free(d);
  return st;
}

TG_TEST(safetensors, allocation_failures_parse_and_serialize) {
  sweep_result r = sweep("tg_safetensors_parse", parse_step, NULL);
  cr_assert_gt(r.failed, 10, "cJSON's allocations are not swept");
  sweep("tg_safetensors_serialize", serialize_step, NULL);
}

static char sweep_path[512];

static tg_status save_step(void *user, double *out, int *n_out) {
  (void)user;
  tg_tensor_dict *d = tg_tensor_dict_new();
  tg_status st = status_of(d);
  tg_tensor *x = NULL;
  if (st == TG_OK) st = status_of(x = tg_full(TG_SHAPE(2, 2), 1.5, TG_OPTS_DEFAULT));
  if (st == TG_OK) st = tg_tensor_dict_set(d, "x", x);
  if (st == TG_OK) st = tg_tensor_dict_set_meta(d, "step", "3");
  if (st == TG_OK) st = tg_safetensors_save(sweep_path, d);
  tg_tensor_dict_free(d);
  if (st == TG_OK) {
    size_t len;
    unsigned char *b = read_whole(sweep_path, &len);
    for (size_t i = 0; i < len; i++) out[(*n_out)++] = b[i];
    free(b);
  }
  return st;
}

static tg_status load_step(void *user, double *out, int *n_out) {
  (void)user;
  tg_tensor_dict *d = tg_safetensors_load(sweep_path);
  tg_status st = status_of(d);
  if (st == TG_OK) st = append_dict(d, out, n_out);
  tg_tensor_dict_free(d);
  return st;
}

TG_TEST(safetensors, allocation_failures_save_and_load) {
  make_tmpdir();
  path_in_tmp(sweep_path, sizeof sweep_path, "sweep.safetensors");
  sweep("tg_safetensors_save", save_step, NULL);
  size_t len;
  unsigned char *b = file_of(sweep_header, 40, &len);
  FILE *f = fopen(sweep_path, "wb");
  cr_assert(f && fwrite(b, 1, len, f) == len);
  fclose(f);
  free(b);
  sweep("tg_safetensors_load", load_step, NULL);
  remove_tmpdir();
}

/* ---- threads: the first use of cJSON from several threads at once ---- */

static void *parse_in_thread(void *arg) {
  (void)arg;
  size_t len;
  unsigned char *b = file_of(sweep_header, 40, &len);
  bool ok = true;
  for (int i = 0; i < 20 && ok; i++) {
    tg_tensor_dict *d = tg_safetensors_parse(b, len);
    ok = d && tg_tensor_dict_size(d) == 4;
    tg_tensor_dict_free(d);
  }
  free(b);
  return ok ? arg : NULL;
}

TG_TEST(safetensors, parse_from_threads) {
  pthread_t th[4];
  int tag = 1;
  for (int i = 0; i < 4; i++) cr_assert_eq(pthread_create(&th[i], NULL, parse_in_thread, &tag), 0);
  for (int i = 0; i < 4; i++) {
    void *res;
    cr_assert_eq(pthread_join(th[i], &res), 0);
    cr_assert_eq(res, &tag);
  }
}

TG_TEST(safetensors, escaped_names_are_decoded) {
  const char *h = "{\"a\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00\":"
                  "{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                  "\"__metadata__\":{\"k\\u0041\":\"caf\\u00e9\"}}";
  size_t len;
  unsigned char *b = file_of(h, 4, &len);
  tg_tensor_dict *d = tg_safetensors_parse(b, len);
  cr_assert(d, "%s", tg_last_error_message());
  cr_assert_str_eq(tg_tensor_dict_name(d, 0), "a\"\\/\b\f\n\r\t\xc3\xa9\xf0\x9f\x98\x80");
  cr_assert_str_eq(tg_tensor_dict_get_meta(d, "kA"), "caf\xc3\xa9");
  /* written back, the name reads back the same */
  size_t n;
  void *again = tg_safetensors_serialize(d, &n);
  tg_tensor_dict *back = again ? tg_safetensors_parse(again, n) : NULL;
  cr_assert(back, "%s", tg_last_error_message());
  expect_dicts_equal(back, d);
  tg_tensor_dict_free(back);
  free(again);
  tg_tensor_dict_free(d);
  free(b);
}
