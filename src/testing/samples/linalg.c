/* Sample inputs of the matrix products (ops/def/linalg.def): operand layouts (the GEMM
 * takes row- and column-major operands as they are), size-1 dims, alpha and beta. The bench
 * call reads request->sizes as M, K, N. */
#include "testing/samples/samples_internal.h"

/* Bench: request->sizes = M, K, N of [M, K] @ [K, N] when given (all three, positive), else
 * 256, 512, 512. -1 with an error for sizes that are not positive. */
static bool bench_sizes(const tg_sample_request *r, int64_t *m, int64_t *k, int64_t *n) {
  *m = 256, *k = 512, *n = 512;
  if (r->n_sizes < 3 || !r->sizes) return true;
  if (r->sizes[0] <= 0 || r->sizes[1] <= 0 || r->sizes[2] <= 0) {
    tg_set_error(TG_ERR_ARGUMENT, "mm samples: sizes M, K, N = %lld, %lld, %lld must be positive",
                 (long long)r->sizes[0], (long long)r->sizes[1], (long long)r->sizes[2]);
    return false;
  }
  *m = r->sizes[0], *k = r->sizes[1], *n = r->sizes[2];
  return true;
}

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
    int64_t m, k, n;
    if (!bench_sizes(r, &m, &k, &n)) return -1;
    MM("bench", TG__CONTIGUOUS, m, k, TG__CONTIGUOUS, n, 1.0)
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
    int64_t m, k, n;
    if (!bench_sizes(r, &m, &k, &n)) return -1;
    ADDMM("bench", TG__GRAD(&b, TG__ANY, n), TG__CONTIGUOUS, m, k, TG__CONTIGUOUS, n, 1.0, 1.0)
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

/* a [batch, m, k] @ b [batch, k, n] (issue 25, helper bmm). The layouts of each operand's
 * matrices (the kernel passes strides through), a batch of one, a size-1 row and k = 1.
 * Bench: attention's scores of a GPT block, [32, 256, 64] @ [32, 64, 256]. */
int tg__samples_bmm(const tg_sample_request *r, tg_sample *out) {
  tg__samples b = tg__samples_begin(r, out);
  tg_sample *s;
#define BMM(label, l1, batch, m, k, l2, n)                                                         \
  s = tg__sample_new(&b, label);                                                                   \
  tg__sample_input(&b, s, tg__sample_tensor(r, l1, TG__ANY, true, TG_SHAPE(batch, m, k)));         \
  tg__sample_input(&b, s, tg__sample_tensor(r, l2, TG__ANY, true, TG_SHAPE(batch, k, n)));
  if (r->bench) {
    BMM("bench", TG__CONTIGUOUS, 32, 256, 64, TG__CONTIGUOUS, 256)
    return tg__samples_end(&b);
  }
  BMM("row-major", TG__CONTIGUOUS, 2, 2, 3, TG__CONTIGUOUS, 4)
  BMM("a transposed", TG__TRANSPOSED, 3, 3, 2, TG__CONTIGUOUS, 2)
  BMM("b transposed", TG__CONTIGUOUS, 2, 2, 3, TG__TRANSPOSED, 4)
  BMM("stepped", TG__STEPPED, 2, 2, 3, TG__STEPPED, 2)
  BMM("batch of one", TG__CONTIGUOUS, 1, 3, 2, TG__CONTIGUOUS, 3)
  BMM("row times column", TG__CONTIGUOUS, 2, 1, 3, TG__TRANSPOSED, 1)
  BMM("outer products", TG__CONTIGUOUS, 2, 3, 1, TG__CONTIGUOUS, 2)
#undef BMM
  return tg__samples_end(&b);
}
