/* Parameter creation and listing for the nn modules. */
#include "nn/params.h"

#include "tg/autograd.h"

/* t (made in scope s, NULL when that failed) as a leaf that requires grad, with a reference
 * of the caller's own; ends s. */
static tg_tensor *keep_as_param(tg_scope s, tg_tensor *t) {
  tg_tensor *kept = t && tg_set_requires_grad(t, true) == TG_OK ? tg_retain(t) : NULL;
  tg_scope_end(s);
  return kept;
}

tg_tensor *tg__nn_uniform_param(int ndim, const int64_t *sizes, double bound, tg_options opts,
                                tg_generator *gen) {
  opts.requires_grad = false;
  tg_scope s = tg_scope_begin();
  return keep_as_param(s, tg_uniform(ndim, sizes, -bound, bound, opts, gen));
}

tg_tensor *tg__nn_normal_param(int ndim, const int64_t *sizes, tg_options opts, tg_generator *gen) {
  opts.requires_grad = false;
  tg_scope s = tg_scope_begin();
  return keep_as_param(s, tg_randn(ndim, sizes, opts, gen));
}

int tg__nn_list_params(int n, tg_tensor *const *params, tg_tensor **out, int max) {
  for (int i = 0; i < n && i < max && out; i++) out[i] = params[i];
  return n;
}
