/* normalize_groups: the one normalization op behind batch_norm, layer_norm and group_norm
 * (front ends: norm_front.c; list entry and kernel contracts: src/ops/def/norm.def; kernels:
 * src/ops/cpu/norm_cpu.c, src/ops/cuda/norm.cu). Forward: per-group mean and biased var by
 * the stats kernel (double accumulation), rstd = 1/sqrt(var + eps) on the [G] vector, y by
 * the apply kernel; x, weight, mean and rstd are saved. Backward: the closed form
 * dx = rstd / N (N e - sum(e) - h sum(e h)) (e = dy * weight, h = normalized x) per group
 * by one kernel, dweight and dbias by another; under create_graph the same formulas are
 * composed from tg ops (recomputing the statistics from x), so double backward works. */
#include "autograd/node.h"
#include "ops/backend.h"
#include "ops/norm_internal.h"
#include "ops/registry.h"
#include "tensor/check.h"
#include "tensor/checked.h"
#include "tensor/tensor_impl.h"
#include "tg/ops.h"

static const char *const api = "normalize_groups";

static tg_norm_layout layout_of(const tg_ctx *ctx) {
  return (tg_norm_layout){tg_ctx_int(ctx, 0), tg_ctx_int(ctx, 1), tg_ctx_int(ctx, 2),
                          tg_ctx_int(ctx, 3), tg_ctx_int(ctx, 4)};
}

static tg_status check_inputs(const tg_ctx *ctx, const tg_tensor *const *in) {
  const tg_norm_layout l = layout_of(ctx);
  const tg_tensor *x = in[0];
  if (!tg__check_floating(api, "x", x) || !tg__check_alike(api, "weight", in[1], "x", x) ||
      !tg__check_alike(api, "bias", in[2], "x", x))
    return tg_last_error();
  int64_t span = 0, total = 0;
  const bool fits = l.A >= 0 && l.R >= 0 && l.C >= 0 && l.K >= 1 && l.G >= 0 &&
                    !tg__mul_ovf(l.R, l.C, &span) && !tg__mul_ovf(span, l.K, &span) &&
                    !tg__mul_ovf(l.A, span, &total);
  if (!tg__check(tg_ctx_num_ints(ctx) == 5 && tg_ctx_num_scalars(ctx) == 1, TG_ERR_ARGUMENT, api,
                 "takes ints A, R, C, K, G and scalar eps, got %d ints and %d scalars",
                 tg_ctx_num_ints(ctx), tg_ctx_num_scalars(ctx)) ||
      !tg__check(fits && total == tg__numel(x->ndim, x->sizes) &&
                     (l.G ? span % l.G == 0 : span == 0),
                 TG_ERR_SHAPE, api,
                 "layout A, R, C, K, G = %lld, %lld, %lld, %lld, %lld does not fit x %s (need "
                 "A R C K = numel, K >= 1, G dividing R C K)",
                 (long long)l.A, (long long)l.R, (long long)l.C, (long long)l.K, (long long)l.G,
                 tg__sizes_str(x)))
    return tg_last_error();
  for (int k = 1; k < 3; k++)
    if (!tg__check(in[k]->ndim == 1 && in[k]->sizes[0] == l.C, TG_ERR_SHAPE, api,
                   "%s is %s, must be [%lld] (C)", k == 1 ? "weight" : "bias", tg__sizes_str(in[k]),
                   (long long)l.C))
      return tg_last_error();
  if (!tg__check(tg_ctx_scalar(ctx, 0) >= 0, TG_ERR_ARGUMENT, api, "eps %g must be non-negative",
                 tg_ctx_scalar(ctx, 0)))
    return tg_last_error();
  return TG_OK;
}

static tg_tensor *view4(const tg_tensor *t, tg_norm_layout l) {
  return tg_reshape(t, 4, (const int64_t[]){l.A, l.R, l.C, l.K});
}

static tg_tensor *empty_groups(const tg_tensor *x, int64_t G) {
  return tg_empty(1, &G, (tg_options){x->dtype, x->storage->device, false});
}

/* 1 / sqrt(var + eps) on the [G] vector (recorded when grad mode is on). */
static tg_tensor *rstd_of(const tg_tensor *var, double eps) {
  return tg_pow_scalar(tg_add_scalar(var, eps), -0.5);
}

tg_status tg__fwd_normalize_groups(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  tg_status st = check_inputs(ctx, in);
  if (st != TG_OK) return st;
  const tg_norm_layout l = layout_of(ctx);
  const tg_device device = in[0]->storage->device;
  tg_kernel_fn stats = tg__kernel(api, "normalize_groups.stats", device);
  tg_kernel_fn apply = stats ? tg__kernel(api, "normalize_groups.apply", device) : NULL;
  tg_tensor *xc = apply ? tg_contiguous(in[0]) : NULL;
  tg_tensor *x = xc ? view4(xc, l) : NULL;
  tg_tensor *weight = x ? tg_contiguous(in[1]) : NULL;
  tg_tensor *bias = weight ? tg_contiguous(in[2]) : NULL;
  tg_tensor *mean = bias ? empty_groups(x, l.G) : NULL;
  tg_tensor *var = mean ? empty_groups(x, l.G) : NULL;
  if (!var || stats(3, (tg_tensor *const[]){mean, var, x}) != TG_OK) return tg_last_error();
  tg_tensor *rstd = rstd_of(var, tg_ctx_scalar(ctx, 0));
  tg_tensor *y = rstd ? tg_empty(4, x->sizes, (tg_options){x->dtype, device, false}) : NULL;
  if (!y || apply(6, (tg_tensor *const[]){y, x, mean, rstd, weight, bias}) != TG_OK ||
      tg_ctx_save_for_backward(ctx, 4, (const tg_tensor *const[]){in[0], in[1], mean, rstd}) !=
          TG_OK)
    return tg_last_error();
  if (!(out[0] = tg_reshape(y, in[0]->ndim, in[0]->sizes))) return tg_last_error();
  out[1] = mean;
  out[2] = var;
  return TG_OK;
}

/* What the gradients of the mean and var outputs add to dx, [A, G, I]: d mean / dx = 1 / N
 * and d var / dx = 2 (x - mean) / N within a group. xc = x - mean, [A, G, I]. */
static tg_tensor *stats_grad(int64_t G, const tg_tensor *xc, const tg_tensor *gmean,
                             const tg_tensor *gvar, double n) {
  const int64_t g3[3] = {1, G, 1};
  tg_tensor *zero =
      gmean && gvar ? NULL : tg_zeros(3, g3, (tg_options){xc->dtype, xc->storage->device, false});
  tg_tensor *gm = gmean ? tg_reshape(gmean, 3, g3) : zero;
  tg_tensor *gv = gvar ? tg_reshape(gvar, 3, g3) : zero;
  if (!gm || !gv) return NULL;
  return tg_add(tg_div_scalar(gm, n), tg_mul(tg_mul_scalar(gv, 2.0 / n), xc));
}

/* dx (when dy is not NULL), [A, G, I], from the closed form. */
static tg_tensor *closed_form_dx(const tg_tensor *dy4, const tg_tensor *weight, const tg_tensor *h3,
                                 const tg_tensor *rstd, tg_norm_layout l, const int64_t sizes3[3],
                                 double n) {
  tg_tensor *e3 =
      tg_reshape(tg_mul(dy4, tg_reshape(weight, 2, (const int64_t[]){l.C, 1})), 3, sizes3);
  tg_tensor *sum_e = tg__sum_dims(e3, 2, (const int[]){0, 2}, true);
  tg_tensor *sum_eh = tg__sum_dims(tg_mul(e3, h3), 2, (const int[]){0, 2}, true);
  tg_tensor *inner = tg_sub(tg_sub(tg_mul_scalar(e3, n), sum_e), tg_mul(h3, sum_eh));
  return tg_mul(tg_div_scalar(rstd, n), inner);
}

/* The backward composed from tg ops, statistics recomputed from x: differentiable again. */
static tg_status composed_backward(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor *x,
                                   tg_tensor *weight, tg_tensor **gi) {
  const tg_norm_layout l = layout_of(ctx);
  const int64_t I = l.G ? l.R * l.C * l.K / l.G : 0;
  const double n = (double)(l.A * I);
  const int64_t sizes3[3] = {l.A, l.G, I};
  tg_tensor *x3 = tg_reshape(x, 3, sizes3);
  tg_tensor *mean = tg_div_scalar(tg__sum_dims(x3, 2, (const int[]){0, 2}, true), n);
  tg_tensor *xc = tg_sub(x3, mean);
  tg_tensor *var = tg_div_scalar(tg__sum_dims(tg_mul(xc, xc), 2, (const int[]){0, 2}, true), n);
  tg_tensor *rstd = rstd_of(var, tg_ctx_scalar(ctx, 0));
  tg_tensor *h3 = tg_mul(xc, rstd);
  tg_tensor *dy4 = g[0] ? view4(g[0], l) : NULL;
  if (!h3 || (g[0] && !dy4)) return tg_last_error();
  if (tg_ctx_needs_input_grad(ctx, 0)) {
    tg_tensor *dx = dy4 ? closed_form_dx(dy4, weight, h3, rstd, l, sizes3, n) : NULL;
    if (g[1] || g[2]) {
      tg_tensor *extra = stats_grad(l.G, xc, g[1], g[2], n);
      dx = dx ? tg_add(dx, extra) : extra;
    }
    if (dx && !(gi[0] = tg_reshape(dx, x->ndim, x->sizes))) return tg_last_error();
  }
  if (!dy4) return TG_OK;
  const int other[3] = {0, 1, 3};
  if (tg_ctx_needs_input_grad(ctx, 1) &&
      !(gi[1] = tg__sum_dims(tg_mul(dy4, view4(h3, l)), 3, other, false)))
    return tg_last_error();
  if (tg_ctx_needs_input_grad(ctx, 2) && !(gi[2] = tg__sum_dims(dy4, 3, other, false)))
    return tg_last_error();
  return TG_OK;
}

/* dx by the backward kernel, plus what the mean and var outputs' gradients add. */
static tg_tensor *kernel_dx(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor *dy4, tg_tensor *x,
                            tg_tensor *x4, tg_tensor *weight, tg_tensor *mean, tg_tensor *rstd) {
  const tg_norm_layout l = layout_of(ctx);
  const tg_device device = x->storage->device;
  tg_tensor *dx = NULL;
  if (dy4) {
    tg_kernel_fn backward = tg__kernel(api, "normalize_groups.backward", device);
    dx = backward ? tg_empty(4, x4->sizes, (tg_options){x->dtype, device, false}) : NULL;
    if (!dx || backward(6, (tg_tensor *const[]){dx, dy4, x4, mean, rstd, weight}) != TG_OK)
      return NULL;
  }
  if (g[1] || g[2]) {
    const int64_t I = l.G ? l.R * l.C * l.K / l.G : 0;
    const int64_t sizes3[3] = {l.A, l.G, I};
    tg_tensor *xc =
        tg_sub(tg_reshape(x, 3, sizes3), tg_reshape(mean, 3, (const int64_t[]){1, l.G, 1}));
    tg_tensor *extra = xc ? stats_grad(l.G, xc, g[1], g[2], (double)(l.A * I)) : NULL;
    dx = dx && extra ? tg_add(tg_reshape(dx, 3, sizes3), extra) : extra;
  }
  return dx ? tg_reshape(dx, x->ndim, x->sizes) : NULL;
}

tg_status tg__bwd_normalize_groups(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  tg_tensor *x = tg_ctx_saved(ctx, 0), *weight = tg_ctx_saved(ctx, 1);
  tg_tensor *mean = tg_ctx_saved(ctx, 2), *rstd = tg_ctx_saved(ctx, 3);
  if (!x || !weight || !mean || !rstd) return tg_last_error();
  if (!g[0] && !g[1] && !g[2]) return TG_OK;
  if (tg_is_grad_enabled()) return composed_backward(ctx, g, x, weight, gi);
  const tg_device device = x->storage->device;
  tg_tensor *dy4 = g[0] ? view4(tg_contiguous(g[0]), layout_of(ctx)) : NULL;
  tg_tensor *x4 = view4(tg_contiguous(x), layout_of(ctx));
  if (!x4 || (g[0] && !dy4) || !(weight = tg_contiguous(weight))) return tg_last_error();
  if (tg_ctx_needs_input_grad(ctx, 0) &&
      !(gi[0] = kernel_dx(ctx, g, dy4, x, x4, weight, mean, rstd)))
    return tg_last_error();
  if (dy4 && (tg_ctx_needs_input_grad(ctx, 1) || tg_ctx_needs_input_grad(ctx, 2))) {
    const tg_options opts = {x->dtype, device, false};
    tg_kernel_fn affine = tg__kernel(api, "normalize_groups.affine_grad", device);
    tg_tensor *dw = affine ? tg_empty(1, weight->sizes, opts) : NULL;
    tg_tensor *db = dw ? tg_empty(1, weight->sizes, opts) : NULL;
    if (!db || affine(6, (tg_tensor *const[]){dw, db, dy4, x4, mean, rstd}) != TG_OK)
      return tg_last_error();
    if (tg_ctx_needs_input_grad(ctx, 1)) gi[1] = dw;
    if (tg_ctx_needs_input_grad(ctx, 2)) gi[2] = db;
  }
  return TG_OK;
}

tg_tensor *tg__normalize_groups(const tg_tensor *x, const tg_tensor *weight, const tg_tensor *bias,
                                tg_norm_layout l, double eps, tg_tensor **mean, tg_tensor **var) {
  tg_tensor *out[3] = {NULL, NULL, NULL};
  const int64_t ints[5] = {l.A, l.R, l.C, l.K, l.G};
  if (tg_apply_ex(TG__OP(normalize_groups), 3, (const tg_tensor *const[]){x, weight, bias}, 1, &eps,
                  5, ints, 3, out) != TG_OK)
    return NULL;
  if (mean) *mean = out[1];
  if (var) *var = out[2];
  return out[0];
}
