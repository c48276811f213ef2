/* gradcheck's fast mode (v^T J u projections), its report (elements under
 * fast_mode_report_limit, projections above), nondet_tol in fast mode, the check that
 * backward copes with outputs that received no gradient, and allocation failures in all of
 * them. The custom ops are plain loops over contiguous F64 copies (tests/gradcheck_fixtures.h),
 * so that a wrong derivative is easy to plant. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "gradcheck_fixtures.h"
#include "testutil.h"
/* After testutil.h; the sweeps at the end of this file. Its LLTM training step is not used
 * here. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "alloc_sweep.h"
#pragma GCC diagnostic pop

static double f_product(double a, double b, int64_t i) { return (void)i, a * b; }
static double f_product_off(double a, double b, int64_t i) { return (void)i, 1.1 * a * b; }
/* 2 a b, but twice that for element 2 only. */
static double f_twice_product_off_at_2(double a, double b, int64_t i) {
  return (i == 2 ? 4 : 2) * a * b;
}
static double f_thrice(double a, double unused, int64_t i) { return (void)unused, (void)i, 3 * a; }

/* ---- square(x) = x^2 with a backward right everywhere but element 2 ---- */

static tg_status bwd_square_off_at_2(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  return square_backward_with(ctx, g, gi, f_twice_product_off_at_2);
}
static const tg_op_desc square_op = SQUARE_OP("fast_square", bwd_square_plain, 0);
static const tg_op_desc square_off_op = SQUARE_OP("fast_square_off", bwd_square_off_at_2, 0);
static const tg_op_desc square_drifting_op = SQUARE_OP("fast_square_drift", bwd_square_drifting, 0);

/* ---- product(x, y) = x * y with d/dy 1.1 times too large ---- */

static tg_status fwd_product(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  return product_forward_with(ctx, in, out, f_product);
}
static tg_status bwd_product_off_in_y(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  return product_backward_with(ctx, g, gi, f_product, f_product_off);
}
static const tg_op_desc product_off_op =
    TEST_OP("fast_product_off", 2, 1, fwd_product, bwd_product_off_in_y, 0);

static const tg_gradcheck_options fast = {.fast_mode = true, .quiet = true};
/* Fast mode's own verdict: a mismatch is never checked again in full mode (which would pass
 * a correct op even if the projections were wrong). */
static const tg_gradcheck_options fast_only = {
    .fast_mode = true, .quiet = true, .fast_mode_report_limit = 1};

/* ---- fast mode catches what full mode catches ---- */

TG_TEST(fast_mode, catches_one_wrong_element_with_the_element_report) {
  tg_tensor *x = leaf(TG_SHAPE(3, 4), 1);
  cr_assert_eq(tg_gradcheck(apply_op, (void *)&square_off_op, 1, &x, 1,
                            (tg_gradcheck_options){.quiet = true}),
               TG_ERR_GRADCHECK);
  tg_expect_error(TG_ERR_GRADCHECK, "input 0 element 2 [0, 2]", "output 0 element 2 [0, 2]");
  cr_assert_eq(tg_gradcheck(apply_op, (void *)&square_off_op, 1, &x, 1, fast), TG_ERR_GRADCHECK);
  /* 12 x 12 cells, under the default limit: full mode names the element. */
  tg_expect_error(TG_ERR_GRADCHECK, "tg_gradcheck: Jacobian mismatch",
                  "input 0 element 2 [0, 2] and output 0 element 2 [0, 2]", "found by fast mode",
                  "v^T J u", "seed");
  cr_assert_null(tg_grad(x), "gradcheck must not write .grad");
}

TG_TEST(fast_mode, above_the_report_limit_it_reports_the_projection) {
  tg_tensor *x = leaf(TG_SHAPE(3, 4), 1);
  tg_gradcheck_options small_limit = fast;
  small_limit.fast_mode_report_limit = 143; /* one cell short of 12 x 12 */
  cr_assert_eq(tg_gradcheck(apply_op, (void *)&square_off_op, 1, &x, 1, small_limit),
               TG_ERR_GRADCHECK);
  tg_expect_error(TG_ERR_GRADCHECK, "tg_gradcheck: fast mode: v^T J u mismatch for input 0 [3, 4]",
                  "numerical", "analytical", "atol 1e-05 * sum(u)", "seed 1735549284",
                  "12 output elements x 12 input elements = 144 cells",
                  "fast_mode_report_limit 143", "too large for an element report");
  small_limit.fast_mode_report_limit = 144; /* exactly the Jacobian: the element report */
  cr_assert_eq(tg_gradcheck(apply_op, (void *)&square_off_op, 1, &x, 1, small_limit),
               TG_ERR_GRADCHECK);
  tg_expect_error(TG_ERR_GRADCHECK, "input 0 element 2 [0, 2]", "found by fast mode");
}

TG_TEST(fast_mode, names_the_input_whose_gradient_is_wrong) {
  tg_tensor *in[2] = {leaf(TG_SHAPE(2, 3), 2), leaf(TG_SHAPE(2, 3), 3)};
  cr_assert_eq(tg_gradcheck(apply_op, (void *)&product_off_op, 2, in, 1,
                            (tg_gradcheck_options){.quiet = true}),
               TG_ERR_GRADCHECK);
  tg_expect_error(TG_ERR_GRADCHECK, "input 1 element");
  cr_assert_eq(tg_gradcheck(apply_op, (void *)&product_off_op, 2, in, 1, fast), TG_ERR_GRADCHECK);
  tg_expect_error(TG_ERR_GRADCHECK, "input 1 element", "found by fast mode: v^T J u for input 1");
  tg_gradcheck_options no_elements = fast;
  no_elements.fast_mode_report_limit = 1;
  cr_assert_eq(tg_gradcheck(apply_op, (void *)&product_off_op, 2, in, 1, no_elements),
               TG_ERR_GRADCHECK);
  tg_expect_error(TG_ERR_GRADCHECK, "mismatch for input 1 [2, 3]", "36 cells");
}

TG_TEST(fast_mode, the_seed_picks_u_and_v_and_zero_reproduces) {
  tg_tensor *x = leaf(TG_SHAPE(3, 4), 1);
  tg_gradcheck_options o = fast;
  o.fast_mode_report_limit = 1;
  char first[1024], again[1024];
  cr_assert_eq(tg_gradcheck(apply_op, (void *)&square_off_op, 1, &x, 1, o), TG_ERR_GRADCHECK);
  snprintf(first, sizeof first, "%s", tg_last_error_message());
  tg_clear_error();
  cr_assert_eq(tg_gradcheck(apply_op, (void *)&square_off_op, 1, &x, 1, o), TG_ERR_GRADCHECK);
  snprintf(again, sizeof again, "%s", tg_last_error_message());
  tg_clear_error();
  cr_assert_str_eq(first, again);
  o.seed = 7;
  cr_assert_eq(tg_gradcheck(apply_op, (void *)&square_off_op, 1, &x, 1, o), TG_ERR_GRADCHECK);
  cr_assert_str_neq(first, tg_last_error_message());
  tg_expect_error(TG_ERR_GRADCHECK, "seed 7)");
}

/* y = 1000 (x0 - x1), with a backward off by +0.5 in both derivatives: within rtol 1e-3 of
 * 1000 for each element, so full mode passes; along u the two terms of J u cancel, so the
 * projection's tolerance is far smaller and fast mode flags it, then defers to full mode. */
static tg_status fwd_steep(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  (void)ctx;
  double x[2];
  if (tg_to_host_array(in[0], x, sizeof x) != TG_OK) return tg_last_error();
  out[0] = tg_full(TG_SHAPE(1), 1000 * (x[0] - x[1]), (tg_options){.dtype = TG_F64});
  return out[0] ? TG_OK : tg_last_error();
}
static tg_status bwd_steep_off(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  (void)ctx;
  double up;
  if (tg_item(g[0], &up) != TG_OK) return tg_last_error();
  gi[0] = tg_from_data(TG_SHAPE(2), (const double[]){1000.5 * up, -999.5 * up},
                       (tg_options){.dtype = TG_F64});
  return gi[0] ? TG_OK : tg_last_error();
}
static const tg_op_desc steep_off_op = TEST_OP("fast_steep_off", 1, 1, fwd_steep, bwd_steep_off, 0);

TG_TEST(fast_mode, a_projection_that_cancels_defers_to_full_mode) {
  tg_tensor *x = tg_from_data(TG_SHAPE(2), (const double[]){0.25, -0.5},
                              (tg_options){.dtype = TG_F64, .requires_grad = true});
  cr_assert_eq(tg_gradcheck(apply_op, (void *)&steep_off_op, 1, &x, 1,
                            (tg_gradcheck_options){.quiet = true}),
               TG_OK, "%s", tg_last_error_message());
  tg_gradcheck_options no_elements = fast;
  no_elements.fast_mode_report_limit = 1;
  cr_assert_eq(tg_gradcheck(apply_op, (void *)&steep_off_op, 1, &x, 1, no_elements),
               TG_ERR_GRADCHECK);
  tg_expect_error(TG_ERR_GRADCHECK, "fast mode: v^T J u mismatch for input 0 [2]");
  cr_assert_eq(tg_gradcheck(apply_op, (void *)&steep_off_op, 1, &x, 1, fast), TG_OK, "%s",
               tg_last_error_message());
}

/* ---- fast mode passes correct ops ---- */

static tg_status composite(void *user, const tg_tensor *const *in, tg_tensor **out) {
  (void)user;
  /* softmax(tanh(a @ b) * c) and sigmoid(a) summed over rows: several built-ins, two outputs */
  out[0] = tg_softmax(tg_mul(tg_tanh(tg_matmul(in[0], in[1])), in[2]), 1);
  out[1] = tg_sum_dim(tg_sigmoid(in[0]), 1, false);
  return out[0] && out[1] ? TG_OK : tg_last_error();
}

TG_TEST(fast_mode, passes_built_in_ops) {
  tg_tensor *in[3] = {leaf(TG_SHAPE(6, 5), 4), leaf(TG_SHAPE(5, 7), 5), leaf(TG_SHAPE(6, 7), 6)};
  cr_assert_eq(tg_gradcheck(composite, NULL, 3, in, 2, fast_only), TG_OK, "%s",
               tg_last_error_message());
  cr_assert_eq(tg_gradgradcheck(composite, NULL, 3, in, 2, fast_only), TG_OK, "%s",
               tg_last_error_message());
  tg_gradcheck_options seeded = fast_only;
  seeded.seed = 12345;
  cr_assert_eq(tg_gradcheck(composite, NULL, 3, in, 2, seeded), TG_OK, "%s",
               tg_last_error_message());
  for (int i = 0; i < 3; i++) cr_assert_null(tg_grad(in[i]));
}

TG_TEST(fast_mode, passes_strided_inputs_and_restores_them_bit_for_bit) {
  tg_tensor *base = leaf(TG_SHAPE(4, 5), 7);
  tg_tensor *x = tg_slice(tg_t(base), 0, 1, 5, 2); /* transposed, offset, stride 2 */
  cr_assert(x && !tg_is_contiguous(x) && tg_offset(x) > 0);
  double before[20], after[20];
  cr_assert_eq(tg_to_host_array(base, before, sizeof before), TG_OK);
  cr_assert_eq(tg_gradcheck(apply_op, (void *)&square_op, 1, &x, 1, fast_only), TG_OK, "%s",
               tg_last_error_message());
  cr_assert_eq(tg_to_host_array(base, after, sizeof after), TG_OK);
  cr_assert(memcmp(before, after, sizeof before) == 0);
  cr_assert_eq(tg_gradcheck(apply_op, (void *)&square_off_op, 1, &x, 1, fast), TG_ERR_GRADCHECK);
  tg_clear_error();
  cr_assert_eq(tg_to_host_array(base, after, sizeof after), TG_OK);
  cr_assert(memcmp(before, after, sizeof before) == 0);
}

enum { LLTM_B = 16, LLTM_I = 32, LLTM_S = 64 };

static tg_status lltm_fn(void *user, const tg_tensor *const *in, tg_tensor **out) {
  (void)user;
  return tg_lltm(in[0], in[1], in[2], in[3], in[4], &out[0], &out[1]);
}

/* The fused LLTM (two outputs, TG_OP_NO_MATERIALIZE_GRADS) at a realistic size: its full
 * Jacobian would take 2048 backward passes and 42368 forwards. */
TG_TEST(fast_mode, passes_the_fused_lltm_at_a_realistic_size) {
  tg_generator *gen = tg_generator_new(8);
  tg_options o = {.dtype = TG_F64, .requires_grad = true};
  const double w = 1.0 / sqrt(LLTM_S + LLTM_I);
  tg_tensor *in[5] = {
      tg_randn(TG_SHAPE(LLTM_B, LLTM_I), o, gen),
      tg_uniform(TG_SHAPE(3 * LLTM_S, LLTM_S + LLTM_I), -w, w, o, gen),
      tg_uniform(TG_SHAPE(3 * LLTM_S), -w, w, o, gen),
      tg_randn(TG_SHAPE(LLTM_B, LLTM_S), o, gen),
      tg_randn(TG_SHAPE(LLTM_B, LLTM_S), o, gen),
  };
  tg_generator_free(gen);
  cr_assert_eq(tg_gradcheck(lltm_fn, NULL, 5, in, 2, fast_only), TG_OK, "%s",
               tg_last_error_message());
  /* Some inputs constant: only the others are projected. */
  cr_assert_eq(tg_set_requires_grad(in[1], false), TG_OK);
  cr_assert_eq(tg_set_requires_grad(in[3], false), TG_OK);
  cr_assert_eq(tg_gradcheck(lltm_fn, NULL, 5, in, 2, fast_only), TG_OK, "%s",
               tg_last_error_message());
}

/* ---- what full mode reports, fast mode reports too ---- */

TG_TEST(fast_mode, an_output_cut_from_the_graph_must_be_constant) {
  tg_tensor *x = leaf(TG_SHAPE(3), 9);
  cr_assert_eq(tg_gradcheck(apply_op_detached, (void *)&square_op, 1, &x, 1, fast),
               TG_ERR_GRADCHECK);
  tg_expect_error(TG_ERR_GRADCHECK, "input 0", "does not require grad", "found by fast mode");
}

/* Fails on its third call: the first builds the graph, the second is x + eps u. */
static int evaluations;
static tg_status fails_on_third_call(void *user, const tg_tensor *const *in, tg_tensor **out) {
  if (++evaluations == 3) return tg_set_error(TG_ERR_SHAPE, "my_fn: call %d fails", evaluations);
  return apply_op(user, in, out);
}

TG_TEST(fast_mode, an_error_of_fn_is_returned_and_the_input_restored) {
  tg_tensor *x = leaf(TG_SHAPE(2, 2), 10);
  double before[4], after[4];
  cr_assert_eq(tg_to_host_array(x, before, sizeof before), TG_OK);
  evaluations = 0;
  cr_assert_eq(tg_gradcheck(fails_on_third_call, (void *)&square_op, 1, &x, 1, fast), TG_ERR_SHAPE);
  tg_expect_error(TG_ERR_SHAPE, "my_fn: call 3 fails");
  cr_assert_eq(tg_to_host_array(x, after, sizeof after), TG_OK);
  cr_assert(memcmp(before, after, sizeof before) == 0);
}

/* ---- nondet_tol in fast mode (full mode: tests/autograd/test_gradcheck.c) ---- */

TG_TEST(fast_mode, nondet_tol_bounds_the_difference_of_two_backward_runs) {
  tg_tensor *x = leaf(TG_SHAPE(3), 11);
  cr_assert_eq(tg_gradcheck(apply_op, (void *)&square_drifting_op, 1, &x, 1, fast),
               TG_ERR_GRADCHECK);
  tg_expect_error(TG_ERR_GRADCHECK, "not re-entrant", "fast mode's v", "input 0 element 0 [0]",
                  "nondet_tol 0: must agree bitwise");
  tg_gradcheck_options tolerant = fast;
  tolerant.nondet_tol = 1e-9;
  cr_assert_eq(tg_gradcheck(apply_op, (void *)&square_drifting_op, 1, &x, 1, tolerant), TG_OK, "%s",
               tg_last_error_message());
  tolerant.nondet_tol = 1e-13; /* below the drift of 1e-12 per call */
  cr_assert_eq(tg_gradcheck(apply_op, (void *)&square_drifting_op, 1, &x, 1, tolerant),
               TG_ERR_GRADCHECK);
  tg_expect_error(TG_ERR_GRADCHECK, "not re-entrant", "nondet_tol 1e-13)");
}

/* ---- outputs that received no gradient ---- */

/* pair(x) = (x^2, 3x). With TG_OP_NO_MATERIALIZE_GRADS an output that got no gradient
 * reaches backward as NULL. */
static tg_status fwd_pair(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  if (tg_ctx_save_for_backward(ctx, 1, in) != TG_OK) return tg_last_error();
  out[0] = map2(in[0], NULL, f_square);
  out[1] = map2(in[0], NULL, f_thrice);
  return out[0] && out[1] ? TG_OK : tg_last_error();
}
/* d/dx = 2 x g0 + 3 g1, each term only when its gradient came; `missing` stands in for a
 * NULL gradient: NULL skips the term (right), else its value is used (wrong unless zero). */
static tg_status pair_backward_with(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi,
                                    const tg_tensor *missing) {
  tg_tensor *x = tg_ctx_saved(ctx, 0);
  if (!x) return tg_last_error();
  const tg_tensor *g0 = g[0] ? g[0] : missing, *g1 = g[1] ? g[1] : missing;
  tg_tensor *sum = tg_zeros_like(x);
  if (sum && g0) sum = tg_add(sum, map2(g0, x, f_twice_product));
  if (sum && g1) sum = tg_add(sum, tg_mul_scalar(g1, 3.0));
  gi[0] = sum;
  return sum ? TG_OK : tg_last_error();
}
static tg_status bwd_pair(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  return pair_backward_with(ctx, g, gi, NULL);
}
static tg_status bwd_pair_missing_as_ones(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  tg_tensor *ones =
      tg_ones(tg_ctx_input_ndim(ctx, 0), tg_ctx_input_sizes(ctx, 0), (tg_options){.dtype = TG_F64});
  return ones ? pair_backward_with(ctx, g, gi, ones) : tg_last_error();
}
static tg_status bwd_pair_refusing_missing(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  if (!g[0] || !g[1])
    return tg_set_error(TG_ERR_ARGUMENT, "pair backward: grad_outputs[%d] is NULL", g[0] ? 1 : 0);
  return pair_backward_with(ctx, g, gi, NULL);
}
#define PAIR_OP(var, op_name, bwd, op_flags)                                                       \
  static const tg_op_desc var = TEST_OP(op_name, 1, 2, fwd_pair, bwd, op_flags)
PAIR_OP(pair_op, "pair", bwd_pair, TG_OP_NO_MATERIALIZE_GRADS);
PAIR_OP(pair_ones_op, "pair_ones", bwd_pair_missing_as_ones, TG_OP_NO_MATERIALIZE_GRADS);
PAIR_OP(pair_refusing_op, "pair_refusing", bwd_pair_refusing_missing, TG_OP_NO_MATERIALIZE_GRADS);
/* The refusing backward, but its op materialises: it never sees NULL. */
PAIR_OP(pair_refusing_materialized_op, "pair_refusing_m", bwd_pair_refusing_missing, 0);

static const tg_gradcheck_options full = {.quiet = true};

TG_TEST(undefined_grad, a_backward_that_treats_null_as_zero_passes) {
  tg_tensor *x = leaf(TG_SHAPE(2, 3), 12);
  cr_assert_eq(tg_gradcheck(apply_op, (void *)&pair_op, 1, &x, 2, full), TG_OK, "%s",
               tg_last_error_message());
  cr_assert_eq(tg_gradcheck(apply_op, (void *)&pair_op, 1, &x, 2, fast_only), TG_OK, "%s",
               tg_last_error_message());
  cr_assert_eq(tg_gradcheck(apply_op, (void *)&pair_refusing_materialized_op, 1, &x, 2, full),
               TG_OK, "%s", tg_last_error_message());
}

TG_TEST(undefined_grad, a_backward_that_treats_null_as_ones_is_caught) {
  tg_tensor *x = leaf(TG_SHAPE(2, 3), 13);
  /* With every output seeded (the Jacobian's rows) backward is right. */
  tg_gradcheck_options skip = full;
  skip.skip_undefined_grad_check = true;
  cr_assert_eq(tg_gradcheck(apply_op, (void *)&pair_ones_op, 1, &x, 2, skip), TG_OK, "%s",
               tg_last_error_message());
  cr_assert_eq(tg_gradcheck(apply_op, (void *)&pair_ones_op, 1, &x, 2, full), TG_ERR_GRADCHECK);
  tg_expect_error(TG_ERR_GRADCHECK,
                  "tg_gradcheck: backward mishandles an output that received "
                  "no gradient: with output 0 left out of the roots",
                  "input 0 element 0 [0, 0]", "with a zero gradient for output 0", "nondet_tol 0");
  skip.fast_mode = true;
  cr_assert_eq(tg_gradcheck(apply_op, (void *)&pair_ones_op, 1, &x, 2, skip), TG_OK, "%s",
               tg_last_error_message());
  cr_assert_eq(tg_gradcheck(apply_op, (void *)&pair_ones_op, 1, &x, 2, fast), TG_ERR_GRADCHECK);
  tg_expect_error(TG_ERR_GRADCHECK, "with output 0 left out of the roots");
}

TG_TEST(undefined_grad, a_backward_that_fails_on_null_is_caught) {
  tg_tensor *x = leaf(TG_SHAPE(4), 14);
  cr_assert_eq(tg_gradcheck(apply_op, (void *)&pair_refusing_op, 1, &x, 2, full), TG_ERR_GRADCHECK);
  tg_expect_error(TG_ERR_GRADCHECK, "backward failed with output 0 left out of the roots",
                  "pair backward: grad_outputs[0] is NULL");
  cr_assert_eq(
      tg_gradcheck(apply_op, (void *)&pair_refusing_op, 1, &x, 2,
                   (tg_gradcheck_options){.quiet = true, .skip_undefined_grad_check = true}),
      TG_OK, "%s", tg_last_error_message());
}

/* ---- arguments ---- */

TG_TEST(fast_mode, refuses_a_negative_or_nan_nondet_tol) {
  tg_tensor *x = leaf(TG_SHAPE(2), 16);
  tg_gradcheck_options o = fast;
  o.nondet_tol = -1e-9;
  cr_assert_eq(tg_gradcheck(apply_op, (void *)&square_op, 1, &x, 1, o), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_gradcheck: nondet_tol -1e-09 must not be negative");
  o.nondet_tol = NAN;
  cr_assert_eq(tg_gradgradcheck(apply_op, (void *)&square_op, 1, &x, 1, o), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_gradgradcheck: nondet_tol nan must not be negative");
  o.nondet_tol = INFINITY; /* any difference accepted */
  cr_assert_eq(tg_gradcheck(apply_op, (void *)&square_drifting_op, 1, &x, 1, o), TG_OK, "%s",
               tg_last_error_message());
}

/* ---- allocation failures (tests/alloc_sweep.h) ---- */

static tg_status two_outputs(void *user, const tg_tensor *const *in, tg_tensor **out) {
  (void)user;
  out[0] = tg_mul(tg_tanh(in[0]), in[1]);
  out[1] = tg_exp(in[0]);
  return out[0] && out[1] ? TG_OK : tg_last_error();
}

/* A check expected to fail: its report goes into the results (a run under an allocation
 * failure must give the same one, or TG_ERR_MEMORY). */
static tg_status record_report(tg_status st, double *out, int *n_out) {
  if (st != TG_ERR_GRADCHECK && st != TG_OK) return st;
  double hash = st == TG_OK ? -1 : 0; /* passing is wrong: differs from the clean run */
  for (const char *c = st == TG_OK ? "" : tg_last_error_message(); *c; c++)
    hash = fmod(hash * 31 + (unsigned char)*c, 9007199254740881.0);
  out[(*n_out)++] = hash;
  tg_clear_error();
  return TG_OK;
}

static tg_status fast_checks(void *user, double *out, int *n_out) {
  (void)user;
  tg_options o = {.dtype = TG_F64, .requires_grad = true};
  tg_tensor *a = tg_from_data(TG_SHAPE(2), (const double[]){0.3, -0.7}, o);
  tg_tensor *b = tg_from_data(TG_SHAPE(2), (const double[]){1.1, 0.4}, o);
  tg_tensor *c = tg_from_data(TG_SHAPE(3), (const double[]){0.9, -1.3, 0.6}, o);
  tg_tensor *in[2] = {a, b};
  tg_status st = status_of(a);
  if (st == TG_OK) st = status_of(b);
  if (st == TG_OK) st = status_of(c);
  if (st == TG_OK) st = clean(tg_gradcheck(two_outputs, NULL, 2, in, 2, fast));
  if (st == TG_OK) st = clean(tg_gradgradcheck(two_outputs, NULL, 2, in, 2, fast));
  /* The element report (full mode run again) and the projection report. */
  if (st == TG_OK)
    st = record_report(tg_gradcheck(apply_op, (void *)&square_off_op, 1, &c, 1, fast), out, n_out);
  tg_gradcheck_options projection = fast;
  projection.fast_mode_report_limit = 1;
  if (st == TG_OK)
    st = record_report(tg_gradcheck(apply_op, (void *)&product_off_op, 2, in, 1, projection), out,
                       n_out);
  if (st == TG_OK) st = append(c, out, n_out);
  return st;
}

TG_TEST(alloc_failure, fast_mode) {
  sweep("fast-mode gradcheck and gradgradcheck", fast_checks, NULL);
}

static tg_status undefined_grad_checks(void *user, double *out, int *n_out) {
  (void)user;
  tg_tensor *x = tg_from_data(TG_SHAPE(3), (const double[]){0.3, -0.7, 1.2},
                              (tg_options){.dtype = TG_F64, .requires_grad = true});
  tg_status st = status_of(x);
  if (st == TG_OK) st = clean(tg_gradcheck(apply_op, (void *)&pair_op, 1, &x, 2, full));
  if (st == TG_OK)
    st = record_report(tg_gradcheck(apply_op, (void *)&pair_ones_op, 1, &x, 2, full), out, n_out);
  if (st == TG_OK)
    st = record_report(tg_gradcheck(apply_op, (void *)&pair_refusing_op, 1, &x, 2, full), out,
                       n_out);
  if (st == TG_OK) st = append(x, out, n_out);
  return st;
}

TG_TEST(alloc_failure, undefined_grad_check) {
  sweep("gradcheck's undefined-gradient check", undefined_grad_checks, NULL);
}
