/* Sample inputs of softmax and the losses (ops/def/loss.def). */
#include "testing/samples/samples_internal.h"

/* ints: dim (wrapped; 0 for a 0-dim input). */
static int softmax_samples(const tg_sample_request *r, tg_sample *out) {
  tg__samples b = tg__samples_begin(r, out);
  tg_sample *s;
#define SM(label, x, dim)                                                                          \
  s = tg__sample_new(&b, label);                                                                   \
  tg__sample_input(&b, s, x);                                                                      \
  tg__sample_int(s, dim);
  if (r->bench) {
    SM("bench", TG__GRAD(&b, TG__ANY, 1024, TG__BENCH_NUMEL / 1024), 1)
    return tg__samples_end(&b);
  }
  SM("rows", TG__GRAD(&b, TG__ANY, 3, 4), 1)
  SM("columns", TG__GRAD(&b, TG__ANY, 3, 4), 0)
  SM("transposed", tg__sample_tensor(r, TG__TRANSPOSED, TG__ANY, true, TG_SHAPE(3, 4)), 1)
  SM("stepped, middle dim", tg__sample_tensor(r, TG__STEPPED, TG__ANY, true, TG_SHAPE(2, 3, 2)), 1)
  SM("1-D", TG__GRAD(&b, TG__ANY, 5), 0)
  SM("size-1 dim", TG__GRAD(&b, TG__ANY, 3, 1), 1)
  SM("0-dim", TG__GRAD(&b, TG__ANY), 0)
#undef SM
  return tg__samples_end(&b);
}
int tg__samples_log_softmax(const tg_sample_request *r, tg_sample *out) {
  return softmax_samples(r, out);
}
int tg__samples_softmax(const tg_sample_request *r, tg_sample *out) {
  return softmax_samples(r, out);
}

/* input, target of equal sizes. */
int tg__samples_mse_loss(const tg_sample_request *r, tg_sample *out) {
  tg__samples b = tg__samples_begin(r, out);
  tg_sample *s;
#define MSE(label, input, target)                                                                  \
  s = tg__sample_new(&b, label);                                                                   \
  tg__sample_input(&b, s, input);                                                                  \
  tg__sample_input(&b, s, target);
  if (r->bench) {
    MSE("bench", TG__GRAD(&b, TG__ANY, 1024, TG__BENCH_NUMEL / 1024),
        TG__CONST(&b, TG__ANY, 1024, TG__BENCH_NUMEL / 1024))
    return tg__samples_end(&b);
  }
  MSE("2-D", TG__GRAD(&b, TG__ANY, 3, 4), TG__GRAD(&b, TG__ANY, 3, 4))
  MSE("transposed input, constant target",
      tg__sample_tensor(r, TG__TRANSPOSED, TG__ANY, true, TG_SHAPE(3, 4)),
      TG__CONST(&b, TG__ANY, 3, 4))
  MSE("stepped target", TG__GRAD(&b, TG__ANY, 2, 3),
      tg__sample_tensor(r, TG__STEPPED, TG__ANY, true, TG_SHAPE(2, 3)))
  MSE("0-dim", TG__GRAD(&b, TG__ANY), TG__GRAD(&b, TG__ANY))
#undef MSE
  return tg__samples_end(&b);
}

/* logits [n, c], target I64 [n] in [0, c). */
int tg__samples_cross_entropy(const tg_sample_request *r, tg_sample *out) {
  tg__samples b = tg__samples_begin(r, out);
  tg_sample *s;
#define CE(label, logits, n, c)                                                                    \
  s = tg__sample_new(&b, label);                                                                   \
  tg__sample_input(&b, s, logits);                                                                 \
  tg__sample_input(&b, s, tg__sample_indices(r, c, TG_SHAPE(n)));
  if (r->bench) {
    CE("bench", TG__GRAD(&b, TG__ANY, 1024, 1000), 1024, 1000)
    return tg__samples_end(&b);
  }
  CE("4 x 5", TG__GRAD(&b, TG__ANY, 4, 5), 4, 5)
  CE("transposed", tg__sample_tensor(r, TG__TRANSPOSED, TG__ANY, true, TG_SHAPE(3, 4)), 3, 4)
  CE("stepped", tg__sample_tensor(r, TG__STEPPED, TG__ANY, true, TG_SHAPE(2, 3)), 2, 3)
  CE("one row", TG__GRAD(&b, TG__ANY, 1, 3), 1, 3)
  CE("one class", TG__GRAD(&b, TG__ANY, 2, 1), 2, 1)
#undef CE
  return tg__samples_end(&b);
}
