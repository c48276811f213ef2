/* tg — convolutions (torch.nn.functional's conv1d, conv2d, conv_transpose2d, unfold, fold).
 *
 * Layouts are PyTorch's: images [N, C, H, W] (or unbatched [C, H, W]), signals [N, C, L] (or
 * [C, L]); a conv weight is [C_out, C_in / groups, kh, kw], a transposed conv's
 * [C_in, C_out / groups, kh, kw]; bias [C_out] or NULL. One floating dtype (F32 or F64) and
 * one device for all operands; any strides. Results are scope-owned; NULL on error with a
 * status naming the function, the argument and the sizes (TG_ERR_SHAPE, TG_ERR_ARGUMENT,
 * TG_ERR_DTYPE, TG_ERR_DEVICE).
 *
 * The options structs are zero-initialised to PyTorch's defaults: a 0 stride, dilation or
 * groups means 1, padding 0; a NULL options pointer means all defaults. Negative values are
 * errors. Every op is differentiable any number of times (conv2d's backward is written with
 * conv_transpose2d and the weight's convolution, and the other way round; unfold and fold are
 * each other's adjoint). */
#ifndef TG_CONV_H
#define TG_CONV_H

#include "tensor.h"

TG_API_BEGIN
#ifdef __cplusplus
extern "C" {
#endif

/* How a convolution pads: PyTorch's padding=int, "valid" or "same". */
typedef enum tg_conv_padding_mode {
  TG_CONV_PADDING_EXPLICIT = 0, /* the padding fields, on both sides of each dim */
  TG_CONV_PADDING_VALID,        /* no padding */
  /* output size = input size: dilation * (kernel - 1) split before and after, the odd one
   * after (PyTorch's rule); refused with a stride above 1 */
  TG_CONV_PADDING_SAME,
} tg_conv_padding_mode;

/* What the padding holds: torch.nn.Conv1d/Conv2d's padding_mode ("zeros", "reflect",
 * "replicate", "circular"). Other than zeros, x is padded first (tg_pad's reflect and
 * replicate, or wrapped around) and convolved without padding, as PyTorch's layers do: the
 * same numbers and gradients. Reflect needs each pad < the dim's size, circular <= it. */
typedef enum tg_conv_padding_fill {
  TG_CONV_FILL_ZEROS = 0,
  TG_CONV_FILL_REFLECT,
  TG_CONV_FILL_REPLICATE,
  TG_CONV_FILL_CIRCULAR,
} tg_conv_padding_fill;

typedef struct tg_conv2d_opts {
  int64_t stride[2];   /* [h, w]; 0 = 1 */
  int64_t padding[2];  /* [h, w], TG_CONV_PADDING_EXPLICIT only */
  int64_t dilation[2]; /* [h, w]; 0 = 1 */
  int64_t groups;      /* 0 = 1; divides C_in and C_out */
  tg_conv_padding_mode padding_mode;
  tg_conv_padding_fill fill; /* zeroed: zeros */
} tg_conv2d_opts;

/* y [N, C_out, H_out, W_out] = the cross-correlation of x [N, C_in, H, W] with
 * w [C_out, C_in / groups, kh, kw], plus bias; H_out = (H + pad_before + pad_after -
 * dilation * (kh - 1) - 1) / stride + 1. A kernel larger than the padded input is an
 * error; an empty batch gives an empty output. */
tg_tensor *tg_conv2d(const tg_tensor *x, const tg_tensor *w, const tg_tensor *bias,
                     const tg_conv2d_opts *opts);

typedef struct tg_conv1d_opts {
  int64_t stride, padding, dilation, groups; /* as tg_conv2d_opts, one dim */
  tg_conv_padding_mode padding_mode;
  tg_conv_padding_fill fill;
} tg_conv1d_opts;

/* x [N, C_in, L] (or [C_in, L]), w [C_out, C_in / groups, k]: conv2d over one dim. */
tg_tensor *tg_conv1d(const tg_tensor *x, const tg_tensor *w, const tg_tensor *bias,
                     const tg_conv1d_opts *opts);

typedef struct tg_conv_transpose2d_opts {
  int64_t stride[2];         /* 0 = 1 */
  int64_t padding[2];        /* removed from both sides of the output */
  int64_t output_padding[2]; /* added after; smaller than the stride or the dilation */
  int64_t dilation[2];       /* 0 = 1 */
  int64_t groups;            /* 0 = 1 */
} tg_conv_transpose2d_opts;

/* conv2d's adjoint in its input (the "deconvolution"): x [N, C_in, H, W] (or 3-D),
 * w [C_in, C_out / groups, kh, kw], bias [C_out] or NULL; output [N, C_out, H_out, W_out] with
 * H_out = (H - 1) * stride - 2 * padding + dilation * (kh - 1) + output_padding + 1, which
 * must be positive. */
tg_tensor *tg_conv_transpose2d(const tg_tensor *x, const tg_tensor *w, const tg_tensor *bias,
                               const tg_conv_transpose2d_opts *opts);

typedef struct tg_fold_opts {
  int64_t kernel_size[2]; /* required: each at least 1 */
  int64_t dilation[2];    /* 0 = 1 */
  int64_t padding[2];     /* on both sides */
  int64_t stride[2];      /* 0 = 1 */
} tg_fold_opts;

/* im2col: x [N, C, H, W] (or [C, H, W]) -> the sliding blocks [N, C * kh * kw, L] (or
 * [C * kh * kw, L]), L = the number of windows, at least 1. */
tg_tensor *tg_unfold(const tg_tensor *x, const tg_fold_opts *opts);
/* col2im, unfold's adjoint: blocks x [N, C * kh * kw, L] (or 2-D) summed back into
 * [N, C, output_h, output_w]; overlapping entries add up, entries in the padding are dropped. */
tg_tensor *tg_fold(const tg_tensor *x, int64_t output_h, int64_t output_w,
                   const tg_fold_opts *opts);

#ifdef __cplusplus
}
#endif
TG_API_END
#endif
