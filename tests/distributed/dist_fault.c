/* A two-rank job that goes wrong on purpose, for tests/distributed/faults.sh:
 *   dist_fault stop   rank 1 stops itself (SIGSTOP) after step 2: rank 0's next collective
 *                     must fail with TG_ERR_DIST within the timeout, the next one at once,
 *                     and tg_dist_finalize must end the job (MPI_Abort);
 *   dist_fault kill   rank 1 kills itself (SIGKILL) at step 3 of a small training loop;
 *   dist_fault abort  rank 1 "hits an error" at step 2 and calls tg_dist_abort;
 *   dist_fault finalize  rank 1 calls tg_dist_finalize at step 2 while rank 0 all-reduces:
 *                     a collective mismatch, which must come out as TG_ERR_DIST (not as
 *                     MPI's own abort) and end the job.
 * Each step: a linear model's loss, backward, gradients all-reduced (mean), SGD. Prints what
 * each rank sees; exits 0 only if nothing failed (which the script treats as a failure). */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tg/tg.h"
#include "tg/dist.h"

static tg_status step(tg_linear *fc, int i) {
  tg_scope s = tg_scope_begin();
  tg_tensor *x = tg_full(TG_SHAPE(4, 3), 0.1 * (i + 1 + tg_dist_rank()), TG_OPTS_DEFAULT);
  tg_tensor *loss = tg_sum(tg_mul(tg_linear_forward(fc, x), tg_linear_forward(fc, x)));
  tg_status st = loss ? TG_OK : tg_last_error();
  tg_tensor *w = tg_linear_weight(fc);
  if (st == TG_OK) st = tg_zero_grad(w);
  if (st == TG_OK) st = tg_backward(loss, NULL);
  tg_tensor *g = st == TG_OK ? tg_grad(w) : NULL;
  if (st == TG_OK) st = tg_dist_all_reduce(g, TG_REDUCE_MEAN);
  tg_no_grad_begin();
  if (st == TG_OK) st = tg_sub_(w, tg_mul_scalar(g, 0.01));
  tg_no_grad_end();
  tg_scope_end(s);
  return st;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  if (tg_dist_init(&argc, &argv, (tg_dist_options){0}) != TG_OK) {
    fprintf(stderr, "init: %s\n", tg_last_error_message());
    return 2;
  }
  const int rank = tg_dist_rank();
  printf("rank %d: pid %ld\n", rank, (long)getpid()); /* faults.sh: none may outlive the job */
  fflush(stdout);
  tg_linear *fc = tg_linear_new(3, 2, false, TG_OPTS_DEFAULT, NULL);
  for (int i = 0; i < 6; i++) {
    if (rank == 1 && i == 2 && strcmp(mode, "stop") == 0) raise(SIGSTOP);
    if (rank == 1 && i == 3 && strcmp(mode, "kill") == 0) raise(SIGKILL);
    if (rank == 1 && i == 2 && strcmp(mode, "abort") == 0)
      tg_dist_abort(3, "step 2 failed: the loss is not finite");
    if (rank == 1 && i == 2 && strcmp(mode, "finalize") == 0) {
      const tg_status st = tg_dist_finalize();
      printf("rank 1: tg_dist_finalize at step 2: %s: %s\n", tg_status_name(st),
             st == TG_OK ? "" : tg_last_error_message());
      fflush(stdout);
      tg_linear_free(fc);
      return 4;
    }
    const tg_status st = step(fc, i);
    if (st != TG_OK) {
      printf("rank %d: step %d: %s: %s\n", rank, i, tg_status_name(st), tg_last_error_message());
      /* Broken now: the next collective fails at once, without waiting. */
      const tg_status again = tg_dist_barrier();
      printf("rank %d: then tg_dist_barrier: %s: %s\n", rank, tg_status_name(again),
             tg_last_error_message());
      fflush(stdout);
      tg_linear_free(fc);
      tg_dist_finalize(); /* ends the job: MPI_Abort */
      printf("rank %d: tg_dist_finalize returned after a failure\n", rank);
      return 4;
    }
    printf("rank %d: step %d done\n", rank, i);
    fflush(stdout);
  }
  tg_linear_free(fc);
  tg_dist_finalize();
  return 0;
}
