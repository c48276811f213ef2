/* The Linear module: y = x @ weight^T + bias. */
#include <math.h>
#include <stdlib.h>

#include "tensor/error_impl.h"
#include "tensor/host_memory.h"
#include "nn/module_impl.h"
#include "nn/params.h"
#include "tensor/tensor_impl.h"
#include "tg/nn.h"

struct tg_linear {
  tg_module module; /* owns the parameters "weight" and "bias" */
  int64_t in_features, out_features;
  int n_params;
  tg_tensor *params[2]; /* weight [out, in], bias [out] (optional); borrowed from module */
};

static void linear_destroy(tg_module *m) {
  tg__host_free(TG_MODULE_CONTAINER(m, tg_linear, module));
}
static tg_tensor *linear_module_forward(tg_module *m, const tg_tensor *x) {
  return tg_linear_forward(TG_MODULE_CONTAINER(m, tg_linear, module), x);
}
static const tg__module_class linear_class = {"linear", linear_destroy, linear_module_forward};

tg_linear *tg_linear_new(int64_t in_features, int64_t out_features, bool bias, tg_options opts,
                         tg_generator *gen) {
  if (in_features < 1 || out_features < 1) {
    tg_set_error(TG_ERR_ARGUMENT,
                 "tg_linear_new: in_features (%lld) and out_features (%lld) must be >= 1",
                 (long long)in_features, (long long)out_features);
    return NULL;
  }
  if (!tg_dtype_is_floating(opts.dtype)) {
    tg_set_error(TG_ERR_DTYPE, "tg_linear_new: dtype %s is not floating (F32 or F64)",
                 tg_dtype_name(opts.dtype));
    return NULL;
  }
  tg_linear *m = tg__host_calloc(1, sizeof *m);
  if (!m) {
    tg_set_error(TG_ERR_MEMORY, "tg_linear_new: out of memory");
    return NULL;
  }
  tg__module_init(&m->module, &linear_class);
  m->in_features = in_features;
  m->out_features = out_features;
  /* torch.nn.Linear's reset_parameters: kaiming_uniform(a=sqrt(5)) for the weight, which is
   * uniform(+-1/sqrt(in)) up to rounding, and uniform(+-1/sqrt(fan_in)) for the bias. */
  const double bound = 1.0 / sqrt((double)in_features);
  tg_tensor *w =
      tg__nn_kaiming_uniform_param(TG_SHAPE(out_features, in_features), sqrt(5.0), opts, gen);
  tg_tensor *b = w && bias ? tg__nn_uniform_param(TG_SHAPE(out_features), bound, opts, gen) : NULL;
  tg_status st = w && (b || !bias) ? TG_OK : tg_last_error();
  if (st == TG_OK) st = tg_module_register_parameter(&m->module, "weight", w);
  if (st == TG_OK && b) st = tg_module_register_parameter(&m->module, "bias", b);
  tg_release(w); /* the module holds its own references */
  tg_release(b);
  if (st != TG_OK) {
    tg_module_free(&m->module);
    tg__error_prefix("tg_linear_new");
    return NULL;
  }
  m->params[0] = w;
  m->params[1] = b;
  m->n_params = b ? 2 : 1;
  return m;
}

void tg_linear_free(tg_linear *m) {
  if (!m) return;
  tg__module_free_typed(&m->module, "tg_linear_free", "linear");
}

tg_module *tg_linear_module(tg_linear *m) { return m ? &m->module : NULL; }

tg_tensor *tg_linear_forward(const tg_linear *m, const tg_tensor *x) {
  if (!m) {
    tg_set_error(TG_ERR_ARGUMENT, "tg_linear_forward: m is NULL");
    return NULL;
  }
  static const char *fn = "tg_linear_forward";
  if (!tg__check_arg(fn, "x", x) || !tg__check_floating(fn, "x", x) ||
      !tg__check_alike(fn, "x", x, "m's weight", m->params[0]) ||
      !tg__check(x->ndim == 2 && x->sizes[1] == m->in_features, TG_ERR_SHAPE, fn,
                 "x is %s but the layer takes [batch, %lld]", tg__sizes_str(x),
                 (long long)m->in_features))
    return NULL;
  tg_tensor *wt = tg_t(m->params[0]);
  tg_tensor *y = m->params[1] ? tg_addmm(m->params[1], x, wt, 1.0, 1.0) : tg_mm(x, wt);
  if (!y) tg__error_prefix(fn); /* out of memory in the op, say: name the module first */
  return y;
}

tg_tensor *tg_linear_weight(const tg_linear *m) { return m ? m->params[0] : NULL; }
tg_tensor *tg_linear_bias(const tg_linear *m) { return m ? m->params[1] : NULL; }

int tg_linear_parameters(const tg_linear *m, tg_tensor **out, int max) {
  return m ? tg__nn_list_params(m->n_params, m->params, out, max) : 0;
}
