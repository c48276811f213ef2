/* The convolution family's shared geometry (src/ops/conv*.c): one description of how a
 * kernel slides over an image, used by all five ops (conv2d, conv_transpose2d,
 * conv2d_weight, unfold, fold), which pass it to each other unchanged in their backwards.
 *
 * The image is [N, C, h, w]; the grid of windows is [out_h, out_w]; window (r, s), tap (i, j)
 * reads image row r * stride_h + i * dilation_h - pad_h (and likewise for columns), a row
 * outside [0, h) reading zero. pad_h / pad_w are the padding *before* the image: the padding
 * after it is implied by out_h / out_w, so "same" padding's uneven split and
 * conv_transpose2d's output_padding need nothing more. */
#ifndef TG_CONV_INTERNAL_H
#define TG_CONV_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "tg/autograd.h"
#include "tg/tensor.h"

typedef struct tg__conv_geometry {
  int64_t stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, groups;
  int64_t h, w;         /* the image */
  int64_t out_h, out_w; /* the grid of windows */
  int64_t kernel_h, kernel_w;
} tg__conv_geometry;

/* The geometry travels as the ops' ints, in the struct's order (which is also read as an array
 * of them, from &g->stride_h). */
#define TG__CONV_NUM_INTS 13
_Static_assert(sizeof(tg__conv_geometry) == TG__CONV_NUM_INTS * sizeof(int64_t),
               "tg__conv_geometry is its 13 ints, nothing between them");
#define TG__CONV_INTS(g)                                                                           \
  TG__INTS((g).stride_h, (g).stride_w, (g).pad_h, (g).pad_w, (g).dilation_h, (g).dilation_w,       \
           (g).groups, (g).h, (g).w, (g).out_h, (g).out_w, (g).kernel_h, (g).kernel_w)

/* Reads the geometry from ctx's ints and checks it (counts, signs, sizes that fit in
 * memory); false with TG_ERR_ARGUMENT naming op otherwise. */
bool tg__conv_geometry_of(const char *op, const tg_ctx *ctx, tg__conv_geometry *g);
/* The geometry a forward checked, as its backward reads it back (the forward may have kept
 * more ints after it). */
tg__conv_geometry tg__conv_geometry_saved(const tg_ctx *ctx);

/* The image's padded extent the windows need: [pad_h + h or more, pad_w + w or more]. */
int64_t tg__conv_padded_h(const tg__conv_geometry *g);
int64_t tg__conv_padded_w(const tg__conv_geometry *g);

/* im2col: cols [N, C, kh, kw, out_h, out_w] (a new contiguous tensor) from image x
 * [N, C, h, w] of any strides. NULL with the error pending. */
tg_tensor *tg__conv_im2col(const char *op, const tg_tensor *x, const tg__conv_geometry *g);
/* im2col into cols, a [n, C * kh * kw, out_h * grid_w] view of any strides (the conv ops
 * pack a chunk of images as [C * kh * kw, n * out_h * grid_w], one GEMM operand). grid_w is
 * out_w, or more for a wide grid: windows that go on past out_w along each row, so that with
 * stride_w 1 a row of windows is one contiguous run of the padded image (long rows to copy
 * and add, where out_w may be 14); zero_past: their columns zeroed (what a product over the
 * grid reads: 0 * inf must not reach it), else left as read (conv2d's forward drops those
 * outputs). false with the error pending. */
bool tg__conv_im2col_into(const char *op, const tg_tensor *x, const tg__conv_geometry *g,
                          tg_tensor *cols, int64_t grid_w, bool zero_past);
/* col2im of cols (a view as im2col_into takes; a wide grid's extra columns are zeroed first)
 * into image [n, C, h, w] (overwritten). */
bool tg__conv_col2im_into(const char *op, tg_tensor *cols, const tg__conv_geometry *g,
                          tg_tensor *image, int64_t grid_w);
/* col2im, im2col's adjoint: the image [N, C, h, w] (new, contiguous) that sums each column
 * entry into the element it was read from (entries read from the padding are dropped). cols
 * is contiguous [N, C * kh * kw, out_h * out_w]. */
tg_tensor *tg__conv_col2im(const char *op, const tg_tensor *cols, int64_t channels,
                           const tg__conv_geometry *g);

/* tg_conv2d's checks and geometry for a batched x [N, C_in, H, W] and opts (NULL: the
 * defaults), without running it: for fused ops that convolve (src/ops/conv_bn.c). false with
 * the error naming api otherwise. */
struct tg_conv2d_opts;
bool tg__conv2d_plan(const char *api, const tg_tensor *x, const tg_tensor *w,
                     const struct tg_conv2d_opts *opts, tg__conv_geometry *g);

/* The ops, as their backwards call them (the geometry already checked). */
tg_tensor *tg__conv2d_apply(const tg_tensor *x, const tg_tensor *w, const tg__conv_geometry *g);
tg_tensor *tg__conv_transpose2d_apply(const tg_tensor *y, const tg_tensor *w,
                                      const tg__conv_geometry *g);
tg_tensor *tg__conv2d_weight_apply(const tg_tensor *x, const tg_tensor *y,
                                   const tg__conv_geometry *g);
tg_tensor *tg__unfold_apply(const tg_tensor *x, const tg__conv_geometry *g);
tg_tensor *tg__fold_apply(const tg_tensor *cols, const tg__conv_geometry *g);

#endif
