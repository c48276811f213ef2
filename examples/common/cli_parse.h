/* Strict number parsing for the command lines of tg's examples, benchmarks and tools.
 * Header-only (static functions), no tg include: any program can take it.
 *
 * A value is accepted only if the whole text is a number in range: "abc", "", " 5",
 * "12x", "1e3" for an integer, an overflow or a value outside [min, max] are refused with
 * one line on stderr naming the program, the option and the value, e.g.
 *     train_lltm: --steps: 'abc' is not an integer
 *     train_lltm: --steps: '-4' is out of range (1..1000000)
 * and the caller exits with CLI_EXIT_USAGE. */
#ifndef TG_CLI_PARSE_H
#define TG_CLI_PARSE_H

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The exit status of a bad command line (as getopt-based tools use). */
#define CLI_EXIT_USAGE 2

static inline void cli_range_error_i64(const char *prog, const char *opt, const char *text,
                                       int64_t min, int64_t max) {
  if (max == INT64_MAX)
    fprintf(stderr, "%s: %s: '%s' is out of range (at least %" PRId64 ")\n", prog, opt, text, min);
  else
    fprintf(stderr, "%s: %s: '%s' is out of range (%" PRId64 "..%" PRId64 ")\n", prog, opt, text,
            min, max);
}

/* A base-10 integer in [min, max]; false after printing why not. */
static inline bool cli_parse_i64(const char *prog, const char *opt, const char *text, int64_t min,
                                 int64_t max, int64_t *out) {
  const char *digits = text + (text[0] == '-' || text[0] == '+');
  if (!isdigit((unsigned char)digits[0])) { /* strtoll would skip spaces and take "" */
    fprintf(stderr, "%s: %s: '%s' is not an integer\n", prog, opt, text);
    return false;
  }
  char *end;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (*end != '\0') {
    fprintf(stderr, "%s: %s: '%s' is not an integer\n", prog, opt, text);
    return false;
  }
  if (errno == ERANGE || v < min || v > max) {
    cli_range_error_i64(prog, opt, text, min, max);
    return false;
  }
  *out = (int64_t)v;
  return true;
}

/* The same for a long long. */
static inline bool cli_parse_ll(const char *prog, const char *opt, const char *text, long long min,
                                long long max, long long *out) {
  int64_t v;
  if (!cli_parse_i64(prog, opt, text, min, max, &v)) return false;
  *out = v;
  return true;
}

/* The same for an int. */
static inline bool cli_parse_int(const char *prog, const char *opt, const char *text, int min,
                                 int max, int *out) {
  int64_t v;
  if (!cli_parse_i64(prog, opt, text, min, max, &v)) return false;
  *out = (int)v;
  return true;
}

/* A finite decimal number in [min, max]; false after printing why not. */
static inline bool cli_parse_double(const char *prog, const char *opt, const char *text, double min,
                                    double max, double *out) {
  char *end = (char *)text;
  errno = 0;
  double v = isspace((unsigned char)text[0]) ? NAN : strtod(text, &end);
  if (end == text || *end != '\0' || isnan(v)) { /* also " 5": strtod would skip the space */
    fprintf(stderr, "%s: %s: '%s' is not a number\n", prog, opt, text);
    return false;
  }
  if (errno == ERANGE || !isfinite(v) || v < min || v > max) {
    fprintf(stderr, "%s: %s: '%s' is out of range (%g..%g)\n", prog, opt, text, min, max);
    return false;
  }
  *out = v;
  return true;
}

/* The next item of a comma-separated list: copies it from *p into item (size bytes) and
 * moves *p past it and its comma. Loop with do { ... } while (*p) so that an empty list is
 * refused too. False, after a message, for an empty item ("", "a,,b", "a,", ",a") or one
 * that does not fit. */
static inline bool cli_next_item(const char *prog, const char *opt, const char *list,
                                 const char **p, char *item, size_t size) {
  size_t n = strcspn(*p, ",");
  if (n == 0 || ((*p)[n] == ',' && (*p)[n + 1] == '\0')) {
    fprintf(stderr, "%s: %s: '%s' has an empty item\n", prog, opt, list);
    return false;
  }
  if (n >= size) {
    fprintf(stderr, "%s: %s: '%s' has an item longer than %zu characters\n", prog, opt, list,
            size - 1);
    return false;
  }
  memcpy(item, *p, n);
  item[n] = '\0';
  *p += n + ((*p)[n] == ',');
  return true;
}

/* n integers in [min, max] joined by 'x' ("16x32x128"); false after printing why not. */
static inline bool cli_parse_dims(const char *prog, const char *opt, const char *text, int n,
                                  int64_t min, int64_t max, int64_t *out) {
  const char *p = text;
  for (int k = 0; k < n; k++) {
    char *end = (char *)p;
    errno = 0;
    long long v = isdigit((unsigned char)p[0]) ? strtoll(p, &end, 10) : 0;
    if (!isdigit((unsigned char)p[0]) || *end != (k + 1 < n ? 'x' : '\0')) {
      fprintf(stderr, "%s: %s: '%s' is not %d integers joined by 'x'\n", prog, opt, text, n);
      return false;
    }
    if (errno == ERANGE || v < min || v > max) {
      fprintf(stderr, "%s: %s: '%s': size %.*s is out of range (%" PRId64 "..%" PRId64 ")\n", prog,
              opt, text, (int)(end - p), p, min, max);
      return false;
    }
    out[k] = (int64_t)v;
    p = end + 1;
  }
  return true;
}

/* A comma-separated list of at most max_items such dims ("4x4x4,3x5x7"): item i goes to
 * out[i * n .. i * n + n - 1], the count to *count; false after printing why not. */
static inline bool cli_parse_dims_list(const char *prog, const char *opt, const char *text, int n,
                                       int64_t min, int64_t max, int max_items, int64_t *out,
                                       int *count) {
  const char *p = text;
  *count = 0;
  do {
    char item[64];
    if (*count == max_items) {
      fprintf(stderr, "%s: %s: '%s' has more than %d items\n", prog, opt, text, max_items);
      return false;
    }
    if (!cli_next_item(prog, opt, text, &p, item, sizeof item) ||
        !cli_parse_dims(prog, opt, item, n, min, max, out + (size_t)n * (size_t)(*count)++))
      return false;
  } while (*p);
  return true;
}

/* After getopt_long reported an unknown option or a missing value: the hint, the status. */
static inline int cli_usage_error(const char *prog) {
  fprintf(stderr, "Try '%s --help' for more information.\n", prog);
  return CLI_EXIT_USAGE;
}

#endif
