/* The fused Conv2d + BatchNorm2d's front ends (tg/conv_bn.h): argument checks, the options'
 * defaults, the running statistics, eval mode (composed: conv2d, then a per-channel affine),
 * and tg_conv2d_batch_norm_composed, the same computation from tg ops that the fused op
 * (src/ops/conv_bn.c) is checked and measured against. */
#include <math.h>

#include "ops/conv_internal.h"
#include "ops/registry.h"
#include "tensor/check.h"
#include "tensor/error_impl.h"
#include "tensor/tensor_impl.h"
#include "tg/conv_bn.h"
#include "tg/ops.h"
#include "tg/tensor_ops.h"

/* An option: 0 means the default, -0.0 zero itself; negative or NaN is an error. */
static bool resolve_option(const char *api, const char *name, double value, double fallback,
                           double *out) {
  if (!tg__check(value >= 0, TG_ERR_ARGUMENT, api, "%s = %g must be >= 0 (-0.0 for zero)", name,
                 value))
    return false;
  *out = value == 0 ? (signbit(value) ? 0.0 : fallback) : value;
  return isfinite(*out) ||
         tg__check(false, TG_ERR_ARGUMENT, api, "%s = %g must be finite", name, value);
}

static bool check_vector(const char *api, const char *arg, const tg_tensor *t, const tg_tensor *x,
                         int64_t c_out) {
  return !t || (tg__check_alike(api, arg, t, "x", x) &&
                tg__check(t->ndim == 1 && t->sizes[0] == c_out, TG_ERR_SHAPE, api,
                          "%s is %s; the conv output has %lld channels, so it must be [%lld]", arg,
                          tg__sizes_str(t), (long long)c_out, (long long)c_out));
}

/* What both front ends check, and the resolved eps and momentum. */
static bool check_call(const char *api, const tg_tensor *x, const tg_tensor *w,
                       const tg_tensor *weight, const tg_tensor *bias,
                       const tg_tensor *running_mean, const tg_tensor *running_var,
                       const tg_conv2d_opts *conv, const tg_conv_bn_options *o,
                       tg__conv_geometry *g, double *eps, double *momentum) {
  const bool reference = o->formula == TG_CONV_BN_REFERENCE;
  if (!tg__check_arg(api, "x", x) || !tg__check_arg(api, "w", w) ||
      !tg__check(o->formula == TG_CONV_BN_PYTORCH || reference, TG_ERR_ARGUMENT, api,
                 "formula %d is not a tg_conv_bn_formula", (int)o->formula) ||
      !resolve_option(api, "eps", o->eps, reference ? 1e-3 : 1e-5, eps) ||
      !resolve_option(api, "momentum", o->momentum, 0.1, momentum) ||
      !tg__check(!running_mean == !running_var, TG_ERR_ARGUMENT, api,
                 "running_mean and running_var must be both given or both NULL (%s is NULL)",
                 running_mean ? "running_var" : "running_mean") ||
      !tg__conv2d_plan(api, x, w, conv, g))
    return false;
  const int64_t c_out = w->sizes[0];
  return check_vector(api, "weight", weight, x, c_out) &&
         check_vector(api, "bias", bias, x, c_out) &&
         check_vector(api, "running_mean", running_mean, x, c_out) &&
         check_vector(api, "running_var", running_var, x, c_out) &&
         tg__check(o->training || !reference, TG_ERR_ARGUMENT, api,
                   "the reference formula is training-only (it has no running statistics)");
}

/* running = (1 - momentum) running + momentum batch, both written after both are computed. */
static bool update_running(tg_tensor *running_mean, tg_tensor *running_var, const tg_tensor *mean,
                           const tg_tensor *var_unbiased, double momentum) {
  if (!running_mean) return true;
  tg_no_grad_begin();
  tg_tensor *m = tg_add_scaled(tg_mul_scalar(running_mean, 1 - momentum), mean, momentum);
  tg_tensor *v =
      m ? tg_add_scaled(tg_mul_scalar(running_var, 1 - momentum), var_unbiased, momentum) : NULL;
  const bool ok = v && tg_copy_(running_mean, m) == TG_OK && tg_copy_(running_var, v) == TG_OK;
  tg_no_grad_end();
  return ok;
}

/* [C] as [1, C, 1, 1]. */
static tg_tensor *per_channel(const tg_tensor *v) {
  return tg_reshape(v, 4, (const int64_t[]){1, v->sizes[0], 1, 1});
}

/* eval: conv2d, then y * scale + shift with scale = weight / sqrt(running_var + eps). */
static tg_tensor *eval_forward(const tg_tensor *x, const tg_tensor *w, const tg_tensor *weight,
                               const tg_tensor *bias, const tg_tensor *running_mean,
                               const tg_tensor *running_var, const tg_conv2d_opts *conv,
                               double eps) {
  tg_tensor *y = tg_conv2d(x, w, NULL, conv);
  tg_tensor *scale = y ? tg_reciprocal(tg_sqrt(tg_add_scalar(running_var, eps))) : NULL;
  if (scale && weight) scale = tg_mul(scale, weight);
  tg_tensor *shift = scale ? tg_neg(tg_mul(running_mean, scale)) : NULL;
  if (shift && bias) shift = tg_add(shift, bias);
  return shift ? tg_add(tg_mul(y, per_channel(scale)), per_channel(shift)) : NULL;
}

/* An empty batch in training, as PyTorch's batch_norm: an empty output of the conv's shape,
 * still on the tape (weight and bias get zero gradients), and the running statistics left
 * as they are. */
static tg_tensor *empty_batch_forward(const tg_tensor *x, const tg_tensor *w,
                                      const tg_tensor *weight, const tg_tensor *bias,
                                      const tg_conv2d_opts *conv) {
  tg_tensor *y = tg_conv2d(x, w, NULL, conv);
  const int64_t channel[4] = {1, w->sizes[0], 1, 1};
  if (y && weight) y = tg_mul(y, tg_reshape(weight, 4, channel));
  if (y && bias) y = tg_add(y, tg_reshape(bias, 4, channel));
  return y;
}

tg_tensor *tg_conv2d_batch_norm(const tg_tensor *x, const tg_tensor *w, const tg_tensor *weight,
                                const tg_tensor *bias, tg_tensor *running_mean,
                                tg_tensor *running_var, const tg_conv2d_opts *conv,
                                tg_conv_bn_options opts) {
  static const char *const api = "tg_conv2d_batch_norm";
  tg__conv_geometry g;
  double eps, momentum;
  if (!check_call(api, x, w, weight, bias, running_mean, running_var, conv, &opts, &g, &eps,
                  &momentum))
    return NULL;
  if (!opts.training && !tg__check(running_mean != NULL, TG_ERR_ARGUMENT, api,
                                   "eval mode needs running_mean and running_var"))
    return NULL;
  tg_scope s = tg_scope_begin();
  tg_tensor *result = NULL;
  if (!opts.training) {
    result = eval_forward(x, w, weight, bias, running_mean, running_var, conv, eps);
  } else if (x->sizes[0] == 0) {
    result = empty_batch_forward(x, w, weight, bias, conv);
  } else {
    const int64_t c_out = w->sizes[0];
    const tg_options o = {x->dtype, x->storage->device, false};
    const tg_tensor *gamma = weight ? weight : tg_ones(1, &c_out, o);
    const tg_tensor *beta = bias ? bias : (gamma ? tg_zeros(1, &c_out, o) : NULL);
    tg_tensor *out[3] = {NULL, NULL, NULL};
    if (beta &&
        tg_apply_ex(TG__OP(conv2d_batch_norm), TG__IN(x, w, gamma, beta),
                    TG__SC(eps, (double)opts.formula), TG__CONV_INTS(g), 3, out) == TG_OK &&
        update_running(running_mean, running_var, out[1], out[2], momentum))
      result = out[0];
  }
  result = tg_scope_escape(s, result);
  tg_scope_end(s);
  if (!result) tg__error_prefix(api);
  return result;
}

/* Mean over dims 0, 2 and 3, kept as [1, C, 1, 1]. */
static tg_tensor *channel_mean(const tg_tensor *t) {
  tg_tensor *m = tg_mean_dim(t, 3, true);
  m = m ? tg_mean_dim(m, 2, true) : NULL;
  return m ? tg_mean_dim(m, 0, true) : NULL;
}

tg_tensor *tg_conv2d_batch_norm_composed(const tg_tensor *x, const tg_tensor *w,
                                         const tg_tensor *weight, const tg_tensor *bias,
                                         tg_tensor *running_mean, tg_tensor *running_var,
                                         const tg_conv2d_opts *conv, tg_conv_bn_options opts) {
  static const char *const api = "tg_conv2d_batch_norm_composed";
  tg__conv_geometry g;
  double eps, momentum;
  if (!check_call(api, x, w, weight, bias, running_mean, running_var, conv, &opts, &g, &eps,
                  &momentum) ||
      !tg__check(opts.training, TG_ERR_ARGUMENT, api, "training only"))
    return NULL;
  if (x->sizes[0] == 0) {
    tg_tensor *y = empty_batch_forward(x, w, weight, bias, conv);
    if (!y) tg__error_prefix(api);
    return y;
  }
  const double M = (double)(x->sizes[0] * g.out_h * g.out_w);
  if (!tg__check(M > 1, TG_ERR_SHAPE, api,
                 "Expected more than 1 value per channel when training, got input size %s",
                 tg__sizes_str(x)))
    return NULL;
  tg_scope s = tg_scope_begin();
  tg_tensor *y = tg_conv2d(x, w, NULL, conv);
  tg_tensor *mean = y ? channel_mean(y) : NULL;
  tg_tensor *d = mean ? tg_sub(y, mean) : NULL;
  tg_tensor *var = d ? channel_mean(tg_mul(d, d)) : NULL; /* biased */
  tg_tensor *out = NULL;
  if (var && opts.formula == TG_CONV_BN_PYTORCH)
    out = tg_mul(d, tg_reciprocal(tg_sqrt(tg_add_scalar(var, eps))));
  else if (var)
    out = tg_div(d, tg_add_scalar(tg_sqrt(tg_mul_scalar(var, M / (M - 1))), eps));
  if (out && weight) out = tg_mul(out, per_channel(weight));
  if (out && bias) out = tg_add(out, per_channel(bias));
  if (out && running_mean) {
    tg_no_grad_begin();
    tg_tensor *m = tg_reshape(mean, 1, &w->sizes[0]);
    tg_tensor *v = tg_reshape(tg_mul_scalar(var, M / (M - 1)), 1, &w->sizes[0]);
    tg_no_grad_end();
    if (!v || !update_running(running_mean, running_var, m, v, momentum)) out = NULL;
  }
  out = tg_scope_escape(s, out);
  tg_scope_end(s);
  if (!out) tg__error_prefix(api);
  return out;
}
