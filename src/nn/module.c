/* Modules (tg/module.h): named parameters, buffers and children, and the flat lists of
 * dotted names that iteration reads. Every change (register, add_child) rebuilds the flat
 * lists of the module and its ancestors before it is kept, so a change either happens whole
 * or not at all, and reading never allocates. */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <string.h>

#include "nn/module_impl.h"
#include "tensor/error_impl.h"
#include "tensor/host_memory.h"
#include "tensor/tensor_impl.h"
#include "tg/autograd.h"

#define NAME_MAX_BYTES 255

void tg__module_init(tg_module *m, const tg__module_class *cls) {
  memset(m, 0, sizeof *m);
  m->cls = cls;
  m->training = true;
}

/* Names of entries and types: non-empty, at most NAME_MAX_BYTES of [A-Za-z0-9_]. */
static bool check_name(const char *fn, const char *what, const char *name) {
  if (!name) return tg_set_error(TG_ERR_ARGUMENT, "%s: %s is NULL", fn, what), false;
  size_t len = strnlen(name, NAME_MAX_BYTES + 1);
  if (len == 0) return tg_set_error(TG_ERR_ARGUMENT, "%s: %s is empty", fn, what), false;
  if (len > NAME_MAX_BYTES)
    return tg_set_error(TG_ERR_ARGUMENT, "%s: %s is longer than %d bytes", fn, what,
                        NAME_MAX_BYTES),
           false;
  for (size_t i = 0; i < len; i++) {
    char c = name[i];
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok)
      return tg_set_error(TG_ERR_ARGUMENT,
                          "%s: %s \"%s\" has '%c' at byte %zu; names are [A-Za-z0-9_] (no dots: "
                          "dots join levels)",
                          fn, what, name, c, i),
             false;
  }
  return true;
}

static bool check_module(const char *fn, const tg_module *m) {
  if (!m) tg_set_error(TG_ERR_ARGUMENT, "%s: m is NULL", fn);
  return m != NULL;
}

/* ---- the flat lists ---- */

static void flat_free(tg__module_flat *f) {
  for (int i = 0; i < f->n; i++) tg__host_free(f->names[i]);
  tg__host_free(f->names);
  tg__host_free(f->tensors);
  *f = (tg__module_flat){0};
}

static char *join_name(const char *prefix, const char *name) {
  size_t a = strlen(prefix), b = strlen(name);
  char *s = tg__host_malloc(a + b + 2);
  if (s) {
    memcpy(s, prefix, a);
    s[a] = '.';
    memcpy(s + a + 1, name, b + 1);
  }
  return s;
}

/* The flat list of m's own entries (n_own of them) followed by each child's (which `pick`
 * chooses: its parameters or its buffers). false when out of memory, *out untouched. */
static bool flat_build(const tg_module *m, int n_own, const tg__module_entry *own, bool params,
                       tg__module_flat *out) {
  int64_t n = n_own;
  for (int c = 0; c < m->n_children; c++) {
    const tg_module *ch = m->children[c].module;
    n += params ? ch->flat_params.n : ch->flat_buffers.n;
  }
  if (n > INT_MAX) {
    tg_set_error(TG_ERR_MEMORY, "module %s: more than %d entries", tg_module_type(m), INT_MAX);
    return false;
  }
  tg__module_flat f = {0};
  if (n == 0) {
    *out = f;
    return true;
  }
  f.tensors = tg__host_calloc((size_t)n, sizeof *f.tensors);
  f.names = tg__host_calloc((size_t)n, sizeof *f.names);
  bool ok = f.tensors && f.names;
  for (int i = 0; ok && i < n_own; i++) {
    f.tensors[f.n] = own[i].tensor;
    ok = (f.names[f.n] = tg__host_strdup(own[i].name)) != NULL;
    if (ok) f.n++;
  }
  for (int c = 0; ok && c < m->n_children; c++) {
    const tg_module *ch = m->children[c].module;
    const tg__module_flat *cf = params ? &ch->flat_params : &ch->flat_buffers;
    for (int i = 0; ok && i < cf->n; i++) {
      f.tensors[f.n] = cf->tensors[i];
      ok = (f.names[f.n] = join_name(m->children[c].name, cf->names[i])) != NULL;
      if (ok) f.n++;
    }
  }
  if (!ok) {
    flat_free(&f);
    tg_set_error(TG_ERR_MEMORY, "module %s: out of memory listing the %s", tg_module_type(m),
                 params ? "parameters" : "buffers");
    return false;
  }
  *out = f;
  return true;
}

/* Rebuilds the flat lists of m and of every ancestor; on failure all stay as they were. */
static bool rebuild_up(tg_module *m) {
  tg__module_flat np, nb;
  if (!flat_build(m, m->n_params, m->params, true, &np)) return false;
  if (!flat_build(m, m->n_buffers, m->buffers, false, &nb)) {
    flat_free(&np);
    return false;
  }
  tg__module_flat op = m->flat_params, ob = m->flat_buffers;
  m->flat_params = np;
  m->flat_buffers = nb;
  if (m->parent && !rebuild_up(m->parent)) {
    m->flat_params = op;
    m->flat_buffers = ob;
    flat_free(&np);
    flat_free(&nb);
    return false;
  }
  flat_free(&op);
  flat_free(&ob);
  return true;
}

/* ---- creation and freeing ---- */

tg_module *tg_module_new(const char *type) {
  if (!check_name("tg_module_new", "type", type)) return NULL;
  tg_module *m = tg__host_malloc(sizeof *m);
  char *copy = m ? tg__host_strdup(type) : NULL;
  if (!copy) {
    tg__host_free(m);
    tg_set_error(TG_ERR_MEMORY, "tg_module_new: out of memory");
    return NULL;
  }
  tg__module_init(m, NULL);
  m->type = copy;
  return m;
}

static void module_destroy(tg_module *m) {
  for (int i = 0; i < m->n_children; i++) {
    tg_module *ch = m->children[i].module;
    ch->parent = NULL;
    tg_module_free(ch);
    tg__host_free(m->children[i].name);
  }
  for (int i = 0; i < m->n_params; i++) {
    tg_release(m->params[i].tensor);
    tg__host_free(m->params[i].name);
  }
  for (int i = 0; i < m->n_buffers; i++) {
    tg_release(m->buffers[i].tensor);
    tg__host_free(m->buffers[i].name);
  }
  tg__host_free(m->children);
  tg__host_free(m->params);
  tg__host_free(m->buffers);
  flat_free(&m->flat_params);
  flat_free(&m->flat_buffers);
  tg__host_free(m->type);
  if (m->cls && m->cls->destroy)
    m->cls->destroy(m);
  else
    tg__host_free(m);
}

void tg_module_free(tg_module *m) {
  if (!m) return;
  if (m->parent) {
    /* The parent owns it and would free it again. */
    tg_set_error(TG_ERR_STATE,
                 "tg_module_free: this %s module belongs to a %s module; free the root module",
                 tg_module_type(m), tg_module_type(m->parent));
    return;
  }
  module_destroy(m);
}

void tg__module_free_typed(tg_module *m, const char *fn, const char *what) {
  if (m->parent) {
    tg_set_error(TG_ERR_STATE, "%s: this %s belongs to a %s module; free that (the root) instead",
                 fn, what, tg_module_type(m->parent));
    return;
  }
  module_destroy(m);
}

const char *tg_module_type(const tg_module *m) {
  if (!check_module("tg_module_type", m)) return NULL;
  return m->cls ? m->cls->type : m->type;
}

/* ---- registration ---- */

/* Whether name is taken by one of m's own parameters, buffers or children. */
static const char *taken_as(const tg_module *m, const char *name) {
  for (int i = 0; i < m->n_params; i++)
    if (strcmp(m->params[i].name, name) == 0) return "a parameter";
  for (int i = 0; i < m->n_buffers; i++)
    if (strcmp(m->buffers[i].name, name) == 0) return "a buffer";
  for (int i = 0; i < m->n_children; i++)
    if (strcmp(m->children[i].name, name) == 0) return "a child module";
  return NULL;
}

static bool check_new_name(const char *fn, const tg_module *m, const char *name) {
  if (!check_name(fn, "name", name)) return false;
  const char *kind = taken_as(m, name);
  if (kind)
    return tg_set_error(TG_ERR_ARGUMENT, "%s: the %s module already has %s named \"%s\"", fn,
                        tg_module_type(m), kind, name),
           false;
  return true;
}

/* Room for one more element in *array of n elements; false when out of memory. */
static bool grow(void **array, int n, size_t elem) {
  if (n == INT_MAX) return false;
  void *grown = tg__host_realloc(*array, ((size_t)n + 1) * elem);
  if (!grown) return false;
  *array = grown;
  return true;
}

static tg_status register_entry(const char *fn, tg_module *m, const char *name, tg_tensor *t,
                                bool param) {
  int *n = param ? &m->n_params : &m->n_buffers;
  tg__module_entry **list = param ? &m->params : &m->buffers;
  char *copy = tg__host_strdup(name);
  if (!copy || !grow((void **)list, *n, sizeof **list)) {
    tg__host_free(copy);
    return tg_set_error(TG_ERR_MEMORY, "%s: out of memory", fn);
  }
  (*list)[*n] = (tg__module_entry){copy, t};
  (*n)++;
  if (!rebuild_up(m)) {
    (*n)--;
    tg__host_free(copy);
    tg__error_prefix(fn);
    return tg_last_error();
  }
  tg_retain(t);
  return TG_OK;
}

tg_status tg_module_register_parameter(tg_module *m, const char *name, tg_tensor *param) {
  static const char *fn = "tg_module_register_parameter";
  if (!check_module(fn, m) || !check_new_name(fn, m, name) || !tg__check_arg(fn, "param", param))
    return tg_last_error();
  if (!tg_dtype_is_floating(param->dtype) || param->grad_fn)
    return tg_set_error(TG_ERR_ARGUMENT,
                        "%s: parameter \"%s\" must be a floating leaf tensor (it is %s%s)", fn,
                        name, tg_dtype_name(param->dtype), param->grad_fn ? ", made by an op" : "");
  tg_status st = register_entry(fn, m, name, param, true);
  if (st == TG_OK) st = tg_set_requires_grad(param, true); /* a floating leaf: cannot fail */
  return st;
}

tg_status tg_module_register_buffer(tg_module *m, const char *name, tg_tensor *buf) {
  static const char *fn = "tg_module_register_buffer";
  if (!check_module(fn, m) || !check_new_name(fn, m, name) || !tg__check_arg(fn, "buf", buf))
    return tg_last_error();
  return register_entry(fn, m, name, buf, false);
}

tg_status tg_module_add_child(tg_module *m, const char *name, tg_module *child) {
  static const char *fn = "tg_module_add_child";
  if (!check_module(fn, m) || !check_new_name(fn, m, name)) return tg_last_error();
  if (!child) return tg_set_error(TG_ERR_ARGUMENT, "%s: child \"%s\" is NULL", fn, name);
  if (child->parent)
    return tg_set_error(TG_ERR_STATE, "%s: child \"%s\" (%s) already belongs to a %s module", fn,
                        name, tg_module_type(child), tg_module_type(child->parent));
  for (const tg_module *a = m; a; a = a->parent)
    if (a == child)
      return tg_set_error(TG_ERR_ARGUMENT,
                          "%s: child \"%s\" (%s) is the module itself or one of its ancestors "
                          "(a cycle)",
                          fn, name, tg_module_type(child));
  char *copy = tg__host_strdup(name);
  if (!copy || !grow((void **)&m->children, m->n_children, sizeof *m->children)) {
    tg__host_free(copy);
    return tg_set_error(TG_ERR_MEMORY, "%s: out of memory", fn);
  }
  m->children[m->n_children++] = (tg__module_child){copy, child};
  if (!rebuild_up(m)) {
    m->n_children--;
    tg__host_free(copy);
    tg__error_prefix(fn);
    return tg_last_error();
  }
  child->parent = m;
  return TG_OK;
}

tg_module *tg_module_child(const tg_module *m, const char *name) {
  if (!check_module("tg_module_child", m)) return NULL;
  for (int i = 0; name && i < m->n_children; i++)
    if (strcmp(m->children[i].name, name) == 0) return m->children[i].module;
  return NULL;
}

int tg_module_num_children(const tg_module *m) {
  return check_module("tg_module_num_children", m) ? m->n_children : 0;
}

tg_module *tg_module_child_at(const tg_module *m, int i, const char **name) {
  if (name) *name = NULL;
  if (!check_module("tg_module_child_at", m)) return NULL;
  if (i < 0 || i >= m->n_children) {
    tg_set_error(TG_ERR_INDEX, "tg_module_child_at: index %d outside 0..%d (%s has %d children)", i,
                 m->n_children - 1, tg_module_type(m), m->n_children);
    return NULL;
  }
  if (name) *name = m->children[i].name;
  return m->children[i].module;
}

/* ---- iteration ---- */

static tg_tensor *flat_at(const char *fn, const tg_module *m, const tg__module_flat *f,
                          const char *what, int i, const char **name) {
  if (name) *name = NULL;
  if (i < 0 || i >= f->n) {
    if (f->n == 0)
      tg_set_error(TG_ERR_INDEX, "%s: index %d, but the %s module has no %s", fn, i,
                   tg_module_type(m), what);
    else
      tg_set_error(TG_ERR_INDEX, "%s: index %d outside 0..%d (%s has %d %s)", fn, i, f->n - 1,
                   tg_module_type(m), f->n, what);
    return NULL;
  }
  if (name) *name = f->names[i];
  return f->tensors[i];
}

int tg_module_num_parameters(const tg_module *m) {
  return check_module("tg_module_num_parameters", m) ? m->flat_params.n : 0;
}

tg_tensor *tg_module_parameter(const tg_module *m, int i, const char **name) {
  if (name) *name = NULL;
  if (!check_module("tg_module_parameter", m)) return NULL;
  return flat_at("tg_module_parameter", m, &m->flat_params, "parameters", i, name);
}

int tg_module_num_buffers(const tg_module *m) {
  return check_module("tg_module_num_buffers", m) ? m->flat_buffers.n : 0;
}

tg_tensor *tg_module_buffer(const tg_module *m, int i, const char **name) {
  if (name) *name = NULL;
  if (!check_module("tg_module_buffer", m)) return NULL;
  return flat_at("tg_module_buffer", m, &m->flat_buffers, "buffers", i, name);
}

tg_tensor *tg_module_find(const tg_module *m, const char *dotted_name) {
  if (!check_module("tg_module_find", m) || !dotted_name) return NULL;
  const tg__module_flat *lists[2] = {&m->flat_params, &m->flat_buffers};
  for (int l = 0; l < 2; l++)
    for (int i = 0; i < lists[l]->n; i++)
      if (strcmp(lists[l]->names[i], dotted_name) == 0) return lists[l]->tensors[i];
  return NULL;
}

int tg_module_parameters(const tg_module *m, tg_tensor **out, int max) {
  if (!check_module("tg_module_parameters", m)) return 0;
  for (int i = 0; out && i < m->flat_params.n && i < max; i++) out[i] = m->flat_params.tensors[i];
  return m->flat_params.n;
}

int64_t tg_module_parameter_count(const tg_module *m) {
  if (!check_module("tg_module_parameter_count", m)) return 0;
  int64_t count = 0;
  for (int i = 0; i < m->flat_params.n; i++) count += tg_numel(m->flat_params.tensors[i]);
  return count;
}

/* ---- modes and gradients ---- */

void tg_module_train(tg_module *m, bool training) {
  if (!check_module("tg_module_train", m)) return;
  m->training = training;
  for (int i = 0; i < m->n_children; i++) tg_module_train(m->children[i].module, training);
}

bool tg_module_is_training(const tg_module *m) {
  return check_module("tg_module_is_training", m) && m->training;
}

tg_status tg_module_zero_grad(tg_module *m) {
  if (!check_module("tg_module_zero_grad", m)) return tg_last_error();
  for (int i = 0; i < m->flat_params.n; i++) {
    tg_status st = tg_zero_grad(m->flat_params.tensors[i]);
    if (st != TG_OK) return st;
  }
  return TG_OK;
}
