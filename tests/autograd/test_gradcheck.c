/* tg_gradcheck / tg_gradgradcheck: they pass correct backwards, catch wrong ones with a
 * precise report, refuse inputs they cannot check and leave the inputs as they found them.
 * The functions under test are small custom ops whose kernels are plain loops
 * (tests/gradcheck_fixtures.h), so that a deliberately wrong derivative is easy to plant. */
#define _POSIX_C_SOURCE 200809L /* dup, dup2, fileno */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "gradcheck_fixtures.h"
#include "testutil.h"

static double f_thrice_product(double a, double b, int64_t i) { return (void)i, 3 * a * b; }
static double f_twice_product_one_percent_off(double a, double b, int64_t i) {
  return (void)i, 2 * a * b * 1.01;
}

/* ---- square(x) = x^2, backward through square_backward(g, x) = 2 g x so that double
 * backward works; square_backward's own backward is right or deliberately wrong. ---- */

static tg_status fwd_square_backward(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  return product_forward_with(ctx, in, out, f_twice_product);
}
/* d(2gx)/dg = 2x is right; d(2gx)/dx = 2g is right, 3g wrong. */
static tg_status bwd_square_backward(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  return product_backward_with(ctx, g, gi, f_twice_product, f_twice_product);
}
static tg_status bwd_square_backward_wrong(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  return product_backward_with(ctx, g, gi, f_twice_product, f_thrice_product);
}
static const tg_op_desc square_backward_op =
    TEST_OP("test_square_backward", 2, 1, fwd_square_backward, bwd_square_backward, 0);
static const tg_op_desc square_backward_wrong_op =
    TEST_OP("test_square_backward_wrong", 2, 1, fwd_square_backward, bwd_square_backward_wrong, 0);

/* gi = square_backward(g, x) (or the wrong one), on the tape. */
static tg_status square_backward_on_tape(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi,
                                         const tg_op_desc *square_backward) {
  tg_tensor *x = tg_ctx_saved(ctx, 0);
  if (!x) return tg_last_error();
  gi[0] = tg_apply1(square_backward, 2, (const tg_tensor *const[]){g[0], x}, 0, NULL);
  return gi[0] ? TG_OK : tg_last_error();
}
static tg_status bwd_square(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  return square_backward_on_tape(ctx, g, gi, &square_backward_op);
}
static tg_status bwd_square_wrong_second_order(tg_ctx *ctx, const tg_tensor *const *g,
                                               tg_tensor **gi) {
  return square_backward_on_tape(ctx, g, gi, &square_backward_wrong_op);
}
/* A first derivative of 3x instead of 2x. */
static tg_status bwd_square_wrong(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  return square_backward_with(ctx, g, gi, f_thrice_product);
}
/* Right within 1%: passes or fails depending on rtol. */
static tg_status bwd_square_one_percent_off(tg_ctx *ctx, const tg_tensor *const *g,
                                            tg_tensor **gi) {
  return square_backward_with(ctx, g, gi, f_twice_product_one_percent_off);
}
static tg_status bwd_nan(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  (void)g;
  gi[0] = tg_full(tg_ctx_input_ndim(ctx, 0), tg_ctx_input_sizes(ctx, 0), NAN,
                  (tg_options){.dtype = TG_F64});
  return gi[0] ? TG_OK : tg_last_error();
}

static const tg_op_desc square_op = SQUARE_OP("test_square", bwd_square, 0);
static const tg_op_desc square_wrong_second_op =
    SQUARE_OP("test_square_wrong2", bwd_square_wrong_second_order, 0);
static const tg_op_desc square_once_op =
    SQUARE_OP("test_square_once", bwd_square_plain, TG_OP_ONCE_DIFFERENTIABLE);
static const tg_op_desc square_wrong_op = SQUARE_OP("test_square_wrong", bwd_square_wrong, 0);
static const tg_op_desc square_drifting_op = SQUARE_OP("test_square_drift", bwd_square_drifting, 0);
static const tg_op_desc square_off_op = SQUARE_OP("test_square_off", bwd_square_one_percent_off, 0);
static const tg_op_desc square_nan_op = SQUARE_OP("test_square_nan", bwd_nan, 0);

static const tg_gradcheck_options quiet = {.quiet = true};

/* ---- passing ---- */

TG_TEST(gradcheck, passes_a_correct_backward) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = leaf(TG_SHAPE(2, 3), 1);
  cr_assert_eq(tg_gradcheck(apply_op, (void *)&square_op, 1, &x, 1, quiet), TG_OK, "%s",
               tg_last_error_message());
  cr_assert_eq(tg_gradcheck(apply_op, (void *)&square_once_op, 1, &x, 1, quiet), TG_OK, "%s",
               tg_last_error_message());
  tg_scope_end(sc);
}

TG_TEST(gradcheck, passes_strided_inputs) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *base = leaf(TG_SHAPE(4, 5), 2);
  tg_tensor *transposed = tg_t(base);
  tg_tensor *sliced = tg_slice(tg_narrow(base, 0, 1, 3), 1, 1, 5, 2); /* offset, stride 2 */
  cr_assert(transposed && sliced);
  cr_assert(tg_offset(sliced) > 0 && !tg_is_contiguous(sliced) && !tg_is_contiguous(transposed));
  cr_assert_eq(tg_gradcheck(apply_op, (void *)&square_op, 1, &transposed, 1, quiet), TG_OK, "%s",
               tg_last_error_message());
  cr_assert_eq(tg_gradcheck(apply_op, (void *)&square_op, 1, &sliced, 1, quiet), TG_OK, "%s",
               tg_last_error_message());
  tg_scope_end(sc);
}

TG_TEST(gradcheck, restores_inputs_bit_for_bit) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = leaf(TG_SHAPE(3, 2), 3);
  double before[6], after[6];
  cr_assert_eq(tg_to_host_array(x, before, sizeof before), TG_OK);
  cr_assert_eq(tg_gradcheck(apply_op, (void *)&square_op, 1, &x, 1, quiet), TG_OK);
  cr_assert_eq(tg_to_host_array(x, after, sizeof after), TG_OK);
  cr_assert(memcmp(before, after, sizeof before) == 0);
  cr_assert_null(tg_grad(x), "gradcheck must not write .grad");
  /* A failing check restores them too. */
  cr_assert_eq(tg_gradcheck(apply_op, (void *)&square_wrong_op, 1, &x, 1, quiet), TG_ERR_GRADCHECK);
  tg_clear_error();
  cr_assert_eq(tg_to_host_array(x, after, sizeof after), TG_OK);
  cr_assert(memcmp(before, after, sizeof before) == 0);
  tg_scope_end(sc);
}

/* ---- two inputs, two outputs, one constant ---- */

static tg_status fwd_scale_pair(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  /* out0 = x * c (c constant), out1 = y^2: out0 does not depend on y, out1 not on x. */
  if (tg_ctx_save_for_backward(ctx, 3, in) != TG_OK) return tg_last_error();
  out[0] = map2(in[0], in[2], f_twice_product);
  out[1] = map2(in[1], NULL, f_square);
  return out[0] && out[1] ? TG_OK : tg_last_error();
}
static tg_status bwd_scale_pair(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  tg_tensor *y = tg_ctx_saved(ctx, 1), *c = tg_ctx_saved(ctx, 2);
  if (!y || !c) return tg_last_error();
  cr_assert(!tg_ctx_needs_input_grad(ctx, 2), "the constant must not need a gradient");
  if (tg_ctx_needs_input_grad(ctx, 0) && !(gi[0] = map2(g[0], c, f_twice_product)))
    return tg_last_error();
  if (tg_ctx_needs_input_grad(ctx, 1) && !(gi[1] = map2(g[1], y, f_twice_product)))
    return tg_last_error();
  return TG_OK;
}
/* Claims out1 depends on x as well. */
static tg_status bwd_scale_pair_crosstalk(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  tg_status st = bwd_scale_pair(ctx, g, gi);
  if (st == TG_OK && gi[0]) {
    tg_tensor *extra = map2(g[1], g[1], f_twice_product);
    if (!extra) return tg_last_error();
    double *p = tg_data_ptr(gi[0]);
    const double *q = tg_data_ptr(extra);
    for (int64_t i = 0; i < tg_numel(extra); i++) p[i] += q[i];
  }
  return st;
}
static const tg_op_desc scale_pair_op =
    TEST_OP("test_scale_pair", 3, 2, fwd_scale_pair, bwd_scale_pair, 0);
static const tg_op_desc scale_pair_crosstalk_op =
    TEST_OP("test_scale_pair_x", 3, 2, fwd_scale_pair, bwd_scale_pair_crosstalk, 0);

TG_TEST(gradcheck, independent_outputs_and_constant_inputs) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *in[3] = {leaf(TG_SHAPE(2, 2), 4), leaf(TG_SHAPE(2, 2), 5),
                      tg_full(TG_SHAPE(2, 2), 1.5, (tg_options){.dtype = TG_F64})};
  cr_assert_eq(tg_gradcheck(apply_op, (void *)&scale_pair_op, 3, in, 2, quiet), TG_OK, "%s",
               tg_last_error_message());
  cr_assert_null(tg_grad(in[2]));
  cr_assert(!tg_requires_grad(in[2]));
  /* Output 1 does not depend on input 0 (numerical zero) but backward says it does. */
  cr_assert_eq(tg_gradcheck(apply_op, (void *)&scale_pair_crosstalk_op, 3, in, 2, quiet),
               TG_ERR_GRADCHECK);
  tg_expect_error(TG_ERR_GRADCHECK, "input 0", "output 1", "numerical 0,");
  tg_scope_end(sc);
}

/* ---- failing, with the report ---- */

TG_TEST(gradcheck, reports_input_output_element_and_values) {
  tg_scope sc = tg_scope_begin();
  const double xs[] = {0, 0, 0, 0, 0, 0.5}; /* only element 5 = [1, 2] has a nonzero slope */
  tg_tensor *x =
      tg_from_data(TG_SHAPE(2, 3), xs, (tg_options){.dtype = TG_F64, .requires_grad = true});
  cr_assert_eq(tg_gradcheck(apply_op, (void *)&square_wrong_op, 1, &x, 1, quiet), TG_ERR_GRADCHECK);
  /* d(x^2)/dx at 0.5 is 1; the wrong backward says 1.5. */
  tg_expect_error(TG_ERR_GRADCHECK, "tg_gradcheck", "input 0 element 5 [1, 2]",
                  "output 0 element 5 [1, 2]", "numerical 1", "analytical 1.5", "difference 0.5");
  tg_scope_end(sc);
}

TG_TEST(gradcheck, prints_the_report_unless_quiet) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = leaf(TG_SHAPE(3), 6);
  fflush(stderr);
  FILE *saved = tmpfile();
  cr_assert(saved);
  int fd = dup(fileno(stderr));
  cr_assert(dup2(fileno(saved), fileno(stderr)) >= 0);
  tg_status st =
      tg_gradcheck(apply_op, (void *)&square_wrong_op, 1, &x, 1, (tg_gradcheck_options){0});
  fflush(stderr);
  dup2(fd, fileno(stderr));
  close(fd);
  cr_assert_eq(st, TG_ERR_GRADCHECK);
  char printed[1024] = {0};
  rewind(saved);
  size_t n = fread(printed, 1, sizeof printed - 1, saved);
  fclose(saved);
  cr_assert(n > 0, "nothing was printed");
  cr_assert(strstr(printed, tg_last_error_message()), "printed \"%s\"", printed);
  tg_clear_error();
  tg_scope_end(sc);
}

TG_TEST(gradcheck, catches_nan_gradients) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = leaf(TG_SHAPE(2), 7);
  cr_assert_eq(tg_gradcheck(apply_op, (void *)&square_nan_op, 1, &x, 1, quiet), TG_ERR_GRADCHECK);
  tg_expect_error(TG_ERR_GRADCHECK, "analytical ", "nan");
  tg_scope_end(sc);
}

TG_TEST(gradcheck, tolerances_are_honoured) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = leaf(TG_SHAPE(4), 8);
  cr_assert_eq(tg_gradcheck(apply_op, (void *)&square_off_op, 1, &x, 1, quiet), TG_ERR_GRADCHECK);
  tg_expect_error(TG_ERR_GRADCHECK, "rtol 0.001");
  cr_assert_eq(tg_gradcheck(apply_op, (void *)&square_off_op, 1, &x, 1,
                            (tg_gradcheck_options){.rtol = 0.02, .quiet = true}),
               TG_OK, "%s", tg_last_error_message());
  tg_scope_end(sc);
}

TG_TEST(gradcheck, catches_a_backward_that_is_not_reentrant) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = leaf(TG_SHAPE(3), 9);
  cr_assert_eq(tg_gradcheck(apply_op, (void *)&square_drifting_op, 1, &x, 1, quiet),
               TG_ERR_GRADCHECK);
  tg_expect_error(TG_ERR_GRADCHECK, "not re-entrant", "for output 0 element 0",
                  "for input 0 element 0 [0]", "nondet_tol 0: must agree bitwise");
  /* The drift is 1e-12 per call, well within an absolute 1e-9... */
  tg_gradcheck_options tolerant = {.quiet = true, .nondet_tol = 1e-9};
  cr_assert_eq(tg_gradcheck(apply_op, (void *)&square_drifting_op, 1, &x, 1, tolerant), TG_OK, "%s",
               tg_last_error_message());
  /* ...but not within 1e-15. */
  tolerant.nondet_tol = 1e-15;
  cr_assert_eq(tg_gradcheck(apply_op, (void *)&square_drifting_op, 1, &x, 1, tolerant),
               TG_ERR_GRADCHECK);
  tg_expect_error(TG_ERR_GRADCHECK, "not re-entrant", "nondet_tol 1e-15)");
  tg_scope_end(sc);
}

TG_TEST(gradcheck, refuses_a_negative_nondet_tol) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = leaf(TG_SHAPE(3), 18);
  cr_assert_eq(tg_gradcheck(apply_op, (void *)&square_op, 1, &x, 1,
                            (tg_gradcheck_options){.quiet = true, .nondet_tol = -1}),
               TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_gradcheck: nondet_tol -1 must not be negative");
  tg_scope_end(sc);
}

TG_TEST(gradcheck, an_output_cut_from_the_graph_must_be_constant) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = leaf(TG_SHAPE(2), 10);
  cr_assert_eq(tg_gradcheck(apply_op_detached, (void *)&square_op, 1, &x, 1, quiet),
               TG_ERR_GRADCHECK);
  tg_expect_error(TG_ERR_GRADCHECK, "input 0", "output 0", "does not require grad");
  tg_scope_end(sc);
}

/* ---- refusals ---- */

static tg_status identity(void *user, const tg_tensor *const *in, tg_tensor **out) {
  (void)user;
  out[0] = tg_mul_scalar(in[0], 1.0);
  return out[0] ? TG_OK : tg_last_error();
}

TG_TEST(gradcheck, refuses_inputs_it_cannot_check) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *f32 = tg_ones(TG_SHAPE(2), (tg_options){.dtype = TG_F32, .requires_grad = true});
  cr_assert_eq(tg_gradcheck(identity, NULL, 1, &f32, 1, quiet), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_gradcheck", "input 0 is float32", "needs float64");

  tg_tensor *row = leaf(TG_SHAPE(1, 3), 11);
  tg_tensor *expanded = tg_expand(row, TG_SHAPE(2, 3));
  cr_assert_eq(tg_gradcheck(apply_op, (void *)&square_op, 1, &expanded, 1, quiet), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "input 0 [2, 3]", "overlapping");

  tg_tensor *constant = tg_ones(TG_SHAPE(2), (tg_options){.dtype = TG_F64});
  cr_assert_eq(tg_gradcheck(apply_op, (void *)&square_op, 1, &constant, 1, quiet), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "no input requires grad");

  tg_tensor *none = NULL;
  cr_assert_eq(tg_gradcheck(apply_op, (void *)&square_op, 1, &none, 1, quiet), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "input 0 is NULL");
  cr_assert_eq(tg_gradcheck(NULL, NULL, 1, &row, 1, quiet), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "fn is NULL");
  /* a NULL list is named as such, not as a count (was "need at least one input (got 1)") */
  cr_assert_eq(tg_gradcheck(identity, NULL, 1, NULL, 1, quiet), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_gradcheck: inputs is NULL (n_inputs is 1)");
  cr_assert_eq(tg_gradcheck(identity, NULL, 0, &row, 1, quiet), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_gradcheck: need at least one input (n_inputs is 0)");
  tg_scope_end(sc);
}

static tg_status to_f32(void *user, const tg_tensor *const *in, tg_tensor **out) {
  (void)user;
  out[0] = tg_to_dtype(in[0], TG_F32);
  return out[0] ? TG_OK : tg_last_error();
}
static tg_status fails_with_shape_error(void *user, const tg_tensor *const *in, tg_tensor **out) {
  (void)user, (void)in, (void)out;
  return tg_set_error(TG_ERR_SHAPE, "my_fn: sizes do not fit");
}
static tg_status forgets_its_output(void *user, const tg_tensor *const *in, tg_tensor **out) {
  (void)user, (void)in, (void)out;
  return TG_OK;
}

TG_TEST(gradcheck, reports_what_fn_does_wrong) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = leaf(TG_SHAPE(2), 12);
  cr_assert_eq(tg_gradcheck(to_f32, NULL, 1, &x, 1, quiet), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "output 0 is float32", "needs float64");
  cr_assert_eq(tg_gradcheck(fails_with_shape_error, NULL, 1, &x, 1, quiet), TG_ERR_SHAPE);
  tg_expect_error(TG_ERR_SHAPE, "my_fn: sizes do not fit");
  cr_assert_eq(tg_gradcheck(forgets_its_output, NULL, 1, &x, 1, quiet), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "left output 0 NULL");
  tg_scope_end(sc);
}

/* ---- gradgradcheck ---- */

TG_TEST(gradgradcheck, passes_a_correct_double_backward) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = leaf(TG_SHAPE(2, 2), 13);
  cr_assert_eq(tg_gradgradcheck(apply_op, (void *)&square_op, 1, &x, 1, quiet), TG_OK, "%s",
               tg_last_error_message());
  cr_assert_null(tg_grad(x));
  tg_scope_end(sc);
}

/* 2 x^2 x through square_backward, whose own backward is computed outside the tape: its
 * first derivative is right, but under create_graph the gradient misses the terms that flow
 * through that backward, and nothing declared it once-differentiable. */
static tg_status cube_via_untracked_backward(void *user, const tg_tensor *const *in,
                                             tg_tensor **out) {
  (void)user;
  tg_tensor *x2 = tg_apply1(&square_op, 1, in, 0, NULL);
  out[0] =
      x2 ? tg_apply1(&square_backward_op, 2, (const tg_tensor *const[]){x2, in[0]}, 0, NULL) : NULL;
  return out[0] ? TG_OK : tg_last_error();
}

TG_TEST(gradgradcheck, catches_a_backward_that_silently_is_not_differentiable) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = leaf(TG_SHAPE(3), 17);
  cr_assert_eq(tg_gradcheck(cube_via_untracked_backward, NULL, 1, &x, 1, quiet), TG_OK, "%s",
               tg_last_error_message());
  cr_assert_eq(tg_gradgradcheck(cube_via_untracked_backward, NULL, 1, &x, 1, quiet),
               TG_ERR_GRADCHECK);
  tg_expect_error(TG_ERR_GRADCHECK, "tg_gradgradcheck", "Jacobian mismatch");
  tg_scope_end(sc);
}

TG_TEST(gradgradcheck, catches_a_wrong_second_derivative) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = leaf(TG_SHAPE(3), 14);
  /* First derivatives are right... */
  cr_assert_eq(tg_gradcheck(apply_op, (void *)&square_wrong_second_op, 1, &x, 1, quiet), TG_OK,
               "%s", tg_last_error_message());
  /* ...the derivative of the gradient w.r.t. x is not: 3v instead of 2v. */
  cr_assert_eq(tg_gradgradcheck(apply_op, (void *)&square_wrong_second_op, 1, &x, 1, quiet),
               TG_ERR_GRADCHECK);
  tg_expect_error(TG_ERR_GRADCHECK, "tg_gradgradcheck", "input 0 element");
  /* Fast mode goes through the same core: the projection finds it, full mode names it. */
  tg_gradcheck_options fast = {.quiet = true, .fast_mode = true};
  cr_assert_eq(tg_gradgradcheck(apply_op, (void *)&square_wrong_second_op, 1, &x, 1, fast),
               TG_ERR_GRADCHECK);
  tg_expect_error(TG_ERR_GRADCHECK, "tg_gradgradcheck: Jacobian mismatch for input 0 element",
                  "found by fast mode");
  fast.fast_mode_report_limit = 1;
  cr_assert_eq(tg_gradgradcheck(apply_op, (void *)&square_wrong_second_op, 1, &x, 1, fast),
               TG_ERR_GRADCHECK);
  tg_expect_error(TG_ERR_GRADCHECK,
                  "tg_gradgradcheck: fast mode: v^T J u mismatch for input 0 [3]");
  tg_scope_end(sc);
}

TG_TEST(gradgradcheck, once_differentiable_is_a_state_error) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = leaf(TG_SHAPE(3), 15);
  cr_assert_eq(tg_gradgradcheck(apply_op, (void *)&square_once_op, 1, &x, 1, quiet), TG_ERR_STATE);
  tg_expect_error(TG_ERR_STATE, "test_square_once", "once-differentiable");
  tg_scope_end(sc);
}

TG_TEST(gradgradcheck, refuses_what_gradcheck_refuses) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *constant = tg_ones(TG_SHAPE(2), (tg_options){.dtype = TG_F64});
  cr_assert_eq(tg_gradgradcheck(apply_op, (void *)&square_op, 1, &constant, 1, quiet),
               TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_gradgradcheck", "no input requires grad");
  tg_tensor *x = leaf(TG_SHAPE(2), 16);
  cr_assert_eq(tg_gradgradcheck(apply_op_detached, (void *)&square_op, 1, &x, 1, quiet),
               TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "no output of fn requires grad");
  tg_scope_end(sc);
}
