/* Overflow-checked int64 arithmetic for sizes, strides and offsets. Each returns true when
 * the exact result does not fit (and then *out is unspecified). Not part of the public API. */
#ifndef TG_CHECKED_H
#define TG_CHECKED_H

#include <stdbool.h>
#include <stdint.h>

#include "tensor/hostdevice.h"

static inline bool tg__mul_ovf(int64_t a, int64_t b, int64_t *out) {
  return __builtin_mul_overflow(a, b, out);
}
static inline bool tg__add_ovf(int64_t a, int64_t b, int64_t *out) {
  return __builtin_add_overflow(a, b, out);
}
static inline bool tg__sub_ovf(int64_t a, int64_t b, int64_t *out) {
  return __builtin_sub_overflow(a, b, out);
}

/* double -> int64 without undefined behaviour (a C cast of NaN or of a value out of range
 * is undefined): NaN, +-inf and every value outside [-2^63, 2^63) give INT64_MIN, what
 * x86-64's cvttsd2si returns and so what PyTorch's .to(torch.int64) gives on CPU; in range
 * it truncates toward zero like the cast. CPU loops and CUDA kernels share it. */
static inline TG_HOST_DEVICE int64_t tg__f64_to_i64(double v) {
  const double two63 = 9223372036854775808.0;
  if (!(v >= -two63 && v < two63)) return INT64_MIN;
  return (int64_t)v;
}

/* The product of the sizes with 0 counted as 1: the number of elements a contiguous layout
 * of these sizes would have if no dim were empty. tg keeps it within int64 for every tensor,
 * so numel and contiguous strides never overflow even when a later dim is 0. True on
 * overflow. Sizes must be non-negative. */
static inline bool tg__extent_ovf(int ndim, const int64_t *sizes, int64_t *out) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++)
    if (tg__mul_ovf(n, sizes[d] > 1 ? sizes[d] : 1, &n)) return true;
  *out = n;
  return false;
}

/* Where (sizes, strides, offset) reach, with exact arithmetic: TG__SPAN_OK when every element
 * of a non-empty tensor lies in [0, capacity) and the offset lies in [0, capacity] (an empty
 * tensor addresses nothing), TG__SPAN_OUTSIDE when not, TG__SPAN_OVERFLOW when the lowest or
 * highest element reached does not fit int64. *lo_out and *hi_out get those elements (the offset
 * for an empty tensor). */
enum { TG__SPAN_OK, TG__SPAN_OUTSIDE, TG__SPAN_OVERFLOW };
static inline int tg__span_check(int ndim, const int64_t *sizes, const int64_t *strides,
                                 int64_t offset, int64_t capacity, int64_t *lo_out,
                                 int64_t *hi_out) {
  int64_t lo = offset, hi = offset;
  bool empty = false;
  for (int d = 0; d < ndim; d++) empty |= sizes[d] == 0;
  *lo_out = *hi_out = offset;
  if (offset < 0 || offset > capacity) return TG__SPAN_OUTSIDE;
  if (empty) return TG__SPAN_OK;
  /* lo only falls and hi only rises, so an overflow of either is final. */
  for (int d = 0; d < ndim; d++) {
    int64_t span;
    if (tg__mul_ovf(sizes[d] - 1, strides[d], &span) ||
        (span < 0 ? tg__add_ovf(lo, span, &lo) : tg__add_ovf(hi, span, &hi)))
      return TG__SPAN_OVERFLOW;
  }
  *lo_out = lo;
  *hi_out = hi;
  return lo >= 0 && hi < capacity ? TG__SPAN_OK : TG__SPAN_OUTSIDE;
}

#endif
