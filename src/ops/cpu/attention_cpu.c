/* The fused attention's CPU kernels (src/ops/attention.c; lines in
 * src/ops/def/attention.def): FlashAttention's tiles. Forward splits (head, block of ATTN_BR
 * query rows) units among the pool's threads and runs an online softmax over blocks of
 * ATTN_BC keys, so no [Tq, Tk] matrix exists; backward gives each thread whole heads (dq of a
 * head accumulates over its key blocks) and recomputes the probabilities from lse. Each
 * chunk of a split gets its own scratch, allocated before the split. The loops per dtype:
 * attention_cpu_tiles.h. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "ops/attention_math.h"
#include "ops/cpu/cpu_internal.h"
#include "ops/cpu/cpu_vecmath.h"
#include "ops/cpu/thread_pool.h"
#include "tensor/host_memory.h"
#include "tg/dispatch.h"

/* Query rows per forward unit, keys per tile. */
#define ATTN_BR 32
#define ATTN_BC 64

typedef struct attn_job {
  const void *q, *k, *v, *o, *grad;
  void *out, *lse, *dq, *dk, *dv_out;
  int64_t n, tq, tk, d, dv;
  tg_attention_params a;
  int64_t units, chunks, q_blocks;
  char *work; /* chunks * work_bytes */
  size_t work_bytes;
  bool f64;
} attn_job;

#define T float
#define SFX(name) name##_f32
#define EXP(x) tg_vf_exp(x)
#define LOG(x) logf(x)
#define LANE_UNIFORM(r, lane) tg_philox_lane_uniform_f(r, lane)
#define PER_BLOCK TG_PHILOX_F32_PER_BLOCK
#include "ops/cpu/attention_cpu_tiles.h"
#undef T
#undef SFX
#undef EXP
#undef LOG
#undef LANE_UNIFORM
#undef PER_BLOCK

#define T double
#define SFX(name) name##_f64
#define EXP(x) exp(x)
#define LOG(x) log(x)
#define LANE_UNIFORM(r, lane) tg_philox_lane_uniform_d(r, lane)
#define PER_BLOCK TG_PHILOX_F64_PER_BLOCK
#include "ops/cpu/attention_cpu_tiles.h"
#undef T
#undef SFX
#undef EXP
#undef LOG
#undef LANE_UNIFORM
#undef PER_BLOCK

/* Chunk c runs units c, c + chunks, ...: interleaved, so a causal split's cheap early query
 * blocks and dear late ones spread over the chunks. */
static void forward_chunk(int64_t chunk, void *ctx) {
  const attn_job *j = ctx;
  char *work = j->work + (size_t)chunk * j->work_bytes;
  for (int64_t u = chunk; u < j->units; u += j->chunks) {
    if (j->f64)
      forward_unit_f64(j, u / j->q_blocks, u % j->q_blocks, work);
    else
      forward_unit_f32(j, u / j->q_blocks, u % j->q_blocks, work);
  }
}

static void backward_chunk(int64_t chunk, void *ctx) {
  const attn_job *j = ctx;
  char *work = j->work + (size_t)chunk * j->work_bytes;
  for (int64_t u = chunk; u < j->units; u += j->chunks) {
    if (j->f64)
      backward_head_f64(j, u, work);
    else
      backward_head_f32(j, u, work);
  }
}

/* The shapes from q [N, Tq, D], k [N, Tk, D], v [N, Tk, Dv], the dtype and the params. */
static tg_status job_of(const char *kernel, attn_job *j, const tg_tensor *q, const tg_tensor *k,
                        const tg_tensor *v, const tg_tensor *params) {
  const tg_dtype dtype = tg_tensor_dtype(q);
  if (dtype != TG_F32 && dtype != TG_F64)
    return tg_set_error(TG_ERR_DTYPE, "%s: dtype %s (F32, F64 only)", kernel, tg_dtype_name(dtype));
  if (tg_tensor_dtype(params) != TG_F64 || tg_numel(params) != TG_ATTN_NUM_PARAMS)
    return tg_set_error(TG_ERR_ARGUMENT, "%s: params must be F64 [%d]", kernel,
                        (int)TG_ATTN_NUM_PARAMS);
  j->f64 = dtype == TG_F64;
  j->n = tg_size(q, 0);
  j->tq = tg_size(q, 1);
  j->d = tg_size(q, 2);
  j->tk = tg_size(k, 1);
  j->dv = tg_size(v, 2);
  j->a = tg_attention_params_read(tg_data_ptr(params));
  return TG_OK;
}

/* Splits j->units into chunks with scratch of work_elems elements each and runs fn. */
static tg_status run_split(const char *kernel, attn_job *j, int64_t work_elems, int64_t flops,
                           tg_cpu_chunk_fn fn) {
  if (j->units == 0) return TG_OK;
  const bool parallel = tg_cpu_should_parallelize(flops, TG_CPU_PARALLEL_MIN_TRANSCENDENTAL);
  j->chunks = parallel ? tg_cpu_chunk_count(j->units) : 1;
  j->work_bytes = ((size_t)work_elems * (j->f64 ? 8 : 4) + 63) & ~(size_t)63;
  j->work = tg__host_aligned_alloc(64, (size_t)j->chunks * j->work_bytes);
  if (!j->work) return tg_set_error(TG_ERR_MEMORY, "%s: out of memory for its tiles", kernel);
  if (j->chunks == 1)
    fn(0, j);
  else
    tg_cpu_parallel_for(j->chunks, fn, j);
  tg__host_free(j->work);
  return TG_OK;
}

tg_status tg__kernel_scaled_dot_product_attention_forward_cpu(int n_tensors, tg_tensor *const *t) {
  static const char *const kernel = "scaled_dot_product_attention.forward";
  TG__KERNEL_ARITY(kernel, n_tensors, 6);
  attn_job j = {.out = tg_data_ptr(t[0]),
                .lse = tg_data_ptr(t[1]),
                .q = tg_data_ptr(t[2]),
                .k = tg_data_ptr(t[3]),
                .v = tg_data_ptr(t[4])};
  tg_status st = job_of(kernel, &j, t[2], t[3], t[4], t[5]);
  if (st != TG_OK) return st;
  j.q_blocks = (j.tq + ATTN_BR - 1) / ATTN_BR;
  j.units = j.n * j.q_blocks;
  /* kt, s, z, acc, m, l */
  const int64_t work = j.d * ATTN_BC + 2 * ATTN_BC + ATTN_BR * j.dv + 2 * ATTN_BR;
  return run_split(kernel, &j, work, j.n * j.tq * j.tk * (j.d + j.dv + 1), forward_chunk);
}

tg_status tg__kernel_scaled_dot_product_attention_backward_cpu(int n_tensors, tg_tensor *const *t) {
  static const char *const kernel = "scaled_dot_product_attention.backward";
  TG__KERNEL_ARITY(kernel, n_tensors, 10);
  attn_job j = {.dq = tg_data_ptr(t[0]),
                .dk = tg_data_ptr(t[1]),
                .dv_out = tg_data_ptr(t[2]),
                .grad = tg_data_ptr(t[3]),
                .q = tg_data_ptr(t[4]),
                .k = tg_data_ptr(t[5]),
                .v = tg_data_ptr(t[6]),
                .o = tg_data_ptr(t[7]),
                .lse = tg_data_ptr(t[8])};
  tg_status st = job_of(kernel, &j, t[4], t[5], t[6], t[9]);
  if (st != TG_OK) return st;
  j.units = j.n;
  /* kt, vt, p, dp, z, dk_acc, dv_acc, delta */
  const int64_t work = (j.d + j.dv) * ATTN_BC + 3 * ATTN_BC + ATTN_BC * (j.d + j.dv) + j.tq;
  return run_split(kernel, &j, work, j.n * j.tq * j.tk * (2 * j.d + 2 * j.dv + 1), backward_chunk);
}
