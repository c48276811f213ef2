/* The front ends tg_batch_norm, tg_layer_norm and tg_group_norm (include/tg/norm.h): each
 * checks its arguments as PyTorch does and maps its layout onto the one normalization op,
 * normalize_groups (norm.c): x read as [A, R, C, K] in G groups, per-channel affine.
 *   batch_norm [N, C, L]:  A = N, R = 1, C, K = L, G = C (a channel is a group)
 *   layer_norm [M, D]:     A = 1, R = M, C = D, K = 1, G = M (a row is a group)
 *   group_norm [N, C, HW]: A = 1, R = N, C, K = HW, G = N * num_groups
 * batch_norm in eval is x * scale + shift per channel, composed from tg ops. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/norm_internal.h"
#include "tensor/check.h"
#include "tensor/tensor_impl.h"
#include "tg/autograd.h"
#include "tg/norm.h"
#include "tg/ops.h"

/* An option's value: +0 is the default, -0 (TG_NORM_ZERO) zero; false on negative/NaN. */
static bool resolve(const char *api, const char *name, double value, double fallback, double *out) {
  if (!tg__check(value >= 0, TG_ERR_ARGUMENT, api,
                 "%s %g must be non-negative (0 = PyTorch's default %g, TG_NORM_ZERO = 0)", name,
                 value, fallback))
    return false;
  *out = value == 0 && !signbit(value) ? fallback : value;
  return true;
}

/* weight or bias: NULL (then `fill` everywhere, no grad) or [C] like x. */
static tg_tensor *affine_param(const char *api, const char *name, const tg_tensor *p,
                               const tg_tensor *x, int ndim, const int64_t *sizes, double fill) {
  const int64_t c = tg__numel(ndim, sizes);
  if (!p) return tg_full(1, &c, fill, (tg_options){x->dtype, x->storage->device, false});
  if (!tg__check_alike(api, name, p, "x", x) ||
      !tg__check(tg__dims_equal(p->ndim, p->sizes, ndim, sizes), TG_ERR_SHAPE, api,
                 "%s is %s, must be %s", name, tg__sizes_str(p), tg__dims_str(ndim, sizes)))
    return NULL;
  return tg_reshape(p, 1, &c);
}

static bool check_x(const char *api, const tg_tensor *x, int min_ndim) {
  return tg__check_arg(api, "x", x) && tg__check_floating(api, "x", x) &&
         tg__check(x->ndim >= min_ndim, TG_ERR_SHAPE, api,
                   "x must be [N, C, *] (at least 2-D), got %s", tg__sizes_str(x));
}

/* running_mean/var: both NULL, or both [C] like x. */
static bool check_running(const char *api, const tg_tensor *rm, const tg_tensor *rv,
                          const tg_tensor *x) {
  if (!tg__check(!rm == !rv, TG_ERR_ARGUMENT, api,
                 "running_mean and running_var must either both be NULL or neither be NULL"))
    return false;
  const tg_tensor *run[2] = {rm, rv};
  const char *names[2] = {"running_mean", "running_var"};
  for (int k = 0; rm && k < 2; k++)
    if (!tg__check_alike(api, names[k], run[k], "x", x) ||
        !tg__check(run[k]->ndim == 1 && run[k]->sizes[0] == x->sizes[1], TG_ERR_SHAPE, api,
                   "%s is %s; x is %s, so it must be [%lld]", names[k], tg__sizes_str(run[k]),
                   tg__sizes_str(x), (long long)x->sizes[1]))
      return false;
  return true;
}

/* [C] -> [C, 1, ...] to broadcast over x's [N, C, *]. */
static tg_tensor *per_channel(const tg_tensor *t, const tg_tensor *x) {
  int64_t sizes[TG_MAX_DIMS];
  sizes[0] = x->sizes[1];
  for (int d = 1; d < x->ndim - 1; d++) sizes[d] = 1;
  return tg_reshape(t, x->ndim - 1, sizes);
}

static tg_tensor *batch_norm_eval(const tg_tensor *x, const tg_tensor *rm, const tg_tensor *rv,
                                  const tg_tensor *w, const tg_tensor *b, double eps) {
  tg_tensor *scale = tg_mul(w, tg_pow_scalar(tg_add_scalar(tg_detach(rv), eps), -0.5));
  tg_tensor *shift = tg_sub(b, tg_mul(tg_detach(rm), scale));
  return tg_add(tg_mul(x, per_channel(scale, x)), per_channel(shift, x));
}

/* running = (1 - m) running + m batch for both, the variance unbiased; written only when
 * both new values exist, and the first restored should the second write fail. */
static tg_status update_running(tg_tensor *rm, tg_tensor *rv, const tg_tensor *mean,
                                const tg_tensor *var, double n, double m) {
  tg_no_grad_begin();
  tg_tensor *new_mean = tg_add(tg_mul_scalar(rm, 1 - m), tg_mul_scalar(mean, m));
  tg_tensor *new_var = tg_add(tg_mul_scalar(rv, 1 - m), tg_mul_scalar(var, m * n / (n - 1)));
  tg_tensor *old_mean = new_var ? tg_clone(rm) : NULL;
  tg_status st = old_mean ? tg_copy_(rm, new_mean) : tg_last_error();
  if (st == TG_OK && (st = tg_copy_(rv, new_var)) != TG_OK) {
    char why[512];
    snprintf(why, sizeof why, "%s", tg_last_error_message());
    (void)tg_copy_(rm, old_mean);
    tg_set_error(st, "%s", why);
  }
  tg_no_grad_end();
  return st;
}

tg_tensor *tg_batch_norm(const tg_tensor *x, tg_tensor *running_mean, tg_tensor *running_var,
                         const tg_tensor *weight, const tg_tensor *bias,
                         tg_batch_norm_options opts) {
  const char *api = "tg_batch_norm";
  double eps, momentum;
  if (!check_x(api, x, 2) || !check_running(api, running_mean, running_var, x) ||
      !resolve(api, "eps", opts.eps, 1e-5, &eps) ||
      !resolve(api, "momentum", opts.momentum, 0.1, &momentum))
    return NULL;
  const int64_t numel = tg__numel(x->ndim, x->sizes), C = x->sizes[1];
  const int64_t per_channel_count = C ? numel / C : 0;
  if (!tg__check(!opts.training || per_channel_count != 1, TG_ERR_SHAPE, api,
                 "Expected more than 1 value per channel when training, got input size %s",
                 tg__sizes_str(x)) ||
      !tg__check(opts.training || running_mean, TG_ERR_ARGUMENT, api,
                 "running_mean must be defined in evaluation mode (got NULL)"))
    return NULL;
  tg_scope s = tg_scope_begin();
  tg_tensor *w = affine_param(api, "weight", weight, x, 1, &C, 1.0);
  tg_tensor *b = w ? affine_param(api, "bias", bias, x, 1, &C, 0.0) : NULL;
  tg_tensor *y = NULL;
  if (b && !opts.training) {
    y = batch_norm_eval(x, running_mean, running_var, w, b, eps);
  } else if (b) {
    const int64_t L = x->sizes[0] ? per_channel_count / x->sizes[0] : 0;
    const tg_norm_layout l =
        numel ? (tg_norm_layout){x->sizes[0], 1, C, L, C} : (tg_norm_layout){0, 1, C, 1, C};
    tg_tensor *mean = NULL, *var = NULL;
    y = tg__normalize_groups(x, w, b, l, eps, &mean, &var);
    if (y && running_mean && numel &&
        update_running(running_mean, running_var, mean, var, (double)per_channel_count, momentum) !=
            TG_OK)
      y = NULL;
  }
  y = tg_scope_escape(s, y);
  tg_scope_end(s);
  return y;
}

tg_tensor *tg_layer_norm(const tg_tensor *x, int n_normalized, const int64_t *normalized_shape,
                         const tg_tensor *weight, const tg_tensor *bias,
                         tg_layer_norm_options opts) {
  const char *api = "tg_layer_norm";
  double eps;
  if (!tg__check_arg(api, "x", x) || !tg__check_floating(api, "x", x) ||
      !resolve(api, "eps", opts.eps, 1e-5, &eps) ||
      !tg__check(n_normalized >= 1 && n_normalized <= TG_MAX_DIMS && normalized_shape,
                 TG_ERR_ARGUMENT, api, "normalized_shape must have 1 to %d dims, got %d%s",
                 TG_MAX_DIMS, n_normalized, normalized_shape ? "" : " (NULL)"))
    return NULL;
  const int lead = x->ndim - n_normalized;
  char shape[256];
  tg_format_sizes(shape, sizeof shape, n_normalized, normalized_shape);
  if (!tg__check(lead >= 0 && tg__dims_equal(n_normalized, x->sizes + (lead > 0 ? lead : 0),
                                             n_normalized, normalized_shape),
                 TG_ERR_SHAPE, api,
                 "Given normalized_shape=%s, expected input with shape [*, %.*s], but got input "
                 "of size %s",
                 shape, (int)strlen(shape) - 2, shape + 1, tg__sizes_str(x)))
    return NULL;
  const int64_t D = tg__numel(n_normalized, normalized_shape), M = tg__numel(lead, x->sizes);
  tg_scope s = tg_scope_begin();
  tg_tensor *w = affine_param(api, "weight", weight, x, n_normalized, normalized_shape, 1.0);
  tg_tensor *b = w ? affine_param(api, "bias", bias, x, n_normalized, normalized_shape, 0.0) : NULL;
  tg_tensor *y =
      b ? tg__normalize_groups(x, w, b, (tg_norm_layout){1, M, D, 1, M}, eps, NULL, NULL) : NULL;
  y = tg_scope_escape(s, y);
  tg_scope_end(s);
  return y;
}

tg_tensor *tg_group_norm(const tg_tensor *x, int64_t num_groups, const tg_tensor *weight,
                         const tg_tensor *bias, tg_group_norm_options opts) {
  const char *api = "tg_group_norm";
  double eps;
  if (!check_x(api, x, 2) || !resolve(api, "eps", opts.eps, 1e-5, &eps)) return NULL;
  const int64_t N = x->sizes[0], C = x->sizes[1], HW = tg__numel(x->ndim - 2, x->sizes + 2);
  if (!tg__check(num_groups >= 1 && C % num_groups == 0, TG_ERR_SHAPE, api,
                 "Expected number of channels in input to be divisible by num_groups, but got "
                 "input of shape %s and num_groups=%lld",
                 tg__sizes_str(x), (long long)num_groups) ||
      !tg__check(HW > 0, TG_ERR_SHAPE, api, "Expected HxW to be greater than 0, got 0 (x %s)",
                 tg__sizes_str(x)))
    return NULL;
  tg_scope s = tg_scope_begin();
  tg_tensor *w = affine_param(api, "weight", weight, x, 1, &C, 1.0);
  tg_tensor *b = w ? affine_param(api, "bias", bias, x, 1, &C, 0.0) : NULL;
  tg_tensor *y = b ? tg__normalize_groups(x, w, b, (tg_norm_layout){1, N, C, HW, N * num_groups},
                                          eps, NULL, NULL)
                   : NULL;
  y = tg_scope_escape(s, y);
  tg_scope_end(s);
  return y;
}
