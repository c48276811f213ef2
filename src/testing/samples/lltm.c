/* Sample inputs of the fused LLTM cell (ops/def/lltm.def): input [B, I], weights
 * [3S, S + I], bias [3S] or [1, 3S], old_h and old_cell [B, S]; outputs new_h, new_cell.
 * Bench: request->sizes = B, I, S when given (all three), else the tutorial's 16, 32, 128. */
#include "testing/samples/samples_internal.h"

static void cell(tg__samples *b, const char *label, int64_t B, int64_t I, int64_t S, bool bias_row,
                 tg__layout weights_layout, unsigned grads) {
  const tg_sample_request *r = b->req;
  tg_sample *s = tg__sample_new(b, label);
  tg__sample_input(b, s, tg__sample_tensor(r, TG__CONTIGUOUS, TG__ANY, grads & 1, TG_SHAPE(B, I)));
  tg__sample_input(
      b, s, tg__sample_tensor(r, weights_layout, TG__ANY, grads & 2, TG_SHAPE(3 * S, S + I)));
  tg__sample_input(
      b, s,
      bias_row ? tg__sample_tensor(r, TG__CONTIGUOUS, TG__ANY, grads & 4, TG_SHAPE(1, 3 * S))
               : tg__sample_tensor(r, TG__CONTIGUOUS, TG__ANY, grads & 4, TG_SHAPE(3 * S)));
  tg__sample_input(b, s, tg__sample_tensor(r, TG__CONTIGUOUS, TG__ANY, grads & 8, TG_SHAPE(B, S)));
  tg__sample_input(b, s, tg__sample_tensor(r, TG__CONTIGUOUS, TG__ANY, grads & 16, TG_SHAPE(B, S)));
  if (s) s->n_outputs = 2;
}

int tg__samples_lltm(const tg_sample_request *r, tg_sample *out) {
  tg__samples b = tg__samples_begin(r, out);
  if (r->bench) {
    bool given = r->n_sizes >= 3 && r->sizes;
    if (given && (r->sizes[0] <= 0 || r->sizes[1] <= 0 || r->sizes[2] <= 0)) {
      tg_set_error(TG_ERR_ARGUMENT,
                   "lltm samples: sizes B, I, S = %lld, %lld, %lld must be positive",
                   (long long)r->sizes[0], (long long)r->sizes[1], (long long)r->sizes[2]);
      return -1;
    }
    cell(&b, "bench", given ? r->sizes[0] : 16, given ? r->sizes[1] : 32, given ? r->sizes[2] : 128,
         false, TG__CONTIGUOUS, 31);
    return tg__samples_end(&b);
  }
  cell(&b, "every input", 3, 4, 2, false, TG__CONTIGUOUS, 31);
  cell(&b, "bias [1, 3S]", 2, 3, 2, true, TG__CONTIGUOUS, 31);
  cell(&b, "transposed weights", 2, 2, 3, false, TG__TRANSPOSED, 31);
  cell(&b, "weights and bias only", 2, 3, 2, false, TG__CONTIGUOUS, 2 | 4);
  cell(&b, "state only", 2, 3, 2, false, TG__CONTIGUOUS, 8 | 16);
  cell(&b, "batch 1", 1, 2, 1, false, TG__CONTIGUOUS, 31);
  return tg__samples_end(&b);
}
