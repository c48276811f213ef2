/* Sample inputs of the convolution family (ops/def/conv.def): each op's geometry (the 13
 * ints of src/ops/conv_internal.h) over strides, padding (even, uneven, past the image),
 * dilation, groups, non-contiguous operands and an empty batch; the bench call is a
 * ResNet-18 layer (batch 8, 64 -> 64 channels, 3x3 at 56x56). */
#include "ops/conv_internal.h"
#include "testing/samples/samples_internal.h"

/* One geometry of the samples: image h x w, kernel kh x kw, the grid it gives. */
typedef struct conv_case {
  const char *label;
  int64_t n, c_in, c_out, h, w, kh, kw, stride_h, stride_w, pad_h, pad_w, pad_end_h, pad_end_w,
      dilation_h, dilation_w, groups;
  tg__layout layout; /* of the first input */
} conv_case;

static tg__conv_geometry geometry_of(const conv_case *c) {
  const int64_t span_h = c->dilation_h * (c->kh - 1) + 1, span_w = c->dilation_w * (c->kw - 1) + 1;
  return (tg__conv_geometry){c->stride_h,
                             c->stride_w,
                             c->pad_h,
                             c->pad_w,
                             c->dilation_h,
                             c->dilation_w,
                             c->groups,
                             c->h,
                             c->w,
                             (c->h + c->pad_h + c->pad_end_h - span_h) / c->stride_h + 1,
                             (c->w + c->pad_w + c->pad_end_w - span_w) / c->stride_w + 1,
                             c->kh,
                             c->kw};
}

static const conv_case cases[] = {
    {"plain 3x3", 2, 2, 3, 5, 4, 3, 3, 1, 1, 0, 0, 0, 0, 1, 1, 1, TG__CONTIGUOUS},
    {"stride 2, padding 1", 1, 2, 2, 5, 6, 3, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, TG__CONTIGUOUS},
    {"uneven (same) padding, dilation 2", 2, 1, 2, 4, 5, 2, 3, 1, 1, 0, 2, 1, 2, 1, 2, 1,
     TG__TRANSPOSED},
    {"groups 2, stepped", 1, 4, 2, 4, 4, 2, 2, 1, 2, 0, 1, 0, 1, 1, 1, 2, TG__STEPPED},
    {"depthwise, stride past the end", 1, 3, 3, 5, 5, 2, 2, 3, 2, 0, 0, 0, 0, 1, 1, 3,
     TG__CONTIGUOUS},
    {"empty batch", 0, 2, 2, 3, 3, 2, 2, 1, 1, 0, 0, 0, 0, 1, 1, 1, TG__CONTIGUOUS},
};
static const conv_case bench_case = {"bench", 8, 64, 64, 56, 56, 3, 3, 1,
                                     1,       1, 1,  1,  1,  1,  1, 1, TG__CONTIGUOUS};

typedef enum which_op { CONV2D, CONV_TRANSPOSE2D, CONV2D_WEIGHT, UNFOLD, FOLD } which_op;

static tg_tensor *tensor(const tg_sample_request *r, tg__layout layout, int ndim,
                         const int64_t *sizes) {
  /* the transposed layout swaps the last two dims: needs them; fine for every shape here */
  return tg__sample_tensor(r, layout, TG__ANY, true, ndim, sizes);
}

static int samples_of(which_op op, const tg_sample_request *r, tg_sample *out) {
  tg__samples b = tg__samples_begin(r, out);
  const int count = r->bench ? 1 : (int)(sizeof cases / sizeof cases[0]);
  for (int i = 0; i < count; i++) {
    const conv_case *c = r->bench ? &bench_case : &cases[i];
    const tg__conv_geometry g = geometry_of(c);
    if ((op == UNFOLD || op == FOLD) && c->groups != 1) continue;
    const int64_t image[4] = {c->n, c->c_in, c->h, c->w},
                  grid[4] = {c->n, c->c_out, g.out_h, g.out_w},
                  weight[4] = {c->c_out, c->c_in / c->groups, c->kh, c->kw},
                  cols[3] = {c->n, c->c_in * c->kh * c->kw, g.out_h * g.out_w};
    tg_sample *s = tg__sample_new(&b, c->label);
    switch (op) {
    case CONV2D:
      tg__sample_input(&b, s, tensor(r, c->layout, 4, image));
      tg__sample_input(&b, s, tensor(r, TG__CONTIGUOUS, 4, weight));
      break;
    case CONV_TRANSPOSE2D:
      tg__sample_input(&b, s, tensor(r, c->layout, 4, grid));
      tg__sample_input(&b, s, tensor(r, TG__CONTIGUOUS, 4, weight));
      break;
    case CONV2D_WEIGHT:
      tg__sample_input(&b, s, tensor(r, c->layout, 4, image));
      tg__sample_input(&b, s, tensor(r, TG__CONTIGUOUS, 4, grid));
      break;
    case UNFOLD:
      tg__sample_input(&b, s, tensor(r, c->layout, 4, image));
      break;
    case FOLD:
      tg__sample_input(&b, s, tensor(r, c->layout, 3, cols));
      break;
    }
    if (!s) continue;
    const int64_t *v = &g.stride_h;
    for (int k = 0; k < TG__CONV_NUM_INTS; k++) tg__sample_int(s, v[k]);
  }
  return tg__samples_end(&b);
}

int tg__samples_conv2d(const tg_sample_request *r, tg_sample *out) {
  return samples_of(CONV2D, r, out);
}
int tg__samples_conv_transpose2d(const tg_sample_request *r, tg_sample *out) {
  return samples_of(CONV_TRANSPOSE2D, r, out);
}
int tg__samples_conv2d_weight(const tg_sample_request *r, tg_sample *out) {
  return samples_of(CONV2D_WEIGHT, r, out);
}
int tg__samples_unfold(const tg_sample_request *r, tg_sample *out) {
  return samples_of(UNFOLD, r, out);
}
int tg__samples_fold(const tg_sample_request *r, tg_sample *out) {
  return samples_of(FOLD, r, out);
}
