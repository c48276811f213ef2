/* Sample inputs of the pooling and padding ops (ops/def/pool.def): 3-D and 4-D inputs, strided
 * ones, padding, dilation, ceil_mode windows that run past the input, an empty batch. Values are
 * distinct random numbers, so max pooling has no ties for gradcheck to straddle. */
#include "testing/samples/samples_internal.h"

static tg_tensor *input(const tg_sample_request *r, tg__layout layout, int ndim,
                        const int64_t *sizes) {
  return tg__sample_tensor(r, layout, TG__ANY, true, ndim, sizes);
}

/* ints: kernel, stride, padding, dilation (h, w each), ceil_mode; outputs values, indices. */
int tg__samples_max_pool2d(const tg_sample_request *r, tg_sample *out) {
  tg__samples b = tg__samples_begin(r, out);
  tg_sample *s;
#define MAXPOOL(label, x, kh, kw, sh, sw, ph, pw, dh, dw, ceil)                                    \
  s = tg__sample_new(&b, label);                                                                   \
  tg__sample_input(&b, s, x);                                                                      \
  for (int k_ = 0; k_ < 9; k_++)                                                                   \
    tg__sample_int(s, ((const int64_t[]){kh, kw, sh, sw, ph, pw, dh, dw, ceil})[k_]);              \
  if (s) s->n_outputs = 2;
  if (r->bench) {
    MAXPOOL("bench", input(r, TG__CONTIGUOUS, TG_SHAPE(32, 64, 32, 32)), 2, 2, 2, 2, 0, 0, 1, 1, 0)
    return tg__samples_end(&b);
  }
  MAXPOOL("2x2", input(r, TG__CONTIGUOUS, TG_SHAPE(2, 2, 4, 4)), 2, 2, 2, 2, 0, 0, 1, 1, 0)
  MAXPOOL("3-D, 3x3 stride 2 padding 1", input(r, TG__CONTIGUOUS, TG_SHAPE(2, 5, 5)), 3, 3, 2, 2, 1,
          1, 1, 1, 0)
  MAXPOOL("transposed, ceil_mode", input(r, TG__TRANSPOSED, TG_SHAPE(1, 2, 5, 4)), 2, 2, 2, 2, 0, 0,
          1, 1, 1)
  MAXPOOL("stepped, dilation 2", input(r, TG__STEPPED, TG_SHAPE(1, 1, 5, 6)), 2, 2, 1, 1, 1, 1, 2,
          2, 0)
  MAXPOOL("2x1 overlapping", input(r, TG__CONTIGUOUS, TG_SHAPE(1, 2, 3, 3)), 2, 1, 1, 1, 0, 0, 1, 1,
          0)
  MAXPOOL("empty batch", input(r, TG__CONTIGUOUS, TG_SHAPE(0, 2, 4, 4)), 2, 2, 2, 2, 0, 0, 1, 1, 0)
#undef MAXPOOL
  return tg__samples_end(&b);
}

/* ints: kernel, stride, padding (h, w each), ceil_mode, count_include_pad, divisor_override */
int tg__samples_avg_pool2d(const tg_sample_request *r, tg_sample *out) {
  tg__samples b = tg__samples_begin(r, out);
  tg_sample *s;
#define AVGPOOL(label, x, kh, kw, sh, sw, ph, pw, ceil, include_pad, divisor)                      \
  s = tg__sample_new(&b, label);                                                                   \
  tg__sample_input(&b, s, x);                                                                      \
  for (int k_ = 0; k_ < 9; k_++)                                                                   \
    tg__sample_int(s, ((const int64_t[]){kh, kw, sh, sw, ph, pw, ceil, include_pad, divisor})[k_]);
  if (r->bench) {
    AVGPOOL("bench", input(r, TG__CONTIGUOUS, TG_SHAPE(32, 64, 32, 32)), 2, 2, 2, 2, 0, 0, 0, 1, 0)
    return tg__samples_end(&b);
  }
  AVGPOOL("2x2", input(r, TG__CONTIGUOUS, TG_SHAPE(2, 2, 4, 4)), 2, 2, 2, 2, 0, 0, 0, 1, 0)
  AVGPOOL("3-D, padding, count_include_pad", input(r, TG__CONTIGUOUS, TG_SHAPE(2, 5, 5)), 3, 3, 2,
          2, 1, 1, 0, 1, 0)
  AVGPOOL("padding without it, ceil_mode", input(r, TG__TRANSPOSED, TG_SHAPE(1, 2, 5, 4)), 3, 2, 2,
          2, 1, 1, 1, 0, 0)
  AVGPOOL("stepped, divisor_override", input(r, TG__STEPPED, TG_SHAPE(1, 1, 4, 5)), 2, 3, 1, 2, 0,
          1, 0, 1, 5)
  AVGPOOL("empty batch", input(r, TG__CONTIGUOUS, TG_SHAPE(0, 2, 4, 4)), 2, 2, 2, 2, 0, 0, 0, 1, 0)
#undef AVGPOOL
  return tg__samples_end(&b);
}

/* ints: output size h, w */
int tg__samples_adaptive_avg_pool2d(const tg_sample_request *r, tg_sample *out) {
  tg__samples b = tg__samples_begin(r, out);
  tg_sample *s;
#define ADAPTIVE(label, x, oh, ow)                                                                 \
  s = tg__sample_new(&b, label);                                                                   \
  tg__sample_input(&b, s, x);                                                                      \
  tg__sample_int(s, oh);                                                                           \
  tg__sample_int(s, ow);
  if (r->bench) {
    ADAPTIVE("bench", input(r, TG__CONTIGUOUS, TG_SHAPE(32, 64, 32, 32)), 7, 7)
    return tg__samples_end(&b);
  }
  ADAPTIVE("5x7 to 3x4 (overlapping)", input(r, TG__CONTIGUOUS, TG_SHAPE(2, 2, 5, 7)), 3, 4)
  ADAPTIVE("3-D global", input(r, TG__CONTIGUOUS, TG_SHAPE(3, 4, 4)), 1, 1)
  ADAPTIVE("transposed, upsampling", input(r, TG__TRANSPOSED, TG_SHAPE(1, 2, 3, 2)), 4, 3)
  ADAPTIVE("empty output", input(r, TG__CONTIGUOUS, TG_SHAPE(1, 2, 3, 3)), 0, 2)
#undef ADAPTIVE
  return tg__samples_end(&b);
}

/* scalars: value, mode; ints: the pad list */
int tg__samples_pad(const tg_sample_request *r, tg_sample *out) {
  tg__samples b = tg__samples_begin(r, out);
  tg_sample *s;
#define PAD(label, x, value, mode, n, ...)                                                         \
  s = tg__sample_new(&b, label);                                                                   \
  tg__sample_input(&b, s, x);                                                                      \
  tg__sample_scalar(s, value);                                                                     \
  tg__sample_scalar(s, mode);                                                                      \
  for (int k_ = 0; k_ < (n); k_++) tg__sample_int(s, ((const int64_t[]){__VA_ARGS__})[k_]);
  if (r->bench) {
    PAD("bench", input(r, TG__CONTIGUOUS, TG_SHAPE(32, 64, 32, 32)), 0, 1, 4, 1, 1, 1, 1)
    return tg__samples_end(&b);
  }
  PAD("constant, 2 dims, crop", input(r, TG__CONTIGUOUS, TG_SHAPE(2, 3, 4)), 1.5, 0, 4, 1, -1, 2, 0)
  PAD("constant, every dim", input(r, TG__TRANSPOSED, TG_SHAPE(2, 3)), 0, 0, 4, 1, 2, 0, 1)
  PAD("reflect 1-D", input(r, TG__CONTIGUOUS, TG_SHAPE(2, 5)), 0, 1, 2, 3, 4)
  PAD("reflect 2-D, stepped", input(r, TG__STEPPED, TG_SHAPE(1, 2, 3, 4)), 0, 1, 4, 2, 1, 2, 0)
  PAD("reflect 3-D", input(r, TG__CONTIGUOUS, TG_SHAPE(1, 3, 3, 3)), 0, 1, 6, 1, 2, 2, 1, 1, 0)
  PAD("replicate 2-D, crop", input(r, TG__TRANSPOSED, TG_SHAPE(2, 3, 4)), 0, 2, 4, 3, -1, 0, 2)
  PAD("replicate, empty batch", input(r, TG__CONTIGUOUS, TG_SHAPE(0, 2, 3)), 0, 2, 2, 1, 1)
#undef PAD
  return tg__samples_end(&b);
}

/* x [*, L], map I64 [1 or P, M, K] in [0, L), divisor [M] > 0 (constant) or none. */
int tg__samples_pool_gather(const tg_sample_request *r, tg_sample *out) {
  tg__samples b = tg__samples_begin(r, out);
  tg_sample *s;
#define GATHER(label, x, map, divisor)                                                             \
  s = tg__sample_new(&b, label);                                                                   \
  tg__sample_input(&b, s, x);                                                                      \
  tg__sample_input(&b, s, map);                                                                    \
  tg__sample_input(&b, s, divisor);
  if (r->bench) {
    GATHER("bench", input(r, TG__CONTIGUOUS, TG_SHAPE(2048, 1024)),
           tg__sample_indices(r, 1024, TG_SHAPE(1, 256, 9)), TG__CONST(&b, TG__POSITIVE, 256))
    return tg__samples_end(&b);
  }
  GATHER("one map", input(r, TG__CONTIGUOUS, TG_SHAPE(2, 3, 5)),
         tg__sample_indices(r, 5, TG_SHAPE(1, 4, 3)), TG__CONST(&b, TG__POSITIVE, 4))
  GATHER("a map per plane, transposed", input(r, TG__TRANSPOSED, TG_SHAPE(3, 4)),
         tg__sample_indices(r, 4, TG_SHAPE(3, 6, 2)), TG__CONST(&b, TG__POSITIVE, 6))
  s = tg__sample_new(&b, "no divisor");
  tg__sample_input(&b, s, input(r, TG__CONTIGUOUS, TG_SHAPE(2, 5)));
  tg__sample_input(&b, s, tg__sample_indices(r, 5, TG_SHAPE(2, 3, 1)));
#undef GATHER
  return tg__samples_end(&b);
}

/* grad [*, M], map, divisor as pool_gather's; ints: L. */
int tg__samples_pool_scatter(const tg_sample_request *r, tg_sample *out) {
  tg__samples b = tg__samples_begin(r, out);
  tg_sample *s;
#define SCATTER(label, grad, map, divisor, L)                                                      \
  s = tg__sample_new(&b, label);                                                                   \
  tg__sample_input(&b, s, grad);                                                                   \
  tg__sample_input(&b, s, map);                                                                    \
  tg__sample_input(&b, s, divisor);                                                                \
  tg__sample_int(s, L);
  if (r->bench) {
    SCATTER("bench", input(r, TG__CONTIGUOUS, TG_SHAPE(2048, 256)),
            tg__sample_indices(r, 1024, TG_SHAPE(1, 256, 9)), TG__CONST(&b, TG__POSITIVE, 256),
            1024)
    return tg__samples_end(&b);
  }
  SCATTER("one map, repeats", input(r, TG__CONTIGUOUS, TG_SHAPE(2, 3, 4)),
          tg__sample_indices(r, 3, TG_SHAPE(1, 4, 3)), TG__CONST(&b, TG__POSITIVE, 4), 5)
  SCATTER("a map per plane, stepped", input(r, TG__STEPPED, TG_SHAPE(3, 6)),
          tg__sample_indices(r, 4, TG_SHAPE(3, 6, 2)), TG__CONST(&b, TG__POSITIVE, 6), 4)
  s = tg__sample_new(&b, "no divisor, repeats");
  tg__sample_input(&b, s, input(r, TG__CONTIGUOUS, TG_SHAPE(2, 4)));
  tg__sample_input(&b, s, tg__sample_indices(r, 2, TG_SHAPE(2, 4, 1)));
  tg__sample_int(s, 3);
#undef SCATTER
  return tg__samples_end(&b);
}
