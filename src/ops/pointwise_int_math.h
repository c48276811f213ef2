/* The int64 element math of the pointwise kinds that take I64 (docs/dtypes.md), shared by the
 * CPU rows (cpu/cpu_pointwise_int.c) and the CUDA kernels (cuda/pointwise.cu).
 *
 * Arithmetic wraps around modulo 2^64, as PyTorch's int64 does: it is done in uint64_t,
 * since signed overflow is undefined behaviour (and UBSan runs in CI); the conversion back
 * to int64_t is two's complement on every compiler tg supports. The scalars (alpha, the
 * affine a and b) are whole numbers within int64, checked by the front ends before they
 * reach a kernel (ops/promotion.h), so converting them here is exact.
 *
 * Compiles as C11, C++17 and under nvcc (functions are __host__ __device__ there). */
#ifndef TG_POINTWISE_INT_MATH_H
#define TG_POINTWISE_INT_MATH_H

#include <stdint.h>

#include "tensor/hostdevice.h"

static inline TG_HOST_DEVICE uint64_t tg_i64_bits(int64_t x) { return (uint64_t)x; }
static inline TG_HOST_DEVICE int64_t tg_i64_of_bits(uint64_t x) { return (int64_t)x; }

/* ---- unary: neg, abs, relu and pow_scalar (a whole exponent a >= 0) stay int64; affine
 * (b + a*x) and mul_scalar (x*a) are the scalar ops' ---- */
static inline TG_HOST_DEVICE int64_t tg_unary_neg_i(int64_t x, int64_t a, int64_t b) {
  (void)a, (void)b;
  return tg_i64_of_bits(0u - tg_i64_bits(x)); /* -INT64_MIN wraps to INT64_MIN */
}
static inline TG_HOST_DEVICE int64_t tg_unary_abs_i(int64_t x, int64_t a, int64_t b) {
  return x < 0 ? tg_unary_neg_i(x, a, b) : x;
}
static inline TG_HOST_DEVICE int64_t tg_unary_relu_i(int64_t x, int64_t a, int64_t b) {
  (void)a, (void)b;
  return x < 0 ? 0 : x;
}
static inline TG_HOST_DEVICE int64_t tg_unary_affine_i(int64_t x, int64_t a, int64_t b) {
  return tg_i64_of_bits(tg_i64_bits(b) + tg_i64_bits(a) * tg_i64_bits(x));
}
static inline TG_HOST_DEVICE int64_t tg_unary_mul_scalar_i(int64_t x, int64_t a, int64_t b) {
  (void)b;
  return tg_i64_of_bits(tg_i64_bits(x) * tg_i64_bits(a));
}

/* x^a by squaring, wrapping like repeated multiplication (x^0 is 1, as PyTorch). */
static inline TG_HOST_DEVICE int64_t tg_unary_pow_scalar_i(int64_t x, int64_t a, int64_t b) {
  (void)b;
  uint64_t base = tg_i64_bits(x), result = 1;
  for (uint64_t e = tg_i64_bits(a); e; e >>= 1) {
    if (e & 1) result *= base;
    base *= base;
  }
  return tg_i64_of_bits(result);
}

/* ---- binary: add, sub, mul (div is true division: the front end computes it in F32) and
 * the comparisons (1 or 0) ---- */
static inline TG_HOST_DEVICE int64_t tg_binary_add_i(int64_t a, int64_t b, int64_t alpha) {
  return tg_i64_of_bits(tg_i64_bits(a) + tg_i64_bits(alpha) * tg_i64_bits(b));
}
static inline TG_HOST_DEVICE int64_t tg_binary_sub_i(int64_t a, int64_t b, int64_t alpha) {
  return tg_i64_of_bits(tg_i64_bits(a) - tg_i64_bits(alpha) * tg_i64_bits(b));
}
static inline TG_HOST_DEVICE int64_t tg_binary_mul_i(int64_t a, int64_t b, int64_t alpha) {
  (void)alpha;
  return tg_i64_of_bits(tg_i64_bits(a) * tg_i64_bits(b));
}
#define TG__INT_CMP(name, rel)                                                                     \
  static inline TG_HOST_DEVICE int64_t tg_binary_##name##_i(int64_t a, int64_t b, int64_t alpha) { \
    (void)alpha;                                                                                   \
    return a rel b ? 1 : 0;                                                                        \
  }
TG__INT_CMP(eq, ==)
TG__INT_CMP(ne, !=)
TG__INT_CMP(gt, >)
TG__INT_CMP(ge, >=)
TG__INT_CMP(lt, <)
TG__INT_CMP(le, <=)
#undef TG__INT_CMP
/* maximum / minimum (issue 25, helper "pointwise") */
static inline TG_HOST_DEVICE int64_t tg_binary_maximum_i(int64_t a, int64_t b, int64_t alpha) {
  (void)alpha;
  return a < b ? b : a;
}
static inline TG_HOST_DEVICE int64_t tg_binary_minimum_i(int64_t a, int64_t b, int64_t alpha) {
  (void)alpha;
  return a > b ? b : a;
}

/* The kinds above, for the tables of both backends: X(KIND, name) per kind. */
/* Unformatted: clang-format 14 does not settle on one layout for these lists. */
/* clang-format off */
#define TG_UNARY_INT_KINDS(X) \
  X(NEG, neg) X(ABS, abs) X(RELU, relu) X(POW, pow_scalar) X(AFFINE, affine) \
  X(MUL_SCALAR, mul_scalar)
#define TG_BINARY_INT_KINDS(X) \
  X(ADD, add) X(SUB, sub) X(MUL, mul) X(EQ, eq) X(NE, ne) X(GT, gt) X(GE, ge) X(LT, lt) \
  X(LE, le) X(MAXIMUM, maximum) X(MINIMUM, minimum)
/* clang-format on */

#endif
