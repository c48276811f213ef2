/* The LLTM: the fused op against the composed reference (outputs and all five gradients,
 * F32 and F64, odd sizes, strided inputs and upstream gradients, extreme pre-activations,
 * partial gradients, threads), gradcheck of both paths, what each keeps for backward,
 * once-differentiability, and every bad input. */
#include <math.h>

#include "testutil.h"

static const tg_gradcheck_options quiet = {.quiet = true};

/* ---- building inputs ---- */

enum { IN_INPUT, IN_WEIGHTS, IN_BIAS, IN_OLD_H, IN_OLD_CELL, N_IN };

typedef struct lltm_case {
  int64_t batch, features, state;
  tg_dtype dtype;
  bool strided;        /* transposed weights, sliced input/old_h/old_cell, strided bias */
  bool requires[N_IN]; /* which inputs require grad (all when none is set) */
} lltm_case;

/* A [rows, cols] leaf of values in [lo, hi): contiguous, or a view with an offset and a
 * non-unit column stride (sliced) or the transpose of a contiguous tensor. */
static tg_tensor *values(int64_t rows, int64_t cols, double lo, double hi, tg_dtype dtype,
                         int layout) {
  tg_options o = {.dtype = dtype};
  switch (layout) {
  case 1: /* transposed */
    return tg_t(tg_uniform(TG_SHAPE(cols, rows), lo, hi, o, NULL));
  case 2: /* sliced: rows 1.., every other column from 1 */
    return tg_narrow(tg_slice(tg_uniform(TG_SHAPE(rows + 2, 2 * cols + 1), lo, hi, o, NULL), 1, 1,
                              2 * cols + 1, 2),
                     0, 1, rows);
  default:
    return tg_uniform(TG_SHAPE(rows, cols), lo, hi, o, NULL);
  }
}

/* The five inputs of a case: the tutorial's init for weights and bias (uniform
 * +-1/sqrt(S)), N(0,1)-like input, old_h, old_cell. Leaves; views when strided. */
static void make_inputs(const lltm_case *c, tg_tensor *in[N_IN]) {
  const int64_t B = c->batch, I = c->features, S = c->state;
  const double w = 1.0 / sqrt((double)S);
  const int strided = c->strided ? 2 : 0;
  in[IN_INPUT] = values(B, I, -2, 2, c->dtype, strided);
  in[IN_WEIGHTS] = values(3 * S, S + I, -w, w, c->dtype, c->strided ? 1 : 0);
  tg_tensor *bias = values(1, 3 * S, -w, w, c->dtype, strided);
  in[IN_BIAS] = tg_select(bias, 0, 0);
  in[IN_OLD_H] = values(B, S, -2, 2, c->dtype, strided);
  in[IN_OLD_CELL] = values(B, S, -2, 2, c->dtype, strided);
  bool any = false;
  for (int i = 0; i < N_IN; i++) any |= c->requires[i];
  for (int i = 0; i < N_IN; i++) {
    cr_assert(in[i], "%s", tg_last_error_message());
    cr_assert_eq(tg_set_requires_grad(in[i], !any || c->requires[i]), TG_OK, "%s",
                 tg_last_error_message());
  }
}

/* ---- comparing the two paths ---- */

/* |a - b| <= rtol * (|b| + max |b|): relative to each element and to the tensor's scale
 * (GEMM sums cancel, so near-zero elements carry the rounding of their largest terms). */
static void assert_close_scaled(const tg_tensor *a, const tg_tensor *b, double rtol,
                                const char *what) {
  cr_assert(a && b, "%s: missing tensor (%s)", what, tg_last_error_message());
  tg_tensor *zero = tg_zeros_like(b);
  double scale = tg_test_max_abs_diff(b, zero);
  cr_assert(isfinite(scale), "%s: not finite", what);
  cr_assert(isfinite(tg_test_max_abs_diff(a, zero)), "%s: fused result not finite", what);
  tg_assert_close(a, b, rtol, rtol * scale + 1e-300);
}

typedef tg_status (*lltm_fn)(const tg_tensor *, const tg_tensor *, const tg_tensor *,
                             const tg_tensor *, const tg_tensor *, tg_tensor **, tg_tensor **);

/* Outputs and the gradients of sum(new_h * gh) + sum(new_cell * gc) (gh, gc NULL: that
 * output unused) with respect to the inputs that require grad (others left NULL). */
static void run_path(lltm_fn fn, tg_tensor *const in[N_IN], const tg_tensor *gh,
                     const tg_tensor *gc, tg_tensor *out[2], tg_tensor *grads[N_IN]) {
  cr_assert_eq(fn(in[0], in[1], in[2], in[3], in[4], &out[0], &out[1]), TG_OK, "%s",
               tg_last_error_message());
  const tg_tensor *outputs[2], *upstream[2];
  int n_out = 0;
  if (gh) outputs[n_out] = out[0], upstream[n_out++] = gh;
  if (gc) outputs[n_out] = out[1], upstream[n_out++] = gc;
  const tg_tensor *wanted[N_IN];
  int n_wanted = 0, index[N_IN];
  for (int i = 0; i < N_IN; i++) {
    grads[i] = NULL;
    if (tg_requires_grad(in[i])) index[n_wanted] = i, wanted[n_wanted++] = in[i];
  }
  tg_tensor *got[N_IN];
  cr_assert_eq(tg_autograd_grad(n_out, outputs, upstream, n_wanted, wanted, got,
                                (tg_backward_options){0}, true),
               TG_OK, "%s", tg_last_error_message());
  for (int k = 0; k < n_wanted; k++) grads[index[k]] = got[k];
}

static const char *const in_names[N_IN] = {"d_input", "d_weights", "d_bias", "d_old_h",
                                           "d_old_cell"};

/* Runs both paths with upstream gradients gh, gc and asserts outputs and gradients agree. */
static void assert_paths_agree_with(tg_tensor *const in[N_IN], const tg_tensor *gh,
                                    const tg_tensor *gc, double rtol) {
  tg_tensor *fo[2], *co[2], *fg[N_IN], *cg[N_IN];
  run_path(tg_lltm, in, gh, gc, fo, fg);
  run_path(tg_lltm_composed, in, gh, gc, co, cg);
  assert_close_scaled(fo[0], co[0], rtol, "new_h");
  assert_close_scaled(fo[1], co[1], rtol, "new_cell");
  for (int i = 0; i < N_IN; i++) {
    cr_assert_eq(fg[i] == NULL, cg[i] == NULL, "%s: computed by one path only", in_names[i]);
    if (fg[i]) assert_close_scaled(fg[i], cg[i], rtol, in_names[i]);
  }
}

static double rtol_of(tg_dtype dtype) { return dtype == TG_F64 ? 1e-12 : 1e-5; }

/* The tutorial's upstream gradients: those of sum(new_h) + sum(new_cell), i.e. ones,
 * expanded from one element as PyTorch's sum backward delivers them (stride 0). */
static tg_tensor *ones_expanded(int64_t B, int64_t S, tg_dtype dtype) {
  return tg_expand(tg_ones(TG_SHAPE(1, 1), TG_OPTS(.dtype = dtype)), TG_SHAPE(B, S));
}

static void check_case(lltm_case c) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *in[N_IN];
  make_inputs(&c, in);
  tg_tensor *gh = values(c.batch, c.state, -1, 1, c.dtype, 0);
  tg_tensor *gc = values(c.batch, c.state, -1, 1, c.dtype, 0);
  assert_paths_agree_with(in, gh, gc, rtol_of(c.dtype));
  assert_paths_agree_with(in, ones_expanded(c.batch, c.state, c.dtype),
                          ones_expanded(c.batch, c.state, c.dtype), rtol_of(c.dtype));
  /* Expanded along the state (column stride 0), a value of its own per row and output. */
  assert_paths_agree_with(
      in, tg_expand(values(c.batch, 1, -1, 1, c.dtype, 0), TG_SHAPE(c.batch, c.state)),
      tg_expand(values(c.batch, 1, -2, 2, c.dtype, 0), TG_SHAPE(c.batch, c.state)),
      rtol_of(c.dtype));
  tg_scope_end(sc);
}

static void check_sizes(tg_dtype dtype, bool strided) {
  static const int64_t sizes[][3] = {
      {1, 1, 1}, {3, 5, 7}, {2, 3, 300}, {16, 32, 128}, {1, 32, 128}};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
    check_case((lltm_case){sizes[k][0], sizes[k][1], sizes[k][2], dtype, strided, {0}});
}

/* ---- fused == composed ---- */

TG_TEST(lltm, fused_matches_composed_f32) { check_sizes(TG_F32, false); }
TG_TEST(lltm, fused_matches_composed_f64) { check_sizes(TG_F64, false); }
TG_TEST(lltm, fused_matches_composed_strided_inputs_f32) { check_sizes(TG_F32, true); }
TG_TEST(lltm, fused_matches_composed_strided_inputs_f64) { check_sizes(TG_F64, true); }

TG_TEST(lltm, strided_upstream_gradients) {
  tg_scope sc = tg_scope_begin();
  const int64_t B = 5, I = 4, S = 9;
  lltm_case c = {B, I, S, TG_F64, false, {0}};
  tg_tensor *in[N_IN];
  make_inputs(&c, in);
  /* grad_h: a transposed view; grad_cell: every other column of a wider tensor. */
  tg_tensor *gh = values(B, S, -1, 1, TG_F64, 1), *gc = values(B, S, -1, 1, TG_F64, 2);
  cr_assert(!tg_is_contiguous(gh) && !tg_is_contiguous(gc));
  assert_paths_agree_with(in, gh, gc, 1e-12);
  /* a row broadcast down the batch (stride 0 in dim 0) */
  tg_tensor *row = tg_expand(values(1, S, -1, 1, TG_F64, 0), TG_SHAPE(B, S));
  assert_paths_agree_with(in, row, gc, 1e-12);
  tg_scope_end(sc);
}

TG_TEST(lltm, one_output_unused) {
  tg_scope sc = tg_scope_begin();
  lltm_case c = {4, 3, 6, TG_F64, false, {0}};
  tg_tensor *in[N_IN];
  make_inputs(&c, in);
  tg_tensor *g = values(4, 6, -1, 1, TG_F64, 0);
  assert_paths_agree_with(in, g, NULL, 1e-12); /* new_cell unused */
  assert_paths_agree_with(in, NULL, g, 1e-12); /* new_h unused */
  tg_scope_end(sc);
}

TG_TEST(lltm, only_some_inputs_require_grad) {
  /* The tutorial's benchmark (weights and bias only), and each input alone: the official
   * Python baseline got "only input requires grad" wrong. */
  static const bool sets[][N_IN] = {
      {false, true, true, false, false},  {true, false, false, false, false},
      {false, true, false, false, false}, {false, false, true, false, false},
      {false, false, false, true, false}, {false, false, false, false, true},
      {true, false, false, true, false}};
  for (size_t k = 0; k < sizeof sets / sizeof sets[0]; k++) {
    tg_scope sc = tg_scope_begin();
    lltm_case c = {3, 4, 5, TG_F64, k % 2 == 1, {0}};
    for (int i = 0; i < N_IN; i++) c.requires[i] = sets[k][i];
    tg_tensor *in[N_IN];
    make_inputs(&c, in);
    tg_tensor *g = values(3, 5, -1, 1, TG_F64, 0);
    assert_paths_agree_with(in, g, g, 1e-12);
    tg_scope_end(sc);
  }
}

TG_TEST(lltm, bias_of_shape_1_by_3s) {
  tg_scope sc = tg_scope_begin();
  lltm_case c = {3, 4, 5, TG_F64, false, {0}};
  tg_tensor *in[N_IN];
  make_inputs(&c, in);
  tg_tensor *bias2 = tg_detach(tg_unsqueeze(in[IN_BIAS], 0));
  cr_assert_eq(tg_set_requires_grad(bias2, true), TG_OK);
  in[IN_BIAS] = bias2;
  tg_tensor *fo[2], *fg[N_IN];
  run_path(tg_lltm, in, values(3, 5, -1, 1, TG_F64, 0), NULL, fo, fg);
  tg_assert_sizes(fg[IN_BIAS], 1, 15);
  assert_paths_agree_with(in, values(3, 5, -1, 1, TG_F64, 0), values(3, 5, -1, 1, TG_F64, 0),
                          1e-12);
  tg_scope_end(sc);
}

TG_TEST(lltm, large_sizes_match_composed) {
  /* Above the size where backward stores d_gates transposed (B * 3S >= 65536). */
  check_case((lltm_case){64, 8, 400, TG_F32, false, {0}});
  check_case((lltm_case){40, 3, 600, TG_F64, true, {0}});
}

TG_TEST(lltm, two_threads_match_composed) {
  /* Sizes above the parallel threshold; columns split across threads and tiles. */
  tg_set_num_threads(2);
  check_case((lltm_case){64, 8, 300, TG_F32, false, {0}});
  check_case((lltm_case){32, 4, 600, TG_F64, true, {0}});
  check_case((lltm_case){64, 8, 400, TG_F32, true, {0}});
  tg_set_num_threads(0);
}

/* ---- extreme pre-activations ---- */

/* Gates set exactly through the bias (weights zero): every pre-activation value in
 * {0, +-1, +-30, +-100, +-1000} for each gate, against old_cell values as extreme. */
static void check_extremes(tg_dtype dtype) {
  static const double v[] = {0, 1, -1, 30, -30, 100, -100, 1000, -1000};
  const int n = (int)(sizeof v / sizeof v[0]);
  const int64_t S = n * n, B = n, I = 2;
  tg_scope sc = tg_scope_begin();
  double bias[3 * 81], cell[9 * 81];
  for (int j = 0; j < S; j++) {
    bias[j] = v[j % n];               /* input gate */
    bias[S + j] = v[j / n];           /* output gate */
    bias[2 * S + j] = v[(j + 4) % n]; /* candidate */
    for (int b = 0; b < B; b++) cell[b * S + j] = v[(b + j) % n];
  }
  tg_options o = {.dtype = TG_F64};
  tg_tensor *in[N_IN] = {tg_to_dtype(tg_uniform(TG_SHAPE(B, I), -1, 1, o, NULL), dtype),
                         tg_zeros(TG_SHAPE(3 * S, S + I), TG_OPTS(.dtype = dtype)),
                         tg_to_dtype(tg_from_data(TG_SHAPE(3 * S), bias, o), dtype),
                         tg_to_dtype(tg_uniform(TG_SHAPE(B, S), -1, 1, o, NULL), dtype),
                         tg_to_dtype(tg_from_data(TG_SHAPE(B, S), cell, o), dtype)};
  for (int i = 0; i < N_IN; i++) cr_assert_eq(tg_set_requires_grad(in[i], true), TG_OK);
  tg_tensor *g = tg_to_dtype(tg_uniform(TG_SHAPE(B, S), -1, 1, o, NULL), dtype);
  assert_paths_agree_with(in, g, g, rtol_of(dtype));
  tg_scope_end(sc);
}

TG_TEST(lltm, extreme_preactivations_f32) { check_extremes(TG_F32); }
TG_TEST(lltm, extreme_preactivations_f64) { check_extremes(TG_F64); }

TG_TEST(lltm, elu_derivative_at_zero_is_one) {
  /* One element, all pre-activations exactly 0: ig = og = 1/2, cand = 0, and
   * d new_cell / d g2 = ig * elu'(0) = 1/2 (PyTorch's ELU backward; the official CPU
   * extension's d_elu gives 0 here). */
  tg_scope sc = tg_scope_begin();
  tg_options o = {.dtype = TG_F64, .requires_grad = true};
  tg_tensor *in[N_IN] = {tg_zeros(TG_SHAPE(1, 1), o), tg_zeros(TG_SHAPE(3, 2), o),
                         tg_zeros(TG_SHAPE(3), o), tg_zeros(TG_SHAPE(1, 1), o),
                         tg_zeros(TG_SHAPE(1, 1), o)};
  tg_tensor *out[2], *grads[N_IN];
  run_path(tg_lltm, in, NULL, tg_ones(TG_SHAPE(1, 1), TG_OPTS(.dtype = TG_F64)), out, grads);
  cr_assert_float_eq(tg_test_at(grads[IN_BIAS], 2), 0.5, 1e-15);
  cr_assert_float_eq(tg_test_at(grads[IN_BIAS], 0), 0.0, 1e-15); /* cand = 0 */
  cr_assert_float_eq(tg_test_at(grads[IN_OLD_CELL], 0), 1.0, 1e-15);
  tg_scope_end(sc);
}

/* ---- gradcheck ---- */

typedef struct gradcheck_user {
  lltm_fn fn;
  bool broadcast; /* bias given as [1], old_cell as [1, S]: expanded inside */
} gradcheck_user;

static tg_status lltm_gc(void *user, const tg_tensor *const *in, tg_tensor **out) {
  const gradcheck_user *u = user;
  const tg_tensor *bias = in[IN_BIAS], *cell = in[IN_OLD_CELL];
  if (u->broadcast) {
    int64_t S = tg_size(in[IN_OLD_H], 1), B = tg_size(in[IN_OLD_H], 0);
    bias = tg_expand(bias, TG_SHAPE(3 * S));
    cell = tg_expand(cell, TG_SHAPE(B, S));
  }
  return u->fn(in[0], in[1], bias, in[3], cell, &out[0], &out[1]);
}

static void gradcheck_path(lltm_fn fn, bool strided, bool broadcast) {
  tg_scope sc = tg_scope_begin();
  lltm_case c = {3, 17, 5, TG_F64, strided, {0}};
  tg_tensor *in[N_IN];
  make_inputs(&c, in);
  if (broadcast) {
    in[IN_BIAS] =
        tg_uniform(TG_SHAPE(1), -1, 1, TG_OPTS(.dtype = TG_F64, .requires_grad = true), NULL);
    in[IN_OLD_CELL] =
        tg_uniform(TG_SHAPE(1, 5), -1, 1, TG_OPTS(.dtype = TG_F64, .requires_grad = true), NULL);
  }
  gradcheck_user u = {fn, broadcast};
  cr_assert_eq(tg_gradcheck(lltm_gc, &u, N_IN, in, 2, quiet), TG_OK, "%s", tg_last_error_message());
  tg_scope_end(sc);
}

TG_TEST(lltm, gradcheck_fused) {
  gradcheck_path(tg_lltm, false, false);
  gradcheck_path(tg_lltm, true, false);
  gradcheck_path(tg_lltm, false, true);
}

TG_TEST(lltm, gradcheck_composed) {
  gradcheck_path(tg_lltm_composed, false, false);
  gradcheck_path(tg_lltm_composed, true, false);
  gradcheck_path(tg_lltm_composed, false, true);
}

TG_TEST(lltm, composed_is_twice_differentiable) {
  tg_scope sc = tg_scope_begin();
  lltm_case c = {2, 3, 4, TG_F64, false, {0}};
  tg_tensor *in[N_IN];
  make_inputs(&c, in);
  gradcheck_user u = {tg_lltm_composed, false};
  cr_assert_eq(tg_gradgradcheck(lltm_gc, &u, N_IN, in, 2, quiet), TG_OK, "%s",
               tg_last_error_message());
  tg_scope_end(sc);
}

TG_TEST(lltm, fused_is_once_differentiable) {
  tg_scope sc = tg_scope_begin();
  lltm_case c = {2, 3, 4, TG_F64, false, {0}};
  tg_tensor *in[N_IN];
  make_inputs(&c, in);
  tg_tensor *h, *cell, *g;
  cr_assert_eq(tg_lltm(in[0], in[1], in[2], in[3], in[4], &h, &cell), TG_OK);
  cr_assert_eq(tg_autograd_grad(1, (const tg_tensor *const[]){tg_sum(h)}, NULL, 1,
                                (const tg_tensor *const[]){in[IN_WEIGHTS]}, &g,
                                (tg_backward_options){.create_graph = true}, false),
               TG_OK, "%s", tg_last_error_message());
  cr_assert_neq(tg_backward(tg_sum(g), NULL), TG_OK);
  tg_expect_error(TG_ERR_STATE, "lltm", "once-differentiable");
  tg_scope_end(sc);
}

/* ---- what the graph keeps ---- */

TG_TEST(lltm, fused_saves_at_most_60_percent_of_composed) {
  static const int64_t sizes[][3] = {{16, 32, 128}, {3, 5, 7}, {64, 1024, 128}};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    for (int all = 0; all < 2; all++) {
      tg_scope sc = tg_scope_begin();
      lltm_case c = {sizes[k][0], sizes[k][1], sizes[k][2], TG_F32, false, {0}};
      c.requires[IN_WEIGHTS] = c.requires[IN_BIAS] = true;
      c.requires[IN_INPUT] = c.requires[IN_OLD_H] = c.requires[IN_OLD_CELL] = all;
      tg_tensor *in[N_IN], *fh, *fc, *ch, *cc;
      make_inputs(&c, in);
      cr_assert_eq(tg_lltm(in[0], in[1], in[2], in[3], in[4], &fh, &fc), TG_OK);
      cr_assert_eq(tg_lltm_composed(in[0], in[1], in[2], in[3], in[4], &ch, &cc), TG_OK);
      int64_t fused = tg_graph_saved_bytes(2, (const tg_tensor *const[]){fh, fc}, N_IN,
                                           (const tg_tensor *const *)in);
      int64_t composed = tg_graph_saved_bytes(2, (const tg_tensor *const[]){ch, cc}, N_IN,
                                              (const tg_tensor *const *)in);
      /* The fused op keeps only the gate activations, [B, 3S]. */
      cr_assert_eq(fused, 3 * c.batch * c.state * 4, "fused saves %lld bytes", (long long)fused);
      cr_assert_leq(10 * fused, 6 * composed, "fused %lld vs composed %lld bytes", (long long)fused,
                    (long long)composed);
      tg_scope_end(sc);
    }
  }
}

TG_TEST(lltm, saved_bytes_of_a_graph) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_ones(TG_SHAPE(4, 5), TG_OPTS(.requires_grad = true));
  cr_assert_eq(tg_graph_saved_bytes(1, (const tg_tensor *const[]){x}, 0, NULL), 0);
  tg_tensor *y = tg_tanh(x); /* saves its 80-byte output (or its input) */
  int64_t all = tg_graph_saved_bytes(1, (const tg_tensor *const[]){y}, 0, NULL);
  cr_assert_eq(all, 80);
  cr_assert_eq(
      tg_graph_saved_bytes(1, (const tg_tensor *const[]){y}, 2, (const tg_tensor *const[]){x, y}),
      0);
  cr_assert_eq(tg_graph_saved_bytes(-1, NULL, 0, NULL), -1);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_graph_saved_bytes");
  tg_scope_end(sc);
}

TG_TEST(lltm, modified_input_after_forward_is_an_error) {
  tg_scope sc = tg_scope_begin();
  lltm_case c = {2, 3, 4, TG_F64, false, {0}};
  tg_tensor *in[N_IN], *h, *cell;
  make_inputs(&c, in);
  tg_tensor *old_cell = tg_detach(in[IN_OLD_CELL]);
  cr_assert_eq(tg_lltm(in[0], in[1], in[2], in[3], old_cell, &h, &cell), TG_OK);
  cr_assert_eq(tg_add_scalar_(old_cell, 1.0), TG_OK);
  cr_assert_neq(tg_backward(tg_sum(h), NULL), TG_OK);
  tg_expect_error(TG_ERR_STATE, "lltm", "modified by an in-place operation");
  tg_scope_end(sc);
}

TG_TEST(lltm, backward_twice_with_retain_graph) {
  tg_scope sc = tg_scope_begin();
  lltm_case c = {2, 3, 4, TG_F64, false, {0}};
  tg_tensor *in[N_IN], *h, *cell;
  make_inputs(&c, in);
  cr_assert_eq(tg_lltm(in[0], in[1], in[2], in[3], in[4], &h, &cell), TG_OK);
  tg_tensor *loss = tg_add(tg_sum(h), tg_sum(cell));
  cr_assert_eq(tg_backward_ex(loss, NULL, (tg_backward_options){.retain_graph = true}), TG_OK);
  tg_tensor *first = tg_clone(tg_grad(in[IN_WEIGHTS]));
  cr_assert_eq(tg_backward(loss, NULL), TG_OK, "%s", tg_last_error_message());
  tg_assert_close(tg_grad(in[IN_WEIGHTS]), tg_mul_scalar(first, 2.0), 1e-14, 1e-14);
  cr_assert_neq(tg_backward(loss, NULL), TG_OK);
  tg_expect_error(TG_ERR_STATE, "second time");
  tg_scope_end(sc);
}

TG_TEST(lltm, no_grad_records_nothing) {
  tg_scope sc = tg_scope_begin();
  lltm_case c = {2, 3, 4, TG_F32, false, {0}};
  tg_tensor *in[N_IN], *h, *cell;
  make_inputs(&c, in);
  tg_no_grad_begin();
  cr_assert_eq(tg_lltm(in[0], in[1], in[2], in[3], in[4], &h, &cell), TG_OK);
  tg_no_grad_end();
  cr_assert(!tg_requires_grad(h) && !tg_requires_grad(cell));
  cr_assert_null(tg_grad_fn_name(h));
  tg_scope_end(sc);
}

TG_TEST(lltm, registered_by_name) {
  const tg_op_desc *op = tg_op_lookup("lltm");
  cr_assert_not_null(op);
  cr_assert_eq(op->n_inputs, 5);
  cr_assert_eq(op->n_outputs, 2);
  cr_assert(op->flags & TG_OP_ONCE_DIFFERENTIABLE);
  cr_assert_not_null(op->forward[TG_CPU]);
  cr_assert_not_null(op->forward[TG_CUDA]);
}

/* ---- bad inputs ---- */

typedef struct bad_call {
  const char *what;
  tg_status code;
  const char *needle;
} bad_call;

/* Calls both front ends with in and expects the error (named after each front end). */
static void expect_both_fail(tg_tensor *const in[N_IN], tg_status code, const char *needle) {
  lltm_fn fns[2] = {tg_lltm, tg_lltm_composed};
  const char *names[2] = {"tg_lltm:", "tg_lltm_composed:"};
  for (int k = 0; k < 2; k++) {
    tg_tensor *h = (tg_tensor *)1, *c = (tg_tensor *)1;
    cr_assert_eq(fns[k](in[0], in[1], in[2], in[3], in[4], &h, &c), code, "%s: %s", names[k],
                 tg_last_error_message());
    cr_assert(h == NULL && c == NULL);
    tg_expect_error(code, names[k], needle);
  }
}

TG_TEST(lltm, bad_inputs) {
  tg_scope sc = tg_scope_begin();
  const int64_t B = 3, I = 4, S = 5;
  tg_options o = {0};
  tg_tensor *good[N_IN] = {tg_zeros(TG_SHAPE(B, I), o), tg_zeros(TG_SHAPE(3 * S, S + I), o),
                           tg_zeros(TG_SHAPE(3 * S), o), tg_zeros(TG_SHAPE(B, S), o),
                           tg_zeros(TG_SHAPE(B, S), o)};
  struct {
    int arg;
    tg_tensor *value;
    tg_status code;
    const char *needle;
  } cases[] = {
      {IN_WEIGHTS, tg_zeros(TG_SHAPE(3 * S, S + I + 1), o), TG_ERR_SHAPE, "weights is [15, 10]"},
      {IN_WEIGHTS, tg_zeros(TG_SHAPE(3 * S + 1, S + I), o), TG_ERR_SHAPE,
       "[3*state, state+features] = [15, 9]"},
      {IN_WEIGHTS, tg_zeros(TG_SHAPE(3 * S * (S + I)), o), TG_ERR_SHAPE, "weights is [135]"},
      {IN_BIAS, tg_zeros(TG_SHAPE(3 * S - 1), o), TG_ERR_SHAPE,
       "bias is [14] but must be [3*state] = [15]"},
      {IN_BIAS, tg_zeros(TG_SHAPE(3, S), o), TG_ERR_SHAPE, "bias is [3, 5]"},
      {IN_OLD_H, tg_zeros(TG_SHAPE(B * S), o), TG_ERR_SHAPE,
       "old_h must be 2-D [batch, state], got [15]"},
      {IN_OLD_H, tg_zeros(TG_SHAPE(B + 1, S), o), TG_ERR_SHAPE,
       "old_h is [4, 5] but input is [3, 4]: batch sizes differ"},
      {IN_OLD_H, tg_zeros(TG_SHAPE(B, S + 1), o), TG_ERR_SHAPE,
       "old_cell is [3, 5] but old_h is [3, 6]"},
      {IN_OLD_CELL, tg_zeros(TG_SHAPE(B, S + 1), o), TG_ERR_SHAPE,
       "old_cell is [3, 6] but old_h is [3, 5]"},
      {IN_OLD_CELL, tg_zeros(TG_SHAPE(B + 1, S), o), TG_ERR_SHAPE, "old_cell is [4, 5]"},
      {IN_INPUT, tg_zeros(TG_SHAPE(B, I, 1), o), TG_ERR_SHAPE,
       "input must be 2-D [batch, features], got [3, 4, 1]"},
      {IN_INPUT, tg_zeros(TG_SHAPE(B + 1, I), o), TG_ERR_SHAPE,
       "old_h is [3, 5] but input is [4, 4]: batch sizes differ"},
      {IN_INPUT, tg_zeros(TG_SHAPE(B, I + 2), o), TG_ERR_SHAPE,
       "weights is [15, 9] but must be [3*state, state+features] = [15, 11]"},
      {IN_WEIGHTS, tg_zeros(TG_SHAPE(3 * S, S + I), TG_OPTS(.dtype = TG_F64)), TG_ERR_DTYPE,
       "weights is float64 but input is float32"},
      {IN_OLD_CELL, tg_zeros(TG_SHAPE(B, S), TG_OPTS(.dtype = TG_F64)), TG_ERR_DTYPE,
       "old_cell is float64 but input is float32"},
      {IN_BIAS, tg_zeros(TG_SHAPE(3 * S), TG_OPTS(.dtype = TG_I64)), TG_ERR_DTYPE,
       "bias is int64 but input is float32"},
      {IN_INPUT, NULL, TG_ERR_ARGUMENT, "input"},
      {IN_OLD_H, NULL, TG_ERR_ARGUMENT, "old_h"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    tg_tensor *in[N_IN];
    for (int i = 0; i < N_IN; i++) in[i] = good[i];
    in[cases[k].arg] = cases[k].value;
    expect_both_fail(in, cases[k].code, cases[k].needle);
  }
  /* Integer input: the dtype error names input. */
  tg_tensor *in[N_IN] = {tg_zeros(TG_SHAPE(B, I), TG_OPTS(.dtype = TG_I64)), good[1], good[2],
                         good[3], good[4]};
  expect_both_fail(in, TG_ERR_DTYPE, "input is int64; expected float32 or float64");
  /* Output pointers. */
  tg_tensor *h;
  cr_assert_eq(tg_lltm(good[0], good[1], good[2], good[3], good[4], &h, NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_lltm", "new_h and new_cell");
  cr_assert_eq(tg_lltm_composed(good[0], good[1], good[2], good[3], good[4], NULL, &h),
               TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_lltm_composed", "new_h and new_cell");
  tg_scope_end(sc);
}

TG_TEST(lltm, null_input_keeps_the_first_error) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *t = tg_zeros(TG_SHAPE(2, 2), TG_OPTS_DEFAULT), *h, *c;
  tg_tensor *bad = tg_narrow(t, 0, 1, 5); /* records an error, returns NULL */
  cr_assert_null(bad);
  tg_status first = tg_last_error();
  cr_assert_neq(first, TG_OK);
  cr_assert_eq(tg_lltm(bad, t, t, t, t, &h, &c), first);
  tg_expect_error(first, "tg_narrow");
  cr_assert_eq(tg_lltm_composed(t, t, t, t, NULL, &h, &c), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_lltm_composed: old_cell is NULL");
  tg_scope_end(sc);
}

TG_TEST(lltm, device_mismatch) {
  if (!tg_cuda_is_available()) cr_skip_test("no CUDA device: a mismatch cannot be built");
  tg_scope sc = tg_scope_begin();
  const int64_t B = 2, I = 3, S = 4;
  tg_options o = {0}, g = {.device = TG_DEVICE_CUDA(0)};
  tg_tensor *in[N_IN] = {tg_zeros(TG_SHAPE(B, I), o), tg_zeros(TG_SHAPE(3 * S, S + I), g),
                         tg_zeros(TG_SHAPE(3 * S), o), tg_zeros(TG_SHAPE(B, S), o),
                         tg_zeros(TG_SHAPE(B, S), o)};
  expect_both_fail(in, TG_ERR_DEVICE, "weights is on cuda:0 but input is on cpu:0");
  tg_scope_end(sc);
}

TG_TEST(lltm, cuda_request_without_a_device_is_an_error) {
  if (tg_cuda_is_available()) cr_skip_test("a CUDA device is present");
  tg_tensor *t = tg_zeros(TG_SHAPE(2, 2), TG_OPTS(.device = TG_DEVICE_CUDA(0)));
  cr_assert_null(t);
  cr_assert_eq(tg_last_error(), TG_ERR_DEVICE);
  tg_clear_error();
}
