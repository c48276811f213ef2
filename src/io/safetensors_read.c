/* Reading safetensors (tg/io.h): tg_safetensors_parse and tg_safetensors_load.
 *
 * The bytes are untrusted. Everything is checked before a tensor is made: the header's
 * length, its text (safetensors_text.c: strict JSON where cJSON is lenient), its structure,
 * each entry (keys, dtype, shape, offsets against the buffer and against shape times dtype
 * size), and then all entries together, sorted by offset: names unique, ranges neither
 * overlapping nor leaving a byte of the buffer uncovered (the rules of the Python package's
 * reader). Only then are the tensors made, in data order; on any failure nothing is
 * returned. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/file_io.h"
#include "io/host_bytes.h"
#include "io/safetensors_common.h"
#include "tensor/checked.h"
#include "tensor/error_impl.h"
#include "tensor/host_memory.h"
#include "tg/io.h"

/* Which call reads what: "tg_safetensors_load" and "'path'", or "..._parse" and "data". */
typedef struct source {
  const char *fn;
  const char *what;
} source;

/* Records code with "fn: what: <message>". Returns false (for `return fail(...)`). */
static bool fail(const source *src, tg_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static bool fail(const source *src, tg_status code, const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  tg_set_error(code, "%s: %s: %s", src->fn, src->what, msg);
  return false;
}

/* Names in messages are cut to this many bytes (they may be up to TG_TENSOR_NAME_MAX). */
#define NAME_SHOWN 200

typedef struct entry {
  const char *name; /* cJSON's string */
  int index;        /* position in the header */
  tg_dtype dtype;
  int ndim;
  int64_t sizes[TG_MAX_DIMS];
  int64_t begin, end;
} entry;

/* ---- one entry ---- */

static bool check_name(const source *src, const char *what, const char *name) {
  size_t len = strlen(name);
  if (len == 0) return fail(src, TG_ERR_FORMAT, "a %s is empty", what);
  if (len > TG_TENSOR_NAME_MAX)
    return fail(src, TG_ERR_FORMAT, "%s \"%.*s...\" is %zu bytes, more than %d", what, NAME_SHOWN,
                name, len, TG_TENSOR_NAME_MAX);
  return true;
}

static bool read_shape(const source *src, const char *name, const cJSON *shape, entry *e) {
  if (!cJSON_IsArray(shape))
    return fail(src, TG_ERR_FORMAT, "tensor \"%.*s\": shape is not an array", NAME_SHOWN, name);
  e->ndim = 0;
  for (const cJSON *dim = shape->child; dim; dim = dim->next) {
    if (e->ndim == TG_MAX_DIMS)
      return fail(src, TG_ERR_FORMAT, "tensor \"%.*s\": shape has %d dims, more than %d",
                  NAME_SHOWN, name, cJSON_GetArraySize(shape), TG_MAX_DIMS);
    if (!cJSON_IsNumber(dim))
      return fail(src, TG_ERR_FORMAT, "tensor \"%.*s\": shape[%d] is not a number", NAME_SHOWN,
                  name, e->ndim);
    if (!tg__json_get_count(dim, &e->sizes[e->ndim]))
      return fail(src, TG_ERR_FORMAT,
                  "tensor \"%.*s\": shape[%d] is %.17g, not an integer in [0, 2^53)", NAME_SHOWN,
                  name, e->ndim, dim->valuedouble);
    e->ndim++;
  }
  int64_t extent;
  if (tg__extent_ovf(e->ndim, e->sizes, &extent)) {
    char buf[256];
    return fail(src, TG_ERR_FORMAT, "tensor \"%.*s\": shape %s has more elements than fit int64",
                NAME_SHOWN, name, tg_format_sizes(buf, sizeof buf, e->ndim, e->sizes));
  }
  return true;
}

static bool read_offsets(const source *src, const char *name, const cJSON *offsets, entry *e,
                         uint64_t buffer_len) {
  const cJSON *b = cJSON_IsArray(offsets) ? offsets->child : NULL;
  const cJSON *en = b ? b->next : NULL;
  if (!en || en->next || !tg__json_get_count(b, &e->begin) || !tg__json_get_count(en, &e->end))
    return fail(src, TG_ERR_FORMAT,
                "tensor \"%.*s\": data_offsets is not [begin, end] (two integers in [0, 2^53))",
                NAME_SHOWN, name);
  if (e->begin > e->end)
    return fail(src, TG_ERR_FORMAT,
                "tensor \"%.*s\": data_offsets [%lld, %lld] end before they begin", NAME_SHOWN,
                name, (long long)e->begin, (long long)e->end);
  if ((uint64_t)e->end > buffer_len)
    return fail(src, TG_ERR_FORMAT,
                "tensor \"%.*s\": data_offsets [%lld, %lld] reach beyond the %llu-byte data buffer",
                NAME_SHOWN, name, (long long)e->begin, (long long)e->end,
                (unsigned long long)buffer_len);
  return true;
}

/* Shape times dtype size against the offsets, overflow-checked. */
static bool check_bytes(const source *src, const char *name, const entry *e) {
  int64_t bytes = (int64_t)tg_dtype_size(e->dtype);
  for (int d = 0; d < e->ndim; d++)
    if (tg__mul_ovf(bytes, e->sizes[d], &bytes)) {
      bytes = -1;
      break;
    }
  if (bytes == e->end - e->begin) return true;
  char buf[256];
  tg_format_sizes(buf, sizeof buf, e->ndim, e->sizes);
  if (bytes < 0)
    return fail(src, TG_ERR_FORMAT, "tensor \"%.*s\": shape %s of %s is more bytes than fit int64",
                NAME_SHOWN, name, buf, tg__st_dtype_name(e->dtype));
  return fail(src, TG_ERR_FORMAT,
              "tensor \"%.*s\": shape %s of %s is %lld bytes, data_offsets [%lld, %lld] hold %lld",
              NAME_SHOWN, name, buf, tg__st_dtype_name(e->dtype), (long long)bytes,
              (long long)e->begin, (long long)e->end, (long long)(e->end - e->begin));
}

static bool read_entry(const source *src, const cJSON *item, entry *e, uint64_t buffer_len) {
  const char *name = item->string;
  if (!check_name(src, "tensor name", name)) return false;
  if (!cJSON_IsObject(item))
    return fail(src, TG_ERR_FORMAT, "tensor \"%.*s\" is not a JSON object", NAME_SHOWN, name);
  static const char *const keys[3] = {"dtype", "shape", "data_offsets"};
  const cJSON *found[3] = {NULL, NULL, NULL};
  for (const cJSON *kv = item->child; kv; kv = kv->next) {
    int k = 0;
    while (k < 3 && strcmp(kv->string, keys[k]) != 0) k++;
    if (k == 3)
      return fail(src, TG_ERR_FORMAT, "tensor \"%.*s\": unexpected key \"%.*s\"", NAME_SHOWN, name,
                  NAME_SHOWN, kv->string);
    if (found[k])
      return fail(src, TG_ERR_FORMAT, "tensor \"%.*s\": key \"%s\" appears twice", NAME_SHOWN, name,
                  keys[k]);
    found[k] = kv;
  }
  for (int k = 0; k < 3; k++)
    if (!found[k])
      return fail(src, TG_ERR_FORMAT, "tensor \"%.*s\" has no \"%s\"", NAME_SHOWN, name, keys[k]);
  if (!cJSON_IsString(found[0]))
    return fail(src, TG_ERR_FORMAT, "tensor \"%.*s\": dtype is not a string", NAME_SHOWN, name);
  if (!tg__st_dtype_from_name(found[0]->valuestring, &e->dtype))
    return fail(src, TG_ERR_DTYPE, "tensor \"%.*s\" has dtype \"%.*s\" (tg reads F32, F64, I64)",
                NAME_SHOWN, name, 32, found[0]->valuestring);
  e->name = name;
  return read_shape(src, name, found[1], e) && read_offsets(src, name, found[2], e, buffer_len) &&
         check_bytes(src, name, e);
}

/* ---- all entries together ---- */

static int by_name(const void *a, const void *b) {
  const entry *x = a, *y = b;
  int c = strcmp(x->name, y->name);
  return c ? c : (x->index > y->index) - (x->index < y->index);
}

/* By (begin, end), then header order: zero-byte tensors may share an offset. */
static int by_offset(const void *a, const void *b) {
  const entry *x = a, *y = b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  if (x->end != y->end) return x->end < y->end ? -1 : 1;
  return (x->index > y->index) - (x->index < y->index);
}

static int by_key(const void *a, const void *b) {
  return strcmp((*(const cJSON *const *)a)->string, (*(const cJSON *const *)b)->string);
}

/* Sorted by offset, each range must start where the ranges before it end, and the last one
 * end where the buffer does. */
static bool check_coverage(const source *src, const entry *e, size_t n, uint64_t buffer_len) {
  int64_t covered = 0;
  const entry *last = NULL; /* the entry that reaches furthest so far */
  for (size_t i = 0; i < n; i++) {
    if (e[i].begin > covered)
      return fail(src, TG_ERR_FORMAT,
                  "bytes [%lld, %lld) of the data buffer belong to no tensor (a hole before "
                  "tensor \"%.*s\")",
                  (long long)covered, (long long)e[i].begin, NAME_SHOWN, e[i].name);
    if (e[i].begin < covered)
      return fail(src, TG_ERR_FORMAT,
                  "tensor \"%.*s\" at data_offsets [%lld, %lld] overlaps tensor \"%.*s\" at "
                  "[%lld, %lld]",
                  NAME_SHOWN, e[i].name, (long long)e[i].begin, (long long)e[i].end, NAME_SHOWN,
                  last->name, (long long)last->begin, (long long)last->end);
    if (e[i].end > covered || !last) last = &e[i];
    covered = e[i].end;
  }
  if ((uint64_t)covered != buffer_len)
    return fail(src, TG_ERR_FORMAT,
                "bytes [%lld, %llu) of the data buffer belong to no tensor (after the last one)",
                (long long)covered, (unsigned long long)buffer_len);
  return true;
}

/* __metadata__: an object of strings; keys valid dict keys, each once. *out gets its items
 * (an array the caller frees) in header order. */
static bool read_metadata(const source *src, const cJSON *meta, const cJSON ***out, size_t *n_out) {
  if (!cJSON_IsObject(meta)) return fail(src, TG_ERR_FORMAT, "__metadata__ is not a JSON object");
  size_t n = 0;
  for (const cJSON *kv = meta->child; kv; kv = kv->next) {
    if (!check_name(src, "metadata key", kv->string)) return false;
    if (!cJSON_IsString(kv))
      return fail(src, TG_ERR_FORMAT, "__metadata__ \"%.*s\" is not a string", NAME_SHOWN,
                  kv->string);
    n++;
  }
  const cJSON **items = tg__host_calloc(n, sizeof *items);
  const cJSON **sorted = tg__host_calloc(n, sizeof *sorted);
  if (!items || !sorted) {
    tg__host_free(items);
    tg__host_free(sorted);
    return fail(src, TG_ERR_MEMORY, "out of memory reading __metadata__ (%zu items)", n);
  }
  n = 0;
  for (const cJSON *kv = meta->child; kv; kv = kv->next) items[n++] = kv;
  memcpy(sorted, items, n * sizeof *items);
  qsort(sorted, n, sizeof *sorted, by_key);
  for (size_t i = 1; i < n; i++)
    if (strcmp(sorted[i - 1]->string, sorted[i]->string) == 0) {
      fail(src, TG_ERR_FORMAT, "__metadata__ key \"%.*s\" appears twice", NAME_SHOWN,
           sorted[i]->string);
      tg__host_free(items);
      tg__host_free(sorted);
      return false;
    }
  tg__host_free(sorted);
  *out = items;
  *n_out = n;
  return true;
}

/* Every entry of the root object, checked one by one and together; entries sorted by
 * offset into *out (freed by the caller), metadata items into *meta_out. */
static bool read_entries(const source *src, const cJSON *root, uint64_t buffer_len, entry **out,
                         size_t *n_out, const cJSON ***meta_out, size_t *n_meta) {
  size_t n = 0;
  const cJSON *meta = NULL;
  for (const cJSON *item = root->child; item; item = item->next) {
    if (strcmp(item->string, "__metadata__") != 0) {
      n++;
    } else if (meta) {
      return fail(src, TG_ERR_FORMAT, "\"__metadata__\" appears twice");
    } else {
      meta = item;
    }
  }
  /* A dict holds an int's worth; the header's size bounds n far below that anyway. */
  if (n > INT32_MAX) return fail(src, TG_ERR_FORMAT, "%zu tensors, more than %d", n, INT32_MAX);
  entry *e = tg__host_calloc(n, sizeof *e);
  if (!e) return fail(src, TG_ERR_MEMORY, "out of memory reading %zu tensor entries", n);
  size_t k = 0;
  bool ok = true;
  for (const cJSON *item = root->child; item && ok; item = item->next) {
    if (item == meta) continue;
    e[k].index = (int)k;
    ok = read_entry(src, item, &e[k], buffer_len);
    k++;
  }
  if (ok) {
    qsort(e, n, sizeof *e, by_name);
    for (size_t i = 1; i < n && ok; i++)
      if (strcmp(e[i - 1].name, e[i].name) == 0)
        ok = fail(src, TG_ERR_FORMAT, "tensor \"%.*s\" appears twice", NAME_SHOWN, e[i].name);
  }
  if (ok) {
    qsort(e, n, sizeof *e, by_offset);
    ok = check_coverage(src, e, n, buffer_len);
  }
  *meta_out = NULL;
  *n_meta = 0;
  if (ok && meta) ok = read_metadata(src, meta, meta_out, n_meta);
  if (!ok) {
    tg__host_free(e);
    return false;
  }
  *out = e;
  *n_out = n;
  return true;
}

/* ---- making the dict ---- */

static tg_tensor_dict *build_dict(const source *src, const unsigned char *buffer, const entry *e,
                                  size_t n, const cJSON **meta, size_t n_meta) {
  tg_tensor_dict *d = tg_tensor_dict_new();
  if (!d) {
    tg__error_prefix(src->fn);
    return NULL;
  }
  tg_scope sc = tg_scope_begin();
  bool ok = true;
  for (size_t i = 0; i < n && ok; i++) {
    tg_tensor *t = tg_empty(e[i].ndim, e[i].sizes, TG_OPTS(.dtype = e[i].dtype));
    if (!t) {
      ok = false;
      break;
    }
    size_t bytes = (size_t)(e[i].end - e[i].begin);
    if (bytes) {
      memcpy(tg_data_ptr(t), buffer + e[i].begin, bytes);
      tg__io_little_endian(tg_data_ptr(t), bytes, tg_dtype_size(e[i].dtype));
    }
    ok = tg_tensor_dict_set(d, e[i].name, t) == TG_OK;
  }
  for (size_t i = 0; i < n_meta && ok; i++)
    ok = tg_tensor_dict_set_meta(d, meta[i]->string, meta[i]->valuestring) == TG_OK;
  tg_scope_end(sc); /* the dict holds the tensors now */
  if (ok) return d;
  tg__error_prefix(src->fn);
  tg_tensor_dict_free(d);
  return NULL;
}

/* A file of another format that users hand to a safetensors reader by mistake: what it is
 * and what reads it, or NULL. */
static const char *other_format(const unsigned char *data, size_t nbytes) {
  if (nbytes >= 6 && memcmp(data, "\x93NUMPY", 6) == 0)
    return "it is a .npy file (tg_npy_load reads it)";
  if (nbytes >= 4 && memcmp(data, "PK\x03\x04", 4) == 0)
    return "it is a zip archive (torch.save's .pt/.pth files are: save with safetensors)";
  return NULL;
}

static tg_tensor_dict *parse(const source *src, const unsigned char *data, size_t nbytes) {
  const char *other = other_format(data, nbytes);
  if (other) {
    fail(src, TG_ERR_FORMAT, "not a safetensors file: %s", other);
    return NULL;
  }
  if (nbytes < 8) {
    fail(src, TG_ERR_FORMAT, "%zu bytes, too short for the 8-byte header length", nbytes);
    return NULL;
  }
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; i--) header_len = header_len << 8 | data[i];
  /* A length that cannot be right, and no '{' (the JSON header's start) after it: not a
   * safetensors file at all, whose first bytes are no length (naming one would mislead). */
  bool bad_length = header_len > TG_SAFETENSORS_MAX_HEADER || header_len > nbytes - 8;
  if (bad_length && nbytes > 8 && data[8] != '{') {
    fail(src, TG_ERR_FORMAT,
         "not a safetensors file: the 8-byte header length is not followed by '{' (byte 8 is "
         "0x%02x)",
         data[8]);
    return NULL;
  }
  if (header_len > TG_SAFETENSORS_MAX_HEADER) {
    fail(src, TG_ERR_FORMAT, "header length %llu is more than the %zu read at most",
         (unsigned long long)header_len, TG_SAFETENSORS_MAX_HEADER);
    return NULL;
  }
  if (header_len > nbytes - 8) {
    fail(src, TG_ERR_FORMAT, "header length %llu is beyond the end (%zu bytes follow it)",
         (unsigned long long)header_len, nbytes - 8);
    return NULL;
  }
  size_t hlen = (size_t)header_len;
  const char *header = (const char *)data + 8;
  char why[256];
  if (!tg__st_check_header_text(header, hlen, why, sizeof why)) {
    fail(src, TG_ERR_FORMAT, "%s", why);
    return NULL;
  }

  /* cJSON reads a NUL-terminated copy: nothing it does can run past the header. */
  char *text = tg__host_malloc(hlen + 1);
  if (!text) {
    fail(src, TG_ERR_MEMORY, "out of memory copying the %zu-byte header", hlen);
    return NULL;
  }
  memcpy(text, header, hlen);
  text[hlen] = '\0';
  tg__json_begin();
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(text, hlen, &end, 0);
  tg_tensor_dict *d = NULL;
  entry *entries = NULL;
  const cJSON **meta = NULL;
  size_t n = 0, n_meta = 0;
  if (!root) {
    if (tg__json_alloc_failed())
      fail(src, TG_ERR_MEMORY, "out of memory parsing the %zu-byte header", hlen);
    else /* not expected: the text was checked (fuzz_safetensors checks that it never is) */
      fail(src, TG_ERR_FORMAT, "cJSON refused the header (at byte %zu of %zu)",
           end ? (size_t)(end - text) : (size_t)0, hlen);
    goto done;
  }
  for (const char *p = end; p < text + hlen; p++)
    if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
      fail(src, TG_ERR_FORMAT, "cJSON stopped before the header's end (at byte %zu of %zu)",
           (size_t)(p - text), hlen);
      goto done;
    }
  if (!cJSON_IsObject(root)) {
    fail(src, TG_ERR_FORMAT, "the header is not a JSON object");
    goto done;
  }
  const unsigned char *buffer = data + 8 + hlen;
  uint64_t buffer_len = nbytes - 8 - hlen;
  if (read_entries(src, root, buffer_len, &entries, &n, &meta, &n_meta))
    d = build_dict(src, buffer, entries, n, meta, n_meta);
done:
  tg__host_free(meta);
  tg__host_free(entries);
  cJSON_Delete(root);
  tg__host_free(text);
  return d;
}

tg_tensor_dict *tg_safetensors_parse(const void *data, size_t nbytes) {
  source src = {"tg_safetensors_parse", "data"};
  if (!data) {
    tg_set_error(TG_ERR_ARGUMENT, "tg_safetensors_parse: data is NULL");
    return NULL;
  }
  return parse(&src, data, nbytes);
}

tg_tensor_dict *tg_safetensors_load(const char *path) {
  static const char *fn = "tg_safetensors_load";
  void *data;
  size_t nbytes;
  if (tg__read_file(fn, path, SIZE_MAX, &data, &nbytes) != TG_OK) return NULL;
  char what[512];
  snprintf(what, sizeof what, "'%s'", path);
  source src = {fn, what};
  tg_tensor_dict *d = parse(&src, data, nbytes);
  tg__host_free(data);
  return d;
}
