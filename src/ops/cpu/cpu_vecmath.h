/* Vectorizable float math for the CPU loops: the fused LLTM's passes (cpu_lltm.c) and the
 * F32 rows of the generic pointwise kinds (cpu_pointwise.c).
 *
 * Written so that the compiler vectorizes it: no libm calls, no branches (every value is
 * computed, then selected). libm's expf/tanhf are scalar calls (~25 ns per LLTM element);
 * these run the whole cell in a few ns per element once vectorized. A loop using them must
 * allow if-conversion of floating-point code: compile its file with
 * `#pragma GCC optimize("no-trapping-math")` before any include (tg never enables FP
 * exceptions; GCC inlines only functions compiled with the same options), and mark the
 * loop's function TG_VF_CLONES so it runs AVX-512 or AVX2 where the CPU has them.
 *
 * Accuracy against the correctly rounded result (tests/ops/test_vecmath.c measures it over
 * [-110, 90], near 0 and at the range ends, for every float of a fine sweep): exp <= 1.5
 * ulp; expm1, sigmoid, tanh, elu(x, 1) <= 3 ulp (ulp of the result, relative; float ulp =
 * 6e-8). Like libm's: exp underflows through the subnormals to 0 (below -103.97) and
 * overflows to inf (above 88.72), so sigmoid(-200) is 0 and tanh(+-20) is +-1 exactly;
 * NaN in gives NaN out. F64 keeps libm (precision first). */
#ifndef TG_CPU_VECMATH_H
#define TG_CPU_VECMATH_H

#include <stdint.h>
#include <string.h>

static inline float tg_vf_from_bits(int32_t bits) {
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

/* exp(x) by x = n ln2 + r, |r| <= ln2/2: 2^n times a degree-7 polynomial in r (Cephes'
 * expf coefficients); the rounding of n uses the 1.5 * 2^23 trick (no roundf call). 2^n is
 * applied as two normal factors 2^(n/2) 2^(n - n/2): the first product is exact, the second
 * rounds once, into the subnormals or to inf where the result lies there. */
static inline float tg_vf_exp(float x) {
  x = x < -104.0f ? -104.0f : x; /* exp(-104) rounds to 0 */
  x = x > 89.0f ? 89.0f : x;     /* exp(89) overflows */
  const float round_magic = 12582912.0f;
  float n = (x * 1.44269504088896341f + round_magic) - round_magic;
  float r = x - n * 0.693359375f; /* ln2 split in two for an exact first product */
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  /* The int conversion of a NaN n would be undefined: take 0 there (the NaN reaches the
   * result through r). */
  const int32_t ni = (int32_t)(n == n ? n : 0.0f), n1 = ni / 2, n2 = ni - n1; /* in [-75, 64] */
  return p * tg_vf_from_bits((n1 + 127) << 23) * tg_vf_from_bits((n2 + 127) << 23);
}

/* exp(x) - 1: Taylor to x^7 near 0 (|x| < ln2/2, where exp(x) - 1 would cancel), else
 * exp(x) - 1. At x = -0 the Taylor sum -0 + (+0) is +0: x itself keeps the sign, as libm's
 * expm1 (elu(-0) = alpha * -0 = -0 as in PyTorch); one more select, no cost in the loop. */
static inline float tg_vf_expm1(float x) {
  float s = 1.0f / 5040;
  s = s * x + 1.0f / 720;
  s = s * x + 1.0f / 120;
  s = s * x + 1.0f / 24;
  s = s * x + 1.0f / 6;
  s = s * x + 0.5f;
  float near_zero = x + x * x * s;
  float far = tg_vf_exp(x) - 1.0f;
  near_zero = x == 0.0f ? x : near_zero;
  return __builtin_fabsf(x) < 0.34657359f ? near_zero : far;
}

/* 1/(1+exp(-x)) from e = exp(-|x|) <= 1 (never overflows). */
static inline float tg_vf_sigmoid(float x) {
  float e = tg_vf_exp(-__builtin_fabsf(x));
  float s = 1.0f / (1.0f + e);
  float es = e * s;
  return x >= 0.0f ? s : es;
}

/* tanh(|x|) = -u / (u + 2) with u = expm1(-2|x|), accurate near 0; sign restored. */
static inline float tg_vf_tanh(float x) {
  float u = tg_vf_expm1(-2.0f * __builtin_fabsf(x));
  return __builtin_copysignf(-u / (u + 2.0f), x);
}

static inline float tg_vf_elu(float x, float alpha) {
  float neg = alpha * tg_vf_expm1(x);
  return x > 0.0f ? x : neg;
}

static inline float tg_vf_d_elu(float z, float alpha) {
  float neg = alpha * tg_vf_exp(z);
  return z > 0.0f ? 1.0f : neg;
}

/* issue 25, helper "pointwise": gelu's tanh form and its derivative, written with
 * 1 + tanh(u) = 2 sigmoid(2u) and 1 - tanh(u)^2 = 4 s (1 - s): the same functions as
 * ops/pointwise_math.h's, but without the cancellation of 1 + tanh(u) for x < 0, which would
 * turn tanh's few ulp into a large relative error of a small result. */
static inline float tg_vf_gelu_tanh(float x) {
  const float u = 0.79788456080286535588f * (x + 0.044715f * (x * x * x));
  return x * tg_vf_sigmoid(2.0f * u);
}
static inline float tg_vf_gelu_tanh_slope(float x) {
  const float x_sq = x * x;
  const float s = tg_vf_sigmoid(2.0f * 0.79788456080286535588f * (x + 0.044715f * (x_sq * x)));
  const float du = 0.79788456080286535588f * (1.0f + 3.0f * 0.044715f * x_sq);
  return s + 2.0f * x * (s * (1.0f - s)) * du;
}
static inline float tg_vf_silu_slope(float x) {
  const float s = 1.0f / (1.0f + tg_vf_exp(-x));
  return s * (1.0f + x * (1.0f - s));
}

/* Compiles a function for AVX-512, AVX2 and baseline x86-64, picked at load time. Not under
 * ThreadSanitizer: the clones' ifunc resolver is instrumented and runs while the executable
 * is relocated, before the TSan runtime is initialised (a crash at start-up). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__gnu_linux__) &&   \
    !defined(__SANITIZE_THREAD__)
#define TG_VF_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TG_VF_CLONES
#endif

#endif
