/* Trains a small LLTM to track a running sum: a model written in C against tg's nn layer.
 *
 * Each sequence has T steps of inputs x_t [B, I]; the target at step t is 0.3 times the sum
 * of the first feature of x_0..x_t. The cell (fused or composed) carries the state, a Linear
 * reads it out, mse_loss compares, Adam updates. One training step is one scope.
 *
 *   train_lltm [--composed] [--steps N] [--help]
 *
 * Prints the loss as it falls and exits 0 when the last loss is below a quarter of the
 * first. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli_parse.h"
#include "tg/tg.h"

enum { BATCH = 32, FEATURES = 4, STATE = 32, STEPS_PER_SEQUENCE = 8 };

static int fail(const char *what) {
  fprintf(stderr, "train_lltm: %s: %s (%s)\n", what, tg_last_error_message(),
          tg_status_name(tg_last_error()));
  return 1;
}

/* One sequence: forward through time, summed loss, backward, optimizer step. */
static tg_status train_step(tg_lltm_cell *cell, tg_linear *readout, tg_optimizer *opt,
                            tg_lltm_impl impl, tg_generator *gen, double *loss_out) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *h = tg_zeros(TG_SHAPE(BATCH, STATE), TG_OPTS_DEFAULT);
  tg_tensor *c = tg_zeros(TG_SHAPE(BATCH, STATE), TG_OPTS_DEFAULT);
  tg_tensor *running = tg_zeros(TG_SHAPE(BATCH, 1), TG_OPTS_DEFAULT);
  tg_tensor *loss = tg_zeros(0, NULL, TG_OPTS_DEFAULT);
  for (int t = 0; t < STEPS_PER_SEQUENCE; t++) {
    tg_tensor *x = tg_randn(TG_SHAPE(BATCH, FEATURES), TG_OPTS_DEFAULT, gen);
    running = tg_add(running, tg_mul_scalar(tg_narrow(x, 1, 0, 1), 0.3));
    tg_status st = tg_lltm_cell_forward(cell, impl, x, h, c, &h, &c);
    if (st != TG_OK) break;
    loss = tg_add(loss, tg_mse_loss(tg_linear_forward(readout, h), running));
  }
  loss = tg_div_scalar(loss, STEPS_PER_SEQUENCE);
  tg_status st = tg_item(loss, loss_out);
  if (st == TG_OK) st = tg_optimizer_zero_grad(opt);
  if (st == TG_OK) st = tg_backward(loss, NULL);
  if (st == TG_OK) st = tg_optimizer_step(opt);
  tg_scope_end(sc);
  return st;
}

static const char usage[] =
    "usage: train_lltm [--composed] [--steps N]\n"
    "Trains a small LLTM to track a running sum; exits 0 when the loss fell below a quarter.\n"
    "  --composed  the cell composed of tg ops (default: the fused one)\n"
    "  --steps N   training sequences, 1..1000000 (default 300)\n";

/* 0 to run, else the exit status (CLI_EXIT_USAGE, or -1 for 0 after --help). */
static int parse_args(int argc, char **argv, tg_lltm_impl *impl, int *steps) {
  static const struct option options[] = {{"composed", no_argument, NULL, 'c'},
                                          {"steps", required_argument, NULL, 's'},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
    if (c == 'c')
      *impl = TG_LLTM_COMPOSED;
    else if (c == 's') {
      if (!cli_parse_int("train_lltm", "--steps", optarg, 1, 1000000, steps)) return CLI_EXIT_USAGE;
    } else if (c == 'h') {
      fputs(usage, stdout);
      return -1;
    } else
      return cli_usage_error("train_lltm");
  }
  if (optind < argc) {
    fprintf(stderr, "train_lltm: unexpected argument '%s'\n", argv[optind]);
    return cli_usage_error("train_lltm");
  }
  return 0;
}

int main(int argc, char **argv) {
  tg_lltm_impl impl = TG_LLTM_FUSED;
  int steps = 300;
  int parsed = parse_args(argc, argv, &impl, &steps);
  if (parsed) return parsed < 0 ? 0 : parsed;
  tg_generator *gen = tg_generator_new(1);
  tg_lltm_cell *cell = tg_lltm_cell_new(FEATURES, STATE, TG_OPTS_DEFAULT, gen);
  tg_linear *readout = tg_linear_new(STATE, 1, true, TG_OPTS_DEFAULT, gen);
  if (!gen || !cell || !readout) return fail("setup");
  tg_tensor *params[4];
  int n = tg_lltm_cell_parameters(cell, params, 2);
  n += tg_linear_parameters(readout, params + n, 2);
  tg_optimizer *opt = tg_adam_new(n, params, (tg_adam_options){.lr = 1e-2});
  if (!opt) return fail("tg_adam_new");

  printf("training a %s LLTM (batch %d, features %d, state %d, %d steps per sequence)\n",
         impl == TG_LLTM_FUSED ? "fused" : "composed", BATCH, FEATURES, STATE, STEPS_PER_SEQUENCE);
  double first = 0, last = 0;
  for (int step = 0; step < steps; step++) {
    if (train_step(cell, readout, opt, impl, gen, &last) != TG_OK) return fail("train_step");
    if (step == 0) first = last;
    if (step % 50 == 0 || step == steps - 1) printf("step %4d  loss %.5f\n", step, last);
  }
  tg_optimizer_free(opt);
  tg_linear_free(readout);
  tg_lltm_cell_free(cell);
  tg_generator_free(gen);
  if (tg_live_objects() != 0) {
    fprintf(stderr, "train_lltm: %lld objects leaked\n", (long long)tg_live_objects());
    return 1;
  }
  bool learned = last < 0.25 * first;
  printf("loss %.5f -> %.5f: %s\n", first, last, learned ? "learned" : "did NOT learn");
  return learned ? 0 : 1;
}
