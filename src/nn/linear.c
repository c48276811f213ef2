/* The Linear module: y = x @ weight^T + bias. */
#include <math.h>
#include <stdlib.h>

#include "tensor/error_impl.h"
#include "tensor/host_memory.h"
#include "nn/params.h"
#include "tensor/tensor_impl.h"
#include "tg/nn.h"

struct tg_linear {
  int64_t in_features, out_features;
  int n_params;
  tg_tensor *params[2]; /* weight [out, in], bias [out] (optional); owned references */
};

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
  m->in_features = in_features;
  m->out_features = out_features;
  /* torch.nn.Linear's default: kaiming_uniform(a=sqrt(5)) for the weight, which is
   * uniform(+-1/sqrt(in)), and the same bound for the bias. */
  const double bound = 1.0 / sqrt((double)in_features);
  m->params[0] = tg__nn_uniform_param(TG_SHAPE(out_features, in_features), bound, opts, gen);
  m->n_params = 1;
  if (m->params[0] && bias) {
    m->params[1] = tg__nn_uniform_param(TG_SHAPE(out_features), bound, opts, gen);
    m->n_params = 2;
  }
  if (!m->params[0] || (bias && !m->params[1])) {
    tg_linear_free(m);
    return NULL;
  }
  return m;
}

void tg_linear_free(tg_linear *m) {
  if (!m) return;
  tg_release(m->params[0]);
  tg_release(m->params[1]);
  tg__host_free(m);
}

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
