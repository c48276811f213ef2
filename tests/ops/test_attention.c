/* The fused scaled dot-product attention (tg/attention.h): forward and gradients against the
 * composed twin (causal or not, dropout with one seed, T = 1, T past a tile, odd D, Tq != Tk,
 * an empty batch, no keys, layouts), its OpInfo checks (gradcheck in F64, double backward
 * refused), gradcheck and gradgradcheck of the composed form, the bytes each graph keeps,
 * dropout's generator use, errors and an allocation-failure sweep. The CPU-vs-CUDA agreement
 * is tests/cuda/test_cuda_attention.c. */
#include <math.h>

#include "ops/cpu/attention_fma_cpu.h"
#include "testutil.h"
#include "tg/attention.h"

#include "alloc_sweep.h"

typedef struct attn_case {
  const char *label;
  int ndim; /* 2, 3 or 4 */
  int64_t b, h, tq, tk, d, dv;
  bool causal;
  double dropout_p, scale;
  bool q_transposed;
} attn_case;

static tg_tensor *leaf(int ndim, const int64_t *sizes, tg_dtype dt, tg_generator *gen,
                       bool transposed) {
  int64_t s[4];
  for (int i = 0; i < ndim; i++) s[i] = sizes[i];
  if (transposed) s[ndim - 2] = sizes[ndim - 1], s[ndim - 1] = sizes[ndim - 2];
  tg_tensor *t = tg_randn(ndim, s, (tg_options){.dtype = TG_F64}, gen);
  if (transposed) t = tg_transpose(t, -2, -1);
  t = tg_contiguous(tg_to_dtype(t, dt));
  if (transposed) { /* the same values, laid out transposed */
    t = tg_transpose(tg_contiguous(tg_transpose(t, -2, -1)), -2, -1);
  }
  t = tg_detach(t);
  cr_assert_not_null(t, "%s", tg_last_error_message());
  cr_assert_eq(tg_set_requires_grad(t, true), TG_OK);
  return t;
}

static tg_tensor *twin(const tg_tensor *t) {
  tg_tensor *d = tg_detach(t);
  cr_assert_eq(tg_set_requires_grad(d, true), TG_OK);
  return d;
}

/* sizes of q, k or v for a case */
static void shape_of(const attn_case *c, int64_t rows, int64_t cols, int64_t *s) {
  int at = 0;
  if (c->ndim > 3) s[at++] = c->b;
  if (c->ndim > 2) s[at++] = c->h;
  s[at] = rows;
  s[at + 1] = cols;
}

static void check_against_composed(const attn_case *c, tg_dtype dt) {
  const double tol = dt == TG_F64 ? 1e-12 : 1e-5;
  tg_scope sc = tg_scope_begin();
  tg_generator *gen = tg_generator_new(11);
  int64_t qs[4], ks[4], vs[4];
  shape_of(c, c->tq, c->d, qs);
  shape_of(c, c->tk, c->d, ks);
  shape_of(c, c->tk, c->dv, vs);
  tg_tensor *q = leaf(c->ndim, qs, dt, gen, c->q_transposed),
            *k = leaf(c->ndim, ks, dt, gen, false), *v = leaf(c->ndim, vs, dt, gen, false);
  tg_tensor *q2 = twin(q), *k2 = twin(k), *v2 = twin(v);
  tg_generator *g1 = tg_generator_new(99), *g2 = tg_generator_new(99);
  const tg_attention_options o1 = {c->causal, c->dropout_p, g1, c->scale},
                             o2 = {c->causal, c->dropout_p, g2, c->scale};
  tg_tensor *y = tg_scaled_dot_product_attention(q, k, v, o1);
  cr_assert_not_null(y, "%s: %s", c->label, tg_last_error_message());
  tg_tensor *y2 = tg_attention_composed(q2, k2, v2, o2);
  cr_assert_not_null(y2, "%s: %s", c->label, tg_last_error_message());
  cr_assert_eq(tg_generator_get_state(g1).offset, tg_generator_get_state(g2).offset, "%s",
               c->label);
  tg_assert_close(y, y2, tol, tol);
  tg_tensor *g =
      tg_to_dtype(tg_randn(tg_ndim(y), tg_sizes(y), (tg_options){.dtype = TG_F64}, gen), dt);
  cr_assert_eq(tg_backward(y, g), TG_OK, "%s: %s", c->label, tg_last_error_message());
  cr_assert_eq(tg_backward(y2, g), TG_OK, "%s: %s", c->label, tg_last_error_message());
  tg_assert_close(tg_grad(q), tg_grad(q2), tol, tol);
  tg_assert_close(tg_grad(k), tg_grad(k2), tol, tol);
  tg_assert_close(tg_grad(v), tg_grad(v2), tol, tol);
  tg_generator_free(gen);
  tg_generator_free(g1);
  tg_generator_free(g2);
  tg_scope_end(sc);
}

static const attn_case cases[] = {
    {"[2, 3, 6, 4]", 4, 2, 3, 6, 6, 4, 4, false, 0, 0, false},
    {"causal", 4, 2, 2, 7, 7, 4, 4, true, 0, 0, false},
    {"causal, dropout 0.25", 4, 2, 2, 9, 9, 4, 3, true, 0.25, 0, false},
    {"dropout 0.6, scale 0.3", 3, 1, 3, 5, 7, 3, 2, false, 0.6, 0.3, false},
    {"T 1", 4, 1, 2, 1, 1, 4, 4, true, 0, 0, false},
    {"T 70 past the tiles, D 5 odd, causal", 3, 1, 2, 70, 70, 5, 5, true, 0, 0, false},
    {"T 70 non-causal dropout", 3, 1, 1, 70, 70, 3, 4, false, 0.1, 0, false},
    {"Tq 3 < Tk 5", 4, 1, 2, 3, 5, 4, 6, false, 0, 0, false},
    {"causal, Tq 6 > Tk 3 (top-left)", 4, 1, 2, 6, 3, 4, 4, true, 0, 0, false},
    {"causal, Tq 3 < Tk 70", 3, 1, 2, 3, 70, 4, 4, true, 0, 0, false},
    {"2-D", 2, 1, 1, 4, 5, 3, 2, false, 0, 0, false},
    {"transposed q", 4, 2, 1, 5, 5, 3, 3, true, 0, 0, true},
    {"empty batch", 4, 0, 2, 4, 4, 3, 3, true, 0.2, 0, false},
    {"no keys", 3, 1, 2, 3, 0, 3, 3, false, 0, 0, false},
    {"no queries", 3, 1, 2, 0, 4, 3, 3, false, 0, 0, false},
};

TG_TEST(attention, agrees_with_the_composed_ops) {
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    check_against_composed(&cases[i], TG_F64);
    check_against_composed(&cases[i], TG_F32);
  }
}

TG_TEST(attention, the_portable_tile_product_agrees_too) {
  /* F32 runs the AVX2 + FMA tile product where the CPU has it; the portable one otherwise */
  tg__attention_fma_allow(false);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    check_against_composed(&cases[i], TG_F32);
  tg__attention_fma_allow(true);
}

TG_TEST(attention, agrees_on_large_scores) {
  /* scores of +-1e3: the online softmax's rescaling must not overflow */
  const attn_case c = {"large", 3, 1, 2, 40, 40, 4, 4, true, 0, 30, false};
  check_against_composed(&c, TG_F64);
}

TG_TEST(attention, values_by_hand) {
  /* q = k = [[1, 0], [0, 1]], v = [[1, 2], [3, 4]], scale 1, causal: row 0 sees key 0 only;
   * row 1 weighs key 0 by e^0 and key 1 by e^1 */
  tg_tensor *q =
      tg_from_data(TG_SHAPE(2, 2), (const double[]){1, 0, 0, 1}, TG_OPTS(.dtype = TG_F64));
  tg_tensor *v =
      tg_from_data(TG_SHAPE(2, 2), (const double[]){1, 2, 3, 4}, TG_OPTS(.dtype = TG_F64));
  tg_tensor *y =
      tg_scaled_dot_product_attention(q, q, v, (tg_attention_options){.is_causal = 1, .scale = 1});
  const double w = exp(1.0) / (1 + exp(1.0));
  const double want[4] = {1, 2, (1 - w) * 1 + w * 3, (1 - w) * 2 + w * 4};
  tg_test_expect_values(y, 4, want, 1e-15);
  /* no keys: zeros, as a softmax over nothing times nothing */
  tg_tensor *none = tg_zeros(TG_SHAPE(0, 2), (tg_options){.dtype = TG_F64});
  y = tg_scaled_dot_product_attention(q, none, none, tg_attention_defaults());
  tg_test_expect_values(y, 4, (const double[]){0, 0, 0, 0}, 0);
}

TG_TEST(attention, passes_its_opinfo_checks) {
  tg_op_check_options opts = {.gradcheck = {.quiet = true}};
  cr_assert_eq(tg_op_check(tg_op_lookup("scaled_dot_product_attention"), opts), TG_OK, "%s",
               tg_last_error_message());
}

static tg_status composed_fn(void *user, const tg_tensor *const *in, tg_tensor **out) {
  const tg_attention_options *o = user;
  tg_generator_set_state(o->gen, (tg_generator_state){5, 0}); /* one mask for every call */
  out[0] = tg_attention_composed(in[0], in[1], in[2], *o);
  return out[0] ? TG_OK : tg_last_error();
}

TG_TEST(attention, composed_is_twice_differentiable) {
  tg_generator *gen = tg_generator_new(3);
  tg_tensor *in[3] = {leaf(TG_SHAPE(1, 2, 4, 3), TG_F64, gen, false),
                      leaf(TG_SHAPE(1, 2, 5, 3), TG_F64, gen, false),
                      leaf(TG_SHAPE(1, 2, 5, 2), TG_F64, gen, false)};
  tg_attention_options o = {.is_causal = 1, .dropout_p = 0.3, .gen = gen};
  const tg_gradcheck_options g = {.quiet = true};
  cr_assert_eq(tg_gradcheck(composed_fn, &o, 3, in, 1, g), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(tg_gradgradcheck(composed_fn, &o, 3, in, 1, g), TG_OK, "%s",
               tg_last_error_message());
  tg_generator_free(gen);
}

TG_TEST(attention, double_backward_is_refused) {
  tg_generator *gen = tg_generator_new(5);
  tg_tensor *q = leaf(TG_SHAPE(1, 3, 2), TG_F64, gen, false);
  tg_generator_free(gen);
  tg_tensor *y = tg_scaled_dot_product_attention(q, q, q, tg_attention_defaults());
  tg_tensor *gq = NULL;
  tg_status st = tg_autograd_grad(1, (const tg_tensor *const[]){tg_sum(tg_mul(y, y))}, NULL, 1,
                                  (const tg_tensor *const[]){q}, &gq,
                                  (tg_backward_options){.create_graph = true}, false);
  if (st == TG_OK) {
    st = tg_backward(tg_sum(gq), NULL);
    cr_assert_neq(st, TG_OK, "a double backward through a once-differentiable op must fail");
  }
  cr_assert_neq(tg_last_error(), TG_OK);
  cr_assert(strstr(tg_last_error_message(), "scaled_dot_product_attention") != NULL, "%s",
            tg_last_error_message());
  tg_clear_error();
}

TG_TEST(attention, dropout_follows_the_generator) {
  tg_generator *gen = tg_generator_new(8);
  tg_tensor *q = leaf(TG_SHAPE(2, 5, 3), TG_F32, gen, false);
  const tg_attention_options o = {.dropout_p = 0.5, .gen = gen};
  tg_generator_seed(gen, 42);
  tg_tensor *a = tg_scaled_dot_product_attention(q, q, q, o);
  /* 2 * 5 * 5 = 50 positions, rounded up to whole Philox blocks as tg_rand does */
  cr_assert_eq(tg_generator_get_state(gen).offset, 52);
  tg_tensor *b = tg_scaled_dot_product_attention(q, q, q, o);
  cr_assert_gt(tg_test_max_abs_diff(a, b), 0, "the next call draws another mask");
  tg_generator_seed(gen, 42);
  tg_tensor *c = tg_scaled_dot_product_attention(q, q, q, o);
  tg_assert_close(a, c, 0, 0);
  /* no dropout: the generator is not touched */
  tg_scaled_dot_product_attention(q, q, q, (tg_attention_options){.gen = gen});
  cr_assert_eq(tg_generator_get_state(gen).offset, 52);
  tg_generator_free(gen);
}

/* Bytes the graph keeps beyond q, k and v at GPT-2's small config (F32): the fused graph
 * keeps out and lse, the composed one the [B, H, T, T] probabilities and the causal mask. */
TG_TEST(attention, keeps_at_most_a_quarter_of_the_composed_bytes) {
  tg_generator *gen = tg_generator_new(7);
  const int64_t B = 8, H = 4, T = 256, D = 64;
  tg_tensor *q = leaf(TG_SHAPE(B, H, T, D), TG_F32, gen, false);
  tg_tensor *k = leaf(TG_SHAPE(B, H, T, D), TG_F32, gen, false);
  tg_tensor *v = leaf(TG_SHAPE(B, H, T, D), TG_F32, gen, false);
  tg_generator_free(gen);
  const tg_attention_options o = {.is_causal = 1};
  tg_tensor *fused = tg_scaled_dot_product_attention(q, k, v, o);
  tg_tensor *composed = tg_attention_composed(q, k, v, o);
  cr_assert(fused && composed, "%s", tg_last_error_message());
  const tg_tensor *inputs[3] = {q, k, v};
  const int64_t fused_bytes = tg_graph_saved_bytes(1, (const tg_tensor *const[]){fused}, 3, inputs),
                composed_bytes =
                    tg_graph_saved_bytes(1, (const tg_tensor *const[]){composed}, 3, inputs);
  cr_log_info("saved beyond q, k, v: fused %lld bytes, composed %lld", (long long)fused_bytes,
              (long long)composed_bytes);
  cr_assert_eq(fused_bytes, B * H * T * (D + 1) * 4, "out and lse: %lld", (long long)fused_bytes);
  cr_assert_geq(composed_bytes, B * H * T * T * 4, "the probabilities: %lld",
                (long long)composed_bytes);
  cr_assert_leq(4 * fused_bytes, composed_bytes, "fused %lld bytes, composed %lld",
                (long long)fused_bytes, (long long)composed_bytes);
}

TG_TEST(attention, errors) {
  const tg_options f32 = {.dtype = TG_F32};
  tg_tensor *q = tg_zeros(TG_SHAPE(2, 3, 5, 4), f32);
  tg_tensor *v = tg_zeros(TG_SHAPE(2, 3, 5, 4), f32);
  const tg_attention_options o = tg_attention_defaults();
  const char *fns[2] = {"tg_scaled_dot_product_attention", "tg_attention_composed"};
  tg_tensor *(*const fn[2])(const tg_tensor *, const tg_tensor *, const tg_tensor *,
                            tg_attention_options) = {tg_scaled_dot_product_attention,
                                                     tg_attention_composed};
  for (int i = 0; i < 2; i++) {
    cr_assert_null(fn[i](NULL, q, v, o));
    tg_expect_error(TG_ERR_ARGUMENT, fns[i], "q is NULL");
    cr_assert_null(fn[i](tg_zeros(TG_SHAPE(4), f32), q, v, o));
    tg_expect_error(TG_ERR_SHAPE, fns[i], "at least 2-D", "[4]");
    cr_assert_null(fn[i](q, tg_zeros(TG_SHAPE(3, 5, 4), f32), v, o));
    tg_expect_error(TG_ERR_SHAPE, fns[i], "same number of dims", "[3, 5, 4]");
    cr_assert_null(fn[i](q, tg_zeros(TG_SHAPE(2, 2, 5, 4), f32), v, o));
    tg_expect_error(TG_ERR_SHAPE, fns[i], "leading", "[2, 2, 5, 4]");
    cr_assert_null(fn[i](q, tg_zeros(TG_SHAPE(2, 3, 5, 3), f32), v, o));
    tg_expect_error(TG_ERR_SHAPE, fns[i], "(D) must match", "[2, 3, 5, 3]");
    cr_assert_null(fn[i](q, q, tg_zeros(TG_SHAPE(2, 3, 6, 4), f32), o));
    tg_expect_error(TG_ERR_SHAPE, fns[i], "as many rows (Tk)", "[2, 3, 6, 4]");
    cr_assert_null(fn[i](q, tg_zeros(TG_SHAPE(2, 3, 5, 4), (tg_options){.dtype = TG_F64}), v, o));
    tg_expect_error(TG_ERR_DTYPE, fns[i], "k");
    cr_assert_null(fn[i](tg_zeros(TG_SHAPE(2, 3), (tg_options){.dtype = TG_I64}), q, v, o));
    tg_expect_error(TG_ERR_DTYPE, fns[i], "q");
    cr_assert_null(fn[i](q, q, v, (tg_attention_options){.dropout_p = 1}));
    tg_expect_error(TG_ERR_ARGUMENT, fns[i], "dropout_p = 1", "[0, 1)");
    cr_assert_null(fn[i](q, q, v, (tg_attention_options){.dropout_p = -0.1}));
    tg_expect_error(TG_ERR_ARGUMENT, fns[i], "dropout_p = -0.1");
    cr_assert_null(fn[i](q, q, v, (tg_attention_options){.dropout_p = NAN}));
    tg_expect_error(TG_ERR_ARGUMENT, fns[i], "dropout_p = nan");
    cr_assert_null(fn[i](q, q, v, (tg_attention_options){.scale = INFINITY}));
    tg_expect_error(TG_ERR_ARGUMENT, fns[i], "scale = inf");
  }
  /* the op by name: its scalars and ints are checked too */
  tg_tensor *out;
  cr_assert_neq(tg_apply_ex(tg_op_lookup("scaled_dot_product_attention"), 3,
                            (const tg_tensor *const[]){q, q, v}, 1, (const double[]){0}, 0, NULL, 1,
                            &out),
                TG_OK);
  tg_expect_error(TG_ERR_ARGUMENT, "scaled_dot_product_attention", "2 scalars");
  cr_assert_neq(tg_apply_ex(tg_op_lookup("scaled_dot_product_attention"), 3,
                            (const tg_tensor *const[]){q, q, v}, 2, (const double[]){0, 0}, 3,
                            (const int64_t[]){0, 0, 0}, 1, &out),
                TG_OK);
  tg_expect_error(TG_ERR_ARGUMENT, "scaled_dot_product_attention", "scale = 0");
}

static tg_status fused_step(void *user, double *out, int *n_out) {
  const tg_attention_options *o = user;
  tg_generator *gen = tg_generator_new(4);
  tg_tensor *q = gen ? tg_randn(TG_SHAPE(1, 2, 3, 2), TG_OPTS(.dtype = TG_F64), gen) : NULL;
  tg_tensor *k = q ? tg_randn(TG_SHAPE(1, 2, 4, 2), TG_OPTS(.dtype = TG_F64), gen) : NULL;
  tg_tensor *v = k ? tg_randn(TG_SHAPE(1, 2, 4, 3), TG_OPTS(.dtype = TG_F64), gen) : NULL;
  tg_status st = status_of(v);
  if (st == TG_OK) st = clean(tg_set_requires_grad(q, true));
  if (st == TG_OK) st = clean(tg_set_requires_grad(k, true));
  if (st == TG_OK) st = clean(tg_set_requires_grad(v, true));
  tg_attention_options with_gen = *o;
  with_gen.gen = gen;
  tg_tensor *y = st == TG_OK ? tg_scaled_dot_product_attention(q, k, v, with_gen) : NULL;
  if (st == TG_OK) st = status_of(y);
  if (st == TG_OK) st = append(y, out, n_out);
  if (st == TG_OK) st = clean(tg_backward(tg_sum(tg_mul(y, y)), NULL));
  if (st == TG_OK) st = append(tg_grad(q), out, n_out);
  if (st == TG_OK) st = append(tg_grad(k), out, n_out);
  if (st == TG_OK) st = append(tg_grad(v), out, n_out);
  tg_generator_free(gen);
  return st;
}

TG_TEST(attention, allocation_failures) {
  tg_attention_options plain = {0}, dropout = {.is_causal = 1, .dropout_p = 0.4};
  sweep("attention forward and backward", fused_step, &plain);
  sweep("attention causal with dropout", fused_step, &dropout);
}
