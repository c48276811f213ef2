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
#include <string.h>

#include "ops/attention_math.h"
#include "ops/cpu/attention_fma_cpu.h"
#include "ops/cpu/cpu_internal.h"
#include "ops/cpu/cpu_vecmath.h"
#include "ops/cpu/thread_pool.h"
#include "tensor/host_memory.h"
#include "tg/dispatch.h"

/* Query rows and keys per tile; the register block of tile products (ATTN_BR a multiple of
 * ATTN_MR, ATTN_BC of ATTN_NR). */
#define ATTN_BR 32
#define ATTN_BC 64
#define ATTN_MR 4
#define ATTN_NR 16
/* independent partial maxima and sums of a row pass (divides ATTN_BC) */
#define ATTN_LANES 16

/* Inlined into each clone of its callers (TG_VF_CLONES), so each gets its vector width. */
#if defined(__GNUC__)
#define ATTN_INLINE static inline __attribute__((always_inline))
#else
#define ATTN_INLINE static inline
#endif

/* n rounded up to a multiple of m */
static inline int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }
static inline int64_t tq_pad(int64_t tq) { return round_up(tq, ATTN_BR); }

typedef struct attn_job {
  const void *q, *k, *v, *o, *grad;
  void *out, *lse, *dq, *dk, *dv_out;
  int64_t n, tq, tk, d, dv;
  int64_t dp, dvp; /* d and dv padded to a multiple of ATTN_NR */
  int64_t tkp;     /* tk padded to a multiple of ATTN_BC */
  void *kt, *vp;   /* forward: every head's keys transposed, values padded (pack_head) */
  tg_attention_params a;
  int64_t units, chunks, q_blocks;
  char *work; /* chunks * work_bytes */
  size_t work_bytes;
  bool f64;
  bool fma; /* F32 on a CPU with AVX2 and FMA: tg__attention_tile_gemm_f32_fma */
} attn_job;

/* x[c] = exp(x[c] * mul - sub) for a row of ATTN_BC, where x * mul - sub <= 89 (a score minus
 * the row's running maximum or its log-sum-exp, or -inf: 0). F32: tg_vf_exp's polynomial in
 * GCC's vector extension: GCC 12 vectorises tg_vf_exp's selects for AVX-512 only, and the
 * exps were a third of the fused op's time in scalar code. NaN stays NaN. */
#if defined(__GNUC__)
typedef float attn_v8f __attribute__((vector_size(32)));
typedef int32_t attn_v8i __attribute__((vector_size(32)));
TG_VF_CLONES static void exp_row_f32(float *x, float mul, float sub) {
  const attn_v8f zero = {0}, low = zero - 104.0f, magic = zero + 12582912.0f;
  for (int c = 0; c < ATTN_BC; c += 8) {
    attn_v8f v;
    memcpy(&v, x + c, sizeof v);
    v = v * mul - sub;
    const attn_v8i under = v < low; /* -inf included; exp(-104) rounds to 0 */
    v = (attn_v8f)(((attn_v8i)v & ~under) | ((attn_v8i)low & under));
    attn_v8f n = (v * 1.44269504088896341f + magic) - magic;
    n = (attn_v8f)((attn_v8i)n & (n == n)); /* NaN: 0 (the NaN reaches p through r) */
    attn_v8f r = v - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    attn_v8f p = zero + 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    const attn_v8i ni = __builtin_convertvector(n, attn_v8i), n1 = ni >> 1, n2 = ni - n1;
    p = p * (attn_v8f)((n1 + 127) << 23) * (attn_v8f)((n2 + 127) << 23);
    memcpy(x + c, &p, sizeof p);
  }
}
#else
static void exp_row_f32(float *x, float mul, float sub) {
  for (int64_t c = 0; c < ATTN_BC; c++) x[c] = tg_vf_exp(x[c] * mul - sub);
}
#endif

static void exp_row_f64(double *x, double mul, double sub) {
  for (int64_t c = 0; c < ATTN_BC; c++) x[c] = exp(x[c] * mul - sub);
}

#define T float
#define SFX(name) name##_f32
#define ATTN_FMA(j) ((j)->fma)
#define exp_row exp_row_f32
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
#undef ATTN_FMA
#undef exp_row

#define T double
#define SFX(name) name##_f64
#define ATTN_FMA(j) ((void)(j), false)
#define exp_row exp_row_f64
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
#undef ATTN_FMA
#undef exp_row

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

static void pack_chunk(int64_t chunk, void *ctx) {
  const attn_job *j = ctx;
  for (int64_t n = chunk; n < j->n; n += j->chunks) {
    if (j->f64)
      pack_head_f64(j, n);
    else
      pack_head_f32(j, n);
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
  j->fma = !j->f64 && tg__attention_fma_in_use();
  j->n = tg_size(q, 0);
  j->tq = tg_size(q, 1);
  j->d = tg_size(q, 2);
  j->tk = tg_size(k, 1);
  j->dv = tg_size(v, 2);
  j->dp = round_up(j->d, ATTN_NR);
  j->dvp = round_up(j->dv, ATTN_NR);
  j->tkp = round_up(j->tk, ATTN_BC);
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
  if (j.units == 0) return TG_OK;
  /* every head's K^T and V, padded, shared by the query blocks */
  const size_t elem = j.f64 ? 8 : 4;
  const int64_t flops = j.n * j.tq * j.tk * (j.d + j.dv + 1);
  j.kt = tg__host_aligned_alloc(64, (size_t)(j.n * j.tkp * (j.dp + j.dvp)) * elem);
  if (!j.kt) return tg_set_error(TG_ERR_MEMORY, "%s: out of memory for the packed keys", kernel);
  j.vp = (char *)j.kt + (size_t)(j.n * j.tkp * j.dp) * elem;
  j.units = j.n;
  j.chunks = tg_cpu_should_parallelize(flops, TG_CPU_PARALLEL_MIN_TRANSCENDENTAL)
                 ? tg_cpu_chunk_count(j.n)
                 : 1;
  tg_cpu_parallel_for(j.chunks, pack_chunk, &j);
  j.units = j.n * j.q_blocks;
  /* qs, s, acc, m, l, z */
  const int64_t work = ATTN_BR * j.dp + ATTN_BR * ATTN_BC + ATTN_BR * j.dvp + 2 * ATTN_BR + ATTN_BC;
  st = run_split(kernel, &j, work, flops, forward_chunk);
  tg__host_free(j.kt);
  return st;
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
  /* qs, gs, kt, kb, vt, p, dpt, pt, dk_acc, dv_acc, dq_acc, z, delta */
  const int64_t work = ATTN_BR * (j.dp + j.dvp) + ATTN_BC * (2 * j.dp + j.dvp) +
                       3 * ATTN_BR * ATTN_BC + ATTN_BC * (j.dp + j.dvp) + tq_pad(j.tq) * j.dp +
                       ATTN_BC + j.tq;
  return run_split(kernel, &j, work, j.n * j.tq * j.tk * (2 * j.d + 2 * j.dv + 1), backward_chunk);
}
