/* Sample inputs of the matrix products (ops/def/linalg.def): operand layouts (the GEMM
 * takes row- and column-major operands as they are), size-1 dims, alpha and beta. */
#include "ops/samples/samples_internal.h"

/* A [rows, cols] operand requiring grad, in layout. */
static tg_tensor *mat(const tg_sample_request *r, tg__layout layout, int64_t rows, int64_t cols) {
  return tg__sample_tensor(r, layout, TG__ANY, true, TG_SHAPE(rows, cols));
}

/* scalars: alpha */
int tg__samples_mm(const tg_sample_request *r, tg_sample *out) {
  tg__samples b = tg__samples_begin(r, out);
  tg_sample *s;
#define MM(label, l1, m, k, l2, n, alpha)                                                          \
  s = tg__sample_new(&b, label);                                                                   \
  tg__sample_input(&b, s, mat(r, l1, m, k));                                                       \
  tg__sample_input(&b, s, mat(r, l2, k, n));                                                       \
  tg__sample_scalar(s, alpha);
  if (r->bench) {
    MM("bench", TG__CONTIGUOUS, 256, 512, TG__CONTIGUOUS, 512, 1.0)
    return tg__samples_end(&b);
  }
  MM("row-major", TG__CONTIGUOUS, 2, 3, TG__CONTIGUOUS, 4, 1.0)
  MM("mat1 transposed", TG__TRANSPOSED, 3, 2, TG__CONTIGUOUS, 4, 1.0)
  MM("mat2 transposed, alpha", TG__CONTIGUOUS, 2, 3, TG__TRANSPOSED, 4, 0.5)
  MM("stepped", TG__STEPPED, 2, 3, TG__STEPPED, 2, 1.0)
  MM("row times column", TG__CONTIGUOUS, 1, 3, TG__CONTIGUOUS, 1, -2.0)
  MM("outer product", TG__CONTIGUOUS, 3, 1, TG__TRANSPOSED, 2, 1.0)
#undef MM
  return tg__samples_end(&b);
}

/* input + mat1 @ mat2, scalars: beta, alpha; input broadcasts to the product. */
int tg__samples_addmm(const tg_sample_request *r, tg_sample *out) {
  tg__samples b = tg__samples_begin(r, out);
  tg_sample *s;
#define ADDMM(label, input, l1, m, k, l2, n, beta, alpha)                                          \
  s = tg__sample_new(&b, label);                                                                   \
  tg__sample_input(&b, s, input);                                                                  \
  tg__sample_input(&b, s, mat(r, l1, m, k));                                                       \
  tg__sample_input(&b, s, mat(r, l2, k, n));                                                       \
  tg__sample_scalar(s, beta);                                                                      \
  tg__sample_scalar(s, alpha);
  if (r->bench) {
    ADDMM("bench", TG__GRAD(&b, TG__ANY, 512), TG__CONTIGUOUS, 256, 512, TG__CONTIGUOUS, 512, 1.0,
          1.0)
    return tg__samples_end(&b);
  }
  ADDMM("full input", TG__GRAD(&b, TG__ANY, 2, 4), TG__CONTIGUOUS, 2, 3, TG__CONTIGUOUS, 4, 1.0,
        1.0)
  ADDMM("bias row, beta and alpha", TG__GRAD(&b, TG__ANY, 4), TG__CONTIGUOUS, 2, 3, TG__TRANSPOSED,
        4, 0.5, 2.0)
  ADDMM("column input, transposed mat1", TG__GRAD(&b, TG__ANY, 2, 1), TG__TRANSPOSED, 2, 3,
        TG__CONTIGUOUS, 4, 1.0, 1.0)
  ADDMM("0-dim input, stepped", TG__GRAD(&b, TG__ANY), TG__STEPPED, 2, 3, TG__STEPPED, 2, 1.0, -1.0)
  ADDMM("beta 0", TG__GRAD(&b, TG__ANY, 2, 4), TG__CONTIGUOUS, 2, 3, TG__CONTIGUOUS, 4, 0.0, 1.0)
#undef ADDMM
  return tg__samples_end(&b);
}
