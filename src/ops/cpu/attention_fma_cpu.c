/* The attention CPU kernels' F32 tile product in AVX2 + FMA intrinsics (attention_cpu.c
 * picks it on CPUs with both): the same ATTN_MR x ATTN_NR register block as the portable
 * tile_gemm of attention_cpu_tiles.h, with multiply-adds fused, which ISO C's
 * -ffp-contract=off keeps the portable one from using (the tile products are the largest share
 * of the op's time: docs/attention.md). Compiled for AVX2 + FMA by a target attribute and entered
 * only after a CPU check, so the rest of the library keeps the baseline instruction set. */
#include "ops/cpu/attention_fma_cpu.h"

#include <stdatomic.h>

#include "ops/cpu/cpu_features.h"

static atomic_bool fma_allowed = true;

void tg__attention_fma_allow(bool allowed) { atomic_store(&fma_allowed, allowed); }

bool tg__attention_fma_in_use(void) {
  return atomic_load(&fma_allowed) && tg__attention_fma_supported();
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

bool tg__attention_fma_supported(void) {
  const tg_cpu_features f = tg_cpu_features_read();
  return f.avx2 && f.fma3;
}

__attribute__((target("avx2,fma"))) void
tg__attention_tile_gemm_f32_fma(float *restrict C, int64_t ldc, const float *restrict A,
                                int64_t a_rs, int64_t a_cs, const float *restrict B, int64_t ldb,
                                int64_t M, int64_t N, int64_t K, bool accumulate) {
  for (int64_t m0 = 0; m0 < M; m0 += 4)
    for (int64_t n0 = 0; n0 < N; n0 += 16) {
      __m256 c[4][2];
      for (int r = 0; r < 4; r++)
        for (int h = 0; h < 2; h++)
          c[r][h] =
              accumulate ? _mm256_loadu_ps(C + (m0 + r) * ldc + n0 + 8 * h) : _mm256_setzero_ps();
      const float *a = A + m0 * a_rs;
      for (int64_t k = 0; k < K; k++) {
        const __m256 b0 = _mm256_loadu_ps(B + k * ldb + n0),
                     b1 = _mm256_loadu_ps(B + k * ldb + n0 + 8);
        for (int r = 0; r < 4; r++) {
          const __m256 ar = _mm256_broadcast_ss(a + r * a_rs + k * a_cs);
          c[r][0] = _mm256_fmadd_ps(ar, b0, c[r][0]);
          c[r][1] = _mm256_fmadd_ps(ar, b1, c[r][1]);
        }
      }
      for (int r = 0; r < 4; r++)
        for (int h = 0; h < 2; h++) _mm256_storeu_ps(C + (m0 + r) * ldc + n0 + 8 * h, c[r][h]);
    }
}
#else
bool tg__attention_fma_supported(void) { return false; }

void tg__attention_tile_gemm_f32_fma(float *restrict C, int64_t ldc, const float *restrict A,
                                     int64_t a_rs, int64_t a_cs, const float *restrict B,
                                     int64_t ldb, int64_t M, int64_t N, int64_t K,
                                     bool accumulate) {
  (void)C, (void)ldc, (void)A, (void)a_rs, (void)a_cs, (void)B, (void)ldb, (void)M, (void)N,
      (void)K;
  (void)accumulate; /* never called: tg__attention_fma_supported is false */
}
#endif
