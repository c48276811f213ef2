/* CUDA tensors through tg_dist: all-reduce (every op, strided), broadcast, the DDP's
 * in-place tg__dist_allreduce_contiguous, and a device mismatch across ranks. Built twice:
 * on the emulated CUDA build (TG_CUDA_EMULATION; no NCCL there: every CUDA tensor goes
 * through a host copy), run at np 2; and where tg has the real CUDA device, run at np 1
 * (NCCL takes one GPU per rank), exiting 77 (skipped) without a GPU. */
#include <math.h>

#include "distributed/comm.h"
#include "tensor/host_memory.h"
#include "dist_check.h"
#include "tg/cuda.h"

static int rank, size;

/* (rank + 1) * (k + 1) at element k, on device. */
static tg_tensor *ranked(int64_t rows, int64_t cols, tg_dtype dtype, tg_device device) {
  double v[64];
  for (int64_t k = 0; k < rows * cols && k < 64; k++) v[k] = (rank + 1.0) * (double)(k + 1);
  tg_tensor *t = tg_from_data(TG_SHAPE(rows, cols), v, (tg_options){.dtype = TG_F64});
  return tg_to_device(tg_to_dtype(t, dtype), device);
}

static bool values_are(const tg_tensor *t, double factor) {
  tg_tensor *h = tg_to_device(tg_contiguous(t), TG_DEVICE_CPU);
  tg_tensor *want =
      tg_mul_scalar(tg_view(tg_arange(1, (double)tg_numel(t) + 1, 1, (tg_options){.dtype = TG_F64}),
                            tg_ndim(t), tg_sizes(t)),
                    factor);
  return h && tg_max_abs_diff(tg_to_dtype(h, TG_F64), want) < 1e-9;
}

int main(int argc, char **argv) {
  const int64_t live = tg_live_objects();
  DIST_CHECK_OK(tg_dist_init(&argc, &argv, (tg_dist_options){0}));
  rank = tg_dist_rank();
  size = tg_dist_world_size();
#ifdef TG_CUDA_EMULATION
  DIST_CHECK(!tg_dist_has_nccl());
#else
  if (!tg_cuda_is_available()) {
    printf("test_dist_cuda: no CUDA device: skipped\n");
    tg_dist_finalize();
    return 77;
  }
  printf("test_dist_cuda: NCCL %s\n", tg_dist_has_nccl() ? "on" : "off");
#endif
  const tg_device cuda = TG_DEVICE_CUDA(0);
  tg_scope s = tg_scope_begin();
  const double sum = size * (size + 1) / 2.0;
  const tg_dtype dtypes[] = {TG_F32, TG_F64, TG_I64};
  for (int d = 0; d < 3; d++) {
    tg_tensor *t = ranked(3, 4, dtypes[d], cuda);
    DIST_CHECK_OK(tg_dist_all_reduce(t, TG_REDUCE_SUM));
    DIST_CHECK(tg_tensor_device(t).type == TG_CUDA && values_are(t, sum));
    t = ranked(3, 4, dtypes[d], cuda);
    DIST_CHECK_OK(tg_dist_all_reduce(t, TG_REDUCE_MAX));
    DIST_CHECK(values_are(t, size));
    t = ranked(3, 4, dtypes[d], cuda);
    DIST_CHECK_OK(tg_dist_all_reduce(t, TG_REDUCE_MIN));
    DIST_CHECK(values_are(t, 1));
  }
  tg_tensor *m = ranked(2, 5, TG_F32, cuda);
  DIST_CHECK_OK(tg_dist_all_reduce(m, TG_REDUCE_MEAN));
  DIST_CHECK(values_are(m, (size + 1) / 2.0));
  /* Strided: a transposed view of a CUDA tensor. */
  tg_tensor *base = ranked(4, 3, TG_F64, cuda);
  DIST_CHECK_OK(tg_dist_all_reduce(tg_t(base), TG_REDUCE_SUM));
  DIST_CHECK(values_are(base, sum));
  /* Broadcast from the last rank. */
  tg_tensor *b = ranked(2, 3, TG_F64, cuda);
  DIST_CHECK_OK(tg_dist_broadcast(tg_t(b), size - 1));
  DIST_CHECK(values_are(b, size));
  /* In place, no check (the DDP's path for a CUDA bucket without NCCL). */
  tg_tensor *flat = ranked(1, 7, TG_F32, cuda);
  DIST_CHECK_OK(tg__dist_allreduce_contiguous("flat", flat, TG_REDUCE_SUM));
  DIST_CHECK(values_are(flat, sum));
#ifdef TG_CUDA_EMULATION
  /* The host copy failing on the last rank alone (each of its allocations in turn): that
   * rank reports TG_ERR_MEMORY; a failure before the data moves (the copy out) is agreed,
   * the others get TG_ERR_DIST at once (no wait for the timeout); one after it (the copy
   * back) stays on that rank. The next call works. */
  if (!tg_dist_has_nccl()) {
    int64_t before = tg__host_allocation_count();
    DIST_CHECK_OK(tg__dist_allreduce_contiguous("staged", flat, TG_REDUCE_SUM));
    const int64_t n = tg__host_allocation_count() - before;
    int failed_here = 0, agreed = 0;
    for (int64_t k = 1; k <= n; k++) {
      if (rank == size - 1) tg__host_fail_allocation(k);
      tg_status st = tg__dist_allreduce_contiguous("staged", flat, TG_REDUCE_SUM);
      tg__host_fail_allocation(0);
      int64_t last = rank == size - 1 ? st : 0;
      DIST_CHECK_OK(tg__dist_allreduce_host("sweep", &last, 1, TG_I64, TG_REDUCE_MAX));
      if (rank == size - 1)
        DIST_CHECK(st == TG_OK || st == TG_ERR_MEMORY);
      else if (size > 1)
        DIST_CHECK(st == TG_OK ? last == TG_OK || last == TG_ERR_MEMORY
                               : st == TG_ERR_DIST && last == TG_ERR_MEMORY);
      agreed += rank == 0 && st == TG_ERR_DIST;
      failed_here += last == TG_ERR_MEMORY;
      tg_clear_error();
    }
    DIST_CHECK(failed_here > 0); /* the sweep reached the staging's allocation */
    DIST_CHECK(size == 1 || rank != 0 || agreed > 0); /* and the copy out's was agreed */
    tg_tensor *again = ranked(1, 7, TG_F32, cuda);
    DIST_CHECK_OK(tg__dist_allreduce_contiguous("after", again, TG_REDUCE_SUM));
    DIST_CHECK(values_are(again, sum));
  }
#endif
  /* A CUDA tensor on one rank, a CPU one on the other: TG_ERR_DEVICE on both. */
  if (size > 1) {
    tg_tensor *x = ranked(2, 2, TG_F32, rank == 1 ? cuda : TG_DEVICE_CPU);
    DIST_CHECK_ERR(tg_dist_all_reduce(x, TG_REDUCE_SUM), TG_ERR_DEVICE,
                   "rank 0 has float32 [2, 2] on cpu, rank 1 has float32 [2, 2] on cuda");
  }
  tg_scope_end(s);
  DIST_CHECK(tg_live_objects() == live);
  const int failed = dist_check_finish("test_dist_cuda");
  DIST_CHECK_OK(tg_dist_finalize());
  return failed || dist_check_failed;
}
