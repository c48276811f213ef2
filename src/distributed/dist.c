/* tg_dist's entry points: whether it is built, init (the timeout from the options or
 * TG_DIST_TIMEOUT), rank, world size, finalize and abort. The transport (comm_mpi.c or
 * comm_none.c) does the MPI side. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "comm.h"
#include "tensor/check.h"
#include "transport.h"
#if TG_WITH_NCCL
#include "nccl_comm.h"
#endif

#define TG_DIST_DEFAULT_TIMEOUT 300.0

static bool initialized;
static int my_rank = 0, n_ranks = 1;

bool tg_dist_is_built(void) { return TG_WITH_MPI; }

bool tg_dist_has_nccl(void) { return TG_WITH_NCCL; }

/* The timeout: the options', else TG_DIST_TIMEOUT's, else 300 s. */
static tg_status resolve_timeout(double requested, double *out) {
  if (!tg__check(isfinite(requested) && requested >= 0, TG_ERR_ARGUMENT, "tg_dist_init",
                 "opts.timeout_seconds must be a finite number of seconds >= 0 (0: "
                 "TG_DIST_TIMEOUT or %g), got %g",
                 TG_DIST_DEFAULT_TIMEOUT, requested))
    return tg_last_error();
  if (requested > 0) {
    *out = requested;
    return TG_OK;
  }
  const char *env = getenv("TG_DIST_TIMEOUT");
  if (!env || !*env) {
    *out = TG_DIST_DEFAULT_TIMEOUT;
    return TG_OK;
  }
  char *end = NULL;
  errno = 0;
  const double v = strtod(env, &end);
  if (!tg__check(end != env && *end == '\0' && errno == 0 && isfinite(v) && v > 0, TG_ERR_ARGUMENT,
                 "tg_dist_init", "TG_DIST_TIMEOUT='%s' is not a number of seconds > 0", env))
    return tg_last_error();
  *out = v;
  return TG_OK;
}

tg_status tg_dist_init(int *argc, char ***argv, tg_dist_options opts) {
  if (!tg_dist_is_built()) return tg__dist_transport_init(argc, argv, 0, NULL, NULL);
  if (!tg__check(!initialized, TG_ERR_STATE, "tg_dist_init",
                 "called twice (tg_dist is initialised already: rank %d of %d)", my_rank, n_ranks))
    return tg_last_error();
  double timeout = 0;
  tg_status st = resolve_timeout(opts.timeout_seconds, &timeout);
  if (st != TG_OK) return st;
  int rank = 0, size = 1;
  st = tg__dist_transport_init(argc, argv, timeout, &rank, &size);
  /* A transport that failed part way (MPI up, communicator not) is broken, not absent:
   * initialised, so that tg_dist_finalize ends the job. */
  if (st == TG_OK || tg__dist_failed()) {
    initialized = true;
    my_rank = rank;
    n_ranks = size;
  }
  return st;
}

bool tg_dist_is_initialized(void) { return initialized; }

int tg_dist_rank(void) { return my_rank; }

int tg_dist_world_size(void) { return n_ranks; }

tg_status tg_dist_finalize(void) {
  if (!initialized) return TG_OK;
#if TG_WITH_NCCL
  tg__dist_nccl_release();
#endif
  const tg_status st = tg__dist_transport_finalize();
  initialized = false;
  my_rank = 0;
  n_ranks = 1;
  return st;
}

void tg_dist_abort(int exit_code, const char *why) {
  fprintf(stderr, "tg_dist: rank %d: %s\n", my_rank, why ? why : "(no reason given)");
  fflush(NULL); /* what the program printed, before MPI_Abort kills it */
  tg__dist_transport_abort(exit_code);
}

double tg__dist_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
