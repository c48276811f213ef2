/* Sample inputs of the reductions (ops/def/reduce.def, ops/def/reduction.def). Values are
 * distinct random numbers, so max and min have no ties to split a gradient between. */
#include "testing/samples/samples_internal.h"

/* <name>: all elements to 0-dim. */
static int all_samples(const tg_sample_request *r, tg_sample *out) {
  tg__samples b = tg__samples_begin(r, out);
  tg_sample *s;
  if (r->bench) {
    s = tg__sample_new(&b, "bench");
    tg__sample_input(&b, s, TG__GRAD(&b, TG__ANY, 1024, TG__BENCH_NUMEL / 1024));
    return tg__samples_end(&b);
  }
  s = tg__sample_new(&b, "2-D");
  tg__sample_input(&b, s, TG__GRAD(&b, TG__ANY, 3, 4));
  s = tg__sample_new(&b, "transposed");
  tg__sample_input(&b, s, tg__sample_tensor(r, TG__TRANSPOSED, TG__ANY, true, TG_SHAPE(3, 4)));
  s = tg__sample_new(&b, "stepped, 3-D");
  tg__sample_input(&b, s, tg__sample_tensor(r, TG__STEPPED, TG__ANY, true, TG_SHAPE(2, 2, 3)));
  s = tg__sample_new(&b, "0-dim");
  tg__sample_input(&b, s, TG__GRAD(&b, TG__ANY));
  s = tg__sample_new(&b, "one element");
  tg__sample_input(&b, s, TG__GRAD(&b, TG__ANY, 1, 1));
  return tg__samples_end(&b);
}

/* <name>_dim: ints dim (wrapped), keepdim; n_outputs 2 for a SELECT kind (values, I64
 * indices). */
static int dim_samples(const tg_sample_request *r, tg_sample *out, int n_outputs) {
  tg__samples b = tg__samples_begin(r, out);
  tg_sample *s;
#define DIM(label, x, dim, keepdim)                                                                \
  s = tg__sample_new(&b, label);                                                                   \
  tg__sample_input(&b, s, x);                                                                      \
  tg__sample_int(s, dim);                                                                          \
  tg__sample_int(s, keepdim);                                                                      \
  if (s) s->n_outputs = n_outputs;
  if (r->bench) {
    DIM("bench", TG__GRAD(&b, TG__ANY, 1024, TG__BENCH_NUMEL / 1024), 1, 0)
    return tg__samples_end(&b);
  }
  DIM("rows", TG__GRAD(&b, TG__ANY, 3, 4), 1, 0)
  DIM("columns, keepdim", TG__GRAD(&b, TG__ANY, 3, 4), 0, 1)
  DIM("transposed, keepdim", tg__sample_tensor(r, TG__TRANSPOSED, TG__ANY, true, TG_SHAPE(3, 4)), 1,
      1)
  DIM("stepped, middle dim", tg__sample_tensor(r, TG__STEPPED, TG__ANY, true, TG_SHAPE(2, 3, 2)), 1,
      0)
  DIM("size-1 dim", TG__GRAD(&b, TG__ANY, 2, 1, 3), 1, 0)
  DIM("1-D to 0-dim", TG__GRAD(&b, TG__ANY, 5), 0, 0)
#undef DIM
  return tg__samples_end(&b);
}

#define REDUCE_SAMPLES(name, n_outputs)                                                            \
  int tg__samples_##name(const tg_sample_request *r, tg_sample *out) {                             \
    return all_samples(r, out);                                                                    \
  }                                                                                                \
  int tg__samples_##name##_dim(const tg_sample_request *r, tg_sample *out) {                       \
    return dim_samples(r, out, n_outputs);                                                         \
  }
REDUCE_SAMPLES(sum, 1)
REDUCE_SAMPLES(max, 2)
REDUCE_SAMPLES(min, 2)
REDUCE_SAMPLES(mean, 1)

/* ints: the target sizes (x's sizes broadcast from them). */
int tg__samples_sum_to_size(const tg_sample_request *r, tg_sample *out) {
  tg__samples b = tg__samples_begin(r, out);
  tg_sample *s;
#define TO(label, x, ...)                                                                          \
  s = tg__sample_new(&b, label);                                                                   \
  tg__sample_input(&b, s, x);                                                                      \
  for (int k = 0; k < (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)); k++)        \
    tg__sample_int(s, ((const int64_t[]){__VA_ARGS__})[k]);
  if (r->bench) {
    TO("bench", TG__GRAD(&b, TG__ANY, 1024, TG__BENCH_NUMEL / 1024), 1024, 1)
    return tg__samples_end(&b);
  }
  TO("leading dim and a size-1 dim", TG__GRAD(&b, TG__ANY, 2, 3, 4), 3, 1)
  TO("rows", TG__GRAD(&b, TG__ANY, 2, 3), 1, 3)
  TO("transposed", tg__sample_tensor(r, TG__TRANSPOSED, TG__ANY, true, TG_SHAPE(3, 4)), 3, 1)
  TO("stepped, to 1-D", tg__sample_tensor(r, TG__STEPPED, TG__ANY, true, TG_SHAPE(2, 3)), 3)
#undef TO
  s = tg__sample_new(&b, "to 0-dim");
  tg__sample_input(&b, s, TG__GRAD(&b, TG__ANY, 2, 3));
  return tg__samples_end(&b);
}
