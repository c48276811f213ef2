/* Sample inputs of embedding and its backward (ops/def/embedding.def). Indices drawn from a
 * range smaller than their count repeat, so the backward's sums over repeats are checked. */
#include "testing/samples/samples_internal.h"

/* A transposed (non-contiguous) I64 index [rows, cols] in [0, bound). */
static tg_tensor *transposed_indices(const tg_sample_request *r, int64_t bound, int64_t rows,
                                     int64_t cols) {
  tg_tensor *t = tg__sample_indices(r, bound, TG_SHAPE(cols, rows));
  return t ? tg_transpose(t, 0, 1) : NULL;
}

/* weight [n, d], indices I64 in [0, n). */
int tg__samples_embedding(const tg_sample_request *r, tg_sample *out) {
  tg__samples b = tg__samples_begin(r, out);
  tg_sample *s;
#define EMB(label, weight, indices)                                                                \
  s = tg__sample_new(&b, label);                                                                   \
  tg__sample_input(&b, s, weight);                                                                 \
  tg__sample_input(&b, s, indices);
  if (r->bench) {
    EMB("bench", TG__GRAD(&b, TG__ANY, 10000, 128), tg__sample_indices(r, 10000, TG_SHAPE(8192)))
    return tg__samples_end(&b);
  }
  EMB("1-D indices", TG__GRAD(&b, TG__ANY, 5, 3), tg__sample_indices(r, 5, TG_SHAPE(4)))
  EMB("2-D indices with repeats", TG__GRAD(&b, TG__ANY, 3, 4),
      tg__sample_indices(r, 3, TG_SHAPE(2, 4)))
  EMB("0-dim index", TG__GRAD(&b, TG__ANY, 4, 3), tg__sample_indices(r, 4, 0, NULL))
  EMB("zero-size indices", TG__GRAD(&b, TG__ANY, 4, 3), tg__sample_indices(r, 4, TG_SHAPE(0)))
  EMB("transposed weight", tg__sample_tensor(r, TG__TRANSPOSED, TG__ANY, true, TG_SHAPE(6, 3)),
      tg__sample_indices(r, 6, TG_SHAPE(5)))
  EMB("stepped weight, transposed indices",
      tg__sample_tensor(r, TG__STEPPED, TG__ANY, true, TG_SHAPE(4, 3)),
      transposed_indices(r, 4, 3, 2))
  EMB("one row", TG__GRAD(&b, TG__ANY, 1, 2), tg__sample_indices(r, 1, TG_SHAPE(3)))
#undef EMB
  return tg__samples_end(&b);
}

/* grad [*indices.shape, d], indices I64 in [0, n); ints: n. */
int tg__samples_embedding_backward(const tg_sample_request *r, tg_sample *out) {
  tg__samples b = tg__samples_begin(r, out);
  tg_sample *s;
#define EMB_BWD(label, grad, indices, n)                                                           \
  s = tg__sample_new(&b, label);                                                                   \
  tg__sample_input(&b, s, grad);                                                                   \
  tg__sample_input(&b, s, indices);                                                                \
  tg__sample_int(s, n);
  if (r->bench) {
    EMB_BWD("bench", TG__GRAD(&b, TG__ANY, 8192, 128), tg__sample_indices(r, 10000, TG_SHAPE(8192)),
            10000)
    return tg__samples_end(&b);
  }
  EMB_BWD("1-D indices", TG__GRAD(&b, TG__ANY, 4, 3), tg__sample_indices(r, 5, TG_SHAPE(4)), 5)
  EMB_BWD("2-D indices with repeats", TG__GRAD(&b, TG__ANY, 2, 4, 3),
          tg__sample_indices(r, 3, TG_SHAPE(2, 4)), 3)
  EMB_BWD("0-dim index", TG__GRAD(&b, TG__ANY, 3), tg__sample_indices(r, 4, 0, NULL), 4)
  EMB_BWD("zero-size indices", TG__GRAD(&b, TG__ANY, 0, 3), tg__sample_indices(r, 4, TG_SHAPE(0)),
          4)
  EMB_BWD("transposed grad, transposed indices",
          tg__sample_tensor(r, TG__TRANSPOSED, TG__ANY, true, TG_SHAPE(3, 2, 4)),
          transposed_indices(r, 2, 3, 2), 2)
#undef EMB_BWD
  return tg__samples_end(&b);
}
