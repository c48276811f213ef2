/* Writing safetensors (tg/io.h): tg_safetensors_serialize and tg_safetensors_save.
 *
 * Laid out as the Python package writes it: the 8-byte little-endian header length, the
 * header (compact JSON, "__metadata__" first, then the tensors in the dict's order) padded
 * with spaces to a multiple of 8 bytes, then each tensor's elements, contiguous and
 * little-endian, one after the other. Sizes and offsets are written as integers (cJSON
 * would print large doubles with an exponent, which readers of integers refuse). */
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

#define NAME_SHOWN 200

/* Where each tensor's bytes go in the data buffer. */
typedef struct placed {
  int64_t begin, end;
} placed;

/* Checks what the file cannot hold (what the reader would refuse) and places the tensors;
 * *data_bytes: the buffer's size. */
static bool plan(const char *fn, const tg_tensor_dict *d, placed *at, int64_t *data_bytes) {
  int64_t offset = 0;
  for (int i = 0; i < tg_tensor_dict_size(d); i++) {
    const char *name = tg_tensor_dict_name(d, i);
    const tg_tensor *t = tg_tensor_dict_at(d, i);
    if (strcmp(name, "__metadata__") == 0) {
      tg_set_error(TG_ERR_ARGUMENT,
                   "%s: a tensor is named \"__metadata__\", the file's metadata key", fn);
      return false;
    }
    if (!tg__utf8_valid(name, strlen(name))) {
      tg_set_error(TG_ERR_ARGUMENT, "%s: tensor %d's name is not valid UTF-8", fn, i);
      return false;
    }
    const int64_t *sizes = tg_sizes(t);
    for (int k = 0; k < tg_ndim(t); k++)
      if (sizes[k] >= TG__JSON_INT_LIMIT) {
        tg_set_error(TG_ERR_ARGUMENT, "%s: tensor \"%.*s\": size %lld of dim %d is not below 2^53",
                     fn, NAME_SHOWN, name, (long long)sizes[k], k);
        return false;
      }
    int64_t bytes, end;
    if (tg__mul_ovf(tg_numel(t), (int64_t)tg_dtype_size(tg_tensor_dtype(t)), &bytes) ||
        tg__add_ovf(offset, bytes, &end) || end >= TG__JSON_INT_LIMIT) {
      tg_set_error(TG_ERR_ARGUMENT, "%s: the tensors up to \"%.*s\" reach 2^53 bytes", fn,
                   NAME_SHOWN, name);
      return false;
    }
    at[i] = (placed){offset, end};
    offset = end;
  }
  for (int i = 0; i < tg_tensor_dict_meta_size(d); i++) {
    const char *key = tg_tensor_dict_meta_key(d, i), *value = tg_tensor_dict_meta_value(d, i);
    if (!tg__utf8_valid(key, strlen(key)) || !tg__utf8_valid(value, strlen(value))) {
      tg_set_error(TG_ERR_ARGUMENT, "%s: metadata item %d is not valid UTF-8", fn, i);
      return false;
    }
  }
  *data_bytes = offset;
  return true;
}

/* Appends an integer (printed exactly) to a cJSON array. */
static bool add_integer(cJSON *array, int64_t v) {
  char buf[24];
  snprintf(buf, sizeof buf, "%lld", (long long)v);
  cJSON *raw = cJSON_CreateRaw(buf);
  if (raw && cJSON_AddItemToArray(array, raw)) return true;
  cJSON_Delete(raw);
  return false;
}

/* The header's JSON tree; NULL only when an allocation failed. */
static cJSON *build_header(const tg_tensor_dict *d, const placed *at) {
  cJSON *root = cJSON_CreateObject();
  bool ok = root != NULL;
  if (ok && tg_tensor_dict_meta_size(d) > 0) {
    cJSON *meta = cJSON_AddObjectToObject(root, "__metadata__");
    ok = meta != NULL;
    for (int i = 0; i < tg_tensor_dict_meta_size(d) && ok; i++)
      ok = cJSON_AddStringToObject(meta, tg_tensor_dict_meta_key(d, i),
                                   tg_tensor_dict_meta_value(d, i)) != NULL;
  }
  for (int i = 0; i < tg_tensor_dict_size(d) && ok; i++) {
    const tg_tensor *t = tg_tensor_dict_at(d, i);
    cJSON *info = cJSON_AddObjectToObject(root, tg_tensor_dict_name(d, i));
    cJSON *shape = NULL, *offsets = NULL;
    ok = info && cJSON_AddStringToObject(info, "dtype", tg__st_dtype_name(tg_tensor_dtype(t))) &&
         (shape = cJSON_AddArrayToObject(info, "shape")) &&
         (offsets = cJSON_AddArrayToObject(info, "data_offsets"));
    for (int k = 0; k < tg_ndim(t) && ok; k++) ok = add_integer(shape, tg_sizes(t)[k]);
    ok = ok && add_integer(offsets, at[i].begin) && add_integer(offsets, at[i].end);
  }
  if (ok) return root;
  cJSON_Delete(root);
  return NULL;
}

/* The header text, padded with spaces to a multiple of 8 bytes (*len), tg__host_malloc'd. */
static char *header_text(const char *fn, const tg_tensor_dict *d, const placed *at, size_t *len) {
  tg__json_begin();
  cJSON *root = build_header(d, at);
  char *json = root ? cJSON_PrintUnformatted(root) : NULL;
  cJSON_Delete(root);
  if (!json) {
    if (tg__json_alloc_failed())
      tg_set_error(TG_ERR_MEMORY, "%s: out of memory writing the header of %d tensors", fn,
                   tg_tensor_dict_size(d));
    else /* cJSON prints at most INT_MAX bytes */
      tg_set_error(TG_ERR_ARGUMENT, "%s: the header of %d tensors is too large to print", fn,
                   tg_tensor_dict_size(d));
    return NULL;
  }
  size_t n = strlen(json);
  size_t padded = n + (8 - n % 8) % 8;
  if (padded > TG_SAFETENSORS_MAX_HEADER) {
    tg_set_error(TG_ERR_ARGUMENT,
                 "%s: the header would be %zu bytes, more than the %zu readers take", fn, padded,
                 TG_SAFETENSORS_MAX_HEADER);
    tg__host_free(json);
    return NULL;
  }
  char *text = tg__host_malloc(padded);
  if (!text) {
    tg_set_error(TG_ERR_MEMORY, "%s: out of memory for a %zu-byte header", fn, padded);
  } else {
    memcpy(text, json, n);
    memset(text + n, ' ', padded - n);
    *len = padded;
  }
  tg__host_free(json);
  return text;
}

/* Copies every tensor's elements into data (any device, any strides), little-endian. */
static bool write_data(const char *fn, const tg_tensor_dict *d, const placed *at,
                       unsigned char *data) {
  bool ok = true;
  for (int i = 0; i < tg_tensor_dict_size(d) && ok; i++) {
    const tg_tensor *t = tg_tensor_dict_at(d, i);
    size_t bytes = (size_t)(at[i].end - at[i].begin);
    if (bytes == 0) continue;
    ok = tg__io_host_le_bytes(t, data + at[i].begin, bytes) == TG_OK;
  }
  if (!ok) tg__error_prefix(fn);
  return ok;
}

static void *serialize(const char *fn, const tg_tensor_dict *d, size_t *nbytes) {
  if (nbytes) *nbytes = 0;
  if (!d || !nbytes) {
    tg_set_error(TG_ERR_ARGUMENT, "%s: %s is NULL", fn, d ? "nbytes" : "d");
    return NULL;
  }
  int n = tg_tensor_dict_size(d);
  placed *at = tg__host_calloc((size_t)n, sizeof *at);
  if (!at) {
    tg_set_error(TG_ERR_MEMORY, "%s: out of memory placing %d tensors", fn, n);
    return NULL;
  }
  int64_t data_bytes = 0;
  size_t header_len = 0;
  char *header = NULL;
  unsigned char *out = NULL;
  if (!plan(fn, d, at, &data_bytes) || !(header = header_text(fn, d, at, &header_len))) goto done;
  if ((uint64_t)data_bytes > SIZE_MAX - 8 - header_len) {
    tg_set_error(TG_ERR_ARGUMENT, "%s: %lld bytes of tensors do not fit in memory", fn,
                 (long long)data_bytes);
    goto done;
  }
  size_t total = 8 + header_len + (size_t)data_bytes;
  out = tg__host_malloc(total);
  if (!out) {
    tg_set_error(TG_ERR_MEMORY, "%s: out of memory for %zu bytes", fn, total);
    goto done;
  }
  for (int i = 0; i < 8; i++) out[i] = (unsigned char)((uint64_t)header_len >> (8 * i));
  memcpy(out + 8, header, header_len);
  if (!write_data(fn, d, at, out + 8 + header_len)) {
    tg__host_free(out);
    out = NULL;
    goto done;
  }
  *nbytes = total;
done:
  tg__host_free(header);
  tg__host_free(at);
  return out;
}

void *tg_safetensors_serialize(const tg_tensor_dict *d, size_t *nbytes) {
  return serialize("tg_safetensors_serialize", d, nbytes);
}

tg_status tg_safetensors_save(const char *path, const tg_tensor_dict *d) {
  static const char *fn = "tg_safetensors_save";
  if (!path) return tg_set_error(TG_ERR_ARGUMENT, "%s: path is NULL", fn);
  size_t nbytes;
  void *data = serialize(fn, d, &nbytes);
  if (!data) return tg_last_error();
  tg_status st = tg__write_file_atomic(fn, path, data, nbytes);
  tg__host_free(data);
  return st;
}
