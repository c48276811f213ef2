/* Sample inputs of cat (ops/def/shape.def): ints dim (wrapped); any number of inputs. */
#include "testing/samples/samples_internal.h"

int tg__samples_cat(const tg_sample_request *r, tg_sample *out) {
  tg__samples b = tg__samples_begin(r, out);
  tg_sample *s;
  if (r->bench) {
    s = tg__sample_new(&b, "bench");
    tg__sample_input(&b, s, TG__GRAD(&b, TG__ANY, 512, TG__BENCH_NUMEL / 1024));
    tg__sample_input(&b, s, TG__GRAD(&b, TG__ANY, 512, TG__BENCH_NUMEL / 1024));
    tg__sample_int(s, 0);
    return tg__samples_end(&b);
  }
  s = tg__sample_new(&b, "rows");
  tg__sample_input(&b, s, TG__GRAD(&b, TG__ANY, 2, 3));
  tg__sample_input(&b, s, TG__GRAD(&b, TG__ANY, 1, 3));
  tg__sample_int(s, 0);
  s = tg__sample_new(&b, "three, columns");
  tg__sample_input(&b, s, TG__GRAD(&b, TG__ANY, 2, 1));
  tg__sample_input(&b, s, tg__sample_tensor(r, TG__TRANSPOSED, TG__ANY, true, TG_SHAPE(2, 3)));
  tg__sample_input(&b, s, tg__sample_tensor(r, TG__STEPPED, TG__ANY, true, TG_SHAPE(2, 2)));
  tg__sample_int(s, 1);
  s = tg__sample_new(&b, "one");
  tg__sample_input(&b, s, TG__GRAD(&b, TG__ANY, 3));
  tg__sample_int(s, 0);
  s = tg__sample_new(&b, "3-D, last dim, grad for one");
  tg__sample_input(&b, s, TG__CONST(&b, TG__ANY, 2, 1, 2));
  tg__sample_input(&b, s, TG__GRAD(&b, TG__ANY, 2, 1, 3));
  tg__sample_int(s, 2);
  s = tg__sample_new(&b, "an empty piece");
  tg__sample_input(&b, s, TG__GRAD(&b, TG__ANY, 2, 2));
  tg__sample_input(&b, s, TG__CONST(&b, TG__ANY, 0, 2));
  tg__sample_input(&b, s, TG__GRAD(&b, TG__ANY, 1, 2));
  tg__sample_int(s, 0);
  return tg__samples_end(&b);
}
