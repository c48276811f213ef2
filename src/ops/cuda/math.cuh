/* Per-element functors of the elementwise kernels, for float and double alike. Every libm
 * call goes through an overload that picks the float or the double function, so F64 is
 * never rounded through float (and F32 never silently promoted). Scalars are converted to
 * the element type first, as the CPU kernels do. */
#ifndef TG_CUDA_MATH_CUH
#define TG_CUDA_MATH_CUH

#include "cuda_common.cuh"
#include "ops/philox.h"
#include "ops/pointwise_int_math.h"
#include "ops/pointwise_math.h"
#include "tensor/checked.h"

/* One functor for all unary kinds: the switch is on a kernel argument, the same branch for
 * every thread, and keeps the instantiations to one per dtype. The cases are generated
 * from the kind list; the math is shared with the CPU (ops/pointwise_math.h). */
template <typename T> struct tg_cu_unary_fn {
  tg_unary_kind kind;
  T a, b;
  TG_HOST_DEVICE T operator()(T x) const {
    switch (kind) {
#define TG_UNARY_KIND(KIND, name, cost)                                                            \
  case TG_UNARY_##KIND:                                                                            \
    return tg_unary_##name(x, a, b);
#include "ops/def/unary.def"
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
#define TG_BINARY_KIND(KIND, name)                                                                 \
  case TG_BINARY_##KIND:                                                                           \
    return tg_binary_##name(a, b, alpha);
#include "ops/def/binary.def"
    case TG_NUM_BINARY:
      break;
    }
    return a;
  }
};

/* The int64 kinds (ops/pointwise_int_math.h): only those take int64; the scalars are whole
 * numbers checked by the front ends, converted as the CPU converts them. */
static inline bool tg_cu_unary_takes_int(tg_unary_kind kind) {
  switch (kind) {
#define TG__CASE(KIND, name) case TG_UNARY_##KIND:
    TG_UNARY_INT_KINDS(TG__CASE)
#undef TG__CASE
    return true;
  default:
    return false;
  }
}
static inline bool tg_cu_binary_takes_int(tg_binary_kind kind) {
  switch (kind) {
#define TG__CASE(KIND, name) case TG_BINARY_##KIND:
    TG_BINARY_INT_KINDS(TG__CASE)
#undef TG__CASE
    return true;
  default:
    return false;
  }
}

struct tg_cu_unary_int_fn {
  tg_unary_kind kind;
  int64_t a, b;
  TG_HOST_DEVICE int64_t operator()(int64_t x) const {
    switch (kind) {
#define TG__CASE(KIND, name)                                                                       \
  case TG_UNARY_##KIND:                                                                            \
    return tg_unary_##name##_i(x, a, b);
      TG_UNARY_INT_KINDS(TG__CASE)
#undef TG__CASE
    default:
      break;
    }
    return x;
  }
};

struct tg_cu_binary_int_fn {
  tg_binary_kind kind;
  int64_t alpha;
  TG_HOST_DEVICE int64_t operator()(int64_t a, int64_t b) const {
    switch (kind) {
#define TG__CASE(KIND, name)                                                                       \
  case TG_BINARY_##KIND:                                                                           \
    return tg_binary_##name##_i(a, b, alpha);
      TG_BINARY_INT_KINDS(TG__CASE)
#undef TG__CASE
    default:
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
 * the CPU does (tensor/checked.h: INT64_MIN for NaN, +-inf and out of range). */
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
