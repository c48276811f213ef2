/* Parameter creation and listing for the nn modules. */
#include "nn/params.h"

#include "tg/autograd.h"
#include "tg/nn.h"

/* A new leaf of the given sizes that requires grad, values not yet set, with a reference of
 * the caller's own (made in a scope of its own, so no open scope keeps it). */
static tg_tensor *new_param(int ndim, const int64_t *sizes, tg_options opts) {
  opts.requires_grad = false;
  tg_scope s = tg_scope_begin();
  tg_tensor *t = tg_empty(ndim, sizes, opts);
  tg_tensor *kept = t && tg_set_requires_grad(t, true) == TG_OK ? tg_retain(t) : NULL;
  tg_scope_end(s);
  return kept;
}

/* p, or NULL (releasing p) when its initialization st failed. */
static tg_tensor *initialized(tg_tensor *p, tg_status st) {
  if (st == TG_OK) return p;
  tg_release(p);
  return NULL;
}

tg_tensor *tg__nn_uniform_param(int ndim, const int64_t *sizes, double bound, tg_options opts,
                                tg_generator *gen) {
  tg_tensor *p = new_param(ndim, sizes, opts);
  return p ? initialized(p, tg_init_uniform_(p, -bound, bound, gen)) : NULL;
}

tg_tensor *tg__nn_normal_param(int ndim, const int64_t *sizes, tg_options opts, tg_generator *gen) {
  tg_tensor *p = new_param(ndim, sizes, opts);
  return p ? initialized(p, tg_init_normal_(p, 0.0, 1.0, gen)) : NULL;
}

tg_tensor *tg__nn_kaiming_uniform_param(int ndim, const int64_t *sizes, double a, tg_options opts,
                                        tg_generator *gen) {
  tg_tensor *p = new_param(ndim, sizes, opts);
  return p ? initialized(p, tg_init_kaiming_uniform_(p, a, TG_FAN_IN, TG_NL_LEAKY_RELU, gen))
           : NULL;
}

int tg__nn_list_params(int n, tg_tensor *const *params, tg_tensor **out, int max) {
  for (int i = 0; i < n && i < max && out; i++) out[i] = params[i];
  return n;
}
