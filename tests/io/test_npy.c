/* .npy: round trips of every dtype and layout, files built by hand (big-endian, Fortran
 * order, versions 2.0 and 3.0, numpy's tolerated spellings), every malformed file with its
 * code and message, allocation-failure sweeps and I/O errors. NumPy itself reads and writes
 * the files in tests/io/python/npy_interop.py. */
#define _GNU_SOURCE /* mkdtemp */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"
#include "alloc_sweep.h"
#include "io/npy.h"
#include "tg/io.h"

/* ---- helpers ---- */

/* A .npy file built by hand: the prefix of `major`.0, the dict padded to 64 bytes with a
 * final '\n' (numpy's layout), then data. */
typedef struct npy_file {
  unsigned char bytes[4096];
  size_t n;
} npy_file;

static npy_file build(int major, const char *dict, const void *data, size_t data_len) {
  npy_file f = {{0}, 0};
  size_t field = major == 1 ? 2 : 4, len = strlen(dict);
  size_t hlen = len + 1;
  size_t pad = 64 - (8 + field + hlen) % 64;
  cr_assert(8 + field + hlen + pad + data_len <= sizeof f.bytes);
  memcpy(f.bytes, "\x93NUMPY", 6);
  f.bytes[6] = (unsigned char)major;
  f.bytes[7] = 0;
  for (size_t b = 0; b < field; b++) f.bytes[8 + b] = (unsigned char)((hlen + pad) >> (8 * b));
  size_t at = 8 + field;
  memcpy(f.bytes + at, dict, len);
  memset(f.bytes + at + len, ' ', pad);
  f.bytes[at + len + pad] = '\n';
  f.n = at + hlen + pad;
  if (data_len) memcpy(f.bytes + f.n, data, data_len);
  f.n += data_len;
  return f;
}

static void expect_parse_error(const npy_file *f, tg_status code, const char *fragment) {
  int64_t live = tg_live_objects();
  tg_tensor *t = tg_npy_parse(f->bytes, f->n);
  cr_assert_null(t, "parsed a malformed file (expected: %s)", fragment);
  tg_expect_error(code, "tg_npy_parse: ", fragment);
  cr_assert_eq(tg_live_objects(), live, "a failed parse left objects alive");
}

/* Exact equality: dtype, sizes and every element's bits (NaN and -0.0 included). */
static void expect_identical(const tg_tensor *got, const tg_tensor *want) {
  cr_assert(got, "%s", tg_last_error_message());
  cr_assert_eq(tg_tensor_dtype(got), tg_tensor_dtype(want));
  cr_assert_eq(tg_tensor_device(got).type, TG_CPU);
  cr_assert(!tg_requires_grad(got));
  cr_assert(tg_is_contiguous(got));
  cr_assert_eq(tg_ndim(got), tg_ndim(want));
  for (int d = 0; d < tg_ndim(want); d++) cr_assert_eq(tg_size(got, d), tg_size(want, d));
  size_t bytes = (size_t)tg_numel(want) * tg_dtype_size(tg_tensor_dtype(want));
  unsigned char *a = malloc(bytes + 1), *b = malloc(bytes + 1);
  cr_assert_eq(tg_to_host_array(got, a, bytes), TG_OK);
  cr_assert_eq(tg_to_host_array(want, b, bytes), TG_OK);
  int diff = memcmp(a, b, bytes);
  free(a);
  free(b);
  cr_assert_eq(diff, 0, "the elements differ");
}

static tg_tensor *round_trip(const tg_tensor *t) {
  size_t n = 0;
  void *buf = tg_npy_serialize(t, &n);
  cr_assert(buf, "%s", tg_last_error_message());
  cr_assert_eq(n % 64, (size_t)((tg_numel(t) * (int64_t)tg_dtype_size(tg_tensor_dtype(t))) % 64),
               "the data does not start on a 64-byte boundary");
  tg_tensor *back = tg_npy_parse(buf, n);
  free(buf);
  return back;
}

/* Values i * 0.37 - 5 (i - 7 for I64) with a NaN, -0.0 and an infinity among the floats. */
static tg_tensor *sample(tg_dtype dtype, int ndim, const int64_t *sizes) {
  tg_tensor *t = tg_empty(ndim, sizes, (tg_options){.dtype = dtype});
  cr_assert(t);
  int64_t n = tg_numel(t);
  unsigned char *p = tg_data_ptr(t);
  for (int64_t i = 0; i < n; i++) {
    double v = (double)i * 0.37 - 5;
    if (i == 1) v = NAN;
    if (i == 2) v = -0.0;
    if (i == 3) v = -INFINITY;
    if (dtype == TG_F32) ((float *)p)[i] = (float)v;
    if (dtype == TG_F64) ((double *)p)[i] = v;
    if (dtype == TG_I64) ((int64_t *)p)[i] = (i - 7) * (INT64_C(1) << 40) + i;
  }
  return t;
}

static char temp_dir[64];
static void make_temp_dir(void) {
  snprintf(temp_dir, sizeof temp_dir, "/tmp/tg-test-npy-XXXXXX");
  cr_assert(mkdtemp(temp_dir), "mkdtemp: %s", strerror(errno));
}
static const char *temp_path(const char *name) {
  static char path[128];
  snprintf(path, sizeof path, "%s/%s", temp_dir, name);
  return path;
}
static void remove_temp_dir(const char *names[], int n) {
  for (int i = 0; i < n; i++) unlink(temp_path(names[i]));
  rmdir(temp_dir);
}

/* ---- round trips ---- */

TG_TEST(npy, round_trip_every_dtype_and_rank) {
  const int64_t shapes[][3] = {{7, 0, 0}, {2, 3, 0}, {2, 3, 4}};
  for (int dtype = 0; dtype < TG_NUM_DTYPES; dtype++)
    for (int s = 0; s < 3; s++) {
      tg_scope sc = tg_scope_begin();
      tg_tensor *t = sample((tg_dtype)dtype, s + 1, shapes[s]);
      expect_identical(round_trip(t), t);
      tg_scope_end(sc);
    }
}

TG_TEST(npy, round_trip_zero_dim_and_zero_size) {
  for (int dtype = 0; dtype < TG_NUM_DTYPES; dtype++) {
    tg_scope sc = tg_scope_begin();
    tg_tensor *scalar = tg_full(0, NULL, -2.5, (tg_options){.dtype = (tg_dtype)dtype});
    tg_tensor *back = round_trip(scalar);
    expect_identical(back, scalar);
    cr_assert_eq(tg_ndim(back), 0);
    expect_identical(round_trip(sample((tg_dtype)dtype, TG_SHAPE(0))), sample(dtype, TG_SHAPE(0)));
    expect_identical(round_trip(sample((tg_dtype)dtype, TG_SHAPE(3, 0, 2))),
                     sample((tg_dtype)dtype, TG_SHAPE(3, 0, 2)));
    tg_scope_end(sc);
  }
}

TG_TEST(npy, round_trip_up_to_max_dims) {
  tg_tensor *t = sample(TG_F64, TG_SHAPE(1, 2, 1, 3, 1, 2, 1, 2));
  cr_assert_eq(tg_ndim(t), TG_MAX_DIMS);
  expect_identical(round_trip(t), t);
}

TG_TEST(npy, round_trip_non_contiguous) {
  tg_tensor *base = sample(TG_F32, TG_SHAPE(4, 6));
  tg_tensor *views[] = {
      tg_t(base),                                                   /* transposed */
      tg_slice(tg_slice(base, 0, 1, 4, 2), 1, 0, 6, 3),             /* sliced with steps */
      tg_expand(sample(TG_I64, TG_SHAPE(3, 1)), TG_SHAPE(2, 3, 5)), /* stride 0 */
      tg_select(tg_t(sample(TG_F64, TG_SHAPE(3, 4))), 0, 2),        /* a column */
  };
  for (size_t v = 0; v < sizeof views / sizeof *views; v++) {
    cr_assert(views[v], "%s", tg_last_error_message());
    cr_assert(!tg_is_contiguous(views[v]));
    expect_identical(round_trip(views[v]), tg_contiguous(views[v]));
  }
}

TG_TEST(npy, writes_numpys_header_byte_for_byte) {
  /* np.save(f, np.zeros((2, 3), np.float32)) with numpy 1.24 */
  static const char want[] = "\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, "
                             "'shape': (2, 3), }";
  size_t n;
  unsigned char *buf = tg_npy_serialize(tg_zeros(TG_SHAPE(2, 3), TG_OPTS_DEFAULT), &n);
  cr_assert(buf);
  cr_assert_eq(n, 128 + 24);
  cr_assert_eq(memcmp(buf, want, sizeof want - 1), 0, "%.*s", 128, buf);
  for (size_t i = sizeof want - 1; i < 127; i++) cr_assert_eq(buf[i], ' ');
  cr_assert_eq(buf[127], '\n');
  free(buf);
  /* 1-D: "(5,)"; 0-D: "()", without the room to grow */
  char head[256];
  size_t len = tg__npy_write_header(TG_I64, 1, (const int64_t[]){5}, head, sizeof head);
  cr_assert_eq(len, 128);
  const char *dict = "{'descr': '<i8', 'fortran_order': False, 'shape': (5,), }";
  cr_assert_eq(memcmp(head + 10, dict, strlen(dict)), 0);
  len = tg__npy_write_header(TG_F64, 0, NULL, head, sizeof head);
  cr_assert_eq(len, 128);
  dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (), }";
  cr_assert_eq(memcmp(head + 10, dict, strlen(dict)), 0);
  for (size_t i = 10 + strlen(dict); i < 127; i++) cr_assert_eq(head[i], ' ');
}

TG_TEST(npy, long_header_switches_to_version_2) {
  static char dict[70100], wrapped[70300];
  int len =
      snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }");
  memset(dict + len, ' ', 70000);
  size_t total = tg__npy_wrap_header(dict, (size_t)len + 70000, wrapped, sizeof wrapped);
  cr_assert_eq(total % 64, 0);
  cr_assert_eq(wrapped[6], 2);
  cr_assert_eq(wrapped[total - 1], '\n');
  /* too small a buffer: only the length comes back */
  cr_assert_eq(tg__npy_wrap_header(dict, (size_t)len + 70000, wrapped, 100), total);
  static unsigned char file[70300];
  memcpy(file, wrapped, total);
  const float data[2] = {1.5f, -3};
  memcpy(file + total, data, sizeof data);
  tg_tensor *t = tg_npy_parse(file, total + sizeof data);
  tg_test_expect_values(t, 2, (const double[]){1.5, -3}, 0);
}

/* ---- files built by hand ---- */

TG_TEST(npy, reads_big_endian) {
  const unsigned char f4[] = {0x3f, 0xc0, 0, 0, 0xc0, 0, 0, 0}; /* 1.5, -2 */
  npy_file f = build(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", f4, 8);
  tg_test_expect_values(tg_npy_parse(f.bytes, f.n), 2, (const double[]){1.5, -2}, 0);
  const unsigned char f8[] = {0x40, 0x0a, 0, 0, 0, 0, 0, 0}; /* 3.25 */
  f = build(1, "{'descr': '>f8', 'fortran_order': False, 'shape': (), }", f8, 8);
  tg_tensor *t = tg_npy_parse(f.bytes, f.n);
  cr_assert_eq(tg_ndim(t), 0);
  cr_assert_eq(tg_tensor_dtype(t), TG_F64);
  tg_test_expect_values(t, 1, (const double[]){3.25}, 0);
  const unsigned char i8[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe,  /* -2 */
                              0x01, 0,    0,    0,    0,    0,    0,    0x07}; /* 2^56 + 7 */
  f = build(1, "{'descr': '>i8', 'fortran_order': False, 'shape': (2, 1), }", i8, 16);
  t = tg_npy_parse(f.bytes, f.n);
  cr_assert_eq(tg_tensor_dtype(t), TG_I64);
  int64_t got[2];
  cr_assert_eq(tg_to_host_array(t, got, sizeof got), TG_OK);
  cr_assert_eq(got[0], -2);
  cr_assert_eq(got[1], (INT64_C(1) << 56) + 7);
}

TG_TEST(npy, reads_fortran_order) {
  /* a[i][j] = 10 i + j, shape (2, 3), stored column by column */
  const double f8[] = {0, 10, 1, 11, 2, 12};
  npy_file f = build(1, "{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3), }", f8, 48);
  tg_tensor *t = tg_npy_parse(f.bytes, f.n);
  tg_assert_sizes(t, 2, 3);
  cr_assert(tg_is_contiguous(t));
  tg_test_expect_values(t, 6, (const double[]){0, 1, 2, 10, 11, 12}, 0);
  /* 3-D, big-endian int64: a[i][j][k] = 100 i + 10 j + k, shape (2, 3, 4) */
  unsigned char i8[24 * 8];
  double want[24];
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++)
      for (int k = 0; k < 4; k++) {
        int64_t v = 100 * i + 10 * j + k;
        int at = i + 2 * j + 6 * k; /* Fortran position */
        for (int b = 0; b < 8; b++) i8[at * 8 + b] = (unsigned char)(v >> (8 * (7 - b)));
        want[i * 12 + j * 4 + k] = (double)v;
      }
  f = build(1, "{'descr': '>i8', 'fortran_order': True, 'shape': (2, 3, 4), }", i8, sizeof i8);
  t = tg_npy_parse(f.bytes, f.n);
  tg_assert_sizes(t, 2, 3, 4);
  tg_test_expect_values(t, 24, want, 0);
  /* Fortran order of a zero-size array and of a 1-D one */
  f = build(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (3, 0), }", NULL, 0);
  tg_assert_sizes(tg_npy_parse(f.bytes, f.n), 3, 0);
  const float f4[] = {1, 2, 3};
  f = build(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (3,), }", f4, 12);
  tg_test_expect_values(tg_npy_parse(f.bytes, f.n), 3, (const double[]){1, 2, 3}, 0);
}

TG_TEST(npy, reads_versions_2_and_3) {
  const int64_t i8[] = {4, -5, 6};
  for (int major = 2; major <= 3; major++) {
    npy_file f = build(major, "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }", i8, 24);
    tg_test_expect_values(tg_npy_parse(f.bytes, f.n), 3, (const double[]){4, -5, 6}, 0);
  }
}

TG_TEST(npy, tolerates_what_literal_eval_accepts) {
  const float f4[] = {1, 2, 3, 4, 5, 6};
  const char *dicts[] = {
      "{'shape': (2, 3), 'fortran_order': False, 'descr': '<f4'}", /* order, no comma */
      "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2, 3,)}",
      "  {\n 'descr' :'<f4' ,\t'fortran_order':False,'shape':( 2 ,3 ) , }",
      "{'descr': 'f4', 'fortran_order': False, 'shape': (+2, 3), }", /* no byte order */
      "{'descr': '=f4', 'fortran_order': False, 'shape': (2, 3), }",
      "{'descr': '|f4', 'fortran_order': False, 'shape': (2, 3), }",
  };
  for (size_t d = 0; d < sizeof dicts / sizeof *dicts; d++) {
    npy_file f = build(1, dicts[d], f4, sizeof f4);
    tg_tensor *t = tg_npy_parse(f.bytes, f.n);
    cr_assert(t, "%s: %s", dicts[d], tg_last_error_message());
    tg_assert_sizes(t, 2, 3);
    tg_test_expect_values(t, 6, (const double[]){1, 2, 3, 4, 5, 6}, 0);
  }
}

/* ---- malformed files ---- */

static const char *const good_dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
static const float six[6] = {1, 2, 3, 4, 5, 6};

TG_TEST(npy, rejects_wrong_data_size) {
  npy_file f = build(1, good_dict, six, 20);
  expect_parse_error(&f, TG_ERR_FORMAT,
                     "header says [2, 3] float32 = 24 bytes but the file has 20 (truncated data)");
  f = build(1, good_dict, (const float[7]){0}, 28);
  expect_parse_error(&f, TG_ERR_FORMAT,
                     "header says [2, 3] float32 = 24 bytes but the file has 28 (trailing bytes)");
  f = build(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (), }", NULL, 0);
  expect_parse_error(&f, TG_ERR_FORMAT, "header says [] int64 = 8 bytes but the file has 0");
  f = build(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (0, 5), }", six, 4);
  expect_parse_error(&f, TG_ERR_FORMAT, "header says [0, 5] float64 = 0 bytes but the file has 4");
}

TG_TEST(npy, rejects_bad_prefix) {
  npy_file f = build(1, good_dict, six, 24);
  npy_file bad = f;
  bad.bytes[1] = 'n';
  expect_parse_error(&bad, TG_ERR_FORMAT, "not a .npy file: it does not start with the magic");
  bad.n = 0;
  expect_parse_error(&bad, TG_ERR_FORMAT, "not a .npy file");
  bad = f;
  bad.n = 4; /* a prefix of the magic */
  expect_parse_error(&bad, TG_ERR_FORMAT, "truncated: 4 bytes");
  bad.n = 9;
  expect_parse_error(&bad, TG_ERR_FORMAT, "truncated: 9 bytes, less than the 10-byte prefix");
  bad = f;
  bad.bytes[6] = 4;
  expect_parse_error(&bad, TG_ERR_FORMAT, "unsupported .npy version 4.0");
  bad.bytes[6] = 1;
  bad.bytes[7] = 1;
  expect_parse_error(&bad, TG_ERR_FORMAT, "unsupported .npy version 1.1");
  bad.bytes[6] = 0;
  bad.bytes[7] = 0;
  expect_parse_error(&bad, TG_ERR_FORMAT, "unsupported .npy version 0.0");
}

TG_TEST(npy, rejects_truncated_header) {
  npy_file f = build(1, good_dict, six, 24);
  npy_file bad = f;
  bad.n = 70; /* the header says 118 bytes */
  expect_parse_error(&bad, TG_ERR_FORMAT,
                     "truncated header: it is 118 bytes but the file has 60 after the 10-byte "
                     "prefix");
  bad = f;
  bad.bytes[8] = 0xff, bad.bytes[9] = 0xff; /* a header length beyond the file */
  expect_parse_error(&bad, TG_ERR_FORMAT, "truncated header: it is 65535 bytes");
  f = build(2, good_dict, six, 24);
  f.bytes[11] = 0x80; /* 2 GiB */
  expect_parse_error(&f, TG_ERR_FORMAT, "truncated header: it is 2147483764 bytes");
  bad = build(1, good_dict, six, 24);
  bad.bytes[127] = ' ';
  expect_parse_error(&bad, TG_ERR_FORMAT, "the header does not end with '\\n'");
  bad.bytes[8] = bad.bytes[9] = 0;
  expect_parse_error(&bad, TG_ERR_FORMAT, "the header does not end with '\\n'");
}

TG_TEST(npy, rejects_unsupported_dtypes) {
  const char *cases[][2] = {
      {"{'descr': '<f2', 'fortran_order': False, 'shape': (2, 3), }", "unsupported dtype '<f2'"},
      {"{'descr': '|O', 'fortran_order': False, 'shape': (2, 3), }", "unsupported dtype '|O'"},
      {"{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }", "unsupported dtype '<i4'"},
      {"{'descr': '|u1', 'fortran_order': False, 'shape': (2, 3), }", "unsupported dtype '|u1'"},
      {"{'descr': '<c16', 'fortran_order': False, 'shape': (2, 3), }", "'<c16'"},
      {"{'descr': '', 'fortran_order': False, 'shape': (2, 3), }", "unsupported dtype ''"},
      {"{'descr': [('a', '<f4'), ('b', '<i8', (2,))], 'fortran_order': False, 'shape': (2,), }",
       "unsupported dtype [('a', '<f4'), ('b', '<i8', (2,))] (a structured or non-string descr)"},
      {"{'descr': 5, 'fortran_order': False, 'shape': (2,), }", "unsupported dtype 5"},
  };
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    npy_file f = build(1, cases[c][0], six, 24);
    expect_parse_error(&f, TG_ERR_DTYPE, cases[c][1]);
  }
}

TG_TEST(npy, rejects_bad_dicts) {
  const char *cases[][2] = {
      {"[1, 2]", "the header is not a dict: it starts with [1, 2]"},
      {"'descr'", "the header is not a dict"},
      {"{'descr': '<f4', 'shape': (2, 3), }", "the header has no 'fortran_order' key"},
      {"{'descr': '<f4', 'fortran_order': False}", "the header has no 'shape' key"},
      {"{}", "the header has no 'descr' key"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'extra': 1}",
       "the header has the key 'extra'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'shape': (6,)}",
       "the header names 'shape' twice"},
      {"{'descr': '<f4' 'fortran_order': False, 'shape': (2, 3)}", "a missing ',' or '}'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)", "a missing ',' or '}'"},
      {"{'descr: '<f4', 'fortran_order': False, 'shape': (2, 3)}", "a missing ':' after a key"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)} x", "text after the dict"},
      {"{'descr': '<f4', 'fortran_order': Fals, 'shape': (2, 3)}",
       "a name that is not True, False or None"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)", "a missing ',' or '}'"},
      {"{'descr': '<\\f4', 'fortran_order': False, 'shape': (2, 3)}", "an escape"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'x': ((((((((((((((((((((((((("
       "((((((((((((((1)))))))))))))))))))))))))))))))))))))))}",
       "values nested too deeply"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': {2: 3}, }",
       "shape {2: 3} is not a tuple of ints"},
      {"{5: '<f4', 'fortran_order': False, 'shape': (2, 3), }", "a key that is not a string"},
      {"{'descr': '<f4', 'fortran_order': 1, 'shape': (2, 3), }",
       "fortran_order is 1, not True or False"},
      {"{'descr': '<f4', 'fortran_order': None, 'shape': (2, 3), }", "fortran_order is None"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': 6, }", "shape 6 is not a tuple of ints"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (6), }",
       "shape (6) is not a tuple of ints"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3], }",
       "shape [2, 3] is not a tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2.0, 3), }", "is not a tuple of ints"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3), }", "is not a tuple of ints"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': ('2', 3), }", "is not a tuple of ints"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (-, 3), }", "a sign without a number"},
  };
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    npy_file f = build(1, cases[c][0], six, 24);
    expect_parse_error(&f, TG_ERR_FORMAT, cases[c][1]);
  }
  /* a NUL byte in the header */
  npy_file f = build(1, good_dict, six, 24);
  f.bytes[20] = '\0';
  expect_parse_error(&f, TG_ERR_FORMAT, "the header is not a valid dict literal");
}

TG_TEST(npy, rejects_bad_shapes) {
  npy_file f = build(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }", six, 24);
  expect_parse_error(&f, TG_ERR_FORMAT, "shape (2, -3): dim 1 is negative");
  f = build(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", six,
            24);
  expect_parse_error(&f, TG_ERR_FORMAT, "shape (99999999999999999999,): dim 0 does not fit int64");
  f = build(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (9223372036854775808,), }", six,
            24);
  expect_parse_error(&f, TG_ERR_FORMAT, "dim 0 does not fit int64");
  f = build(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904, 4), }", six,
            24);
  expect_parse_error(&f, TG_ERR_FORMAT,
                     "shape (4611686018427387904, 4) of float64 overflows: more than 2^63 bytes");
  /* 2^61 float32s: 2^63 bytes, one too many */
  f = build(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2305843009213693952,), }", six,
            24);
  expect_parse_error(&f, TG_ERR_FORMAT, "overflows");
  /* as numpy: zero elements, but the other dims' bytes overflow */
  f = build(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (0, 4611686018427387904, 4), }",
            NULL, 0);
  expect_parse_error(&f, TG_ERR_FORMAT, "overflows");
  f = build(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 6), }",
            six, 24);
  expect_parse_error(&f, TG_ERR_UNSUPPORTED,
                     "shape (1, 1, 1, 1, 1, 1, 1, 1, 6) has 9 dims; tg tensors have at most 8");
}

TG_TEST(npy, argument_errors) {
  cr_assert_null(tg_npy_parse(NULL, 5));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_npy_parse: data is NULL but nbytes is 5");
  cr_assert_null(tg_npy_parse(NULL, 0));
  tg_expect_error(TG_ERR_FORMAT, "tg_npy_parse: not a .npy file");
  size_t n = 7;
  cr_assert_null(tg_npy_serialize(NULL, &n));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_npy_serialize: t is NULL");
  cr_assert_eq(n, 0);
  cr_assert_null(tg_npy_serialize(tg_zeros(TG_SHAPE(2), TG_OPTS_DEFAULT), NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_npy_serialize: nbytes is NULL");
  cr_assert_eq(tg_npy_save(NULL, tg_zeros(TG_SHAPE(2), TG_OPTS_DEFAULT)), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_npy_save: path is NULL");
  cr_assert_eq(tg_npy_save("", tg_zeros(TG_SHAPE(2), TG_OPTS_DEFAULT)), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_npy_save: path is empty");
  cr_assert_eq(tg_npy_save("/tmp/x.npy", NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_npy_save: t is NULL");
  cr_assert_null(tg_npy_load(NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_npy_load: path is NULL");
}

/* ---- files ---- */

TG_TEST(npy, save_and_load) {
  make_temp_dir();
  const char *names[] = {"a.npy", "b.npy"};
  tg_tensor *t = tg_t(sample(TG_F64, TG_SHAPE(3, 5)));
  cr_assert_eq(tg_npy_save(temp_path("a.npy"), t), TG_OK, "%s", tg_last_error_message());
  expect_identical(tg_npy_load(temp_path("a.npy")), t);
  /* saving again replaces the file */
  tg_tensor *u = sample(TG_I64, TG_SHAPE(4));
  cr_assert_eq(tg_npy_save(temp_path("a.npy"), u), TG_OK);
  expect_identical(tg_npy_load(temp_path("a.npy")), u);
  /* a malformed file names itself */
  FILE *f = fopen(temp_path("b.npy"), "wb");
  fputs("\x93NUMPY\x09", f);
  fclose(f);
  cr_assert_null(tg_npy_load(temp_path("b.npy")));
  tg_expect_error(TG_ERR_FORMAT, "tg_npy_load: '", "b.npy': truncated: 7 bytes");
  remove_temp_dir(names, 2);
}

TG_TEST(npy, io_errors) {
  tg_tensor *t = tg_zeros(TG_SHAPE(2), TG_OPTS_DEFAULT);
  cr_assert_eq(tg_npy_save("/nonexistent-tg-dir/x.npy", t), TG_ERR_IO);
  tg_expect_error(TG_ERR_IO, "tg_npy_save: cannot create a temporary file beside "
                             "'/nonexistent-tg-dir/x.npy': No such file or directory");
  cr_assert_eq(tg_npy_save("/proc/version", t), TG_ERR_IO); /* a directory nobody may write */
  tg_expect_error(TG_ERR_IO, "tg_npy_save: cannot ", "'/proc/version'");
  cr_assert_null(tg_npy_load("/nonexistent-tg-dir/x.npy"));
  tg_expect_error(TG_ERR_IO, "tg_npy_load: cannot open '/nonexistent-tg-dir/x.npy'");
  cr_assert_null(tg_npy_load("/tmp"));
  tg_expect_error(TG_ERR_IO, "tg_npy_load: '/tmp' is not a regular file");
  /* a (sparse) file over the 16 GiB tg_npy_load reads */
  make_temp_dir();
  const char *names[] = {"huge.npy"};
  FILE *f = fopen(temp_path("huge.npy"), "wb");
  cr_assert(f);
  int truncated = ftruncate(fileno(f), (off_t)TG__NPY_MAX_FILE + 1);
  fclose(f);
  if (truncated == 0) {
    cr_assert_null(tg_npy_load(temp_path("huge.npy")));
    tg_expect_error(TG_ERR_FORMAT, "tg_npy_load: '",
                    "huge.npy' is 17179869185 bytes, more than the 17179869184 read at most");
  } else {
    cr_log_warn("no sparse file of 16 GiB here (%s): the size limit is not checked",
                strerror(errno));
  }
  remove_temp_dir(names, 1);
}

/* A FIFO (no writer) would block the open forever: refused at once. */
TG_TEST(npy, fifo_is_refused_without_waiting, .timeout = 20) {
  make_temp_dir();
  const char *names[] = {"pipe.npy"};
  cr_assert_eq(mkfifo(temp_path("pipe.npy"), 0600), 0, "mkfifo: %s", strerror(errno));
  cr_assert_null(tg_npy_load(temp_path("pipe.npy")));
  tg_expect_error(TG_ERR_IO, "tg_npy_load: '", "pipe.npy' is not a regular file: it is a FIFO");
  remove_temp_dir(names, 1);
}

/* ---- allocation failures ---- */

static unsigned char sweep_file[4096];
static size_t sweep_file_len;

static tg_status parse_step(void *user, double *out, int *n_out) {
  (void)user;
  return append(tg_npy_parse(sweep_file, sweep_file_len), out, n_out);
}

static tg_status serialize_step(void *user, double *out, int *n_out) {
  (void)user;
  tg_tensor *t = tg_t(tg_reshape(tg_arange(0, 12, 1, TG_OPTS(.dtype = TG_F64)), TG_SHAPE(3, 4)));
  size_t n;
  void *buf = tg_npy_serialize(t, &n);
  if (!buf) return status_of(buf);
  tg_status st = append(tg_npy_parse(buf, n), out, n_out);
  free(buf);
  return st;
}

static tg_status save_load_step(void *user, double *out, int *n_out) {
  const char *path = user;
  tg_tensor *t = tg_slice(tg_arange(0, 10, 1, TG_OPTS(.dtype = TG_I64)), 0, 1, 10, 3);
  tg_status st = clean(tg_npy_save(path, t));
  if (st == TG_OK) st = append(tg_npy_load(path), out, n_out);
  return st;
}

TG_TEST(npy, allocation_failures) {
  const int64_t i8[] = {1, 2, 3, 4, 5, 6};
  npy_file f = build(1, "{'descr': '>i8', 'fortran_order': True, 'shape': (2, 3), }", i8, 48);
  memcpy(sweep_file, f.bytes, f.n);
  sweep_file_len = f.n;
  sweep("tg_npy_parse", parse_step, NULL);
  sweep("tg_npy_serialize", serialize_step, NULL);
  make_temp_dir();
  char path[128];
  snprintf(path, sizeof path, "%s", temp_path("sweep.npy"));
  sweep("tg_npy_save + tg_npy_load", save_load_step, path);
  const char *names[] = {"sweep.npy"};
  remove_temp_dir(names, 1);
}
