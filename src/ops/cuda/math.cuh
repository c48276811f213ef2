/* Per-element functors of the elementwise kernels, for float and double alike. Every libm
 * call goes through an overload that picks the float or the double function, so F64 is
 * never rounded through float (and F32 never silently promoted). Scalars are converted to
 * the element type first, as the CPU kernels do. */
#ifndef TG_CUDA_MATH_CUH
#define TG_CUDA_MATH_CUH

#include "cuda_common.cuh"
#include "ops/philox.h"
#include "ops/pointwise_math.h"
#include "tensor/checked.h"

#define TG_CU_MATH1(name, ffn, dfn)                                                                \
  static inline TG_HOST_DEVICE float name(float x) { return ffn(x); }                              \
  static inline TG_HOST_DEVICE double name(double x) { return dfn(x); }
TG_CU_MATH1(tg_cu_exp, expf, exp)
TG_CU_MATH1(tg_cu_log, logf, log)
TG_CU_MATH1(tg_cu_sqrt, sqrtf, sqrt)
TG_CU_MATH1(tg_cu_fabs, fabsf, fabs)
#undef TG_CU_MATH1
static inline TG_HOST_DEVICE float tg_cu_pow(float x, float y) { return powf(x, y); }
static inline TG_HOST_DEVICE double tg_cu_pow(double x, double y) { return pow(x, y); }

/* One functor for all unary kinds: the switch is on a kernel argument, the same branch for
 * every thread, and keeps the instantiations to one per dtype. */
template <typename T> struct tg_cu_unary_fn {
  tg_unary_kind kind;
  T a, b;
  TG_HOST_DEVICE T operator()(T x) const {
    switch (kind) {
    case TG_UNARY_NEG:
      return -x;
    case TG_UNARY_EXP:
      return tg_cu_exp(x);
    case TG_UNARY_LOG:
      return tg_cu_log(x);
    case TG_UNARY_SQRT:
      return tg_cu_sqrt(x);
    case TG_UNARY_SIGMOID:
      return tg_math_sigmoid(x);
    case TG_UNARY_TANH:
      return tg_math_tanh(x);
    case TG_UNARY_RELU:
      return tg_math_relu(x);
    case TG_UNARY_ELU:
      return tg_math_elu(x, a);
    case TG_UNARY_POW:
      return tg_cu_pow(x, a);
    case TG_UNARY_AFFINE:
      return a * x + b;
    case TG_UNARY_RECIPROCAL:
      return 1 / x;
    case TG_UNARY_STEP:
      return tg_math_step(x);
    case TG_UNARY_ABS:
      return tg_cu_fabs(x);
    case TG_NUM_UNARY:
      break;
    }
    return x;
  }
};

template <typename T> struct tg_cu_binary_fn {
  tg_binary_kind kind;
  T alpha;
  TG_HOST_DEVICE T operator()(T a, T b) const {
    switch (kind) {
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
    case TG_NUM_BINARY:
      break;
    }
    return a;
  }
};

template <typename T> struct tg_cu_fill_fn {
  T value;
  TG_HOST_DEVICE T operator()(int64_t) const { return value; }
};

template <typename To, typename From> struct tg_cu_convert_fn {
  TG_HOST_DEVICE To operator()(From x) const { return (To)x; }
};
/* To int64 from a float: a cast of NaN or of a value out of range is undefined; convert as
 * the CPU does (tensor/checked.h: NaN -> 0, saturating). */
template <typename From> struct tg_cu_convert_fn<int64_t, From> {
  TG_HOST_DEVICE int64_t operator()(From x) const { return tg__f64_to_i64((double)x); }
};
template <> struct tg_cu_convert_fn<int64_t, int64_t> {
  TG_HOST_DEVICE int64_t operator()(int64_t x) const { return x; }
};

/* Element i of a draw takes Philox stream position offset + i (ops/philox.h), so CUDA and
 * CPU draw the same numbers. */
static inline TG_HOST_DEVICE float tg_cu_philox_uniform(float, uint64_t seed, uint64_t p) {
  return tg_philox_uniform_f(seed, p);
}
static inline TG_HOST_DEVICE double tg_cu_philox_uniform(double, uint64_t seed, uint64_t p) {
  return tg_philox_uniform_d(seed, p);
}
static inline TG_HOST_DEVICE float tg_cu_philox_normal(float, uint64_t seed, uint64_t p) {
  return tg_philox_normal_f(seed, p);
}
static inline TG_HOST_DEVICE double tg_cu_philox_normal(double, uint64_t seed, uint64_t p) {
  return tg_philox_normal_d(seed, p);
}
static inline TG_HOST_DEVICE float tg_cu_scale_uniform(float u, float lo, float hi) {
  return tg_philox_scale_uniform_f(u, lo, hi);
}
static inline TG_HOST_DEVICE double tg_cu_scale_uniform(double u, double lo, double hi) {
  return tg_philox_scale_uniform_d(u, lo, hi);
}

template <typename T> struct tg_cu_random_fn {
  bool normal;
  uint64_t seed, offset;
  T a, b; /* [low, high) or (mean, std) */
  TG_HOST_DEVICE T operator()(int64_t i) const {
    uint64_t p = offset + (uint64_t)i;
    if (normal) return a + b * tg_cu_philox_normal(T(), seed, p);
    return tg_cu_scale_uniform(tg_cu_philox_uniform(T(), seed, p), a, b);
  }
};

#endif
