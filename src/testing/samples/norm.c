/* Sample inputs of normalize_groups (src/ops/def/norm.def), tg's OpInfo: the layouts of
 * batch_norm, layer_norm and group_norm, a transposed x, affine parameters without grad,
 * zero rows; bench: batch_norm's layout at [64, 64, 32 x 32]. */
#include "testing/samples/samples_internal.h"

/* x of the given sizes, weight and bias [C]; ints A, R, C, K, G; eps. grads: bit 0 x, bit 1
 * weight, bit 2 bias. */
static void call(tg__samples *b, const char *label, int ndim, const int64_t *sizes,
                 tg__layout layout, const int64_t layout_ints[5], unsigned grads) {
  const tg_sample_request *r = b->req;
  tg_sample *s = tg__sample_new(b, label);
  tg__sample_input(b, s, tg__sample_tensor(r, layout, TG__ANY, grads & 1, ndim, sizes));
  tg__sample_input(
      b, s, tg__sample_tensor(r, TG__CONTIGUOUS, TG__ANY, grads & 2, TG_SHAPE(layout_ints[2])));
  tg__sample_input(
      b, s, tg__sample_tensor(r, TG__CONTIGUOUS, TG__ANY, grads & 4, TG_SHAPE(layout_ints[2])));
  if (!s) return;
  for (int k = 0; k < 5; k++) tg__sample_int(s, layout_ints[k]);
  tg__sample_scalar(s, 1e-5);
  s->n_outputs = 3;
}

int tg__samples_normalize_groups(const tg_sample_request *r, tg_sample *out) {
  tg__samples b = tg__samples_begin(r, out);
  if (r->bench) {
    call(&b, "bench: batch_norm [64, 64, 1024]", 3, (const int64_t[]){64, 64, 1024}, TG__CONTIGUOUS,
         (const int64_t[]){64, 1, 64, 1024, 64}, 7);
    return tg__samples_end(&b);
  }
  call(&b, "batch_norm [4, 3, 5]", 3, (const int64_t[]){4, 3, 5}, TG__CONTIGUOUS,
       (const int64_t[]){4, 1, 3, 5, 3}, 7);
  call(&b, "batch_norm [5, 3], transposed", 2, (const int64_t[]){5, 3}, TG__TRANSPOSED,
       (const int64_t[]){5, 1, 3, 1, 3}, 7);
  call(&b, "layer_norm [3, 4]", 2, (const int64_t[]){3, 4}, TG__CONTIGUOUS,
       (const int64_t[]){1, 3, 4, 1, 3}, 7);
  call(&b, "group_norm [2, 6, 3], 2 groups", 3, (const int64_t[]){2, 6, 3}, TG__CONTIGUOUS,
       (const int64_t[]){1, 2, 6, 3, 4}, 7);
  call(&b, "affine without grad", 3, (const int64_t[]){2, 4, 3}, TG__CONTIGUOUS,
       (const int64_t[]){1, 2, 4, 3, 4}, 1);
  call(&b, "affine grad only", 2, (const int64_t[]){3, 2}, TG__CONTIGUOUS,
       (const int64_t[]){3, 1, 2, 1, 2}, 6);
  /* (an empty batch_norm batch has NaN statistics, which no gradient check can compare) */
  call(&b, "layer_norm, zero rows", 2, (const int64_t[]){0, 4}, TG__CONTIGUOUS,
       (const int64_t[]){1, 0, 4, 1, 0}, 7);
  return tg__samples_end(&b);
}
