/* lltm_floor: what the fused LLTM cannot shed at one size, in the pieces the goal "fused
 * within 1.15x of its GEMMs" is about. Minimum µs over --iters calls of each piece, on the
 * CPU, F32, params mode (the tutorial's benchmark):
 *   gemm_forward   gates = X @ W^T                      (tg_mm, as lltm_bench's tg_gemms)
 *   gemm_backward  d_weights = d_gates^T @ X
 *   cell_forward   the op's forward elementwise pass    (the cell over B x S, in place)
 *   cell_backward  its backward pass, with the gradients sum() delivers (expanded ones) and
 *                  the bias gradient; d_gates row-major (the op's layout below 65536 elements)
 *   loss           sum(new_h) + sum(new_cell) and its backward: the tutorial times it inside
 *                  backward, the GEMMs' floor does not
 * and floor_ratio = (GEMMs + cells + loss) / GEMMs: the least fused/gemms can be here, before
 * the cat, the outputs' allocation and the tape. Minimums, not medians: each piece alone,
 * repeatable on a machine whose medians drift. One JSON line.
 *
 *   lltm_floor [--size BxIxS] [--iters N] [--threads T]
 *
 * Links the static library: the cell passes are tg's internals (src/ops/lltm_internal.h). */
#define _POSIX_C_SOURCE 200809L
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli_parse.h"
#include "ops/lltm_internal.h"
#include "tg/tg.h"
#include "timing.h"

static const char *const me = "lltm_floor";

static void check(bool ok, const char *what) {
  if (ok) return;
  fprintf(stderr, "%s: %s failed: %s\n", me, what, tg_last_error_message());
  exit(1);
}

typedef struct pieces {
  tg_tensor *X, *w_t, *d_gates_t, *gates, *gates0, *bias, *old_cell, *new_h, *new_cell, *ones;
  tg_tensor *d_gates, *d_bias, *h, *c;
} pieces;

enum { GEMM_FWD, GEMM_BWD, CELL_FWD, CELL_BWD, LOSS, N_PIECES };
static const char *const names[N_PIECES] = {"gemm_forward_us", "gemm_backward_us",
                                            "cell_forward_us", "cell_backward_us", "loss_us"};

/* One call of piece k, timed (µs). */
static double run(const pieces *p, int k) {
  tg_scope sc = tg_scope_begin();
  if (k == CELL_FWD) check(tg_copy_(p->gates, p->gates0) == TG_OK, "copy"); /* untimed */
  const double t0 = tg_bench_now_us();
  switch (k) {
  case GEMM_FWD:
    tg_no_grad_begin();
    check(tg_mm(p->X, p->w_t) != NULL, "forward GEMM");
    tg_no_grad_end();
    break;
  case GEMM_BWD:
    tg_no_grad_begin();
    check(tg_mm(p->d_gates_t, p->X) != NULL, "backward GEMM");
    tg_no_grad_end();
    break;
  case CELL_FWD:
    check(tg_cpu_lltm_forward_pointwise(p->gates, p->bias, p->old_cell, p->new_h, p->new_cell) ==
              TG_OK,
          "forward pass");
    break;
  case CELL_BWD:
    check(tg_cpu_lltm_backward_pointwise(p->ones, p->ones, p->gates, p->old_cell, p->d_gates, NULL,
                                         p->d_bias) == TG_OK,
          "backward pass");
    break;
  default: {
    /* gradients handed on (to the LLTM's node in the protocol), not accumulated into .grad */
    const tg_tensor *loss = tg_add(tg_sum(p->h), tg_sum(p->c)), *wrt[2] = {p->h, p->c};
    tg_tensor *got[2];
    check(loss && tg_autograd_grad(1, &loss, NULL, 2, wrt, got, (tg_backward_options){0}, false) ==
                      TG_OK,
          "loss");
  }
  }
  const double us = tg_bench_now_us() - t0;
  tg_scope_end(sc);
  return us;
}

int main(int argc, char **argv) {
  int64_t size[3] = {16, 32, 128};
  int iters = 20000, threads = 1;
  static const struct option options[] = {{"size", required_argument, NULL, 's'},
                                          {"iters", required_argument, NULL, 'i'},
                                          {"threads", required_argument, NULL, 't'},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
  int opt;
  while ((opt = getopt_long(argc, argv, "h", options, NULL)) != -1) {
    bool ok = true;
    if (opt == 's')
      ok = cli_parse_dims(me, "--size", optarg, 3, 1, 1 << 20, size);
    else if (opt == 'i')
      ok = cli_parse_int(me, "--iters", optarg, 1, 10000000, &iters);
    else if (opt == 't')
      ok = cli_parse_int(me, "--threads", optarg, 1, 4096, &threads);
    else if (opt == 'h') {
      printf(
          "usage: lltm_floor [--size BxIxS] [--iters N] [--threads T]\n"
          "Minimum us of each piece the fused LLTM cannot shed (default 16x32x128, 20000, 1).\n");
      return 0;
    } else
      return cli_usage_error(me);
    if (!ok) return CLI_EXIT_USAGE;
  }
  if (optind < argc) return cli_usage_error(me);
  tg_set_num_threads(threads);
  const int64_t B = size[0], I = size[1], S = size[2];
  tg_scope scope = tg_scope_begin();
  tg_generator *gen = tg_generator_new(7);
  tg_options o = TG_OPTS_DEFAULT, leaf = {.requires_grad = true};
  pieces p;
  p.X = tg_randn(TG_SHAPE(B, S + I), o, gen);
  p.w_t = tg_t(tg_randn(TG_SHAPE(3 * S, S + I), o, gen));
  p.d_gates_t = tg_randn(TG_SHAPE(3 * S, B), o, gen);
  p.gates0 = tg_randn(TG_SHAPE(B, 3 * S), o, gen);
  p.gates = tg_empty(TG_SHAPE(B, 3 * S), o);
  p.bias = tg_randn(TG_SHAPE(3 * S), o, gen);
  p.old_cell = tg_randn(TG_SHAPE(B, S), o, gen);
  p.new_h = tg_empty(TG_SHAPE(B, S), o);
  p.new_cell = tg_empty(TG_SHAPE(B, S), o);
  p.ones = tg_expand(tg_ones(TG_SHAPE(1, 1), o), TG_SHAPE(B, S));
  p.d_gates = tg_empty(TG_SHAPE(B, 3 * S), o);
  p.d_bias = tg_empty(TG_SHAPE(1, 3 * S), o);
  p.h = tg_randn(TG_SHAPE(B, S), leaf, gen);
  p.c = tg_randn(TG_SHAPE(B, S), leaf, gen);
  tg_generator_free(gen);
  check(p.X && p.w_t && p.d_gates_t && p.gates0 && p.gates && p.bias && p.old_cell && p.new_h &&
            p.new_cell && p.ones && p.d_gates && p.d_bias && p.h && p.c,
        "making the operands");
  check(tg_copy_(p.gates, p.gates0) == TG_OK, "copy");
  double best[N_PIECES];
  for (int k = 0; k < N_PIECES; k++) best[k] = 1e300;
  /* The pieces interleaved, so that a slow spell of the machine touches them alike. */
  for (int i = 0; i < iters + iters / 10 + 3; i++)
    for (int k = 0; k < N_PIECES; k++) {
      const double us = run(&p, k);
      if (us < best[k]) best[k] = us;
    }
  const double gemms = best[GEMM_FWD] + best[GEMM_BWD];
  const double floor = gemms + best[CELL_FWD] + best[CELL_BWD] + best[LOSS];
  printf("{\"bench\": \"lltm_floor\", \"batch\": %lld, \"features\": %lld, \"state\": %lld, "
         "\"threads\": %d, \"iters\": %d, ",
         (long long)B, (long long)I, (long long)S, threads, iters);
  for (int k = 0; k < N_PIECES; k++) printf("\"%s\": %.3f, ", names[k], best[k]);
  printf("\"floor_ratio\": %.3f}\n", floor / gemms);
  tg_scope_end(scope);
  return 0;
}
