/* A DDP step that a peer never joins (np 2, TG_DIST_TIMEOUT=3): rank 1 skips the step, so
 * rank 0's communication thread waits in its all-reduce until the timeout, and
 * tg_ddp_backward reports that on rank 0's own thread as TG_ERR_DIST naming the
 * communication thread, within a bound; later calls fail at once and tg_ddp_free returns.
 * The job is broken then: tg_dist_finalize ends it with a non-zero exit, so ctest passes this
 * test on the line "ddp fault: ok" (PASS_REGULAR_EXPRESSION), not on the exit code. */
#include <time.h>
#include <unistd.h>

#include "dist_check.h"

enum { BOUND_SECONDS = 20 }; /* the timeout is 3 s */

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
  DIST_CHECK_OK(tg_dist_init(&argc, &argv, (tg_dist_options){0}));
  const int rank = tg_dist_rank();
  DIST_CHECK(tg_dist_world_size() == 2);
  tg_module *m = tg_module_new("small");
  tg_scope sc = tg_scope_begin();
  DIST_CHECK_OK(
      tg_module_register_parameter(m, "w", tg_ones(TG_SHAPE(4), TG_OPTS(.dtype = TG_F64))));
  tg_ddp *ddp = tg_ddp_new(m, (tg_ddp_options){.bucket_cap_bytes = 8});
  DIST_CHECK(ddp);
  if (rank == 0 && ddp) {
    double t0 = now();
    tg_status st = tg_ddp_backward(ddp, tg_sum(tg_module_find(m, "w")));
    double waited = now() - t0;
    printf("ddp fault: rank 0: %s after %.1f s (bound %d s): %s\n", tg_status_name(st), waited,
           BOUND_SECONDS, tg_last_error_message());
    DIST_CHECK(st == TG_ERR_DIST && strstr(tg_last_error_message(), "communication thread"));
    DIST_CHECK(waited < BOUND_SECONDS);
    tg_clear_error();
    t0 = now();
    DIST_CHECK_ERR(tg_ddp_synchronize(ddp), TG_ERR_DIST, NULL); /* at once: the job is broken */
    tg_ddp_free(ddp);
    DIST_CHECK(now() - t0 < BOUND_SECONDS);
    if (dist_check_finish("test_ddp_fault") == 0) printf("ddp fault: ok\n");
    fflush(stdout);
  } else {
    sleep(10); /* alive, in no collective, until rank 0's finalize ends the job */
  }
  tg_scope_end(sc);
  tg_module_free(m);
  tg_dist_finalize(); /* after the failure: MPI_Abort, the whole job exits non-zero */
  return 1;
}
