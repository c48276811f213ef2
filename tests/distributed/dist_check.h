/* Plain-C checks for tg_dist's tests, which run under mpirun: Criterion forks each test, and
 * MPI does not survive a fork. A failed check prints the rank, file, line and what failed,
 * and is counted; the test goes on (so every rank keeps calling the same collectives) and
 * dist_check_finish() makes the process exit non-zero, which fails the mpirun.
 *
 *   DIST_CHECK(cond);                        // cond must hold
 *   DIST_CHECK_OK(expr);                     // expr must return TG_OK
 *   DIST_CHECK_ERR(expr, TG_ERR_SHAPE, "x"); // expr must fail with that code, message
 *                                            // containing "x" (NULL: any message)
 *   return dist_check_finish("test_name");   // prints a summary; 0 or 1 */
#ifndef TG_DIST_CHECK_H
#define TG_DIST_CHECK_H

#include <stdio.h>
#include <string.h>

#include "tg/dist.h"
#include "tg/tg.h"

static int dist_check_count, dist_check_failed;

static void dist_check_fail(const char *file, int line, const char *what, const char *detail) {
  dist_check_failed++;
  fprintf(stderr, "rank %d: %s:%d: FAILED: %s%s%s\n", tg_dist_rank(), file, line, what,
          detail && *detail ? ": " : "", detail ? detail : "");
  fflush(stderr);
}

#define DIST_CHECK(cond)                                                                           \
  do {                                                                                             \
    dist_check_count++;                                                                            \
    if (!(cond)) dist_check_fail(__FILE__, __LINE__, #cond, NULL);                                 \
  } while (0)

#define DIST_CHECK_OK(expr)                                                                        \
  do {                                                                                             \
    dist_check_count++;                                                                            \
    tg_status dist_st_ = (expr);                                                                   \
    if (dist_st_ != TG_OK) dist_check_fail(__FILE__, __LINE__, #expr, tg_last_error_message());    \
    tg_clear_error();                                                                              \
  } while (0)

static inline void dist_check_err_(const char *file, int line, const char *what, tg_status got,
                                   tg_status want, const char *needle) {
  dist_check_count++;
  char detail[1024];
  const char *msg = tg_last_error_message();
  if (got != want) {
    snprintf(detail, sizeof detail, "got %s (%s), want %s", tg_status_name(got), msg,
             tg_status_name(want));
    dist_check_fail(file, line, what, detail);
  } else if (needle && !strstr(msg, needle)) {
    snprintf(detail, sizeof detail, "message \"%s\" lacks \"%s\"", msg, needle);
    dist_check_fail(file, line, what, detail);
  }
  tg_clear_error();
}
#define DIST_CHECK_ERR(expr, want, needle)                                                         \
  dist_check_err_(__FILE__, __LINE__, #expr, (expr), (want), (needle))

/* Whether every element of p's .grad equals want (false without a .grad). */
static inline bool grad_is(const tg_tensor *p, double want) {
  tg_tensor *g = tg_grad(p);
  if (!g) return false;
  tg_scope sc = tg_scope_begin();
  double d = tg_max_abs_diff(g, tg_full_like(g, want));
  tg_scope_end(sc);
  return d == 0;
}

/* Prints the summary; the exit status for main. */
static inline int dist_check_finish(const char *name) {
  printf("%s: rank %d of %d: %d checks, %d failed\n", name, tg_dist_rank(), tg_dist_world_size(),
         dist_check_count, dist_check_failed);
  fflush(stdout);
  return dist_check_failed ? 1 : 0;
}

#endif
