/* The strided-loop driver: the (parallel) walk over rows of a coalesced iteration. */
#include <pthread.h>
#include <stdlib.h>

#include "ops/cpu/cpu_internal.h"
#include "ops/cpu/thread_pool.h"

tg_cpu_operand tg_cpu_operand_of(const tg_tensor *t) {
  tg_cpu_operand op = {tg_cpu_data(t), tg_dtype_size(t->dtype), t->strides};
  return op;
}

void tg_cpu_iter_init(tg_cpu_iter *it, int ndim, const int64_t *sizes, int nops,
                      const tg_cpu_operand *ops) {
  const int64_t *strides[TG_CPU_MAX_OPERANDS];
  it->nops = nops;
  it->numel = 1;
  for (int d = 0; d < ndim; d++) it->numel *= sizes[d];
  for (int k = 0; k < nops; k++) {
    it->data[k] = ops[k].data;
    it->elsize[k] = ops[k].elsize;
    strides[k] = ops[k].strides;
  }
  tg_coalesce(&it->dims, ndim, sizes, nops, strides, true);
}

/* Walks the elements [begin, end) of the iteration, one row call per inner-dim run. Each
 * operand's offset is computed once, then carried from row to row (a small CNN's pooling and
 * im2col rows are 8 to 32 elements: recomputing every offset from the index took as long
 * as the rows' work). */
static void run_range(const tg_cpu_iter *it, int64_t begin, int64_t end, tg_cpu_row_fn fn,
                      const void *ctx) {
  const tg_coalesced *c = &it->dims;
  const int inner = c->ndim - 1, nops = it->nops;
  int64_t idx[TG_MAX_DIMS];
  int64_t rem = begin;
  for (int d = inner; d >= 0; d--) {
    idx[d] = rem % c->sizes[d];
    rem /= c->sizes[d];
  }
  int64_t inner_strides[TG_CPU_MAX_OPERANDS], row_off[TG_CPU_MAX_OPERANDS];
  for (int k = 0; k < nops; k++) {
    inner_strides[k] = c->strides[k][inner];
    row_off[k] = 0; /* element offset of the current row's first element (inner index 0) */
    for (int d = 0; d < inner; d++) row_off[k] += idx[d] * c->strides[k][d];
  }
  const int64_t row_len = c->sizes[inner];
  int64_t first = idx[inner]; /* where the first row starts; later rows start at 0 */
  for (int64_t pos = begin; pos < end;) {
    char *ptrs[TG_CPU_MAX_OPERANDS];
    for (int k = 0; k < nops; k++)
      ptrs[k] = it->data[k] + (row_off[k] + first * inner_strides[k]) * (int64_t)it->elsize[k];
    const int64_t n = row_len - first < end - pos ? row_len - first : end - pos;
    fn(n, ptrs, inner_strides, ctx);
    pos += n;
    first = 0;
    /* the next row: carry into the outer dims */
    for (int d = inner - 1; d >= 0; d--) {
      idx[d]++;
      for (int k = 0; k < nops; k++) row_off[k] += c->strides[k][d];
      if (idx[d] < c->sizes[d]) break;
      idx[d] = 0;
      for (int k = 0; k < nops; k++) row_off[k] -= c->sizes[d] * c->strides[k][d];
    }
  }
}

/* TG_CPU_PARALLEL_MIN, when set to a number, replaces every pass's threshold: for
 * measuring where a second thread pays (bench/parallel_thresholds.c). Read once. */
static int64_t threshold_override = -2; /* -2: not read yet; -1: unset */
static pthread_once_t override_once = PTHREAD_ONCE_INIT;

static void read_override(void) {
  const char *v = getenv("TG_CPU_PARALLEL_MIN");
  char *end = NULL;
  long long n = v ? strtoll(v, &end, 10) : -1;
  threshold_override = v && end != v && *end == '\0' && n >= 0 ? (int64_t)n : -1;
}

bool tg_cpu_should_parallelize(int64_t numel, int64_t min_numel) {
  pthread_once(&override_once, read_override);
  if (threshold_override >= 0) min_numel = threshold_override;
  return numel >= min_numel && !tg_cpu_pool_busy_here() && tg_cpu_pool_threads() > 1 &&
         !tg_cpu_contended() && !tg_cpu_too_small_to_wake(numel, min_numel);
}

bool tg_cpu_too_small_to_wake(int64_t size, int64_t min) {
  return size / TG_CPU_ASLEEP_FACTOR < min && !tg_is_deterministic() && tg_cpu_pool_asleep();
}

typedef struct iter_job {
  const tg_cpu_iter *it;
  tg_cpu_row_fn fn;
  const void *ctx;
} iter_job;

static void run_iter_range(int64_t begin, int64_t end, void *arg) {
  const iter_job *j = arg;
  run_range(j->it, begin, end, j->fn, j->ctx);
}

void tg_cpu_iter_run_aligned(const tg_cpu_iter *it, tg_cpu_row_fn fn, const void *ctx,
                             bool parallel, int64_t align) {
  iter_job j = {it, fn, ctx};
  tg_cpu_parallel_ranges(it->numel, align, parallel, run_iter_range, &j);
}

void tg_cpu_iter_run(const tg_cpu_iter *it, tg_cpu_row_fn fn, const void *ctx, bool parallel) {
  /* Ranges are multiples of 16 elements so threads do not share cache lines of a
   * contiguous output and vector loops keep their alignment. */
  tg_cpu_iter_run_aligned(it, fn, ctx, parallel, 16);
}
