/* The CPU backend's F32 exp, sigmoid, tanh and elu rows, which run the vectorizable float
 * math of src/ops/cpu/cpu_vecmath.h: within the ulp bounds stated there of the correctly
 * rounded result (double libm, rounded to float), over a fine sweep of [-110, 90], the
 * floats near 0 and the range ends; libm's results exactly at the extremes (0, +-1, inf)
 * and NaN propagated. */
#include <math.h>
#include <stdlib.h>

#include "ops/backend.h"
#include "tensor/tensor_impl.h"
#include "testutil.h"

static const tg_backend *const be = &tg_cpu_backend;

/* The inputs: a sweep of [-110, 90], the floats around 0 (+-1e-30 .. +-1) and the ends of
 * exp's range (its overflow and underflow thresholds). */
static float *inputs(int64_t *count) {
  const int sweep = 400000, near0 = 2 * 2000, ends = 2 * 2000;
  float *x = malloc(sizeof(float) * (size_t)(sweep + near0 + ends));
  cr_assert(x);
  int64_t n = 0;
  for (int i = 0; i < sweep; i++) x[n++] = (float)(-110.0 + 200.0 * i / sweep);
  for (int i = 0; i < near0 / 2; i++) {
    const float v = (float)pow(10.0, -30.0 + 30.0 * i / (near0 / 2));
    x[n++] = v;
    x[n++] = -v;
  }
  for (int i = 0; i < ends / 2; i++) {
    x[n++] = 88.0f + 1.0f * i / (ends / 2);    /* exp overflows at 88.72 */
    x[n++] = -104.5f + 18.0f * i / (ends / 2); /* subnormal results below -87.34 */
  }
  *count = n;
  return x;
}

static double reference(tg_unary_kind k, double x) {
  switch (k) {
  case TG_UNARY_EXP:
    return exp(x);
  case TG_UNARY_SIGMOID:
    return x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x));
  case TG_UNARY_TANH:
    return tanh(x);
  default: /* elu, alpha = 1 */
    return x > 0 ? x : expm1(x);
  }
}

/* |got - want| in units of the float spacing at the correctly rounded want. */
static double ulp_error(float got, double want) {
  const float r = (float)want;
  if (isinf(r)) return got == r ? 0 : INFINITY;
  const float a = fabsf(r);
  const double ulp = (double)nextafterf(a, INFINITY) - (double)a;
  return fabs((double)got - want) / ulp;
}

/* Runs kind k over xs as one contiguous F32 tensor; the largest error in ulps. */
static double max_ulp_error(tg_unary_kind k, const float *xs, int64_t n, float *worst_x) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_from_data(1, &n, xs, TG_OPTS(.dtype = TG_F32));
  tg_tensor *y = tg_empty(1, &n, TG_OPTS(.dtype = TG_F32));
  cr_assert(x && y);
  cr_assert_eq(be->unary(k, 1.0, 0.0, y, x), TG_OK, "%s", tg_last_error_message());
  const float *out = (const float *)y->storage->data;
  double worst = 0;
  for (int64_t i = 0; i < n; i++) {
    const double e = ulp_error(out[i], reference(k, xs[i]));
    if (e > worst) {
      worst = e;
      *worst_x = xs[i];
    }
  }
  tg_scope_end(sc);
  return worst;
}

TG_TEST(vecmath, f32_rows_within_stated_ulp_bounds) {
  static const struct {
    tg_unary_kind kind;
    const char *name;
    double bound;
  } kinds[] = {{TG_UNARY_EXP, "exp", 1.5},
               {TG_UNARY_SIGMOID, "sigmoid", 3},
               {TG_UNARY_TANH, "tanh", 3},
               {TG_UNARY_ELU, "elu", 3}};
  int64_t n;
  float *xs = inputs(&n);
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
    float at = 0;
    const double e = max_ulp_error(kinds[i].kind, xs, n, &at);
    cr_log_info("%s: max %.2f ulp (at %.9g)", kinds[i].name, e, (double)at);
    cr_assert(e <= kinds[i].bound, "%s: %.2f ulp at x = %.9g, stated bound %.1f", kinds[i].name, e,
              (double)at, kinds[i].bound);
  }
  free(xs);
}

/* One F32 value through kind k (alpha 1). */
static float one(tg_unary_kind k, float v) {
  tg_tensor *x = tg_from_data(0, NULL, &v, TG_OPTS(.dtype = TG_F32));
  tg_tensor *y = tg_empty(0, NULL, TG_OPTS(.dtype = TG_F32));
  cr_assert(x && y);
  cr_assert_eq(be->unary(k, 1.0, 0.0, y, x), TG_OK, "%s", tg_last_error_message());
  return *(const float *)y->storage->data;
}

TG_TEST(vecmath, f32_rows_at_the_extremes_as_libm) {
  tg_scope sc = tg_scope_begin();
  cr_assert_eq(one(TG_UNARY_EXP, 89.0f), INFINITY);
  cr_assert_eq(one(TG_UNARY_EXP, INFINITY), INFINITY);
  cr_assert_eq(one(TG_UNARY_EXP, -104.0f), 0.0f);
  cr_assert_eq(one(TG_UNARY_EXP, -INFINITY), 0.0f);
  cr_assert_eq(one(TG_UNARY_EXP, -100.0f), expf(-100.0f)); /* subnormal, not clamped */
  cr_assert_eq(one(TG_UNARY_EXP, 0.0f), 1.0f);
  cr_assert_eq(one(TG_UNARY_SIGMOID, -200.0f), 0.0f);
  cr_assert_eq(one(TG_UNARY_SIGMOID, 200.0f), 1.0f);
  cr_assert_eq(one(TG_UNARY_SIGMOID, 0.0f), 0.5f);
  cr_assert_eq(one(TG_UNARY_TANH, 20.0f), 1.0f);
  cr_assert_eq(one(TG_UNARY_TANH, -INFINITY), -1.0f);
  cr_assert_eq(one(TG_UNARY_TANH, 0.0f), 0.0f);
  cr_assert_eq(one(TG_UNARY_ELU, -INFINITY), -1.0f);
  cr_assert_eq(one(TG_UNARY_ELU, INFINITY), INFINITY);
  /* -0 keeps its sign, as expm1 and PyTorch: elu(-0) = alpha * expm1(-0) = -0 */
  cr_assert(signbit(one(TG_UNARY_ELU, -0.0f)) && one(TG_UNARY_ELU, -0.0f) == 0.0f);
  cr_assert(!signbit(one(TG_UNARY_ELU, 0.0f)) && one(TG_UNARY_ELU, 0.0f) == 0.0f);
  cr_assert(signbit(one(TG_UNARY_TANH, -0.0f)) && one(TG_UNARY_TANH, -0.0f) == 0.0f);
  const tg_unary_kind nan_kinds[] = {TG_UNARY_EXP, TG_UNARY_SIGMOID, TG_UNARY_TANH, TG_UNARY_ELU};
  for (int i = 0; i < 4; i++) cr_assert(isnan(one(nan_kinds[i], NAN)), "kind %d", (int)i);
  tg_scope_end(sc);
}
