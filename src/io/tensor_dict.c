/* tg_tensor_dict: an ordered name -> tensor map with string metadata (tg/io.h). Linear
 * lookup: a model's state has tens to a few thousand entries, looked up once per load. */
#define _POSIX_C_SOURCE 200809L
#include <string.h>

#include "tensor/host_memory.h"
#include "tg/io.h"

typedef struct dict_entry {
  char *name;
  tg_tensor *tensor; /* owned reference */
} dict_entry;

typedef struct meta_entry {
  char *key, *value;
} meta_entry;

struct tg_tensor_dict {
  dict_entry *entries;
  int n, cap;
  meta_entry *meta;
  int n_meta, cap_meta;
};

tg_tensor_dict *tg_tensor_dict_new(void) {
  tg_tensor_dict *d = tg__host_calloc(1, sizeof *d);
  if (!d) tg_set_error(TG_ERR_MEMORY, "tg_tensor_dict_new: out of memory");
  return d;
}

void tg_tensor_dict_free(tg_tensor_dict *d) {
  if (!d) return;
  for (int i = 0; i < d->n; i++) {
    tg__host_free(d->entries[i].name);
    tg_release(d->entries[i].tensor);
  }
  for (int i = 0; i < d->n_meta; i++) {
    tg__host_free(d->meta[i].key);
    tg__host_free(d->meta[i].value);
  }
  tg__host_free(d->entries);
  tg__host_free(d->meta);
  tg__host_free(d);
}

/* Grows *array (of elem-byte items, *cap of them) to hold one more; false when out of
 * memory (the array is left as it was). */
static bool reserve_one(void **array, int *cap, int n, size_t elem) {
  if (n < *cap) return true;
  if (*cap > (1 << 28)) return false; /* doubling must stay well inside int */
  int new_cap = *cap ? *cap * 2 : 8;
  void *grown = tg__host_realloc(*array, (size_t)new_cap * elem);
  if (!grown) return false;
  *array = grown;
  *cap = new_cap;
  return true;
}

static int find_entry(const tg_tensor_dict *d, const char *name) {
  for (int i = 0; i < d->n; i++)
    if (strcmp(d->entries[i].name, name) == 0) return i;
  return -1;
}

static bool check_name(const char *fn, const char *what, const char *name) {
  if (!name || !name[0]) {
    tg_set_error(TG_ERR_ARGUMENT, "%s: %s is %s", fn, what, name ? "empty" : "NULL");
    return false;
  }
  size_t len = strnlen(name, TG_TENSOR_NAME_MAX + 1);
  if (len > TG_TENSOR_NAME_MAX) {
    tg_set_error(TG_ERR_ARGUMENT, "%s: %s is longer than %d bytes", fn, what, TG_TENSOR_NAME_MAX);
    return false;
  }
  return true;
}

tg_status tg_tensor_dict_set(tg_tensor_dict *d, const char *name, const tg_tensor *t) {
  static const char *fn = "tg_tensor_dict_set";
  if (!d) return tg_set_error(TG_ERR_ARGUMENT, "%s: d is NULL", fn);
  if (!check_name(fn, "name", name)) return tg_last_error();
  if (!t) /* the failed result of an earlier call keeps its error, as op inputs do */
    return tg_last_error() != TG_OK
               ? tg_last_error()
               : tg_set_error(TG_ERR_ARGUMENT, "%s: tensor \"%s\" is NULL", fn, name);
  int i = find_entry(d, name);
  if (i >= 0) {
    tg_tensor *old = d->entries[i].tensor;
    d->entries[i].tensor = tg_retain(t);
    tg_release(old);
    return TG_OK;
  }
  char *copy = tg__host_strdup(name);
  if (!copy || !reserve_one((void **)&d->entries, &d->cap, d->n, sizeof *d->entries)) {
    tg__host_free(copy);
    return tg_set_error(TG_ERR_MEMORY, "%s: out of memory adding \"%s\"", fn, name);
  }
  d->entries[d->n++] = (dict_entry){copy, tg_retain(t)};
  return TG_OK;
}

tg_tensor *tg_tensor_dict_get(const tg_tensor_dict *d, const char *name) {
  if (!d || !name) return NULL;
  int i = find_entry(d, name);
  return i >= 0 ? d->entries[i].tensor : NULL;
}

int tg_tensor_dict_size(const tg_tensor_dict *d) { return d ? d->n : 0; }

static bool check_index(const char *fn, int i, int n) {
  if (i >= 0 && i < n) return true;
  tg_set_error(TG_ERR_INDEX, "%s: index %d is outside [0, %d)", fn, i, n);
  return false;
}

const char *tg_tensor_dict_name(const tg_tensor_dict *d, int i) {
  return check_index("tg_tensor_dict_name", i, tg_tensor_dict_size(d)) ? d->entries[i].name : NULL;
}

tg_tensor *tg_tensor_dict_at(const tg_tensor_dict *d, int i) {
  return check_index("tg_tensor_dict_at", i, tg_tensor_dict_size(d)) ? d->entries[i].tensor : NULL;
}

tg_status tg_tensor_dict_set_meta(tg_tensor_dict *d, const char *key, const char *value) {
  static const char *fn = "tg_tensor_dict_set_meta";
  if (!d) return tg_set_error(TG_ERR_ARGUMENT, "%s: d is NULL", fn);
  if (!check_name(fn, "key", key)) return tg_last_error();
  if (!value) return tg_set_error(TG_ERR_ARGUMENT, "%s: value of \"%s\" is NULL", fn, key);
  char *v = tg__host_strdup(value);
  if (!v) return tg_set_error(TG_ERR_MEMORY, "%s: out of memory setting \"%s\"", fn, key);
  for (int i = 0; i < d->n_meta; i++)
    if (strcmp(d->meta[i].key, key) == 0) {
      tg__host_free(d->meta[i].value);
      d->meta[i].value = v;
      return TG_OK;
    }
  char *k = tg__host_strdup(key);
  if (!k || !reserve_one((void **)&d->meta, &d->cap_meta, d->n_meta, sizeof *d->meta)) {
    tg__host_free(k);
    tg__host_free(v);
    return tg_set_error(TG_ERR_MEMORY, "%s: out of memory setting \"%s\"", fn, key);
  }
  d->meta[d->n_meta++] = (meta_entry){k, v};
  return TG_OK;
}

const char *tg_tensor_dict_get_meta(const tg_tensor_dict *d, const char *key) {
  if (!d || !key) return NULL;
  for (int i = 0; i < d->n_meta; i++)
    if (strcmp(d->meta[i].key, key) == 0) return d->meta[i].value;
  return NULL;
}

int tg_tensor_dict_meta_size(const tg_tensor_dict *d) { return d ? d->n_meta : 0; }

const char *tg_tensor_dict_meta_key(const tg_tensor_dict *d, int i) {
  return check_index("tg_tensor_dict_meta_key", i, tg_tensor_dict_meta_size(d)) ? d->meta[i].key
                                                                                : NULL;
}

const char *tg_tensor_dict_meta_value(const tg_tensor_dict *d, int i) {
  return check_index("tg_tensor_dict_meta_value", i, tg_tensor_dict_meta_size(d)) ? d->meta[i].value
                                                                                  : NULL;
}
