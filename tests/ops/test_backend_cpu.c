/* The CPU backend's primitives, called directly (not through the generic ops), on
 * contiguous, transposed, sliced-with-offset, stepped and expanded (stride 0) operands,
 * against naive references that read and write storage through tensor_impl.h, so the
 * references never go through the backend under test. */
#include <math.h>
#include <stdlib.h>

#include "ops/backend.h"
#include "ops/philox.h"
#include "ops/pointwise_math.h"
#include "tensor/tensor_impl.h"
#include "testutil.h"

static const tg_backend *const be = &tg_cpu_backend;

/* cross-entropy's CPU kernels (TG_OP_KERNEL lines of src/ops/def/loss.def), called as the op
 * calls them: found by name. */
static tg_status row_kernel(const char *name, tg_tensor *out, const tg_tensor *a,
                            const tg_tensor *index) {
  tg_kernel_fn k = tg__kernel("test", name, TG_DEVICE_CPU);
  cr_assert(k, "%s", tg_last_error_message());
  return k(3, (tg_tensor *const[]){out, (tg_tensor *)a, (tg_tensor *)index});
}
static tg_status gather_rows(tg_tensor *out, const tg_tensor *x, const tg_tensor *index) {
  return row_kernel("cross_entropy.gather_rows", out, x, index);
}
static tg_status scatter_add_rows(tg_tensor *out, const tg_tensor *src, const tg_tensor *index) {
  return row_kernel("cross_entropy.scatter_add_rows", out, src, index);
}

/* ---- raw element access (independent of the backend) ---- */

/* Storage index of the element at a logical row-major position. */
static int64_t storage_index(const tg_tensor *t, int64_t flat) {
  int64_t idx = t->offset;
  for (int d = t->ndim - 1; d >= 0; d--) {
    idx += (flat % t->sizes[d]) * t->strides[d];
    flat /= t->sizes[d];
  }
  return idx;
}

static double get(const tg_tensor *t, int64_t flat) {
  const int64_t i = storage_index(t, flat);
  switch (t->dtype) {
  case TG_F32:
    return ((const float *)t->storage->data)[i];
  case TG_F64:
    return ((const double *)t->storage->data)[i];
  default:
    return (double)((const int64_t *)t->storage->data)[i];
  }
}

static void set(tg_tensor *t, int64_t flat, double v) {
  const int64_t i = storage_index(t, flat);
  switch (t->dtype) {
  case TG_F32:
    ((float *)t->storage->data)[i] = (float)v;
    break;
  case TG_F64:
    ((double *)t->storage->data)[i] = v;
    break;
  default:
    ((int64_t *)t->storage->data)[i] = (int64_t)v;
    break;
  }
}

static int64_t numel(const tg_tensor *t) { return tg__numel(t->ndim, t->sizes); }

/* A deterministic, irregular test value; `positive` keeps it in [0.25, 3.25). */
static double test_value(int64_t i, int salt, bool positive) {
  double v = 3.0 * sin(0.37 * (double)i + 1.3 * salt);
  return positive ? fabs(v) + 0.25 : v;
}

/* A fresh contiguous tensor (scope-owned) of test values. */
static tg_tensor *filled(int ndim, const int64_t *sizes, tg_dtype dtype, int salt, bool positive) {
  tg_tensor *t = tg_empty(ndim, sizes, TG_OPTS(.dtype = dtype));
  cr_assert(t, "%s", tg_last_error_message());
  for (int64_t i = 0; i < numel(t); i++) set(t, i, test_value(i, salt, positive));
  return t;
}

static tg_tensor *constant(int ndim, const int64_t *sizes, tg_dtype dtype, double v) {
  tg_tensor *t = tg_empty(ndim, sizes, TG_OPTS(.dtype = dtype));
  cr_assert(t, "%s", tg_last_error_message());
  for (int64_t i = 0; i < numel(t); i++) set(t, i, v);
  return t;
}

/* ---- operand layouts: all [rows, cols] views ---- */

typedef enum layout {
  L_CONTIGUOUS,
  L_TRANSPOSED, /* strides (1, rows) */
  L_SLICED,     /* narrowed out of a bigger matrix: offset and row stride > cols */
  L_STEPPED,    /* every other column: no unit stride */
  L_EXPAND_ROW, /* [1, cols] expanded: stride 0 on dim 0 */
  L_EXPAND_COL, /* [rows, 1] expanded: stride 0 on dim 1 */
  L_EXPAND_ALL, /* [1, 1] expanded: a broadcast scalar */
  L_NUM
} layout;

static const char *const layout_names[L_NUM] = {"contiguous", "transposed", "sliced",    "stepped",
                                                "expand_row", "expand_col", "expand_all"};

static tg_tensor *make_view(layout l, int64_t rows, int64_t cols, tg_dtype dtype, int salt,
                            bool positive) {
  tg_tensor *v = NULL;
  switch (l) {
  case L_CONTIGUOUS:
    v = filled(TG_SHAPE(rows, cols), dtype, salt, positive);
    break;
  case L_TRANSPOSED:
    v = tg_t(filled(TG_SHAPE(cols, rows), dtype, salt, positive));
    break;
  case L_SLICED:
    v = tg_narrow(
        tg_narrow(filled(TG_SHAPE(rows + 3, cols + 4), dtype, salt, positive), 0, 2, rows), 1, 3,
        cols);
    break;
  case L_STEPPED:
    v = tg_slice(filled(TG_SHAPE(rows, 2 * cols + 1), dtype, salt, positive), 1, 1, 2 * cols + 1,
                 2);
    break;
  case L_EXPAND_ROW:
    v = tg_expand(filled(TG_SHAPE(1, cols), dtype, salt, positive), TG_SHAPE(rows, cols));
    break;
  case L_EXPAND_COL:
    v = tg_expand(filled(TG_SHAPE(rows, 1), dtype, salt, positive), TG_SHAPE(rows, cols));
    break;
  default:
    v = tg_expand(filled(TG_SHAPE(1, 1), dtype, salt, positive), TG_SHAPE(rows, cols));
    break;
  }
  cr_assert(v, "make_view(%s): %s", layout_names[l], tg_last_error_message());
  cr_assert_eq(tg_size(v, 0), rows);
  cr_assert_eq(tg_size(v, 1), cols);
  return v;
}

/* An output [rows, cols]: contiguous, or transposed (column-major). */
static tg_tensor *make_out(bool transposed, int64_t rows, int64_t cols, tg_dtype dtype) {
  tg_tensor *o = transposed ? tg_t(constant(TG_SHAPE(cols, rows), dtype, -7))
                            : constant(TG_SHAPE(rows, cols), dtype, -7);
  cr_assert(o);
  return o;
}

static bool close_enough(double got, double want, double rtol, double atol) {
  if (isnan(want)) return isnan(got);
  if (isinf(want)) return got == want;
  return fabs(got - want) <= atol + rtol * fabs(want);
}

/* Tolerances of a result computed in dtype against a double reference. */
static double rtol_of(tg_dtype dtype) { return dtype == TG_F32 ? 3e-6 : 1e-13; }
static double atol_of(tg_dtype dtype) { return dtype == TG_F32 ? 1e-6 : 1e-13; }

static const tg_dtype floating[] = {TG_F32, TG_F64};

/* ---- unary ---- */

/* Every kind of src/ops/def/unary.def, so that a new kind is swept (and fails until
 * ref_unary knows it). */
static const char *const unary_names[TG_NUM_UNARY] = {
#define TG_UNARY_KIND(KIND, name, cost) [TG_UNARY_##KIND] = #name,
#include "ops/def/unary.def"
};

static bool unary_needs_positive(tg_unary_kind k) {
  return k == TG_UNARY_LOG || k == TG_UNARY_SQRT || k == TG_UNARY_POW || k == TG_UNARY_RECIPROCAL;
}

/* Scalars per kind: elu alpha, pow exponent, affine a*x+b, x*a, x/a. */
static void unary_scalars(tg_unary_kind k, double *a, double *b) {
  *a = k == TG_UNARY_ELU ? 0.7 : k == TG_UNARY_POW ? 2.5 : k == TG_UNARY_AFFINE ? 1.5 : 0;
  if (k == TG_UNARY_MUL_SCALAR || k == TG_UNARY_DIV_SCALAR) *a = -1.25;
  *b = k == TG_UNARY_AFFINE ? -0.25 : 0;
  if (k == TG_UNARY_CLAMP || k == TG_UNARY_CLAMP_SLOPE) *a = -0.5, *b = 0.75; /* the bounds */
}

static double ref_unary(tg_unary_kind k, double x, double a, double b) {
  switch (k) {
  case TG_UNARY_NEG:
    return -x;
  case TG_UNARY_EXP:
    return exp(x);
  case TG_UNARY_LOG:
    return log(x);
  case TG_UNARY_SQRT:
    return sqrt(x);
  case TG_UNARY_SIGMOID:
    return 1.0 / (1.0 + exp(-x));
  case TG_UNARY_TANH:
    return tanh(x);
  case TG_UNARY_RELU:
    return x > 0 ? x : 0;
  case TG_UNARY_ELU:
    return x > 0 ? x : a * (exp(x) - 1);
  case TG_UNARY_POW:
    return pow(x, a);
  case TG_UNARY_AFFINE:
    return a * x + b;
  case TG_UNARY_RECIPROCAL:
    return 1.0 / x;
  case TG_UNARY_STEP:
    return x > 0 ? 1 : 0;
  case TG_UNARY_ABS:
    return fabs(x);
  case TG_UNARY_SOFTPLUS: /* torch.nn.functional.softplus, beta 1, threshold 20 */
    return x > 20 ? x : log1p(exp(x));
  case TG_UNARY_MUL_SCALAR:
    return x * a;
  case TG_UNARY_DIV_SCALAR:
    return x / a;
  case TG_UNARY_GELU: /* issue 25, helper "pointwise": torch.nn.functional.gelu */
    return 0.5 * x * (1 + erf(x / sqrt(2.0)));
  case TG_UNARY_GELU_TANH:
    return 0.5 * x * (1 + tanh(sqrt(2 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
  case TG_UNARY_SILU:
    return x / (1 + exp(-x));
  case TG_UNARY_CLAMP:
    return fmin(fmax(x, a), b);
  case TG_UNARY_CLAMP_SLOPE:
    return x > a && x < b ? 1 : 0;
  default:
    return NAN;
  }
}

/* Runs one unary kind and checks every element against the reference. */
static void check_unary(tg_unary_kind k, tg_tensor *out, const tg_tensor *x, const char *what) {
  double a, b;
  unary_scalars(k, &a, &b);
  const int64_t n = numel(x);
  double *want = malloc(sizeof(double) * (size_t)n);
  for (int64_t i = 0; i < n; i++) want[i] = ref_unary(k, get(x, i), a, b); /* before in-place */
  cr_assert_eq(be->unary(k, a, b, out, x), TG_OK, "%s: %s", what, tg_last_error_message());
  for (int64_t i = 0; i < n; i++)
    cr_assert(close_enough(get(out, i), want[i], rtol_of(out->dtype), atol_of(out->dtype)),
              "%s %s [%s] element %lld: got %.17g want %.17g", unary_names[k], what,
              tg_dtype_name(out->dtype), (long long)i, get(out, i), want[i]);
  free(want);
}

TG_TEST(backend_cpu, unary_every_kind_on_every_layout) {
  for (int di = 0; di < 2; di++) {
    for (int k = 0; k < TG_NUM_UNARY; k++) {
      for (int l = 0; l < L_NUM; l++) {
        for (int ot = 0; ot < 2; ot++) {
          tg_scope sc = tg_scope_begin();
          tg_tensor *x = make_view((layout)l, 5, 7, floating[di], k, unary_needs_positive(k));
          tg_tensor *out = make_out(ot, 5, 7, floating[di]);
          char what[64];
          snprintf(what, sizeof what, "%s -> %s out", layout_names[l],
                   ot ? "transposed" : "contiguous");
          check_unary((tg_unary_kind)k, out, x, what);
          tg_scope_end(sc);
        }
      }
    }
  }
}

TG_TEST(backend_cpu, unary_in_place) {
  tg_scope sc = tg_scope_begin();
  for (int di = 0; di < 2; di++) {
    tg_tensor *x = make_view(L_TRANSPOSED, 6, 9, floating[di], 3, false);
    check_unary(TG_UNARY_SIGMOID, x, x, "in place transposed");
    tg_tensor *y = make_view(L_SLICED, 6, 9, floating[di], 4, false);
    check_unary(TG_UNARY_AFFINE, y, y, "in place sliced");
  }
  tg_scope_end(sc);
}

/* Big enough for the OpenMP path; transposed input, 3-D and permuted 4-D for coalescing. */
TG_TEST(backend_cpu, unary_large_and_high_rank) {
  tg_scope sc = tg_scope_begin();
  for (int di = 0; di < 2; di++) {
    tg_tensor *x = make_view(L_TRANSPOSED, 300, 211, floating[di], 1, false);
    check_unary(TG_UNARY_TANH, make_out(false, 300, 211, floating[di]), x, "large");
    check_unary(TG_UNARY_AFFINE, make_out(true, 300, 211, floating[di]), x, "large");
    tg_tensor *base = filled(TG_SHAPE(2, 3, 4, 5), floating[di], 2, false);
    const int perm[4] = {2, 0, 3, 1};
    tg_tensor *p = tg_permute(base, 4, perm);
    tg_tensor *out4 = tg_empty(4, p->sizes, TG_OPTS(.dtype = floating[di]));
    check_unary(TG_UNARY_EXP, out4, p, "permuted 4-D");
    tg_tensor *big =
        tg_expand(filled(TG_SHAPE(1, 64, 1), floating[di], 5, false), TG_SHAPE(40, 64, 30));
    tg_tensor *out3 = tg_empty(TG_SHAPE(40, 64, 30), TG_OPTS(.dtype = floating[di]));
    check_unary(TG_UNARY_ELU, out3, big, "expanded 3-D");
  }
  tg_scope_end(sc);
}

/* Stable activations: exact and finite far out, for both precisions. */
TG_TEST(backend_cpu, activations_exact_at_extremes) {
  const double xs[] = {-1e4, -1000, -20, -1, 0, 1, 20, 1000, 1e4};
  const int n = (int)(sizeof xs / sizeof xs[0]);
  tg_scope sc = tg_scope_begin();
  for (int di = 0; di < 2; di++) {
    tg_tensor *x = tg_empty(TG_SHAPE(n), TG_OPTS(.dtype = floating[di]));
    for (int i = 0; i < n; i++) set(x, i, xs[i]);
    tg_tensor *s = tg_empty_like(x), *t = tg_empty_like(x), *e = tg_empty_like(x);
    cr_assert_eq(be->unary(TG_UNARY_SIGMOID, 0, 0, s, x), TG_OK);
    cr_assert_eq(be->unary(TG_UNARY_TANH, 0, 0, t, x), TG_OK);
    cr_assert_eq(be->unary(TG_UNARY_ELU, 1.5, 0, e, x), TG_OK);
    for (int i = 0; i < n; i++) {
      cr_assert(isfinite(get(s, i)) && isfinite(get(t, i)) && isfinite(get(e, i)),
                "non-finite activation at x = %g", xs[i]);
    }
    cr_assert_eq(get(s, 0), 0.0);
    cr_assert_eq(get(s, 1), 0.0);
    cr_assert_eq(get(s, 4), 0.5);
    cr_assert_eq(get(s, 7), 1.0);
    cr_assert_eq(get(s, 8), 1.0);
    cr_assert_eq(get(t, 0), -1.0);
    cr_assert_eq(get(t, 8), 1.0);
    cr_assert_eq(get(t, 4), 0.0);
    cr_assert_eq(get(e, 0), -1.5);
    cr_assert_eq(get(e, 1), -1.5);
    cr_assert_eq(get(e, 4), 0.0);
    cr_assert_eq(get(e, 8), 1e4);
  }
  tg_scope_end(sc);
  /* The shared scalar functions are libm exactly, in each precision. */
  for (int i = 0; i < n; i++) {
    const double x = xs[i];
    const float xf = (float)x;
    cr_assert_eq(tg_tanh_d(x), tanh(x));
    cr_assert_eq(tg_tanh_f(xf), tanhf(xf));
    cr_assert_eq(tg_elu_d(x, 0.7), x > 0 ? x : 0.7 * expm1(x));
    cr_assert_eq(tg_elu_f(xf, 0.7f), xf > 0 ? xf : 0.7f * expm1f(xf));
    cr_assert_eq(tg_sigmoid_d(x), x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x)));
    cr_assert_eq(tg_sigmoid_f(xf), xf >= 0 ? 1 / (1 + expf(-xf)) : expf(xf) / (1 + expf(xf)));
    cr_assert(isfinite(tg_d_elu_d(x, 1.0)) && isfinite(tg_d_elu_f(xf, 1.0f)));
  }
  cr_assert_eq(tg_d_sigmoid_d(0.25), 0.1875);
  cr_assert_eq(tg_d_tanh_f(0.5f), 0.75f);
  cr_assert_eq(tg_d_elu_d(2.0, 0.5), 1.0);
  cr_assert_eq(tg_d_elu_d(-1.0, 0.5), 0.5 * exp(-1.0));
  cr_assert(isnan(tg_relu_d(NAN)), "relu propagates NaN");
  cr_assert_eq(tg_step_f(0.0f), 0.0f);
  /* The generic spellings pick the precision from the argument. */
  cr_assert_eq(tg_math_sigmoid(0.3f), tg_sigmoid_f(0.3f));
  cr_assert_eq(tg_math_sigmoid(0.3), tg_sigmoid_d(0.3));
}

/* ---- binary ---- */

/* Every kind of src/ops/def/binary.def. */
static const char *const binary_names[TG_NUM_BINARY] = {
#define TG_BINARY_KIND(KIND, name) [TG_BINARY_##KIND] = #name,
#include "ops/def/binary.def"
};

static double ref_binary(tg_binary_kind k, double a, double b, double alpha) {
  switch (k) {
  case TG_BINARY_ADD:
    return a + alpha * b;
  case TG_BINARY_SUB:
    return a - alpha * b;
  case TG_BINARY_MUL:
    return a * b;
  case TG_BINARY_DIV:
    return a / b;
  case TG_BINARY_EQ:
    return a == b ? 1 : 0;
  case TG_BINARY_GE:
    return a >= b ? 1 : 0;
  case TG_BINARY_NE:
    return a != b ? 1 : 0;
  case TG_BINARY_GT:
    return a > b ? 1 : 0;
  case TG_BINARY_LT:
    return a < b ? 1 : 0;
  case TG_BINARY_LE:
    return a <= b ? 1 : 0;
  case TG_BINARY_MAXIMUM: /* issue 25, helper "pointwise" */
    return fmax(a, b);
  case TG_BINARY_MINIMUM:
    return fmin(a, b);
  case TG_BINARY_GELU_BACKWARD: /* a = g, b = x: g gelu'(x) */
    return a * (0.5 * (1 + erf(b / sqrt(2.0))) +
                b * exp(-0.5 * b * b) / sqrt(2 * 3.14159265358979323846));
  case TG_BINARY_GELU_TANH_BACKWARD: {
    const double k = sqrt(2 / 3.14159265358979323846), t = tanh(k * (b + 0.044715 * b * b * b));
    return a * (0.5 * (1 + t) + 0.5 * b * (1 - t * t) * k * (1 + 3 * 0.044715 * b * b));
  }
  case TG_BINARY_SILU_BACKWARD: {
    const double s = 1 / (1 + exp(-b));
    return a * s * (1 + b * (1 - s));
  }
  default:
    return NAN;
  }
}

static void check_binary(tg_binary_kind k, double alpha, tg_tensor *out, const tg_tensor *a,
                         const tg_tensor *b, const char *what) {
  const int64_t n = numel(out);
  double *want = malloc(sizeof(double) * (size_t)n);
  for (int64_t i = 0; i < n; i++) want[i] = ref_binary(k, get(a, i), get(b, i), alpha);
  cr_assert_eq(be->binary(k, alpha, out, a, b), TG_OK, "%s: %s", what, tg_last_error_message());
  for (int64_t i = 0; i < n; i++)
    cr_assert(close_enough(get(out, i), want[i], rtol_of(out->dtype), atol_of(out->dtype)),
              "%s %s [%s] element %lld: got %.17g want %.17g", binary_names[k], what,
              tg_dtype_name(out->dtype), (long long)i, get(out, i), want[i]);
  free(want);
}

/* Rounds every stored value to a multiple of 0.5 so that EQ and GE meet ties. */
static void quantize(tg_tensor *t) {
  for (int64_t i = 0; i < numel(t); i++) set(t, i, round(get(t, i) * 2) / 2);
}

TG_TEST(backend_cpu, binary_every_kind_on_every_layout_pair) {
  for (int di = 0; di < 2; di++) {
    for (int k = 0; k < TG_NUM_BINARY; k++) {
      for (int la = 0; la < L_NUM; la++) {
        for (int lb = 0; lb < L_NUM; lb++) {
          tg_scope sc = tg_scope_begin();
          const bool positive_b = k == TG_BINARY_DIV;
          tg_tensor *a = make_view((layout)la, 5, 7, floating[di], 11 + la, false);
          tg_tensor *b = make_view((layout)lb, 5, 7, floating[di], 3 + lb, positive_b);
          if (k >= TG_BINARY_EQ) { /* the comparisons */
            quantize(a);
            quantize(b);
          }
          tg_tensor *out = make_out((la + lb) % 2, 5, 7, floating[di]);
          char what[64];
          snprintf(what, sizeof what, "%s (op) %s", layout_names[la], layout_names[lb]);
          check_binary((tg_binary_kind)k, 0.5, out, a, b, what);
          tg_scope_end(sc);
        }
      }
    }
  }
}

TG_TEST(backend_cpu, binary_eq_ge_give_one_and_zero) {
  tg_scope sc = tg_scope_begin();
  for (int di = 0; di < 2; di++) {
    const double av[] = {1, 2, 3, NAN}, bv[] = {1, 3, 2, NAN};
    tg_tensor *a = tg_empty(TG_SHAPE(4), TG_OPTS(.dtype = floating[di]));
    tg_tensor *b = tg_empty_like(a), *eq = tg_empty_like(a), *ge = tg_empty_like(a);
    for (int i = 0; i < 4; i++) {
      set(a, i, av[i]);
      set(b, i, bv[i]);
    }
    cr_assert_eq(be->binary(TG_BINARY_EQ, 1, eq, a, b), TG_OK);
    cr_assert_eq(be->binary(TG_BINARY_GE, 1, ge, a, b), TG_OK);
    const double want_eq[] = {1, 0, 0, 0}, want_ge[] = {1, 0, 1, 0};
    for (int i = 0; i < 4; i++) {
      cr_assert_eq(get(eq, i), want_eq[i]);
      cr_assert_eq(get(ge, i), want_ge[i]);
    }
  }
  tg_scope_end(sc);
}

TG_TEST(backend_cpu, binary_in_place_and_large) {
  tg_scope sc = tg_scope_begin();
  for (int di = 0; di < 2; di++) {
    tg_tensor *a = make_view(L_CONTIGUOUS, 6, 5, floating[di], 1, false);
    tg_tensor *b = make_view(L_EXPAND_ROW, 6, 5, floating[di], 2, false);
    check_binary(TG_BINARY_ADD, -2.0, a, a, b, "in place (out is a)");
    check_binary(TG_BINARY_MUL, 1.0, a, b, a, "in place (out is the second operand)");
    /* OpenMP path with a broadcast column and a transposed operand */
    tg_tensor *la = make_view(L_TRANSPOSED, 257, 300, floating[di], 3, false);
    tg_tensor *lb = make_view(L_EXPAND_COL, 257, 300, floating[di], 4, false);
    check_binary(TG_BINARY_SUB, 0.25, make_out(false, 257, 300, floating[di]), la, lb, "large");
    check_binary(TG_BINARY_DIV, 1.0, make_out(true, 257, 300, floating[di]), la,
                 make_view(L_CONTIGUOUS, 257, 300, floating[di], 5, true), "large");
  }
  tg_scope_end(sc);
}

/* ---- fill and copy ---- */

/* where: every (cond dtype, value dtype) pair, cond with zeros and NaN, on every layout of
 * cond and a (b's layout follows), into a contiguous or a transposed out. */
TG_TEST(backend_cpu, where_every_dtype_pair_on_every_layout) {
  static const tg_dtype dtypes[] = {TG_F32, TG_F64, TG_I64};
  for (int dc = 0; dc < 3; dc++) {
    for (int dv = 0; dv < 3; dv++) {
      for (int lc = 0; lc < L_NUM; lc++) {
        for (int la = 0; la < L_NUM; la++) {
          tg_scope sc = tg_scope_begin();
          tg_tensor *cond = make_view((layout)lc, 5, 7, dtypes[dc], 5 + lc, false);
          for (int64_t i = 0; i < 35; i++) {
            if (i % 3 == 0) set(cond, i, 0);
            if (i % 5 == 1 && dtypes[dc] != TG_I64) set(cond, i, NAN);
          }
          tg_tensor *a = make_view((layout)la, 5, 7, dtypes[dv], 11 + la, false);
          tg_tensor *b = make_view((layout)((la + lc) % L_NUM), 5, 7, dtypes[dv], 3, true);
          tg_tensor *out = make_out((la + lc) % 2, 5, 7, dtypes[dv]);
          cr_assert_eq(be->where(out, cond, a, b), TG_OK, "%s", tg_last_error_message());
          for (int64_t i = 0; i < 35; i++) {
            const double c = get(cond, i), want = c != 0 ? get(a, i) : get(b, i);
            cr_assert_eq(get(out, i), want, "cond %s %s, values %s %s: element %lld",
                         tg_dtype_name(dtypes[dc]), layout_names[lc], tg_dtype_name(dtypes[dv]),
                         layout_names[la], (long long)i);
          }
          tg_scope_end(sc);
        }
      }
    }
  }
}

TG_TEST(backend_cpu, where_refuses_mismatched_dtypes_and_ranks) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *f32 = constant(TG_SHAPE(2, 3), TG_F32, 1), *f64 = constant(TG_SHAPE(2, 3), TG_F64, 1);
  tg_tensor *row = constant(TG_SHAPE(3), TG_F32, 1);
  cr_assert_eq(be->where(f32, f32, f32, f64), TG_ERR_DTYPE);
  tg_expect_error(TG_ERR_DTYPE, "where", "a is float32 and b float64 but out is float32");
  cr_assert_eq(be->where(f32, f32, row, f32), TG_ERR_SHAPE);
  tg_expect_error(TG_ERR_SHAPE, "where", "expanded to out's 2 dims");
  tg_scope_end(sc);
}

TG_TEST(backend_cpu, fill_every_dtype_and_layout) {
  const tg_dtype dtypes[] = {TG_F32, TG_F64, TG_I64};
  tg_scope sc = tg_scope_begin();
  for (int di = 0; di < 3; di++) {
    tg_tensor *c = constant(TG_SHAPE(300, 200), dtypes[di], 0);
    cr_assert_eq(be->fill(c, 7.0), TG_OK);
    for (int64_t i = 0; i < numel(c); i++) cr_assert_eq(get(c, i), 7.0);
    /* a stepped view: only its elements change */
    tg_tensor *base = constant(TG_SHAPE(4, 9), dtypes[di], 1);
    tg_tensor *v = tg_slice(base, 1, 0, 9, 2);
    cr_assert_eq(be->fill(v, -3.0), TG_OK);
    for (int64_t i = 0; i < 36; i++) cr_assert_eq(get(base, i), (i % 9) % 2 == 0 ? -3.0 : 1.0);
    tg_tensor *t = tg_t(constant(TG_SHAPE(3, 5), dtypes[di], 0));
    cr_assert_eq(be->fill(t, 2.0), TG_OK);
    for (int64_t i = 0; i < 15; i++) cr_assert_eq(get(t, i), 2.0);
  }
  tg_scope_end(sc);
}

TG_TEST(backend_cpu, copy_converts_every_dtype_pair) {
  const tg_dtype dtypes[] = {TG_F32, TG_F64, TG_I64};
  tg_scope sc = tg_scope_begin();
  for (int to = 0; to < 3; to++) {
    for (int from = 0; from < 3; from++) {
      for (int l = 0; l < L_NUM; l++) {
        tg_tensor *src = make_view((layout)l, 4, 6, dtypes[from], l, false);
        tg_tensor *out = make_out(l % 2, 4, 6, dtypes[to]);
        cr_assert_eq(be->copy(out, src), TG_OK, "%s", tg_last_error_message());
        for (int64_t i = 0; i < 24; i++) {
          double v = get(src, i);
          double want = dtypes[to] == TG_I64 ? trunc(v) : dtypes[to] == TG_F32 ? (float)v : v;
          cr_assert_eq(get(out, i), want, "copy %s -> %s (%s) element %lld: %g vs %g",
                       tg_dtype_name(dtypes[from]), tg_dtype_name(dtypes[to]), layout_names[l],
                       (long long)i, get(out, i), want);
        }
      }
    }
  }
  tg_scope_end(sc);
}

TG_TEST(backend_cpu, copy_large_transpose_and_self) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *src = make_view(L_TRANSPOSED, 300, 301, TG_F64, 1, false);
  tg_tensor *out = constant(TG_SHAPE(300, 301), TG_F32, 0);
  cr_assert_eq(be->copy(out, src), TG_OK);
  for (int64_t i = 0; i < numel(out); i++) cr_assert_eq(get(out, i), (float)get(src, i));
  /* copying a tensor onto itself leaves it as it was */
  tg_tensor *x = make_view(L_CONTIGUOUS, 3, 4, TG_F32, 2, false);
  cr_assert_eq(be->copy(x, x), TG_OK);
  for (int64_t i = 0; i < 12; i++) cr_assert_eq(get(x, i), (float)test_value(i, 2, false));
  tg_scope_end(sc);
}

/* ---- reductions ---- */

static void check_sum(const tg_tensor *x, int dim) {
  int64_t sizes[TG_MAX_DIMS];
  for (int d = 0; d < x->ndim; d++) sizes[d] = d == dim ? 1 : x->sizes[d];
  tg_tensor *out = constant(x->ndim, sizes, x->dtype, NAN);
  cr_assert_eq(be->reduce(TG_REDUCE_SUM, out, NULL, x, dim), TG_OK, "%s", tg_last_error_message());
  /* naive: for every x element, add into its output slot */
  const int64_t nout = numel(out), nx = numel(x);
  double *want = calloc((size_t)(nout ? nout : 1), sizeof(double));
  for (int64_t i = 0; i < nx; i++) {
    int64_t rem = i, o = 0, mul = 1;
    for (int d = x->ndim - 1; d >= 0; d--) {
      int64_t c = rem % x->sizes[d];
      rem /= x->sizes[d];
      if (d != dim) o += c * mul;
      mul *= d == dim ? 1 : x->sizes[d];
    }
    want[o] += get(x, i);
  }
  for (int64_t o = 0; o < nout; o++)
    cr_assert(close_enough(get(out, o), want[o], rtol_of(x->dtype), 1e-5),
              "sum_dim %d [%s] output %lld: got %.17g want %.17g", dim, tg_dtype_name(x->dtype),
              (long long)o, get(out, o), want[o]);
  free(want);
}

TG_TEST(backend_cpu, sum_dim_every_dim_and_layout) {
  tg_scope sc = tg_scope_begin();
  for (int di = 0; di < 2; di++) {
    tg_tensor *x = filled(TG_SHAPE(4, 6, 5), floating[di], 1, false);
    const int perm[3] = {2, 0, 1};
    tg_tensor *p = tg_permute(x, 3, perm);
    tg_tensor *sl = tg_narrow(
        tg_slice(filled(TG_SHAPE(9, 13, 4), floating[di], 2, false), 1, 1, 13, 2), 0, 2, 5);
    tg_tensor *ex = tg_expand(filled(TG_SHAPE(4, 1, 5), floating[di], 3, false), TG_SHAPE(4, 6, 5));
    const tg_tensor *xs[] = {x, p, sl, ex};
    for (int i = 0; i < 4; i++)
      for (int d = 0; d < 3; d++) check_sum(xs[i], d);
    /* large: the OpenMP path, over the contiguous and the strided dim */
    tg_tensor *big = filled(TG_SHAPE(300, 257), floating[di], 4, false);
    check_sum(big, 0);
    check_sum(big, 1);
    check_sum(tg_t(big), 0);
    /* long rows and columns: the 8-way and the chunked accumulators with remainders */
    check_sum(filled(TG_SHAPE(3, 1001), floating[di], 5, false), 1);
    check_sum(filled(TG_SHAPE(1001, 3), floating[di], 6, false), 0);
    check_sum(filled(TG_SHAPE(2, 600), floating[di], 7, false), 0);
  }
  tg_scope_end(sc);
}

TG_TEST(backend_cpu, sum_dim_accuracy_and_empty) {
  tg_scope sc = tg_scope_begin();
  /* a million 0.1f: a float accumulator drifts visibly, a double one rounds once */
  tg_tensor *x = constant(TG_SHAPE(1, 1000003), TG_F32, 0.1f);
  tg_tensor *out = constant(TG_SHAPE(1, 1), TG_F32, 0);
  cr_assert_eq(be->reduce(TG_REDUCE_SUM, out, NULL, x, 1), TG_OK);
  cr_assert_eq(get(out, 0), (float)(1000003 * (double)0.1f), "got %.9g", get(out, 0));
  tg_tensor *e = constant(TG_SHAPE(3, 0), TG_F64, 0);
  tg_tensor *eo = constant(TG_SHAPE(3, 1), TG_F64, NAN);
  cr_assert_eq(be->reduce(TG_REDUCE_SUM, eo, NULL, e, 1), TG_OK);
  for (int i = 0; i < 3; i++) cr_assert_eq(get(eo, i), 0.0);
  tg_scope_end(sc);
}

TG_TEST(backend_cpu, max_dim_ties_and_nan) {
  tg_scope sc = tg_scope_begin();
  for (int di = 0; di < 2; di++) {
    /* rows: tie (first wins), NaN (first NaN wins), all -inf, single max at the end */
    const double rows[4][5] = {{3, 7, 7, 1, 7},
                               {1, NAN, 5, NAN, 9},
                               {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY},
                               {-1, -2, -3, -4, 0}};
    const double want_v[4] = {7, NAN, -INFINITY, 0};
    const int64_t want_i[4] = {1, 1, 0, 4};
    tg_tensor *x = tg_empty(TG_SHAPE(4, 5), TG_OPTS(.dtype = floating[di]));
    for (int r = 0; r < 4; r++)
      for (int c = 0; c < 5; c++) set(x, r * 5 + c, rows[r][c]);
    /* over dim 1 (contiguous runs) and, on the transposed copy, over dim 0 (chunked) */
    tg_tensor *xtc = tg_empty(TG_SHAPE(5, 4), TG_OPTS(.dtype = floating[di]));
    for (int r = 0; r < 4; r++)
      for (int c = 0; c < 5; c++) set(xtc, c * 4 + r, rows[r][c]);
    tg_tensor *v1 = constant(TG_SHAPE(4, 1), floating[di], 0);
    tg_tensor *i1 = constant(TG_SHAPE(4, 1), TG_I64, -1);
    tg_tensor *v0 = constant(TG_SHAPE(1, 4), floating[di], 0);
    tg_tensor *i0 = constant(TG_SHAPE(1, 4), TG_I64, -1);
    cr_assert_eq(be->reduce(TG_REDUCE_MAX, v1, i1, x, 1), TG_OK, "%s", tg_last_error_message());
    cr_assert_eq(be->reduce(TG_REDUCE_MAX, v0, i0, xtc, 0), TG_OK, "%s", tg_last_error_message());
    for (int r = 0; r < 4; r++) {
      cr_assert(close_enough(get(v1, r), want_v[r], 0, 0), "row %d: %g", r, get(v1, r));
      cr_assert(close_enough(get(v0, r), want_v[r], 0, 0), "col %d: %g", r, get(v0, r));
      cr_assert_eq(get(i1, r), (double)want_i[r], "row %d index %g", r, get(i1, r));
      cr_assert_eq(get(i0, r), (double)want_i[r], "col %d index %g", r, get(i0, r));
    }
  }
  tg_scope_end(sc);
}

/* Large max_dim over both dims vs a naive scan. */
TG_TEST(backend_cpu, max_dim_large_matches_naive) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = filled(TG_SHAPE(300, 257), TG_F64, 8, false);
  quantize(x); /* ties */
  for (int dim = 0; dim < 2; dim++) {
    const int64_t nout = dim == 0 ? 257 : 300, R = x->sizes[dim];
    tg_tensor *v =
        dim == 0 ? constant(TG_SHAPE(1, 257), TG_F64, 0) : constant(TG_SHAPE(300, 1), TG_F64, 0);
    tg_tensor *ix =
        dim == 0 ? constant(TG_SHAPE(1, 257), TG_I64, 0) : constant(TG_SHAPE(300, 1), TG_I64, 0);
    cr_assert_eq(be->reduce(TG_REDUCE_MAX, v, ix, x, dim), TG_OK);
    for (int64_t o = 0; o < nout; o++) {
      double best = -INFINITY;
      int64_t bi = -1;
      for (int64_t r = 0; r < R; r++) {
        double e = dim == 0 ? get(x, r * 257 + o) : get(x, o * 257 + r);
        if (bi < 0 || e > best) {
          best = e;
          bi = r;
        }
      }
      cr_assert_eq(get(v, o), best);
      cr_assert_eq(get(ix, o), (double)bi);
    }
  }
  tg_scope_end(sc);
}

/* ---- gemm ---- */

/* out = beta*out0 + alpha*a@b against a naive double reference (out0 read before). */
static void check_gemm(tg_tensor *out, const tg_tensor *a, const tg_tensor *b, double alpha,
                       double beta, const char *what) {
  const int64_t m = out->sizes[0], n = out->sizes[1], k = a->sizes[1];
  double *want = malloc(sizeof(double) * (size_t)(m * n + 1));
  for (int64_t i = 0; i < m; i++) {
    for (int64_t j = 0; j < n; j++) {
      double acc = 0;
      for (int64_t p = 0; p < k; p++) acc += get(a, i * k + p) * get(b, p * n + j);
      want[i * n + j] = (beta == 0 ? 0 : beta * get(out, i * n + j)) + alpha * acc;
    }
  }
  cr_assert_eq(be->gemm(out, a, b, alpha, beta), TG_OK, "%s: %s", what, tg_last_error_message());
  const double rtol = out->dtype == TG_F32 ? 1e-5 : 1e-12,
               atol = out->dtype == TG_F32 ? 1e-4 : 1e-11;
  for (int64_t i = 0; i < m * n; i++)
    cr_assert(close_enough(get(out, i), want[i], rtol, atol),
              "gemm %s [%s] element %lld: got %.17g want %.17g", what, tg_dtype_name(out->dtype),
              (long long)i, get(out, i), want[i]);
  free(want);
}

TG_TEST(backend_cpu, gemm_every_layout) {
  const int64_t m = 7, n = 5, k = 6;
  const layout layouts[] = {L_CONTIGUOUS, L_TRANSPOSED, L_SLICED,
                            L_STEPPED,    L_EXPAND_ROW, L_EXPAND_COL};
  for (int di = 0; di < 2; di++) {
    for (int la = 0; la < 6; la++) {
      for (int lb = 0; lb < 6; lb++) {
        for (int ot = 0; ot < 2; ot++) {
          tg_scope sc = tg_scope_begin();
          tg_tensor *a = make_view(layouts[la], m, k, floating[di], 1, false);
          tg_tensor *b = make_view(layouts[lb], k, n, floating[di], 2, false);
          tg_tensor *out = make_out(ot, m, n, floating[di]);
          char what[80];
          snprintf(what, sizeof what, "a %s, b %s, out %s", layout_names[layouts[la]],
                   layout_names[layouts[lb]], ot ? "transposed" : "contiguous");
          check_gemm(out, a, b, 0.5, 2.0, what);
          tg_scope_end(sc);
        }
      }
    }
  }
}

TG_TEST(backend_cpu, gemm_strided_output_and_vectors) {
  tg_scope sc = tg_scope_begin();
  for (int di = 0; di < 2; di++) {
    /* out with no unit stride: computed in a buffer and copied back, the gaps untouched */
    tg_tensor *base = constant(TG_SHAPE(14, 15), floating[di], 9);
    tg_tensor *out = tg_slice(tg_slice(base, 0, 0, 14, 2), 1, 0, 15, 3);
    check_gemm(out, make_view(L_CONTIGUOUS, 7, 4, floating[di], 1, false),
               make_view(L_TRANSPOSED, 4, 5, floating[di], 2, false), 1.0, 1.0, "stepped out");
    for (int64_t i = 0; i < 14 * 15; i++)
      if ((i / 15) % 2 != 0 || (i % 15) % 3 != 0) cr_assert_eq(get(base, i), 9.0);
    /* matrix-vector shapes and 1x1 */
    check_gemm(constant(TG_SHAPE(7, 1), floating[di], 1),
               make_view(L_TRANSPOSED, 7, 3, floating[di], 3, false),
               make_view(L_STEPPED, 3, 1, floating[di], 4, false), 1.0, 0.5, "n = 1");
    check_gemm(constant(TG_SHAPE(1, 6), floating[di], 1),
               make_view(L_SLICED, 1, 3, floating[di], 5, false),
               make_view(L_TRANSPOSED, 3, 6, floating[di], 6, false), 2.0, 0.0, "m = 1");
    check_gemm(constant(TG_SHAPE(1, 1), floating[di], 1),
               make_view(L_CONTIGUOUS, 1, 9, floating[di], 7, false),
               make_view(L_CONTIGUOUS, 9, 1, floating[di], 8, false), 1.0, 1.0, "1x1");
    /* big enough for BLIS's threads and every micro-kernel edge */
    check_gemm(constant(TG_SHAPE(67, 83), floating[di], 0),
               make_view(L_TRANSPOSED, 67, 129, floating[di], 9, false),
               make_view(L_SLICED, 129, 83, floating[di], 10, false), 1.0, 0.0, "large");
  }
  tg_scope_end(sc);
}

TG_TEST(backend_cpu, gemm_beta_zero_ignores_nan_and_k_zero) {
  tg_scope sc = tg_scope_begin();
  for (int di = 0; di < 2; di++) {
    /* beta == 0: NaN in out must not leak into the result (both in place and via copy) */
    tg_tensor *out = constant(TG_SHAPE(9, 11), floating[di], NAN);
    check_gemm(out, make_view(L_CONTIGUOUS, 9, 4, floating[di], 1, false),
               make_view(L_CONTIGUOUS, 4, 11, floating[di], 2, false), 1.0, 0.0, "beta 0, NaN out");
    tg_tensor *sout = tg_slice(constant(TG_SHAPE(9, 22), floating[di], NAN), 1, 0, 22, 2);
    check_gemm(sout, make_view(L_CONTIGUOUS, 9, 4, floating[di], 1, false),
               make_view(L_CONTIGUOUS, 4, 11, floating[di], 2, false), 1.0, 0.0,
               "beta 0, NaN stepped out");
    /* k == 0: out = beta*out; beta == 0 gives zeros even over NaN */
    tg_tensor *a0 = tg_empty(TG_SHAPE(3, 0), TG_OPTS(.dtype = floating[di]));
    tg_tensor *b0 = tg_empty(TG_SHAPE(0, 4), TG_OPTS(.dtype = floating[di]));
    tg_tensor *o1 = constant(TG_SHAPE(3, 4), floating[di], 3);
    cr_assert_eq(be->gemm(o1, a0, b0, 1.0, 2.0), TG_OK);
    for (int i = 0; i < 12; i++) cr_assert_eq(get(o1, i), 6.0);
    tg_tensor *o2 = constant(TG_SHAPE(3, 4), floating[di], NAN);
    cr_assert_eq(be->gemm(o2, a0, b0, 1.0, 0.0), TG_OK);
    for (int i = 0; i < 12; i++) cr_assert_eq(get(o2, i), 0.0);
    /* m == 0 and n == 0: nothing to do */
    tg_tensor *am = tg_empty(TG_SHAPE(0, 3), TG_OPTS(.dtype = floating[di]));
    tg_tensor *bm = tg_empty(TG_SHAPE(3, 4), TG_OPTS(.dtype = floating[di]));
    tg_tensor *om = tg_empty(TG_SHAPE(0, 4), TG_OPTS(.dtype = floating[di]));
    cr_assert_eq(be->gemm(om, am, bm, 1.0, 0.0), TG_OK);
    tg_tensor *bn = tg_empty(TG_SHAPE(3, 0), TG_OPTS(.dtype = floating[di]));
    tg_tensor *on = tg_empty(TG_SHAPE(2, 0), TG_OPTS(.dtype = floating[di]));
    cr_assert_eq(be->gemm(on, make_view(L_CONTIGUOUS, 2, 3, floating[di], 1, false), bn, 1.0, 0.0),
                 TG_OK);
  }
  tg_scope_end(sc);
}

/* ---- gather / scatter ---- */

TG_TEST(backend_cpu, gather_and_scatter_add_rows) {
  tg_scope sc = tg_scope_begin();
  for (int di = 0; di < 2; di++) {
    const int64_t idx_v[5] = {2, 0, 1, 2, 3};
    tg_tensor *index = tg_from_data(TG_SHAPE(5), idx_v, TG_OPTS(.dtype = TG_I64));
    for (int l = 0; l < 3; l++) { /* contiguous, transposed, sliced x */
      tg_tensor *x = make_view((layout)l, 5, 4, floating[di], l, false);
      tg_tensor *out = constant(TG_SHAPE(5), floating[di], 0);
      cr_assert_eq(gather_rows(out, x, index), TG_OK, "%s", tg_last_error_message());
      for (int i = 0; i < 5; i++) cr_assert_eq(get(out, i), get(x, i * 4 + idx_v[i]));
    }
    tg_tensor *src = make_view(L_CONTIGUOUS, 1, 5, floating[di], 4, false);
    tg_tensor *src1 = tg_select(src, 0, 0);
    for (int ot = 0; ot < 2; ot++) {
      tg_tensor *out = make_out(ot, 5, 4, floating[di]); /* all -7 */
      cr_assert_eq(scatter_add_rows(out, src1, index), TG_OK, "%s", tg_last_error_message());
      for (int i = 0; i < 5; i++)
        for (int c = 0; c < 4; c++)
          cr_assert(close_enough(get(out, i * 4 + c), c == idx_v[i] ? -7 + get(src1, i) : -7.0,
                                 rtol_of(floating[di]), 0));
    }
  }
  /* big enough for the parallel loop */
  const int64_t n = 40000;
  tg_tensor *index = tg_empty(TG_SHAPE(n), TG_OPTS(.dtype = TG_I64));
  for (int64_t i = 0; i < n; i++) set(index, i, (double)(i % 3));
  tg_tensor *x = filled(TG_SHAPE(n, 3), TG_F32, 1, false);
  tg_tensor *g = constant(TG_SHAPE(n), TG_F32, 0);
  cr_assert_eq(gather_rows(g, x, index), TG_OK);
  for (int64_t i = 0; i < n; i++) cr_assert_eq(get(g, i), get(x, i * 3 + i % 3));
  tg_tensor *s = constant(TG_SHAPE(n, 3), TG_F32, 0);
  cr_assert_eq(scatter_add_rows(s, g, index), TG_OK);
  for (int64_t i = 0; i < n; i++) cr_assert_eq(get(s, i * 3 + i % 3), get(g, i));
  tg_scope_end(sc);
}

/* ---- random ---- */

TG_TEST(backend_cpu, philox_known_answers) {
  /* Random123's known-answer vectors for Philox4x32-10. */
  tg_philox4 zero = {{0, 0, 0, 0}};
  tg_philox4 r = tg_philox4x32_10(zero, 0, 0);
  cr_assert(r.v[0] == 0x6627e8d5u && r.v[1] == 0xe169c58du && r.v[2] == 0xbc57ac4cu &&
            r.v[3] == 0x9b00dbd8u);
  tg_philox4 ones = {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}};
  r = tg_philox4x32_10(ones, 0xffffffffu, 0xffffffffu);
  cr_assert(r.v[0] == 0x408f276du && r.v[1] == 0x41c83b0eu && r.v[2] == 0xa20bc7c6u &&
            r.v[3] == 0x6d5451fdu);
  tg_philox4 pi = {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}};
  r = tg_philox4x32_10(pi, 0xa4093822u, 0x299f31d0u);
  cr_assert(r.v[0] == 0xd16cfe09u && r.v[1] == 0x94fdccebu && r.v[2] == 0x5001e420u &&
            r.v[3] == 0x24126ea1u);
}

typedef tg_status (*draw_fn)(tg_tensor *, uint64_t, uint64_t, double, double);

TG_TEST(backend_cpu, random_is_a_function_of_seed_and_position) {
  const draw_fn draws[2] = {be->uniform, be->normal};
  tg_scope sc = tg_scope_begin();
  for (int di = 0; di < 2; di++) {
    for (int k = 0; k < 2; k++) {
      tg_tensor *a = constant(TG_SHAPE(37), floating[di], 0),
                *b = constant(TG_SHAPE(37), floating[di], 0);
      tg_tensor *shifted = constant(TG_SHAPE(32), floating[di], 0);
      tg_tensor *other = constant(TG_SHAPE(37), floating[di], 0);
      cr_assert_eq(draws[k](a, 1234, 0, 0, 1), TG_OK);
      cr_assert_eq(draws[k](b, 1234, 0, 0, 1), TG_OK);
      cr_assert_eq(draws[k](shifted, 1234, 5, 0, 1), TG_OK);
      cr_assert_eq(draws[k](other, 1235, 0, 0, 1), TG_OK);
      int differ = 0;
      for (int i = 0; i < 37; i++) {
        cr_assert_eq(get(a, i), get(b, i), "same seed, same numbers");
        if (i >= 5) cr_assert_eq(get(shifted, i - 5), get(a, i), "offset shift at %d", i);
        differ += get(other, i) != get(a, i);
      }
      cr_assert_gt(differ, 30, "another seed gives other numbers");
      /* the per-element helpers (what a CUDA kernel calls) agree with the CPU blocks */
      for (int i = 0; i < 37; i++) {
        double want = di == 0
                          ? (k == 0 ? tg_philox_uniform_f(1234, i) : tg_philox_normal_f(1234, i))
                          : (k == 0 ? tg_philox_uniform_d(1234, i) : tg_philox_normal_d(1234, i));
        cr_assert_eq(get(a, i), want);
      }
    }
  }
  tg_scope_end(sc);
}

TG_TEST(backend_cpu, random_independent_of_threads_and_layout) {
  const draw_fn draws[2] = {be->uniform, be->normal};
  tg_scope sc = tg_scope_begin();
  for (int di = 0; di < 2; di++) {
    for (int k = 0; k < 2; k++) {
      tg_tensor *one = constant(TG_SHAPE(200, 301), floating[di], 0);
      tg_tensor *two = constant(TG_SHAPE(200, 301), floating[di], 0);
      tg_set_num_threads(1);
      cr_assert_eq(draws[k](one, 99, 3, -1, 2), TG_OK);
      tg_set_num_threads(2);
      cr_assert_eq(draws[k](two, 99, 3, -1, 2), TG_OK);
      tg_set_num_threads(0);
      /* a transposed destination receives the same values in logical order */
      tg_tensor *t = make_out(true, 200, 301, floating[di]);
      cr_assert_eq(draws[k](t, 99, 3, -1, 2), TG_OK);
      for (int64_t i = 0; i < numel(one); i++) {
        cr_assert_eq(get(one, i), get(two, i));
        cr_assert_eq(get(t, i), get(one, i));
      }
    }
  }
  tg_scope_end(sc);
}

TG_TEST(backend_cpu, random_distributions) {
  const int64_t n = 200000;
  tg_scope sc = tg_scope_begin();
  for (int di = 0; di < 2; di++) {
    tg_tensor *u = constant(TG_SHAPE(n), floating[di], 0);
    cr_assert_eq(be->uniform(u, 7, 0, 2, 5), TG_OK);
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < n; i++) {
      double v = get(u, i);
      cr_assert(v >= 2 && v < 5, "uniform value %g outside [2, 5)", v);
      s += v;
      s2 += v * v;
    }
    double mean = s / n, var = s2 / n - mean * mean;
    cr_assert(fabs(mean - 3.5) < 0.02, "uniform mean %g", mean);
    cr_assert(fabs(var - 0.75) < 0.02, "uniform variance %g", var);
    tg_tensor *z = constant(TG_SHAPE(n), floating[di], 0);
    cr_assert_eq(be->normal(z, 8, 0, 1, 2), TG_OK);
    s = s2 = 0;
    for (int64_t i = 0; i < n; i++) {
      double v = get(z, i);
      cr_assert(isfinite(v));
      s += v;
      s2 += v * v;
    }
    mean = s / n;
    double sd = sqrt(s2 / n - mean * mean);
    cr_assert(fabs(mean - 1) < 0.03, "normal mean %g", mean);
    cr_assert(fabs(sd - 2) < 0.03, "normal std %g", sd);
  }
  /* a degenerate range stays at low */
  tg_tensor *d = constant(TG_SHAPE(16), TG_F32, 0);
  cr_assert_eq(be->uniform(d, 1, 0, 3, 3), TG_OK);
  for (int i = 0; i < 16; i++) cr_assert_eq(get(d, i), 3.0);
  tg_scope_end(sc);
}

/* ---- threads and errors ---- */

TG_TEST(backend_cpu, thread_count_set_and_restored) {
  const int initial = tg_get_num_threads();
  cr_assert_geq(initial, 1);
  tg_set_num_threads(1);
  cr_assert_eq(tg_get_num_threads(), 1);
  tg_set_num_threads(3);
  cr_assert_eq(tg_get_num_threads(), 3);
  tg_set_num_threads(0);
  cr_assert_eq(tg_get_num_threads(), initial);
  tg_set_num_threads(-5);
  cr_assert_eq(tg_get_num_threads(), initial);
}

TG_TEST(backend_cpu, unsupported_dtypes_are_errors) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *i = constant(TG_SHAPE(3, 3), TG_I64, 1), *io = constant(TG_SHAPE(3, 3), TG_I64, 0);
  tg_tensor *f = constant(TG_SHAPE(3, 3), TG_F32, 1), *d = constant(TG_SHAPE(3, 3), TG_F64, 1);
  cr_assert_eq(be->unary(TG_UNARY_EXP, 0, 0, io, i), TG_ERR_DTYPE);
  const char *i64 = tg_dtype_name(TG_I64), *f32 = tg_dtype_name(TG_F32),
             *f64 = tg_dtype_name(TG_F64);
  tg_expect_error(TG_ERR_DTYPE, "unary", i64);
  cr_assert_eq(be->binary(TG_BINARY_DIV, 1, io, i, i), TG_ERR_DTYPE); /* int64 takes add, not div */
  tg_expect_error(TG_ERR_DTYPE, "binary", i64);
  cr_assert_eq(be->binary(TG_BINARY_ADD, 1, f, f, d), TG_ERR_DTYPE);
  tg_expect_error(TG_ERR_DTYPE, "binary", f64);
  cr_assert_eq(be->gemm(io, i, i, 1, 0), TG_ERR_DTYPE);
  tg_expect_error(TG_ERR_DTYPE, "gemm", i64);
  tg_tensor *so = constant(TG_SHAPE(3, 1), TG_I64, 0);
  cr_assert_eq(be->reduce(TG_REDUCE_SUM, so, NULL, i, 1), TG_OK); /* an int64 sum is int64 */
  tg_tensor *vo = constant(TG_SHAPE(3, 1), TG_F32, 0),
            *bad_idx = constant(TG_SHAPE(3, 1), TG_F32, 0);
  cr_assert_eq(be->reduce(TG_REDUCE_SUM, vo, NULL, i, 1), TG_ERR_DTYPE); /* into float32 */
  tg_expect_error(TG_ERR_DTYPE, "sum_dim", i64);
  cr_assert_eq(be->reduce(TG_REDUCE_MAX, vo, bad_idx, f, 1), TG_ERR_DTYPE);
  tg_expect_error(TG_ERR_DTYPE, "max_dim", f32);
  cr_assert_eq(be->reduce(TG_REDUCE_MIN, vo, NULL, f, 1), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "min_dim: needs indices");
  cr_assert_eq(be->reduce(TG_NUM_REDUCE, vo, NULL, f, 1), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "reduce: unknown kind");
  tg_tensor *g = constant(TG_SHAPE(3), TG_F32, 0), *fidx = constant(TG_SHAPE(3), TG_F64, 0);
  cr_assert_eq(gather_rows(g, f, fidx), TG_ERR_DTYPE);
  tg_expect_error(TG_ERR_DTYPE, "gather_rows", f64);
  cr_assert_eq(scatter_add_rows(f, g, fidx), TG_ERR_DTYPE);
  tg_expect_error(TG_ERR_DTYPE, "scatter_add_rows", f64);
  cr_assert_eq(be->uniform(io, 1, 0, 0, 1), TG_ERR_DTYPE);
  tg_expect_error(TG_ERR_DTYPE, "uniform", i64);
  cr_assert_eq(be->normal(io, 1, 0, 0, 1), TG_ERR_DTYPE);
  tg_expect_error(TG_ERR_DTYPE, "normal", i64);
  cr_assert_eq(be->unary(TG_NUM_UNARY, 0, 0, f, f), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "unary");
  tg_scope_end(sc);
}
