/* Allocation failure on the CUDA device: every host allocation of a fused and a composed
 * LLTM training step on cuda:0 fails in turn (tests/alloc_sweep.h); each run reports
 * TG_ERR_MEMORY or gives the clean run's results, and no device memory stays in use. */
#include "cuda_testutil.h"

#include "alloc_sweep.h"

static void sweep_on_cuda(tg_lltm_impl impl, const char *name) {
#ifndef TG_CUDA_EMULATION
  sweep_rtol = 1e-6; /* a GPU's reductions need not repeat bit for bit */
#endif
  lltm_step_case c = {impl, TG_CUDA0};
  sweep_result r = sweep(name, lltm_training_step, &c);
  cr_assert_gt(r.failed, 0);
}

TG_CUDA_TEST(cuda_alloc_failure, fused_training_step) {
  sweep_on_cuda(TG_LLTM_FUSED, "fused LLTM training step on cuda:0");
}

TG_CUDA_TEST(cuda_alloc_failure, composed_training_step) {
  sweep_on_cuda(TG_LLTM_COMPOSED, "composed LLTM training step on cuda:0");
}
