/* The LLTM sequence model (tg/nn.h): the cell over T steps, equal to a hand-written loop;
 * fused and composed agree in values and gradients; gradcheck through both; errors; an
 * allocation-failure sweep of a forward and backward. */
#include "testutil.h"

#include "alloc_sweep.h"

enum { T_STEPS = 4, BATCH = 2, IN = 3, STATE = 5 };

static tg_lltm_seq *seq_new(tg_lltm_impl impl, uint64_t seed) {
  tg_generator *gen = tg_generator_new(seed);
  tg_lltm_seq *seq = tg_lltm_seq_new(IN, STATE, impl, TG_OPTS(.dtype = TG_F64), gen);
  tg_generator_free(gen);
  cr_assert_not_null(seq, "%s", tg_last_error_message());
  return seq;
}

static tg_tensor *randn(int ndim, const int64_t *sizes, uint64_t seed) {
  tg_generator *gen = tg_generator_new(seed);
  tg_tensor *t = tg_randn(ndim, sizes, TG_OPTS(.dtype = TG_F64), gen);
  tg_generator_free(gen);
  return t;
}

TG_TEST(lltm_seq, equals_a_loop_over_the_cell) {
  for (int impl = TG_LLTM_FUSED; impl <= TG_LLTM_COMPOSED; impl++) {
    tg_lltm_seq *seq = seq_new((tg_lltm_impl)impl, 1);
    cr_assert_eq(tg_lltm_seq_impl(seq), (tg_lltm_impl)impl);
    tg_lltm_cell *cell = tg_lltm_seq_cell(seq);
    tg_tensor *x = randn(TG_SHAPE(T_STEPS, BATCH, IN), 2);
    for (int zero_start = 0; zero_start < 2; zero_start++) {
      tg_tensor *h0 = zero_start ? NULL : randn(TG_SHAPE(BATCH, STATE), 3);
      tg_tensor *c0 = zero_start ? NULL : randn(TG_SHAPE(BATCH, STATE), 4);
      tg_tensor *out, *hn, *cn;
      cr_assert_eq(tg_lltm_seq_forward(seq, x, h0, c0, &out, &hn, &cn), TG_OK, "%s",
                   tg_last_error_message());
      tg_assert_sizes(out, T_STEPS, BATCH, STATE);
      tg_assert_sizes(hn, BATCH, STATE);
      tg_tensor *h = h0 ? h0 : tg_zeros(TG_SHAPE(BATCH, STATE), TG_OPTS(.dtype = TG_F64));
      tg_tensor *c = c0 ? c0 : tg_zeros(TG_SHAPE(BATCH, STATE), TG_OPTS(.dtype = TG_F64));
      for (int t = 0; t < T_STEPS; t++) {
        cr_assert_eq(
            tg_lltm_cell_forward(cell, (tg_lltm_impl)impl, tg_select(x, 0, t), h, c, &h, &c),
            TG_OK);
        cr_assert_eq(tg_test_max_abs_diff(tg_select(out, 0, t), h), 0.0, "step %d", t);
      }
      cr_assert_eq(tg_test_max_abs_diff(hn, h), 0.0);
      cr_assert_eq(tg_test_max_abs_diff(cn, c), 0.0);
      /* any out pointer may be NULL */
      tg_tensor *only_c;
      cr_assert_eq(tg_lltm_seq_forward(seq, x, h0, c0, NULL, NULL, &only_c), TG_OK);
      cr_assert_eq(tg_test_max_abs_diff(only_c, c), 0.0);
    }
    tg_lltm_seq_free(seq);
  }
}

/* Forward and backward of sum(output * u) + sum(h_n) + sum(c_n * 2) through impl: the
 * gradients of the parameters, input, h0 and c0. */
static void grads_of(tg_lltm_impl impl, tg_tensor **out, tg_tensor **grads) {
  tg_lltm_seq *seq = seq_new(impl, 11);
  tg_tensor *x = randn(TG_SHAPE(T_STEPS, BATCH, IN), 12);
  tg_tensor *h0 = randn(TG_SHAPE(BATCH, STATE), 13), *c0 = randn(TG_SHAPE(BATCH, STATE), 14);
  tg_tensor *u = randn(TG_SHAPE(T_STEPS, BATCH, STATE), 15);
  tg_tensor *leaves[3] = {x, h0, c0};
  for (int i = 0; i < 3; i++) tg_set_requires_grad(leaves[i], true);
  tg_tensor *hn, *cn;
  cr_assert_eq(tg_lltm_seq_forward(seq, x, h0, c0, out, &hn, &cn), TG_OK);
  tg_tensor *loss =
      tg_add(tg_add(tg_sum(tg_mul(*out, u)), tg_sum(hn)), tg_sum(tg_mul_scalar(cn, 2.0)));
  cr_assert_eq(tg_backward(loss, NULL), TG_OK);
  tg_module *m = tg_lltm_seq_module(seq);
  for (int i = 0; i < 2; i++) grads[i] = tg_clone(tg_grad(tg_module_parameter(m, i, NULL)));
  for (int i = 0; i < 3; i++) grads[2 + i] = tg_grad(leaves[i]);
  tg_lltm_seq_free(seq);
}

TG_TEST(lltm_seq, fused_equals_composed) {
  tg_tensor *out_f, *out_c, *g_f[5], *g_c[5];
  grads_of(TG_LLTM_FUSED, &out_f, g_f);
  grads_of(TG_LLTM_COMPOSED, &out_c, g_c);
  tg_assert_close(out_f, out_c, 1e-12, 1e-12);
  for (int i = 0; i < 5; i++) tg_assert_close(g_f[i], g_c[i], 1e-10, 1e-10);
}

TG_TEST(lltm_seq, set_impl_switches) {
  tg_lltm_seq *seq = seq_new(TG_LLTM_FUSED, 21);
  tg_tensor *x = randn(TG_SHAPE(2, BATCH, IN), 22);
  tg_tensor *out_f, *out_c;
  cr_assert_eq(tg_lltm_seq_forward(seq, x, NULL, NULL, &out_f, NULL, NULL), TG_OK);
  tg_lltm_seq_set_impl(seq, TG_LLTM_COMPOSED);
  cr_assert_eq(tg_lltm_seq_impl(seq), TG_LLTM_COMPOSED);
  cr_assert_eq(tg_lltm_seq_forward(seq, x, NULL, NULL, &out_c, NULL, NULL), TG_OK);
  tg_assert_close(out_f, out_c, 1e-12, 1e-12);
  tg_lltm_seq_set_impl(seq, (tg_lltm_impl)9);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_lltm_seq_set_impl", "impl 9");
  cr_assert_eq(tg_lltm_seq_impl(seq), TG_LLTM_COMPOSED);
  tg_lltm_seq_set_impl(NULL, TG_LLTM_FUSED);
  tg_expect_error(TG_ERR_ARGUMENT, "seq is NULL");
  tg_lltm_seq_free(seq);
}

typedef struct gc_case {
  tg_lltm_seq *seq;
} gc_case;

/* inputs: x, h0, c0, then the cell's weights and bias (the module's own tensors, which
 * gradcheck perturbs in place). */
static tg_status seq_fn(void *user, const tg_tensor *const *inputs, tg_tensor **outputs) {
  const gc_case *c = user;
  return tg_lltm_seq_forward(c->seq, inputs[0], inputs[1], inputs[2], &outputs[0], &outputs[1],
                             &outputs[2]);
}

TG_TEST(lltm_seq, gradcheck_both_impls) {
  for (int impl = TG_LLTM_FUSED; impl <= TG_LLTM_COMPOSED; impl++) {
    tg_generator *gen = tg_generator_new(31);
    gc_case c = {tg_lltm_seq_new(2, 3, (tg_lltm_impl)impl, TG_OPTS(.dtype = TG_F64), gen)};
    tg_generator_free(gen);
    tg_tensor *inputs[5] = {
        randn(TG_SHAPE(3, 2, 2), 32), randn(TG_SHAPE(2, 3), 33), randn(TG_SHAPE(2, 3), 34),
        tg_lltm_cell_weights(tg_lltm_seq_cell(c.seq)), tg_lltm_cell_bias(tg_lltm_seq_cell(c.seq))};
    for (int i = 0; i < 3; i++) tg_set_requires_grad(inputs[i], true);
    cr_assert_eq(tg_gradcheck(seq_fn, &c, 5, inputs, 3, (tg_gradcheck_options){0}), TG_OK,
                 "impl %d: %s", impl, tg_last_error_message());
    tg_lltm_seq_free(c.seq);
  }
}

TG_TEST(lltm_seq, module_names_and_errors) {
  tg_lltm_seq *seq = seq_new(TG_LLTM_FUSED, 41);
  tg_module *m = tg_lltm_seq_module(seq);
  cr_assert_str_eq(tg_module_type(m), "lltm_seq");
  const char *name;
  cr_assert_eq(tg_module_parameter(m, 0, &name), tg_lltm_cell_weights(tg_lltm_seq_cell(seq)));
  cr_assert_str_eq(name, "cell.weights");
  cr_assert_eq(tg_module_parameter(m, 1, &name), tg_lltm_cell_bias(tg_lltm_seq_cell(seq)));
  cr_assert_str_eq(name, "cell.bias");

  tg_tensor *out = (tg_tensor *)1, *hn = (tg_tensor *)1, *cn = (tg_tensor *)1;
  tg_tensor *x2 = randn(TG_SHAPE(BATCH, IN), 42);
  cr_assert_eq(tg_lltm_seq_forward(seq, x2, NULL, NULL, &out, &hn, &cn), TG_ERR_SHAPE);
  tg_expect_error(TG_ERR_SHAPE, "tg_lltm_seq_forward", "input is [2, 3]", "[T >= 1, batch, 3]");
  cr_assert(out == NULL && hn == NULL && cn == NULL);
  tg_tensor *empty = tg_zeros(TG_SHAPE(0, BATCH, IN), TG_OPTS(.dtype = TG_F64));
  cr_assert_eq(tg_lltm_seq_forward(seq, empty, NULL, NULL, &out, NULL, NULL), TG_ERR_SHAPE);
  tg_expect_error(TG_ERR_SHAPE, "input is [0, 2, 3]");
  tg_tensor *x = randn(TG_SHAPE(2, BATCH, IN), 43);
  tg_tensor *bad_h = tg_zeros(TG_SHAPE(BATCH, STATE + 1), TG_OPTS(.dtype = TG_F64));
  cr_assert_eq(tg_lltm_seq_forward(seq, x, bad_h, NULL, &out, NULL, NULL), TG_ERR_SHAPE);
  tg_expect_error(TG_ERR_SHAPE, "tg_lltm_seq_forward: h0 is [2, 6] but must be [batch, state_size] "
                                "= [2, 5] (input is [2, 2, 3])");
  tg_tensor *bad_c = tg_zeros(TG_SHAPE(BATCH + 1, STATE), TG_OPTS(.dtype = TG_F64));
  tg_tensor *good = tg_zeros(TG_SHAPE(BATCH, STATE), TG_OPTS(.dtype = TG_F64));
  cr_assert_eq(tg_lltm_seq_forward(seq, x, good, bad_c, &out, NULL, NULL), TG_ERR_SHAPE);
  tg_expect_error(TG_ERR_SHAPE, "tg_lltm_seq_forward: c0 is [3, 5] but must be");
  cr_assert_eq(tg_lltm_seq_forward(seq, x, NULL,
                                   tg_zeros(TG_SHAPE(STATE), TG_OPTS(.dtype = TG_F64)), &out, NULL,
                                   NULL),
               TG_ERR_SHAPE);
  tg_expect_error(TG_ERR_SHAPE, "c0 is [5] but must be");
  tg_tensor *f32_h = tg_zeros(TG_SHAPE(BATCH, STATE), TG_OPTS(.dtype = TG_F32));
  cr_assert_eq(tg_lltm_seq_forward(seq, x, f32_h, NULL, &out, NULL, NULL), TG_ERR_DTYPE);
  tg_expect_error(TG_ERR_DTYPE, "tg_lltm_seq_forward: h0 is float32 but the model's weights are "
                                "float64");
  cr_assert_null(out);
  cr_assert_eq(tg_lltm_seq_forward(seq, NULL, NULL, NULL, &out, NULL, NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "input is NULL");
  cr_assert_eq(tg_lltm_seq_forward(NULL, x, NULL, NULL, &out, NULL, NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "seq is NULL");
  tg_lltm_seq_free(seq);
  cr_assert_null(tg_lltm_seq_new(3, 4, (tg_lltm_impl)5, TG_OPTS_DEFAULT, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_lltm_seq_new", "impl 5");
  cr_assert_null(tg_lltm_seq_new(0, 4, TG_LLTM_FUSED, TG_OPTS_DEFAULT, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_lltm_seq_new", "input_features (0)");
  tg_lltm_seq_free(NULL);
}

static tg_status seq_step(void *user, double *out, int *n_out) {
  tg_lltm_impl impl = *(const tg_lltm_impl *)user;
  tg_generator *gen = tg_generator_new(51);
  tg_lltm_seq *seq = gen ? tg_lltm_seq_new(I, S, impl, TG_OPTS_DEFAULT, gen) : NULL;
  tg_status st = status_of(seq);
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = st == TG_OK ? tg_randn(TG_SHAPE(3, B, I), TG_OPTS_DEFAULT, gen) : NULL;
  tg_tensor *y = NULL, *cn = NULL;
  if (st == TG_OK) st = status_of(x);
  if (st == TG_OK) st = clean(tg_lltm_seq_forward(seq, x, NULL, NULL, &y, NULL, &cn));
  if (st == TG_OK) st = append(y, out, n_out);
  if (st == TG_OK) st = clean(tg_backward(tg_add(tg_sum(y), tg_sum(cn)), NULL));
  tg_scope_end(sc);
  for (int i = 0; st == TG_OK && i < 2; i++)
    st = append(tg_grad(tg_module_parameter(tg_lltm_seq_module(seq), i, NULL)), out, n_out);
  tg_lltm_seq_free(seq);
  tg_generator_free(gen);
  return st;
}

TG_TEST(lltm_seq, alloc_failure_forward_backward) {
  tg_lltm_impl impl = TG_LLTM_FUSED;
  cr_assert_gt(sweep("LLTM sequence, fused", seq_step, &impl).failed, 0);
  impl = TG_LLTM_COMPOSED;
  cr_assert_gt(sweep("LLTM sequence, composed", seq_step, &impl).failed, 0);
}
