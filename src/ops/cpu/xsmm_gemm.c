/* Small and mid-sized GEMMs through libxsmm's JIT kernels, where they beat BLIS.
 *
 * Measured on Zen 4, 1 thread (bench/gemm_engines.c with libxsmm 1.17): the LLTM's backward
 * products at 16 x 32 x 128 take 16.7-17.9 us against BLIS haswell's 19.5-20.0, at
 * 64 x 1024 x 128 495-500 us against 540-575, at 128 x 256 x 512 2650-2670 us against
 * 2800-3030; at 256 x 1024 x 1024 libxsmm falls to 32 GF/s where k is 3072 (no cache
 * blocking), so products past TG_XSMM_MAX_MACS stay with BLIS. Its kernels are one-threaded:
 * they run only where tg would run BLIS on one thread anyway.
 *
 * libxsmm is column-major and takes C = A @ op(B), A not transposed. A row-major product
 * out[M, N] = a[M, K] @ b[K, N] is the column-major out^T = b^T @ a^T: A' = b (needs unit
 * column stride), B' = a (unit column stride, or unit row stride as TRANS_B), C' = out (unit
 * column stride). alpha must be 1 and beta 0 or 1. A pinned BLIS_ARCH_TYPE means "every GEMM
 * on that BLIS set", so libxsmm then stays out (and tests/ops/test_blis_guard.c still drives
 * BLIS's own small-matrix kernels). */
#include "ops/cpu/cpu_internal.h"

#if TG_WITH_XSMM
#include <libxsmm.h>
#include <limits.h>

bool tg_cpu_xsmm_gemm(tg_dtype dtype, char *out, int64_t out_rs, const char *a, int64_t a_rs,
                      int64_t a_cs, const char *b, int64_t b_rs, int64_t m, int64_t n, int64_t k,
                      int64_t macs, bool one_thread, double alpha, double beta) {
  if (!one_thread || macs > TG_XSMM_MAX_MACS || alpha != 1 || (beta != 0 && beta != 1) ||
      tg_cpu_blis_pinned())
    return false;
  if (m > INT_MAX || n > INT_MAX || k > INT_MAX || out_rs > INT_MAX || b_rs > INT_MAX ||
      a_rs > INT_MAX || a_cs > INT_MAX)
    return false;
  int flags = LIBXSMM_GEMM_FLAG_NONE, prefetch = LIBXSMM_PREFETCH_NONE;
  libxsmm_blasint lda = (libxsmm_blasint)b_rs, ldc = (libxsmm_blasint)out_rs, ldb;
  if (a_cs == 1 && a_rs >= k) {
    ldb = (libxsmm_blasint)a_rs;
  } else if (a_rs == 1 && a_cs >= m) {
    ldb = (libxsmm_blasint)a_cs;
    flags |= LIBXSMM_GEMM_FLAG_TRANS_B;
  } else {
    return false;
  }
  if (lda < n || ldc < n) return false;
  const libxsmm_blasint mm = (libxsmm_blasint)n, nn = (libxsmm_blasint)m, kk = (libxsmm_blasint)k;
  if (dtype == TG_F32) {
    const float al = 1, be = (float)beta;
    libxsmm_smmfunction f =
        libxsmm_smmdispatch(mm, nn, kk, &lda, &ldb, &ldc, &al, &be, &flags, &prefetch);
    if (!f) return false;
    f((const float *)b, (const float *)a, (float *)out);
  } else {
    const double al = 1, be = beta;
    libxsmm_dmmfunction f =
        libxsmm_dmmdispatch(mm, nn, kk, &lda, &ldb, &ldc, &al, &be, &flags, &prefetch);
    if (!f) return false;
    f((const double *)b, (const double *)a, (double *)out);
  }
  return true;
}

const char *tg_small_gemm_engine(void) {
  if (tg_cpu_blis_ready("tg_small_gemm_engine") != TG_OK) return NULL;
  return tg_cpu_blis_pinned() ? NULL : "libxsmm";
}

#else

bool tg_cpu_xsmm_gemm(tg_dtype dtype, char *out, int64_t out_rs, const char *a, int64_t a_rs,
                      int64_t a_cs, const char *b, int64_t b_rs, int64_t m, int64_t n, int64_t k,
                      int64_t macs, bool one_thread, double alpha, double beta) {
  (void)dtype, (void)out, (void)out_rs, (void)a, (void)a_rs, (void)a_cs, (void)b, (void)b_rs;
  (void)m, (void)n, (void)k, (void)macs, (void)one_thread, (void)alpha, (void)beta;
  return false;
}

const char *tg_small_gemm_engine(void) { return NULL; }

#endif
