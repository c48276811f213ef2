/* tg_dist built without MPI (TG_MPI=OFF): every call answers TG_ERR_UNSUPPORTED, saying why,
 * and the queries give a one-process answer. Run in the normal suite of such a build. */
#include "dist_check.h"

int main(int argc, char **argv) {
  DIST_CHECK(!tg_dist_is_built());
  DIST_CHECK(!tg_dist_has_nccl());
  DIST_CHECK_ERR(tg_dist_init(&argc, &argv, (tg_dist_options){0}), TG_ERR_UNSUPPORTED,
                 "built without MPI");
  DIST_CHECK(!tg_dist_is_initialized() && tg_dist_rank() == 0 && tg_dist_world_size() == 1);
  tg_tensor *t = tg_zeros(TG_SHAPE(2), TG_OPTS_DEFAULT);
  DIST_CHECK_ERR(tg_dist_all_reduce(t, TG_REDUCE_SUM), TG_ERR_UNSUPPORTED, "tg_dist_all_reduce");
  DIST_CHECK_ERR(tg_dist_broadcast(t, 0), TG_ERR_UNSUPPORTED, "tg_dist_broadcast");
  DIST_CHECK_ERR(tg_dist_barrier(), TG_ERR_UNSUPPORTED, "tg_dist_barrier");
  tg_module *m = tg_module_new("m");
  DIST_CHECK_ERR(tg_dist_check_module(m), TG_ERR_UNSUPPORTED, "tg_dist_check_module");
  DIST_CHECK_ERR(tg_dist_broadcast_module(m, 0), TG_ERR_UNSUPPORTED, "tg_dist_broadcast_module");
  tg_module_free(m);
  DIST_CHECK_OK(tg_dist_finalize()); /* a no-op before init */
  return dist_check_finish("test_dist_unsupported");
}
