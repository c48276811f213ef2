/* A .npy file's prefix and header dict, read strictly (npy.h). The dict is a Python literal
 * numpy reads with ast.literal_eval; tg accepts what that accepts for the three keys numpy
 * writes (any key order and whitespace, ' or " quotes, a trailing comma), checks the syntax
 * of any other value (a structured descr is a list of tuples) and rejects everything else. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "io/npy.h"
#include "tensor/checked.h"

tg_status tg__npy_fail(const tg__npy_source *src, tg_status code, const char *fmt, ...) {
  char detail[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  if (src->path) return tg_set_error(code, "%s: '%s': %s", src->fn, src->path, detail);
  return tg_set_error(code, "%s: %s", src->fn, detail);
}

/* Up to 60 bytes of untrusted text for a message: unprintable bytes become '?'. */
typedef struct snippet {
  char text[72];
} snippet;

static snippet snip(const char *s, size_t len) {
  snippet out;
  size_t n = len < 60 ? len : 60, j = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    out.text[j++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
  }
  if (len > n) out.text[j++] = '.', out.text[j++] = '.', out.text[j++] = '.';
  out.text[j] = '\0';
  return out;
}

typedef struct parser {
  const tg__npy_source *src;
  const char *s; /* the header text */
  size_t n, i;   /* its length; the position */
} parser;

/* Python's whitespace between tokens (inside braces newlines are whitespace too). */
static bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f';
}
static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

static void skip_space(parser *p) {
  while (p->i < p->n && is_space(p->s[p->i])) p->i++;
}
static char peek(const parser *p) { return p->i < p->n ? p->s[p->i] : '\0'; }

static tg_status syntax_error(const parser *p, const char *what) {
  return tg__npy_fail(p->src, TG_ERR_FORMAT,
                      "the header is not a valid dict literal: %s at header byte %zu", what, p->i);
}

/* A '...' or "..." string without escapes (numpy writes none); its contents in *at, *len. */
static tg_status parse_string(parser *p, size_t *at, size_t *len) {
  char quote = p->s[p->i++];
  size_t start = p->i;
  while (p->i < p->n && p->s[p->i] != quote) {
    char c = p->s[p->i];
    if (c == '\\' || c == '\n' || c == '\r' || c == '\0')
      return syntax_error(p, "an escape, line break or NUL in a string");
    p->i++;
  }
  if (p->i >= p->n) return syntax_error(p, "an unterminated string");
  *at = start;
  *len = p->i - start;
  p->i++;
  return TG_OK;
}

enum { MAX_NESTING = 32 };

/* Any literal: string, number, True/False/None, tuple, list or dict of literals. */
static tg_status skip_value(parser *p, int depth) {
  if (depth > MAX_NESTING) return syntax_error(p, "values nested too deeply");
  char c = peek(p);
  if (c == '\'' || c == '"') {
    size_t at, len;
    return parse_string(p, &at, &len);
  }
  if (c == '-' || c == '+' || is_digit(c)) {
    if (c == '-' || c == '+') p->i++;
    if (!is_digit(peek(p))) return syntax_error(p, "a sign without a number");
    while (is_name_char(peek(p)) || peek(p) == '.') p->i++;
    return TG_OK;
  }
  if (is_name_start(c)) {
    size_t start = p->i;
    while (is_name_char(peek(p))) p->i++;
    size_t len = p->i - start;
    const char *name = p->s + start;
    if ((len == 4 && !memcmp(name, "True", 4)) || (len == 5 && !memcmp(name, "False", 5)) ||
        (len == 4 && !memcmp(name, "None", 4)))
      return TG_OK;
    p->i = start;
    return syntax_error(p, "a name that is not True, False or None");
  }
  if (c != '(' && c != '[' && c != '{') return syntax_error(p, "an unexpected character");
  char close = c == '(' ? ')' : c == '[' ? ']' : '}';
  p->i++;
  for (;;) {
    skip_space(p);
    if (peek(p) == close) break;
    tg_status st = skip_value(p, depth + 1);
    if (st == TG_OK && close == '}') {
      skip_space(p);
      if (peek(p) != ':') return syntax_error(p, "a missing ':' in a dict");
      p->i++;
      skip_space(p);
      st = skip_value(p, depth + 1);
    }
    if (st != TG_OK) return st;
    skip_space(p);
    if (peek(p) == ',') {
      p->i++;
      continue;
    }
    if (peek(p) != close) return syntax_error(p, "a missing ',' or closing bracket");
  }
  p->i++;
  return TG_OK;
}

/* ---- the three values ---- */

enum { KEY_DESCR, KEY_FORTRAN, KEY_SHAPE, N_KEYS };
static const char *const key_names[N_KEYS] = {"descr", "fortran_order", "shape"};

typedef struct span {
  size_t at, len;
  bool seen;
} span;

/* descr: [<>=|]?(f4|f8|i8); '=', '|' and no order mean this machine's order. */
static tg_status read_descr(const parser *p, span v, tg__npy_header *h) {
  const char *s = p->s + v.at;
  if (s[0] != '\'' && s[0] != '"')
    return tg__npy_fail(p->src, TG_ERR_DTYPE,
                        "unsupported dtype %s (a structured or non-string descr); tg reads "
                        "float32, float64 and int64 ('<f4', '<f8', '<i8', or '>' for big-endian)",
                        snip(s, v.len).text);
  const char *d = s + 1;
  size_t len = v.len - 2;
  bool big = !tg__npy_host_little_endian();
  size_t k = 0; /* where the kind starts */
  if (len == 3 && (d[0] == '<' || d[0] == '>' || d[0] == '=' || d[0] == '|')) {
    if (d[0] == '<' || d[0] == '>') big = d[0] == '>';
    k = 1;
  }
  int dtype = 0;
  while (dtype < TG_NUM_DTYPES && !(len - k == 2 && !memcmp(d + k, tg__npy_kind[dtype], 2)))
    dtype++;
  if (dtype == TG_NUM_DTYPES)
    return tg__npy_fail(p->src, TG_ERR_DTYPE,
                        "unsupported dtype %s; tg reads float32, float64 and int64 ('<f4', "
                        "'<f8', '<i8', or '>' for big-endian)",
                        snip(s, v.len).text);
  h->dtype = (tg_dtype)dtype;
  h->big_endian = big;
  return TG_OK;
}

static tg_status read_fortran(const parser *p, span v, tg__npy_header *h) {
  const char *s = p->s + v.at;
  if (v.len == 4 && !memcmp(s, "True", 4)) {
    h->fortran_order = true;
  } else if (v.len == 5 && !memcmp(s, "False", 5)) {
    h->fortran_order = false;
  } else {
    return tg__npy_fail(p->src, TG_ERR_FORMAT, "fortran_order is %s, not True or False",
                        snip(s, v.len).text);
  }
  return TG_OK;
}

/* shape: a tuple of non-negative ints, "()", "(3,)", "(2, 3)" or "(2, 3,)". */
static tg_status read_shape(const parser *p, span v, tg__npy_header *h) {
  const char *s = p->s + v.at;
  snippet shown = snip(s, v.len);
  parser q = {p->src, s, v.len, 0};
  int ndim = 0, commas = 0;
  bool ok = peek(&q) == '(';
  if (ok) q.i++;
  for (;;) {
    skip_space(&q);
    if (!ok || peek(&q) == ')') break;
    bool negative = peek(&q) == '-';
    if (peek(&q) == '-' || peek(&q) == '+') q.i++;
    if (!is_digit(peek(&q))) {
      ok = false;
      break;
    }
    uint64_t value = 0;
    bool too_big = false;
    while (is_digit(peek(&q))) {
      too_big |= __builtin_mul_overflow(value, 10, &value) ||
                 __builtin_add_overflow(value, (uint64_t)(peek(&q) - '0'), &value);
      q.i++;
    }
    if (is_name_char(peek(&q)) || peek(&q) == '.') {
      ok = false; /* 2.0, 3L, 0x10: not an int literal tg reads */
      break;
    }
    if (negative && value != 0)
      return tg__npy_fail(p->src, TG_ERR_FORMAT, "shape %s: dim %d is negative", shown.text, ndim);
    if (too_big || value > (uint64_t)INT64_MAX)
      return tg__npy_fail(p->src, TG_ERR_FORMAT, "shape %s: dim %d does not fit int64", shown.text,
                          ndim);
    if (ndim < TG_MAX_DIMS) h->sizes[ndim] = (int64_t)value;
    ndim++;
    skip_space(&q);
    if (peek(&q) == ',') {
      q.i++;
      commas++;
    } else if (peek(&q) != ')') {
      ok = false;
    }
  }
  /* "(3)" is the int 3, not a tuple; after ')' the span ends. */
  if (!ok || q.i + 1 != q.n || (ndim == 1 && commas == 0) || (ndim == 0 && commas > 0))
    return tg__npy_fail(p->src, TG_ERR_FORMAT, "shape %s is not a tuple of ints", shown.text);
  if (ndim > TG_MAX_DIMS)
    return tg__npy_fail(p->src, TG_ERR_UNSUPPORTED,
                        "shape %s has %d dims; tg tensors have at most %d", shown.text, ndim,
                        TG_MAX_DIMS);
  h->ndim = ndim;
  /* As numpy: the bytes of the non-zero dims must fit, even when another dim is 0. */
  int64_t extent, bytes, numel = 1;
  if (tg__extent_ovf(ndim, h->sizes, &extent) ||
      tg__mul_ovf(extent, (int64_t)tg_dtype_size(h->dtype), &bytes))
    return tg__npy_fail(p->src, TG_ERR_FORMAT, "shape %s of %s overflows: more than 2^63 bytes",
                        shown.text, tg_dtype_name(h->dtype));
  for (int d = 0; d < ndim; d++) numel *= h->sizes[d]; /* <= extent */
  h->data_bytes = numel * (int64_t)tg_dtype_size(h->dtype);
  return TG_OK;
}

/* ---- the dict ---- */

static tg_status read_dict(parser *p, tg__npy_header *h) {
  span values[N_KEYS] = {{0}};
  while (peek(p) == ' ' || peek(p) == '\t') p->i++;
  if (peek(p) != '{')
    return tg__npy_fail(p->src, TG_ERR_FORMAT, "the header is not a dict: it starts with %s",
                        snip(p->s + p->i, p->n - p->i).text);
  p->i++;
  for (;;) {
    skip_space(p);
    if (peek(p) == '}') break;
    if (peek(p) != '\'' && peek(p) != '"') return syntax_error(p, "a key that is not a string");
    size_t key_at, key_len;
    tg_status st = parse_string(p, &key_at, &key_len);
    if (st != TG_OK) return st;
    skip_space(p);
    if (peek(p) != ':') return syntax_error(p, "a missing ':' after a key");
    p->i++;
    skip_space(p);
    size_t value_at = p->i;
    if ((st = skip_value(p, 0)) != TG_OK) return st;
    int key = 0;
    while (key < N_KEYS && (strlen(key_names[key]) != key_len ||
                            memcmp(key_names[key], p->s + key_at, key_len) != 0))
      key++;
    if (key == N_KEYS)
      return tg__npy_fail(p->src, TG_ERR_FORMAT,
                          "the header has the key '%s'; a .npy header has only 'descr', "
                          "'fortran_order' and 'shape'",
                          snip(p->s + key_at, key_len).text);
    if (values[key].seen)
      return tg__npy_fail(p->src, TG_ERR_FORMAT, "the header names '%s' twice", key_names[key]);
    values[key] = (span){value_at, p->i - value_at, true};
    skip_space(p);
    if (peek(p) == ',') {
      p->i++;
      continue;
    }
    if (peek(p) != '}') return syntax_error(p, "a missing ',' or '}'");
  }
  p->i++;
  skip_space(p);
  if (p->i != p->n) return syntax_error(p, "text after the dict");
  for (int key = 0; key < N_KEYS; key++)
    if (!values[key].seen)
      return tg__npy_fail(p->src, TG_ERR_FORMAT, "the header has no '%s' key", key_names[key]);
  tg_status st = read_descr(p, values[KEY_DESCR], h);
  if (st == TG_OK) st = read_fortran(p, values[KEY_FORTRAN], h);
  if (st == TG_OK) st = read_shape(p, values[KEY_SHAPE], h);
  return st;
}

tg_status tg__npy_read_header(const tg__npy_source *src, const unsigned char *data, size_t n,
                              tg__npy_header *h) {
  memset(h, 0, sizeof *h);
  size_t magic_have = n < TG__NPY_MAGIC_LEN ? n : TG__NPY_MAGIC_LEN;
  if (n == 0 || memcmp(data, TG__NPY_MAGIC, magic_have) != 0)
    return tg__npy_fail(src, TG_ERR_FORMAT,
                        "not a .npy file: it does not start with the magic \\x93NUMPY");
  if (n < TG__NPY_MAGIC_LEN + 2)
    return tg__npy_fail(src, TG_ERR_FORMAT, "truncated: %zu bytes, less than the prefix", n);
  unsigned major = data[6], minor = data[7];
  if (major < 1 || major > 3 || minor != 0)
    return tg__npy_fail(src, TG_ERR_FORMAT,
                        "unsupported .npy version %u.%u (tg reads 1.0, 2.0 and 3.0)", major, minor);
  size_t prefix = major == 1 ? 10 : 12;
  if (n < prefix)
    return tg__npy_fail(src, TG_ERR_FORMAT, "truncated: %zu bytes, less than the %zu-byte prefix",
                        n, prefix);
  size_t header_len = (size_t)data[8] | (size_t)data[9] << 8;
  if (major > 1) header_len |= (size_t)data[10] << 16 | (size_t)data[11] << 24;
  if (header_len > n - prefix)
    return tg__npy_fail(src, TG_ERR_FORMAT,
                        "truncated header: it is %zu bytes but the file has %zu after the "
                        "%zu-byte prefix",
                        header_len, n - prefix, prefix);
  if (header_len == 0 || data[prefix + header_len - 1] != '\n')
    return tg__npy_fail(src, TG_ERR_FORMAT, "the header does not end with '\\n'");
  parser p = {src, (const char *)data + prefix, header_len, 0};
  h->data_offset = prefix + header_len;
  return read_dict(&p, h);
}
