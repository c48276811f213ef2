/* The convolution family's geometry checks and its two data movements, im2col and col2im,
 * written over the device's generic drivers (copy, fill, binary add): im2col is one strided
 * copy out of a window view of the (padded) image, col2im one in-place add per kernel tap
 * into a zeroed padded image. Every device with drivers (CPU, CUDA, meta) runs them; the
 * products between them are the device's GEMM (src/ops/conv.c). */
#include "ops/backend.h"
#include "ops/conv_internal.h"
#include "tensor/check.h"
#include "tensor/tensor_impl.h"
#include "tg/tensor_ops.h"

/* Bounds that keep every product of the geometry far from int64 overflow; an image or grid
 * this large would not fit in memory anyway. */
#define MAX_EXTENT ((int64_t)1 << 31)

tg__conv_geometry tg__conv_geometry_saved(const tg_ctx *ctx) {
  int64_t v[TG__CONV_NUM_INTS];
  for (int i = 0; i < TG__CONV_NUM_INTS; i++) v[i] = tg_ctx_int(ctx, i);
  return (tg__conv_geometry){v[0], v[1], v[2], v[3],  v[4],  v[5], v[6],
                             v[7], v[8], v[9], v[10], v[11], v[12]};
}

bool tg__conv_geometry_of(const char *op, const tg_ctx *ctx, tg__conv_geometry *g) {
  if (!tg__check(tg_ctx_num_ints(ctx) == TG__CONV_NUM_INTS, TG_ERR_ARGUMENT, op,
                 "takes %d integer parameters (stride, padding and dilation per dim, groups, "
                 "image size, grid size, kernel size), %d given",
                 TG__CONV_NUM_INTS, tg_ctx_num_ints(ctx)))
    return false;
  *g = tg__conv_geometry_saved(ctx);
  const int64_t *v = &g->stride_h;
  static const char *const names[TG__CONV_NUM_INTS] = {
      "stride_h", "stride_w", "pad_h", "pad_w", "dilation_h", "dilation_w", "groups",
      "h",        "w",        "out_h", "out_w", "kernel_h",   "kernel_w"};
  /* strides, dilations, groups and kernel sizes start at 1; the rest at 0 */
  static const int64_t least[TG__CONV_NUM_INTS] = {1, 1, 0, 0, 1, 1, 1, 0, 0, 0, 0, 1, 1};
  for (int i = 0; i < TG__CONV_NUM_INTS; i++)
    if (!tg__check(v[i] >= least[i] && v[i] < MAX_EXTENT, TG_ERR_ARGUMENT, op,
                   "%s = %lld is out of range [%lld, %lld)", names[i], (long long)v[i],
                   (long long)least[i], (long long)MAX_EXTENT))
      return false;
  return true;
}

/* The padded extent: the image after its leading padding, or the last tap of the last
 * window, whichever reaches further. */
static int64_t padded_extent(int64_t pad, int64_t size, int64_t out, int64_t stride,
                             int64_t dilation, int64_t kernel) {
  const int64_t image_end = pad + size;
  const int64_t last_tap = out > 0 ? (out - 1) * stride + (kernel - 1) * dilation + 1 : 0;
  return image_end > last_tap ? image_end : last_tap;
}

int64_t tg__conv_padded_h(const tg__conv_geometry *g) {
  return padded_extent(g->pad_h, g->h, g->out_h, g->stride_h, g->dilation_h, g->kernel_h);
}

int64_t tg__conv_padded_w(const tg__conv_geometry *g) {
  return padded_extent(g->pad_w, g->w, g->out_w, g->stride_w, g->dilation_w, g->kernel_w);
}

/* Whether the windows read the image itself: no padding, nothing beyond it. */
static bool reads_image_in_place(const tg__conv_geometry *g) {
  return g->pad_h == 0 && g->pad_w == 0 && tg__conv_padded_h(g) == g->h &&
         tg__conv_padded_w(g) == g->w;
}

/* The image [n, c, h, w] inside a contiguous padded buffer [n, c, hp, wp]. */
static tg_tensor *interior(const tg_tensor *padded, const tg__conv_geometry *g) {
  const int64_t n = padded->sizes[0], c = padded->sizes[1], hp = padded->sizes[2],
                wp = padded->sizes[3];
  return tg_as_strided(padded, 4, (const int64_t[]){n, c, g->h, g->w},
                       (const int64_t[]){c * hp * wp, hp * wp, wp, 1},
                       tg_offset(padded) + g->pad_h * wp + g->pad_w);
}

/* cols [m, rows, out_h * grid_w] as [m, c, kh, kw, out_h, grid_w]: rows split into channel and
 * tap, the grid into its rows and columns. */
static tg_tensor *columns_by_tap(const tg_tensor *cols, int64_t c, const tg__conv_geometry *g,
                                 int64_t grid_w) {
  const int64_t *st = cols->strides, taps = g->kernel_h * g->kernel_w;
  return tg_as_strided(
      cols, 6, (const int64_t[]){cols->sizes[0], c, g->kernel_h, g->kernel_w, g->out_h, grid_w},
      (const int64_t[]){st[0], taps * st[1], g->kernel_w * st[1], st[1], grid_w * st[2], st[2]},
      tg_offset(cols));
}

/* Zeros the columns of a wide grid's rows past out_w (cols [m, rows, out_h * grid_w]). */
static bool zero_past_the_grid(const tg_backend *be, tg_tensor *cols, const tg__conv_geometry *g,
                               int64_t grid_w) {
  if (grid_w == g->out_w || tg_numel(cols) == 0) return true;
  const int64_t *st = cols->strides;
  tg_tensor *past = tg_as_strided(
      cols, 4, (const int64_t[]){cols->sizes[0], cols->sizes[1], g->out_h, grid_w - g->out_w},
      (const int64_t[]){st[0], st[1], grid_w * st[2], st[2]}, tg_offset(cols) + g->out_w * st[2]);
  return past && be->fill(past, 0.0) == TG_OK;
}

/* A zeroed padded image [n, c, hp, wp], with `tail` zeros more behind it in its storage (what
 * a wide grid's last windows read past it). */
static tg_tensor *zeroed_padded(const tg_backend *be, int64_t n, int64_t c,
                                const tg__conv_geometry *g, int64_t tail, tg_options opts) {
  const int64_t hp = tg__conv_padded_h(g), wp = tg__conv_padded_w(g);
  tg_tensor *flat = tg_empty(1, (const int64_t[]){n * c * hp * wp + tail}, opts);
  if (!flat || be->fill(flat, 0.0) != TG_OK) return NULL;
  return tg_as_strided(flat, 4, (const int64_t[]){n, c, hp, wp},
                       (const int64_t[]){c * hp * wp, hp * wp, wp, 1}, tg_offset(flat));
}

/* What a wide grid's last window reads past its padded image. */
static int64_t wide_tail(const tg__conv_geometry *g, int64_t grid_w) {
  return grid_w == g->out_w ? 0 : (grid_w - 1) * g->stride_w + (g->kernel_w - 1) * g->dilation_w;
}

bool tg__conv_im2col_into(const char *op, const tg_tensor *x, const tg__conv_geometry *g,
                          tg_tensor *cols, int64_t grid_w, bool zero_past) {
  const tg_backend *be = tg__backend(op, x->storage->device);
  if (!be) return false;
  const int64_t n = x->sizes[0], c = x->sizes[1];
  if (tg_numel(cols) == 0) return true;
  const tg_tensor *image = x;
  if (!reads_image_in_place(g) || grid_w != g->out_w) {
    const tg_options opts = {x->dtype, x->storage->device, false};
    tg_tensor *padded = zeroed_padded(be, n, c, g, wide_tail(g, grid_w), opts);
    if (!padded) return false;
    tg_tensor *inside = tg_numel(x) ? interior(padded, g) : NULL;
    if (tg_numel(x) && (!inside || be->copy(inside, x) != TG_OK)) return false;
    image = padded;
  }
  /* window (r, s), tap (i, j) of image element [b, ch]: one strided view, copied packed */
  const int64_t *st = image->strides;
  tg_tensor *windows =
      tg_as_strided(image, 6, (const int64_t[]){n, c, g->kernel_h, g->kernel_w, g->out_h, grid_w},
                    (const int64_t[]){st[0], st[1], g->dilation_h * st[2], g->dilation_w * st[3],
                                      g->stride_h * st[2], g->stride_w * st[3]},
                    tg_offset(image));
  tg_tensor *packed = windows ? columns_by_tap(cols, c, g, grid_w) : NULL;
  return packed && be->copy(packed, windows) == TG_OK &&
         (!zero_past || zero_past_the_grid(be, cols, g, grid_w));
}

tg_tensor *tg__conv_im2col(const char *op, const tg_tensor *x, const tg__conv_geometry *g) {
  const int64_t n = x->sizes[0], c = x->sizes[1], taps = g->kernel_h * g->kernel_w,
                grid = g->out_h * g->out_w;
  const tg_options opts = {x->dtype, x->storage->device, false};
  tg_tensor *cols = tg_empty(3, (const int64_t[]){n, c * taps, grid}, opts);
  return cols && tg__conv_im2col_into(op, x, g, cols, g->out_w, false) ? cols : NULL;
}

bool tg__conv_col2im_into(const char *op, tg_tensor *cols, const tg__conv_geometry *g,
                          tg_tensor *image, int64_t grid_w) {
  const tg_backend *be = tg__backend(op, cols->storage->device);
  if (!be) return false;
  const int64_t n = image->sizes[0], c = image->sizes[1], taps = g->kernel_h * g->kernel_w;
  if (tg_numel(image) == 0) return true;
  /* The sums land in a zeroed padded image, or in the image itself when the windows read
   * it in place and it is contiguous. */
  const bool in_place = reads_image_in_place(g) && grid_w == g->out_w && tg_is_contiguous(image);
  const tg_options opts = {cols->dtype, cols->storage->device, false};
  tg_tensor *padded = in_place ? image : zeroed_padded(be, n, c, g, wide_tail(g, grid_w), opts);
  if (!padded || (in_place && be->fill(padded, 0.0) != TG_OK) ||
      !zero_past_the_grid(be, cols, g, grid_w))
    return false;
  const int64_t hp = padded->sizes[2], wp = padded->sizes[3];
  tg_tensor *by_tap = tg_numel(cols) > 0 ? columns_by_tap(cols, c, g, grid_w) : NULL;
  if (tg_numel(cols) > 0 && !by_tap) return false;
  /* One add per tap: within a tap the windows hit distinct elements, so each add is a plain
   * elementwise one; the taps' overlaps sum across the adds. A wide grid's extra columns
   * (zeros) land past the image's rows, in padding or the next row: they add nothing. */
  for (int64_t tap = 0; tap < taps && by_tap; tap++) {
    const int64_t i = tap / g->kernel_w, j = tap % g->kernel_w;
    const int64_t sizes[4] = {n, c, g->out_h, grid_w};
    tg_tensor *dst = tg_as_strided(
        padded, 4, sizes, (const int64_t[]){c * hp * wp, hp * wp, g->stride_h * wp, g->stride_w},
        tg_offset(padded) + i * g->dilation_h * wp + j * g->dilation_w);
    const int64_t *st = by_tap->strides;
    tg_tensor *src =
        dst ? tg_as_strided(by_tap, 4, sizes, (const int64_t[]){st[0], st[1], st[4], st[5]},
                            tg_offset(by_tap) + i * st[2] + j * st[3])
            : NULL;
    if (!src || be->binary(TG_BINARY_ADD, 1.0, dst, dst, src) != TG_OK) return false;
  }
  if (in_place) return true;
  tg_tensor *inside = interior(padded, g);
  return inside && be->copy(image, inside) == TG_OK;
}

tg_tensor *tg__conv_col2im(const char *op, const tg_tensor *cols, int64_t channels,
                           const tg__conv_geometry *g) {
  const tg_options opts = {cols->dtype, cols->storage->device, false};
  tg_tensor *image = tg_empty(4, (const int64_t[]){cols->sizes[0], channels, g->h, g->w}, opts);
  /* grid_w out_w: cols is only read */
  return image && tg__conv_col2im_into(op, (tg_tensor *)cols, g, image, g->out_w) ? image : NULL;
}
