/* Pooling geometry: PyTorch's output sizes and shape checks, and the window maps every pooling
 * op runs over (format: src/ops/def/pool.def), built on the host in PyTorch's window order
 * (rows, then columns), so sums add up in PyTorch's order and ties pick PyTorch's element. */
#include <limits.h>

#include "ops/pool_internal.h"
#include "tensor/check.h"
#include "tensor/tensor_impl.h"
#include "tg/tensor_ops.h"

/* Floor division for b > 0 (a may be negative). */
static int64_t div_floor(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

int64_t tg__pool_out_size(int64_t in, int64_t kernel, int64_t pad, int64_t stride, int64_t dilation,
                          bool ceil_mode) {
  int64_t out =
      div_floor(in + 2 * pad - dilation * (kernel - 1) - 1 + (ceil_mode ? stride - 1 : 0), stride) +
      1;
  /* the last window must start inside the input or the left padding */
  if (ceil_mode && (out - 1) * stride >= in + pad) out--;
  return out;
}

/* Each of the two numbers of a parameter in [low, INT32_MAX] (larger ones would overflow the
 * size arithmetic long before they could make sense). */
static bool check_pair(const char *fn, const char *name, const int64_t *v, int64_t low,
                       const char *rule) {
  return tg__check(v[0] >= low && v[1] >= low, TG_ERR_ARGUMENT, fn,
                   "%s must be %s, got (%lld, %lld)", name, rule, (long long)v[0],
                   (long long)v[1]) &&
         tg__check(v[0] <= INT32_MAX && v[1] <= INT32_MAX, TG_ERR_ARGUMENT, fn,
                   "%s (%lld, %lld) is too large (at most %d)", name, (long long)v[0],
                   (long long)v[1], INT32_MAX);
}

bool tg__pool_check(const char *fn, const tg_tensor *x, const int64_t *kernel,
                    const int64_t *stride, const int64_t *pad, const int64_t *dilation,
                    bool ceil_mode, tg__pool_dim *h, tg__pool_dim *w) {
  const int nd = x->ndim;
  if (!tg__check_floating(fn, "x", x) ||
      !tg__check((nd == 3 || nd == 4) && x->sizes[nd - 1] > 0 && x->sizes[nd - 2] > 0 &&
                     x->sizes[nd - 3] > 0,
                 TG_ERR_SHAPE, fn,
                 "x is %s; expected [C, H, W] or [N, C, H, W] with C, H and W > 0 (N may be 0)",
                 tg__sizes_str(x)) ||
      !check_pair(fn, "kernel_size", kernel, 1, "> 0") ||
      !check_pair(fn, "stride", stride, 1, "> 0") ||
      !check_pair(fn, "dilation", dilation, 1, "> 0") ||
      !check_pair(fn, "padding", pad, 0, ">= 0") ||
      !tg__check(pad[0] <= kernel[0] / 2 && pad[1] <= kernel[1] / 2, TG_ERR_ARGUMENT, fn,
                 "padding (%lld, %lld) must be at most half the kernel_size (%lld, %lld)",
                 (long long)pad[0], (long long)pad[1], (long long)kernel[0], (long long)kernel[1]))
    return false;
  const int64_t in_h = x->sizes[nd - 2], in_w = x->sizes[nd - 1];
  *h = (tg__pool_dim){in_h, kernel[0], stride[0], pad[0], dilation[0], 0};
  *w = (tg__pool_dim){in_w, kernel[1], stride[1], pad[1], dilation[1], 0};
  h->out = tg__pool_out_size(in_h, kernel[0], pad[0], stride[0], dilation[0], ceil_mode);
  w->out = tg__pool_out_size(in_w, kernel[1], pad[1], stride[1], dilation[1], ceil_mode);
  return tg__check(h->out >= 1 && w->out >= 1, TG_ERR_SHAPE, fn,
                   "x is %s: kernel_size (%lld, %lld), stride (%lld, %lld), padding (%lld, "
                   "%lld), dilation (%lld, %lld) give an output of %lldx%lld, too small",
                   tg__sizes_str(x), (long long)kernel[0], (long long)kernel[1],
                   (long long)stride[0], (long long)stride[1], (long long)pad[0], (long long)pad[1],
                   (long long)dilation[0], (long long)dilation[1], (long long)h->out,
                   (long long)w->out);
}

/* A CPU I64 tensor [1, m, k] to fill; NULL with the error pending (TG_ERR_MEMORY when its
 * size would not even fit an address: windows of a huge input on a device without data). */
static tg_tensor *host_map(int64_t m, int64_t k, int64_t **data) {
  *data = NULL;
  if (k > 0 && m > INT64_MAX / 8 / k) {
    tg__fail(TG_ERR_MEMORY, "pooling",
             "the window map of %lld windows of %lld elements is too large", (long long)m,
             (long long)k);
    return NULL;
  }
  tg_tensor *t = tg_empty(3, (const int64_t[]){1, m, k}, (tg_options){.dtype = TG_I64});
  *data = t ? tg_data_ptr(t) : NULL;
  return t;
}

tg_tensor *tg__pool_window_map(const tg__pool_dim *h, const tg__pool_dim *w) {
  const int64_t kk = h->kernel * w->kernel;
  int64_t *m;
  tg_tensor *map = host_map(h->out * w->out, kk, &m);
  if (!map) return NULL;
  for (int64_t oh = 0; oh < h->out; oh++)
    for (int64_t ow = 0; ow < w->out; ow++)
      for (int64_t kh = 0; kh < h->kernel; kh++)
        for (int64_t kw = 0; kw < w->kernel; kw++) {
          const int64_t ih = oh * h->stride - h->pad + kh * h->dilation;
          const int64_t iw = ow * w->stride - w->pad + kw * w->dilation;
          const bool inside = ih >= 0 && ih < h->in && iw >= 0 && iw < w->in;
          *m++ = inside ? ih * w->in + iw : -1;
        }
  return map;
}

/* A CPU F64 tensor [m] to fill. */
static tg_tensor *host_divisor(int64_t m, double **data) {
  tg_tensor *t = tg_empty(1, &m, (tg_options){.dtype = TG_F64});
  *data = t ? tg_data_ptr(t) : NULL;
  return t;
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

bool tg__avg_pool_map(const tg__pool_dim *h, const tg__pool_dim *w, bool count_include_pad,
                      int64_t divisor_override, tg_tensor **map, tg_tensor **divisor) {
  int64_t *m;
  double *d;
  *map = host_map(h->out * w->out, h->kernel * w->kernel, &m);
  *divisor = *map ? host_divisor(h->out * w->out, &d) : NULL;
  if (!*divisor) return false;
  for (int64_t oh = 0; oh < h->out; oh++)
    for (int64_t ow = 0; ow < w->out; ow++) {
      /* PyTorch's avg_pool2d: the window clipped to the padded input counts with
       * count_include_pad, clipped to the input without it */
      int64_t h0 = oh * h->stride - h->pad, w0 = ow * w->stride - w->pad;
      int64_t h1 = min64(h0 + h->kernel, h->in + h->pad),
              w1 = min64(w0 + w->kernel, w->in + w->pad);
      const int64_t pool_size = (h1 - h0) * (w1 - w0);
      h0 = max64(h0, 0), w0 = max64(w0, 0), h1 = min64(h1, h->in), w1 = min64(w1, w->in);
      int64_t k = 0;
      for (int64_t ih = h0; ih < h1; ih++)
        for (int64_t iw = w0; iw < w1; iw++, k++) *m++ = ih * w->in + iw;
      for (; k < h->kernel * w->kernel; k++) *m++ = -1;
      const int64_t inside = (h1 > h0 && w1 > w0) ? (h1 - h0) * (w1 - w0) : 0;
      *d++ = inside == 0            ? 1.0 /* an empty window is 0, as PyTorch's */
             : divisor_override > 0 ? (double)divisor_override
             : count_include_pad    ? (double)pool_size
                                    : (double)inside;
    }
  return true;
}

/* PyTorch's adaptive window [start, end) of output i of out over in. */
static int64_t adaptive_start(int64_t i, int64_t out, int64_t in) { return (i * in) / out; }
static int64_t adaptive_end(int64_t i, int64_t out, int64_t in) {
  return ((i + 1) * in + out - 1) / out;
}

static int64_t adaptive_max_window(int64_t in, int64_t out) {
  int64_t most = 0;
  for (int64_t i = 0; i < out; i++)
    most = max64(most, adaptive_end(i, out, in) - adaptive_start(i, out, in));
  return most;
}

bool tg__adaptive_pool_map(int64_t in_h, int64_t in_w, int64_t out_h, int64_t out_w,
                           tg_tensor **map, tg_tensor **divisor) {
  const int64_t kk = adaptive_max_window(in_h, out_h) * adaptive_max_window(in_w, out_w);
  int64_t *m;
  double *d;
  *map = host_map(out_h * out_w, kk, &m);
  *divisor = *map ? host_divisor(out_h * out_w, &d) : NULL;
  if (!*divisor) return false;
  for (int64_t oh = 0; oh < out_h; oh++)
    for (int64_t ow = 0; ow < out_w; ow++) {
      const int64_t h0 = adaptive_start(oh, out_h, in_h), h1 = adaptive_end(oh, out_h, in_h);
      const int64_t w0 = adaptive_start(ow, out_w, in_w), w1 = adaptive_end(ow, out_w, in_w);
      int64_t k = 0;
      for (int64_t ih = h0; ih < h1; ih++)
        for (int64_t iw = w0; iw < w1; iw++, k++) *m++ = ih * in_w + iw;
      for (; k < kk; k++) *m++ = -1;
      *d++ = (double)((h1 - h0) * (w1 - w0));
    }
  return true;
}

tg_tensor *tg__pool_on(const tg_tensor *host, tg_device device, tg_dtype dtype) {
  return tg_to_device(host->dtype == TG_I64 ? host : tg_to_dtype(host, dtype), device);
}
