/* The Embedding layer: a table of rows picked by index (torch.nn.Embedding). */
#include "nn/module_impl.h"
#include "nn/params.h"
#include "tensor/error_impl.h"
#include "tensor/host_memory.h"
#include "tensor/tensor_impl.h"
#include "tg/autograd.h"
#include "tg/nn.h"

struct tg_embedding_layer {
  tg_module module;  /* owns the parameter "weight" */
  tg_tensor *weight; /* [num_embeddings, dim]; borrowed from module */
};

static void embedding_destroy(tg_module *m) {
  tg__host_free(TG_MODULE_CONTAINER(m, tg_embedding_layer, module));
}
static tg_tensor *embedding_module_forward(tg_module *m, const tg_tensor *indices) {
  return tg_embedding_layer_forward(TG_MODULE_CONTAINER(m, tg_embedding_layer, module), indices);
}
static const tg__module_class embedding_class = {"embedding", embedding_destroy,
                                                 embedding_module_forward};

tg_embedding_layer *tg_embedding_layer_new(int64_t num_embeddings, int64_t embedding_dim,
                                           tg_options opts, tg_generator *gen) {
  static const char *fn = "tg_embedding_layer_new";
  if (num_embeddings < 1 || embedding_dim < 1) {
    tg_set_error(TG_ERR_ARGUMENT, "%s: num_embeddings (%lld) and embedding_dim (%lld) must be >= 1",
                 fn, (long long)num_embeddings, (long long)embedding_dim);
    return NULL;
  }
  if (!tg_dtype_is_floating(opts.dtype)) {
    tg_set_error(TG_ERR_DTYPE, "%s: dtype %s is not floating (F32 or F64)", fn,
                 tg_dtype_name(opts.dtype));
    return NULL;
  }
  tg_embedding_layer *e = tg__host_calloc(1, sizeof *e);
  if (!e) {
    tg_set_error(TG_ERR_MEMORY, "%s: out of memory", fn);
    return NULL;
  }
  tg__module_init(&e->module, &embedding_class);
  /* normal(0, 1) like torch.nn.Embedding's reset_parameters */
  tg_tensor *w = tg__nn_normal_param(TG_SHAPE(num_embeddings, embedding_dim), opts, gen);
  tg_status st = w ? tg_module_register_parameter(&e->module, "weight", w) : tg_last_error();
  tg_release(w); /* the module holds its own reference */
  if (st != TG_OK) {
    tg_module_free(&e->module);
    tg__error_prefix(fn);
    return NULL;
  }
  e->weight = w;
  return e;
}

void tg_embedding_layer_free(tg_embedding_layer *e) {
  if (!e) return;
  tg__module_free_typed(&e->module, "tg_embedding_layer_free", "embedding");
}

tg_tensor *tg_embedding_layer_forward(const tg_embedding_layer *e, const tg_tensor *indices) {
  if (!e) {
    tg_set_error(TG_ERR_ARGUMENT, "tg_embedding_layer_forward: e is NULL");
    return NULL;
  }
  tg_tensor *y = tg_embedding(e->weight, indices);
  if (!y) tg__error_prefix("tg_embedding_layer_forward");
  return y;
}

tg_tensor *tg_embedding_layer_weight(const tg_embedding_layer *e) { return e ? e->weight : NULL; }
tg_module *tg_embedding_layer_module(tg_embedding_layer *e) { return e ? &e->module : NULL; }
