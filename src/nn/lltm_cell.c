/* The LLTM cell module: the tutorial's torch.nn.Module holding weights and bias. */
#include <math.h>
#include <stdlib.h>

#include "tensor/error_impl.h"
#include "tensor/host_memory.h"
#include "tensor/tensor_impl.h"
#include "nn/module_impl.h"
#include "nn/params.h"
#include "tg/nn.h"

struct tg_lltm_cell {
  tg_module module; /* owns the parameters "weights" and "bias" */
  int64_t input_features, state_size;
  tg_tensor *params[2]; /* weights [3S, S+I], bias [3S]; borrowed from module */
};

static void cell_destroy(tg_module *m) {
  tg__host_free(TG_MODULE_CONTAINER(m, tg_lltm_cell, module));
}
static const tg__module_class cell_class = {"lltm_cell", cell_destroy, NULL};

tg_lltm_cell *tg_lltm_cell_new(int64_t input_features, int64_t state_size, tg_options opts,
                               tg_generator *gen) {
  if (input_features < 1 || state_size < 1) {
    tg_set_error(TG_ERR_ARGUMENT,
                 "tg_lltm_cell_new: input_features (%lld) and state_size (%lld) must be >= 1",
                 (long long)input_features, (long long)state_size);
    return NULL;
  }
  if (!tg_dtype_is_floating(opts.dtype)) {
    tg_set_error(TG_ERR_DTYPE, "tg_lltm_cell_new: dtype %s is not floating (F32 or F64)",
                 tg_dtype_name(opts.dtype));
    return NULL;
  }
  tg_lltm_cell *cell = tg__host_calloc(1, sizeof *cell);
  if (!cell) {
    tg_set_error(TG_ERR_MEMORY, "tg_lltm_cell_new: out of memory");
    return NULL;
  }
  tg__module_init(&cell->module, &cell_class);
  cell->input_features = input_features;
  cell->state_size = state_size;
  /* The tutorial's reset_parameters: every parameter uniform(-1/sqrt(S), +1/sqrt(S)). */
  const double stdv = 1.0 / sqrt((double)state_size);
  tg_tensor *w =
      tg__nn_uniform_param(TG_SHAPE(3 * state_size, state_size + input_features), stdv, opts, gen);
  tg_tensor *b = w ? tg__nn_uniform_param(TG_SHAPE(3 * state_size), stdv, opts, gen) : NULL;
  tg_status st = b ? TG_OK : tg_last_error();
  if (st == TG_OK) st = tg_module_register_parameter(&cell->module, "weights", w);
  if (st == TG_OK) st = tg_module_register_parameter(&cell->module, "bias", b);
  tg_release(w); /* the module holds its own references */
  tg_release(b);
  if (st != TG_OK) {
    tg_module_free(&cell->module);
    tg__error_prefix("tg_lltm_cell_new");
    return NULL;
  }
  cell->params[0] = w;
  cell->params[1] = b;
  return cell;
}

void tg_lltm_cell_free(tg_lltm_cell *cell) {
  if (!cell) return;
  tg__module_free_typed(&cell->module, "tg_lltm_cell_free", "cell");
}

tg_module *tg_lltm_cell_module(tg_lltm_cell *cell) { return cell ? &cell->module : NULL; }

tg_status tg_lltm_cell_forward(const tg_lltm_cell *cell, tg_lltm_impl impl, const tg_tensor *input,
                               const tg_tensor *old_h, const tg_tensor *old_cell, tg_tensor **new_h,
                               tg_tensor **new_cell) {
  if (new_h) *new_h = NULL;
  if (new_cell) *new_cell = NULL;
  static const char *fn = "tg_lltm_cell_forward";
  if (!cell) return tg_set_error(TG_ERR_ARGUMENT, "tg_lltm_cell_forward: cell is NULL");
  if (!tg__check(impl == TG_LLTM_FUSED || impl == TG_LLTM_COMPOSED, TG_ERR_ARGUMENT, fn,
                 "impl %d is neither TG_LLTM_FUSED nor TG_LLTM_COMPOSED", (int)impl) ||
      !tg__check_arg(fn, "input", input) ||
      !tg__check(input->ndim == 2 && input->sizes[1] == cell->input_features, TG_ERR_SHAPE, fn,
                 "input is %s but the cell takes [batch, %lld]", tg__sizes_str(input),
                 (long long)cell->input_features))
    return tg_last_error();
  tg_status st = impl == TG_LLTM_FUSED ? tg_lltm(input, cell->params[0], cell->params[1], old_h,
                                                 old_cell, new_h, new_cell)
                                       : tg_lltm_composed(input, cell->params[0], cell->params[1],
                                                          old_h, old_cell, new_h, new_cell);
  if (st != TG_OK) tg__error_prefix(fn); /* the op's own check: name the module first */
  return st;
}

tg_tensor *tg_lltm_cell_weights(const tg_lltm_cell *cell) { return cell ? cell->params[0] : NULL; }
tg_tensor *tg_lltm_cell_bias(const tg_lltm_cell *cell) { return cell ? cell->params[1] : NULL; }
int64_t tg_lltm_cell_input_features(const tg_lltm_cell *cell) {
  return cell ? cell->input_features : 0;
}
int64_t tg_lltm_cell_state_size(const tg_lltm_cell *cell) { return cell ? cell->state_size : 0; }

int tg_lltm_cell_parameters(const tg_lltm_cell *cell, tg_tensor **out, int max) {
  return cell ? tg__nn_list_params(2, cell->params, out, max) : 0;
}
