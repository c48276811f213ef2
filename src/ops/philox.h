/* Philox 4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11):
 * a counter-based RNG, shared by the CPU loops and the CUDA kernels.
 *
 * A draw of n elements from (seed, offset) gives element i the value of "stream position"
 * p = offset + i, and that value depends only on (seed, p): not on the device, the thread
 * count, the launch shape or where the draw started. So draw(seed, offset + k)[i] ==
 * draw(seed, offset)[k + i].
 *
 * One Philox call (a "block": key = seed, counter = block index) yields 4 x 32 random bits:
 *   F32 uniform: 4 elements per block, one 32-bit word each (24 bits used);
 *   F32 normal : 4 elements per block, Box-Muller on words (0,1) -> elements 0 (cos) and 1
 *                (sin), on words (2,3) -> elements 2 and 3;
 *   F64 uniform: 2 elements per block, two words each (53 bits used);
 *   F64 normal : 2 elements per block, Box-Muller on words (0,1) and (2,3) as two 53-bit
 *                uniforms -> elements 0 (cos) and 1 (sin).
 * Position p lives in block p / PER_BLOCK at lane p % PER_BLOCK. The per-element helpers
 * (tg_philox_uniform_f(seed, p) ...) are what a one-thread-per-element kernel calls; a CPU
 * loop may compute each block once and read its lanes with the tg_philox_lane_* helpers:
 * both give bit-identical uniforms. Normals go through log/sqrt/cos/sin, whose last bit may
 * differ between glibc and CUDA's libdevice.
 *
 * Successive draws from one generator should start on a multiple of 4 positions (round the
 * offset advance up): then no two draws share a block, which matters when a uniform draw
 * and a normal draw (which read different words of a block) follow each other.
 *
 * Compiles as C11, C++17 and under nvcc. */
#ifndef TG_PHILOX_H
#define TG_PHILOX_H

#include <math.h>
#include <stdint.h>

#include "tensor/hostdevice.h"

#define TG_PHILOX_F32_PER_BLOCK 4
#define TG_PHILOX_F64_PER_BLOCK 2

typedef struct tg_philox4 {
  uint32_t v[4];
} tg_philox4;

/* The Philox 4x32 round and key-schedule constants. */
#define TG__PHILOX_M0 0xD2511F53u
#define TG__PHILOX_M1 0xCD9E8D57u
#define TG__PHILOX_W0 0x9E3779B9u
#define TG__PHILOX_W1 0xBB67AE85u

/* Philox4x32-10 of a 128-bit counter under a 64-bit key. */
static inline TG_HOST_DEVICE tg_philox4 tg_philox4x32_10(tg_philox4 ctr, uint32_t k0, uint32_t k1) {
  for (int round = 0; round < 10; round++) {
    uint64_t p0 = (uint64_t)TG__PHILOX_M0 * ctr.v[0];
    uint64_t p1 = (uint64_t)TG__PHILOX_M1 * ctr.v[2];
    tg_philox4 next;
    next.v[0] = (uint32_t)(p1 >> 32) ^ ctr.v[1] ^ k0;
    next.v[1] = (uint32_t)p1;
    next.v[2] = (uint32_t)(p0 >> 32) ^ ctr.v[3] ^ k1;
    next.v[3] = (uint32_t)p0;
    ctr = next;
    k0 += TG__PHILOX_W0;
    k1 += TG__PHILOX_W1;
  }
  return ctr;
}

/* The random block of a seed and a 64-bit block index. */
static inline TG_HOST_DEVICE tg_philox4 tg_philox_block(uint64_t seed, uint64_t block) {
  tg_philox4 ctr;
  ctr.v[0] = (uint32_t)block;
  ctr.v[1] = (uint32_t)(block >> 32);
  ctr.v[2] = 0;
  ctr.v[3] = 0;
  return tg_philox4x32_10(ctr, (uint32_t)seed, (uint32_t)(seed >> 32));
}

/* ---- bits to uniforms ---- */

/* [0, 1) with 24 random bits. */
static inline TG_HOST_DEVICE float tg_philox_bits_to_unit_f(uint32_t w) {
  return (float)(w >> 8) * 5.9604644775390625e-08f; /* 2^-24 */
}
/* (0, 1]: the argument of Box-Muller's log. */
static inline TG_HOST_DEVICE float tg_philox_bits_to_open_unit_f(uint32_t w) {
  return (float)((w >> 8) + 1u) * 5.9604644775390625e-08f;
}
/* [0, 1) with 53 random bits. */
static inline TG_HOST_DEVICE double tg_philox_bits_to_unit_d(uint32_t hi, uint32_t lo) {
  uint64_t w = ((uint64_t)hi << 32) | lo;
  return (double)(w >> 11) * 1.1102230246251565404e-16; /* 2^-53 */
}
static inline TG_HOST_DEVICE double tg_philox_bits_to_open_unit_d(uint32_t hi, uint32_t lo) {
  uint64_t w = ((uint64_t)hi << 32) | lo;
  return (double)((w >> 11) + 1u) * 1.1102230246251565404e-16;
}

/* ---- lanes of a computed block ---- */

static inline TG_HOST_DEVICE float tg_philox_lane_uniform_f(tg_philox4 r, int lane) {
  return tg_philox_bits_to_unit_f(r.v[lane]);
}
static inline TG_HOST_DEVICE float tg_philox_lane_normal_f(tg_philox4 r, int lane) {
  int pair = lane >> 1;
  float u1 = tg_philox_bits_to_open_unit_f(r.v[2 * pair]);
  float u2 = tg_philox_bits_to_unit_f(r.v[2 * pair + 1]);
  float radius = sqrtf(-2.0f * logf(u1));
  float theta = 6.28318530717958647692f * u2;
  return radius * ((lane & 1) ? sinf(theta) : cosf(theta));
}
static inline TG_HOST_DEVICE double tg_philox_lane_uniform_d(tg_philox4 r, int lane) {
  return tg_philox_bits_to_unit_d(r.v[2 * lane], r.v[2 * lane + 1]);
}
static inline TG_HOST_DEVICE double tg_philox_lane_normal_d(tg_philox4 r, int lane) {
  double u1 = tg_philox_bits_to_open_unit_d(r.v[0], r.v[1]);
  double u2 = tg_philox_bits_to_unit_d(r.v[2], r.v[3]);
  double radius = sqrt(-2.0 * log(u1));
  double theta = 6.28318530717958647692 * u2;
  return radius * ((lane & 1) ? sin(theta) : cos(theta));
}

/* ---- one element at stream position p (one-thread-per-element kernels) ---- */

static inline TG_HOST_DEVICE float tg_philox_uniform_f(uint64_t seed, uint64_t p) {
  return tg_philox_lane_uniform_f(tg_philox_block(seed, p / TG_PHILOX_F32_PER_BLOCK),
                                  (int)(p % TG_PHILOX_F32_PER_BLOCK));
}
static inline TG_HOST_DEVICE float tg_philox_normal_f(uint64_t seed, uint64_t p) {
  return tg_philox_lane_normal_f(tg_philox_block(seed, p / TG_PHILOX_F32_PER_BLOCK),
                                 (int)(p % TG_PHILOX_F32_PER_BLOCK));
}
static inline TG_HOST_DEVICE double tg_philox_uniform_d(uint64_t seed, uint64_t p) {
  return tg_philox_lane_uniform_d(tg_philox_block(seed, p / TG_PHILOX_F64_PER_BLOCK),
                                  (int)(p % TG_PHILOX_F64_PER_BLOCK));
}
static inline TG_HOST_DEVICE double tg_philox_normal_d(uint64_t seed, uint64_t p) {
  return tg_philox_lane_normal_d(tg_philox_block(seed, p / TG_PHILOX_F64_PER_BLOCK),
                                 (int)(p % TG_PHILOX_F64_PER_BLOCK));
}

/* ---- scaling to the requested distribution ---- */

/* low + (high-low)*u for u in [0,1). Rounding can land on high; that value is mapped to
 * low (as PyTorch does) so the result stays in [low, high). */
/* The product and the sum are rounded one at a time on the GPU too: nvcc would fuse them
 * into one FMA (rounded once) where the CPU build (ISO C11: -ffp-contract=off) rounds
 * twice, and CPU and CUDA uniforms would differ in the last bit (seen on an H100). */
static inline TG_HOST_DEVICE float tg_philox_scale_uniform_f(float u, float low, float high) {
#ifdef __CUDA_ARCH__
  float v = __fadd_rn(low, __fmul_rn(high - low, u));
#else
  float v = low + (high - low) * u;
#endif
  return v < high ? v : low;
}
static inline TG_HOST_DEVICE double tg_philox_scale_uniform_d(double u, double low, double high) {
#ifdef __CUDA_ARCH__
  double v = __dadd_rn(low, __dmul_rn(high - low, u));
#else
  double v = low + (high - low) * u;
#endif
  return v < high ? v : low;
}

#endif
