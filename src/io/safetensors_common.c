/* cJSON hooked to tg's host allocator, dtype names, UTF-8 (safetensors_common.h). */
#define _POSIX_C_SOURCE 200809L
#include "io/safetensors_common.h"

#include <pthread.h>
#include <string.h>

#include "tensor/host_memory.h"

static _Thread_local bool alloc_failed;

static void *json_malloc(size_t n) {
  void *p = tg__host_malloc(n);
  if (!p) alloc_failed = true;
  return p;
}

static void json_free(void *p) { tg__host_free(p); }

/* The hooks are process-wide state in libcjson: set them once, before any tg thread uses
 * cJSON. tg__host_malloc is malloc and tg__host_free is free, so blocks stay compatible
 * with a program that uses cJSON with the default hooks too. */
static pthread_once_t hooks_once = PTHREAD_ONCE_INIT;
static void install_hooks(void) {
  cJSON_Hooks hooks = {json_malloc, json_free};
  cJSON_InitHooks(&hooks);
}

void tg__json_begin(void) {
  pthread_once(&hooks_once, install_hooks);
  alloc_failed = false;
}

bool tg__json_alloc_failed(void) { return alloc_failed; }

bool tg__json_get_count(const cJSON *item, int64_t *out) {
  if (!cJSON_IsNumber(item)) return false;
  double v = item->valuedouble;
  /* NaN fails both comparisons; the range check comes before the cast. */
  if (!(v >= 0 && v < (double)TG__JSON_INT_LIMIT)) return false;
  int64_t i = (int64_t)v;
  if ((double)i != v) return false;
  *out = i;
  return true;
}

bool tg__utf8_valid(const char *s, size_t len) {
  const unsigned char *p = (const unsigned char *)s;
  size_t i = 0;
  while (i < len) {
    unsigned c = p[i];
    if (c < 0x80) {
      i++;
      continue;
    }
    int extra;
    unsigned min, cp;
    if ((c & 0xE0) == 0xC0) {
      extra = 1, min = 0x80, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      extra = 2, min = 0x800, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      extra = 3, min = 0x10000, cp = c & 0x07;
    } else {
      return false;
    }
    if (len - i <= (size_t)extra) return false;
    for (int k = 1; k <= extra; k++) {
      if ((p[i + k] & 0xC0) != 0x80) return false;
      cp = cp << 6 | (p[i + k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += (size_t)extra + 1;
  }
  return true;
}

static const struct {
  tg_dtype dtype;
  const char *name;
} dtype_names[] = {{TG_F32, "F32"}, {TG_F64, "F64"}, {TG_I64, "I64"}};

const char *tg__st_dtype_name(tg_dtype dtype) {
  for (size_t i = 0; i < sizeof dtype_names / sizeof dtype_names[0]; i++)
    if (dtype_names[i].dtype == dtype) return dtype_names[i].name;
  return NULL;
}

bool tg__st_dtype_from_name(const char *name, tg_dtype *dtype) {
  for (size_t i = 0; i < sizeof dtype_names / sizeof dtype_names[0]; i++)
    if (strcmp(dtype_names[i].name, name) == 0) {
      *dtype = dtype_names[i].dtype;
      return true;
    }
  return false;
}
