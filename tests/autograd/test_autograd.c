/* The tape's contract: backward, accumulation, grad mode, detach, retain/create_graph,
 * saved-tensor versions, checks on custom backwards, tg_autograd_grad, deep graphs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static const tg_options f64 = {.dtype = TG_F64};
static const tg_options f64_grad = {.dtype = TG_F64, .requires_grad = true};

static tg_tensor *vec(int n, const double *values, tg_options opts) {
  return tg_from_data(1, (const int64_t[]){n}, values, opts);
}

static void assert_values(const tg_tensor *t, int n, const double *want, double tol) {
  cr_assert(t, "NULL tensor: %s", tg_last_error_message());
  cr_assert_eq(tg_numel(t), n, "numel %lld, want %d", (long long)tg_numel(t), n);
  for (int i = 0; i < n; i++)
    cr_assert(fabs(tg_test_at(t, i) - want[i]) <= tol, "element %d is %.17g, want %.17g", i,
              tg_test_at(t, i), want[i]);
}

/* ---- basic backward ---- */

TG_TEST(autograd, backward_of_a_scalar_root) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = vec(3, (double[]){1, 2, 3}, f64_grad);
  tg_tensor *y = tg_sum(tg_mul(x, x));
  cr_assert_eq(tg_ndim(y), 0);
  cr_assert_str_eq(tg_grad_fn_name(y), "sum");
  cr_assert_eq(tg_backward(y, NULL), TG_OK, "%s", tg_last_error_message());
  assert_values(tg_grad(x), 3, (double[]){2, 4, 6}, 0);
  cr_assert(tg_is_leaf(tg_grad(x)) && !tg_requires_grad(tg_grad(x)));
  tg_scope_end(sc);
}

TG_TEST(autograd, gradients_are_summed_where_paths_meet) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = vec(3, (double[]){-1, 0.5, 2}, f64_grad);
  tg_tensor *y = tg_add(tg_mul(x, x), x); /* dy/dx = 2x + 1 */
  cr_assert_eq(tg_backward(tg_sum(y), NULL), TG_OK, "%s", tg_last_error_message());
  assert_values(tg_grad(x), 3, (double[]){-1, 2, 5}, 0);
  tg_scope_end(sc);
}

TG_TEST(autograd, a_leaf_root_gets_its_own_gradient) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = vec(1, (double[]){4}, f64_grad);
  cr_assert_eq(tg_backward(x, NULL), TG_OK, "%s", tg_last_error_message());
  assert_values(tg_grad(x), 1, (double[]){1}, 0);
  tg_scope_end(sc);
}

TG_TEST(autograd, gradients_accumulate_across_backward_calls) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = vec(2, (double[]){1, 2}, f64_grad);
  cr_assert_eq(tg_backward(tg_sum(tg_mul_scalar(x, 3)), NULL), TG_OK);
  tg_tensor *first = tg_grad(x);
  cr_assert_eq(tg_backward(tg_sum(tg_mul(x, x)), NULL), TG_OK);
  assert_values(tg_grad(x), 2, (double[]){3 + 2, 3 + 4}, 0);
  cr_assert_eq(tg_grad(x), first, "accumulation writes into the existing .grad");
  tg_scope_end(sc);
}

TG_TEST(autograd, zero_grad_keeps_the_buffer) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = vec(2, (double[]){1, 2}, f64_grad);
  cr_assert_eq(tg_zero_grad(x), TG_OK, "no .grad yet: a no-op");
  cr_assert_null(tg_grad(x));
  cr_assert_eq(tg_backward(tg_sum(tg_mul_scalar(x, 5)), NULL), TG_OK);
  tg_tensor *g = tg_grad(x);
  uint64_t version = tg_version(g);
  cr_assert_eq(tg_zero_grad(x), TG_OK);
  cr_assert_eq(tg_grad(x), g);
  cr_assert_gt(tg_version(g), version, "zeroing is an in-place write");
  assert_values(g, 2, (double[]){0, 0}, 0);
  cr_assert_eq(tg_backward(tg_sum(tg_mul_scalar(x, 2)), NULL), TG_OK);
  assert_values(tg_grad(x), 2, (double[]){2, 2}, 0);
  cr_assert_eq(tg_zero_grad(NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_zero_grad");
  tg_scope_end(sc);
}

TG_TEST(autograd, set_grad_checks_what_it_is_given) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = vec(2, (double[]){1, 2}, f64_grad);
  cr_assert_eq(tg_set_grad(x, tg_zeros(TG_SHAPE(3), f64)), TG_ERR_SHAPE);
  tg_expect_error(TG_ERR_SHAPE, "tg_set_grad", "[3]", "[2]");
  cr_assert_eq(tg_set_grad(x, tg_zeros(TG_SHAPE(2), TG_OPTS_DEFAULT)), TG_ERR_DTYPE);
  tg_expect_error(TG_ERR_DTYPE, "tg_set_grad", "float32");
  cr_assert_eq(tg_set_grad(x, tg_ones(TG_SHAPE(2), f64)), TG_OK);
  cr_assert_eq(tg_backward(tg_sum(x), NULL), TG_OK);
  assert_values(tg_grad(x), 2, (double[]){2, 2}, 0);
  cr_assert_eq(tg_set_grad(x, NULL), TG_OK);
  cr_assert_null(tg_grad(x));
  tg_scope_end(sc);
}

/* ---- requires_grad, grad mode, detach ---- */

TG_TEST(autograd, requires_grad_propagates_to_results) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *a = vec(2, (double[]){1, 2}, f64_grad);
  tg_tensor *b = vec(2, (double[]){3, 4}, f64);
  cr_assert(tg_is_leaf(a) && tg_is_leaf(b));
  tg_tensor *ab = tg_add(a, b), *bb = tg_mul(b, b);
  cr_assert(tg_requires_grad(ab) && !tg_is_leaf(ab));
  cr_assert_str_eq(tg_grad_fn_name(ab), "add");
  cr_assert(!tg_requires_grad(bb) && tg_is_leaf(bb) && tg_grad_fn_name(bb) == NULL);
  cr_assert(tg_requires_grad(tg_t(tg_unsqueeze(ab, 0))), "views of a result require grad too");

  cr_assert_eq(tg_set_requires_grad(ab, false), TG_ERR_STATE);
  tg_expect_error(TG_ERR_STATE, "tg_set_requires_grad", "add", "not a leaf");
  tg_tensor *idx = tg_zeros(TG_SHAPE(2), (tg_options){.dtype = TG_I64});
  cr_assert_eq(tg_set_requires_grad(idx, true), TG_ERR_DTYPE);
  tg_expect_error(TG_ERR_DTYPE, "tg_set_requires_grad", "int64");
  cr_assert_eq(tg_set_requires_grad(b, true), TG_OK);
  cr_assert(tg_requires_grad(tg_mul(b, b)));
  tg_scope_end(sc);
}

TG_TEST(autograd, no_grad_regions_nest) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = vec(2, (double[]){1, 2}, f64_grad);
  cr_assert(tg_is_grad_enabled());
  tg_no_grad_begin();
  cr_assert(!tg_is_grad_enabled());
  tg_tensor *y = tg_mul(x, x);
  cr_assert(!tg_requires_grad(y) && tg_grad_fn_name(y) == NULL, "nothing is recorded");
  tg_no_grad_begin();
  cr_assert(!tg_set_grad_enabled(true), "returns the previous mode");
  cr_assert(tg_requires_grad(tg_mul(x, x)), "explicitly re-enabled inside a region");
  tg_no_grad_end(); /* restores what the inner begin saw: disabled */
  cr_assert(!tg_is_grad_enabled());
  tg_no_grad_end();
  cr_assert(tg_is_grad_enabled());
  tg_no_grad_end(); /* unbalanced end: harmless */
  cr_assert(tg_is_grad_enabled());

  cr_assert(tg_set_grad_enabled(false));
  cr_assert(!tg_requires_grad(tg_add(x, x)));
  tg_no_grad_begin();
  tg_no_grad_end();
  cr_assert(!tg_is_grad_enabled(), "a region inside disabled mode leaves it disabled");
  cr_assert(!tg_set_grad_enabled(true));
  cr_assert(tg_requires_grad(tg_add(x, x)));
  tg_scope_end(sc);
}

TG_TEST(autograd, detach_shares_storage_and_cuts_the_graph) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = vec(2, (double[]){1, 2}, f64_grad);
  tg_tensor *y = tg_mul_scalar(x, 3);
  tg_tensor *d = tg_detach(y);
  cr_assert(tg_shares_storage(d, y) && tg_data_ptr(d) == tg_data_ptr(y));
  cr_assert(!tg_requires_grad(d) && tg_is_leaf(d));
  tg_tensor *z = tg_add(tg_mul(d, x), y); /* d counts as a constant */
  cr_assert_eq(tg_backward(tg_sum(z), NULL), TG_OK);
  assert_values(tg_grad(x), 2, (double[]){3 + 3, 6 + 3}, 0);
  cr_assert_eq(tg_backward(tg_sum(d), NULL), TG_ERR_STATE);
  tg_expect_error(TG_ERR_STATE, "does not require grad");
  tg_scope_end(sc);
}

TG_TEST(autograd, backward_from_a_tensor_that_does_not_require_grad) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = vec(2, (double[]){1, 2}, f64);
  cr_assert_eq(tg_backward(tg_sum(tg_mul(x, x)), NULL), TG_ERR_STATE);
  tg_expect_error(TG_ERR_STATE, "tg_backward", "does not require grad");
  cr_assert_eq(tg_backward(NULL, NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_backward");
  tg_scope_end(sc);
}

/* ---- retain_graph, create_graph ---- */

TG_TEST(autograd, retain_graph_allows_a_second_backward) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = vec(2, (double[]){1, 3}, f64_grad);
  tg_tensor *y = tg_sum(tg_mul(x, x)); /* mul saves x */
  cr_assert_eq(tg_backward_ex(y, NULL, (tg_backward_options){.retain_graph = true}), TG_OK);
  cr_assert_eq(tg_backward(y, NULL), TG_OK, "%s", tg_last_error_message());
  assert_values(tg_grad(x), 2, (double[]){4, 12}, 0);
  /* That second backward did not retain: a third fails and leaves .grad alone. */
  cr_assert_eq(tg_backward(y, NULL), TG_ERR_STATE);
  tg_expect_error(TG_ERR_STATE, "tg_backward", "second time", "retain_graph");
  assert_values(tg_grad(x), 2, (double[]){4, 12}, 0);
  tg_scope_end(sc);
}

/* Counts and NULL lists are told apart (a NULL list was reported as "got 1 outputs"). */
TG_TEST(autograd, autograd_grad_names_a_null_list) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = vec(3, (double[]){-1, 0.5, 2}, f64_grad);
  tg_tensor *y = tg_sum(x), *dx = NULL;
  const tg_tensor *const ys[] = {y}, *const xs[] = {x};
  tg_backward_options o = {0};
  cr_assert_eq(tg_autograd_grad(1, NULL, NULL, 1, xs, &dx, o, false), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_autograd_grad: outputs is NULL");
  cr_assert_eq(tg_autograd_grad(1, ys, NULL, 1, NULL, &dx, o, false), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_autograd_grad: inputs is NULL");
  cr_assert_eq(tg_autograd_grad(1, ys, NULL, 1, xs, NULL, o, false), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_autograd_grad: grads_out is NULL");
  cr_assert_eq(tg_autograd_grad(0, ys, NULL, 1, xs, &dx, o, false), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "need at least one output and one input (n_outputs is 0");
  tg_scope_end(sc);
}

TG_TEST(autograd, double_backward_with_create_graph) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = vec(3, (double[]){-1, 0.5, 2}, f64_grad);
  tg_tensor *y = tg_sum(tg_pow_scalar(x, 3));
  tg_tensor *dx = NULL, *ddx = NULL;
  cr_assert_eq(tg_autograd_grad(1, (const tg_tensor *const[]){y}, NULL, 1,
                                (const tg_tensor *const[]){x}, &dx,
                                (tg_backward_options){.create_graph = true}, false),
               TG_OK, "%s", tg_last_error_message());
  assert_values(dx, 3, (double[]){3, 0.75, 12}, 1e-12); /* 3x^2 */
  cr_assert(tg_requires_grad(dx) && tg_grad_fn_name(dx), "dx is differentiable");
  cr_assert_null(tg_grad(x), "tg_autograd_grad leaves .grad alone");
  cr_assert_eq(tg_autograd_grad(1, (const tg_tensor *const[]){tg_sum(dx)}, NULL, 1,
                                (const tg_tensor *const[]){x}, &ddx, (tg_backward_options){0},
                                false),
               TG_OK, "%s", tg_last_error_message());
  assert_values(ddx, 3, (double[]){-6, 3, 12}, 1e-12); /* 6x */
  cr_assert(!tg_requires_grad(ddx));
  tg_scope_end(sc);
}

TG_TEST(autograd, create_graph_backward_leaves_a_differentiable_grad) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = vec(2, (double[]){1, 2}, f64_grad);
  tg_tensor *y = tg_sum(tg_mul(tg_mul(x, x), x));
  cr_assert_eq(tg_backward_ex(y, NULL, (tg_backward_options){.create_graph = true}), TG_OK);
  tg_tensor *g = tg_grad(x);
  assert_values(g, 2, (double[]){3, 12}, 1e-12);
  cr_assert(tg_requires_grad(g) && tg_grad_fn_name(g));
  /* .grad += d(sum 3x^2)/dx = 6x; the graph-carrying grad is replaced, not written into. */
  cr_assert_eq(tg_backward(tg_sum(g), NULL), TG_OK, "%s", tg_last_error_message());
  assert_values(tg_grad(x), 2, (double[]){3 + 6, 12 + 12}, 1e-12);
  /* x.grad's graph holds x: break the cycle (as in PyTorch) before x dies. */
  cr_assert_eq(tg_set_grad(x, NULL), TG_OK);
  tg_scope_end(sc);
}

/* ---- roots and upstream gradients ---- */

TG_TEST(autograd, non_scalar_root_needs_a_gradient) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = vec(3, (double[]){1, 2, 3}, f64_grad);
  tg_tensor *y = tg_mul_scalar(x, 2);
  cr_assert_eq(tg_backward(y, NULL), TG_ERR_SHAPE);
  tg_expect_error(TG_ERR_SHAPE, "tg_backward", "one-element", "[3]");
  cr_assert_eq(tg_backward(y, tg_ones(TG_SHAPE(2), f64)), TG_ERR_SHAPE);
  tg_expect_error(TG_ERR_SHAPE, "tg_backward", "[2]", "[3]");
  cr_assert_eq(tg_backward(y, tg_ones(TG_SHAPE(3), TG_OPTS_DEFAULT)), TG_ERR_DTYPE);
  tg_expect_error(TG_ERR_DTYPE, "tg_backward: ", "grad is float32 but output 0 is float64");
  cr_assert_null(tg_grad(x), "failed calls leave .grad alone");
  cr_assert_eq(tg_backward(y, vec(3, (double[]){1, 10, 100}, f64)), TG_OK);
  assert_values(tg_grad(x), 3, (double[]){2, 20, 200}, 0);
  tg_scope_end(sc);
}

TG_TEST(autograd, upstream_gradients_of_any_strides) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_zeros(TG_SHAPE(2, 3), f64_grad);
  tg_tensor *y = tg_mul_scalar(x, 2);
  /* A stride-0 gradient: one row expanded over two. */
  tg_tensor *row = tg_from_data(TG_SHAPE(1, 3), (double[]){1, 2, 3}, f64);
  tg_tensor *expanded = tg_expand(row, TG_SHAPE(2, 3));
  cr_assert_eq(tg_stride(expanded, 0), 0);
  cr_assert_eq(tg_backward_ex(y, expanded, (tg_backward_options){.retain_graph = true}), TG_OK,
               "%s", tg_last_error_message());
  assert_values(tg_grad(x), 6, (double[]){2, 4, 6, 2, 4, 6}, 0);
  cr_assert(tg_is_contiguous(tg_grad(x)), ".grad is a dense copy, not the caller's view");
  cr_assert(!tg_shares_storage(tg_grad(x), row));
  /* A transposed gradient. */
  cr_assert_eq(tg_set_grad(x, NULL), TG_OK);
  tg_tensor *base = tg_from_data(TG_SHAPE(3, 2), (double[]){1, 4, 2, 5, 3, 6}, f64);
  tg_tensor *transposed = tg_t(base); /* [[1, 2, 3], [4, 5, 6]] */
  cr_assert(!tg_is_contiguous(transposed));
  cr_assert_eq(tg_backward(y, transposed), TG_OK, "%s", tg_last_error_message());
  assert_values(tg_grad(x), 6, (double[]){2, 4, 6, 8, 10, 12}, 0);
  tg_scope_end(sc);
}

TG_TEST(autograd, a_null_grad_from_a_failed_call_is_that_error) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = vec(1, (double[]){3}, f64_grad);
  tg_tensor *y = tg_mul_scalar(x, 2); /* one element: a NULL grad alone would mean ones */
  tg_tensor *g = tg_ones(TG_SHAPE(1, -1), f64);
  cr_assert_null(g);
  cr_assert_eq(tg_backward(y, g), TG_ERR_SHAPE, "the pending error, not TG_OK");
  tg_expect_error(TG_ERR_SHAPE, "tg_ones: ", "[1, -1]");
  cr_assert_null(tg_grad(x), "nothing accumulated");
  cr_assert_null(tg_ones(TG_SHAPE(1, -1), f64));
  cr_assert_eq(tg_backward_ex(y, NULL, (tg_backward_options){.retain_graph = true}), TG_ERR_SHAPE);
  tg_expect_error(TG_ERR_SHAPE, "tg_ones: ");
  cr_assert_null(tg_ones(TG_SHAPE(1, -1), f64));
  tg_tensor *out = NULL;
  cr_assert_eq(tg_autograd_grad(1, (const tg_tensor *const[]){y}, (const tg_tensor *const[]){NULL},
                                1, (const tg_tensor *const[]){x}, &out, (tg_backward_options){0},
                                false),
               TG_ERR_SHAPE);
  tg_expect_error(TG_ERR_SHAPE, "tg_ones: ");
  cr_assert_null(out);
  /* With no error pending, NULL still means an implicit one. */
  cr_assert_eq(tg_backward(y, NULL), TG_OK, "%s", tg_last_error_message());
  assert_values(tg_grad(x), 1, (double[]){2}, 0);
  tg_scope_end(sc);
}

TG_TEST(autograd, backward_errors_name_the_function_called) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = vec(3, (double[]){1, 2, 3}, f64_grad);
  tg_tensor *y = tg_mul_scalar(x, 2);
  cr_assert_eq(tg_backward_ex(y, NULL, (tg_backward_options){0}), TG_ERR_SHAPE);
  tg_expect_error(TG_ERR_SHAPE, "tg_backward_ex: ", "one-element");
  cr_assert_eq(tg_backward_ex(y, tg_ones(TG_SHAPE(3), TG_OPTS_DEFAULT), (tg_backward_options){0}),
               TG_ERR_DTYPE);
  tg_expect_error(TG_ERR_DTYPE, "tg_backward_ex: ", "float32", "float64");
  tg_tensor *out = NULL;
  cr_assert_eq(tg_autograd_grad(1, (const tg_tensor *const[]){y},
                                (const tg_tensor *const[]){tg_ones(TG_SHAPE(2), f64)}, 1,
                                (const tg_tensor *const[]){x}, &out, (tg_backward_options){0},
                                false),
               TG_ERR_SHAPE);
  tg_expect_error(TG_ERR_SHAPE, "tg_autograd_grad: ", "[2]", "[3]");
  tg_scope_end(sc);
}

/* ---- saved tensors and versions ---- */

TG_TEST(autograd, a_saved_tensor_modified_in_place_is_an_error) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = vec(2, (double[]){1, 2}, f64_grad);
  tg_tensor *c = vec(2, (double[]){3, 4}, f64);
  tg_tensor *y = tg_sum(tg_mul(x, c)); /* mul saves c for x's gradient */
  uint64_t version = tg_version(c);
  cr_assert_eq(tg_fill_(c, 7), TG_OK);
  cr_assert_gt(tg_version(c), version);
  cr_assert_eq(tg_backward(y, NULL), TG_ERR_STATE);
  tg_expect_error(TG_ERR_STATE, "mul", "modified by an in-place operation");
  cr_assert_null(tg_grad(x), "no wrong gradient was written");
  tg_scope_end(sc);
}

TG_TEST(autograd, an_in_place_write_through_a_view_is_seen_too) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = vec(3, (double[]){1, 2, 3}, f64_grad);
  tg_tensor *c = vec(3, (double[]){1, 1, 1}, f64);
  tg_tensor *y = tg_sum(tg_mul(x, c));
  cr_assert_eq(tg_fill_(tg_narrow(c, 0, 1, 1), 5), TG_OK); /* same storage, other tensor */
  cr_assert_eq(tg_backward(y, NULL), TG_ERR_STATE);
  tg_expect_error(TG_ERR_STATE, "modified by an in-place operation");
  tg_scope_end(sc);
}

TG_TEST(autograd, a_leaf_that_requires_grad_is_not_modified_in_place) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = vec(2, (double[]){1, 2}, f64_grad);
  uint64_t version = tg_version(x);
  cr_assert_eq(tg_add_scalar_(x, 1), TG_ERR_STATE);
  tg_expect_error(TG_ERR_STATE, "leaf");
  assert_values(x, 2, (double[]){1, 2}, 0);
  cr_assert_eq(tg_version(x), version);
  /* Inside a no-grad region it is an ordinary write (how optimizers update parameters). */
  tg_no_grad_begin();
  cr_assert_eq(tg_add_scalar_(x, 1), TG_OK, "%s", tg_last_error_message());
  tg_no_grad_end();
  assert_values(x, 2, (double[]){2, 3}, 0);
  cr_assert_gt(tg_version(x), version);
  cr_assert(tg_is_leaf(x) && tg_requires_grad(x));
  tg_scope_end(sc);
}

TG_TEST(autograd, in_place_ops_are_recorded) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = vec(2, (double[]){0.5, -1}, f64_grad);
  tg_tensor *a = tg_mul_scalar(x, 2);
  cr_assert_eq(tg_mul_scalar_(a, 3), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(tg_exp_(a), TG_OK, "%s", tg_last_error_message());
  cr_assert(tg_requires_grad(a) && tg_grad_fn_name(a));
  cr_assert_eq(tg_backward(tg_sum(a), NULL), TG_OK, "%s", tg_last_error_message());
  /* d exp(6x)/dx = 6 exp(6x) */
  assert_values(tg_grad(x), 2, (double[]){6 * exp(3.0), 6 * exp(-6.0)}, 1e-12);
  tg_scope_end(sc);
}

TG_TEST(autograd, an_in_place_op_on_a_saved_intermediate_is_an_error) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = vec(2, (double[]){1, 2}, f64_grad);
  tg_tensor *a = tg_mul_scalar(x, 2);
  tg_tensor *b = tg_sum(tg_mul(a, a)); /* mul saves a */
  cr_assert_eq(tg_add_scalar_(a, 1), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(tg_backward(b, NULL), TG_ERR_STATE);
  tg_expect_error(TG_ERR_STATE, "modified by an in-place operation");
  cr_assert_null(tg_grad(x));
  tg_scope_end(sc);
}

/* ---- custom backwards that break the rules ---- */

static tg_status fwd_copy(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  (void)ctx;
  out[0] = tg_clone(in[0]);
  return out[0] ? TG_OK : tg_last_error();
}
static tg_status bwd_wrong_shape(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  (void)ctx, (void)g;
  gi[0] = tg_zeros(TG_SHAPE(5), f64);
  return gi[0] ? TG_OK : tg_last_error();
}
static tg_status bwd_wrong_dtype(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  gi[0] = tg_zeros(tg_ctx_input_ndim(ctx, 0), tg_ctx_input_sizes(ctx, 0), TG_OPTS_DEFAULT);
  return (void)g, gi[0] ? TG_OK : tg_last_error();
}
static tg_status bwd_fails(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  (void)ctx, (void)g, (void)gi;
  return tg_set_error(TG_ERR_UNSUPPORTED, "my_op: backward is not written yet");
}
static const tg_op_desc wrong_shape_op = {"test_wrong_shape", 1, 1,   {fwd_copy},
                                          bwd_wrong_shape,    0, NULL};
static const tg_op_desc wrong_dtype_op = {"test_wrong_dtype", 1, 1,   {fwd_copy},
                                          bwd_wrong_dtype,    0, NULL};
static const tg_op_desc failing_op = {"test_failing", 1, 1, {fwd_copy}, bwd_fails, 0, NULL};

TG_TEST(autograd, a_custom_backward_must_return_the_input_geometry) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_ones(TG_SHAPE(2, 3), f64_grad);
  tg_tensor *y = tg_apply1(&wrong_shape_op, 1, (const tg_tensor *const[]){x}, 0, NULL);
  cr_assert_eq(tg_backward(tg_sum(y), NULL), TG_ERR_SHAPE);
  tg_expect_error(TG_ERR_SHAPE, "test_wrong_shape", "shape [5]", "input 0", "expected [2, 3]");
  y = tg_apply1(&wrong_dtype_op, 1, (const tg_tensor *const[]){x}, 0, NULL);
  cr_assert_eq(tg_backward(tg_sum(y), NULL), TG_ERR_DTYPE);
  tg_expect_error(TG_ERR_DTYPE, "test_wrong_dtype", "float32", "input 0", "expected float64");
  cr_assert_null(tg_grad(x));
  tg_scope_end(sc);
}

TG_TEST(autograd, a_failing_backward_reports_its_error_and_restores_grad_mode) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_ones(TG_SHAPE(2), f64_grad);
  tg_tensor *y = tg_apply1(&failing_op, 1, (const tg_tensor *const[]){x}, 0, NULL);
  int depth = tg_scope_depth();
  cr_assert_eq(tg_backward(tg_sum(y), NULL), TG_ERR_UNSUPPORTED);
  /* The message starts with the function called, then the backward's own words. */
  tg_expect_error(TG_ERR_UNSUPPORTED, "tg_backward: my_op: backward is not written yet");
  tg_tensor *out = NULL;
  cr_assert_eq(tg_autograd_grad(1, (const tg_tensor *const[]){tg_sum(y)}, NULL, 1,
                                (const tg_tensor *const[]){x}, &out, (tg_backward_options){0},
                                false),
               TG_ERR_UNSUPPORTED);
  tg_expect_error(TG_ERR_UNSUPPORTED, "tg_autograd_grad: my_op: backward is not written yet");
  cr_assert(tg_is_grad_enabled());
  cr_assert_eq(tg_scope_depth(), depth);
  tg_scope_end(sc);
}

/* The identity whose backward hands grad_output straight back, as PyTorch allows. */
static tg_status bwd_pass_through(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  (void)ctx;
  gi[0] = (tg_tensor *)g[0];
  return TG_OK;
}
static const tg_op_desc pass_through_op = {"test_pass_through", 1, 1,   {fwd_copy},
                                           bwd_pass_through,    0, NULL};

TG_TEST(autograd, a_backward_may_return_its_grad_output) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = vec(2, (double[]){1, 2}, f64_grad);
  tg_tensor *y = tg_apply1(&pass_through_op, 1, (const tg_tensor *const[]){x}, 0, NULL);
  cr_assert_eq(tg_backward(tg_sum(tg_add(tg_mul_scalar(y, 2), y)), NULL), TG_OK, "%s",
               tg_last_error_message());
  assert_values(tg_grad(x), 2, (double[]){3, 3}, 0);
  /* ... and stays differentiable: d/dx sum(y*y) = 2x, then d/dx sum(2x) = 2. */
  tg_tensor *g, *gg;
  y = tg_apply1(&pass_through_op, 1, (const tg_tensor *const[]){x}, 0, NULL);
  cr_assert_eq(tg_autograd_grad(1, (const tg_tensor *const[]){tg_sum(tg_mul(y, y))}, NULL, 1,
                                (const tg_tensor *const[]){x}, &g,
                                (tg_backward_options){.create_graph = true}, false),
               TG_OK, "%s", tg_last_error_message());
  assert_values(g, 2, (double[]){2, 4}, 0);
  cr_assert_eq(tg_autograd_grad(1, (const tg_tensor *const[]){tg_sum(g)}, NULL, 1,
                                (const tg_tensor *const[]){x}, &gg, (tg_backward_options){0},
                                false),
               TG_OK, "%s", tg_last_error_message());
  assert_values(gg, 2, (double[]){2, 2}, 0);
  tg_scope_end(sc);
}

/* x^2 with a backward written with tg ops, but declared once-differentiable. */
static tg_status fwd_square(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  if (tg_ctx_save_for_backward(ctx, 1, in) != TG_OK) return tg_last_error();
  out[0] = tg_mul(in[0], in[0]);
  return out[0] ? TG_OK : tg_last_error();
}
static tg_status bwd_square(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  tg_tensor *x = tg_ctx_saved(ctx, 0);
  gi[0] = tg_mul(tg_mul_scalar(x, 2), g[0]);
  return gi[0] ? TG_OK : tg_last_error();
}
static const tg_op_desc square_once_op = {
    "test_square_once", 1, 1, {fwd_square}, bwd_square, TG_OP_ONCE_DIFFERENTIABLE, NULL};
static const tg_op_desc square_op = {"test_square", 1, 1, {fwd_square}, bwd_square, 0, NULL};

TG_TEST(autograd, double_backward_through_a_once_differentiable_op_is_an_error) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = vec(2, (double[]){1, 3}, f64_grad);
  tg_tensor *dx = NULL, *ddx = NULL;
  /* The same op without the flag is twice differentiable. */
  tg_tensor *y = tg_sum(tg_apply1(&square_op, 1, (const tg_tensor *const[]){x}, 0, NULL));
  cr_assert_eq(tg_autograd_grad(1, (const tg_tensor *const[]){y}, NULL, 1,
                                (const tg_tensor *const[]){x}, &dx,
                                (tg_backward_options){.create_graph = true}, false),
               TG_OK);
  cr_assert_eq(tg_autograd_grad(1, (const tg_tensor *const[]){tg_sum(dx)}, NULL, 1,
                                (const tg_tensor *const[]){x}, &ddx, (tg_backward_options){0},
                                false),
               TG_OK, "%s", tg_last_error_message());
  assert_values(ddx, 2, (double[]){2, 2}, 0);

  y = tg_sum(tg_apply1(&square_once_op, 1, (const tg_tensor *const[]){x}, 0, NULL));
  cr_assert_eq(tg_autograd_grad(1, (const tg_tensor *const[]){y}, NULL, 1,
                                (const tg_tensor *const[]){x}, &dx,
                                (tg_backward_options){.create_graph = true}, false),
               TG_OK, "%s", tg_last_error_message());
  assert_values(dx, 2, (double[]){2, 6}, 0); /* the first derivative is still right */
  cr_assert(tg_requires_grad(dx), "it carries the guard that fails on double backward");
  cr_assert_eq(tg_backward(tg_sum(dx), NULL), TG_ERR_STATE);
  tg_expect_error(TG_ERR_STATE, "tg_backward: test_square_once is once-differentiable");
  cr_assert_null(tg_grad(x));
  tg_scope_end(sc);
}

/* ---- tg_autograd_grad ---- */

TG_TEST(autograd, autograd_grad_with_unused_inputs) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = vec(2, (double[]){1, 2}, f64_grad);
  tg_tensor *unused = vec(2, (double[]){5, 6}, f64_grad);
  tg_tensor *y = tg_sum(tg_mul_scalar(x, 4));
  const tg_tensor *targets[] = {x, unused};
  tg_tensor *grads[2] = {NULL, NULL};
  tg_backward_options keep = {.retain_graph = true};
  cr_assert_eq(
      tg_autograd_grad(1, (const tg_tensor *const[]){y}, NULL, 2, targets, grads, keep, false),
      TG_ERR_STATE);
  tg_expect_error(TG_ERR_STATE, "tg_autograd_grad", "input 1 was not used", "allow_unused");
  cr_assert(grads[0] == NULL && grads[1] == NULL);
  cr_assert_eq(
      tg_autograd_grad(1, (const tg_tensor *const[]){y}, NULL, 2, targets, grads, keep, true),
      TG_OK, "%s", tg_last_error_message());
  assert_values(grads[0], 2, (double[]){4, 4}, 0);
  cr_assert_null(grads[1]);
  cr_assert(tg_grad(x) == NULL && tg_grad(unused) == NULL);

  tg_tensor *constant = vec(2, (double[]){1, 1}, f64);
  cr_assert_eq(tg_autograd_grad(1, (const tg_tensor *const[]){y}, NULL, 1,
                                (const tg_tensor *const[]){constant}, grads, keep, true),
               TG_ERR_STATE);
  tg_expect_error(TG_ERR_STATE, "tg_autograd_grad", "input 0 does not require grad");
  cr_assert_eq(tg_autograd_grad(0, NULL, NULL, 1, targets, grads, keep, true), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_autograd_grad");
  tg_scope_end(sc);
}

TG_TEST(autograd, autograd_grad_of_intermediate_tensors_and_several_outputs) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = vec(2, (double[]){1, 2}, f64_grad);
  tg_tensor *h = tg_mul_scalar(x, 3);  /* an intermediate */
  tg_tensor *a = tg_sum(tg_mul(h, h)); /* d/dh = 2h */
  tg_tensor *b = tg_mul_scalar(h, 10); /* a non-scalar output */
  tg_tensor *grads[2];
  cr_assert_eq(tg_autograd_grad(2, (const tg_tensor *const[]){a, b},
                                (const tg_tensor *const[]){NULL, vec(2, (double[]){1, -1}, f64)}, 2,
                                (const tg_tensor *const[]){h, x}, grads, (tg_backward_options){0},
                                false),
               TG_OK, "%s", tg_last_error_message());
  /* d/dh = 2h + 10 v = (6 + 10, 12 - 10); d/dx = 3 d/dh */
  assert_values(grads[0], 2, (double[]){16, 2}, 0);
  assert_values(grads[1], 2, (double[]){48, 6}, 0);
  tg_scope_end(sc);
}

/* ---- deep graphs ---- */

/* 100000 nodes would overflow the stack of any recursive release or backward. Under
 * valgrind (scripts/test.sh sets TG_TEST_UNDER_VALGRIND) such a chain takes 26 s, so there
 * it is 10000: valgrind checks the same code's memory, and the Release and ASan runs the
 * depth. */
static int chain_length(void) {
  const char *v = getenv("TG_TEST_UNDER_VALGRIND");
  return v && strcmp(v, "1") == 0 ? 10000 : 100000;
}

/* x + 1 + 1 + ... as a chain of chain_length() nodes held only by its last tensor. */
static tg_tensor *long_chain(tg_tensor *x) {
  tg_tensor *y = tg_retain(x);
  for (int i = 0; i < chain_length(); i++) {
    tg_scope sc = tg_scope_begin();
    tg_tensor *next = tg_retain(i % 2 ? tg_add_scalar(y, 1) : tg_mul_scalar(y, 1));
    tg_scope_end(sc);
    tg_release(y);
    cr_assert(next, "step %d: %s", i, tg_last_error_message());
    y = next;
  }
  return y;
}

TG_TEST(autograd, a_chain_of_100000_nodes_is_released_without_recursion) {
  tg_tensor *x = vec(1, (double[]){0}, f64_grad);
  int64_t live_before = tg_live_objects();
  tg_tensor *y = long_chain(x);
  cr_assert_gt(tg_live_objects(), live_before + chain_length() - 1, "the chain is alive");
  tg_release(y);
  cr_assert_eq(tg_live_objects(), live_before);
}

TG_TEST(autograd, backward_through_a_chain_of_100000_nodes) {
  tg_tensor *x = vec(1, (double[]){0}, f64_grad);
  tg_tensor *y = long_chain(x);
  cr_assert_eq(tg_backward(y, NULL), TG_OK, "%s", tg_last_error_message());
  double v;
  cr_assert_eq(tg_item(y, &v), TG_OK);
  cr_assert_eq(v, chain_length() / 2);
  assert_values(tg_grad(x), 1, (double[]){1}, 0);
  tg_release(y);
}
