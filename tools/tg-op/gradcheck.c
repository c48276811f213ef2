/* tg-op gradcheck: tg_op_check on each named op (or every op with samples), a PASS / FAIL /
 * SKIP line each and a summary; the tutorial's grad_check and check scripts
 * for any op. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <stdio.h>
#include <time.h>

#include "tg_op.h"

static double seconds_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct tally {
  int passed, failed, skipped;
} tally;

static void check_one(const tg_op_desc *op, tg_op_check_options copts, tally *t) {
  double t0 = seconds_now();
  tg_scope s = tg_scope_begin();
  tg_status st = tg_op_check(op, copts);
  tg_scope_end(s);
  double dt = seconds_now() - t0;
  if (st == TG_OK) {
    printf("PASS %-22s (%.2f s)\n", op->name, dt);
    t->passed++;
  } else {
    printf("FAIL %-22s %s: %s\n", op->name, tg_status_name(st), tg_last_error_message());
    t->failed++;
  }
  fflush(stdout);
  tg_clear_error();
}

int tgop_gradcheck(const tgop_options *opts, int n_names, char *const *names) {
  if (opts->all == (n_names > 0)) {
    fprintf(stderr, "tg-op gradcheck: name the ops to check, or give --all (not both)\n");
    return TGOP_EXIT_USAGE;
  }
  /* Resolve every name first: a typo is a usage error before anything runs. */
  for (int i = 0; i < n_names; i++) {
    tgop_target t;
    if (!tgop_resolve(names[i], &t)) {
      fprintf(stderr, "tg-op gradcheck: unknown op '%s' (tg-op list shows the ops)\n", names[i]);
      return TGOP_EXIT_USAGE;
    }
    if (!t.op) {
      fprintf(stderr,
              "tg-op gradcheck: %s is a composite reference for bench, not a registered op: "
              "its gradients are the tape's (check op '%s' instead)\n",
              names[i], t.samples_of);
      return TGOP_EXIT_USAGE;
    }
  }
  tg_op_check_options copts = {
      .gradcheck = {.quiet = true, .fast_mode = opts->fast, .seed = opts->seed},
      .skip_gradgradcheck = opts->no_gradgrad,
      .skip_cuda = opts->no_cuda,
      .verbose = opts->verbose,
  };
  tally t = {0};
  if (opts->all) {
    for (int i = 0; i < tg_op_count(); i++) {
      const tg_op_desc *op = tg_op_at(i);
      if (!op) continue;
      if (op->sample_inputs) {
        check_one(op, copts, &t);
      } else {
        if (opts->verbose) printf("SKIP %-22s no sample inputs\n", op->name);
        t.skipped++;
      }
    }
  } else {
    for (int i = 0; i < n_names; i++) {
      tgop_target target;
      tgop_resolve(names[i], &target);
      check_one(target.op, copts, &t); /* no samples: tg_op_check says so, a FAIL */
    }
  }
  printf("gradcheck: %d passed, %d failed", t.passed, t.failed);
  if (opts->all) printf(", %d skipped (no sample inputs)", t.skipped);
  printf("%s%s%s\n", opts->fast ? "; fast mode" : "",
         opts->no_gradgrad ? "; gradgradcheck skipped" : "",
         opts->no_cuda ? "; CPU-vs-CUDA skipped" : "");
  return t.failed ? TGOP_EXIT_FAIL : TGOP_EXIT_OK;
}
