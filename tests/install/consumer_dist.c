/* A consumer of tg::tg_dist: run without mpirun it is rank 0 of 1 (MPI's singleton), and a
 * sum over one rank is the tensor itself; built without MPI, init says so. */
#include <stdio.h>
#include <tg/dist.h>

int main(int argc, char **argv) {
  if (!tg_dist_is_built()) {
    const tg_status st = tg_dist_init(&argc, &argv, (tg_dist_options){0});
    printf("consumer_dist: tg_dist without MPI: %s\n", tg_last_error_message());
    return st == TG_ERR_UNSUPPORTED ? 0 : 1;
  }
  if (tg_dist_init(&argc, &argv, (tg_dist_options){0}) != TG_OK) {
    fprintf(stderr, "consumer_dist: %s\n", tg_last_error_message());
    return 1;
  }
  tg_tensor *t = tg_full(TG_SHAPE(3), 2.5, TG_OPTS_DEFAULT);
  double v = 0;
  const bool ok = tg_dist_all_reduce(t, TG_REDUCE_SUM) == TG_OK &&
                  tg_item(tg_select(t, 0, 2), &v) == TG_OK && v == 2.5 * tg_dist_world_size();
  printf("consumer_dist: rank %d of %d: %s\n", tg_dist_rank(), tg_dist_world_size(),
         ok ? "ok" : tg_last_error_message());
  return tg_dist_finalize() == TG_OK && ok ? 0 : 1;
}
