/* conv2d_batch_norm: Conv2d followed by BatchNorm2d in training, as one op that keeps for
 * backward only the convolution's input x and weight w (plus gamma and three [c] vectors) and
 * recomputes the convolution in backward: the reference's "Fusing Convolution and Batch
 * Normalization" (shared/reference/extending-pytorch-zh.txt), applied to memory. The
 * composed conv2d -> batch norm keeps the conv output y, as large as the result.
 *
 * Per channel, with m the batch mean of y and M = n * out_h * out_w:
 *   out = gamma * (y - m) * r + beta
 * where r = 1 / sqrt(var_biased + eps) (PyTorch's batch_norm) or 1 / (sqrt(var_unbiased) + eps)
 * (the reference's formula). Both backwards have the same form,
 *   dy = grad * k1 + y * k2 + k3,   k1 = gamma r,  k2 = -gamma c2 S2,  k3 = -k1 S1 / M - k2 m,
 * with S1 = sum grad, S2 = sum grad (y - m), and c2 = d r / d(S2-direction) per formula:
 * r^3 / M (PyTorch's), r^2 / ((M - 1) s) with s = sqrt(var_unbiased) (the reference's);
 * dgamma = r S2, dbeta = S1. So the forward saves m, r and c2, and both formulas share the
 * kernels. Its list entry and kernel lines: src/ops/def/conv_bn.def; kernels:
 * src/ops/cpu/conv_bn_cpu.c, src/ops/cuda/conv_bn.cu; front end: src/ops/conv_bn_api.c. */
#include <math.h>

#include "autograd/node.h"
#include "ops/backend.h"
#include "ops/conv_internal.h"
#include "ops/registry.h"
#include "tensor/check.h"
#include "tensor/tensor_impl.h"
#include "tg/conv_bn.h"
#include "tg/ops.h"
#include "tg/tensor_ops.h"

static const char *const op = "conv2d_batch_norm";

/* scalars: eps, the formula (tg_conv_bn_formula) */
enum { SCALAR_EPS, SCALAR_FORMULA, NUM_SCALARS };
/* what forward saves, in order */
enum { SAVED_X, SAVED_W, SAVED_GAMMA, SAVED_MEAN, SAVED_R, SAVED_C2 };

static tg_options options_of(const tg_tensor *t) {
  return (tg_options){t->dtype, t->storage->device, false};
}

/* y [n, c, h, w] as the kernels' planes [n, c, l]. */
static tg_tensor *planes(const tg_tensor *y) {
  return tg_reshape(y, 3, (const int64_t[]){y->sizes[0], y->sizes[1], y->sizes[2] * y->sizes[3]});
}

static tg_tensor *vector(const tg_tensor *like, int64_t c) {
  return tg_empty(1, &c, options_of(like));
}

static bool check_channel_vector(const char *arg, const tg_tensor *t, const tg_tensor *x,
                                 int64_t c_out) {
  return tg__check_alike(op, arg, t, "x", x) &&
         tg__check(t->ndim == 1 && t->sizes[0] == c_out, TG_ERR_SHAPE, op,
                   "%s is %s; the conv output has %lld channels, so it must be [%lld]", arg,
                   tg__sizes_str(t), (long long)c_out, (long long)c_out);
}

static bool check_call(const tg_ctx *ctx, const tg_tensor *const *in, tg__conv_geometry *g) {
  const tg_tensor *x = in[0], *w = in[1];
  const double eps = tg_ctx_scalar(ctx, SCALAR_EPS), formula = tg_ctx_scalar(ctx, SCALAR_FORMULA);
  if (!tg__check(tg_ctx_num_scalars(ctx) == NUM_SCALARS, TG_ERR_ARGUMENT, op,
                 "takes 2 scalars (eps, formula), %d given", tg_ctx_num_scalars(ctx)) ||
      !tg__check(eps >= 0 && isfinite(eps), TG_ERR_ARGUMENT, op, "eps = %g must be finite and >= 0",
                 eps) ||
      !tg__check(formula == TG_CONV_BN_PYTORCH || formula == TG_CONV_BN_REFERENCE, TG_ERR_ARGUMENT,
                 op, "formula = %g is not a tg_conv_bn_formula", formula) ||
      !tg__conv_geometry_of(op, ctx, g) || !tg__check_floating(op, "x", x) ||
      !tg__check(x->ndim == 4 && x->sizes[2] == g->h && x->sizes[3] == g->w, TG_ERR_SHAPE, op,
                 "x is %s but the geometry's image is [n, c, %lld, %lld]", tg__sizes_str(x),
                 (long long)g->h, (long long)g->w) ||
      !tg__check_alike(op, "w", w, "x", x) ||
      !tg__check(w->ndim == 4 && w->sizes[2] == g->kernel_h && w->sizes[3] == g->kernel_w &&
                     w->sizes[0] % g->groups == 0 && x->sizes[1] == w->sizes[1] * g->groups,
                 TG_ERR_SHAPE, op,
                 "w is %s: it must be [c_out, c_in / groups, %lld, %lld] with c_out divisible "
                 "by groups = %lld and x %s",
                 tg__sizes_str(w), (long long)g->kernel_h, (long long)g->kernel_w,
                 (long long)g->groups, tg__sizes_str(x)) ||
      !check_channel_vector("gamma", in[2], x, w->sizes[0]) ||
      !check_channel_vector("beta", in[3], x, w->sizes[0]))
    return false;
  const int64_t per_channel = x->sizes[0] * g->out_h * g->out_w;
  return tg__check(per_channel > 1, TG_ERR_SHAPE, op,
                   "Expected more than 1 value per channel when training, got input size %s "
                   "(conv output [%lld, %lld, %lld, %lld])",
                   tg__sizes_str(x), (long long)x->sizes[0], (long long)w->sizes[0],
                   (long long)g->out_h, (long long)g->out_w);
}

/* r and c2 of the header comment from the channel statistics (mean, m2 = sum of squared
 * deviations) of M values per channel; var_unbiased for the running statistics. */
static bool channel_factors(const tg_tensor *m2, double M, double eps, bool reference,
                            tg_tensor **r, tg_tensor **c2, tg_tensor **var_unbiased) {
  *var_unbiased = tg_div_scalar(m2, M - 1);
  if (!reference) {
    tg_tensor *var = *var_unbiased ? tg_div_scalar(m2, M) : NULL;
    tg_tensor *sd = var ? tg_sqrt(tg_add_scalar(var, eps)) : NULL;
    *r = sd ? tg_reciprocal(sd) : NULL;
    *c2 = *r ? tg_div_scalar(tg_pow_scalar(*r, 3), M) : NULL;
  } else {
    tg_tensor *s = *var_unbiased ? tg_sqrt(*var_unbiased) : NULL;
    *r = s ? tg_reciprocal(tg_add_scalar(s, eps)) : NULL;
    *c2 = *r ? tg_div(tg_mul(*r, *r), tg_mul_scalar(s, M - 1)) : NULL;
  }
  return *c2 != NULL;
}

/* inputs: x, w, gamma, beta; scalars: eps, formula; ints: the conv geometry. outputs: y, the
 * batch mean, the unbiased batch variance. */
tg_status tg__fwd_conv2d_batch_norm(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  tg__conv_geometry g;
  if (!check_call(ctx, in, &g)) return tg_last_error();
  const tg_device device = in[0]->storage->device;
  tg_kernel_fn stats = tg__kernel(op, "conv2d_batch_norm.channel_stats", device);
  tg_kernel_fn affine = stats ? tg__kernel(op, "conv2d_batch_norm.channel_affine", device) : NULL;
  if (!affine) return tg_last_error();
  const tg_tensor *x = in[0], *w = in[1];
  const int64_t c = w->sizes[0];
  const double M = (double)(x->sizes[0] * g.out_h * g.out_w);
  const bool reference = tg_ctx_scalar(ctx, SCALAR_FORMULA) == TG_CONV_BN_REFERENCE;
  tg_tensor *gamma = tg_contiguous(in[2]), *beta = gamma ? tg_contiguous(in[3]) : NULL;
  tg_tensor *y = beta ? tg__conv2d_apply(x, w, &g) : NULL;
  tg_tensor *y3 = y ? planes(y) : NULL;
  tg_tensor *mean = y3 ? vector(x, c) : NULL, *m2 = mean ? vector(x, c) : NULL;
  if (!m2 || stats(3, (tg_tensor *const[]){mean, m2, y3}) != TG_OK) return tg_last_error();
  tg_tensor *r, *c2, *var_unbiased;
  if (!channel_factors(m2, M, tg_ctx_scalar(ctx, SCALAR_EPS), reference, &r, &c2, &var_unbiased))
    return tg_last_error();
  /* out = y * a + b with a = gamma r, b = beta - m a: in place, y is ours */
  tg_tensor *a = tg_mul(gamma, r), *b = a ? tg_sub(beta, tg_mul(mean, a)) : NULL;
  if (!b || affine(4, (tg_tensor *const[]){y3, y3, a, b}) != TG_OK ||
      tg_ctx_save_for_backward(ctx, 6, (const tg_tensor *const[]){x, w, gamma, mean, r, c2}) !=
          TG_OK)
    return tg_last_error();
  out[0] = y;
  out[1] = mean;
  out[2] = var_unbiased;
  if (tg_ctx_mark_non_differentiable(ctx, mean) != TG_OK ||
      tg_ctx_mark_non_differentiable(ctx, var_unbiased) != TG_OK)
    return tg_last_error();
  return TG_OK;
}

/* Recomputes y = conv2d(x, w), then the kernels' dy and the convolution's backward. */
tg_status tg__bwd_conv2d_batch_norm(tg_ctx *ctx, const tg_tensor *const *grad, tg_tensor **gi) {
  tg_tensor *x = tg_ctx_saved(ctx, SAVED_X), *w = tg_ctx_saved(ctx, SAVED_W);
  tg_tensor *gamma = tg_ctx_saved(ctx, SAVED_GAMMA), *mean = tg_ctx_saved(ctx, SAVED_MEAN);
  tg_tensor *r = tg_ctx_saved(ctx, SAVED_R), *c2 = tg_ctx_saved(ctx, SAVED_C2);
  if (!x || !w || !gamma || !mean || !r || !c2) return tg_last_error();
  if (!grad[0]) return TG_OK; /* only the statistics were used: no gradient */
  const tg__conv_geometry g = tg__conv_geometry_saved(ctx);
  const tg_device device = x->storage->device;
  tg_kernel_fn sums = tg__kernel(op, "conv2d_batch_norm.backward_sums", device);
  tg_kernel_fn apply = sums ? tg__kernel(op, "conv2d_batch_norm.backward_apply", device) : NULL;
  const double M = (double)(x->sizes[0] * g.out_h * g.out_w);
  tg_tensor *y = apply ? tg__conv2d_apply(x, w, &g) : NULL; /* the recomputed convolution */
  tg_tensor *y3 = y ? planes(y) : NULL, *grad3 = y3 ? planes(tg_contiguous(grad[0])) : NULL;
  tg_tensor *s1 = grad3 ? vector(x, w->sizes[0]) : NULL, *s2 = s1 ? vector(x, w->sizes[0]) : NULL;
  if (!s2 || sums(5, (tg_tensor *const[]){s1, s2, grad3, y3, mean}) != TG_OK)
    return tg_last_error();
  if (tg_ctx_needs_input_grad(ctx, 2) && !(gi[2] = tg_mul(r, s2))) return tg_last_error();
  if (tg_ctx_needs_input_grad(ctx, 3) && !(gi[3] = s1)) return tg_last_error();
  if (!tg_ctx_needs_input_grad(ctx, 0) && !tg_ctx_needs_input_grad(ctx, 1)) return TG_OK;
  tg_tensor *k1 = tg_mul(gamma, r);
  tg_tensor *k2 = k1 ? tg_neg(tg_mul(tg_mul(gamma, c2), s2)) : NULL;
  tg_tensor *k3 = k2 ? tg_sub(tg_mul_scalar(tg_mul(k1, s1), -1.0 / M), tg_mul(k2, mean)) : NULL;
  /* dy overwrites the recomputed y, which nothing else holds */
  if (!k3 || apply(6, (tg_tensor *const[]){y3, grad3, y3, k1, k2, k3}) != TG_OK)
    return tg_last_error();
  if (tg_ctx_needs_input_grad(ctx, 0) && !(gi[0] = tg__conv_transpose2d_apply(y, w, &g)))
    return tg_last_error();
  if (tg_ctx_needs_input_grad(ctx, 1) && !(gi[1] = tg__conv2d_weight_apply(x, y, &g)))
    return tg_last_error();
  return TG_OK;
}

/* ---- sample inputs (tg's OpInfo), written with the public API ---- */

static tg_tensor *sample_tensor(const tg_sample_request *r, int ndim, const int64_t *sizes,
                                double offset, bool grad) {
  tg_tensor *t = tg_randn(ndim, sizes, (tg_options){.dtype = TG_F64}, r->gen);
  if (t && offset != 0) t = tg_add_scalar(t, offset);
  if (t) t = tg_to_dtype(t, r->dtype);
  if (t) t = tg_to_device(t, r->device);
  if (t && grad && tg_set_requires_grad(t, true) != TG_OK) return NULL;
  return t;
}

/* One call: x [n, c_in, h, w], w [c_out, c_in / groups, k, k], the geometry's ints. */
typedef struct conv_bn_case {
  const char *label;
  int64_t n, c_in, c_out, h, w, k, stride, pad, dilation, groups;
  tg_conv_bn_formula formula;
  double eps;
  bool affine_grad;
} conv_bn_case;

static bool make_sample(const tg_sample_request *r, const conv_bn_case *k, tg_sample *s) {
  const int64_t span = k->dilation * (k->k - 1) + 1;
  const int64_t out_h = (k->h + 2 * k->pad - span) / k->stride + 1,
                out_w = (k->w + 2 * k->pad - span) / k->stride + 1;
  tg_tensor *x = sample_tensor(r, 4, (const int64_t[]){k->n, k->c_in, k->h, k->w}, 0, true);
  tg_tensor *w =
      x ? sample_tensor(r, 4, (const int64_t[]){k->c_out, k->c_in / k->groups, k->k, k->k}, 0, true)
        : NULL;
  tg_tensor *gamma = w ? sample_tensor(r, 1, &k->c_out, 1.0, k->affine_grad) : NULL;
  tg_tensor *beta = gamma ? sample_tensor(r, 1, &k->c_out, 0, k->affine_grad) : NULL;
  if (!beta) return false;
  *s = (tg_sample){.label = k->label,
                   .n_inputs = 4,
                   .inputs = {x, w, gamma, beta},
                   .n_scalars = 2,
                   .scalars = {k->eps, (double)k->formula},
                   .n_ints = TG__CONV_NUM_INTS,
                   .ints = {k->stride, k->stride, k->pad, k->pad, k->dilation, k->dilation,
                            k->groups, k->h, k->w, out_h, out_w, k->k, k->k}};
  return true;
}

/* Small geometries of both formulas (the reference's own gradcheck sizes among them); the
 * bench call at the realistic layer: batch 64, 32 -> 64 channels, 32 x 32, 3 x 3,
 * padding 1 (sizes: n, c_in, c_out, h = w). */
int tg__samples_conv2d_batch_norm(const tg_sample_request *r, tg_sample *out) {
  static const conv_bn_case cases[] = {
      {"reference (2, 3, 4, 4), 5 x 3 x 3", 2, 3, 5, 4, 4, 3, 1, 0, 1, 1, TG_CONV_BN_REFERENCE,
       1e-3, false},
      {"pytorch 3 x 3 pad 1", 2, 3, 4, 5, 5, 3, 1, 1, 1, 1, TG_CONV_BN_PYTORCH, 1e-5, true},
      {"stride 2, dilation 2", 3, 2, 3, 7, 6, 2, 2, 1, 2, 1, TG_CONV_BN_PYTORCH, 1e-5, true},
      {"groups 2", 2, 4, 6, 4, 4, 3, 1, 1, 1, 2, TG_CONV_BN_PYTORCH, 1e-5, true},
      {"1 x 1, affine without grad", 4, 3, 2, 2, 2, 1, 1, 0, 1, 1, TG_CONV_BN_PYTORCH, 1e-5, false},
      {"reference with affine", 2, 2, 3, 4, 4, 2, 1, 0, 1, 1, TG_CONV_BN_REFERENCE, 1e-3, true},
  };
  const int count = r->bench ? 1 : (int)(sizeof cases / sizeof cases[0]);
  tg_no_grad_begin();
  int made = 0;
  for (; made < count; made++) {
    conv_bn_case k = cases[made];
    if (r->bench) {
      const int64_t *z = r->sizes;
      k = (conv_bn_case){"bench",
                         r->n_sizes > 0 ? z[0] : 64,
                         r->n_sizes > 1 ? z[1] : 32,
                         r->n_sizes > 2 ? z[2] : 64,
                         r->n_sizes > 3 ? z[3] : 32,
                         r->n_sizes > 3 ? z[3] : 32,
                         3,
                         1,
                         1,
                         1,
                         1,
                         TG_CONV_BN_PYTORCH,
                         1e-5,
                         true};
    }
    if (!make_sample(r, &k, &out[made])) break;
  }
  tg_no_grad_end();
  return made == count ? count : -1;
}
