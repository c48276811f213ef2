/* Shared steps of the built-in ops' sample inputs (tg's OpInfo: tg_sample_fn in
 * include/tg/autograd.h, checked by tg_op_check in src/testing/op_check.c).
 *
 * Values are drawn on the CPU in F64 from the request's generator, shaped on the host (kept
 * away from a kink, positive for a domain) and only then converted to the request's dtype
 * and device, so the samples of one seed hold the same values on every device: CPU-vs-CUDA
 * agreement compares like with like. Inputs are made with grad mode off, so views of them
 * (transposed, stepped) are leaves whose requires_grad can be set. */
#ifndef TG_SAMPLES_INTERNAL_H
#define TG_SAMPLES_INTERNAL_H

#include "ops/registry.h"

/* What a floating input holds: uniform in [low, high); with gap > 0 (low = -high) the
 * values are symmetric about 0 with |x| >= gap, away from the kink of abs, relu, step. */
typedef struct tg__range {
  double low, high, gap;
} tg__range;
#define TG__ANY ((tg__range){-2.0, 2.0, 0.0})
#define TG__POSITIVE ((tg__range){0.5, 2.5, 0.0})
#define TG__NONZERO ((tg__range){-2.0, 2.0, 0.25})

/* How an input is laid out in memory (its sizes are the ones asked for either way). */
typedef enum tg__layout {
  TG__CONTIGUOUS,
  TG__TRANSPOSED, /* the last two dims swapped: column-major (needs >= 2 dims) */
  TG__STEPPED,    /* every other element of the last dim: no unit stride (needs >= 1 dim) */
} tg__layout;

/* The samples of one call being filled. A failure (NULL input, too many samples) records
 * the error once; tg__samples_end then returns -1. */
typedef struct tg__samples {
  const tg_sample_request *req;
  tg_sample *out;
  int count;
  bool failed;
} tg__samples;

tg__samples tg__samples_begin(const tg_sample_request *req, tg_sample *out);
/* Starts a sample with its (static) label; NULL when failed or full. */
tg_sample *tg__sample_new(tg__samples *b, const char *label);
/* Appends an input (NULL t marks the list failed: t's error is pending). */
void tg__sample_input(tg__samples *b, tg_sample *s, tg_tensor *t);
void tg__sample_scalar(tg_sample *s, double value);
void tg__sample_int(tg_sample *s, int64_t value);
/* The count, or -1 with the error pending. */
int tg__samples_end(tg__samples *b);

/* A floating input of the request's dtype and device with values from range, in layout,
 * requiring grad when grad is set (scope-owned; NULL with the error pending). */
tg_tensor *tg__sample_tensor(const tg_sample_request *r, tg__layout layout, tg__range range,
                             bool grad, int ndim, const int64_t *sizes);
/* A contiguous floating input with these values (row-major), as above. */
tg_tensor *tg__sample_values(const tg_sample_request *r, bool grad, int ndim, const int64_t *sizes,
                             const double *values);
/* An I64 input of uniform integers in [0, bound) (class indices): not differentiable. */
tg_tensor *tg__sample_indices(const tg_sample_request *r, int64_t bound, int ndim,
                              const int64_t *sizes);

/* Shorthands: a contiguous input requiring grad / a contiguous one that does not. */
#define TG__GRAD(b, range, ...)                                                                    \
  tg__sample_tensor((b)->req, TG__CONTIGUOUS, range, true, TG_SHAPE(__VA_ARGS__))
#define TG__CONST(b, range, ...)                                                                   \
  tg__sample_tensor((b)->req, TG__CONTIGUOUS, range, false, TG_SHAPE(__VA_ARGS__))

/* Bench sizes: the element count of a pointwise call worth timing (2^20). */
#define TG__BENCH_NUMEL ((int64_t)1 << 20)

/* The samples of an in-place op: those of its base op whose output keeps input 0's sizes and
 * dtype (writing the result into input 0 is then valid); the bench sample is the base's. */
int tg__samples_inplace(const tg_op_desc *base, const tg_sample_request *req, tg_sample *out);

#endif
