/* A program that starts MPI itself (plain MPI_Init: no thread support asked for) and then
 * tg_dist: tg_dist uses that MPI, reports that the DDP's communication thread is not
 * allowed (tg__dist_threads_ok), takes the timeout from its options, leaves MPI_COMM_WORLD's
 * error handler alone, and its finalize leaves
 * MPI running for the program's own MPI_Finalize; after that MPI_Finalize, tg_dist's calls
 * are TG_ERR_STATE. Run at np 2. */
#include <mpi.h>

#include "distributed/comm.h"
#include "distributed/transport.h"
#include "dist_check.h"

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int provided = -1, world = 0;
  MPI_Query_thread(&provided);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  DIST_CHECK_OK(tg_dist_init(NULL, NULL, (tg_dist_options){.timeout_seconds = 7.5}));
  DIST_CHECK(tg__dist_timeout_seconds() == 7.5);
  DIST_CHECK(tg_dist_world_size() == world);
  DIST_CHECK(tg__dist_threads_ok() == (provided >= MPI_THREAD_SERIALIZED));
  /* MPI_COMM_WORLD's error handler stays the program's (tg_dist sets MPI_ERRORS_RETURN on it
   * only where it started MPI itself). */
  MPI_Errhandler handler = MPI_ERRHANDLER_NULL;
  MPI_Comm_get_errhandler(MPI_COMM_WORLD, &handler);
  DIST_CHECK(handler == MPI_ERRORS_ARE_FATAL);
  MPI_Errhandler_free(&handler);
  int64_t one = 1;
  DIST_CHECK_OK(tg__dist_allreduce_host("t", &one, 1, TG_I64, TG_REDUCE_SUM));
  DIST_CHECK(one == world);
  const int failed = dist_check_finish("test_dist_user_mpi");
  DIST_CHECK_OK(tg_dist_finalize());
  int finalized = 1;
  MPI_Finalized(&finalized);
  DIST_CHECK(!finalized); /* tg_dist did not start MPI: it leaves it to the program */
  /* The program's own MPI still works. */
  int sum = 0, r = 1;
  MPI_Allreduce(&r, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  DIST_CHECK(sum == world);
  /* tg_dist again, then the program ends MPI first: tg_dist's calls say so (TG_ERR_STATE)
   * instead of calling MPI after MPI_Finalize (which Open MPI answers with an abort). */
  DIST_CHECK_OK(tg_dist_init(NULL, NULL, (tg_dist_options){.timeout_seconds = 7.5}));
  DIST_CHECK_OK(tg_dist_barrier());
  MPI_Finalize();
  DIST_CHECK_ERR(tg_dist_barrier(), TG_ERR_STATE, "tg_dist_barrier: MPI was finalized");
  int64_t x = 1;
  DIST_CHECK_ERR(tg__dist_allreduce_host("t", &x, 1, TG_I64, TG_REDUCE_SUM), TG_ERR_STATE,
                 "before MPI_Finalize");
  DIST_CHECK_ERR(tg_dist_finalize(), TG_ERR_STATE, "MPI was finalized already");
  DIST_CHECK(!tg_dist_is_initialized() && tg_dist_world_size() == 1);
  DIST_CHECK_ERR(tg_dist_init(NULL, NULL, (tg_dist_options){0}), TG_ERR_STATE, "finalized");
  if (dist_check_failed) fprintf(stderr, "test_dist_user_mpi: checks after finalize failed\n");
  return failed || dist_check_failed;
}
