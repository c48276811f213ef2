/* The fused LLTM's F32 cell spans written with AVX2 + FMA intrinsics (cpu_lltm_avx2.c), which
 * the CPU passes (cpu_lltm.c) run instead of their compiler-vectorized spans where the CPU
 * has AVX2 and FMA. Same math as ops/lltm_cell.h over the same approximations as
 * cpu_vecmath.h, in about half the instructions (fused multiply-adds, the four exponentials
 * of an element interleaved): the forward cell pass took 10 ns per element before, on Zen 3.
 *
 * Both spans take unit-stride arrays of n elements (the contract of forward_span and
 * backward_span in cpu_lltm.c) and touch no element beyond n: the tail goes through masked
 * loads and stores. */
#ifndef TG_CPU_LLTM_AVX2_H
#define TG_CPU_LLTM_AVX2_H

#include <stdbool.h>
#include <stdint.h>

/* Which span the F32 passes run. AUTO: the AVX2 one where the CPU has AVX2 and FMA and no
 * AVX-512 (there the portable spans' AVX-512 clone runs: not compared yet). */
typedef enum tg_cpu_lltm_cell_path {
  TG_CPU_LLTM_CELL_AUTO,
  TG_CPU_LLTM_CELL_PORTABLE, /* the compiler-vectorized spans of cpu_lltm.c */
  TG_CPU_LLTM_CELL_AVX2,
} tg_cpu_lltm_cell_path;

/* Whether this CPU (and build) can run the AVX2 spans. */
bool tg_cpu_lltm_avx2_supported(void);

/* Forces a path (the tests run both on one CPU); the environment variable TG_LLTM_CELL
 * (portable or avx2) sets the initial choice. Asking for AVX2 where it is not supported
 * leaves the portable spans in use and returns false. Not synchronised with running passes:
 * set it between ops. */
bool tg_cpu_lltm_set_cell_path(tg_cpu_lltm_cell_path path);

/* Whether the F32 passes run the AVX2 spans now. */
bool tg_cpu_lltm_avx2_active(void);

/* The forward cell over n elements: pre-activations a0..a2 plus bias b0..b2 in, activations
 * (input gate, output gate, candidate) out in place, and new_h, new_cell. */
void tg_cpu_lltm_avx2_forward_span(int64_t n, const float *b0, const float *b1, const float *b2,
                                   const float *old_cell, float *a0, float *a1, float *a2,
                                   float *new_h, float *new_cell);

/* The backward cell over n elements from the activations a0..a2 and old_cell: the gate
 * gradients d0..d2 and d_old_cell. */
void tg_cpu_lltm_avx2_backward_span(int64_t n, const float *grad_h, const float *grad_cell,
                                    const float *old_cell, const float *a0, const float *a1,
                                    const float *a2, float *d0, float *d1, float *d2,
                                    float *d_old_cell);

#endif
