/* Dropout (torch.nn.Dropout): tg_dropout in training, the identity in evaluation, drawing its
 * masks from the generator given at construction so that a seeded run repeats. */
#include <math.h>

#include "nn/module_impl.h"
#include "tensor/error_impl.h"
#include "tensor/host_memory.h"
#include "tensor/tensor_impl.h"
#include "tg/nn.h"
#include "tg/norm.h"

typedef struct dropout_layer {
  tg_module module;
  double p;
  tg_generator *gen; /* borrowed; NULL: the thread's default generator */
} dropout_layer;

static void dropout_destroy(tg_module *m) {
  tg__host_free(TG_MODULE_CONTAINER(m, dropout_layer, module));
}

static tg_tensor *dropout_forward(tg_module *m, const tg_tensor *x) {
  const dropout_layer *d = TG_MODULE_CONTAINER(m, dropout_layer, module);
  return tg_dropout(x, d->p, tg_module_is_training(m), d->gen);
}

static const tg__module_class dropout_class = {"dropout", dropout_destroy, dropout_forward};

tg_module *tg_dropout_layer_new(double p, tg_generator *gen) {
  static const char *fn = "tg_dropout_layer_new";
  if (!tg__check(p >= 0 && p <= 1, TG_ERR_ARGUMENT, fn,
                 "p (%g) is a probability: it must be in [0, 1]", p))
    return NULL;
  dropout_layer *d = tg__host_calloc(1, sizeof *d);
  if (!d) {
    tg_set_error(TG_ERR_MEMORY, "%s: out of memory", fn);
    return NULL;
  }
  tg__module_init(&d->module, &dropout_class);
  d->p = p;
  d->gen = gen;
  return &d->module;
}
