/* Float math for the fused LLTM's CPU loops, written so that the compiler vectorizes it:
 * no libm calls, no branches (every value is computed, then selected). libm's expf/tanhf
 * are scalar calls (~25 ns per LLTM element); these run the whole cell in a few ns per
 * element once vectorized. A loop using them must allow if-conversion of floating-point
 * code: compile it without trapping math (tg never enables FP exceptions).
 *
 * Accuracy against the correctly rounded result (measured over [-100, 88] and near 0):
 * exp <= 1.5 ulp, expm1, sigmoid, tanh <= 3 ulp (relative, float ulp = 6e-8). Inputs are
 * clamped to exp's normal range: exp(x) for x < -87.3 returns exp(-87.3) ~ 1.2e-38 instead
 * of a subnormal, which changes no LLTM result beyond 1e-37. F64 keeps libm (precision
 * first; its loops are not the benchmark's). */
#ifndef TG_LLTM_CPU_MATH_H
#define TG_LLTM_CPU_MATH_H

#include <stdint.h>
#include <string.h>

#include "ops/lltm_cell.h"

static inline float tg_vf_from_bits(int32_t bits) {
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

/* exp(x) by x = n ln2 + r, |r| <= ln2/2: 2^n times a degree-7 polynomial in r (Cephes'
 * expf coefficients); the rounding of n uses the 1.5 * 2^23 trick (no roundf call). */
static inline float tg_vf_exp(float x) {
  x = x < -87.3f ? -87.3f : x;
  x = x > 88.0f ? 88.0f : x;
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
  return p * tg_vf_from_bits(((int32_t)n + 127) << 23);
}

/* exp(x) - 1: Taylor to x^7 near 0 (|x| < ln2/2, where exp(x) - 1 would cancel), else
 * exp(x) - 1. */
static inline float tg_vf_expm1(float x) {
  float s = 1.0f / 5040;
  s = s * x + 1.0f / 720;
  s = s * x + 1.0f / 120;
  s = s * x + 1.0f / 24;
  s = s * x + 1.0f / 6;
  s = s * x + 0.5f;
  float near_zero = x + x * x * s;
  float far = tg_vf_exp(x) - 1.0f;
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

/* tg_lltm_cell_*_vf: the LLTM cell over this math. */
TG_LLTM_CELL_DEFINE(float, _vf, 1.0f, tg_vf_sigmoid, tg_vf_tanh, tg_vf_elu, tg_vf_d_elu)

#endif
