/* The attention CPU kernels' AVX2 + FMA tile product (attention_fma_cpu.c). */
#ifndef TG_OPS_CPU_ATTENTION_FMA_CPU_H
#define TG_OPS_CPU_ATTENTION_FMA_CPU_H

#include <stdbool.h>
#include <stdint.h>

/* Whether this CPU (and OS) runs AVX2 and FMA: then the function below may be called. */
bool tg__attention_fma_supported(void);

/* Whether the kernels use it: supported and not turned off by tg__attention_fma_allow(false)
 * (tests run the portable tile product with it off). */
bool tg__attention_fma_in_use(void);
void tg__attention_fma_allow(bool allowed);

/* C[m][n] = (accumulate ? C[m][n] : 0) + sum_k A[m][k] B[k][n] for m < M (a multiple of 4),
 * n < N (a multiple of 16): attention_cpu_tiles.h's tile_gemm for F32, fused multiply-adds. */
void tg__attention_tile_gemm_f32_fma(float *restrict C, int64_t ldc, const float *restrict A,
                                     int64_t a_rs, int64_t a_cs, const float *restrict B,
                                     int64_t ldb, int64_t M, int64_t N, int64_t K, bool accumulate);

#endif
