/* The module base (tg/module.h) that the typed modules (Linear, the LLTM cell, Embedding,
 * the LLTM sequence model) embed. Not part of the public API. */
#ifndef TG_NN_MODULE_IMPL_H
#define TG_NN_MODULE_IMPL_H

#include <stddef.h>

#include "tg/module.h"

/* What a concrete module type adds: its name, how to free the struct that embeds the
 * module (called by tg_module_free after the module's own entries and children are gone),
 * and its one-tensor forward for tg_module_forward (NULL: the type has none). forward gets
 * m and x checked (non-NULL); it reads m->training where train and eval differ, and returns
 * a result owned by the innermost scope, or NULL with the error recorded. */
typedef struct tg__module_class {
  const char *type;
  void (*destroy)(tg_module *m);
  tg_tensor *(*forward)(tg_module *m, const tg_tensor *x);
} tg__module_class;

typedef struct tg__module_entry {
  char *name;
  tg_tensor *tensor; /* owned reference */
} tg__module_entry;

typedef struct tg__module_child {
  char *name;
  tg_module *module; /* owned */
} tg__module_child;

/* Every parameter (or buffer) of a module and its descendants with its dotted name: rebuilt
 * whenever the module or a descendant changes, so reading never allocates. */
typedef struct tg__module_flat {
  int n;
  tg_tensor **tensors; /* borrowed from the owning modules */
  char **names;        /* owned */
} tg__module_flat;

struct tg_module {
  const tg__module_class *cls; /* NULL for tg_module_new's modules */
  char *type;                  /* tg_module_new's copy; NULL for typed modules */
  tg_module *parent;
  bool training;
  int n_params, n_buffers, n_children;
  tg__module_entry *params, *buffers;
  tg__module_child *children;
  tg__module_flat flat_params, flat_buffers;
  tg_module_forward_fn user_forward; /* tg_module_set_forward's, for tg_module_new's modules */
  void *user_data;
};

/* Makes *m (zeroed memory inside a typed struct) an empty module of class cls. Allocates
 * nothing. */
void tg__module_init(tg_module *m, const tg__module_class *cls);

/* The body of tg_<type>_free for a typed module m: frees it unless it belongs to a parent
 * (which owns it), then TG_ERR_STATE "<fn>: this <what> belongs to a <type> module; free that
 * (the root) instead". */
void tg__module_free_typed(tg_module *m, const char *fn, const char *what);

/* tg_module_load_state_dict in two steps, for a caller that loads several things all or
 * nothing (a checkpoint): stage checks everything and makes every allocation, leaving the
 * module untouched (on failure *out is NULL); then either commit, which copies the values in
 * (it allocates nothing: only a device error can fail it), or abort. Both free the staged
 * load. The module must not change in between. */
typedef struct tg__module_load tg__module_load;
tg_status tg__module_load_stage(tg_module *m, const tg_tensor_dict *state, bool strict,
                                tg_load_report *report, tg__module_load **out);
tg_status tg__module_load_commit(tg__module_load *l);
void tg__module_load_abort(tg__module_load *l); /* NULL is a no-op */

/* Whether tg_module_forward can run m (its class's forward or one set by the user). */
bool tg__module_has_forward(const tg_module *m);

/* The struct of type T that embeds the module m as its field `member`. */
#define TG_MODULE_CONTAINER(m, T, member) ((T *)(void *)((char *)(m)-offsetof(T, member)))

#endif
