/* Dimension coalescing, shared by the CPU loop driver (cpu/cpu_iter.c) and the CUDA
 * elementwise kernels (cuda/elementwise.cuh): host code in C11 and C++ alike.
 *
 * Given the sizes of an iteration and each operand's strides over them, it drops the dims
 * of size 1 (they contribute nothing to any address) and merges an outer dim into the
 * inner one whenever every operand steps over the inner dim exactly once per outer step
 * (stride 0 merges with stride 0), so a dense or expanded operand set becomes one dim. */
#ifndef TG_OPS_COALESCE_H
#define TG_OPS_COALESCE_H

#include <stdbool.h>
#include <stdint.h>

#include "tensor/checked.h"
#include "tg/types.h"

#define TG_COALESCE_MAX_OPERANDS 4 /* out and three inputs: where */

typedef struct tg_coalesced {
  int ndim;                   /* >= 1 */
  int64_t sizes[TG_MAX_DIMS]; /* dim ndim-1 is the innermost */
  int64_t strides[TG_COALESCE_MAX_OPERANDS][TG_MAX_DIMS];
} tg_coalesced;

static inline int64_t tg__coalesce_abs(int64_t v) { return v < 0 ? -v : v; }

static inline void tg__coalesce_swap(tg_coalesced *c, int nops, int i, int j) {
  int64_t s = c->sizes[i];
  c->sizes[i] = c->sizes[j];
  c->sizes[j] = s;
  for (int k = 0; k < nops; k++) {
    int64_t t = c->strides[k][i];
    c->strides[k][i] = c->strides[k][j];
    c->strides[k][j] = t;
  }
}

/* Orders the dims by operand 0's strides, largest outermost (a stable insertion sort, so
 * equal strides keep their logical order): the written operand is walked in memory order. */
static inline void tg__coalesce_sort(tg_coalesced *c, int nops, int n) {
  for (int i = 1; i < n; i++)
    for (int j = i;
         j > 0 && tg__coalesce_abs(c->strides[0][j - 1]) < tg__coalesce_abs(c->strides[0][j]); j--)
      tg__coalesce_swap(c, nops, j, j - 1);
}

/* Fills c from sizes[ndim] and strides[k][ndim] for nops operands. With reorder the dims
 * are first sorted by operand 0's strides (then the walk order is not the logical
 * row-major order: only for work that does not depend on the logical index). An
 * iteration with no element gives one dim of size 0; one with a single element one dim of
 * size 1 and stride 0. */
static inline void tg_coalesce(tg_coalesced *c, int ndim, const int64_t *sizes, int nops,
                               const int64_t *const *strides, bool reorder) {
  int n = 0;
  for (int d = 0; d < ndim; d++) {
    if (sizes[d] == 0) { /* nothing to walk; strides of an empty tensor may be anything */
      c->ndim = 1;
      c->sizes[0] = 0;
      for (int k = 0; k < nops; k++) c->strides[k][0] = 0;
      return;
    }
    if (sizes[d] == 1) continue;
    c->sizes[n] = sizes[d];
    for (int k = 0; k < nops; k++) c->strides[k][n] = strides[k][d];
    n++;
  }
  if (reorder) tg__coalesce_sort(c, nops, n);
  int m = 0;
  for (int d = 0; d < n; d++) {
    bool mergeable = m > 0;
    /* Checked: an operand's stride times the size may pass its span by one stride. */
    for (int k = 0; k < nops && mergeable; k++) {
      int64_t step;
      mergeable =
          !tg__mul_ovf(c->strides[k][d], c->sizes[d], &step) && c->strides[k][m - 1] == step;
    }
    if (mergeable) {
      c->sizes[m - 1] *= c->sizes[d];
      for (int k = 0; k < nops; k++) c->strides[k][m - 1] = c->strides[k][d];
      continue;
    }
    c->sizes[m] = c->sizes[d];
    for (int k = 0; k < nops; k++) c->strides[k][m] = c->strides[k][d];
    m++;
  }
  if (m == 0) { /* a single element (or 0-dim) */
    c->sizes[0] = 1;
    for (int k = 0; k < nops; k++) c->strides[k][0] = 0;
    m = 1;
  }
  c->ndim = m;
}

#endif
