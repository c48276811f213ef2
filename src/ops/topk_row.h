/* The selection of one row's k best elements, shared by the CPU kernel
 * (src/ops/cpu/topk_cpu.c) and the CUDA one (src/ops/cuda/topk.cu) so both give the same
 * answer, ties included.
 *
 * "a ranks before b" is a total order: by value (descending for largest, ascending for
 * smallest) with NaN above every number, so first when largest and last when smallest, as
 * PyTorch's topk; equal values (±0 alike, NaN alike) by index, lower first.
 * Being total, the k chosen and their order are unique.
 *
 * The k kept so far live in the output row itself (values and indices, strided), as a heap
 * whose root is the one that ranks last: each further element that ranks before the root
 * replaces it (O(N log k)), and popping the heap at the end lays the row out best first. No
 * scratch memory, so a CUDA thread can run a row alone. */
#ifndef TG_TOPK_ROW_H
#define TG_TOPK_ROW_H

#include <stdbool.h>
#include <stdint.h>

#include "tensor/hostdevice.h"

/* Defines name(x, xs, n, k, v, vs, ix, is): row x[j * xs], j < n; writes v[i * vs] and
 * ix[i * is], i < k (k <= n). T is the element type; LARGEST 1 or 0; IS_NAN(a) NaN's test
 * (0 for integers). */
#define TG_TOPK_ROW_DEFINE(name, T, LARGEST, IS_NAN)                                               \
  static TG_HOST_DEVICE inline bool name##_before(T a, int64_t ai, T b, int64_t bi) {              \
    const bool an = IS_NAN(a), bn = IS_NAN(b);                                                     \
    if (an != bn) return LARGEST ? an : bn;                                                        \
    if (!an && a != b) return LARGEST ? a > b : a < b;                                             \
    return ai < bi;                                                                                \
  }                                                                                                \
  /* Moves heap slot i down until no child ranks after it (heap of size m). */                     \
  static TG_HOST_DEVICE inline void name##_sift_down(T *v, int64_t vs, int64_t *ix, int64_t is,    \
                                                     int64_t i, int64_t m) {                       \
    for (;;) {                                                                                     \
      int64_t worst = i;                                                                           \
      for (int64_t c = 2 * i + 1; c <= 2 * i + 2 && c < m; c++)                                    \
        if (name##_before(v[worst * vs], ix[worst * is], v[c * vs], ix[c * is])) worst = c;        \
      if (worst == i) return;                                                                      \
      const T tv = v[i * vs];                                                                      \
      const int64_t ti = ix[i * is];                                                               \
      v[i * vs] = v[worst * vs];                                                                   \
      ix[i * is] = ix[worst * is];                                                                 \
      v[worst * vs] = tv;                                                                          \
      ix[worst * is] = ti;                                                                         \
      i = worst;                                                                                   \
    }                                                                                              \
  }                                                                                                \
  static TG_HOST_DEVICE inline void name(const T *x, int64_t xs, int64_t n, int64_t k, T *v,       \
                                         int64_t vs, int64_t *ix, int64_t is) {                    \
    if (k <= 0) return;                                                                            \
    for (int64_t j = 0; j < k; j++) { /* the first k, then heapified */                            \
      v[j * vs] = x[j * xs];                                                                       \
      ix[j * is] = j;                                                                              \
    }                                                                                              \
    for (int64_t i = k / 2; i-- > 0;) name##_sift_down(v, vs, ix, is, i, k);                       \
    for (int64_t j = k; j < n; j++)                                                                \
      if (name##_before(x[j * xs], j, v[0], ix[0])) {                                              \
        v[0] = x[j * xs];                                                                          \
        ix[0] = j;                                                                                 \
        name##_sift_down(v, vs, ix, is, 0, k);                                                     \
      }                                                                                            \
    for (int64_t m = k - 1; m > 0; m--) { /* the root (the last of m + 1) to slot m */             \
      const T tv = v[0];                                                                           \
      const int64_t ti = ix[0];                                                                    \
      v[0] = v[m * vs];                                                                            \
      ix[0] = ix[m * is];                                                                          \
      v[m * vs] = tv;                                                                              \
      ix[m * is] = ti;                                                                             \
      name##_sift_down(v, vs, ix, is, 0, m);                                                       \
    }                                                                                              \
  }

#endif
