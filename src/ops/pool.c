/* max_pool2d, avg_pool2d and adaptive_avg_pool2d (tg/pool.h): each builds its window map on the
 * host (pool_map.c) and runs one device kernel over the planes of x (N * C of them). Max pooling
 * keeps the indices of its maxima and its backward is pool_scatter over them; the average
 * poolings are pool_gather over their map and divisors, and their backward pool_scatter
 * (pool_gather.c): linear both ways, so every order of derivative is one of the two. */
#include "autograd/node.h"
#include "ops/backend.h"
#include "ops/pool_internal.h"
#include "ops/registry.h"
#include "tensor/check.h"
#include "tensor/tensor_impl.h"
#include "tg/ops.h"
#include "tg/pool.h"

static tg_options options_of(const tg_tensor *t, tg_dtype dtype) {
  return (tg_options){dtype, t->storage->device, false};
}

/* x's leading dims (all but the last two) followed by the n sizes given. */
static int with_planes(const tg_tensor *x, int n, const int64_t *last, int64_t *sizes) {
  const int lead = x->ndim - 2;
  for (int d = 0; d < lead; d++) sizes[d] = x->sizes[d];
  for (int d = 0; d < n; d++) sizes[lead + d] = last[d];
  return lead + n;
}

/* An integer parameter that is a flag. */
static bool check_flag(const char *fn, const char *name, int64_t v) {
  return tg__check(v == 0 || v == 1, TG_ERR_ARGUMENT, fn, "%s must be 0 or 1, got %lld", name,
                   (long long)v);
}

static bool check_num_ints(const char *fn, const tg_ctx *ctx, int n, const char *names) {
  return tg__check(tg_ctx_num_ints(ctx) == n, TG_ERR_ARGUMENT, fn,
                   "takes %d integer parameters (%s), %d given", n, names, tg_ctx_num_ints(ctx));
}

/* ---- max_pool2d ---- */

tg_status tg__fwd_max_pool2d(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  static const char *fn = "tg_max_pool2d";
  const tg_tensor *x = in[0];
  int64_t p[9];
  for (int k = 0; k < 9; k++) p[k] = tg_ctx_int(ctx, k);
  tg__pool_dim h, w;
  if (!check_num_ints(fn, ctx, 9, "kernel_size, stride, padding, dilation (2 each), ceil_mode") ||
      !check_flag(fn, "ceil_mode", p[8]) ||
      !tg__pool_check(fn, x, p, p + 2, p + 4, p + 6, p[8], &h, &w))
    return tg_last_error();
  const tg_device device = x->storage->device;
  tg_kernel_fn kernel = tg__kernel(fn, "max_pool2d.window_max", device);
  const int64_t planes = tg__numel(x->ndim - 2, x->sizes), M = h.out * w.out;
  int64_t sizes[TG_MAX_DIMS];
  const int nd = with_planes(x, 2, (const int64_t[]){h.out, w.out}, sizes);
  tg_tensor *host = kernel ? tg__pool_window_map(&h, &w) : NULL;
  tg_tensor *map = host ? tg__pool_on(host, device, x->dtype) : NULL;
  tg_tensor *map2 = map ? tg_view(map, 2, map->sizes + 1) : NULL;
  tg_tensor *x2 =
      map2 ? tg_reshape(tg_contiguous(x), 2, (const int64_t[]){planes, h.in * w.in}) : NULL;
  tg_tensor *values = x2 ? tg_empty(nd, sizes, options_of(x, x->dtype)) : NULL;
  tg_tensor *indices = values ? tg_empty(nd, sizes, options_of(x, TG_I64)) : NULL;
  tg_tensor *v2 = indices ? tg_view(values, 2, (const int64_t[]){planes, M}) : NULL;
  tg_tensor *i2 = v2 ? tg_view(indices, 2, (const int64_t[]){planes, M}) : NULL;
  if (!i2 || kernel(4, (tg_tensor *const[]){v2, i2, x2, map2}) != TG_OK ||
      tg_ctx_save_for_backward(ctx, 1, (const tg_tensor *const[]){indices}) != TG_OK)
    return tg_last_error();
  out[0] = values;
  out[1] = indices;
  return tg_ctx_mark_non_differentiable(ctx, indices);
}

/* d x = the gradient of each output added into its maximum's element: pool_scatter over the
 * indices (one entry per output, per plane), whose own gradient gathers at them. */
tg_status tg__bwd_max_pool2d(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  if (!tg_ctx_needs_input_grad(ctx, 0) || !g[0]) return TG_OK;
  const int nd = tg_ctx_input_ndim(ctx, 0);
  const int64_t *x_sizes = tg_ctx_input_sizes(ctx, 0);
  tg_tensor *indices = tg_ctx_saved(ctx, 0);
  if (!indices) return tg_last_error();
  const int64_t planes = tg__numel(nd - 2, x_sizes);
  const int64_t M = indices->sizes[nd - 2] * indices->sizes[nd - 1];
  tg_tensor *map = tg_reshape(indices, 3, (const int64_t[]){planes, M, 1});
  tg_tensor *g2 = map ? tg_reshape(g[0], 2, (const int64_t[]){planes, M}) : NULL;
  tg_tensor *dx = g2 ? tg__pool_scatter(g2, map, NULL, x_sizes[nd - 2] * x_sizes[nd - 1]) : NULL;
  gi[0] = dx ? tg_reshape(dx, nd, x_sizes) : NULL;
  return gi[0] ? TG_OK : tg_last_error();
}

/* ---- the average poolings: pool_gather over a host map ---- */

/* out [*, oh, ow] = pool_gather(x [*, H * W], map, divisor) (host_map and host_divisor moved
 * to x's device) by the kernel named kernel; the map and divisor saved for the backward. */
static tg_status linear_pool(tg_ctx *ctx, const char *fn, const char *kernel, const tg_tensor *x,
                             const tg_tensor *host_map, const tg_tensor *host_divisor, int64_t oh,
                             int64_t ow, tg_tensor **out) {
  const tg_device device = x->storage->device;
  int64_t sizes[TG_MAX_DIMS], flat[TG_MAX_DIMS];
  const int nd = with_planes(x, 2, (const int64_t[]){oh, ow}, sizes);
  with_planes(x, 1, (const int64_t[]){x->sizes[x->ndim - 2] * x->sizes[x->ndim - 1]}, flat);
  tg_tensor *map = tg__pool_on(host_map, device, x->dtype);
  tg_tensor *divisor = map ? tg__pool_on(host_divisor, device, x->dtype) : NULL;
  tg_tensor *x2 = divisor ? tg_reshape(x, nd - 1, flat) : NULL;
  tg_tensor *o = x2 ? tg_empty(nd, sizes, options_of(x, x->dtype)) : NULL;
  flat[nd - 2] = oh * ow;
  tg_tensor *o2 = o ? tg_view(o, nd - 1, flat) : NULL;
  if (!o2 || tg__pool_gather_into(fn, kernel, o2, x2, map, divisor) != TG_OK ||
      tg_ctx_save_for_backward(ctx, 2, (const tg_tensor *const[]){map, divisor}) != TG_OK)
    return tg_last_error();
  *out = o;
  return TG_OK;
}

/* d x = pool_scatter(g [*, oh * ow]) back to x's sizes. */
static tg_status linear_pool_backward(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  if (!tg_ctx_needs_input_grad(ctx, 0)) return TG_OK;
  const int nd = tg_ctx_input_ndim(ctx, 0);
  const int64_t *x_sizes = tg_ctx_input_sizes(ctx, 0);
  tg_tensor *map = tg_ctx_saved(ctx, 0), *divisor = map ? tg_ctx_saved(ctx, 1) : NULL;
  int64_t flat[TG_MAX_DIMS];
  for (int d = 0; d < nd - 2; d++) flat[d] = x_sizes[d];
  flat[nd - 2] = map ? map->sizes[1] : 0;
  tg_tensor *g2 = divisor ? tg_reshape(g[0], nd - 1, flat) : NULL;
  tg_tensor *dx = g2 ? tg__pool_scatter(g2, map, divisor, x_sizes[nd - 2] * x_sizes[nd - 1]) : NULL;
  gi[0] = dx ? tg_reshape(dx, nd, x_sizes) : NULL;
  return gi[0] ? TG_OK : tg_last_error();
}

tg_status tg__fwd_avg_pool2d(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  static const char *fn = "tg_avg_pool2d";
  int64_t p[9];
  for (int k = 0; k < 9; k++) p[k] = tg_ctx_int(ctx, k);
  static const int64_t one[2] = {1, 1};
  tg__pool_dim h, w;
  tg_tensor *map, *divisor;
  if (!check_num_ints(fn, ctx, 9,
                      "kernel_size, stride, padding (2 each), ceil_mode, count_include_pad, "
                      "divisor_override") ||
      !check_flag(fn, "ceil_mode", p[6]) || !check_flag(fn, "count_include_pad", p[7]) ||
      !tg__check(p[8] >= 0, TG_ERR_ARGUMENT, fn, "divisor_override must be > 0 (0: none), got %lld",
                 (long long)p[8]) ||
      !tg__pool_check(fn, in[0], p, p + 2, p + 4, one, p[6], &h, &w) ||
      !tg__avg_pool_map(&h, &w, p[7], p[8], &map, &divisor))
    return tg_last_error();
  return linear_pool(ctx, fn, "avg_pool2d.window_sum", in[0], map, divisor, h.out, w.out, out);
}

tg_status tg__bwd_avg_pool2d(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  return linear_pool_backward(ctx, g, gi);
}

tg_status tg__fwd_adaptive_avg_pool2d(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  static const char *fn = "tg_adaptive_avg_pool2d";
  const tg_tensor *x = in[0];
  const int64_t oh = tg_ctx_int(ctx, 0), ow = tg_ctx_int(ctx, 1);
  const int nd = x->ndim;
  tg_tensor *map, *divisor;
  if (!check_num_ints(fn, ctx, 2, "output_size h, w") || !tg__check_floating(fn, "x", x) ||
      !tg__check((nd == 3 || nd == 4) && x->sizes[nd - 1] > 0 && x->sizes[nd - 2] > 0 &&
                     x->sizes[nd - 3] > 0,
                 TG_ERR_SHAPE, fn,
                 "x is %s; expected [C, H, W] or [N, C, H, W] with C, H and W > 0 (N may be 0)",
                 tg__sizes_str(x)) ||
      !tg__check(oh >= 0 && ow >= 0 && oh <= INT32_MAX && ow <= INT32_MAX, TG_ERR_ARGUMENT, fn,
                 "output_size must be >= 0 (and fit 32 bits), got (%lld, %lld)", (long long)oh,
                 (long long)ow) ||
      !tg__adaptive_pool_map(x->sizes[nd - 2], x->sizes[nd - 1], oh, ow, &map, &divisor))
    return tg_last_error();
  return linear_pool(ctx, fn, "adaptive_avg_pool2d.window_sum", x, map, divisor, oh, ow, out);
}

tg_status tg__bwd_adaptive_avg_pool2d(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  return linear_pool_backward(ctx, g, gi);
}

/* ---- front ends: PyTorch's defaults for zero fields, then the op ---- */

/* A stride or dilation pair: {0, 0} is the default; otherwise as given (checked by the op). */
static void pair_or(const int64_t *given, const int64_t *fallback, int64_t *out) {
  const bool unset = given[0] == 0 && given[1] == 0;
  out[0] = unset ? fallback[0] : given[0];
  out[1] = unset ? fallback[1] : given[1];
}

tg_status tg_max_pool2d_with_indices(const tg_tensor *x, const int64_t kernel[2],
                                     tg_max_pool2d_options opts, tg_tensor **values,
                                     tg_tensor **indices) {
  static const char *fn = "tg_max_pool2d";
  if (values) *values = NULL;
  if (indices) *indices = NULL;
  if (!tg__check_not_null(fn, "values", values) || !tg__check_not_null(fn, "indices", indices) ||
      !tg__check_arg(fn, "x", x) || !tg__check_not_null(fn, "kernel_size", kernel))
    return tg_last_error();
  int64_t stride[2], dilation[2];
  pair_or(opts.stride, kernel, stride);
  pair_or(opts.dilation, (const int64_t[]){1, 1}, dilation);
  tg_tensor *outs[2];
  tg_status st = tg_apply_ex(TG__OP(max_pool2d), TG__IN(x), TG__NO_SC,
                             TG__INTS(kernel[0], kernel[1], stride[0], stride[1], opts.padding[0],
                                      opts.padding[1], dilation[0], dilation[1], opts.ceil_mode),
                             2, outs);
  if (st != TG_OK) return st;
  *values = outs[0];
  *indices = outs[1];
  return TG_OK;
}

tg_tensor *tg_max_pool2d(const tg_tensor *x, const int64_t kernel[2], tg_max_pool2d_options opts) {
  tg_tensor *values, *indices;
  return tg_max_pool2d_with_indices(x, kernel, opts, &values, &indices) == TG_OK ? values : NULL;
}

tg_tensor *tg_avg_pool2d(const tg_tensor *x, const int64_t kernel[2], tg_avg_pool2d_options opts) {
  static const char *fn = "tg_avg_pool2d";
  if (!tg__check_arg(fn, "x", x) || !tg__check_not_null(fn, "kernel_size", kernel)) return NULL;
  int64_t stride[2];
  pair_or(opts.stride, kernel, stride);
  return tg_apply1_ex(TG__OP(avg_pool2d), TG__IN(x), TG__NO_SC,
                      TG__INTS(kernel[0], kernel[1], stride[0], stride[1], opts.padding[0],
                               opts.padding[1], opts.ceil_mode, !opts.exclude_padding,
                               opts.divisor_override));
}

tg_tensor *tg_adaptive_avg_pool2d(const tg_tensor *x, const int64_t output_size[2]) {
  static const char *fn = "tg_adaptive_avg_pool2d";
  if (!tg__check_arg(fn, "x", x) || !tg__check_not_null(fn, "output_size", output_size))
    return NULL;
  return tg_apply1_ex(TG__OP(adaptive_avg_pool2d), TG__IN(x), TG__NO_SC,
                      TG__INTS(output_size[0], output_size[1]));
}
