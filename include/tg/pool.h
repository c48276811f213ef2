/* tg — pooling and padding, with PyTorch's names and semantics (torch.nn.functional's
 * max_pool2d, avg_pool2d, adaptive_avg_pool2d and pad).
 *
 * The pooling functions take x [N, C, H, W] or [C, H, W] (N may be 0; C, H and W may not),
 * F32 or F64, any strides, on any device; the result has x's leading dims and the pooled
 * [OH, OW]. Each options struct zero-initialised is PyTorch's defaults: stride {0, 0} is the
 * kernel, dilation {0, 0} is 1, no padding, floor mode. A stride or dilation with one of its
 * two numbers 0, or any negative number, is an error, as are a kernel < 1, a padding above
 * half the kernel and an output smaller than 1x1 (TG_ERR_ARGUMENT or TG_ERR_SHAPE, naming the
 * function, the argument and the sizes). Output size along a dim, as PyTorch's:
 *   out = floor((in + 2 pad - dilation (kernel - 1) - 1 + (ceil_mode ? stride - 1 : 0)) / stride) +
 * 1 and with ceil_mode one less when the last window would start at or after in + pad (it must
 * start inside the input or the left padding).
 *
 * All are differentiable to any order: the backwards are linear in the gradient and written as
 * registered ops whose own backwards are each other (pool_gather and pool_scatter). */
#ifndef TG_POOL_H
#define TG_POOL_H

#include "tensor.h"

TG_API_BEGIN
#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_max_pool2d_options {
  int64_t stride[2];   /* {0, 0}: the kernel */
  int64_t padding[2];  /* implicit -inf on both sides, at most kernel / 2 */
  int64_t dilation[2]; /* {0, 0}: 1 */
  bool ceil_mode;
} tg_max_pool2d_options;

/* The max of each window. A NaN in a window wins; of equal maxima the first (row-major) is
 * taken, as PyTorch's CPU kernel does; the gradient goes to that element only. */
tg_tensor *tg_max_pool2d(const tg_tensor *x, const int64_t kernel[2], tg_max_pool2d_options opts);
/* The same, and the I64 indices of the maxima: the flat h * W + w in the input plane, as
 * PyTorch's return_indices=True (not differentiable). *values and *indices are NULL on error. */
tg_status tg_max_pool2d_with_indices(const tg_tensor *x, const int64_t kernel[2],
                                     tg_max_pool2d_options opts, tg_tensor **values,
                                     tg_tensor **indices);

typedef struct tg_avg_pool2d_options {
  int64_t stride[2];  /* {0, 0}: the kernel */
  int64_t padding[2]; /* implicit zeros on both sides, at most kernel / 2 */
  bool ceil_mode;
  /* PyTorch's count_include_pad=False: divide by the window's elements inside the input only.
   * false (the default) counts the padding too, but never the part of a ceil_mode window
   * beyond it. */
  bool exclude_padding;
  int64_t divisor_override; /* 0: none; else every window's sum is divided by it (> 0) */
} tg_avg_pool2d_options;

/* The mean of each window. */
tg_tensor *tg_avg_pool2d(const tg_tensor *x, const int64_t kernel[2], tg_avg_pool2d_options opts);

/* The mean over the windows [floor(i * in / out), ceil((i + 1) * in / out)) in each dim.
 * output_size {OH, OW}, each >= 0 (an empty result for 0). */
tg_tensor *tg_adaptive_avg_pool2d(const tg_tensor *x, const int64_t output_size[2]);

typedef enum tg_pad_mode {
  TG_PAD_CONSTANT = 0, /* value outside; any number of trailing dims; negative pads crop */
  TG_PAD_REFLECT,      /* mirrored without repeating the edge; each pad < the dim's size */
  TG_PAD_REPLICATE,    /* the edge repeated */
} tg_pad_mode;

typedef struct tg_pad_options {
  tg_pad_mode mode;
  double value; /* TG_PAD_CONSTANT's fill */
} tg_pad_options;

/* torch.nn.functional.pad: pad[0], pad[1] are the last dim's left and right, pad[2], pad[3]
 * the dim before it, and so on; n_pad is even and at most 2 * x's dims. Negative pads crop.
 * Reflect and replicate pad the last 1, 2 or 3 dims of an input with 1 or 2 more dims (as
 * PyTorch's: [C, W] or [N, C, W] for n_pad 2, ...). F32 or F64 (PyTorch's constant
 * mode also takes integers; tg's does not yet). The gradient of a padded part goes back to the
 * elements it copies. */
tg_tensor *tg_pad(const tg_tensor *x, int n_pad, const int64_t *pad, tg_pad_options opts);

#ifdef __cplusplus
}
#endif
TG_API_END
#endif
