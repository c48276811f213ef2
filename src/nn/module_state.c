/* A module's state (tg/module.h): every parameter and buffer by dotted name, to a tensor dict
 * and back, and to and from safetensors files. */
#include <stdio.h>
#include <string.h>

#include "nn/module_impl.h"
#include "ops/backend.h"
#include "tensor/error_impl.h"
#include "tensor/host_memory.h"
#include "tensor/tensor_impl.h"
#include "tg/autograd.h"

/* ---- to a dict: torch's order, each module's parameters, its buffers, then its children ---- */

static tg_status put_entries(tg_tensor_dict *d, int n, const tg__module_entry *list, char *name,
                             size_t len) {
  for (int i = 0; i < n; i++) {
    size_t add = strlen(list[i].name);
    if (len + add > TG_TENSOR_NAME_MAX)
      return tg_set_error(TG_ERR_ARGUMENT,
                          "tg_module_state_dict: the name %.64s...%s is longer "
                          "than %d bytes",
                          name, list[i].name, TG_TENSOR_NAME_MAX);
    memcpy(name + len, list[i].name, add + 1);
    tg_scope s = tg_scope_begin();
    tg_tensor *shared = tg_detach(list[i].tensor);
    tg_status st = shared ? tg_tensor_dict_set(d, name, shared) : tg_last_error();
    tg_scope_end(s);
    if (st != TG_OK) return st;
  }
  return TG_OK;
}

/* name[0..len) is m's prefix ("" or "a.b."); the buffer holds TG_TENSOR_NAME_MAX + 1 bytes. */
static tg_status put_state(tg_tensor_dict *d, const tg_module *m, char *name, size_t len) {
  tg_status st = put_entries(d, m->n_params, m->params, name, len);
  if (st == TG_OK) st = put_entries(d, m->n_buffers, m->buffers, name, len);
  for (int c = 0; c < m->n_children && st == TG_OK; c++) {
    size_t add = strlen(m->children[c].name);
    if (len + add + 1 > TG_TENSOR_NAME_MAX)
      return tg_set_error(TG_ERR_ARGUMENT,
                          "tg_module_state_dict: names under %.64s...%s are "
                          "longer than %d bytes",
                          name, m->children[c].name, TG_TENSOR_NAME_MAX);
    memcpy(name + len, m->children[c].name, add);
    name[len + add] = '.';
    name[len + add + 1] = '\0';
    st = put_state(d, m->children[c].module, name, len + add + 1);
  }
  return st;
}

tg_tensor_dict *tg_module_state_dict(const tg_module *m) {
  if (!m) {
    tg_set_error(TG_ERR_ARGUMENT, "tg_module_state_dict: m is NULL");
    return NULL;
  }
  char name[TG_TENSOR_NAME_MAX + 1] = "";
  tg_tensor_dict *d = tg_tensor_dict_new();
  tg_status st = d ? put_state(d, m, name, 0) : tg_last_error();
  if (st != TG_OK) {
    tg_tensor_dict_free(d);
    tg__error_prefix("tg_module_state_dict");
    return NULL;
  }
  return d;
}

/* ---- from a dict ---- */

/* The report's name list, cut with "..." when it does not fit. */
typedef struct name_list {
  char *buf;
  size_t cap, len;
  bool cut;
} name_list;

static void list_add(name_list *l, const char *sep, const char *name) {
  if (l->cut) return;
  size_t need = strlen(sep) + strlen(name);
  if (l->len + need + 4 > l->cap) { /* keep room for "..." and the NUL */
    memcpy(l->buf + l->len, "...", 4);
    l->len += 3;
    l->cut = true;
    return;
  }
  l->len += (size_t)snprintf(l->buf + l->len, l->cap - l->len, "%s%s", sep, name);
}

/* One module entry the state has: where it comes from. */
typedef struct match {
  tg_tensor *dst;       /* the module's tensor */
  const tg_tensor *src; /* the state's */
  const char *name;
} match;

static tg_status check_match(const match *mt) {
  static const char *fn = "tg_module_load_state_dict";
  const tg_tensor *dst = mt->dst, *src = mt->src;
  if (dst->dtype != src->dtype)
    return tg_set_error(TG_ERR_DTYPE, "%s: \"%s\" is %s in the module but %s in the state", fn,
                        mt->name, tg_dtype_name(dst->dtype), tg_dtype_name(src->dtype));
  if (!tg__same_sizes(dst, src))
    return tg_set_error(TG_ERR_SHAPE, "%s: \"%s\" is %s in the module but %s in the state", fn,
                        mt->name, tg__sizes_str(dst), tg__sizes_str(src));
  return TG_OK;
}

struct tg__module_load {
  int n;
  tg_tensor **dst; /* the module's tensors, borrowed */
  tg_tensor **src; /* the state's, on dst's device; owned references */
};

void tg__module_load_abort(tg__module_load *l) {
  if (!l) return;
  for (int i = 0; i < l->n; i++) tg_release(l->src[i]);
  tg__host_free(l->dst);
  tg__host_free(l->src);
  tg__host_free(l);
}

/* Every check done: brings each source to its destination's device (all the allocations
 * of a load), keeping references of its own. */
static tg_status stage(int n, const match *mt, tg__module_load **out) {
  tg__module_load *l = tg__host_calloc(1, sizeof *l);
  if (l) {
    l->dst = tg__host_calloc(n ? (size_t)n : 1, sizeof *l->dst);
    l->src = tg__host_calloc(n ? (size_t)n : 1, sizeof *l->src);
  }
  if (!l || !l->dst || !l->src) {
    tg__module_load_abort(l);
    return tg_set_error(TG_ERR_MEMORY, "tg_module_load_state_dict: out of memory");
  }
  tg_status st = TG_OK;
  tg_no_grad_begin();
  tg_scope s = tg_scope_begin();
  for (int i = 0; i < n && st == TG_OK; i++) {
    tg_tensor *src = tg_to_device(mt[i].src, mt[i].dst->storage->device);
    if (!src) {
      st = tg_last_error();
      break;
    }
    l->dst[i] = mt[i].dst;
    l->src[i] = tg_retain(src);
    l->n = i + 1;
  }
  tg_scope_end(s);
  tg_no_grad_end();
  if (st != TG_OK) {
    tg__module_load_abort(l);
    return st;
  }
  *out = l;
  return TG_OK;
}

/* Copies each staged source in place. The backends' same-device copy allocates nothing, so
 * this cannot fail for memory half-way. */
tg_status tg__module_load_commit(tg__module_load *l) {
  tg_status st = TG_OK;
  for (int i = 0; i < l->n && st == TG_OK; i++) {
    const tg_backend *be = tg__backend("tg_module_load_state_dict", l->dst[i]->storage->device);
    st = be ? be->copy(l->dst[i], l->src[i]) : tg_last_error();
    if (st == TG_OK) tg__bump_version(l->dst[i]); /* an in-place write, as any other */
  }
  tg__module_load_abort(l);
  return st;
}

tg_status tg__module_load_stage(tg_module *m, const tg_tensor_dict *state, bool strict,
                                tg_load_report *report, tg__module_load **out) {
  static const char *fn = "tg_module_load_state_dict";
  tg_load_report local;
  tg_load_report *r = report ? report : &local;
  memset(r, 0, sizeof *r);
  *out = NULL;
  if (!m) return tg_set_error(TG_ERR_ARGUMENT, "%s: m is NULL", fn);
  if (!state) return tg_set_error(TG_ERR_ARGUMENT, "%s: state is NULL", fn);
  const tg__module_flat *lists[2] = {&m->flat_params, &m->flat_buffers};
  const int total = m->flat_params.n + m->flat_buffers.n;
  match *mt = tg__host_calloc(total ? (size_t)total : 1, sizeof *mt);
  if (!mt) return tg_set_error(TG_ERR_MEMORY, "%s: out of memory", fn);

  name_list missing = {r->names, sizeof r->names, 0, false};
  int n = 0;
  for (int l = 0; l < 2; l++) {
    for (int i = 0; i < lists[l]->n; i++) {
      const char *name = lists[l]->names[i];
      const tg_tensor *src = tg_tensor_dict_get(state, name);
      if (src) {
        mt[n++] = (match){lists[l]->tensors[i], src, name};
      } else {
        list_add(&missing, r->n_missing ? ", " : "missing: ", name);
        r->n_missing++;
      }
    }
  }
  for (int i = 0; i < tg_tensor_dict_size(state); i++) {
    const char *name = tg_tensor_dict_name(state, i);
    if (tg_module_find(m, name)) continue;
    const char *sep = r->n_unexpected ? ", " : r->n_missing ? "; unexpected: " : "unexpected: ";
    list_add(&missing, sep, name);
    r->n_unexpected++;
  }

  tg_status st = TG_OK;
  if (strict && (r->n_missing || r->n_unexpected))
    st = tg_set_error(TG_ERR_ARGUMENT,
                      "%s: the state does not match the %s module (%d missing, %d unexpected): %s",
                      fn, tg_module_type(m), r->n_missing, r->n_unexpected, r->names);
  for (int i = 0; i < n && st == TG_OK; i++) st = check_match(&mt[i]);
  if (st == TG_OK) st = stage(n, mt, out);
  if (st == TG_OK) r->n_loaded = n;
  tg__host_free(mt);
  return st;
}

tg_status tg_module_load_state_dict(tg_module *m, const tg_tensor_dict *state, bool strict,
                                    tg_load_report *report) {
  tg__module_load *l;
  tg_status st = tg__module_load_stage(m, state, strict, report, &l);
  if (st == TG_OK) st = tg__module_load_commit(l);
  if (st != TG_OK && report) report->n_loaded = 0;
  return st;
}

/* ---- files ---- */

tg_status tg_module_save(const tg_module *m, const char *path) {
  if (!m) return tg_set_error(TG_ERR_ARGUMENT, "tg_module_save: m is NULL");
  tg_tensor_dict *d = tg_module_state_dict(m);
  tg_status st = d ? tg_safetensors_save(path, d) : tg_last_error();
  tg_tensor_dict_free(d);
  if (st != TG_OK) tg__error_prefix("tg_module_save");
  return st;
}

tg_status tg_module_load(tg_module *m, const char *path, bool strict, tg_load_report *report) {
  if (report) memset(report, 0, sizeof *report);
  if (!m) return tg_set_error(TG_ERR_ARGUMENT, "tg_module_load: m is NULL");
  tg_tensor_dict *d = tg_safetensors_load(path);
  tg_status st = d ? tg_module_load_state_dict(m, d, strict, report) : tg_last_error();
  tg_tensor_dict_free(d);
  if (st != TG_OK) tg__error_prefix("tg_module_load");
  return st;
}
