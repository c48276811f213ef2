/* tg_dist's collectives at any world size (run at np 1 and 2): the transport (comm.h), and
 * tg_dist_all_reduce / broadcast / barrier with every error path. Errors that depend on the
 * rank (mismatched shapes, one rank's bad argument or failed allocation) must come back on
 * every rank, and leave the collectives usable. */
#define _POSIX_C_SOURCE 200809L /* setenv, strdup */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#include "distributed/comm.h"
#include "distributed/transport.h"
#include "dist_check.h"
#include "tensor/host_memory.h"

static int rank, size;

/* A rank-dependent 2-D tensor: element (i, j) = (rank + 1) * (i * cols + j + 1). */
static tg_tensor *ranked(int64_t rows, int64_t cols, tg_dtype dtype) {
  tg_tensor *t = tg_empty(TG_SHAPE(rows, cols), (tg_options){.dtype = dtype});
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++)
      tg_set(t, (int64_t[]){i, j}, (rank + 1.0) * (double)(i * cols + j + 1));
  return t;
}

/* The expected value of element k (1-based) after op over the ranks. */
static double expected(tg_reduce_op op, double k) {
  switch (op) {
  case TG_REDUCE_SUM:
    return k * size * (size + 1) / 2.0;
  case TG_REDUCE_MEAN:
    return k * (size + 1) / 2.0;
  case TG_REDUCE_MAX:
    return k * size;
  default:
    return k;
  }
}

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
  DIST_CHECK_ERR(tg__dist_allreduce_host("t", i, 2, TG_NUM_DTYPES, TG_REDUCE_SUM), TG_ERR_DTYPE,
                 NULL);
  DIST_CHECK_ERR(tg__dist_allreduce_host("t", NULL, 2, TG_F32, TG_REDUCE_SUM), TG_ERR_ARGUMENT,
                 NULL);
  DIST_CHECK_ERR(tg__dist_allreduce_host("t", d, 1, TG_F64, (tg_reduce_op)9), TG_ERR_ARGUMENT,
                 "op");
  char msg[32] = {0};
  if (rank == size - 1) snprintf(msg, sizeof msg, "from %d", rank);
  DIST_CHECK_OK(tg__dist_broadcast_host("t", msg, sizeof msg, size - 1));
  char want[32];
  snprintf(want, sizeof want, "from %d", size - 1);
  DIST_CHECK(strcmp(msg, want) == 0);
  DIST_CHECK_ERR(tg__dist_broadcast_host("t", msg, sizeof msg, size), TG_ERR_ARGUMENT, "root");
  DIST_CHECK_ERR(tg__dist_broadcast_host("t", NULL, 4, 0), TG_ERR_ARGUMENT, NULL);
  DIST_CHECK_OK(tg__dist_barrier_host("t"));
  DIST_CHECK(tg__dist_threads_ok()); /* Open MPI gives MPI_THREAD_MULTIPLE */
  /* A contiguous CPU tensor in place, no cross-rank check (what the DDP uses). */
  tg_tensor *t = ranked(2, 3, TG_F32);
  DIST_CHECK_OK(tg__dist_allreduce_contiguous("t", t, TG_REDUCE_SUM));
  double v = 0;
  tg_get(t, (int64_t[]){1, 2}, &v);
  DIST_CHECK(v == expected(TG_REDUCE_SUM, 6));
  DIST_CHECK_ERR(tg__dist_allreduce_contiguous("t", tg_t(t), TG_REDUCE_SUM), TG_ERR_ARGUMENT,
                 "contiguous");
  DIST_CHECK_ERR(tg__dist_allreduce_contiguous("t", NULL, TG_REDUCE_SUM), TG_ERR_ARGUMENT, NULL);
}

/* The DDP's pattern: a second thread makes the calls while this one makes none. Errors are
 * that thread's own. */
typedef struct thread_job {
  double values[4];
  tg_status sum, bad;
  char message[256];
} thread_job;

static void *thread_main(void *arg) {
  thread_job *job = arg;
  job->sum = tg__dist_allreduce_host("thread", job->values, 4, TG_F64, TG_REDUCE_SUM);
  job->bad = tg__dist_allreduce_host("thread", job->values, 4, TG_I64, TG_REDUCE_MEAN);
  snprintf(job->message, sizeof job->message, "%s", tg_last_error_message());
  return NULL;
}

static void test_other_thread(void) {
  thread_job job = {.values = {1, 2, 3, rank}};
  pthread_t thread;
  DIST_CHECK(pthread_create(&thread, NULL, thread_main, &job) == 0);
  pthread_join(thread, NULL);
  DIST_CHECK(job.sum == TG_OK && job.values[0] == size && job.values[3] == size * (size - 1) / 2.0);
  DIST_CHECK(job.bad == TG_ERR_DTYPE && strstr(job.message, "thread: TG_REDUCE_MEAN"));
  DIST_CHECK(tg_last_error() == TG_OK); /* not this thread's error */
}

/* Every op over every dtype, contiguous and strided. */
static void test_all_reduce(void) {
  const tg_dtype dtypes[] = {TG_F32, TG_F64, TG_I64};
  for (int di = 0; di < 3; di++)
    for (int op = TG_REDUCE_SUM; op <= TG_REDUCE_MIN; op++) {
      if (op == TG_REDUCE_MEAN && dtypes[di] == TG_I64) continue;
      tg_tensor *t = ranked(3, 4, dtypes[di]);
      DIST_CHECK_OK(tg_dist_all_reduce(t, (tg_reduce_op)op));
      const uint64_t version = tg_version(t);
      bool ok = true;
      for (int64_t k = 0; k < 12; k++) {
        double v = 0;
        tg_get(t, (int64_t[]){k / 4, k % 4}, &v);
        ok = ok && fabs(v - expected((tg_reduce_op)op, (double)(k + 1))) < 1e-6;
      }
      DIST_CHECK(ok);
      DIST_CHECK(version > 0); /* written through tg_copy_: the version moved */
      /* Strided: every other column of a transposed view; the rest stays as it was. */
      tg_tensor *base = ranked(4, 6, dtypes[di]);
      tg_tensor *view = tg_slice(tg_t(base), 0, 0, 6, 2); /* [3, 4], strides (2, 6) */
      DIST_CHECK(!tg_is_contiguous(view));
      DIST_CHECK_OK(tg_dist_all_reduce(view, (tg_reduce_op)op));
      ok = true;
      for (int64_t i = 0; i < 4; i++)
        for (int64_t j = 0; j < 6; j++) {
          double v = 0, k = (double)(i * 6 + j + 1);
          tg_get(base, (int64_t[]){i, j}, &v);
          const double want = j % 2 == 0 ? expected((tg_reduce_op)op, k) : (rank + 1.0) * k;
          ok = ok && fabs(v - want) < 1e-6;
        }
      DIST_CHECK(ok);
    }
  /* A scalar and an empty tensor. */
  tg_tensor *s = tg_scalar(rank + 1.0, (tg_options){.dtype = TG_F64});
  DIST_CHECK_OK(tg_dist_all_reduce(s, TG_REDUCE_SUM));
  double v = 0;
  tg_item(s, &v);
  DIST_CHECK(v == size * (size + 1) / 2.0);
  DIST_CHECK_OK(tg_dist_all_reduce(tg_empty(TG_SHAPE(0, 3), TG_OPTS_DEFAULT), TG_REDUCE_SUM));
  /* A parameter: refused under grad mode, fine without (like an optimizer's update). */
  tg_tensor *p = tg_ones(TG_SHAPE(2), (tg_options){.requires_grad = true});
  DIST_CHECK_ERR(tg_dist_all_reduce(p, TG_REDUCE_SUM), TG_ERR_STATE, "requires grad");
  tg_no_grad_begin();
  DIST_CHECK_OK(tg_dist_all_reduce(p, TG_REDUCE_SUM));
  tg_no_grad_end();
  tg_item(tg_select(p, 0, 1), &v);
  DIST_CHECK(v == size);
}

static void test_broadcast(void) {
  const int root = size - 1;
  tg_tensor *t = ranked(2, 3, TG_F64);
  DIST_CHECK_OK(tg_dist_broadcast(t, root));
  bool ok = true;
  for (int64_t k = 0; k < 6; k++) {
    double v = 0;
    tg_get(t, (int64_t[]){k / 3, k % 3}, &v);
    ok = ok && v == (root + 1.0) * (double)(k + 1);
  }
  DIST_CHECK(ok);
  /* Strided, I64. */
  tg_tensor *base = ranked(3, 4, TG_I64);
  DIST_CHECK_OK(tg_dist_broadcast(tg_t(base), 0));
  double v = 0;
  tg_get(base, (int64_t[]){2, 3}, &v);
  DIST_CHECK(v == 12);
  DIST_CHECK_ERR(tg_dist_broadcast(t, size), TG_ERR_ARGUMENT, "root");
  DIST_CHECK_ERR(tg_dist_broadcast(t, -1), TG_ERR_ARGUMENT, "root");
  DIST_CHECK_ERR(tg_dist_broadcast(NULL, 0), TG_ERR_ARGUMENT, "NULL");
  DIST_CHECK_OK(tg_dist_barrier());
}

/* Arguments that differ across ranks: an error on every rank, then the collectives work. */
static void test_mismatch(void) {
  if (size < 2) return;
  tg_tensor *a = ranked(2 + rank, 3, TG_F32);
  DIST_CHECK_ERR(
      tg_dist_all_reduce(a, TG_REDUCE_SUM), TG_ERR_SHAPE,
      "differ in shape: rank 0 has float32 [2, 3] on cpu, rank 1 has float32 [3, 3] on cpu");
  DIST_CHECK_ERR(tg_dist_broadcast(a, 0), TG_ERR_SHAPE, "rank 1 has float32 [3, 3]");
  tg_tensor *b = ranked(2, 3, rank == 1 ? TG_F64 : TG_F32);
  DIST_CHECK_ERR(tg_dist_all_reduce(b, TG_REDUCE_SUM), TG_ERR_DTYPE, "rank 1 has float64");
  tg_tensor *c = ranked(2, 3, TG_F32);
  DIST_CHECK_ERR(tg_dist_all_reduce(c, rank == 1 ? TG_REDUCE_MAX : TG_REDUCE_SUM), TG_ERR_ARGUMENT,
                 "differ in op");
  DIST_CHECK_ERR(tg_dist_broadcast(c, rank == 1 ? 1 : 0), TG_ERR_ARGUMENT, "root 1");
  /* Same numel, other shape. */
  tg_tensor *d = rank == 1 ? ranked(3, 2, TG_F32) : ranked(2, 3, TG_F32);
  DIST_CHECK_ERR(tg_dist_all_reduce(d, TG_REDUCE_SUM), TG_ERR_SHAPE, "[3, 2]");
  /* One rank's own error: that error there, "rank 1 failed" on the others. */
  DIST_CHECK_ERR(tg_dist_all_reduce(rank == 1 ? NULL : c, TG_REDUCE_SUM), TG_ERR_ARGUMENT,
                 rank == 1 ? "t is NULL" : "rank 1 failed");
  tg_tensor *e = ranked(2, 2, rank == 1 ? TG_I64 : TG_F64);
  DIST_CHECK_ERR(tg_dist_all_reduce(e, TG_REDUCE_MEAN), TG_ERR_DTYPE,
                 rank == 1 ? "floating" : "rank 1 failed");
  /* Still in step. */
  tg_tensor *f = ranked(1, 2, TG_F64);
  DIST_CHECK_OK(tg_dist_all_reduce(f, TG_REDUCE_SUM));
  double v = 0;
  tg_get(f, (int64_t[]){0, 1}, &v);
  DIST_CHECK(v == expected(TG_REDUCE_SUM, 2));
}

/* Every allocation of an all-reduce and a broadcast failing in turn on the last rank: an
 * error on every rank (never a hang), then the next call works. */
static void test_allocation_failures(void) {
  tg_tensor *base = ranked(3, 4, TG_F32);
  tg_tensor *t = tg_t(base);
  for (int which = 0; which < 2; which++) {
    int64_t before = tg__host_allocation_count();
    DIST_CHECK_OK(which ? tg_dist_broadcast(t, 0) : tg_dist_all_reduce(t, TG_REDUCE_MAX));
    const int64_t n = tg__host_allocation_count() - before;
    DIST_CHECK(n > 0);
    int failures = 0, agreed = 0;
    for (int64_t k = 1; k <= n; k++) {
      const int64_t fired = tg__host_injected_failures();
      tg_scope s = tg_scope_begin();
      if (rank == size - 1) tg__host_fail_allocation(k);
      tg_status st = which ? tg_dist_broadcast(t, 0) : tg_dist_all_reduce(t, TG_REDUCE_MAX);
      tg__host_fail_allocation(0);
      tg_clear_error();
      tg_scope_end(s);
      /* A failure before the data moves is agreed (every rank fails); one after it (the
       * copy back) stays on the rank that had it. Either way: TG_ERR_MEMORY, no hang. */
      DIST_CHECK(st == TG_OK || st == TG_ERR_MEMORY);
      int64_t last_failed = rank == size - 1 && st != TG_OK;
      DIST_CHECK_OK(tg__dist_allreduce_host("sweep", &last_failed, 1, TG_I64, TG_REDUCE_MAX));
      DIST_CHECK(st == TG_OK || last_failed);
      DIST_CHECK(rank != size - 1 || tg__host_injected_failures() > fired);
      failures += (int)last_failed;
      agreed += rank == 0 && st != TG_OK;
      DIST_CHECK_OK(tg_dist_barrier());
    }
    DIST_CHECK(failures > 0); /* the sweep did reach the collective's allocations */
    DIST_CHECK(size == 1 || rank != 0 || agreed > 0); /* and rank 0 heard of some */
  }
}

/* Before tg_dist_init: TG_ERR_STATE; bad timeouts: TG_ERR_ARGUMENT. */
static void test_before_init(int *argc, char ***argv) {
  tg_tensor *t = tg_zeros(TG_SHAPE(2), TG_OPTS_DEFAULT);
  DIST_CHECK_ERR(tg_dist_all_reduce(t, TG_REDUCE_SUM), TG_ERR_STATE, "tg_dist_init");
  DIST_CHECK_ERR(tg_dist_broadcast(t, 0), TG_ERR_STATE, "tg_dist_broadcast");
  DIST_CHECK_ERR(tg_dist_barrier(), TG_ERR_STATE, "tg_dist_barrier");
  DIST_CHECK_ERR(tg__dist_allreduce_host("x", NULL, 0, TG_F32, TG_REDUCE_SUM), TG_ERR_STATE, "x");
  DIST_CHECK(!tg_dist_is_initialized() && tg_dist_rank() == 0 && tg_dist_world_size() == 1);
  DIST_CHECK(tg_dist_is_built());
  DIST_CHECK_OK(tg_dist_finalize()); /* a no-op */
  DIST_CHECK_ERR(tg_dist_init(argc, argv, (tg_dist_options){.timeout_seconds = -1}),
                 TG_ERR_ARGUMENT, "timeout_seconds");
  DIST_CHECK_ERR(tg_dist_init(argc, argv, (tg_dist_options){.timeout_seconds = NAN}),
                 TG_ERR_ARGUMENT, "timeout_seconds");
  const char *env = getenv("TG_DIST_TIMEOUT");
  char *saved = env ? strdup(env) : NULL;
  const char *bad[] = {"abc", "0", "-3", "5s", "inf"};
  for (int i = 0; i < 5; i++) {
    setenv("TG_DIST_TIMEOUT", bad[i], 1);
    DIST_CHECK_ERR(tg_dist_init(argc, argv, (tg_dist_options){0}), TG_ERR_ARGUMENT,
                   "TG_DIST_TIMEOUT");
  }
  if (saved)
    setenv("TG_DIST_TIMEOUT", saved, 1);
  else
    unsetenv("TG_DIST_TIMEOUT");
  free(saved);
  DIST_CHECK(!tg_dist_is_initialized());
}

int main(int argc, char **argv) {
  const int64_t live = tg_live_objects();
  tg_scope s = tg_scope_begin();
  test_before_init(&argc, &argv);
  DIST_CHECK_OK(tg_dist_init(&argc, &argv, (tg_dist_options){0}));
  DIST_CHECK_ERR(tg_dist_init(&argc, &argv, (tg_dist_options){0}), TG_ERR_STATE, "twice");
  DIST_CHECK(tg_dist_is_initialized());
  const char *env = getenv("TG_DIST_TIMEOUT"); /* tg_dist_test sets it */
  DIST_CHECK(tg__dist_timeout_seconds() == (env ? strtod(env, NULL) : 300));
  rank = tg_dist_rank();
  size = tg_dist_world_size();
  test_transport();
  test_other_thread();
  test_all_reduce();
  test_broadcast();
  test_mismatch();
  test_allocation_failures();
  tg_scope_end(s);
  DIST_CHECK(tg_live_objects() == live);
  const int failed = dist_check_finish("test_dist_collectives");
  DIST_CHECK_OK(tg_dist_finalize());
  DIST_CHECK(!tg_dist_is_initialized());
  DIST_CHECK_ERR(tg_dist_init(&argc, &argv, (tg_dist_options){0}), TG_ERR_STATE, "finalized");
  return failed || dist_check_failed;
}
