/* pad (tg/pool.h): torch.nn.functional.pad's constant, reflect and replicate modes as one
 * pool_gather over a map of the padded trailing dims (format: src/ops/def/pool.def), with K = 1:
 * each output element copies one input element (its source by PyTorch's index formulas) or,
 * in constant mode, none (-1), which then gets the fill value. The backward is pool_scatter over
 * the same map: the crop of the interior plus the reflected or replicated parts folded back,
 * linear, and differentiable again through pool_gather. */
#include <math.h>

#include "autograd/node.h"
#include "ops/pool_internal.h"
#include "ops/registry.h"
#include "tensor/check.h"
#include "tensor/tensor_impl.h"
#include "tg/ops.h"
#include "tg/pool.h"

static const char *const mode_names[] = {"constant", "reflect", "replicate"};

/* The source in [0, in) of output position j of a dim padded by (left, right), or -1. */
static int64_t source_of(tg_pad_mode mode, int64_t j, int64_t in, int64_t left) {
  if (mode == TG_PAD_CONSTANT) return j - left >= 0 && j - left < in ? j - left : -1;
  /* PyTorch's reflection_pad / replication_pad index formulas (negative pads crop) */
  const int64_t i_start = left < 0 ? -left : 0, o_start = left > 0 ? left : 0;
  int64_t ip;
  if (mode == TG_PAD_REFLECT)
    ip = j < left ? 2 * left - j : j < in + left ? j : 2 * (in + left - 1) - j;
  else
    ip = j < left ? left : j < in + left ? j : in + left - 1;
  return ip - o_start + i_start;
}

/* The checks of torch.nn.functional.pad for x, mode and the n pads; sets *t (dims padded). */
static bool check_pad(const char *fn, const tg_tensor *x, tg_pad_mode mode, int n,
                      const int64_t *pad, int *t) {
  if (!tg__check_floating(fn, "x", x) ||
      !tg__check(n % 2 == 0, TG_ERR_ARGUMENT, fn, "the pad list has %d numbers; it must be even",
                 n) ||
      !tg__check(n / 2 <= x->ndim, TG_ERR_ARGUMENT, fn,
                 "the pad list has %d numbers; x is %s, so at most %d (2 per dim)", n,
                 tg__sizes_str(x), 2 * x->ndim))
    return false;
  *t = n / 2;
  if (mode != TG_PAD_CONSTANT) {
    const int lead = x->ndim - *t;
    if (!tg__check(n >= 2 && n <= 6 && (lead == 1 || lead == 2), TG_ERR_SHAPE, fn,
                   "%s padding of %d dims (%d pads) takes a %dD or %dD x, got %s", mode_names[mode],
                   *t, n, *t + 1, *t + 2, tg__sizes_str(x)))
      return false;
    for (int d = lead == 2 ? 1 : 0; d < x->ndim; d++)
      if (!tg__check(x->sizes[d] > 0, TG_ERR_SHAPE, fn,
                     "%s padding needs x's dims non-empty (but a batch dim), got %s",
                     mode_names[mode], tg__sizes_str(x)))
        return false;
  }
  for (int k = 0; k < *t; k++) {
    const int dim = x->ndim - 1 - k;
    const int64_t in = x->sizes[dim], l = pad[2 * k], r = pad[2 * k + 1];
    if (!tg__check(l > -((int64_t)1 << 40) && l < ((int64_t)1 << 40) && r > -((int64_t)1 << 40) &&
                       r < ((int64_t)1 << 40),
                   TG_ERR_ARGUMENT, fn, "pad (%lld, %lld) of dim %d is too large", (long long)l,
                   (long long)r, dim) ||
        !tg__check(in + l + r >= (mode == TG_PAD_CONSTANT ? 0 : 1), TG_ERR_SHAPE, fn,
                   "pad (%lld, %lld) of dim %d makes its size %lld %s, x is %s", (long long)l,
                   (long long)r, dim, (long long)(in + l + r),
                   mode == TG_PAD_CONSTANT ? "negative" : "less than 1", tg__sizes_str(x)) ||
        !tg__check(mode != TG_PAD_REFLECT || (l < in && r < in), TG_ERR_ARGUMENT, fn,
                   "reflect pad (%lld, %lld) of dim %d must be less than its size %lld, x is %s",
                   (long long)l, (long long)r, dim, (long long)in, tg__sizes_str(x)))
      return false;
  }
  return true;
}

/* The map [1, M, 1] over the t trailing dims: out sizes o, in sizes s, left pads l. */
static tg_tensor *pad_map(tg_pad_mode mode, int t, const int64_t *s, const int64_t *o,
                          const int64_t *l, int64_t M) {
  tg_tensor *map = tg_empty(3, (const int64_t[]){1, M, 1}, (tg_options){.dtype = TG_I64});
  if (!map) return NULL;
  int64_t *m = tg_data_ptr(map);
  for (int64_t e = 0; e < M; e++) {
    int64_t rest = e, src = 0, stride = 1;
    for (int d = t - 1; d >= 0 && src >= 0; d--) { /* innermost first */
      const int64_t j = rest % o[d], i = source_of(mode, j, s[d], l[d]);
      rest /= o[d];
      src = i < 0 ? -1 : src + i * stride;
      stride *= s[d];
    }
    m[e] = src;
  }
  return map;
}

tg_status tg__fwd_pad(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  static const char *fn = "tg_pad";
  const tg_tensor *x = in[0];
  const int n = tg_ctx_num_ints(ctx);
  const double value = tg_ctx_scalar(ctx, 0), mode_number = tg_ctx_scalar(ctx, 1);
  int64_t pad[TG_CTX_MAX_INTS];
  for (int k = 0; k < n; k++) pad[k] = tg_ctx_int(ctx, k);
  int t = 0;
  if (!tg__check(tg_ctx_num_scalars(ctx) == 2, TG_ERR_ARGUMENT, fn,
                 "takes 2 scalar parameters (value, mode), %d given", tg_ctx_num_scalars(ctx)) ||
      !tg__check(mode_number == TG_PAD_CONSTANT || mode_number == TG_PAD_REFLECT ||
                     mode_number == TG_PAD_REPLICATE,
                 TG_ERR_ARGUMENT, fn, "mode %g is not constant (0), reflect (1) or replicate (2)",
                 mode_number) ||
      !check_pad(fn, x, (tg_pad_mode)mode_number, n, pad, &t))
    return tg_last_error();
  const tg_pad_mode mode = (tg_pad_mode)mode_number;
  const int lead = x->ndim - t;
  int64_t s[TG_MAX_DIMS], o[TG_MAX_DIMS], l[TG_MAX_DIMS], sizes[TG_MAX_DIMS];
  int64_t L = 1, M = 1;
  for (int d = 0; d < t; d++) { /* d counts the padded dims outermost first */
    const int k = t - 1 - d;    /* its pair in the list */
    s[d] = x->sizes[lead + d];
    l[d] = pad[2 * k];
    o[d] = s[d] + pad[2 * k] + pad[2 * k + 1];
    L *= s[d], M *= o[d];
  }
  for (int d = 0; d < x->ndim; d++) sizes[d] = d < lead ? x->sizes[d] : o[d - lead];
  const tg_device device = x->storage->device;
  const tg_options opts = {x->dtype, device, false};
  int64_t flat_in[TG_MAX_DIMS], flat_out[TG_MAX_DIMS];
  for (int d = 0; d < lead; d++) flat_in[d] = flat_out[d] = x->sizes[d];
  flat_in[lead] = L, flat_out[lead] = M;
  tg_tensor *host = pad_map(mode, t, s, o, l, M);
  tg_tensor *map = host ? tg__pool_on(host, device, x->dtype) : NULL;
  tg_tensor *x2 = map ? tg_reshape(x, lead + 1, flat_in) : NULL;
  tg_tensor *y = x2 ? tg_empty(x->ndim, sizes, opts) : NULL;
  tg_tensor *y2 = y ? tg_view(y, lead + 1, flat_out) : NULL;
  if (!y2 || tg__pool_gather_into(fn, "pad.window_sum", y2, x2, map, NULL) != TG_OK ||
      tg_ctx_save_for_backward(ctx, 1, (const tg_tensor *const[]){map}) != TG_OK)
    return tg_last_error();
  /* constant mode: the elements with no source get the value (where keeps its sign and NaN) */
  if (mode == TG_PAD_CONSTANT && M > 0) {
    tg_tensor *missing =
        tg_lt(tg_view(map, t, o), tg_scalar(0, (tg_options){TG_I64, device, false}));
    y = missing ? tg_where(missing, tg_scalar(value, opts), y) : NULL;
    if (!y) return tg_last_error();
  }
  out[0] = y;
  return TG_OK;
}

tg_status tg__bwd_pad(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  if (!tg_ctx_needs_input_grad(ctx, 0)) return TG_OK;
  const int nd = tg_ctx_input_ndim(ctx, 0);
  const int64_t *x_sizes = tg_ctx_input_sizes(ctx, 0);
  tg_tensor *map = tg_ctx_saved(ctx, 0);
  if (!map) return tg_last_error();
  const int t = tg_ctx_num_ints(ctx) / 2, lead = nd - t;
  int64_t flat[TG_MAX_DIMS];
  for (int d = 0; d < lead; d++) flat[d] = x_sizes[d];
  flat[lead] = map->sizes[1];
  const int64_t L = tg__numel(t, x_sizes + lead);
  tg_tensor *g2 = tg_reshape(g[0], lead + 1, flat);
  tg_tensor *dx = g2 ? tg__pool_scatter(g2, map, NULL, L) : NULL;
  gi[0] = dx ? tg_reshape(dx, nd, x_sizes) : NULL;
  return gi[0] ? TG_OK : tg_last_error();
}

tg_tensor *tg_pad(const tg_tensor *x, int n_pad, const int64_t *pad, tg_pad_options opts) {
  static const char *fn = "tg_pad";
  if (!tg__check_arg(fn, "x", x) ||
      !tg__check(n_pad >= 0 && n_pad <= 2 * TG_MAX_DIMS, TG_ERR_ARGUMENT, fn,
                 "n_pad is %d; the pad list has 0 to %d numbers (2 per dim)", n_pad,
                 2 * TG_MAX_DIMS) ||
      !tg__check(n_pad == 0 || pad, TG_ERR_ARGUMENT, fn, "pad is NULL with n_pad %d", n_pad) ||
      !tg__check(opts.mode == TG_PAD_CONSTANT || opts.mode == TG_PAD_REFLECT ||
                     opts.mode == TG_PAD_REPLICATE,
                 TG_ERR_ARGUMENT, fn, "mode %d is not TG_PAD_CONSTANT, _REFLECT or _REPLICATE",
                 (int)opts.mode))
    return NULL;
  return tg_apply1_ex(TG__OP(pad), TG__IN(x), TG__SC(opts.value, (double)opts.mode), n_pad, pad);
}
