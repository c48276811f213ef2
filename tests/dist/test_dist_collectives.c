/* tg_dist's collectives at any world size: the transport (comm.h) and the public
 * tg_dist_all_reduce / broadcast / barrier with their error paths. */
#include "dist/comm.h"
#include "dist_check.h"

static int rank, size;

/* The host transport: sum, mean, max, min over each dtype; broadcast; barrier. */
static void test_transport(void) {
  double d[3] = {rank + 1.0, -(double)rank, 0.5};
  DIST_CHECK_OK(tg__dist_allreduce_host("t", d, 3, TG_F64, TG_REDUCE_SUM));
  DIST_CHECK(d[0] == size * (size + 1) / 2.0 && d[1] == -size * (size - 1) / 2.0 &&
             d[2] == 0.5 * size);
  float f[2] = {(float)rank, 2.0f};
  DIST_CHECK_OK(tg__dist_allreduce_host("t", f, 2, TG_F32, TG_REDUCE_MEAN));
  DIST_CHECK(f[0] == (float)(size - 1) / 2.0f && f[1] == 2.0f);
  int64_t i[2] = {rank, -rank};
  DIST_CHECK_OK(tg__dist_allreduce_host("t", i, 2, TG_I64, TG_REDUCE_MAX));
  DIST_CHECK(i[0] == size - 1 && i[1] == 0);
  i[0] = rank, i[1] = -rank;
  DIST_CHECK_OK(tg__dist_allreduce_host("t", i, 2, TG_I64, TG_REDUCE_MIN));
  DIST_CHECK(i[0] == 0 && i[1] == -(size - 1));
  DIST_CHECK_ERR(tg__dist_allreduce_host("t", i, 2, TG_I64, TG_REDUCE_MEAN), TG_ERR_DTYPE,
                 "floating");
  char msg[32] = {0};
  if (rank == size - 1) snprintf(msg, sizeof msg, "from %d", rank);
  DIST_CHECK_OK(tg__dist_broadcast_host("t", msg, sizeof msg, size - 1));
  char want[32];
  snprintf(want, sizeof want, "from %d", size - 1);
  DIST_CHECK(strcmp(msg, want) == 0);
  DIST_CHECK_ERR(tg__dist_broadcast_host("t", msg, sizeof msg, size), TG_ERR_ARGUMENT, "root");
  DIST_CHECK_OK(tg__dist_barrier_host("t"));
}

int main(int argc, char **argv) {
  DIST_CHECK_ERR(tg_dist_all_reduce(NULL, TG_REDUCE_SUM), TG_ERR_STATE, "tg_dist_init");
  DIST_CHECK(!tg_dist_is_initialized() && tg_dist_rank() == 0 && tg_dist_world_size() == 1);
  DIST_CHECK_OK(tg_dist_init(&argc, &argv, (tg_dist_options){0}));
  DIST_CHECK_ERR(tg_dist_init(&argc, &argv, (tg_dist_options){0}), TG_ERR_STATE, "twice");
  rank = tg_dist_rank();
  size = tg_dist_world_size();
  test_transport();
  const int failed = dist_check_finish("test_dist_collectives");
  DIST_CHECK_OK(tg_dist_finalize());
  return failed;
}
