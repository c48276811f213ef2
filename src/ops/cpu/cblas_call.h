/* A tg_gemm_problem as the row-major cblas_?gemm call that computes it, for the engines loaded
 * at run time through their cblas interface (MKL: mkl_gemm.c, OpenBLAS: openblas_gemm.c).
 * Internal. */
#ifndef TG_CBLAS_CALL_H
#define TG_CBLAS_CALL_H

#include <stdbool.h>

#include "ops/cpu/gemm_engine.h"

enum { TG_CBLAS_ROW_MAJOR = 101, TG_CBLAS_NO_TRANS = 111, TG_CBLAS_TRANS = 112 };

typedef void (*tg_cblas_sgemm_fn)(int, int, int, int, int, int, float, const float *, int,
                                  const float *, int, float, float *, int);
typedef void (*tg_cblas_dgemm_fn)(int, int, int, int, int, int, double, const double *, int,
                                  const double *, int, double, double *, int);

typedef struct tg_cblas_call {
  int trans_a, trans_b;
  int m, n, k, lda, ldb, ldc;
  const void *a, *b;
  void *c;
} tg_cblas_call;

/* p as a row-major cblas call (a column-major out is computed transposed: out^T = b^T a^T);
 * false where cblas cannot take it (a layout with no unit stride, a size past 32-bit int). */
bool tg__cblas_call_of(const tg_gemm_problem *p, tg_cblas_call *call);

/* Runs the call through sgemm or dgemm by p's dtype (alpha, beta from p). */
void tg__cblas_run(const tg_gemm_problem *p, const tg_cblas_call *call, tg_cblas_sgemm_fn sgemm,
                   tg_cblas_dgemm_fn dgemm);

#endif
