/* What the safetensors reader and writer share: libcjson hooked to tg's host allocator (so
 * the allocation-failure tests reach cJSON's allocations too, and an allocation that failed
 * inside a cJSON call is told apart from bad input: cJSON returns NULL for both), the dtype
 * names and UTF-8 (byte order: io/host_bytes.h). Not part of the public API. */
#ifndef TG_SAFETENSORS_COMMON_H
#define TG_SAFETENSORS_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "tg/types.h"

/* Installs tg's allocator as cJSON's hooks, once per process (cJSON's hooks are global), and
 * clears this thread's allocation-failure flag. Call before every cJSON call sequence. */
void tg__json_begin(void);
/* Whether an allocation cJSON asked for failed on this thread since tg__json_begin. */
bool tg__json_alloc_failed(void);

/* JSON numbers are doubles in cJSON: integers below 2^53 are exact, so sizes and offsets
 * stay below it (the reader also refuses a number written with a fraction or exponent). */
#define TG__JSON_INT_LIMIT ((int64_t)1 << 53)
/* *out = item's value when item is a number holding an integer in [0, 2^53). */
bool tg__json_get_count(const cJSON *item, int64_t *out);

/* Whether s[0..len) is valid UTF-8 (no overlong forms, surrogates or code points above
 * U+10FFFF). */
bool tg__utf8_valid(const char *s, size_t len);

/* Whether the header's n bytes are what a safetensors header may be, as text: strict JSON
 * (valid UTF-8, no "\u0000"), an object, at most 3 levels deep, integers only. Once this
 * accepts, cJSON fails on the text only when out of memory. When not, why says why
 * (naming the byte). */
bool tg__st_check_header_text(const char *h, size_t n, char *why, size_t why_len);

/* "F32", "F64", "I64" and back; false for any other name. */
const char *tg__st_dtype_name(tg_dtype dtype);
bool tg__st_dtype_from_name(const char *name, tg_dtype *dtype);

#endif
