/* What the attention kernels of every device share (src/ops/def/attention.def): the params
 * tensor's layout and dropout's mask. The mask is tg_dropout's (src/ops/dropout.c) for a
 * contiguous [N, Tq, Tk] probability tensor: element (n, i, j) is kept when the uniform at
 * Philox stream position offset + (n Tq + i) Tk + j, in the dtype's own draw (tg_rand's: 24
 * bits for F32, 53 for F64), is below (T)(1 - p), and a kept element is multiplied by
 * (T)(1 / (1 - p)). So the fused op, the composed one and every device drop the same
 * elements for one seed, and forward and backward regenerate the mask instead of storing it.
 * Compiles as C11, C++17 and under nvcc. */
#ifndef TG_OPS_ATTENTION_MATH_H
#define TG_OPS_ATTENTION_MATH_H

#include <stdint.h>

#include "ops/philox.h"

enum {
  TG_ATTN_PARAM_SCALE,
  TG_ATTN_PARAM_DROPOUT_P,
  TG_ATTN_PARAM_CAUSAL,
  TG_ATTN_PARAM_SEED_LO,
  TG_ATTN_PARAM_SEED_HI,
  TG_ATTN_PARAM_OFFSET_LO,
  TG_ATTN_PARAM_OFFSET_HI,
  TG_ATTN_NUM_PARAMS
};

typedef struct tg_attention_params {
  double scale, dropout_p;
  int causal;
  uint64_t seed, offset;
} tg_attention_params;

static inline uint64_t tg_attention_u64_of(double lo, double hi) {
  return ((uint64_t)hi << 32) | (uint64_t)lo;
}

/* The params tensor's values (host memory). */
static inline tg_attention_params tg_attention_params_read(const double *p) {
  tg_attention_params a;
  a.scale = p[TG_ATTN_PARAM_SCALE];
  a.dropout_p = p[TG_ATTN_PARAM_DROPOUT_P];
  a.causal = p[TG_ATTN_PARAM_CAUSAL] != 0;
  a.seed = tg_attention_u64_of(p[TG_ATTN_PARAM_SEED_LO], p[TG_ATTN_PARAM_SEED_HI]);
  a.offset = tg_attention_u64_of(p[TG_ATTN_PARAM_OFFSET_LO], p[TG_ATTN_PARAM_OFFSET_HI]);
  return a;
}

static inline void tg_attention_params_write(double *p, tg_attention_params a) {
  p[TG_ATTN_PARAM_SCALE] = a.scale;
  p[TG_ATTN_PARAM_DROPOUT_P] = a.dropout_p;
  p[TG_ATTN_PARAM_CAUSAL] = a.causal ? 1 : 0;
  p[TG_ATTN_PARAM_SEED_LO] = (double)(uint32_t)a.seed;
  p[TG_ATTN_PARAM_SEED_HI] = (double)(uint32_t)(a.seed >> 32);
  p[TG_ATTN_PARAM_OFFSET_LO] = (double)(uint32_t)a.offset;
  p[TG_ATTN_PARAM_OFFSET_HI] = (double)(uint32_t)(a.offset >> 32);
}

/* Dropout's factor for stream position pos: 0 or keep_scale (one element per call; the CPU
 * fills a row span block by block, bit for bit the same). */
static inline TG_HOST_DEVICE float tg_attention_drop_f(uint64_t seed, uint64_t pos,
                                                       float keep_below, float keep_scale) {
  return tg_philox_uniform_f(seed, pos) < keep_below ? keep_scale : 0.0f;
}
static inline TG_HOST_DEVICE double tg_attention_drop_d(uint64_t seed, uint64_t pos,
                                                        double keep_below, double keep_scale) {
  return tg_philox_uniform_d(seed, pos) < keep_below ? keep_scale : 0.0;
}

#endif
