/* Sequential (torch.nn.Sequential): children run in order, each on the previous one's
 * output. The children are the module's own children, so state dict names are PyTorch's
 * ("0.weight", "2.bias"). */
#include <stdio.h>

#include "nn/module_impl.h"
#include "tensor/error_impl.h"
#include "tensor/host_memory.h"
#include "tensor/tensor_impl.h"
#include "tg/nn.h"

typedef struct sequential {
  tg_module module;
} sequential;

static void sequential_destroy(tg_module *m) {
  tg__host_free(TG_MODULE_CONTAINER(m, sequential, module));
}

static tg_tensor *sequential_forward(tg_module *m, const tg_tensor *x);
static const tg__module_class sequential_class = {"sequential", sequential_destroy,
                                                  sequential_forward};

tg_module *tg_sequential_new(void) {
  sequential *s = tg__host_calloc(1, sizeof *s);
  if (!s) {
    tg_set_error(TG_ERR_MEMORY, "tg_sequential_new: out of memory");
    return NULL;
  }
  tg__module_init(&s->module, &sequential_class);
  return &s->module;
}

tg_status tg_sequential_append(tg_module *seq, tg_module *child, const char *name) {
  static const char *fn = "tg_sequential_append";
  if (!tg__check_not_null(fn, "seq", seq)) return tg_last_error();
  if (seq->cls != &sequential_class)
    return tg_set_error(TG_ERR_ARGUMENT,
                        "%s: seq is a %s module, not one made by tg_sequential_new", fn,
                        tg_module_type(seq));
  if (!tg__check_not_null(fn, "child", child)) return tg_last_error();
  if (!tg__module_has_forward(child))
    return tg_set_error(TG_ERR_ARGUMENT,
                        "%s: child %d (a %s module) has no one-tensor forward, so a Sequential "
                        "cannot run it (tg_module_forward)",
                        fn, seq->n_children, tg_module_type(child));
  char index[16]; /* torch.nn.Sequential.append's name: the position */
  if (!name) snprintf(index, sizeof index, "%d", seq->n_children);
  tg_status st = tg_module_add_child(seq, name ? name : index, child);
  if (st != TG_OK) tg__error_prefix(fn);
  return st;
}

/* Each child in a scope of the call's own, so that intermediate results the graph does not
 * keep go as soon as the call ends; the last is handed to the caller's scope. */
static tg_tensor *sequential_forward(tg_module *m, const tg_tensor *x) {
  tg_scope s = tg_scope_begin();
  const tg_tensor *y = x;
  for (int i = 0; y && i < m->n_children; i++) {
    y = tg_module_forward(m->children[i].module, y);
    if (!y) {
      char prefix[320];
      snprintf(prefix, sizeof prefix, "sequential child \"%s\" (%s)", m->children[i].name,
               tg_module_type(m->children[i].module));
      tg__error_prefix(prefix);
    }
  }
  tg_tensor *out = tg_scope_escape(s, y); /* an empty Sequential returns x, as PyTorch's */
  tg_scope_end(s);
  return out;
}
