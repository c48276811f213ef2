/* tg_ddp with CUDA parameters (the emulation at np 1 and 2; a real GPU at np 1, NCCL taking
 * one GPU per rank; exit 77, skipped, without one): a module with a CUDA and a CPU parameter gets
 * two buckets, the CPU one through the communication thread, the CUDA one through NCCL from the
 * hook where tg_dist has it, else through a host copy at synchronize (the CPU emulation of
 * CUDA, tg_dist_emu, has no NCCL); both averaged; and the same with no_overlap. */
#include "dist_check.h"

static int rank, size;

static void test_cuda_bucket(bool overlap) {
  tg_module *m = tg_module_new("mixed");
  tg_scope sc = tg_scope_begin();
  tg_options cuda = {.dtype = TG_F32, .device = TG_DEVICE_CUDA(0)};
  DIST_CHECK_OK(tg_module_register_parameter(m, "g", tg_ones(TG_SHAPE(5), cuda)));
  DIST_CHECK_OK(
      tg_module_register_parameter(m, "c", tg_ones(TG_SHAPE(3), TG_OPTS(.dtype = TG_F32))));
  tg_tensor *g = tg_module_find(m, "g"), *c = tg_module_find(m, "c");
  tg_ddp *ddp = tg_ddp_new(m, (tg_ddp_options){.no_overlap = !overlap});
  DIST_CHECK(ddp);
  tg_ddp_stats st = {0};
  DIST_CHECK_OK(tg_ddp_stats_get(ddp, &st));
  DIST_CHECK(st.n_buckets == 2);
  enum { STEPS = 2 };
  for (int s = 0; ddp && s < STEPS; s++) {
    DIST_CHECK_OK(tg_module_zero_grad(m));
    tg_tensor *loss = tg_add(tg_to_device(tg_sum(tg_mul_scalar(g, rank + 1.0)), TG_DEVICE_CPU),
                             tg_sum(tg_mul_scalar(c, 2.0 * (rank + 1))));
    DIST_CHECK_OK(tg_ddp_backward(ddp, loss));
    DIST_CHECK(tg_tensor_device(tg_grad(g)).type == TG_CUDA);
    DIST_CHECK(grad_is(g, (size + 1) / 2.0));
    DIST_CHECK(grad_is(c, (double)(size + 1)));
  }
  DIST_CHECK_OK(tg_ddp_stats_get(ddp, &st));
  int per_step = overlap ? 1 + tg_dist_has_nccl() : 0; /* the CPU bucket; NCCL's */
  DIST_CHECK(st.steps == STEPS && st.buckets_during_backward == STEPS * per_step);
  tg_scope_end(sc);
  tg_ddp_free(ddp);
  tg_module_free(m);
}

int main(int argc, char **argv) {
  DIST_CHECK_OK(tg_dist_init(&argc, &argv, (tg_dist_options){0}));
  rank = tg_dist_rank();
  size = tg_dist_world_size();
  if (!tg_cuda_is_available()) { /* the real CUDA build on a machine without a GPU */
    printf("test_ddp_cuda: no CUDA device: skipped\n");
    DIST_CHECK_OK(tg_dist_finalize());
    return 77;
  }
  printf("test_ddp_cuda: CUDA buckets through %s\n", tg_dist_has_nccl() ? "NCCL" : "a host copy");
  test_cuda_bucket(true);
  test_cuda_bucket(false);
  DIST_CHECK(tg_live_objects() == 0);
  const int failed = dist_check_finish("test_ddp_cuda");
  DIST_CHECK_OK(tg_dist_finalize());
  return failed;
}
