/* The transport of a tg_dist built without MPI (TG_MPI=OFF, or MPI not found): every call
 * fails with TG_ERR_UNSUPPORTED, so a program can offer --dist and say why it cannot. */
#include <stdlib.h>

#include "comm.h"
#include "transport.h"

static tg_status unsupported(const char *name) {
  return tg_set_error(TG_ERR_UNSUPPORTED,
                      "%s: tg_dist was built without MPI (TG_MPI=OFF, or MPI was not found when "
                      "tg was configured: apt-get install libopenmpi-dev)",
                      name);
}

bool tg__dist_ready(const char *name) {
  unsupported(name);
  return false;
}

bool tg__dist_threads_ok(void) { return false; }

bool tg__dist_failed(void) { return false; }

double tg__dist_timeout_seconds(void) { return 0; }

void tg__dist_mark_failed(void) {}

tg_status tg__dist_allreduce_host(const char *name, void *buf, int64_t count, tg_dtype dtype,
                                  tg_reduce_op op) {
  (void)buf, (void)count, (void)dtype, (void)op;
  return unsupported(name);
}

tg_status tg__dist_broadcast_host(const char *name, void *buf, int64_t bytes, int root) {
  (void)buf, (void)bytes, (void)root;
  return unsupported(name);
}

tg_status tg__dist_barrier_host(const char *name) { return unsupported(name); }

tg_status tg__dist_transport_init(int *argc, char ***argv, double timeout_seconds, int *rank,
                                  int *size) {
  (void)argc, (void)argv, (void)timeout_seconds, (void)rank, (void)size;
  return unsupported("tg_dist_init");
}

tg_status tg__dist_transport_finalize(void) { return TG_OK; }

void tg__dist_transport_abort(int exit_code) { exit(exit_code); }
