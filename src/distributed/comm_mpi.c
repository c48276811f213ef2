/* The MPI transport: tg_dist's own communicator (a duplicate of MPI_COMM_WORLD, so a
 * program's own MPI messages never match ours) and the host collectives of comm.h.
 *
 * No blocking MPI call: each collective is started non-blocking (MPI_I*) and polled with
 * MPI_Test until a deadline, so a peer that died, hangs or took another path turns into
 * TG_ERR_DIST instead of a hang. Between tests the thread yields its core (the first 10 ms),
 * then sleeps a little: on a machine with as many processes as cores, a spinning wait would
 * take the core a compute thread needs. */
#include <mpi.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "comm.h"
#include "tensor/check.h"
#include "transport.h"

/* How long a wait polls without sleeping (see wait_request). */
#define SPIN_SECONDS 0.01

/* Elements (or bytes) per MPI call: MPI counts are int. */
#define TG_DIST_CHUNK ((int64_t)1 << 30)

static MPI_Comm comm = MPI_COMM_NULL;
static bool started_mpi; /* tg_dist_init called MPI_Init_thread: finalize ends MPI */
static bool threads_ok;  /* MPI_THREAD_SERIALIZED or better */
static double timeout_s = 300;
static int my_rank, n_ranks = 1;
static atomic_bool failed; /* a collective failed: the job is broken */

static tg_status mpi_failed(const char *name, const char *call, int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS)
    snprintf(text, sizeof text, "code %d", code);
  atomic_store(&failed, true);
  return tg_set_error(TG_ERR_DIST,
                      "%s: %s failed on rank %d of %d: %s (a rank may have died; the job is "
                      "broken: tg_dist_finalize ends it)",
                      name, call, my_rank, n_ranks, text);
}

/* Polls req until it completes or the timeout passes. */
static tg_status wait_request(const char *name, MPI_Request *req) {
  const double start = tg__dist_now();
  long sleep_ns = 1000;
  for (int polls = 0;; polls++) {
    int done = 0;
    const int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return mpi_failed(name, "MPI_Test", rc);
    if (done) return TG_OK;
    const double waited = tg__dist_now() - start;
    if (waited >= timeout_s) {
      /* The request stays pending: its buffers must outlive the process (comm.h). */
      atomic_store(&failed, true);
      return tg_set_error(TG_ERR_DIST,
                          "%s: rank %d of %d waited %.1f s for the other ranks (timeout %g s, "
                          "tg_dist_options.timeout_seconds or TG_DIST_TIMEOUT): a rank died, "
                          "hangs, or called a different collective; the job is broken",
                          name, my_rank, n_ranks, waited, timeout_s);
    }
    /* Open MPI moves a non-blocking collective on only inside MPI calls, so a wait that
     * sleeps between tests stretches every step of the exchange. For the first SPIN_SECONDS
     * (and 64 polls at least) it only yields the core (to a compute thread of this rank that wants
     * it), then sleeps growing to 0.2 ms: a peer that is merely late costs little CPU. */
    if (waited < SPIN_SECONDS || polls < 64) {
      sched_yield();
    } else {
      nanosleep(&(struct timespec){0, sleep_ns}, NULL);
      if (sleep_ns < 200000) sleep_ns *= 2;
    }
  }
}

/* Whether the program ended MPI itself (MPI_Finalize before tg_dist_finalize): any MPI call
 * of ours would then be erroneous (Open MPI aborts the job). */
static bool mpi_finalized(void) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  return finalized != 0;
}

bool tg__dist_ready(const char *name) {
  if (!tg__check(tg_dist_is_initialized(), TG_ERR_STATE, name,
                 "tg_dist_init has not been called") ||
      !tg__check(!mpi_finalized(), TG_ERR_STATE, name,
                 "MPI was finalized (MPI_Finalize) while tg_dist was initialised: call "
                 "tg_dist_finalize before MPI_Finalize"))
    return false;
  if (atomic_load(&failed)) {
    tg_set_error(TG_ERR_DIST,
                 "%s: an earlier collective failed on rank %d (a rank died, hangs, or called a "
                 "different collective): the job is broken, call tg_dist_finalize",
                 name, my_rank);
    return false;
  }
  return true;
}

bool tg__dist_threads_ok(void) { return threads_ok; }

bool tg__dist_failed(void) { return atomic_load(&failed); }

double tg__dist_timeout_seconds(void) { return timeout_s; }

void tg__dist_mark_failed(void) { atomic_store(&failed, true); }

static bool mpi_type(tg_dtype dtype, MPI_Datatype *type) {
  switch (dtype) {
  case TG_F32:
    *type = MPI_FLOAT;
    return true;
  case TG_F64:
    *type = MPI_DOUBLE;
    return true;
  case TG_I64:
    *type = MPI_INT64_T;
    return true;
  default:
    return false;
  }
}

tg_status tg__dist_allreduce_host(const char *name, void *buf, int64_t count, tg_dtype dtype,
                                  tg_reduce_op op) {
  if (!tg__dist_ready(name)) return tg_last_error();
  MPI_Datatype type;
  if (!mpi_type(dtype, &type))
    return tg_set_error(TG_ERR_DTYPE, "%s: dtype %d is not F32, F64 or I64", name, (int)dtype);
  MPI_Op mpi_op;
  switch (op) {
  case TG_REDUCE_SUM:
    mpi_op = MPI_SUM;
    break;
  case TG_REDUCE_MEAN:
    mpi_op = MPI_SUM;
    break;
  case TG_REDUCE_MAX:
    mpi_op = MPI_MAX;
    break;
  case TG_REDUCE_MIN:
    mpi_op = MPI_MIN;
    break;
  default:
    return tg_set_error(TG_ERR_ARGUMENT, "%s: unknown reduce op %d", name, (int)op);
  }
  if (!tg__check(op != TG_REDUCE_MEAN || tg_dtype_is_floating(dtype), TG_ERR_DTYPE, name,
                 "TG_REDUCE_MEAN needs a floating dtype, got %s", tg_dtype_name(dtype)) ||
      !tg__check(count == 0 || (count > 0 && buf), TG_ERR_ARGUMENT, name,
                 "bad host buffer (%p, %lld elements)", buf, (long long)count))
    return tg_last_error();
  const size_t esize = tg_dtype_size(dtype);
  for (int64_t done = 0; done < count;) {
    const int n = (int)(count - done < TG_DIST_CHUNK ? count - done : TG_DIST_CHUNK);
    MPI_Request req;
    const int rc = MPI_Iallreduce(MPI_IN_PLACE, (char *)buf + (size_t)done * esize, n, type, mpi_op,
                                  comm, &req);
    if (rc != MPI_SUCCESS) return mpi_failed(name, "MPI_Iallreduce", rc);
    const tg_status st = wait_request(name, &req);
    if (st != TG_OK) return st;
    done += n;
  }
  if (op == TG_REDUCE_MEAN && n_ranks > 1) {
    if (dtype == TG_F32) {
      float *p = buf;
      for (int64_t i = 0; i < count; i++) p[i] /= (float)n_ranks;
    } else {
      double *p = buf;
      for (int64_t i = 0; i < count; i++) p[i] /= (double)n_ranks;
    }
  }
  return TG_OK;
}

tg_status tg__dist_broadcast_host(const char *name, void *buf, int64_t bytes, int root) {
  if (!tg__dist_ready(name)) return tg_last_error();
  if (!tg__check(root >= 0 && root < n_ranks, TG_ERR_ARGUMENT, name,
                 "root %d is not a rank (world size %d)", root, n_ranks) ||
      !tg__check(bytes == 0 || (bytes > 0 && buf), TG_ERR_ARGUMENT, name,
                 "bad host buffer (%p, %lld bytes)", buf, (long long)bytes))
    return tg_last_error();
  for (int64_t done = 0; done < bytes;) {
    const int n = (int)(bytes - done < TG_DIST_CHUNK ? bytes - done : TG_DIST_CHUNK);
    MPI_Request req;
    const int rc = MPI_Ibcast((char *)buf + done, n, MPI_BYTE, root, comm, &req);
    if (rc != MPI_SUCCESS) return mpi_failed(name, "MPI_Ibcast", rc);
    const tg_status st = wait_request(name, &req);
    if (st != TG_OK) return st;
    done += n;
  }
  return TG_OK;
}

tg_status tg__dist_barrier_host(const char *name) {
  if (!tg__dist_ready(name)) return tg_last_error();
  MPI_Request req;
  const int rc = MPI_Ibarrier(comm, &req);
  if (rc != MPI_SUCCESS) return mpi_failed(name, "MPI_Ibarrier", rc);
  return wait_request(name, &req);
}

tg_status tg__dist_transport_init(int *argc, char ***argv, double timeout_seconds, int *rank,
                                  int *size) {
  int finalized = 0, running = 0, provided = MPI_THREAD_SINGLE;
  MPI_Finalized(&finalized);
  if (!tg__check(!finalized, TG_ERR_STATE, "tg_dist_init",
                 "MPI was finalized already (it cannot start twice)"))
    return tg_last_error();
  MPI_Initialized(&running);
  if (!running) {
    if (!argc || !argv) argc = NULL, argv = NULL; /* MPI takes both or neither */
    const int rc = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS)
      return tg_set_error(TG_ERR_DIST, "tg_dist_init: MPI_Init_thread failed (code %d)", rc);
    started_mpi = true;
  } else {
    MPI_Query_thread(&provided);
  }
  threads_ok = provided >= MPI_THREAD_SERIALIZED;
  timeout_s = timeout_seconds;
  MPI_Comm_rank(MPI_COMM_WORLD, &my_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n_ranks);
  /* Errors on our communicator come back as codes (TG_ERR_DIST), not as MPI's abort. */
  MPI_Request req;
  int rc = MPI_Comm_idup(MPI_COMM_WORLD, &comm, &req);
  if (rc != MPI_SUCCESS) return mpi_failed("tg_dist_init", "MPI_Comm_idup", rc);
  const tg_status st = wait_request("tg_dist_init", &req);
  if (st != TG_OK) return st;
  rc = MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  if (rc != MPI_SUCCESS) return mpi_failed("tg_dist_init", "MPI_Comm_set_errhandler", rc);
  /* MPI 3.1 raises an error it cannot tie to a communicator on MPI_COMM_WORLD: Open MPI 4.1
   * does so for a failed non-blocking collective in MPI_Test (MPI_ERR_TRUNCATE when a peer
   * called another collective, tg_dist_finalize's barrier say), which would abort the job
   * with MPI's text and no tg_dist line. Where tg_dist started MPI, the world is ours too;
   * where the program did, its handler is its own choice (docs/distributed.md). */
  if (started_mpi) {
    rc = MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (rc != MPI_SUCCESS) return mpi_failed("tg_dist_init", "MPI_Comm_set_errhandler", rc);
  }
  *rank = my_rank;
  *size = n_ranks;
  return TG_OK;
}

static _Noreturn void abort_job(int exit_code) {
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  exit(exit_code); /* MPI_Abort does not return; this is for the compiler */
}

tg_status tg__dist_transport_finalize(void) {
  if (mpi_finalized()) { /* the program's MPI_Finalize came first: nothing of ours to end */
    comm = MPI_COMM_NULL;
    started_mpi = false;
    my_rank = 0;
    n_ranks = 1;
    return tg_set_error(TG_ERR_STATE, "tg_dist_finalize: MPI was finalized already (MPI_Finalize "
                                      "must come after tg_dist_finalize)");
  }
  if (!atomic_load(&failed)) {
    /* Bounded: MPI_Finalize would wait for a peer that never comes. */
    if (tg__dist_barrier_host("tg_dist_finalize") != TG_OK)
      fprintf(stderr, "tg_dist: rank %d: %s\n", my_rank, tg_last_error_message());
  }
  if (atomic_load(&failed)) {
    fprintf(stderr, "tg_dist: rank %d: a collective failed: ending the whole job (MPI_Abort)\n",
            my_rank);
    fflush(NULL); /* what the program printed, before MPI_Abort kills it */
    abort_job(1);
  }
  MPI_Comm_free(&comm);
  comm = MPI_COMM_NULL;
  if (started_mpi) {
    started_mpi = false;
    const int rc = MPI_Finalize();
    if (rc != MPI_SUCCESS)
      return tg_set_error(TG_ERR_DIST, "tg_dist_finalize: MPI_Finalize failed (code %d)", rc);
  }
  my_rank = 0;
  n_ranks = 1;
  return TG_OK;
}

void tg__dist_transport_abort(int exit_code) {
  int running = 0, finalized = 0;
  MPI_Initialized(&running);
  MPI_Finalized(&finalized);
  if (running && !finalized) abort_job(exit_code);
  exit(exit_code);
}
