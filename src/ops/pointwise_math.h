/* Scalar pointwise math shared by the CPU loops and the CUDA kernels (and the LLTM cell).
 *
 * Every function exists for float (`_f`, computed with the float libm functions expf,
 * tanhf, expm1f) and for double (`_d`, computed with exp, tanh, expm1): F64 is never
 * rounded through float. All are finite for every finite input (no exp overflow: sigmoid
 * only ever exponentiates a non-positive number, elu only for x <= 0).
 *
 * Type-generic spellings for code written over `scalar_t`: `tg_math_sigmoid(x)` etc.,
 * _Generic macros in C11 and overloads in C++ (the CUDA emulation build and nvcc).
 *
 * Compiles as C11, C++17 and under nvcc (functions are __host__ __device__ there). */
#ifndef TG_POINTWISE_MATH_H
#define TG_POINTWISE_MATH_H

#include <math.h>

#include "tensor/hostdevice.h"

/* ---- float ---- */

/* 1/(1+exp(-x)), evaluated so that exp never sees a positive argument. */
static inline TG_HOST_DEVICE float tg_sigmoid_f(float x) {
  if (x >= 0.0f) return 1.0f / (1.0f + expf(-x));
  float e = expf(x);
  return e / (1.0f + e);
}
static inline TG_HOST_DEVICE float tg_tanh_f(float x) { return tanhf(x); }
/* x > 0 ? x : alpha*(exp(x)-1); expm1 keeps precision near 0. */
static inline TG_HOST_DEVICE float tg_elu_f(float x, float alpha) {
  return x > 0.0f ? x : alpha * expm1f(x);
}
/* max(x, 0); NaN propagates (NaN < 0 is false). */
static inline TG_HOST_DEVICE float tg_relu_f(float x) { return x < 0.0f ? 0.0f : x; }
/* x <= 0 ? 0 : 1: the derivative of relu, 0 at 0 and 1 at NaN, as PyTorch's
 * threshold_backward (y <= 0 ? 0 : g) passes g through at NaN. */
static inline TG_HOST_DEVICE float tg_step_f(float x) { return x <= 0.0f ? 0.0f : 1.0f; }
/* Derivatives of the LLTM cell, written in terms of what the forward pass saved. */
static inline TG_HOST_DEVICE float tg_d_sigmoid_f(float s) { return s * (1.0f - s); }
static inline TG_HOST_DEVICE float tg_d_tanh_f(float t) { return 1.0f - t * t; }
static inline TG_HOST_DEVICE float tg_d_elu_f(float z, float alpha) {
  return z > 0.0f ? 1.0f : alpha * expf(z);
}

/* ---- double ---- */

static inline TG_HOST_DEVICE double tg_sigmoid_d(double x) {
  if (x >= 0.0) return 1.0 / (1.0 + exp(-x));
  double e = exp(x);
  return e / (1.0 + e);
}
static inline TG_HOST_DEVICE double tg_tanh_d(double x) { return tanh(x); }
static inline TG_HOST_DEVICE double tg_elu_d(double x, double alpha) {
  return x > 0.0 ? x : alpha * expm1(x);
}
static inline TG_HOST_DEVICE double tg_relu_d(double x) { return x < 0.0 ? 0.0 : x; }
static inline TG_HOST_DEVICE double tg_step_d(double x) { return x <= 0.0 ? 0.0 : 1.0; }
static inline TG_HOST_DEVICE double tg_d_sigmoid_d(double s) { return s * (1.0 - s); }
static inline TG_HOST_DEVICE double tg_d_tanh_d(double t) { return 1.0 - t * t; }
static inline TG_HOST_DEVICE double tg_d_elu_d(double z, double alpha) {
  return z > 0.0 ? 1.0 : alpha * exp(z);
}

/* ---- type-generic spellings: tg_math_<name>(x) ----
 * (Not tg_sigmoid(x): that is the public tensor op in tg/ops.h.) */

#ifdef __cplusplus
/* alpha is taken as double in both overloads so that x alone picks the precision. */
#define TG__PM_OVERLOAD1(name)                                                                     \
  static inline TG_HOST_DEVICE float tg_math_##name(float x) { return tg_##name##_f(x); }          \
  static inline TG_HOST_DEVICE double tg_math_##name(double x) { return tg_##name##_d(x); }
#define TG__PM_OVERLOAD2(name)                                                                     \
  static inline TG_HOST_DEVICE float tg_math_##name(float x, double a) {                           \
    return tg_##name##_f(x, (float)a);                                                             \
  }                                                                                                \
  static inline TG_HOST_DEVICE double tg_math_##name(double x, double a) {                         \
    return tg_##name##_d(x, a);                                                                    \
  }
TG__PM_OVERLOAD1(sigmoid)
TG__PM_OVERLOAD1(tanh)
TG__PM_OVERLOAD2(elu)
TG__PM_OVERLOAD1(relu)
TG__PM_OVERLOAD1(step)
TG__PM_OVERLOAD1(d_sigmoid)
TG__PM_OVERLOAD1(d_tanh)
TG__PM_OVERLOAD2(d_elu)
#undef TG__PM_OVERLOAD1
#undef TG__PM_OVERLOAD2
#else
/* The first argument's type picks the precision; alpha is converted to it. */
#define TG__PM_GENERIC(name, x) _Generic((x), float : tg_##name##_f, double : tg_##name##_d)
#define tg_math_sigmoid(x) TG__PM_GENERIC(sigmoid, x)(x)
#define tg_math_tanh(x) TG__PM_GENERIC(tanh, x)(x)
#define tg_math_elu(x, alpha) TG__PM_GENERIC(elu, x)((x), (alpha))
#define tg_math_relu(x) TG__PM_GENERIC(relu, x)(x)
#define tg_math_step(x) TG__PM_GENERIC(step, x)(x)
#define tg_math_d_sigmoid(s) TG__PM_GENERIC(d_sigmoid, s)(s)
#define tg_math_d_tanh(t) TG__PM_GENERIC(d_tanh, t)(t)
#define tg_math_d_elu(z, alpha) TG__PM_GENERIC(d_elu, z)((z), (alpha))
#endif

/* ---- the element math of every unary and binary kind (ops/def/unary.def, binary.def) ----
 * tg_unary_<name>_f / _d (x, a, b) and tg_binary_<name>_f / _d (a, b, alpha), one
 * expression per kind written once over `x` (or `a`, `b`) and the scalars, which are
 * already in the element type. The libm calls go through tg_m_* so that float stays
 * float and double stays double. In C++ (CUDA) tg_unary_<name>(x, a, b) and
 * tg_binary_<name>(a, b, alpha) are overloaded on the element type. */

#ifdef __cplusplus
#define TG__M1(name, ffn, dfn)                                                                     \
  static inline TG_HOST_DEVICE float tg_m_##name(float x) { return ffn(x); }                       \
  static inline TG_HOST_DEVICE double tg_m_##name(double x) { return dfn(x); }
TG__M1(exp, expf, exp)
TG__M1(log, logf, log)
TG__M1(sqrt, sqrtf, sqrt)
TG__M1(fabs, fabsf, fabs)
TG__M1(log1p, log1pf, log1p)
TG__M1(erf, erff, erf)
TG__M1(tanh, tanhf, tanh)
#undef TG__M1
#define TG__UNARY_OVERLOADS(name)                                                                  \
  static inline TG_HOST_DEVICE float tg_unary_##name(float x, float a, float b) {                  \
    return tg_unary_##name##_f(x, a, b);                                                           \
  }                                                                                                \
  static inline TG_HOST_DEVICE double tg_unary_##name(double x, double a, double b) {              \
    return tg_unary_##name##_d(x, a, b);                                                           \
  }
#define TG__BINARY_OVERLOADS(name)                                                                 \
  static inline TG_HOST_DEVICE float tg_binary_##name(float a, float b, float alpha) {             \
    return tg_binary_##name##_f(a, b, alpha);                                                      \
  }                                                                                                \
  static inline TG_HOST_DEVICE double tg_binary_##name(double a, double b, double alpha) {         \
    return tg_binary_##name##_d(a, b, alpha);                                                      \
  }
#else
#define tg_m_exp(x) _Generic((x), float : expf, double : exp)(x)
#define tg_m_log(x) _Generic((x), float : logf, double : log)(x)
#define tg_m_sqrt(x) _Generic((x), float : sqrtf, double : sqrt)(x)
#define tg_m_fabs(x) _Generic((x), float : fabsf, double : fabs)(x)
#define tg_m_log1p(x) _Generic((x), float : log1pf, double : log1p)(x)
#define tg_m_erf(x) _Generic((x), float : erff, double : erf)(x)
#define tg_m_tanh(x) _Generic((x), float : tanhf, double : tanh)(x)
#define TG__UNARY_OVERLOADS(name)
#define TG__BINARY_OVERLOADS(name)
#endif

/* x^p as PyTorch computes it (its CPU and CUDA kernels alike): p = 0.5 is sqrt, -0.5 is
 * 1/sqrt, so that sqrt(-0) = -0, 1/sqrt(-0) = -inf and both are NaN at -inf, where pow
 * gives +0, +inf and +inf, 0; p = 2, 3, -1, -2 are products and quotients. */
static inline TG_HOST_DEVICE float tg_pow_scalar_f(float x, float p) {
  if (p == 0.5f) return sqrtf(x);
  if (p == -0.5f) return 1.0f / sqrtf(x);
  if (p == 2.0f) return x * x;
  if (p == 3.0f) return x * x * x;
  if (p == -1.0f) return 1.0f / x;
  if (p == -2.0f) return 1.0f / (x * x);
  return powf(x, p);
}
static inline TG_HOST_DEVICE double tg_pow_scalar_d(double x, double p) {
  if (p == 0.5) return sqrt(x);
  if (p == -0.5) return 1.0 / sqrt(x);
  if (p == 2.0) return x * x;
  if (p == 3.0) return x * x * x;
  if (p == -1.0) return 1.0 / x;
  if (p == -2.0) return 1.0 / (x * x);
  return pow(x, p);
}
#ifdef __cplusplus
static inline TG_HOST_DEVICE float tg_m_pow_scalar(float x, float p) {
  return tg_pow_scalar_f(x, p);
}
static inline TG_HOST_DEVICE double tg_m_pow_scalar(double x, double p) {
  return tg_pow_scalar_d(x, p);
}
#else
#define tg_m_pow_scalar(x, p)                                                                      \
  _Generic((x), float : tg_pow_scalar_f, double : tg_pow_scalar_d)((x), (p))
#endif

/* Defines tg_unary_<name>_f and _d from one expression over x, a, b. */
#define TG_UNARY_MATH(name, expr)                                                                  \
  static inline TG_HOST_DEVICE float tg_unary_##name##_f(float x, float a, float b) {              \
    (void)a;                                                                                       \
    (void)b;                                                                                       \
    return (expr);                                                                                 \
  }                                                                                                \
  static inline TG_HOST_DEVICE double tg_unary_##name##_d(double x, double a, double b) {          \
    (void)a;                                                                                       \
    (void)b;                                                                                       \
    return (expr);                                                                                 \
  }                                                                                                \
  TG__UNARY_OVERLOADS(name)
/* Defines tg_binary_<name>_f and _d from one expression over a, b, alpha. */
#define TG_BINARY_MATH(name, expr)                                                                 \
  static inline TG_HOST_DEVICE float tg_binary_##name##_f(float a, float b, float alpha) {         \
    (void)alpha;                                                                                   \
    return (expr);                                                                                 \
  }                                                                                                \
  static inline TG_HOST_DEVICE double tg_binary_##name##_d(double a, double b, double alpha) {     \
    (void)alpha;                                                                                   \
    return (expr);                                                                                 \
  }                                                                                                \
  TG__BINARY_OVERLOADS(name)

/* ---- issue 25, helper "pointwise": gelu (erf and tanh forms), silu and their derivatives,
 * in PyTorch's formulas and order of operations (its CPU kernels), so F64 agrees to the last
 * bits. TG__PM_T1(name, T, body) defines tg_<name>_f (T = float) and tg_<name>_d (T =
 * double) from one body over x, and the type-generic tg_<name>(x). ---- */
#define TG__GELU_SQRT1_2 0.70710678118654752440 /* M_SQRT1_2 */
#define TG__GELU_PDF 0.39894228040143267794     /* M_2_SQRTPI * M_SQRT1_2 * 0.5 */
#define TG__GELU_BETA 0.79788456080286535588    /* M_SQRT2 * M_2_SQRTPI * 0.5 */
#define TG__GELU_KAPPA 0.044715
#ifdef __cplusplus
#define TG__PM_T1(name, body)                                                                      \
  static inline TG_HOST_DEVICE float tg_##name##_f(float x) {                                      \
    typedef float T;                                                                               \
    body                                                                                           \
  }                                                                                                \
  static inline TG_HOST_DEVICE double tg_##name##_d(double x) {                                    \
    typedef double T;                                                                              \
    body                                                                                           \
  }                                                                                                \
  static inline TG_HOST_DEVICE float tg_##name(float x) { return tg_##name##_f(x); }               \
  static inline TG_HOST_DEVICE double tg_##name(double x) { return tg_##name##_d(x); }
#else
#define TG__PM_T1(name, body)                                                                      \
  static inline TG_HOST_DEVICE float tg_##name##_f(float x) {                                      \
    typedef float T;                                                                               \
    body                                                                                           \
  }                                                                                                \
  static inline TG_HOST_DEVICE double tg_##name##_d(double x) {                                    \
    typedef double T;                                                                              \
    body                                                                                           \
  }
#endif
/* x Phi(x) = x/2 (1 + erf(x / sqrt 2)) */
TG__PM_T1(gelu_erf, return x * (T)0.5 * (1 + tg_m_erf(x * (T)TG__GELU_SQRT1_2));)
/* x/2 (1 + tanh(beta (x + kappa x^3))) */
TG__PM_T1(gelu_tanh, const T inner = (T)TG__GELU_BETA * (x + (T)TG__GELU_KAPPA * (x * x * x));
          return (T)0.5 * x * (1 + tg_m_tanh(inner));)
/* Phi(x) + x phi(x) */
TG__PM_T1(gelu_erf_slope, const T cdf = (T)0.5 * (1 + tg_m_erf(x * (T)TG__GELU_SQRT1_2));
          const T pdf = (T)TG__GELU_PDF * tg_m_exp(x * x * (T)-0.5); return cdf + x * pdf;)
/* 0.5 (1 + t) + 0.5 x (1 - t^2) beta (1 + 3 kappa x^2), t = tanh(beta (x + kappa x^3)) */
TG__PM_T1(gelu_tanh_slope, const T x_sq = x * x; const T x_cube = x_sq * x;
          const T t = tg_m_tanh((T)TG__GELU_BETA * (x + (T)TG__GELU_KAPPA * x_cube));
          const T left = (T)0.5 * x; const T right = 1 + t;
          const T inner_d = (T)TG__GELU_BETA * (1 + 3 * (T)TG__GELU_KAPPA * x_sq);
          return (T)0.5 * right + left * (1 - t * t) * inner_d;)
/* s (1 + x (1 - s)), s = 1 / (1 + e^-x): PyTorch's silu_backward */
TG__PM_T1(silu_slope, const T s = 1 / (1 + tg_m_exp(-x)); return s * (1 + x * (1 - s));)
#undef TG__PM_T1
#ifndef __cplusplus
#define TG__PM_PICK(name, x) _Generic((x), float : tg_##name##_f, double : tg_##name##_d)(x)
#define tg_gelu_erf(x) TG__PM_PICK(gelu_erf, x)
#define tg_gelu_tanh(x) TG__PM_PICK(gelu_tanh, x)
#define tg_gelu_erf_slope(x) TG__PM_PICK(gelu_erf_slope, x)
#define tg_gelu_tanh_slope(x) TG__PM_PICK(gelu_tanh_slope, x)
#define tg_silu_slope(x) TG__PM_PICK(silu_slope, x)
#endif

TG_UNARY_MATH(neg, -x)
TG_UNARY_MATH(exp, tg_m_exp(x))
TG_UNARY_MATH(log, tg_m_log(x))
TG_UNARY_MATH(sqrt, tg_m_sqrt(x))
TG_UNARY_MATH(sigmoid, tg_math_sigmoid(x))
TG_UNARY_MATH(tanh, tg_math_tanh(x))
TG_UNARY_MATH(relu, tg_math_relu(x))
TG_UNARY_MATH(elu, tg_math_elu(x, a))
TG_UNARY_MATH(pow_scalar, tg_m_pow_scalar(x, a))
TG_UNARY_MATH(affine, b + a * x)
TG_UNARY_MATH(reciprocal, 1 / x)
TG_UNARY_MATH(step, tg_math_step(x))
TG_UNARY_MATH(abs, tg_m_fabs(x))
/* as PyTorch's threshold 20: above it log(1 + e^x) is x to working precision */
TG_UNARY_MATH(softplus, x > 20 ? x : tg_m_log1p(tg_m_exp(x)))
TG_UNARY_MATH(mul_scalar, x *a)
TG_UNARY_MATH(div_scalar, x / a)

/* ---- issue 25, helper "pointwise" ---- */
TG_UNARY_MATH(gelu, tg_gelu_erf(x))
TG_UNARY_MATH(gelu_tanh, tg_gelu_tanh(x))
/* x sigmoid(x) as PyTorch writes it: x / (1 + e^-x) (NaN at -inf, -0 at -0) */
TG_UNARY_MATH(silu, x / (1 + tg_m_exp(-x)))
/* max(x, lo) then min(., hi): a NaN bound compares false (no bound on that side), a NaN x
 * stays NaN, and lo > hi gives hi everywhere, as PyTorch's clamp. */
TG_UNARY_MATH(clamp, (x < a ? a : x) > b ? b : (x < a ? a : x))
/* clamp's derivative by PyTorch 2.15's rule: 1 strictly inside (lo, hi), 0 at a bound,
 * outside it and at NaN; a NaN bound is no bound. */
TG_UNARY_MATH(clamp_slope, (x > a || a != a) && (x < b || b != b) ? 1 : 0)
/* g f'(x) for gelu's two forms and silu (a = g, b = x) */
TG_BINARY_MATH(gelu_backward, a *tg_gelu_erf_slope(b))
TG_BINARY_MATH(gelu_tanh_backward, a *tg_gelu_tanh_slope(b))
TG_BINARY_MATH(silu_backward, a *tg_silu_slope(b))
/* NaN propagates; a tie gives a (maximum(-0, 0) is -0), as PyTorch */
TG_BINARY_MATH(maximum, a != a ? a : b != b ? b : a < b ? b : a)
TG_BINARY_MATH(minimum, a != a ? a : b != b ? b : a > b ? b : a)

TG_BINARY_MATH(add, a + alpha * b)
TG_BINARY_MATH(sub, a - alpha * b)
TG_BINARY_MATH(mul, a *b)
TG_BINARY_MATH(div, a / b)
TG_BINARY_MATH(eq, a == b ? 1 : 0)
TG_BINARY_MATH(ge, a >= b ? 1 : 0)
TG_BINARY_MATH(ne, a != b ? 1 : 0)
TG_BINARY_MATH(gt, a > b ? 1 : 0)
TG_BINARY_MATH(lt, a < b ? 1 : 0)
TG_BINARY_MATH(le, a <= b ? 1 : 0)

#endif
