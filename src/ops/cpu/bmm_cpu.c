/* bmm.gemm on the CPU: one GEMM (tg_cpu_gemm, the one mm runs) per batch entry, on the
 * operands' own strides (a batch dim expanded to stride 0 is read in place).
 *
 * Small GEMMs run one thread each, so a batch of them is split across tg's thread pool;
 * large ones thread themselves (BLIS or the engine on the pool) and the batch runs in order.
 * The border is TG_CPU_BMM_SPLIT_MAX_MACS (bench/bmm_bench.c times it). */
#include <stdatomic.h>
#include <string.h>

#include "ops/cpu/cpu_internal.h"
#include "ops/cpu/thread_pool.h"
#include "tensor/host_memory.h"

/* GEMMs below this many multiply-adds are split across the pool by batch entry; at and above
 * it each GEMM threads itself. Below TG_CPU_GEMM_PARALLEL_MIN_MACS (4M) a GEMM runs one thread
 * anyway, so there the split is the only parallelism; between 4M and 16M (attention's
 * [256, 64] @ [64, 256] is exactly 4M) whole GEMMs per thread skip BLIS's per-product team
 * and join, and one-thread GEMMs may run on libxsmm. bench/bmm_bench.c, 2 threads, F32,
 * [8, 4, 256, 64] (the shared 2-core host at a load average of 6, so rough): q @ k^T forward
 * 7.5-8.5 ms split against 14.4-14.5 ms with each GEMM threading itself
 * (TG_CPU_PARALLEL_MIN=1000000000000), forward + backward 28-33 against 39-57; p @ v 8.6-13.6
 * against 8.8-9.5 forward, 29-40 against 38-41 with backward. Not timed on a quiet machine. */
#define TG_CPU_BMM_SPLIT_MAX_MACS ((int64_t)1 << 24)
/* Below this many multiply-adds in all, the pool's start costs more than a second thread
 * saves (a GEMM of 2^16 takes about 10 us on one core). */
#define TG_CPU_BMM_SPLIT_MIN_MACS ((int64_t)1 << 17)

/* Batch entry `entry` of t [*, r, c] as a 2-D tensor over t's storage (no reference taken:
 * lives on the caller's stack, for tg_cpu_gemm only). */
static void matrix_of_entry(tg_tensor *m, const tg_tensor *t, int64_t entry) {
  int64_t offset = t->offset;
  for (int d = t->ndim - 3; d >= 0; d--) {
    offset += entry % t->sizes[d] * t->strides[d];
    entry /= t->sizes[d];
  }
  m->storage = t->storage;
  m->dtype = t->dtype;
  m->offset = offset;
  m->ndim = 2;
  for (int d = 0; d < 2; d++) {
    m->sizes[d] = t->sizes[t->ndim - 2 + d];
    m->strides[d] = t->strides[t->ndim - 2 + d];
  }
}

typedef struct bmm_job {
  tg_tensor *out;
  const tg_tensor *a, *b;
  int64_t entries, n_chunks;
  bool copy_b;       /* copy_b_row_major */
  atomic_int failed; /* the status of a GEMM that failed (its message stays on its thread) */
} bmm_job;

/* Whether entry GEMMs whose b is column-major should read a row-major copy of it instead:
 * with k under 256 and one thread per GEMM, libxsmm (row-major b only) runs the copy about 2x
 * faster than BLIS runs the column-major b in place (attention's q @ k^T, [256, 64] @
 * [64, 256] on one thread: 0.79 ms in place, 0.38 ms with the copy), and the copy costs k * n
 * against m * n * k multiply-adds. Larger k: BLIS packs anyway. */
static bool copy_b_row_major(const tg_tensor *b, bool one_thread_gemms) {
  const int r = b->ndim - 2, c = b->ndim - 1;
  return one_thread_gemms && b->strides[r] == 1 && b->strides[c] != 1 && b->sizes[r] > 1 &&
         b->sizes[c] > 1 && b->sizes[r] < 256;
}

/* A row-major [k, n] matrix over a scratch buffer with the room behind it that the GEMM may
 * read (one row and a vector): no copy inside tg_cpu_gemm then. */
typedef struct scratch_matrix {
  tg_storage storage;
  tg_tensor t;
} scratch_matrix;

static bool scratch_init(scratch_matrix *s, const tg_tensor *like) {
  const int64_t k = like->sizes[like->ndim - 2], n = like->sizes[like->ndim - 1];
  const size_t elsize = tg_dtype_size(like->dtype);
  const size_t bytes = (size_t)(k * n + n) * elsize + 64;
  memset(s, 0, sizeof *s);
  s->storage.data = tg__host_aligned_alloc(64, bytes);
  if (!s->storage.data) return false;
  s->storage.nbytes = s->storage.capacity = bytes;
  s->storage.device = TG_DEVICE_CPU;
  s->t.storage = &s->storage;
  s->t.dtype = like->dtype;
  s->t.ndim = 2;
  s->t.sizes[0] = k, s->t.sizes[1] = n;
  s->t.strides[0] = n, s->t.strides[1] = 1;
  return true;
}

static tg_status gemm_entries(const bmm_job *job, int64_t begin, int64_t end) {
  scratch_matrix scratch;
  const bool copy_b = job->copy_b && end > begin;
  if (copy_b && !scratch_init(&scratch, job->b))
    return tg_set_error(TG_ERR_MEMORY, "bmm.gemm: out of memory for a row-major copy of b");
  tg_status st = TG_OK;
  for (int64_t e = begin; e < end && st == TG_OK; e++) {
    tg_tensor o = {0}, a = {0}, b = {0};
    matrix_of_entry(&o, job->out, e);
    matrix_of_entry(&a, job->a, e);
    matrix_of_entry(&b, job->b, e);
    if (copy_b) st = tg_cpu_copy(&scratch.t, &b);
    if (st == TG_OK) st = tg_cpu_gemm(&o, &a, copy_b ? &scratch.t : &b, 1.0, 0.0);
  }
  if (copy_b) tg__host_free(scratch.storage.data);
  return st;
}

static void gemm_chunk(int64_t chunk, void *ctx) {
  bmm_job *job = ctx;
  const int64_t rest = job->entries - 1; /* entry 0 ran on the caller */
  const int64_t begin = 1 + rest * chunk / job->n_chunks;
  const int64_t end = 1 + rest * (chunk + 1) / job->n_chunks;
  const tg_status st = gemm_entries(job, begin, end);
  if (st != TG_OK) atomic_store(&job->failed, (int)st);
}

static tg_status check_operands(const tg_tensor *out, const tg_tensor *a, const tg_tensor *b) {
  const char *k = "bmm.gemm";
  if ((out->dtype != TG_F32 && out->dtype != TG_F64) || a->dtype != out->dtype ||
      b->dtype != out->dtype)
    return tg_set_error(TG_ERR_DTYPE, "%s: dtypes %s, %s, %s (F32 or F64, all alike)", k,
                        tg_dtype_name(out->dtype), tg_dtype_name(a->dtype),
                        tg_dtype_name(b->dtype));
  const int nd = out->ndim;
  bool fits = nd >= 3 && a->ndim == nd && b->ndim == nd && a->sizes[nd - 1] == b->sizes[nd - 2] &&
              out->sizes[nd - 2] == a->sizes[nd - 2] && out->sizes[nd - 1] == b->sizes[nd - 1];
  for (int d = 0; fits && d < nd - 2; d++)
    fits = a->sizes[d] == out->sizes[d] && b->sizes[d] == out->sizes[d];
  if (!fits)
    return tg_set_error(TG_ERR_SHAPE, "%s: out %s = a %s @ b %s does not fit", k,
                        tg__sizes_str(out), tg__sizes_str(a), tg__sizes_str(b));
  return TG_OK;
}

tg_status tg__kernel_bmm_gemm_cpu(int n, tg_tensor *const *t) {
  TG__KERNEL_ARITY("bmm.gemm", n, 3);
  tg_tensor *out = t[0];
  const tg_tensor *a = t[1], *b = t[2];
  tg_status st = check_operands(out, a, b);
  if (st != TG_OK) return st;
  const int nd = out->ndim;
  const int64_t entries = tg__numel(nd - 2, out->sizes);
  const int64_t m = out->sizes[nd - 2], n_cols = out->sizes[nd - 1], k = a->sizes[nd - 1];
  if (entries == 0 || m == 0 || n_cols == 0) return TG_OK;
  if (k == 0) return tg_cpu_fill(out, 0); /* empty sums */
  if ((st = tg_cpu_blis_ready("bmm.gemm")) != TG_OK) return st;

  bmm_job job = {out, a, b, entries, 1, false, 0};
  int64_t macs;
  if (tg__mul_ovf(m, n_cols, &macs) || tg__mul_ovf(macs, k, &macs)) macs = INT64_MAX;
  int64_t total;
  if (tg__mul_ovf(macs, entries, &total)) total = INT64_MAX;
  const bool split = entries > 1 && macs < TG_CPU_BMM_SPLIT_MAX_MACS &&
                     tg_cpu_should_parallelize(total, TG_CPU_BMM_SPLIT_MIN_MACS);
  const bool one_thread_gemms = split || macs < TG_CPU_GEMM_PARALLEL_MIN_MACS ||
                                tg_get_num_threads() == 1 || tg_cpu_contended();
  job.copy_b = copy_b_row_major(b, one_thread_gemms);
  if (!split) return gemm_entries(&job, 0, entries);
  /* The first entry on the caller: what a first GEMM sets up once (BLIS's thread count, the
   * engine choice, which may calibrate) is then never done from inside a pool chunk. */
  if ((st = gemm_entries(&job, 0, 1)) != TG_OK) return st;
  job.n_chunks = tg_cpu_chunk_count(entries - 1);
  tg_cpu_parallel_for(job.n_chunks, gemm_chunk, &job);
  const tg_status failed = (tg_status)atomic_load(&job.failed);
  if (failed == TG_OK) return TG_OK;
  /* A failure in the caller's chunk is recorded here already; a worker's stayed there. */
  return tg_last_error() == failed
             ? failed
             : tg_set_error(failed, "bmm.gemm: a batch entry's GEMM failed on a worker (%s)",
                            failed == TG_ERR_MEMORY ? "out of memory for an operand's copy"
                                                    : tg_status_name(failed));
}
