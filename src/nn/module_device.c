/* Moving a module to a device (tg/module.h): every parameter and buffer keeps its tensor
 * object (handles, names and optimizers that hold it stay valid) and gets a copy of its
 * storage on the device, as torch.nn.Module.to(device) replaces each param.data. All the
 * copies are made first, so a failure changes nothing. */
#include <string.h>

#include "nn/module_impl.h"
#include "tensor/error_impl.h"
#include "tensor/host_memory.h"
#include "tensor/tensor_impl.h"
#include "tg/autograd.h"

typedef struct staged_move {
  tg_tensor *t;         /* borrowed from the module */
  tg_tensor *copy;      /* owned: t's values on the device, contiguous */
  tg_tensor *grad_copy; /* owned: t's gradient on the device, or NULL */
} staged_move;

/* The i-th entry of m's parameters then buffers. */
static tg_tensor *entry(const tg_module *m, int i, const char **name, const char **kind) {
  bool param = i < m->flat_params.n;
  const tg__module_flat *f = param ? &m->flat_params : &m->flat_buffers;
  int j = param ? i : i - m->flat_params.n;
  *name = f->names[j];
  *kind = param ? "parameter" : "buffer";
  return f->tensors[j];
}

/* Stages the move of t (named for errors); *mv->copy stays NULL when t is there already. */
static tg_status stage(const char *fn, tg_tensor *t, const char *kind, const char *name,
                       tg_device device, staged_move *mv) {
  mv->t = t;
  if (t->grad_fn)
    return tg_set_error(TG_ERR_STATE,
                        "%s: %s \"%s\" is the output of an op (it has history); only leaf "
                        "tensors move",
                        fn, kind, name);
  if (tg_device_equal(t->storage->device, device)) return TG_OK;
  tg_scope s = tg_scope_begin();
  tg_no_grad_begin(); /* a copy of the values, not an op on the tape */
  tg_tensor *copy = tg_contiguous(tg_to_device(t, device));
  tg_tensor *grad = tg_grad(t);
  tg_tensor *grad_copy = copy && grad ? tg_to_device(grad, device) : NULL;
  tg_no_grad_end();
  tg_status st = copy && (grad_copy || !grad) ? TG_OK : tg_last_error();
  if (st == TG_OK) {
    mv->copy = tg_retain(copy);
    mv->grad_copy = grad_copy ? tg_retain(grad_copy) : NULL;
  } else {
    char prefix[300];
    snprintf(prefix, sizeof prefix, "%s: %s \"%s\"", fn, kind, name);
    tg__error_prefix(prefix);
  }
  tg_scope_end(s);
  return st;
}

/* Gives t the copy's storage and geometry (contiguous), and the copied gradient. */
static void commit(staged_move *mv) {
  tg_tensor *t = mv->t, *copy = mv->copy;
  tg_storage *old = t->storage;
  tg__storage_retain(copy->storage);
  t->storage = copy->storage;
  t->offset = copy->offset;
  memcpy(t->strides, copy->strides, sizeof t->strides);
  t->is_view = false; /* its own storage now: no longer shares a base's */
  t->view_history = 0;
  tg__storage_release(old);
  if (mv->grad_copy) tg_set_grad(t, mv->grad_copy); /* same sizes and device: cannot fail */
}

tg_status tg_module_to_device(tg_module *m, tg_device device) {
  static const char *fn = "tg_module_to_device";
  if (!tg__check_not_null(fn, "m", m)) return tg_last_error();
  int total = m->flat_params.n + m->flat_buffers.n;
  staged_move *moves = total ? tg__host_calloc((size_t)total, sizeof *moves) : NULL;
  if (total && !moves) return tg_set_error(TG_ERR_MEMORY, "%s: out of memory", fn);
  tg_status st = TG_OK;
  int n = 0;
  for (int i = 0; st == TG_OK && i < total; i++) {
    const char *name, *kind;
    tg_tensor *t = entry(m, i, &name, &kind);
    bool seen = false; /* a tensor shared by two modules moves once */
    for (int k = 0; k < n && !seen; k++) seen = moves[k].t == t;
    if (!seen) st = stage(fn, t, kind, name, device, &moves[n++]);
  }
  for (int k = 0; k < n; k++) {
    if (st == TG_OK && moves[k].copy) commit(&moves[k]);
    tg_release(moves[k].copy);
    tg_release(moves[k].grad_copy);
  }
  tg__host_free(moves);
  return st;
}
