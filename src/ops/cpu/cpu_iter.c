/* The strided-loop driver: dim coalescing and the (parallel) walk over rows. */
#include <omp.h>

#include "ops/cpu/cpu_internal.h"
#include "tensor/checked.h"

tg_cpu_operand tg_cpu_operand_of(const tg_tensor *t) {
  tg_cpu_operand op = {tg_cpu_data(t), tg_dtype_size(t->dtype), t->strides};
  return op;
}

static int64_t abs64(int64_t v) { return v < 0 ? -v : v; }

void tg_cpu_iter_init(tg_cpu_iter *it, int ndim, const int64_t *sizes, int nops,
                      const tg_cpu_operand *ops) {
  it->nops = nops;
  it->numel = 1;
  for (int k = 0; k < nops; k++) {
    it->data[k] = ops[k].data;
    it->elsize[k] = ops[k].elsize;
  }
  /* Keep the dims that are not 1: a size-1 dim contributes nothing to any address. */
  int n = 0;
  for (int d = 0; d < ndim; d++) it->numel *= sizes[d];
  if (it->numel == 0) { /* nothing to walk; strides of an empty tensor may be anything */
    it->ndim = 1;
    it->sizes[0] = 0;
    for (int k = 0; k < nops; k++) it->strides[k][0] = 0;
    return;
  }
  for (int d = 0; d < ndim; d++) {
    if (sizes[d] == 1) continue;
    it->sizes[n] = sizes[d];
    for (int k = 0; k < nops; k++) it->strides[k][n] = ops[k].strides[d];
    n++;
  }
  /* Order by operand 0's strides, largest outermost (stable insertion sort, so equal
   * strides keep their logical order): the written operand is walked in memory order. */
  for (int i = 1; i < n; i++) {
    for (int j = i; j > 0 && abs64(it->strides[0][j - 1]) < abs64(it->strides[0][j]); j--) {
      int64_t s = it->sizes[j];
      it->sizes[j] = it->sizes[j - 1];
      it->sizes[j - 1] = s;
      for (int k = 0; k < nops; k++) {
        int64_t t = it->strides[k][j];
        it->strides[k][j] = it->strides[k][j - 1];
        it->strides[k][j - 1] = t;
      }
    }
  }
  /* Merge an outer dim into the inner one whenever every operand steps over the inner dim
   * exactly once per outer step (stride 0 merges with stride 0). */
  int m = 0;
  for (int d = 0; d < n; d++) {
    if (m > 0) {
      bool mergeable = true;
      /* Checked: an operand's stride times the size may pass its span by one stride. */
      for (int k = 0; k < nops; k++) {
        int64_t step;
        if (tg__mul_ovf(it->strides[k][d], it->sizes[d], &step) || it->strides[k][m - 1] != step)
          mergeable = false;
      }
      if (mergeable) {
        it->sizes[m - 1] *= it->sizes[d];
        for (int k = 0; k < nops; k++) it->strides[k][m - 1] = it->strides[k][d];
        continue;
      }
    }
    it->sizes[m] = it->sizes[d];
    for (int k = 0; k < nops; k++) it->strides[k][m] = it->strides[k][d];
    m++;
  }
  if (m == 0) { /* a single element (or 0-dim) */
    it->sizes[0] = 1;
    for (int k = 0; k < nops; k++) it->strides[k][0] = 0;
    m = 1;
  }
  it->ndim = m;
}

/* Walks the elements [begin, end) of the iteration, one row call per inner-dim run. */
static void run_range(const tg_cpu_iter *it, int64_t begin, int64_t end, tg_cpu_row_fn fn,
                      const void *ctx) {
  const int inner = it->ndim - 1;
  int64_t idx[TG_MAX_DIMS];
  int64_t rem = begin;
  for (int d = inner; d >= 0; d--) {
    idx[d] = rem % it->sizes[d];
    rem /= it->sizes[d];
  }
  int64_t inner_strides[TG_CPU_MAX_OPERANDS];
  for (int k = 0; k < it->nops; k++) inner_strides[k] = it->strides[k][inner];

  for (int64_t pos = begin; pos < end;) {
    char *ptrs[TG_CPU_MAX_OPERANDS];
    for (int k = 0; k < it->nops; k++) {
      int64_t off = 0;
      for (int d = 0; d <= inner; d++) off += idx[d] * it->strides[k][d];
      ptrs[k] = it->data[k] + off * (int64_t)it->elsize[k];
    }
    int64_t n = it->sizes[inner] - idx[inner];
    if (n > end - pos) n = end - pos;
    fn(n, ptrs, inner_strides, ctx);
    pos += n;
    idx[inner] += n;
    for (int d = inner; d > 0 && idx[d] == it->sizes[d]; d--) {
      idx[d] = 0;
      idx[d - 1]++;
    }
  }
}

bool tg_cpu_should_parallelize(int64_t numel, int64_t min_numel) {
  return numel >= min_numel && !omp_in_parallel() && omp_get_max_threads() > 1;
}

void tg_cpu_iter_run(const tg_cpu_iter *it, tg_cpu_row_fn fn, const void *ctx, bool parallel) {
  const int64_t numel = it->numel;
  if (numel == 0) return;
  if (!parallel) {
    run_range(it, 0, numel, fn, ctx);
    return;
  }
#pragma omp parallel
  {
    const int64_t nthreads = omp_get_num_threads();
    const int64_t t = omp_get_thread_num();
    /* Ranges are multiples of 16 elements so threads do not share cache lines of a
     * contiguous output and vector loops keep their alignment. */
    int64_t chunk = (numel + nthreads - 1) / nthreads;
    chunk = (chunk + 15) / 16 * 16;
    int64_t begin = t * chunk < numel ? t * chunk : numel;
    int64_t end = begin + chunk < numel ? begin + chunk : numel;
    if (begin < end) run_range(it, begin, end, fn, ctx);
  }
}
