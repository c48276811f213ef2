/* The convolution family's front ends (tg/conv.h): PyTorch's argument rules and errors,
 * output sizes, "same"/"valid" padding, bias, unbatched inputs and conv1d as conv2d over a
 * unit dim; each ends in one of the ops of src/ops/conv.c / conv_fold.c with the geometry it
 * worked out (ops/conv_internal.h). */
#include "ops/conv_internal.h"
#include "tensor/check.h"
#include "tensor/tensor_impl.h"
#include "tg/conv.h"
#include "tg/pool.h"
#include "tg/ops.h"
#include "tg/tensor_ops.h"

static int64_t or_one(int64_t v) { return v == 0 ? 1 : v; }

/* The windows along one dim: 0 when the dilated kernel does not fit the padded extent. */
static int64_t windows(int64_t padded, int64_t kernel, int64_t dilation, int64_t stride) {
  const int64_t span = dilation * (kernel - 1) + 1;
  return padded < span ? 0 : (padded - span) / stride + 1;
}

/* Options beyond this would overflow the size arithmetic; no image is that large. */
#define MAX_OPTION ((int64_t)1 << 31)

/* Each of v[0..dims) in [least, MAX_OPTION); names the option and both values otherwise. */
static bool check_at_least(const char *api, const char *name, int dims, const int64_t *v,
                           int64_t least) {
  for (int d = 0; d < dims; d++)
    if (!tg__check(v[d] >= least && v[d] < MAX_OPTION, TG_ERR_ARGUMENT, api,
                   "%s = %lld%s is out of range [%lld, %lld)", name, (long long)v[d],
                   dims == 1 ? "" : (d ? " (w)" : " (h)"), (long long)least, (long long)MAX_OPTION))
      return false;
  return true;
}

static bool check_operands(const char *api, const tg_tensor *x, const tg_tensor *w,
                           const tg_tensor *bias) {
  return tg__check_arg(api, "x", x) && tg__check_arg(api, "w", w) &&
         tg__check_floating(api, "x", x) && tg__check_alike(api, "w", w, "x", x) &&
         (!bias || tg__check_alike(api, "bias", bias, "x", x));
}

/* x has dims + 2 dims (batched) or dims + 1 (unbatched). */
static bool check_batched(const char *api, const char *arg, const tg_tensor *x, int dims,
                          const char *layout, bool *batched) {
  *batched = x->ndim == dims + 2;
  return tg__check(x->ndim == dims + 1 || x->ndim == dims + 2, TG_ERR_SHAPE, api,
                   "%s must be %d-D %s or %d-D without the batch dim, got %s", arg, dims + 2,
                   layout, dims + 1, tg__sizes_str(x));
}

static bool check_bias(const char *api, const tg_tensor *bias, int64_t c_out) {
  return !bias || tg__check(bias->ndim == 1 && bias->sizes[0] == c_out, TG_ERR_SHAPE, api,
                            "bias is %s; the output has %lld channels, so bias must be [%lld]",
                            tg__sizes_str(bias), (long long)c_out, (long long)c_out);
}

/* x [1, C] or [C] at the batch's place, and for one spatial dim a unit dim 2 (h). */
static const tg_tensor *lift(const tg_tensor *t, bool add_batch, int dims) {
  const tg_tensor *r = add_batch ? tg_unsqueeze(t, 0) : t;
  return r && dims == 1 ? tg_unsqueeze(r, 2) : r;
}

/* lift's inverse on a result, with bias [C] added over dim 1 first. */
static tg_tensor *lower(tg_tensor *y, const tg_tensor *bias, bool drop_batch, int dims) {
  if (y && bias) {
    tg_tensor *b = tg_reshape(bias, 4, (const int64_t[]){1, bias->sizes[0], 1, 1});
    y = b ? tg_add(y, b) : NULL;
  }
  if (y && dims == 1) y = tg_squeeze(y, 2);
  return y && drop_batch ? tg_squeeze(y, 0) : y;
}

/* ---- conv1d / conv2d ---- */

typedef struct conv_args {
  int dims; /* spatial dims the caller has: 1 or 2 */
  int64_t stride[2], padding[2], dilation[2], groups;
  tg_conv_padding_mode mode;
  tg_conv_padding_fill fill;
} conv_args;

/* The padding before and after spatial dim d (kernel k): PyTorch's split for "same". */
static void pads_of(const conv_args *a, int d, int64_t k, int64_t *before, int64_t *after) {
  *before = *after = a->padding[d];
  if (a->mode != TG_CONV_PADDING_EXPLICIT) {
    const int64_t total = a->mode == TG_CONV_PADDING_SAME ? a->dilation[d] * (k - 1) : 0;
    *before = total / 2;
    *after = total - *before;
  }
}

/* Checks the operands and options, and works out the geometry; false with the error set. */
static bool plan(const char *api, const tg_tensor *x, const tg_tensor *w, const tg_tensor *bias,
                 const conv_args *a, tg__conv_geometry *geometry, bool *is_batched) {
  bool batched;
  const int dims = a->dims;
  if (!check_operands(api, x, w, bias) ||
      !check_batched(api, "x", x, dims, dims == 1 ? "[N, C_in, L]" : "[N, C_in, H, W]", &batched) ||
      !tg__check(w->ndim == dims + 2, TG_ERR_SHAPE, api, "w must be %d-D %s, got %s", dims + 2,
                 dims == 1 ? "[C_out, C_in / groups, k]" : "[C_out, C_in / groups, kh, kw]",
                 tg__sizes_str(w)) ||
      !check_at_least(api, "groups", 1, &a->groups, 1) ||
      !check_at_least(api, "stride", dims, a->stride, 1) ||
      !check_at_least(api, "dilation", dims, a->dilation, 1) ||
      !tg__check(a->mode >= TG_CONV_PADDING_EXPLICIT && a->mode <= TG_CONV_PADDING_SAME,
                 TG_ERR_ARGUMENT, api, "padding_mode %d is not a tg_conv_padding_mode",
                 (int)a->mode) ||
      !tg__check(a->fill >= TG_CONV_FILL_ZEROS && a->fill <= TG_CONV_FILL_CIRCULAR, TG_ERR_ARGUMENT,
                 api, "fill %d is not a tg_conv_padding_fill", (int)a->fill) ||
      (a->mode == TG_CONV_PADDING_EXPLICIT && !check_at_least(api, "padding", dims, a->padding, 0)))
    return false;
  for (int d = 0; d < dims; d++)
    if (!tg__check(a->mode != TG_CONV_PADDING_SAME || a->stride[d] == 1, TG_ERR_ARGUMENT, api,
                   "padding \"same\" is not supported for strided convolutions (stride = %lld)",
                   (long long)a->stride[d]))
      return false;
  const int64_t c_in = x->sizes[batched ? 1 : 0], c_out = w->sizes[0];
  if (!tg__check(c_out % a->groups == 0, TG_ERR_SHAPE, api,
                 "groups = %lld does not divide w's C_out: w is %s", (long long)a->groups,
                 tg__sizes_str(w)) ||
      !tg__check(c_in == w->sizes[1] * a->groups, TG_ERR_SHAPE, api,
                 "x is %s with %lld channels, but w %s with groups = %lld expects %lld",
                 tg__sizes_str(x), (long long)c_in, tg__sizes_str(w), (long long)a->groups,
                 (long long)(w->sizes[1] * a->groups)) ||
      !check_bias(api, bias, c_out))
    return false;
  /* The h dim of a 1-D convolution is a unit one: one window of one tap. */
  tg__conv_geometry g = {1, 1, 0, 0, 1, 1, a->groups, 1, 1, 1, 1, 1, 1};
  int64_t *stride = &g.stride_h, *pad = &g.pad_h, *dilation = &g.dilation_h, *in = &g.h,
          *out = &g.out_h, *kernel = &g.kernel_h;
  for (int d = 0; d < dims; d++) {
    const int at = 2 - dims + d; /* the geometry's dim (0: h, 1: w) */
    const int64_t size = x->sizes[x->ndim - dims + d], k = w->sizes[2 + d];
    int64_t before, after;
    pads_of(a, d, k, &before, &after);
    stride[at] = a->stride[d];
    pad[at] = before;
    dilation[at] = a->dilation[d];
    in[at] = size;
    kernel[at] = k;
    out[at] = windows(size + before + after, k, a->dilation[d], a->stride[d]);
    if (!tg__check(out[at] > 0, TG_ERR_SHAPE, api,
                   "x is %s: padded input size %lld along dim %d is smaller than the dilated "
                   "kernel's %lld (w is %s, dilation %lld)",
                   tg__sizes_str(x), (long long)(size + before + after), x->ndim - dims + d,
                   (long long)(a->dilation[d] * (k - 1) + 1), tg__sizes_str(w),
                   (long long)a->dilation[d]))
      return false;
  }
  *geometry = g;
  *is_batched = batched;
  return true;
}

static const char *const fill_names[] = {"zeros", "reflect", "replicate", "circular"};

/* x wrapped around along dim: its last `before` elements in front, its first `after` behind. */
static tg_tensor *wrap(const tg_tensor *x, int dim, int64_t before, int64_t after) {
  const int64_t size = x->sizes[dim];
  const tg_tensor *parts[3] = {tg_narrow(x, dim, size - before, before), x,
                               tg_narrow(x, dim, 0, after)};
  return parts[0] && parts[2] ? tg_cat(3, parts, dim) : NULL;
}

/* x with the padding of a filled in (a->fill not zeros): PyTorch's F.pad before the layer's
 * unpadded convolution. Checks each pad against its dim first, naming api. */
static tg_tensor *fill_padding(const char *api, const tg_tensor *x, const tg_tensor *w,
                               const conv_args *a) {
  int64_t pad[4] = {0}; /* tg_pad's order: the last dim's before, after, then the one before */
  for (int d = 0; d < a->dims; d++) {
    const int dim = x->ndim - a->dims + d, at = 2 * (a->dims - 1 - d);
    const int64_t size = x->sizes[dim];
    pads_of(a, d, w->sizes[2 + d], &pad[at], &pad[at + 1]);
    const int64_t most = pad[at] > pad[at + 1] ? pad[at] : pad[at + 1];
    const bool fits = a->fill == TG_CONV_FILL_REFLECT    ? most < size
                      : a->fill == TG_CONV_FILL_CIRCULAR ? most <= size
                                                         : most == 0 || size > 0;
    if (!tg__check(fits, TG_ERR_SHAPE, api,
                   "x is %s: fill \"%s\" pads dim %d by %lld and %lld, which needs the dim's "
                   "size %s the padding",
                   tg__sizes_str(x), fill_names[a->fill], dim, (long long)pad[at],
                   (long long)pad[at + 1], a->fill == TG_CONV_FILL_REFLECT ? "above" : "at least"))
      return NULL;
  }
  if (a->fill == TG_CONV_FILL_CIRCULAR) {
    tg_tensor *r = (tg_tensor *)x;
    for (int d = 0; r && d < a->dims; d++) {
      const int at = 2 * (a->dims - 1 - d);
      r = wrap(r, x->ndim - a->dims + d, pad[at], pad[at + 1]);
    }
    return r;
  }
  const tg_pad_options o = {a->fill == TG_CONV_FILL_REFLECT ? TG_PAD_REFLECT : TG_PAD_REPLICATE, 0};
  return tg_pad(x, 2 * a->dims, pad, o);
}

static tg_tensor *convolution(const char *api, const tg_tensor *x, const tg_tensor *w,
                              const tg_tensor *bias, const conv_args *a) {
  bool batched;
  tg__conv_geometry g;
  const int dims = a->dims;
  if (!plan(api, x, w, bias, a, &g, &batched)) return NULL;
  tg_scope s = tg_scope_begin();
  if (a->fill != TG_CONV_FILL_ZEROS) { /* pad, then convolve without padding */
    conv_args unpadded = *a;
    unpadded.mode = TG_CONV_PADDING_EXPLICIT;
    unpadded.padding[0] = unpadded.padding[1] = 0;
    unpadded.fill = TG_CONV_FILL_ZEROS;
    const tg_tensor *padded = fill_padding(api, x, w, a);
    tg_tensor *y = padded ? convolution(api, padded, w, bias, &unpadded) : NULL;
    y = tg_scope_escape(s, y);
    tg_scope_end(s);
    return y;
  }
  tg_tensor *y = tg__conv2d_apply(lift(x, !batched, dims), lift(w, false, dims), &g);
  y = tg_scope_escape(s, lower(y, bias, !batched, dims));
  tg_scope_end(s);
  return y;
}

static conv_args conv2d_args(const tg_conv2d_opts *opts) {
  const tg_conv2d_opts o = opts ? *opts : (tg_conv2d_opts){0};
  return (conv_args){2,
                     {or_one(o.stride[0]), or_one(o.stride[1])},
                     {o.padding[0], o.padding[1]},
                     {or_one(o.dilation[0]), or_one(o.dilation[1])},
                     or_one(o.groups),
                     o.padding_mode,
                     o.fill};
}

bool tg__conv2d_plan(const char *api, const tg_tensor *x, const tg_tensor *w,
                     const tg_conv2d_opts *opts, tg__conv_geometry *g) {
  bool batched;
  const conv_args a = conv2d_args(opts);
  return plan(api, x, w, NULL, &a, g, &batched) &&
         tg__check(batched, TG_ERR_SHAPE, api, "x must be 4-D [N, C_in, H, W], got %s",
                   tg__sizes_str(x)) &&
         tg__check(a.fill == TG_CONV_FILL_ZEROS, TG_ERR_ARGUMENT, api,
                   "fill \"%s\" is not supported here: pad x with tg_pad first (fill zeros)",
                   fill_names[a.fill]);
}

tg_tensor *tg_conv2d(const tg_tensor *x, const tg_tensor *w, const tg_tensor *bias,
                     const tg_conv2d_opts *opts) {
  const conv_args a = conv2d_args(opts);
  return convolution("tg_conv2d", x, w, bias, &a);
}

tg_tensor *tg_conv1d(const tg_tensor *x, const tg_tensor *w, const tg_tensor *bias,
                     const tg_conv1d_opts *opts) {
  const tg_conv1d_opts o = opts ? *opts : (tg_conv1d_opts){0};
  const conv_args a = {1,
                       {or_one(o.stride)},
                       {o.padding},
                       {or_one(o.dilation)},
                       or_one(o.groups),
                       o.padding_mode,
                       o.fill};
  return convolution("tg_conv1d", x, w, bias, &a);
}

/* ---- conv_transpose2d ---- */

tg_tensor *tg_conv_transpose2d(const tg_tensor *x, const tg_tensor *w, const tg_tensor *bias,
                               const tg_conv_transpose2d_opts *opts) {
  static const char *const api = "tg_conv_transpose2d";
  const tg_conv_transpose2d_opts o = opts ? *opts : (tg_conv_transpose2d_opts){0};
  const int64_t stride[2] = {or_one(o.stride[0]), or_one(o.stride[1])},
                dilation[2] = {or_one(o.dilation[0]), or_one(o.dilation[1])},
                groups = or_one(o.groups);
  bool batched;
  if (!check_operands(api, x, w, bias) ||
      !check_batched(api, "x", x, 2, "[N, C_in, H, W]", &batched) ||
      !tg__check(w->ndim == 4, TG_ERR_SHAPE, api,
                 "w must be 4-D [C_in, C_out / groups, kh, kw], "
                 "got %s",
                 tg__sizes_str(w)) ||
      !check_at_least(api, "groups", 1, &groups, 1) ||
      !check_at_least(api, "stride", 2, stride, 1) ||
      !check_at_least(api, "dilation", 2, dilation, 1) ||
      !check_at_least(api, "padding", 2, o.padding, 0) ||
      !check_at_least(api, "output_padding", 2, o.output_padding, 0))
    return NULL;
  const int64_t c_in = x->sizes[batched ? 1 : 0], c_out = groups * w->sizes[1];
  if (!tg__check(w->sizes[0] == c_in, TG_ERR_SHAPE, api,
                 "x is %s with %lld channels, but w is %s: w.sizes[0] must be C_in",
                 tg__sizes_str(x), (long long)c_in, tg__sizes_str(w)) ||
      !tg__check(c_in % groups == 0, TG_ERR_SHAPE, api,
                 "groups = %lld does not divide C_in = %lld (x is %s)", (long long)groups,
                 (long long)c_in, tg__sizes_str(x)) ||
      !check_bias(api, bias, c_out))
    return NULL;
  tg__conv_geometry g = {stride[0],
                         stride[1],
                         o.padding[0],
                         o.padding[1],
                         dilation[0],
                         dilation[1],
                         groups,
                         0,
                         0,
                         x->sizes[x->ndim - 2],
                         x->sizes[x->ndim - 1],
                         w->sizes[2],
                         w->sizes[3]};
  int64_t size[2];
  for (int d = 0; d < 2; d++) {
    if (!tg__check(o.output_padding[d] < stride[d] || o.output_padding[d] < dilation[d],
                   TG_ERR_ARGUMENT, api,
                   "output_padding = %lld must be smaller than the stride (%lld) or the "
                   "dilation (%lld)",
                   (long long)o.output_padding[d], (long long)stride[d], (long long)dilation[d]))
      return NULL;
    const int64_t in = x->sizes[x->ndim - 2 + d];
    size[d] = (in - 1) * stride[d] - 2 * o.padding[d] + dilation[d] * (w->sizes[2 + d] - 1) +
              o.output_padding[d] + 1;
  }
  if (!tg__check(size[0] > 0 && size[1] > 0, TG_ERR_SHAPE, api,
                 "x is %s: the output size per channel would be %lld x %lld, not positive",
                 tg__sizes_str(x), (long long)size[0], (long long)size[1]))
    return NULL;
  g.h = size[0];
  g.w = size[1];
  tg_scope s = tg_scope_begin();
  tg_tensor *y = tg__conv_transpose2d_apply(lift(x, !batched, 2), w, &g);
  y = tg_scope_escape(s, lower(y, bias, !batched, 2));
  tg_scope_end(s);
  return y;
}

/* ---- unfold / fold ---- */

/* The fold options checked, as a geometry of an image h x w (groups 1). */
static bool fold_geometry(const char *api, const tg_fold_opts *opts, int64_t h, int64_t w,
                          tg__conv_geometry *g) {
  const tg_fold_opts o = opts ? *opts : (tg_fold_opts){0};
  const int64_t stride[2] = {or_one(o.stride[0]), or_one(o.stride[1])},
                dilation[2] = {or_one(o.dilation[0]), or_one(o.dilation[1])};
  if (!check_at_least(api, "kernel_size", 2, o.kernel_size, 1) ||
      !check_at_least(api, "stride", 2, stride, 1) ||
      !check_at_least(api, "dilation", 2, dilation, 1) ||
      !check_at_least(api, "padding", 2, o.padding, 0))
    return false;
  *g = (tg__conv_geometry){stride[0],
                           stride[1],
                           o.padding[0],
                           o.padding[1],
                           dilation[0],
                           dilation[1],
                           1,
                           h,
                           w,
                           windows(h + 2 * o.padding[0], o.kernel_size[0], dilation[0], stride[0]),
                           windows(w + 2 * o.padding[1], o.kernel_size[1], dilation[1], stride[1]),
                           o.kernel_size[0],
                           o.kernel_size[1]};
  return tg__check(g->out_h > 0 && g->out_w > 0, TG_ERR_SHAPE, api,
                   "an image of %lld x %lld with kernel_size (%lld, %lld), dilation (%lld, %lld), "
                   "padding (%lld, %lld) and stride (%lld, %lld) has %lld x %lld sliding blocks; "
                   "each must be at least 1",
                   (long long)h, (long long)w, (long long)g->kernel_h, (long long)g->kernel_w,
                   (long long)g->dilation_h, (long long)g->dilation_w, (long long)g->pad_h,
                   (long long)g->pad_w, (long long)g->stride_h, (long long)g->stride_w,
                   (long long)g->out_h, (long long)g->out_w);
}

tg_tensor *tg_unfold(const tg_tensor *x, const tg_fold_opts *opts) {
  static const char *const api = "tg_unfold";
  bool batched;
  tg__conv_geometry g;
  if (!tg__check_arg(api, "x", x) || !tg__check_floating(api, "x", x) ||
      !check_batched(api, "x", x, 2, "[N, C, H, W]", &batched) ||
      !fold_geometry(api, opts, x->sizes[x->ndim - 2], x->sizes[x->ndim - 1], &g))
    return NULL;
  tg_scope s = tg_scope_begin();
  tg_tensor *y = tg__unfold_apply(lift(x, !batched, 2), &g);
  y = tg_scope_escape(s, y && !batched ? tg_squeeze(y, 0) : y);
  tg_scope_end(s);
  return y;
}

tg_tensor *tg_fold(const tg_tensor *x, int64_t output_h, int64_t output_w,
                   const tg_fold_opts *opts) {
  static const char *const api = "tg_fold";
  bool batched;
  tg__conv_geometry g;
  const int64_t output[2] = {output_h, output_w};
  if (!tg__check_arg(api, "x", x) || !tg__check_floating(api, "x", x) ||
      !check_batched(api, "x", x, 1, "[N, C * kh * kw, L]", &batched) ||
      !check_at_least(api, "output size", 2, output, 1) ||
      !fold_geometry(api, opts, output_h, output_w, &g))
    return NULL;
  const int64_t taps = g.kernel_h * g.kernel_w, blocks = g.out_h * g.out_w;
  const int64_t depth = x->sizes[x->ndim - 2], length = x->sizes[x->ndim - 1];
  if (!tg__check(depth % taps == 0, TG_ERR_SHAPE, api,
                 "x is %s: its dim %d (%lld) must be divisible by the kernel's %lld x %lld taps",
                 tg__sizes_str(x), x->ndim - 2, (long long)depth, (long long)g.kernel_h,
                 (long long)g.kernel_w) ||
      !tg__check(length == blocks, TG_ERR_SHAPE, api,
                 "x is %s: its last dim must be the %lld x %lld = %lld sliding blocks of a "
                 "%lld x %lld output",
                 tg__sizes_str(x), (long long)g.out_h, (long long)g.out_w, (long long)blocks,
                 (long long)output_h, (long long)output_w))
    return NULL;
  tg_scope s = tg_scope_begin();
  tg_tensor *y = tg__fold_apply(batched ? x : tg_unsqueeze(x, 0), &g);
  y = tg_scope_escape(s, y && !batched ? tg_squeeze(y, 0) : y);
  tg_scope_end(s);
  return y;
}
