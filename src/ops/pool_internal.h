/* Shared by the pooling and padding ops (src/ops/pool*.c, src/ops/pad.c): window maps built on
 * the host (pool_map.c) and the gather/scatter pair every linear one of them runs
 * (pool_gather.c). The format of a map: src/ops/def/pool.def. */
#ifndef TG_POOL_INTERNAL_H
#define TG_POOL_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "tg/autograd.h"

/* One dim of a pooling window geometry. */
typedef struct tg__pool_dim {
  int64_t in, kernel, stride, pad, dilation, out;
} tg__pool_dim;

/* PyTorch's pooling output size (pooling_output_shape), for checked parameters. */
int64_t tg__pool_out_size(int64_t in, int64_t kernel, int64_t pad, int64_t stride, int64_t dilation,
                          bool ceil_mode);

/* The checks PyTorch's pool2d_shape_check makes, naming fn: x [N, C, H, W] (N may be 0) or
 * [C, H, W], none of C, H, W 0; kernel, stride, dilation >= 1; 0 <= pad <= kernel / 2; output
 * >= 1. Fills h and w (out included). */
bool tg__pool_check(const char *fn, const tg_tensor *x, const int64_t *kernel,
                    const int64_t *stride, const int64_t *pad, const int64_t *dilation,
                    bool ceil_mode, tg__pool_dim *h, tg__pool_dim *w);

/* Host maps (CPU I64 tensors, scope-owned; NULL with the error pending). The window map
 * [1, OH * OW, kh * kw]: the entries inside the input, -1 elsewhere. */
tg_tensor *tg__pool_window_map(const tg__pool_dim *h, const tg__pool_dim *w);
/* Average pooling's map and divisor [OH * OW] (F64, on the CPU), PyTorch's divide factors. */
bool tg__avg_pool_map(const tg__pool_dim *h, const tg__pool_dim *w, bool count_include_pad,
                      int64_t divisor_override, tg_tensor **map, tg_tensor **divisor);
/* Adaptive average pooling's map and divisor (window elements). */
bool tg__adaptive_pool_map(int64_t in_h, int64_t in_w, int64_t out_h, int64_t out_w,
                           tg_tensor **map, tg_tensor **divisor);

/* The gather and its adjoint as the ops' forwards and backwards apply them (no checks of the
 * map: it was built or produced by tg). x [*, L] -> [*, M]; grad [*, M] -> [*, L]. map and
 * divisor on x's device, divisor of x's dtype or NULL (none: a plain sum from -0, which copies
 * a one-entry window exactly). */
tg_tensor *tg__pool_gather(const tg_tensor *x, const tg_tensor *map, const tg_tensor *divisor);
tg_tensor *tg__pool_scatter(const tg_tensor *grad, const tg_tensor *map, const tg_tensor *divisor,
                            int64_t L);
/* The same without recording, for a forward: out [*, M], by the device's kernel named kernel
 * (pool_gather.window_sum or its alias under the calling op; fn names the op in errors). */
tg_status tg__pool_gather_into(const char *fn, const char *kernel, tg_tensor *out,
                               const tg_tensor *x, const tg_tensor *map, const tg_tensor *divisor);

/* A host tensor moved to device and converted to dtype (the map stays I64). */
tg_tensor *tg__pool_on(const tg_tensor *host, tg_device device, tg_dtype dtype);

#endif
