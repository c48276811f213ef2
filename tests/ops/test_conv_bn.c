/* conv2d_batch_norm, the fused Conv2d + BatchNorm2d (tg/conv_bn.h): forward, gradients and
 * running statistics against the same computation composed of tg ops (tg_conv2d, then the
 * normalization from sums), in both formulas and several geometries; the reference's formula
 * pinned by hand; eval mode; its OpInfo checks (gradcheck in F64, double backward refused);
 * the bytes its graph keeps against the composed graph's; errors; an allocation-failure
 * sweep. The CPU-vs-CUDA agreement is tests/cuda/test_cuda_conv_bn.c. */
#include <math.h>

#include "testutil.h"
#include "tg/conv_bn.h"
#include "tg/norm.h"

#include "alloc_sweep.h"

typedef struct geometry_case {
  int64_t n, c_in, c_out, h, w, k;
  tg_conv2d_opts conv;
  tg_conv_bn_formula formula;
  bool affine;
} geometry_case;

static tg_tensor *leaf(int ndim, const int64_t *sizes, tg_dtype dt, tg_generator *gen,
                       double offset) {
  tg_tensor *t = tg_add_scalar(tg_randn(ndim, sizes, (tg_options){.dtype = dt}, gen), offset);
  cr_assert_not_null(t, "%s", tg_last_error_message());
  cr_assert_eq(tg_set_requires_grad(t, true), TG_OK);
  return t;
}

static tg_tensor *twin(const tg_tensor *t) {
  tg_tensor *d = tg_detach(t);
  cr_assert_eq(tg_set_requires_grad(d, true), TG_OK);
  return d;
}

/* One geometry, one dtype: fused and composed agree in output, gradients and running stats. */
static void check_against_composed(const geometry_case *k, tg_dtype dt, tg_generator *gen) {
  const double tol = dt == TG_F64 ? 1e-10 : 2e-4;
  tg_scope sc = tg_scope_begin();
  const tg_options o = {.dtype = dt};
  tg_tensor *x = leaf(TG_SHAPE(k->n, k->c_in, k->h, k->w), dt, gen, 0.5);
  tg_tensor *w = leaf(
      TG_SHAPE(k->c_out, k->c_in / (k->conv.groups ? k->conv.groups : 1), k->k, k->k), dt, gen, 0);
  tg_tensor *gamma = k->affine ? leaf(TG_SHAPE(k->c_out), dt, gen, 1.0) : NULL;
  tg_tensor *beta = k->affine ? leaf(TG_SHAPE(k->c_out), dt, gen, 0) : NULL;
  tg_tensor *x2 = twin(x), *w2 = twin(w), *gamma2 = gamma ? twin(gamma) : NULL,
            *beta2 = beta ? twin(beta) : NULL;
  tg_tensor *rm = tg_randn(TG_SHAPE(k->c_out), o, gen), *rv = tg_rand(TG_SHAPE(k->c_out), o, gen);
  tg_tensor *rm2 = tg_clone(rm), *rv2 = tg_clone(rv);
  const tg_conv_bn_options opts = {.training = true, .formula = k->formula};
  tg_tensor *y = tg_conv2d_batch_norm(x, w, gamma, beta, rm, rv, &k->conv, opts);
  cr_assert_not_null(y, "%s", tg_last_error_message());
  tg_tensor *y2 = tg_conv2d_batch_norm_composed(x2, w2, gamma2, beta2, rm2, rv2, &k->conv, opts);
  cr_assert_not_null(y2, "%s", tg_last_error_message());
  tg_assert_close(y, y2, tol, tol);
  tg_assert_close(rm, rm2, tol, tol);
  tg_assert_close(rv, rv2, tol, tol);
  tg_tensor *g = tg_randn(tg_ndim(y), tg_sizes(y), o, gen);
  cr_assert_eq(tg_backward(y, g), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(tg_backward(y2, g), TG_OK, "%s", tg_last_error_message());
  tg_assert_close(tg_grad(x), tg_grad(x2), tol, tol);
  tg_assert_close(tg_grad(w), tg_grad(w2), tol * 10, tol * 10); /* sums over the batch */
  if (gamma) {
    tg_assert_close(tg_grad(gamma), tg_grad(gamma2), tol * 10, tol * 10);
    tg_assert_close(tg_grad(beta), tg_grad(beta2), tol * 10, tol * 10);
  }
  tg_scope_end(sc);
}

static const geometry_case cases[] = {
    /* the reference's gradcheck sizes: X (2, 3, 4, 4), W (5, 3, 3, 3), no affine */
    {2, 3, 5, 4, 4, 3, {.groups = 1}, TG_CONV_BN_REFERENCE, false},
    {2, 3, 4, 5, 5, 3, {.padding = {1, 1}}, TG_CONV_BN_PYTORCH, true},
    {3,
     2,
     3,
     7,
     6,
     2,
     {.stride = {2, 1}, .padding = {1, 0}, .dilation = {2, 1}},
     TG_CONV_BN_PYTORCH,
     true},
    {2, 4, 6, 4, 4, 3, {.padding = {1, 1}, .groups = 2}, TG_CONV_BN_PYTORCH, false},
    {2, 3, 4, 5, 5, 3, {.padding_mode = TG_CONV_PADDING_SAME}, TG_CONV_BN_REFERENCE, true},
};

TG_TEST(conv_bn, agrees_with_the_composed_ops) {
  tg_generator *gen = tg_generator_new(24);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    check_against_composed(&cases[i], TG_F64, gen);
    check_against_composed(&cases[i], TG_F32, gen);
  }
  tg_generator_free(gen);
}

/* The PyTorch formula equals tg_conv2d followed by tg_batch_norm (tg/norm.h), the composition a
 * user writes: output, gradients and running statistics. */
TG_TEST(conv_bn, agrees_with_conv2d_then_batch_norm) {
  tg_generator *gen = tg_generator_new(25);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const geometry_case *k = &cases[i];
    if (k->formula != TG_CONV_BN_PYTORCH) continue;
    for (int d = 0; d < 2; d++) {
      const tg_dtype dt = d ? TG_F32 : TG_F64;
      const double tol = dt == TG_F64 ? 1e-10 : 2e-4;
      tg_scope sc = tg_scope_begin();
      const tg_options o = {.dtype = dt};
      tg_tensor *x = leaf(TG_SHAPE(k->n, k->c_in, k->h, k->w), dt, gen, 0.5);
      tg_tensor *w =
          leaf(TG_SHAPE(k->c_out, k->c_in / (k->conv.groups ? k->conv.groups : 1), k->k, k->k), dt,
               gen, 0);
      tg_tensor *gamma = leaf(TG_SHAPE(k->c_out), dt, gen, 1.0);
      tg_tensor *beta = leaf(TG_SHAPE(k->c_out), dt, gen, 0);
      tg_tensor *x2 = twin(x), *w2 = twin(w), *gamma2 = twin(gamma), *beta2 = twin(beta);
      tg_tensor *rm = tg_randn(TG_SHAPE(k->c_out), o, gen),
                *rv = tg_rand(TG_SHAPE(k->c_out), o, gen);
      tg_tensor *rm2 = tg_clone(rm), *rv2 = tg_clone(rv);
      tg_tensor *y = tg_conv2d_batch_norm(x, w, gamma, beta, rm, rv, &k->conv,
                                          (tg_conv_bn_options){.training = true});
      cr_assert_not_null(y, "%s", tg_last_error_message());
      tg_tensor *y2 = tg_batch_norm(tg_conv2d(x2, w2, NULL, &k->conv), rm2, rv2, gamma2, beta2,
                                    (tg_batch_norm_options){.training = true});
      cr_assert_not_null(y2, "%s", tg_last_error_message());
      tg_assert_close(y, y2, tol, tol);
      tg_assert_close(rm, rm2, tol, tol);
      tg_assert_close(rv, rv2, tol, tol);
      tg_tensor *g = tg_randn(tg_ndim(y), tg_sizes(y), o, gen);
      cr_assert_eq(tg_backward(y, g), TG_OK, "%s", tg_last_error_message());
      cr_assert_eq(tg_backward(y2, g), TG_OK, "%s", tg_last_error_message());
      tg_assert_close(tg_grad(x), tg_grad(x2), tol, tol);
      tg_assert_close(tg_grad(w), tg_grad(w2), tol * 10, tol * 10);
      tg_assert_close(tg_grad(gamma), tg_grad(gamma2), tol * 10, tol * 10);
      tg_assert_close(tg_grad(beta), tg_grad(beta2), tol * 10, tol * 10);
      tg_scope_end(sc);
    }
  }
  tg_generator_free(gen);
}

/* An empty batch in training: PyTorch's batch_norm gives an empty output and leaves the
 * running statistics alone; so do the fused op, the composed one and tg_batch_norm. */
TG_TEST(conv_bn, an_empty_batch_gives_an_empty_output) {
  tg_generator *gen = tg_generator_new(26);
  const tg_options o = {.dtype = TG_F64};
  const tg_conv2d_opts conv = {.padding = {1, 1}};
  tg_tensor *x = leaf(TG_SHAPE(0, 3, 5, 5), TG_F64, gen, 0);
  tg_tensor *w = leaf(TG_SHAPE(4, 3, 3, 3), TG_F64, gen, 0);
  tg_tensor *gamma = leaf(TG_SHAPE(4), TG_F64, gen, 1.0), *beta = leaf(TG_SHAPE(4), TG_F64, gen, 0);
  tg_tensor *rm = tg_randn(TG_SHAPE(4), o, gen), *rv = tg_rand(TG_SHAPE(4), o, gen);
  tg_tensor *rm0 = tg_clone(rm), *rv0 = tg_clone(rv);
  for (int which = 0; which < 3; which++) {
    tg_scope sc = tg_scope_begin();
    const tg_conv_bn_options opts = {.training = true};
    tg_tensor *y = which == 0 ? tg_conv2d_batch_norm(x, w, gamma, beta, rm, rv, &conv, opts)
                   : which == 1
                       ? tg_conv2d_batch_norm_composed(x, w, gamma, beta, rm, rv, &conv, opts)
                       : tg_batch_norm(tg_conv2d(x, w, NULL, &conv), rm, rv, gamma, beta,
                                       (tg_batch_norm_options){.training = true});
    cr_assert_not_null(y, "%d: %s", which, tg_last_error_message());
    tg_assert_sizes(y, 0, 4, 5, 5);
    tg_assert_close(rm, rm0, 0, 0);
    tg_assert_close(rv, rv0, 0, 0);
    cr_assert_eq(tg_backward(tg_sum(y), NULL), TG_OK, "%d: %s", which, tg_last_error_message());
    cr_assert_not_null(tg_grad(w));
    cr_assert_eq(tg_max_abs_diff(tg_grad(w), tg_zeros_like(w)), 0.0); /* no image: no gradient */
    tg_scope_end(sc);
  }
  tg_generator_free(gen);
}

TG_TEST(conv_bn, passes_its_opinfo_checks) {
  /* gradcheck in F64 of both formulas over the samples; double backward refused */
  tg_op_check_options opts = {.gradcheck = {.quiet = true}};
  cr_assert_eq(tg_op_check(tg_op_lookup("conv2d_batch_norm"), opts), TG_OK, "%s",
               tg_last_error_message());
}

TG_TEST(conv_bn, reference_formula_by_hand) {
  /* a 1 x 1 identity kernel, so y = x: out = (x - mean) / (sqrt(unbiased var) + 1e-3) */
  const double xs[6] = {1, 2, 4, -1, 0, 3}; /* [3, 1, 1, 2]: one channel, 6 values */
  tg_tensor *x = tg_from_data(TG_SHAPE(3, 1, 1, 2), xs, TG_OPTS(.dtype = TG_F64));
  tg_tensor *w = tg_ones(TG_SHAPE(1, 1, 1, 1), (tg_options){.dtype = TG_F64});
  double mean = 0, ss = 0, want[6];
  for (int i = 0; i < 6; i++) mean += xs[i] / 6;
  for (int i = 0; i < 6; i++) ss += (xs[i] - mean) * (xs[i] - mean);
  for (int i = 0; i < 6; i++) want[i] = (xs[i] - mean) / (sqrt(ss / 5) + 1e-3);
  tg_tensor *y =
      tg_conv2d_batch_norm(x, w, NULL, NULL, NULL, NULL, NULL,
                           (tg_conv_bn_options){.training = true, .formula = TG_CONV_BN_REFERENCE});
  cr_assert_not_null(y, "%s", tg_last_error_message());
  tg_test_expect_values(y, 6, want, 1e-14);
  /* PyTorch's: biased variance, eps 1e-5 inside the square root */
  for (int i = 0; i < 6; i++) want[i] = (xs[i] - mean) / sqrt(ss / 6 + 1e-5);
  y = tg_conv2d_batch_norm(x, w, NULL, NULL, NULL, NULL, NULL,
                           (tg_conv_bn_options){.training = true});
  tg_test_expect_values(y, 6, want, 1e-14);
}

TG_TEST(conv_bn, running_statistics_and_eval) {
  const double xs[6] = {1, 2, 4, -1, 0, 3};
  tg_tensor *x = tg_from_data(TG_SHAPE(3, 1, 1, 2), xs, TG_OPTS(.dtype = TG_F64));
  tg_tensor *w = tg_full(TG_SHAPE(1, 1, 1, 1), 2.0, (tg_options){.dtype = TG_F64});
  tg_tensor *rm = tg_full(TG_SHAPE(1), 1.0, (tg_options){.dtype = TG_F64});
  tg_tensor *rv = tg_full(TG_SHAPE(1), 3.0, (tg_options){.dtype = TG_F64});
  double mean = 0, ss = 0;
  for (int i = 0; i < 6; i++) mean += 2 * xs[i] / 6;
  for (int i = 0; i < 6; i++) ss += (2 * xs[i] - mean) * (2 * xs[i] - mean);
  cr_assert_not_null(tg_conv2d_batch_norm(x, w, NULL, NULL, rm, rv, NULL,
                                          (tg_conv_bn_options){.training = true, .momentum = 0.25}),
                     "%s", tg_last_error_message());
  const double want_rm = 0.75 * 1 + 0.25 * mean, want_rv = 0.75 * 3 + 0.25 * ss / 5;
  tg_test_expect_values(rm, 1, &want_rm, 1e-15);
  tg_test_expect_values(rv, 1, &want_rv, 1e-15);
  /* momentum -0.0: zero, the statistics stay */
  cr_assert_not_null(tg_conv2d_batch_norm(
      x, w, NULL, NULL, rm, rv, NULL, (tg_conv_bn_options){.training = true, .momentum = -0.0}));
  tg_test_expect_values(rm, 1, &want_rm, 1e-15);
  /* eval: (conv - running_mean) / sqrt(running_var + eps) * weight + bias, no update */
  tg_tensor *gamma = tg_full(TG_SHAPE(1), 0.5, (tg_options){.dtype = TG_F64});
  tg_tensor *beta = tg_full(TG_SHAPE(1), -1.0, (tg_options){.dtype = TG_F64});
  tg_tensor *y = tg_conv2d_batch_norm(x, w, gamma, beta, rm, rv, NULL, (tg_conv_bn_options){0});
  cr_assert_not_null(y, "%s", tg_last_error_message());
  double want[6];
  for (int i = 0; i < 6; i++) want[i] = (2 * xs[i] - want_rm) / sqrt(want_rv + 1e-5) * 0.5 - 1;
  tg_test_expect_values(y, 6, want, 1e-14);
  tg_test_expect_values(rm, 1, &want_rm, 1e-15);
}

/* Bytes the graph keeps beyond its inputs, fused and composed, at one geometry (F32). */
static void saved_bytes_at(int64_t n, int64_t c_in, int64_t c_out, int64_t hw, int64_t k,
                           int64_t pad, tg_conv_bn_formula formula, bool affine) {
  tg_scope sc = tg_scope_begin();
  tg_generator *gen = tg_generator_new(7);
  tg_tensor *x = leaf(TG_SHAPE(n, c_in, hw, hw), TG_F32, gen, 0);
  tg_tensor *w = leaf(TG_SHAPE(c_out, c_in, k, k), TG_F32, gen, 0);
  tg_tensor *gamma = affine ? leaf(TG_SHAPE(c_out), TG_F32, gen, 1) : NULL;
  tg_tensor *beta = affine ? leaf(TG_SHAPE(c_out), TG_F32, gen, 0) : NULL;
  tg_generator_free(gen);
  const tg_conv2d_opts conv = {.padding = {pad, pad}};
  const tg_conv_bn_options opts = {.training = true, .formula = formula};
  tg_tensor *fused = tg_conv2d_batch_norm(x, w, gamma, beta, NULL, NULL, &conv, opts);
  tg_tensor *composed = tg_conv2d_batch_norm_composed(x, w, gamma, beta, NULL, NULL, &conv, opts);
  cr_assert(fused && composed, "%s", tg_last_error_message());
  const tg_tensor *inputs[4] = {x, w, gamma, beta};
  const int n_inputs = affine ? 4 : 2;
  const int64_t fused_bytes =
                    tg_graph_saved_bytes(1, (const tg_tensor *const[]){fused}, n_inputs, inputs),
                composed_bytes =
                    tg_graph_saved_bytes(1, (const tg_tensor *const[]){composed}, n_inputs, inputs);
  const int64_t out_bytes = tg_numel(fused) * 4;
  cr_log_info("saved beyond the inputs at [%lld, %lld, %lld, %lld] -> %lld channels: fused %lld "
              "bytes, composed %lld (the conv output is %lld)",
              (long long)n, (long long)c_in, (long long)hw, (long long)hw, (long long)c_out,
              (long long)fused_bytes, (long long)composed_bytes, (long long)out_bytes);
  cr_assert_gt(composed_bytes, out_bytes - 1, "the composed graph keeps the conv output");
  cr_assert_leq(2 * fused_bytes, composed_bytes, "fused %lld bytes, composed %lld",
                (long long)fused_bytes, (long long)composed_bytes);
  /* the fused graph keeps only per-channel vectors besides its inputs */
  cr_assert_leq(fused_bytes, 4 * 4 * c_out, "fused keeps %lld bytes", (long long)fused_bytes);
  tg_scope_end(sc);
}

TG_TEST(conv_bn, keeps_at_most_half_the_composed_bytes) {
  saved_bytes_at(2, 3, 5, 4, 3, 0, TG_CONV_BN_REFERENCE, false);  /* the reference's sizes */
  saved_bytes_at(64, 32, 64, 32, 3, 1, TG_CONV_BN_PYTORCH, true); /* the realistic one */
}

TG_TEST(conv_bn, errors) {
  tg_tensor *x = tg_zeros(TG_SHAPE(2, 3, 4, 4), (tg_options){.dtype = TG_F32});
  tg_tensor *w = tg_zeros(TG_SHAPE(5, 3, 3, 3), (tg_options){.dtype = TG_F32});
  tg_tensor *v5 = tg_zeros(TG_SHAPE(5), (tg_options){.dtype = TG_F32});
  tg_tensor *v4 = tg_zeros(TG_SHAPE(4), (tg_options){.dtype = TG_F32});
  const tg_conv_bn_options train = {.training = true};
  cr_assert_null(tg_conv2d_batch_norm(NULL, w, NULL, NULL, NULL, NULL, NULL, train));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_conv2d_batch_norm", "x is NULL");
  cr_assert_null(tg_conv2d_batch_norm(x, tg_zeros(TG_SHAPE(5, 2, 3, 3), (tg_options){0}), NULL,
                                      NULL, NULL, NULL, NULL, train));
  tg_expect_error(TG_ERR_SHAPE, "tg_conv2d_batch_norm", "[2, 3, 4, 4]", "[5, 2, 3, 3]");
  cr_assert_null(tg_conv2d_batch_norm(tg_zeros(TG_SHAPE(3, 4, 4), (tg_options){0}), w, NULL, NULL,
                                      NULL, NULL, NULL, train));
  tg_expect_error(TG_ERR_SHAPE, "tg_conv2d_batch_norm", "4-D", "[3, 4, 4]");
  cr_assert_null(tg_conv2d_batch_norm(x, w, v4, NULL, NULL, NULL, NULL, train));
  tg_expect_error(TG_ERR_SHAPE, "tg_conv2d_batch_norm", "weight is [4]", "must be [5]");
  cr_assert_null(tg_conv2d_batch_norm(x, w, NULL, v4, NULL, NULL, NULL, train));
  tg_expect_error(TG_ERR_SHAPE, "bias is [4]");
  cr_assert_null(tg_conv2d_batch_norm(x, w, NULL, NULL, v5, NULL, NULL, train));
  tg_expect_error(TG_ERR_ARGUMENT, "running_mean and running_var", "running_var is NULL");
  cr_assert_null(tg_conv2d_batch_norm(x, w, NULL, NULL, v4, v4, NULL, train));
  tg_expect_error(TG_ERR_SHAPE, "running_mean is [4]");
  cr_assert_null(tg_conv2d_batch_norm(x, w, tg_zeros(TG_SHAPE(5), (tg_options){.dtype = TG_F64}),
                                      NULL, NULL, NULL, NULL, train));
  tg_expect_error(TG_ERR_DTYPE, "weight");
  cr_assert_null(tg_conv2d_batch_norm(x, w, NULL, NULL, NULL, NULL, NULL,
                                      (tg_conv_bn_options){.training = true, .eps = -1}));
  tg_expect_error(TG_ERR_ARGUMENT, "eps = -1");
  cr_assert_null(tg_conv2d_batch_norm(x, w, NULL, NULL, NULL, NULL, NULL,
                                      (tg_conv_bn_options){.training = true, .momentum = NAN}));
  tg_expect_error(TG_ERR_ARGUMENT, "momentum = nan");
  cr_assert_null(tg_conv2d_batch_norm(x, w, NULL, NULL, NULL, NULL, NULL,
                                      (tg_conv_bn_options){.training = true, .formula = 7}));
  tg_expect_error(TG_ERR_ARGUMENT, "formula 7");
  cr_assert_null(tg_conv2d_batch_norm(x, w, NULL, NULL, NULL, NULL,
                                      &(tg_conv2d_opts){.stride = {-1, 1}}, train));
  tg_expect_error(TG_ERR_ARGUMENT, "stride = -1");
  cr_assert_null(tg_conv2d_batch_norm(x, w, NULL, NULL, NULL, NULL,
                                      &(tg_conv2d_opts){.fill = TG_CONV_FILL_REFLECT}, train));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_conv2d_batch_norm", "fill \"reflect\" is not supported");
  /* eval needs running statistics; the reference formula has none */
  cr_assert_null(tg_conv2d_batch_norm(x, w, NULL, NULL, NULL, NULL, NULL, (tg_conv_bn_options){0}));
  tg_expect_error(TG_ERR_ARGUMENT, "eval mode needs running_mean");
  cr_assert_null(tg_conv2d_batch_norm(x, w, NULL, NULL, v5, v5, NULL,
                                      (tg_conv_bn_options){.formula = TG_CONV_BN_REFERENCE}));
  tg_expect_error(TG_ERR_ARGUMENT, "training-only");
  /* one value per channel: x [1, 3, 3, 3] with a 3 x 3 kernel */
  cr_assert_null(tg_conv2d_batch_norm(tg_zeros(TG_SHAPE(1, 3, 3, 3), (tg_options){0}), w, NULL,
                                      NULL, NULL, NULL, NULL, train));
  tg_expect_error(TG_ERR_SHAPE, "Expected more than 1 value per channel");
  cr_assert_null(
      tg_conv2d_batch_norm_composed(x, w, NULL, NULL, NULL, NULL, NULL, (tg_conv_bn_options){0}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_conv2d_batch_norm_composed", "training only");
  /* the op by name, with a bad scalar */
  tg_tensor *outs[3];
  cr_assert_neq(tg_apply_ex(tg_op_lookup("conv2d_batch_norm"), 4,
                            (const tg_tensor *const[]){x, w, v5, v5}, 1, (const double[]){1e-5}, 0,
                            NULL, 3, outs),
                TG_OK);
  tg_expect_error(TG_ERR_ARGUMENT, "conv2d_batch_norm", "2 scalars");
}

TG_TEST(conv_bn, double_backward_is_refused) {
  tg_generator *gen = tg_generator_new(5);
  tg_tensor *x = leaf(TG_SHAPE(2, 2, 3, 3), TG_F64, gen, 0);
  tg_tensor *w = leaf(TG_SHAPE(2, 2, 2, 2), TG_F64, gen, 0);
  tg_generator_free(gen);
  tg_tensor *y = tg_conv2d_batch_norm(x, w, NULL, NULL, NULL, NULL, NULL,
                                      (tg_conv_bn_options){.training = true});
  tg_tensor *gx = NULL;
  tg_status st = tg_autograd_grad(1, (const tg_tensor *const[]){tg_sum(tg_mul(y, y))}, NULL, 1,
                                  (const tg_tensor *const[]){x}, &gx,
                                  (tg_backward_options){.create_graph = true}, false);
  if (st == TG_OK) {
    st = tg_backward(tg_sum(gx), NULL);
    cr_assert_neq(st, TG_OK, "a double backward through a once-differentiable op must fail");
  }
  cr_assert_neq(tg_last_error(), TG_OK);
  cr_assert(strstr(tg_last_error_message(), "conv2d_batch_norm") != NULL, "%s",
            tg_last_error_message());
  tg_clear_error();
}

static tg_status fused_step(void *user, double *out, int *n_out) {
  (void)user;
  tg_tensor *x =
      tg_from_data(TG_SHAPE(2, 1, 2, 3), (const double[]){3, -1, 4, 1, -5, 9, 2, 6, -5, 3, 5, -8},
                   TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  tg_tensor *w =
      x ? tg_from_data(TG_SHAPE(2, 1, 2, 2), (const double[]){1, 2, -1, 0.5, 0, 1, 1, -2},
                       TG_OPTS(.dtype = TG_F64, .requires_grad = true))
        : NULL;
  tg_tensor *gamma = w ? tg_from_data(TG_SHAPE(2), (const double[]){1.5, -0.5},
                                      TG_OPTS(.dtype = TG_F64, .requires_grad = true))
                       : NULL;
  tg_tensor *rm = gamma ? tg_zeros(TG_SHAPE(2), (tg_options){.dtype = TG_F64}) : NULL;
  tg_tensor *rv = rm ? tg_ones(TG_SHAPE(2), (tg_options){.dtype = TG_F64}) : NULL;
  tg_tensor *y =
      rv ? tg_conv2d_batch_norm(x, w, gamma, NULL, rm, rv, &(tg_conv2d_opts){.padding = {1, 0}},
                                (tg_conv_bn_options){.training = true})
         : NULL;
  tg_status st = status_of(y);
  if (st == TG_OK) st = append(y, out, n_out);
  if (st == TG_OK) st = append(rm, out, n_out);
  if (st == TG_OK) st = append(rv, out, n_out);
  if (st == TG_OK) st = clean(tg_backward(tg_sum(tg_mul(tg_mul(y, y), y)), NULL));
  if (st == TG_OK) st = append(tg_grad(x), out, n_out);
  if (st == TG_OK) st = append(tg_grad(w), out, n_out);
  if (st == TG_OK) st = append(tg_grad(gamma), out, n_out);
  return st;
}

TG_TEST(conv_bn, allocation_failures) {
  sweep("conv2d_batch_norm forward, running statistics, backward", fused_step, NULL);
}
