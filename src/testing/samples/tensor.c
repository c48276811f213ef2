/* Sample inputs of the copies and conversions (ops/def/tensor.def). */
#include "testing/samples/samples_internal.h"

/* x in each layout, with the ints. */
static int copy_samples(const tg_sample_request *r, tg_sample *out, int n_ints,
                        const int64_t *ints) {
  tg__samples b = tg__samples_begin(r, out);
  static const char *const labels[] = {"2-D", "transposed", "stepped", "0-dim"};
  for (int k = r->bench ? 3 : 0; k < 4; k++) {
    tg_sample *s = tg__sample_new(&b, r->bench ? "bench" : labels[k]);
    tg_tensor *x = r->bench ? TG__GRAD(&b, TG__ANY, 1024, TG__BENCH_NUMEL / 1024)
                   : k == 0 ? TG__GRAD(&b, TG__ANY, 3, 4)
                   : k == 1 ? tg__sample_tensor(r, TG__TRANSPOSED, TG__ANY, true, TG_SHAPE(3, 4))
                   : k == 2 ? tg__sample_tensor(r, TG__STEPPED, TG__ANY, true, TG_SHAPE(2, 3))
                            : TG__GRAD(&b, TG__ANY);
    tg__sample_input(&b, s, x);
    for (int i = 0; i < n_ints; i++) tg__sample_int(s, ints[i]);
  }
  return tg__samples_end(&b);
}

int tg__samples_clone(const tg_sample_request *r, tg_sample *out) {
  return copy_samples(r, out, 0, NULL);
}

/* ints: dtype. To F64 (from F32 a conversion; gradcheck runs in F64, where it is a copy). */
int tg__samples_to_dtype(const tg_sample_request *r, tg_sample *out) {
  return copy_samples(r, out, TG__INTS(TG_F64));
}

/* ints: device type, index. To the CPU: a copy there, a download from a CUDA device. */
int tg__samples_to_device(const tg_sample_request *r, tg_sample *out) {
  return copy_samples(r, out, TG__INTS(TG_CPU, 0));
}

/* dst (copied by tg_op_check before the write) and src: equal sizes, a broadcast src, a
 * transposed src, and a src of the other floating dtype. */
int tg__samples_copy_(const tg_sample_request *r, tg_sample *out) {
  tg__samples b = tg__samples_begin(r, out);
  tg_sample *s;
  if (r->bench) {
    s = tg__sample_new(&b, "bench");
    tg__sample_input(&b, s, TG__GRAD(&b, TG__ANY, 1024, TG__BENCH_NUMEL / 1024));
    tg__sample_input(&b, s, TG__GRAD(&b, TG__ANY, 1024, TG__BENCH_NUMEL / 1024));
    return tg__samples_end(&b);
  }
  s = tg__sample_new(&b, "same sizes");
  tg__sample_input(&b, s, TG__GRAD(&b, TG__ANY, 2, 3));
  tg__sample_input(&b, s, TG__GRAD(&b, TG__ANY, 2, 3));
  s = tg__sample_new(&b, "broadcast src");
  tg__sample_input(&b, s, TG__GRAD(&b, TG__ANY, 2, 3, 4));
  tg__sample_input(&b, s, TG__GRAD(&b, TG__ANY, 3, 1));
  s = tg__sample_new(&b, "transposed src");
  tg__sample_input(&b, s, TG__GRAD(&b, TG__ANY, 3, 4));
  tg__sample_input(&b, s, tg__sample_tensor(r, TG__TRANSPOSED, TG__ANY, true, TG_SHAPE(3, 4)));
  return tg__samples_end(&b);
}
