/* Sample inputs of the indexing ops (ops/def/index.def): every dim, strided inputs and
 * indices, an index smaller than x, repeated indices (drawn from a range smaller than their
 * count, so the backwards' sums over repeats are checked), empty ones, and a bench call at
 * GPT's sizes (gather along the vocabulary, index_select of embedding rows). topk's values
 * are distinct random numbers, so gradcheck straddles no tie. */
#include "testing/samples/samples_internal.h"
#include "tg/tensor_ops.h"

static tg_tensor *transposed_indices(const tg_sample_request *r, int64_t bound, int64_t rows,
                                     int64_t cols) {
  tg_tensor *t = tg__sample_indices(r, bound, TG_SHAPE(cols, rows));
  return t ? tg_transpose(t, 0, 1) : NULL;
}

/* inputs: x, index; ints: dim */
int tg__samples_gather(const tg_sample_request *r, tg_sample *out) {
  tg__samples b = tg__samples_begin(r, out);
  tg_sample *s;
#define GATHER(label, x, index, dim)                                                               \
  s = tg__sample_new(&b, label);                                                                   \
  tg__sample_input(&b, s, x);                                                                      \
  tg__sample_input(&b, s, index);                                                                  \
  tg__sample_int(s, dim);
  if (r->bench) {
    GATHER("bench: logits [B*T, V] at the targets", TG__GRAD(&b, TG__ANY, 1024, 1024),
           tg__sample_indices(r, 1024, TG_SHAPE(1024, 1)), 1)
    return tg__samples_end(&b);
  }
  GATHER("2-D, dim 1, repeats", TG__GRAD(&b, TG__ANY, 3, 4),
         tg__sample_indices(r, 4, TG_SHAPE(3, 5)), 1)
  GATHER("2-D, dim 0, index smaller", TG__GRAD(&b, TG__ANY, 4, 3),
         tg__sample_indices(r, 4, TG_SHAPE(2, 2)), 0)
  GATHER("3-D, middle dim, transposed x",
         tg__sample_tensor(r, TG__TRANSPOSED, TG__ANY, true, TG_SHAPE(2, 3, 4)),
         tg__sample_indices(r, 3, TG_SHAPE(2, 2, 4)), 1)
  GATHER("stepped x, transposed index",
         tg__sample_tensor(r, TG__STEPPED, TG__ANY, true, TG_SHAPE(3, 4)),
         transposed_indices(r, 4, 3, 2), 1)
  GATHER("1-D", TG__GRAD(&b, TG__ANY, 5), tg__sample_indices(r, 5, TG_SHAPE(7)), 0)
  GATHER("empty index", TG__GRAD(&b, TG__ANY, 2, 3), tg__sample_indices(r, 3, TG_SHAPE(2, 0)), 1)
#undef GATHER
  return tg__samples_end(&b);
}

/* inputs: x, index, src; ints: dim */
int tg__samples_scatter_add(const tg_sample_request *r, tg_sample *out) {
  tg__samples b = tg__samples_begin(r, out);
  tg_sample *s;
#define SCATTER(label, x, index, src, dim)                                                         \
  s = tg__sample_new(&b, label);                                                                   \
  tg__sample_input(&b, s, x);                                                                      \
  tg__sample_input(&b, s, index);                                                                  \
  tg__sample_input(&b, s, src);                                                                    \
  tg__sample_int(s, dim);
  if (r->bench) {
    SCATTER("bench: logits' gradient at the targets", TG__GRAD(&b, TG__ANY, 1024, 1024),
            tg__sample_indices(r, 1024, TG_SHAPE(1024, 1)), TG__GRAD(&b, TG__ANY, 1024, 1), 1)
    return tg__samples_end(&b);
  }
  SCATTER("2-D, dim 1, repeats", TG__GRAD(&b, TG__ANY, 3, 4),
          tg__sample_indices(r, 4, TG_SHAPE(3, 6)), TG__GRAD(&b, TG__ANY, 3, 6), 1)
  SCATTER("dim 0, index smaller than src and x", TG__GRAD(&b, TG__ANY, 3, 4),
          tg__sample_indices(r, 3, TG_SHAPE(4, 2)), TG__GRAD(&b, TG__ANY, 5, 3), 0)
  SCATTER("3-D, transposed x, stepped src",
          tg__sample_tensor(r, TG__TRANSPOSED, TG__ANY, true, TG_SHAPE(2, 3, 4)),
          tg__sample_indices(r, 3, TG_SHAPE(2, 4, 4)),
          tg__sample_tensor(r, TG__STEPPED, TG__ANY, true, TG_SHAPE(2, 4, 4)), 1)
  SCATTER("x without grad", TG__CONST(&b, TG__ANY, 4), tg__sample_indices(r, 4, TG_SHAPE(6)),
          TG__GRAD(&b, TG__ANY, 6), 0)
  SCATTER("empty index", TG__GRAD(&b, TG__ANY, 2, 3), tg__sample_indices(r, 3, TG_SHAPE(2, 0)),
          TG__GRAD(&b, TG__ANY, 2, 1), 1)
#undef SCATTER
  return tg__samples_end(&b);
}

/* inputs: x, index [m]; ints: dim */
int tg__samples_index_select(const tg_sample_request *r, tg_sample *out) {
  tg__samples b = tg__samples_begin(r, out);
  tg_sample *s;
#define SELECT(label, x, index, dim)                                                               \
  s = tg__sample_new(&b, label);                                                                   \
  tg__sample_input(&b, s, x);                                                                      \
  tg__sample_input(&b, s, index);                                                                  \
  tg__sample_int(s, dim);
  if (r->bench) {
    SELECT("bench: embedding rows", TG__GRAD(&b, TG__ANY, 4096, 768),
           tg__sample_indices(r, 4096, TG_SHAPE(2048)), 0)
    return tg__samples_end(&b);
  }
  SELECT("rows, repeats", TG__GRAD(&b, TG__ANY, 4, 3), tg__sample_indices(r, 4, TG_SHAPE(6)), 0)
  SELECT("columns of transposed x",
         tg__sample_tensor(r, TG__TRANSPOSED, TG__ANY, true, TG_SHAPE(3, 5)),
         tg__sample_indices(r, 5, TG_SHAPE(4)), 1)
  SELECT("3-D middle dim, stepped x",
         tg__sample_tensor(r, TG__STEPPED, TG__ANY, true, TG_SHAPE(2, 4, 3)),
         tg__sample_indices(r, 4, TG_SHAPE(5)), 1)
  SELECT("0-dim index", TG__GRAD(&b, TG__ANY, 3, 2), tg__sample_indices(r, 3, 0, NULL), 0)
  SELECT("empty index", TG__GRAD(&b, TG__ANY, 3, 2), tg__sample_indices(r, 3, TG_SHAPE(0)), 1)
#undef SELECT
  return tg__samples_end(&b);
}

/* inputs: x, index [m], src; ints: dim; scalars: alpha */
int tg__samples_index_add(const tg_sample_request *r, tg_sample *out) {
  tg__samples b = tg__samples_begin(r, out);
  tg_sample *s;
#define INDEX_ADD(label, x, index, src, dim, alpha)                                                \
  s = tg__sample_new(&b, label);                                                                   \
  tg__sample_input(&b, s, x);                                                                      \
  tg__sample_input(&b, s, index);                                                                  \
  tg__sample_input(&b, s, src);                                                                    \
  tg__sample_scalar(s, alpha);                                                                     \
  tg__sample_int(s, dim);
  if (r->bench) {
    INDEX_ADD("bench: embedding gradient", TG__GRAD(&b, TG__ANY, 4096, 768),
              tg__sample_indices(r, 4096, TG_SHAPE(2048)), TG__GRAD(&b, TG__ANY, 2048, 768), 0, 1.0)
    return tg__samples_end(&b);
  }
  INDEX_ADD("rows, repeats", TG__GRAD(&b, TG__ANY, 4, 3), tg__sample_indices(r, 4, TG_SHAPE(6)),
            TG__GRAD(&b, TG__ANY, 6, 3), 0, 1.0)
  INDEX_ADD("columns, alpha -2.5, transposed src", TG__GRAD(&b, TG__ANY, 3, 5),
            tg__sample_indices(r, 5, TG_SHAPE(4)),
            tg__sample_tensor(r, TG__TRANSPOSED, TG__ANY, true, TG_SHAPE(3, 4)), 1, -2.5)
  INDEX_ADD("3-D middle dim, stepped x",
            tg__sample_tensor(r, TG__STEPPED, TG__ANY, true, TG_SHAPE(2, 4, 3)),
            tg__sample_indices(r, 4, TG_SHAPE(5)), TG__GRAD(&b, TG__ANY, 2, 5, 3), 1, 0.5)
  INDEX_ADD("empty index", TG__GRAD(&b, TG__ANY, 3, 2), tg__sample_indices(r, 3, TG_SHAPE(0)),
            TG__GRAD(&b, TG__ANY, 3, 0), 1, 1.0)
#undef INDEX_ADD
  return tg__samples_end(&b);
}

/* inputs: x; ints: k, dim, largest, sorted; outputs: values, indices */
int tg__samples_topk(const tg_sample_request *r, tg_sample *out) {
  tg__samples b = tg__samples_begin(r, out);
  tg_sample *s;
#define TOPK(label, x, k, dim, largest)                                                            \
  s = tg__sample_new(&b, label);                                                                   \
  tg__sample_input(&b, s, x);                                                                      \
  for (int k_ = 0; k_ < 4; k_++) tg__sample_int(s, ((const int64_t[]){k, dim, largest, 1})[k_]);   \
  if (s) s->n_outputs = 2;
  if (r->bench) {
    TOPK("bench: top 50 of a vocabulary", TG__GRAD(&b, TG__ANY, 64, 50257), 50, 1, 1)
    return tg__samples_end(&b);
  }
  TOPK("last dim, largest", TG__GRAD(&b, TG__ANY, 3, 6), 2, 1, 1)
  TOPK("dim 0, smallest, transposed",
       tg__sample_tensor(r, TG__TRANSPOSED, TG__ANY, true, TG_SHAPE(5, 3)), 3, 0, 0)
  TOPK("3-D middle dim, stepped",
       tg__sample_tensor(r, TG__STEPPED, TG__ANY, true, TG_SHAPE(2, 4, 3)), 4, 1, 1)
  TOPK("k = 0", TG__GRAD(&b, TG__ANY, 2, 3), 0, 1, 1)
  TOPK("1-D, all", TG__GRAD(&b, TG__ANY, 5), 5, 0, 0)
#undef TOPK
  return tg__samples_end(&b);
}
