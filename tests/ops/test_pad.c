/* pad (tg/pool.h), torch.nn.functional.pad: values against a reference written from the modes'
 * definitions (mirror without repeating the edge, clamp to the edge, a constant outside), with
 * negative pads that crop; the fill's sign and NaN; the OpInfo checks (gradcheck and
 * gradgradcheck in F64: the backward folds the padded parts back and is differentiable again);
 * PyTorch's limits as errors; an allocation-failure sweep. */
#include <math.h>

#include "testutil.h"

#include "alloc_sweep.h"

/* The input coordinate that output coordinate j of a dim (size in, left pad l) copies, or -1. */
static int64_t ref_source(tg_pad_mode mode, int64_t j, int64_t in, int64_t l) {
  int64_t c = j - l;
  if (mode == TG_PAD_CONSTANT) return c >= 0 && c < in ? c : -1;
  if (mode == TG_PAD_REPLICATE) return c < 0 ? 0 : c >= in ? in - 1 : c;
  while (c < 0 || c >= in) c = c < 0 ? -c : 2 * (in - 1) - c; /* reflect */
  return c;
}

/* out of x (host values, sizes) padded by pad[0..n): the element-by-element reference. */
static int64_t ref_pad(tg_pad_mode mode, double value, int ndim, const int64_t *sizes, int n,
                       const int64_t *pad, const double *x, double *out, int64_t *out_sizes) {
  int64_t total = 1;
  for (int d = 0; d < ndim; d++) {
    const int k = ndim - 1 - d; /* pairs count from the last dim */
    out_sizes[d] = sizes[d] + (2 * k < n ? pad[2 * k] + pad[2 * k + 1] : 0);
    total *= out_sizes[d];
  }
  for (int64_t e = 0; e < total; e++) {
    int64_t rest = e, src = 0, stride = 1;
    bool inside = true;
    for (int d = ndim - 1; d >= 0; d--) {
      const int k = ndim - 1 - d;
      const int64_t j = rest % out_sizes[d];
      rest /= out_sizes[d];
      const int64_t c = 2 * k < n ? ref_source(mode, j, sizes[d], pad[2 * k]) : j;
      inside = inside && c >= 0;
      src += c * stride;
      stride *= sizes[d];
    }
    out[e] = inside ? x[src] : value;
  }
  return total;
}

static double host[4096], want[4096];

TG_TEST(pad, matches_the_reference_in_every_mode) {
  const struct {
    tg_pad_mode mode;
    int ndim;
    int64_t sizes[4];
    int n;
    int64_t pad[8];
  } cases[] = {
      {TG_PAD_CONSTANT, 3, {2, 3, 4}, 2, {1, 2}},
      {TG_PAD_CONSTANT, 3, {2, 3, 4}, 4, {-1, 2, 0, -2}},
      {TG_PAD_CONSTANT, 4, {2, 1, 3, 4}, 8, {1, 0, 0, 1, 2, -1, 1, 1}},
      {TG_PAD_CONSTANT, 2, {3, 4}, 2, {-4, 0}},
      {TG_PAD_REFLECT, 2, {2, 5}, 2, {4, 3}},
      {TG_PAD_REFLECT, 3, {2, 2, 5}, 2, {-2, 1}},
      {TG_PAD_REFLECT, 3, {2, 3, 4}, 4, {3, 1, 2, 2}},
      {TG_PAD_REFLECT, 4, {1, 2, 3, 4}, 4, {0, 3, 1, -1}},
      {TG_PAD_REFLECT, 4, {2, 3, 3, 4}, 6, {1, 2, 2, 1, 1, 2}},
      {TG_PAD_REPLICATE, 2, {2, 3}, 2, {3, 4}},
      {TG_PAD_REPLICATE, 4, {2, 2, 3, 4}, 4, {2, -1, 3, 0}},
      {TG_PAD_REPLICATE, 4, {2, 2, 2, 3}, 6, {1, 1, 2, 0, 0, 3}},
  };
  tg_generator *gen = tg_generator_new(21);
  for (int d = 0; d < 2; d++)
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
      tg_scope sc = tg_scope_begin();
      tg_tensor *x = tg_randn(cases[c].ndim, cases[c].sizes, (tg_options){.dtype = TG_F64}, gen);
      cr_assert_eq(tg_to_host_array(x, host, sizeof host), TG_OK);
      x = tg_to_dtype(x, d ? TG_F64 : TG_F32);
      if (c % 2) /* strided: a transposed copy transposed back */
        x = tg_transpose(tg_contiguous(tg_transpose(x, 0, cases[c].ndim - 1)), 0,
                         cases[c].ndim - 1);
      if (!d) cr_assert_eq(tg_to_host_array(tg_to_dtype(x, TG_F64), host, sizeof host), TG_OK);
      int64_t out_sizes[4];
      const int64_t n = ref_pad(cases[c].mode, 0.5, cases[c].ndim, cases[c].sizes, cases[c].n,
                                cases[c].pad, host, want, out_sizes);
      tg_tensor *y = tg_pad(x, cases[c].n, cases[c].pad, (tg_pad_options){cases[c].mode, 0.5});
      cr_assert_not_null(y, "case %zu: %s", c, tg_last_error_message());
      cr_assert(tg_ndim(y) == cases[c].ndim, "case %zu", c);
      for (int k = 0; k < cases[c].ndim; k++)
        cr_assert_eq(tg_sizes(y)[k], out_sizes[k], "case %zu dim %d", c, k);
      tg_test_expect_values(y, n, want, 0);
      tg_scope_end(sc);
    }
  tg_generator_free(gen);
}

TG_TEST(pad, fill_keeps_sign_and_nan_and_crops_to_empty) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_zeros(TG_SHAPE(1, 2), (tg_options){.dtype = TG_F64});
  /* -0.0 and NaN fills, as torch's F.pad(value=-0.0) gives -0. at the padding */
  tg_tensor *y = tg_pad(x, 2, (const int64_t[]){1, 1}, (tg_pad_options){.value = -0.0});
  tg_test_expect_values(y, 4, (const double[]){0, 0, 0, 0}, 0);
  cr_assert(signbit(tg_test_at(y, 0)) && !signbit(tg_test_at(y, 1)) && signbit(tg_test_at(y, 3)));
  y = tg_pad(x, 2, (const int64_t[]){0, 1}, (tg_pad_options){.value = NAN});
  tg_test_expect_ieee(y, 3, (const double[]){0, 0, NAN}, 0);
  y = tg_pad(x, 2, (const int64_t[]){1, 0}, (tg_pad_options){.value = -INFINITY});
  tg_test_expect_ieee(y, 3, (const double[]){-INFINITY, 0, 0}, 0);
  /* cropped to nothing; an empty dim padded with the value; an empty list is a copy */
  tg_assert_sizes(tg_pad(x, 2, (const int64_t[]){-1, -1}, (tg_pad_options){0}), 1, 0);
  y = tg_pad(tg_zeros(TG_SHAPE(2, 0), (tg_options){.dtype = TG_F32}), 2, (const int64_t[]){1, 1},
             (tg_pad_options){.value = 7});
  tg_assert_sizes(y, 2, 2);
  tg_test_expect_values(y, 4, (const double[]){7, 7, 7, 7}, 0);
  tg_assert_sizes(tg_pad(x, 0, NULL, (tg_pad_options){0}), 1, 2);
  /* replicate with an empty batch */
  tg_tensor *e = tg_zeros(TG_SHAPE(0, 2, 3), (tg_options){.dtype = TG_F32, .requires_grad = true});
  y = tg_pad(e, 2, (const int64_t[]){2, 1}, (tg_pad_options){.mode = TG_PAD_REPLICATE});
  tg_assert_sizes(y, 0, 2, 6);
  cr_assert_eq(tg_backward(tg_sum(y), NULL), TG_OK, "%s", tg_last_error_message());
  tg_assert_sizes(tg_grad(e), 0, 2, 3);
  tg_scope_end(sc);
}

TG_TEST(pad, backward_folds_the_padding_back) {
  tg_scope sc = tg_scope_begin();
  /* reflect (2, 1) of [a b c d]: [c b a b c d c]; the gradient of ones counts the copies */
  tg_tensor *x = tg_zeros(TG_SHAPE(1, 4), TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  tg_tensor *y = tg_pad(x, 2, (const int64_t[]){2, 1}, (tg_pad_options){.mode = TG_PAD_REFLECT});
  cr_assert_eq(tg_backward(tg_sum(y), NULL), TG_OK, "%s", tg_last_error_message());
  tg_test_expect_values(tg_grad(x), 4, (const double[]){1, 2, 3, 1}, 0);
  /* replicate (3, -1): [a a a a b c]; constant (1, -2): [v a b] */
  tg_tensor *x2 = tg_zeros(TG_SHAPE(1, 4), TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  y = tg_pad(x2, 2, (const int64_t[]){3, -1}, (tg_pad_options){.mode = TG_PAD_REPLICATE});
  cr_assert_eq(tg_backward(tg_sum(y), NULL), TG_OK, "%s", tg_last_error_message());
  tg_test_expect_values(tg_grad(x2), 4, (const double[]){4, 1, 1, 0}, 0);
  tg_tensor *x3 = tg_zeros(TG_SHAPE(1, 4), TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  y = tg_pad(x3, 2, (const int64_t[]){1, -2}, (tg_pad_options){.value = 3});
  cr_assert_eq(tg_backward(tg_sum(y), NULL), TG_OK, "%s", tg_last_error_message());
  tg_test_expect_values(tg_grad(x3), 4, (const double[]){1, 1, 0, 0}, 0);
  tg_scope_end(sc);
}

TG_TEST(pad, passes_its_opinfo_checks) {
  const tg_op_desc *op = tg_op_lookup("pad");
  cr_assert_not_null(op);
  tg_op_check_options opts = {.gradcheck = {.quiet = true}};
  cr_assert_eq(tg_op_check(op, opts), TG_OK, "%s", tg_last_error_message());
}

TG_TEST(pad, refuses_bad_inputs_naming_them) {
  tg_scope sc = tg_scope_begin();
  const tg_options f32 = {.dtype = TG_F32};
  tg_tensor *x = tg_zeros(TG_SHAPE(1, 1, 5, 5), f32);
  const tg_pad_options reflect = {.mode = TG_PAD_REFLECT}, replicate = {.mode = TG_PAD_REPLICATE};
  cr_assert_null(tg_pad(x, 3, (const int64_t[]){1, 2, 3}, (tg_pad_options){0}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_pad", "has 3 numbers; it must be even");
  cr_assert_null(
      tg_pad(x, 10, (const int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, (tg_pad_options){0}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_pad", "has 10 numbers", "[1, 1, 5, 5]", "at most 8");
  cr_assert_null(tg_pad(x, 18, (const int64_t[18]){0}, (tg_pad_options){0}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_pad", "n_pad is 18");
  cr_assert_null(tg_pad(x, -2, NULL, (tg_pad_options){0}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_pad", "n_pad is -2");
  cr_assert_null(tg_pad(x, 2, NULL, (tg_pad_options){0}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_pad", "pad is NULL");
  cr_assert_null(tg_pad(x, 2, (const int64_t[]){1, 1}, (tg_pad_options){.mode = 7}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_pad", "mode 7");
  cr_assert_null(tg_pad(NULL, 2, (const int64_t[]){1, 1}, (tg_pad_options){0}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_pad", "x");
  cr_assert_null(tg_pad(x, 2, (const int64_t[]){-3, -3}, (tg_pad_options){0}));
  tg_expect_error(TG_ERR_SHAPE, "tg_pad", "pad (-3, -3) of dim 3", "size -1 negative");
  /* reflect: each pad below the dim's size */
  cr_assert_null(tg_pad(x, 4, (const int64_t[]){5, 0, 0, 0}, reflect));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_pad", "reflect pad (5, 0) of dim 3", "less than its size 5");
  cr_assert_null(tg_pad(x, 4, (const int64_t[]){0, 0, 1, 6}, reflect));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_pad", "reflect pad (1, 6) of dim 2");
  cr_assert_null(tg_pad(x, 4, (const int64_t[]){-3, -2, 0, 0}, reflect));
  tg_expect_error(TG_ERR_SHAPE, "tg_pad", "size 0 less than 1");
  /* reflect and replicate: 1 to 3 dims of an input with 1 or 2 more */
  cr_assert_null(tg_pad(x, 2, (const int64_t[]){1, 1}, reflect));
  tg_expect_error(TG_ERR_SHAPE, "tg_pad", "reflect padding of 1 dims (2 pads) takes a 2D or 3D x",
                  "[1, 1, 5, 5]");
  cr_assert_null(tg_pad(x, 8, (const int64_t[]){1, 1, 1, 1, 0, 0, 0, 0}, replicate));
  tg_expect_error(TG_ERR_SHAPE, "tg_pad", "replicate padding of 4 dims");
  cr_assert_null(tg_pad(tg_zeros(TG_SHAPE(4), f32), 2, (const int64_t[]){1, 1}, replicate));
  tg_expect_error(TG_ERR_SHAPE, "tg_pad", "takes a 2D or 3D x", "[4]");
  cr_assert_null(tg_pad(tg_zeros(TG_SHAPE(1, 0, 4), f32), 2, (const int64_t[]){1, 1}, reflect));
  tg_expect_error(TG_ERR_SHAPE, "tg_pad", "non-empty", "[1, 0, 4]");
  cr_assert_null(tg_pad(tg_zeros(TG_SHAPE(0, 4), f32), 2, (const int64_t[]){1, 1}, reflect));
  tg_expect_error(TG_ERR_SHAPE, "tg_pad", "[0, 4]");
  cr_assert_null(tg_pad(tg_zeros(TG_SHAPE(2, 3), (tg_options){.dtype = TG_I64}), 2,
                        (const int64_t[]){1, 1}, (tg_pad_options){0}));
  tg_expect_error(TG_ERR_DTYPE, "tg_pad", "x");
  cr_assert_null(tg_pad(x, 2, (const int64_t[]){(int64_t)1 << 50, 0}, (tg_pad_options){0}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_pad", "too large");
  /* through tg_apply: the mode scalar is checked */
  cr_assert_null(tg_apply1_ex(tg_op_lookup("pad"), 1, (const tg_tensor *const[]){x}, 2,
                              (const double[]){0, 1.5}, 2, (const int64_t[]){1, 1}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_pad", "mode 1.5");
  cr_assert_null(tg_apply1_ex(tg_op_lookup("pad"), 1, (const tg_tensor *const[]){x}, 1,
                              (const double[]){0}, 2, (const int64_t[]){1, 1}));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_pad", "2 scalar parameters");
  tg_scope_end(sc);
}

/* ---- allocation failures: forward, backward and double backward of each mode ---- */

static tg_status pad_step(void *user, double *out, int *n_out) {
  const tg_pad_mode mode = *(const tg_pad_mode *)user;
  tg_tensor *x = tg_from_data(TG_SHAPE(1, 2, 3), (const double[]){3, -1, 4, 1, -5, 9},
                              TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  tg_tensor *xt = x ? tg_transpose(tg_contiguous(tg_transpose(x, 1, 2)), 1, 2) : NULL;
  tg_tensor *y =
      xt ? tg_pad(xt, 4, (const int64_t[]){2, -1, 1, 1}, (tg_pad_options){mode, 1.5}) : NULL;
  tg_status st = status_of(y);
  if (st == TG_OK) st = append(y, out, n_out);
  tg_tensor *gx = NULL;
  if (st == TG_OK)
    st = clean(tg_autograd_grad(1, (const tg_tensor *const[]){tg_sum(tg_mul(y, y))}, NULL, 1,
                                (const tg_tensor *const[]){x}, &gx,
                                (tg_backward_options){.create_graph = true}, false));
  if (st == TG_OK) st = append(gx, out, n_out);
  if (st == TG_OK) st = clean(tg_backward(tg_sum(tg_mul(gx, gx)), NULL));
  if (st == TG_OK) st = append(tg_grad(x), out, n_out);
  return st;
}

TG_TEST(pad, allocation_failures) {
  tg_pad_mode mode = TG_PAD_CONSTANT;
  sweep("pad constant", pad_step, &mode);
  mode = TG_PAD_REFLECT;
  sweep("pad reflect", pad_step, &mode);
  mode = TG_PAD_REPLICATE;
  sweep("pad replicate", pad_step, &mode);
}
