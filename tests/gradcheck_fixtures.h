/* Fixtures of tests/autograd/test_gradcheck.c and tests/autograd/test_gradcheck_fast.c: custom ops
 * whose kernels are plain loops over contiguous F64 copies, so that a deliberately wrong derivative
 * is easy to plant, and the inputs and fns gradcheck is called with. */
#ifndef TG_TESTS_GRADCHECK_FIXTURES_H
#define TG_TESTS_GRADCHECK_FIXTURES_H

#include "testutil.h"

/* A custom op's descriptor: CPU forward only. */
#define TEST_OP(op_name, inputs, outputs, fwd, bwd, op_flags)                                      \
  {                                                                                                \
    .name = op_name, .n_inputs = inputs, .n_outputs = outputs, .forward = {fwd}, .backward = bwd,  \
    .flags = op_flags                                                                              \
  }

/* ---- elementwise kernels ---- */

/* out[i] = f(a[i], b[i], i) (b may be NULL); a and b have the same sizes. */
typedef double (*elementwise_fn)(double, double, int64_t);

static inline tg_tensor *map2(const tg_tensor *a, const tg_tensor *b, elementwise_fn f) {
  tg_tensor *ac = tg_contiguous(a), *bc = b ? tg_contiguous(b) : NULL;
  if (!ac || (b && !bc)) return NULL;
  tg_tensor *out = tg_empty(tg_ndim(a), tg_sizes(a), (tg_options){.dtype = TG_F64});
  if (!out) return NULL;
  const double *pa = tg_data_ptr(ac), *pb = bc ? tg_data_ptr(bc) : NULL;
  double *po = tg_data_ptr(out);
  for (int64_t i = 0; i < tg_numel(a); i++) po[i] = f(pa[i], pb ? pb[i] : 0.0, i);
  return out;
}

static inline double f_square(double x, double unused, int64_t i) {
  return (void)unused, (void)i, x * x;
}
static inline double f_twice_product(double a, double b, int64_t i) { return (void)i, 2 * a * b; }

/* ---- ops of two saved inputs a and b, differentiated like a product ---- */

/* out = f(a, b), a and b saved for backward. */
static inline tg_status product_forward_with(tg_ctx *ctx, const tg_tensor *const *in,
                                             tg_tensor **out, elementwise_fn f) {
  if (tg_ctx_save_for_backward(ctx, 2, in) != TG_OK) return tg_last_error();
  out[0] = map2(in[0], in[1], f);
  return out[0] ? TG_OK : tg_last_error();
}
/* The gradient of a is da(g, b), that of b is db(g, a), each only when it is needed. */
static inline tg_status product_backward_with(tg_ctx *ctx, const tg_tensor *const *g,
                                              tg_tensor **gi, elementwise_fn da,
                                              elementwise_fn db) {
  tg_tensor *a = tg_ctx_saved(ctx, 0), *b = tg_ctx_saved(ctx, 1);
  if (!a || !b) return tg_last_error();
  if (tg_ctx_needs_input_grad(ctx, 0) && !(gi[0] = map2(g[0], b, da))) return tg_last_error();
  if (tg_ctx_needs_input_grad(ctx, 1) && !(gi[1] = map2(g[0], a, db))) return tg_last_error();
  return TG_OK;
}

/* ---- square(x) = x^2 with backwards computed outside the tape ---- */

static inline tg_status fwd_square(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  if (tg_ctx_save_for_backward(ctx, 1, in) != TG_OK) return tg_last_error();
  out[0] = map2(in[0], NULL, f_square);
  return out[0] ? TG_OK : tg_last_error();
}
/* The gradient is dx(g, x): f_twice_product is right, anything else plants an error. */
static inline tg_status square_backward_with(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi,
                                             elementwise_fn dx) {
  tg_tensor *x = tg_ctx_saved(ctx, 0);
  if (!x) return tg_last_error();
  gi[0] = map2(g[0], x, dx);
  return gi[0] ? TG_OK : tg_last_error();
}
/* Right, but once-differentiable: nothing of it is on the tape. */
static inline tg_status bwd_square_plain(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  return square_backward_with(ctx, g, gi, f_twice_product);
}
/* Right up to a drift of 1e-12 more with every call: not re-entrant. */
static int drift_calls;
static inline tg_status bwd_square_drifting(tg_ctx *ctx, const tg_tensor *const *g,
                                            tg_tensor **gi) {
  tg_status st = bwd_square_plain(ctx, g, gi);
  if (st != TG_OK) return st;
  double *p = tg_data_ptr(gi[0]);
  drift_calls++;
  for (int64_t i = 0; i < tg_numel(gi[0]); i++) p[i] += 1e-12 * drift_calls;
  return TG_OK;
}
/* The descriptor of square with the given backward. */
#define SQUARE_OP(op_name, bwd, op_flags) TEST_OP(op_name, 1, 1, fwd_square, bwd, op_flags)

/* ---- fns and inputs ---- */

/* fn: the outputs of the op passed as user, applied to all inputs. */
static inline tg_status apply_op(void *user, const tg_tensor *const *in, tg_tensor **out) {
  const tg_op_desc *op = user;
  return tg_apply(op, op->n_inputs, in, 0, NULL, op->n_outputs, out);
}
/* fn: the unary op passed as user, its output detached: cut from the graph. */
static inline tg_status apply_op_detached(void *user, const tg_tensor *const *in, tg_tensor **out) {
  tg_tensor *y = tg_apply1(user, 1, in, 0, NULL);
  out[0] = y ? tg_detach(y) : NULL;
  return out[0] ? TG_OK : tg_last_error();
}

/* Uniform in [-2, 2], F64, requires grad. */
static inline tg_tensor *leaf(int ndim, const int64_t *sizes, uint64_t seed) {
  tg_generator *gen = tg_generator_new(seed);
  tg_tensor *t =
      tg_uniform(ndim, sizes, -2, 2, (tg_options){.dtype = TG_F64, .requires_grad = true}, gen);
  tg_generator_free(gen);
  return t;
}

#endif
