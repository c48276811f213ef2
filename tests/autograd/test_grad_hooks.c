/* Post-accumulate grad hooks: called once per backward pass, as soon as the leaf's .grad is
 * final for the pass (not after the whole backward), with the final value. */
#include "testutil.h"

#include "alloc_sweep.h"

static const tg_options f64 = {.dtype = TG_F64};
static const tg_options f64_grad = {.dtype = TG_F64, .requires_grad = true};

/* What a hook saw: how often it ran, the .grad's values then, and the state of another leaf
 * (whether its .grad existed yet). */
typedef struct seen {
  int calls;
  double values[8];
  int64_t n;
  const tg_tensor *other;
  bool other_had_grad;
  int order; /* its place among all hooks that ran (1, 2, ...) */
} seen;
static int hooks_run;

static tg_status record(void *user, tg_tensor *leaf) {
  seen *s = user;
  s->calls++;
  s->order = ++hooks_run;
  tg_tensor *g = tg_grad(leaf);
  cr_assert(g, "the hook ran before the leaf had a .grad");
  s->n = tg_numel(g);
  cr_assert(s->n <= 8);
  cr_assert_eq(tg_to_host_array(tg_contiguous(g), s->values, sizeof(double) * (size_t)s->n), TG_OK,
               "%s", tg_last_error_message());
  if (s->other) s->other_had_grad = tg_grad(s->other) != NULL;
  return TG_OK;
}

static tg_status count_calls(void *user, tg_tensor *leaf) {
  (void)leaf;
  ++*(int *)user;
  return TG_OK;
}

static void expect_values(const seen *s, const tg_tensor *grad) {
  double now[8];
  cr_assert_eq(tg_numel(grad), s->n);
  cr_assert_eq(tg_to_host_array(tg_contiguous(grad), now, sizeof(double) * (size_t)s->n), TG_OK);
  for (int64_t i = 0; i < s->n; i++)
    cr_assert_eq(s->values[i], now[i], "element %lld: the hook saw %g, the final .grad is %g",
                 (long long)i, s->values[i], now[i]);
}

/* w feeds three products: its hook runs once, after the last of them, with the sum. */
TG_TEST(grad_hooks, once_per_pass_with_the_final_value) {
  const double ws[] = {1, 2, 3};
  tg_tensor *w = tg_from_data(TG_SHAPE(3), ws, f64_grad);
  seen s = {0};
  cr_assert_eq(tg_register_post_accumulate_grad_hook(w, record, &s, NULL), TG_OK);
  tg_tensor *loss =
      tg_add(tg_sum(tg_mul_scalar(w, 2)), tg_add(tg_sum(tg_mul(w, w)), tg_sum(tg_exp(w))));
  cr_assert_eq(tg_backward(loss, NULL), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(s.calls, 1);
  expect_values(&s, tg_grad(w));
  /* 2 + 2w + exp(w) */
  for (int i = 0; i < 3; i++) cr_assert_float_eq(s.values[i], 2 + 2 * ws[i] + exp(ws[i]), 1e-12);
}

/* a is used by the last op of the forward, b by the first: a's gradient is final long before
 * b's is computed, and its hook runs then. */
TG_TEST(grad_hooks, runs_as_soon_as_final_not_at_the_end) {
  tg_tensor *a = tg_from_data(TG_SHAPE(2), ((double[]){1, 2}), f64_grad);
  tg_tensor *b = tg_from_data(TG_SHAPE(2), ((double[]){3, 4}), f64_grad);
  seen sa = {.other = b}, sb = {.other = a};
  hooks_run = 0;
  cr_assert_eq(tg_register_post_accumulate_grad_hook(a, record, &sa, NULL), TG_OK);
  cr_assert_eq(tg_register_post_accumulate_grad_hook(b, record, &sb, NULL), TG_OK);
  tg_tensor *h = tg_tanh(tg_exp(tg_mul_scalar(b, 0.5)));
  tg_tensor *loss = tg_sum(tg_mul(h, a));
  cr_assert_eq(tg_backward(loss, NULL), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(sa.calls, 1);
  cr_assert_eq(sb.calls, 1);
  cr_assert_eq(sa.order, 1, "a's hook ran at place %d", sa.order);
  cr_assert_not(sa.other_had_grad, "a's hook ran after b's gradient was accumulated");
  cr_assert(sb.other_had_grad);
}

/* A node that gets no gradient (a custom op's backward returns none for its input) still
 * counts as run: the hook of a leaf behind it runs, once. */
static tg_status fwd_identity(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  (void)ctx;
  out[0] = tg_clone(in[0]);
  return out[0] ? TG_OK : tg_last_error();
}
static tg_status bwd_none(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  (void)ctx, (void)g;
  gi[0] = NULL;
  return TG_OK;
}
static const tg_op_desc stop_gradient = {.name = "test_stop_gradient",
                                         .n_inputs = 1,
                                         .n_outputs = 1,
                                         .forward = {fwd_identity, fwd_identity},
                                         .backward = bwd_none};

TG_TEST(grad_hooks, a_skipped_node_still_counts) {
  tg_tensor *a = tg_from_data(TG_SHAPE(2), ((double[]){1, 2}), f64_grad);
  seen s = {0};
  cr_assert_eq(tg_register_post_accumulate_grad_hook(a, record, &s, NULL), TG_OK);
  /* a * 3 -> stop_gradient: the mul node is reached but gets no gradient. */
  tg_tensor *blocked =
      tg_apply1(&stop_gradient, 1, (const tg_tensor *[]){tg_mul_scalar(a, 3)}, 0, NULL);
  tg_tensor *loss = tg_add(tg_sum(blocked), tg_sum(tg_mul_scalar(a, 5)));
  cr_assert_eq(tg_backward(loss, NULL), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(s.calls, 1);
  cr_assert_eq(s.values[0], 5.0);
  cr_assert_eq(s.values[1], 5.0);
}

/* Nothing reaches the leaf: no call (torch's rule). */
TG_TEST(grad_hooks, not_called_when_the_pass_adds_nothing) {
  tg_tensor *a = tg_from_data(TG_SHAPE(2), ((double[]){1, 2}), f64_grad);
  tg_tensor *unused = tg_from_data(TG_SHAPE(2), ((double[]){1, 2}), f64_grad);
  seen s = {0}, su = {0};
  cr_assert_eq(tg_register_post_accumulate_grad_hook(a, record, &s, NULL), TG_OK);
  cr_assert_eq(tg_register_post_accumulate_grad_hook(unused, record, &su, NULL), TG_OK);
  tg_tensor *blocked =
      tg_apply1(&stop_gradient, 1, (const tg_tensor *[]){tg_mul_scalar(a, 3)}, 0, NULL);
  tg_tensor *other = tg_from_data(TG_SHAPE(2), ((double[]){1, 2}), f64_grad);
  cr_assert_eq(tg_backward(tg_add(tg_sum(blocked), tg_sum(other)), NULL), TG_OK);
  cr_assert_eq(s.calls, 0);
  cr_assert_eq(su.calls, 0);
  cr_assert_null(tg_grad(a));
}

/* Each pass calls it again; the second pass adds into the existing .grad (the ops' in-place
 * destinations: addmm writes its weight gradient straight into .grad) and the hook still
 * sees the final sum. */
TG_TEST(grad_hooks, every_pass_and_through_grad_destinations) {
  tg_generator *gen = tg_generator_new(3);
  tg_tensor *x = tg_randn(TG_SHAPE(4, 3), f64, gen);
  tg_tensor *w = tg_randn(TG_SHAPE(5, 3), f64, gen);
  tg_tensor *bias = tg_randn(TG_SHAPE(5), f64, gen);
  cr_assert_eq(tg_set_requires_grad(w, true), TG_OK);
  cr_assert_eq(tg_set_requires_grad(bias, true), TG_OK);
  int sw = 0;
  seen sb = {0};
  cr_assert_eq(tg_register_post_accumulate_grad_hook(w, count_calls, &sw, NULL), TG_OK);
  cr_assert_eq(tg_register_post_accumulate_grad_hook(bias, record, &sb, NULL), TG_OK);
  for (int pass = 1; pass <= 3; pass++) {
    tg_tensor *y = tg_addmm(bias, x, tg_t(w), 1, 1);
    tg_tensor *loss = tg_sum(tg_tanh(tg_mm(tg_tanh(y), w)));
    cr_assert_eq(tg_backward(loss, NULL), TG_OK, "%s", tg_last_error_message());
    cr_assert_eq(sw, pass);
    cr_assert_eq(sb.calls, pass);
    expect_values(&sb, tg_grad(bias));
  }
  tg_generator_free(gen);
}

/* The .grad a hook sees for w [5, 3] is checked whole here (record keeps only 8 values). */
static tg_status compare_with_expected(void *user, tg_tensor *leaf) {
  const tg_tensor *expected = user;
  cr_assert(tg_allclose(tg_grad(leaf), expected, 0, 0), "max |diff| %g",
            tg_max_abs_diff(tg_grad(leaf), expected));
  return TG_OK;
}

TG_TEST(grad_hooks, sees_the_whole_final_grad_of_a_matrix) {
  tg_generator *gen = tg_generator_new(5);
  tg_tensor *x = tg_randn(TG_SHAPE(4, 3), f64, gen);
  tg_tensor *w = tg_randn(TG_SHAPE(5, 3), f64, gen);
  cr_assert_eq(tg_set_requires_grad(w, true), TG_OK);
  /* The reference: the same two passes without a hook. */
  for (int pass = 0; pass < 2; pass++)
    cr_assert_eq(tg_backward(tg_sum(tg_tanh(tg_mm(tg_tanh(tg_mm(x, tg_t(w))), w))), NULL), TG_OK);
  tg_tensor *expected = tg_clone(tg_grad(w));
  cr_assert_eq(tg_set_grad(w, NULL), TG_OK);
  cr_assert_eq(tg_backward(tg_sum(tg_tanh(tg_mm(tg_tanh(tg_mm(x, tg_t(w))), w))), NULL), TG_OK);
  int id;
  cr_assert_eq(tg_register_post_accumulate_grad_hook(w, compare_with_expected, expected, &id),
               TG_OK);
  cr_assert_eq(tg_backward(tg_sum(tg_tanh(tg_mm(tg_tanh(tg_mm(x, tg_t(w))), w))), NULL), TG_OK,
               "%s", tg_last_error_message());
  tg_generator_free(gen);
}

/* Several hooks run in registration order; a removed one no longer runs. */
TG_TEST(grad_hooks, order_and_removal) {
  tg_tensor *a = tg_from_data(TG_SHAPE(1), ((double[]){1}), f64_grad);
  seen s1 = {0}, s2 = {0}, s3 = {0};
  int h1, h2, h3;
  hooks_run = 0;
  cr_assert_eq(tg_register_post_accumulate_grad_hook(a, record, &s1, &h1), TG_OK);
  cr_assert_eq(tg_register_post_accumulate_grad_hook(a, record, &s2, &h2), TG_OK);
  cr_assert_eq(tg_register_post_accumulate_grad_hook(a, record, &s3, &h3), TG_OK);
  cr_assert(h1 != h2 && h2 != h3 && h1 != h3);
  cr_assert_eq(tg_backward(tg_sum(tg_mul(a, a)), NULL), TG_OK);
  cr_assert_eq(s1.order, 1);
  cr_assert_eq(s2.order, 2);
  cr_assert_eq(s3.order, 3);
  cr_assert_eq(tg_remove_post_accumulate_grad_hook(a, h2), TG_OK);
  cr_assert_eq(tg_remove_post_accumulate_grad_hook(a, h2), TG_ERR_ARGUMENT);
  cr_assert(strstr(tg_last_error_message(), "tg_remove_post_accumulate_grad_hook: the tensor has "
                                            "no hook"),
            "%s", tg_last_error_message());
  tg_clear_error();
  cr_assert_eq(tg_backward(tg_sum(tg_mul(a, a)), NULL), TG_OK);
  cr_assert_eq(s1.calls, 2);
  cr_assert_eq(s2.calls, 1);
  cr_assert_eq(s3.calls, 2);
}

/* A one-shot hook: removes itself the first time it runs. */
typedef struct one_shot {
  int calls, handle;
} one_shot;
static tg_status remove_self(void *user, tg_tensor *leaf) {
  one_shot *o = user;
  o->calls++;
  return tg_remove_post_accumulate_grad_hook(leaf, o->handle);
}

/* A hook that removes itself: the hooks after it still run in that pass (none is skipped),
 * and it runs no more. */
TG_TEST(grad_hooks, a_hook_may_remove_itself) {
  tg_tensor *a = tg_from_data(TG_SHAPE(1), ((double[]){1}), f64_grad);
  seen s1 = {0}, s3 = {0};
  one_shot o = {0};
  hooks_run = 0;
  cr_assert_eq(tg_register_post_accumulate_grad_hook(a, record, &s1, NULL), TG_OK);
  cr_assert_eq(tg_register_post_accumulate_grad_hook(a, remove_self, &o, &o.handle), TG_OK);
  cr_assert_eq(tg_register_post_accumulate_grad_hook(a, record, &s3, NULL), TG_OK);
  cr_assert_eq(tg_backward(tg_sum(tg_mul(a, a)), NULL), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(o.calls, 1);
  cr_assert_eq(s1.calls, 1);
  cr_assert_eq(s3.calls, 1, "the hook after the one that removed itself was skipped");
  cr_assert_eq(tg_backward(tg_sum(tg_mul(a, a)), NULL), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(o.calls, 1);
  cr_assert_eq(s1.calls, 2);
  cr_assert_eq(s3.calls, 2);
}

/* A leaf root, a leaf used by two roots of one multi-root pass: once each. */
TG_TEST(grad_hooks, leaf_roots_and_multi_root_passes) {
  tg_tensor *a = tg_from_data(TG_SHAPE(2), ((double[]){1, 2}), f64_grad);
  seen s = {0};
  cr_assert_eq(tg_register_post_accumulate_grad_hook(a, record, &s, NULL), TG_OK);
  tg_tensor *g = tg_from_data(TG_SHAPE(2), ((double[]){0.5, 0.25}), f64);
  cr_assert_eq(tg_backward(a, g), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(s.calls, 1);
  cr_assert_eq(s.values[0], 0.5);
  const tg_tensor *roots[] = {tg_sum(tg_mul_scalar(a, 2)), tg_sum(tg_mul_scalar(a, 3)), a};
  const tg_tensor *grads[] = {NULL, NULL, g};
  cr_assert_eq(tg_backward_multi(3, roots, grads, (tg_backward_options){0}), TG_OK, "%s",
               tg_last_error_message());
  cr_assert_eq(s.calls, 2);
  cr_assert_eq(s.values[0], 0.5 + 0.5 + 2 + 3);
  cr_assert_eq(s.values[1], 0.25 + 0.25 + 2 + 3);
}

/* tg_autograd_grad leaves .grad alone and calls no hook. */
TG_TEST(grad_hooks, not_called_by_autograd_grad) {
  tg_tensor *a = tg_from_data(TG_SHAPE(2), ((double[]){1, 2}), f64_grad);
  seen s = {0};
  cr_assert_eq(tg_register_post_accumulate_grad_hook(a, record, &s, NULL), TG_OK);
  tg_tensor *out = tg_sum(tg_mul(a, a)), *ga = NULL;
  cr_assert_eq(tg_autograd_grad(1, (const tg_tensor *[]){out}, NULL, 1, (const tg_tensor *[]){a},
                                &ga, (tg_backward_options){0}, false),
               TG_OK);
  cr_assert_eq(s.calls, 0);
}

/* A hook's error stops the backward and is reported as the backward's. */
static tg_status failing_hook(void *user, tg_tensor *leaf) {
  (void)leaf;
  ++*(int *)user;
  return tg_set_error(TG_ERR_DIST, "test hook: the all-reduce failed");
}
static tg_status silent_failing_hook(void *user, tg_tensor *leaf) {
  (void)user, (void)leaf;
  return TG_ERR_STATE;
}

TG_TEST(grad_hooks, an_error_stops_backward) {
  tg_tensor *a = tg_from_data(TG_SHAPE(2), ((double[]){1, 2}), f64_grad);
  tg_tensor *b = tg_from_data(TG_SHAPE(2), ((double[]){3, 4}), f64_grad);
  int calls = 0;
  seen sb = {0};
  cr_assert_eq(tg_register_post_accumulate_grad_hook(a, failing_hook, &calls, NULL), TG_OK);
  cr_assert_eq(tg_register_post_accumulate_grad_hook(b, record, &sb, NULL), TG_OK);
  /* a is final first (used last): b's hook never runs. */
  tg_tensor *loss = tg_sum(tg_mul(tg_exp(b), a));
  cr_assert_eq(tg_backward(loss, NULL), TG_ERR_DIST);
  cr_assert(strstr(tg_last_error_message(), "tg_backward: test hook: the all-reduce failed"), "%s",
            tg_last_error_message());
  cr_assert_eq(calls, 1);
  cr_assert_eq(sb.calls, 0);
  tg_clear_error();

  tg_tensor *c = tg_from_data(TG_SHAPE(1), ((double[]){1}), f64_grad);
  cr_assert_eq(tg_register_post_accumulate_grad_hook(c, silent_failing_hook, NULL, NULL), TG_OK);
  cr_assert_eq(tg_backward(tg_sum(tg_mul(c, c)), NULL), TG_ERR_STATE);
  cr_assert(strstr(tg_last_error_message(), "without a message"), "%s", tg_last_error_message());
}

TG_TEST(grad_hooks, bad_arguments) {
  tg_tensor *a = tg_from_data(TG_SHAPE(2), ((double[]){1, 2}), f64_grad);
  seen s = {0};
  int id = 7;
  cr_assert_eq(tg_register_post_accumulate_grad_hook(NULL, record, &s, &id), TG_ERR_ARGUMENT);
  cr_assert_eq(id, 0);
  cr_assert(strstr(tg_last_error_message(), "tg_register_post_accumulate_grad_hook"), "%s",
            tg_last_error_message());
  cr_assert_eq(tg_register_post_accumulate_grad_hook(a, NULL, &s, NULL), TG_ERR_ARGUMENT);
  cr_assert(strstr(tg_last_error_message(), "fn is NULL"), "%s", tg_last_error_message());
  tg_tensor *y = tg_mul_scalar(a, 2);
  cr_assert_eq(tg_register_post_accumulate_grad_hook(y, record, &s, NULL), TG_ERR_STATE);
  cr_assert(strstr(tg_last_error_message(), "not a leaf"), "%s", tg_last_error_message());
  tg_clear_error(); /* a NULL with an error pending would be taken for that error's result */
  cr_assert_eq(tg_remove_post_accumulate_grad_hook(NULL, 1), TG_ERR_ARGUMENT);
  cr_assert_eq(tg_remove_post_accumulate_grad_hook(a, 1), TG_ERR_ARGUMENT);
  tg_clear_error();
}

/* Registration's one allocation and a backward with hooks under every allocation failure:
 * TG_ERR_MEMORY and nothing leaked, or the clean result. */

static tg_status hooked_step(void *user, double *out, int *n_out) {
  (void)user;
  int calls = 0;
  tg_tensor *w = tg_from_data(TG_SHAPE(2, 2), ((double[]){1, 2, 3, 4}), f64_grad);
  tg_tensor *x = tg_from_data(TG_SHAPE(2, 2), ((double[]){0.5, -1, 2, 0.25}), f64);
  tg_status st = status_of(x);
  for (int i = 0; i < 3 && st == TG_OK; i++)
    st = tg_register_post_accumulate_grad_hook(w, count_calls, &calls, NULL);
  if (st == TG_OK) st = clean(tg_backward(tg_sum(tg_tanh(tg_mm(tg_mm(x, w), w))), NULL));
  if (st == TG_OK && calls != 3) st = tg_set_error(TG_ERR_STATE, "hooks ran %d times", calls);
  if (st == TG_OK) st = append(tg_grad(w), out, n_out);
  return st;
}

TG_TEST(grad_hooks, allocation_failures) { sweep("post-accumulate hooks", hooked_step, NULL); }
