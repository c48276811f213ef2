/* tg_gelu (erf and tanh forms) and tg_silu (issue 25, helper "pointwise"): values, first and
 * second derivatives against PyTorch 2.15 in F64, the edges (+-0, +-inf, NaN, subnormals,
 * empty), the F32 vectorised rows against F64, errors, and allocation failures. Gradcheck and
 * gradgradcheck over layouts: the OpInfo walk (tests/ops/test_opinfo.c). */
#include <math.h>

#include "testutil.h"

#include "alloc_sweep.h"

/* d sum(y) / d x, recorded when create_graph (for a second derivative). */
static tg_status grad_of(tg_tensor *y, tg_tensor *x, bool create_graph, tg_tensor **dx) {
  const tg_tensor *s = tg_sum(y);
  return s ? tg_autograd_grad(1, &s, NULL, 1, (const tg_tensor *const *)&x, dx,
                              (tg_backward_options){.create_graph = create_graph}, false)
           : tg_last_error();
}

static tg_tensor *gelu_erf(const tg_tensor *x) { return tg_gelu(x, TG_GELU_NONE); }
static tg_tensor *gelu_tanh(const tg_tensor *x) { return tg_gelu(x, TG_GELU_TANH); }

typedef struct activation_case {
  const char *name;
  tg_tensor *(*fn)(const tg_tensor *x);
  double y[6], d1[6], d2[6]; /* torch at xs below */
} activation_case;

static const double xs[6] = {-3.0, -0.5, 0.0, 0.7, 2.5, 1e-310};
/* torch.nn.functional.gelu / silu and two torch.autograd.grad calls, F64 */
static const activation_case cases[] = {
    {"gelu erf",
     gelu_erf,
     {-0.00404969409489031, -0.15426876936299344, 0.0, 0.5306254434438489, 2.4844758366855597,
      5e-311},
     {-0.01194564720418392, 0.13250487534383712, 0.5, 0.9766141011336599, 1.037611085908145, 0.5},
     {-0.031022938883566054, 0.6161143218375241, 0.7978845608028654, 0.47150343938380956,
      -0.07449527709766629, 0.7978845608028654}},
    {"gelu tanh",
     gelu_tanh,
     {-0.0036373920817729943, -0.15428599017485606, 0.0, 0.5305701347051167, 2.484915733910001,
      5e-311},
     {-0.011584166630969648, 0.13263009646535764, 0.5, 0.976357218656104, 1.037951576212666, 0.5},
     {-0.03176765888607492, 0.615506895115985, 0.7978845608028654, 0.4708629268446337,
      -0.07624539207361294, 0.7978845608028654}},
    {"silu",
     tg_silu,
     {-0.14227761953270035, -0.1887703343990727, 0.0, 0.46773144051771626, 2.3103545499468914,
      5e-311},
     {-0.08810410601516962, 0.2600388126973482, 0.5, 0.8233867834733425, 1.0994011113415267, 0.5},
     {-0.032321404521006174, 0.44122902697702865, 0.5, 0.3912205946779789, -0.008462156523368874,
      0.5}},
};

TG_TEST(gelu, values_and_two_derivatives_match_pytorch_in_f64) {
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    tg_tensor *x = tg_from_data(TG_SHAPE(6), xs, TG_OPTS(.dtype = TG_F64, .requires_grad = true));
    tg_tensor *y = cases[c].fn(x);
    cr_assert(y, "%s: %s", cases[c].name, tg_last_error_message());
    tg_tensor *d1 = NULL, *d2 = NULL;
    cr_assert_eq(grad_of(y, x, true, &d1), TG_OK, "%s", tg_last_error_message());
    cr_assert_eq(grad_of(d1, x, false, &d2), TG_OK, "%s", tg_last_error_message());
    cr_log_info("%s", cases[c].name);
    tg_test_expect_values(y, 6, cases[c].y, 4e-16);
    tg_test_expect_values(d1, 6, cases[c].d1, 4e-16);
    tg_test_expect_values(d2, 6, cases[c].d2, 1e-15);
  }
}

/* torch: gelu(-inf) and silu(-inf) are NaN (-inf * 0), +inf stays, NaN propagates, -0 keeps
 * its sign (PyTorch's scalar path; its F32 vector path gives +0 for the erf form). */
TG_TEST(gelu, edges_as_pytorch) {
  const double in[5] = {-0.0, INFINITY, -INFINITY, NAN, -100.0};
  const double want_gelu[5] = {-0.0, INFINITY, NAN, NAN, -0.0};
  const double want_silu[5] = {-0.0, INFINITY, NAN, NAN, -3.7200759760208356e-42};
  const tg_dtype dtypes[2] = {TG_F32, TG_F64};
  for (int d = 0; d < 2; d++) {
    tg_tensor *x = tg_to_dtype(tg_from_data(TG_SHAPE(5), in, TG_OPTS(.dtype = TG_F64)), dtypes[d]);
    tg_test_expect_ieee(gelu_erf(x), 5, want_gelu, 0);
    tg_test_expect_ieee(gelu_tanh(x), 5, want_gelu, 0);
    /* F32: e^100 overflows, so silu(-100) is -100/inf = -0 */
    const double silu_f32[5] = {-0.0, INFINITY, NAN, NAN, -0.0};
    tg_test_expect_ieee(tg_silu(x), 5, d == 0 ? silu_f32 : want_silu, 0);
  }
  tg_tensor *empty = tg_empty(TG_SHAPE(0, 3), TG_OPTS(.dtype = TG_F32));
  tg_assert_sizes(gelu_tanh(empty), 0, 3);
  tg_assert_sizes(tg_silu(empty), 0, 3);
}

/* The F32 rows (vectorised for the tanh form and silu, forward and backward) agree with F64
 * to a few float ulp, relative or of 1 (the erf form's 1 + erf cancels for x < 0, in
 * PyTorch's formula too); big enough for the thread pool and the vector loops. */
TG_TEST(gelu, f32_rows_agree_with_f64) {
  enum { N = 1 << 17 };
  tg_generator *gen = tg_generator_new(5);
  tg_tensor *x64 = tg_mul_scalar(tg_randn(TG_SHAPE(N), TG_OPTS(.dtype = TG_F64), gen), 3.0);
  tg_tensor *x32 = tg_to_dtype(x64, TG_F32);
  x64 = tg_to_dtype(x32, TG_F64); /* the same inputs */
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    tg_tensor *a = tg_detach(x32), *b = tg_detach(x64);
    tg_set_requires_grad(a, true);
    tg_set_requires_grad(b, true);
    tg_tensor *ya = cases[c].fn(a), *yb = cases[c].fn(b);
    cr_assert_eq(tg_backward(tg_sum(ya), NULL), TG_OK);
    cr_assert_eq(tg_backward(tg_sum(yb), NULL), TG_OK);
    cr_log_info("%s", cases[c].name);
    tg_assert_close(tg_to_dtype(ya, TG_F64), yb, 2e-6, 1e-6);
    tg_assert_close(tg_to_dtype(tg_grad(a), TG_F64), tg_grad(b), 2e-6, 1e-6);
  }
  tg_generator_free(gen);
}

TG_TEST(gelu, silu_in_place) {
  tg_tensor *x = tg_from_data(TG_SHAPE(3), (const double[]){-1, 0, 2}, TG_OPTS(.dtype = TG_F64));
  tg_tensor *want = tg_silu(x);
  cr_assert_eq(tg_silu_(x), TG_OK);
  tg_assert_close(x, want, 0, 0);
}

TG_TEST(gelu, refuses_bad_inputs_naming_them) {
  cr_assert_null(tg_gelu(NULL, TG_GELU_NONE));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_gelu", "x");
  tg_tensor *x = tg_zeros(TG_SHAPE(2), TG_OPTS(.dtype = TG_F32));
  cr_assert_null(tg_gelu(x, (tg_gelu_approximate)7));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_gelu", "approximate is 7", "TG_GELU_TANH");
  tg_tensor *i = tg_zeros(TG_SHAPE(2), TG_OPTS(.dtype = TG_I64));
  cr_assert_null(tg_gelu(i, TG_GELU_TANH));
  tg_expect_error(TG_ERR_DTYPE, "tg_gelu", "int64");
  cr_assert_null(tg_silu(i));
  tg_expect_error(TG_ERR_DTYPE, "tg_silu", "int64");
  cr_assert_null(tg_silu(NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_silu", "x");
}

/* which: 0 gelu erf, 1 gelu tanh, 2 silu; forward, backward and double backward. */
static tg_status step(void *user, double *out, int *n_out) {
  const int which = *(const int *)user;
  tg_tensor *x = tg_from_data(TG_SHAPE(2, 3), (const double[]){-1, 0.5, 2, 0.1, -0.3, 3},
                              TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  tg_tensor *y = !x ? NULL : which == 2 ? tg_silu(x) : tg_gelu(x, (tg_gelu_approximate)which);
  tg_tensor *d1 = NULL, *d2 = NULL;
  tg_status st = status_of(y);
  if (st == TG_OK) st = append(y, out, n_out);
  if (st == TG_OK) st = clean(grad_of(y, x, true, &d1));
  if (st == TG_OK) st = append(d1, out, n_out);
  if (st == TG_OK) st = clean(grad_of(d1, x, false, &d2));
  if (st == TG_OK) st = append(d2, out, n_out);
  return x ? st : status_of(x);
}

TG_TEST(gelu, allocation_failures) {
  const int which[3] = {0, 1, 2};
  sweep("gelu erf, two derivatives", step, (void *)&which[0]);
  sweep("gelu tanh, two derivatives", step, (void *)&which[1]);
  sweep("silu, two derivatives", step, (void *)&which[2]);
}
