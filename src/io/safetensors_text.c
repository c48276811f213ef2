/* The safetensors header's text, checked before cJSON sees it (safetensors_common.h).
 *
 * cJSON is lenient where JSON and the Python package's reader are not: it skips any byte
 * <= 32 as white space, hands "+1", "01" or "1." to strtod, skips a byte-order mark, keeps
 * invalid UTF-8, and decodes "\u0000" into a NUL that would cut a name short. And when it
 * fails it writes a process-wide error position, which threads parsing at once would race
 * on. So the whole grammar is checked here, one pass, no allocation: once this accepts a
 * header, cJSON fails only when out of memory. Beyond JSON: the header must be an object
 * (starting with '{'), nest at most 3 levels (root, tensor entry, shape or offsets array)
 * and hold no number with a fraction or exponent (its numbers are sizes and offsets; "1.0"
 * or "1e3" would pass as integers once cJSON made doubles of them). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "io/safetensors_common.h"

enum { MAX_DEPTH = 3 };

typedef struct scan {
  const char *h;
  size_t n, i;
  char *why;
  size_t why_len;
} scan;

static bool refuse(scan *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool refuse(scan *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->why, s->why_len, fmt, ap);
  va_end(ap);
  return false;
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static int hex_value(char c) {
  if (is_digit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* The 4 hex digits at h[at..at+4) as a code unit, -1 when they are not. */
static long hex4(const scan *s, size_t at) {
  if (s->n - at < 4) return -1;
  long v = 0;
  for (size_t k = 0; k < 4; k++) {
    int d = hex_value(s->h[at + k]);
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

/* A string starting at s->i (a '"'); leaves s->i after its closing quote. */
static bool scan_string(scan *s) {
  size_t start = s->i++;
  while (s->i < s->n) {
    unsigned char c = (unsigned char)s->h[s->i];
    if (c == '"') {
      s->i++;
      return true;
    }
    if (c < 0x20)
      return refuse(s, "control character 0x%02x in a string at header byte %zu", c, s->i);
    if (c != '\\') {
      s->i++;
      continue;
    }
    char e = s->i + 1 < s->n ? s->h[s->i + 1] : '\0';
    if (strchr("\"\\/bfnrt", e) && e) {
      s->i += 2;
      continue;
    }
    if (e != 'u') return refuse(s, "invalid escape in a string at header byte %zu", s->i);
    long u = hex4(s, s->i + 2);
    if (u < 0) return refuse(s, "invalid \\u escape at header byte %zu", s->i);
    if (u == 0) return refuse(s, "\\u0000 in a string at header byte %zu", s->i);
    if (u >= 0xDC00 && u <= 0xDFFF)
      return refuse(s, "unpaired surrogate \\u%04lx at header byte %zu", u, s->i);
    if (u >= 0xD800 && u <= 0xDBFF) {
      long low = s->n - s->i >= 12 && s->h[s->i + 6] == '\\' && s->h[s->i + 7] == 'u'
                     ? hex4(s, s->i + 8)
                     : -1;
      if (low < 0xDC00 || low > 0xDFFF)
        return refuse(s, "unpaired surrogate \\u%04lx at header byte %zu", u, s->i);
      s->i += 6;
    }
    s->i += 6;
  }
  return refuse(s, "the string at header byte %zu is not closed", start);
}

/* A number at s->i: -?(0|[1-9][0-9]*) and nothing of (\.[0-9]+)?([eE][+-]?[0-9]+)? . */
static bool scan_number(scan *s) {
  size_t start = s->i, i = s->i;
  if (s->h[i] == '-') i++;
  if (i == s->n || !is_digit(s->h[i]))
    return refuse(s, "'-' at header byte %zu is not a JSON number", start);
  if (s->h[i] == '0')
    i++;
  else
    while (i < s->n && is_digit(s->h[i])) i++;
  size_t end = i;
  while (end < s->n && strchr("0123456789+-.eE", s->h[end]) && s->h[end]) end++;
  int shown = (int)(end - start < 40 ? end - start : 40);
  if (end != i) {
    bool json = true; /* a fraction or exponent, or not a number at all? */
    if (i < end && s->h[i] == '.') {
      size_t d = ++i;
      while (i < end && is_digit(s->h[i])) i++;
      json = i > d;
    }
    if (json && i < end && (s->h[i] == 'e' || s->h[i] == 'E')) {
      i++;
      if (i < end && (s->h[i] == '+' || s->h[i] == '-')) i++;
      size_t d = i;
      while (i < end && is_digit(s->h[i])) i++;
      json = i > d;
    }
    if (!json || i != end)
      return refuse(s, "'%.*s' at header byte %zu is not a JSON number", shown, s->h + start,
                    start);
    return refuse(s, "'%.*s' at header byte %zu is not an integer", shown, s->h + start, start);
  }
  s->i = end;
  return true;
}

/* true, false or null at s->i. */
static bool scan_literal(scan *s) {
  static const char *const words[3] = {"true", "false", "null"};
  for (int w = 0; w < 3; w++) {
    size_t len = strlen(words[w]);
    if (s->n - s->i >= len && memcmp(s->h + s->i, words[w], len) == 0) {
      s->i += len;
      return true;
    }
  }
  unsigned char c = (unsigned char)s->h[s->i];
  if (c >= 0x80) return refuse(s, "unexpected byte 0x%02x at header byte %zu", c, s->i);
  return refuse(s, "unexpected '%c' at header byte %zu", c, s->i);
}

typedef enum expect {
  VALUE,
  VALUE_OR_CLOSE,
  KEY,
  KEY_OR_CLOSE,
  COLON,
  COMMA_OR_CLOSE,
  DONE
} expect;

bool tg__st_check_header_text(const char *h, size_t n, char *why, size_t why_len) {
  scan s = {h, n, 0, why, why_len};
  if (n == 0 || h[0] != '{') return refuse(&s, "the %zu-byte header does not start with '{'", n);
  if (!tg__utf8_valid(h, n)) return refuse(&s, "the header is not valid UTF-8");
  char open[MAX_DEPTH]; /* the containers open around s.i: '{' or '[' */
  int depth = 0;
  expect want = VALUE;
  while (s.i < n) {
    char c = h[s.i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      s.i++;
      continue;
    }
    if ((unsigned char)c < 0x20)
      return refuse(&s, "control character 0x%02x at header byte %zu", (unsigned char)c, s.i);
    char close = depth ? (open[depth - 1] == '{' ? '}' : ']') : '\0';
    switch (want) {
    case DONE:
      return refuse(&s, "the header has more after its JSON object (at byte %zu of %zu)", s.i, n);
    case COLON:
      if (c != ':') return refuse(&s, "expected ':' at header byte %zu", s.i);
      s.i++;
      want = VALUE;
      continue;
    case COMMA_OR_CLOSE:
      if (c == ',') {
        s.i++;
        want = open[depth - 1] == '{' ? KEY : VALUE;
      } else if (c == close) {
        s.i++;
        depth--;
        want = depth ? COMMA_OR_CLOSE : DONE;
      } else {
        return refuse(&s, "expected ',' or '%c' at header byte %zu", close, s.i);
      }
      continue;
    case KEY_OR_CLOSE:
    case KEY:
      if (c == '}' && want == KEY_OR_CLOSE) {
        s.i++;
        depth--;
        want = depth ? COMMA_OR_CLOSE : DONE;
        continue;
      }
      if (c != '"') return refuse(&s, "expected a name in quotes at header byte %zu", s.i);
      if (!scan_string(&s)) return false;
      want = COLON;
      continue;
    case VALUE_OR_CLOSE:
      if (c == ']') {
        s.i++;
        depth--;
        want = depth ? COMMA_OR_CLOSE : DONE;
        continue;
      }
      /* fall through */
    case VALUE:
      if (c == '{' || c == '[') {
        if (depth == MAX_DEPTH)
          return refuse(&s, "nesting at header byte %zu is deeper than a header's %d levels", s.i,
                        MAX_DEPTH);
        open[depth++] = c;
        s.i++;
        want = c == '{' ? KEY_OR_CLOSE : VALUE_OR_CLOSE;
        continue;
      }
      if (!(c == '"'                  ? scan_string(&s)
            : c == '-' || is_digit(c) ? scan_number(&s)
                                      : scan_literal(&s)))
        return false;
      want = COMMA_OR_CLOSE; /* depth >= 1: the header starts with '{' */
      continue;
    }
  }
  if (want != DONE) return refuse(&s, "the header ends inside its JSON object (%zu bytes)", n);
  return true;
}
