/* small_models: training steps of two small models, written with tg's ops as a new user
 * would today, on 1 and on 2 threads: where a step is many small passes, what matters is
 * how little a second thread costs per pass.
 *
 *   mlp  64 -> 128 -> 128 -> 10 (addmm + relu), cross-entropy, batch 64
 *   cnn  8x8 single-channel inputs (scikit-learn's digits' size), batch 64: two 3x3
 *        convolutions (16 and 32 channels, zero padding 1) as im2col (the nine tg_narrow views
 *        of a padded channels-last input, concatenated) and tg_addmm, relu, 2x2 max pooling
 *        with tg_max_dim, a linear layer to 10 classes, cross-entropy
 *
 * A step is forward, backward and an SGD update, on random data (fixed seed). Rounds
 * alternate the thread counts (1, 2, 1, 2, ...) so drifts of the machine hit both alike; the
 * median over all timed steps of all rounds is reported, one JSON line per (model, threads)
 * and a table. --busy starts a child process that spins on the last CPU this process may
 * use, to measure beside a busy neighbour.
 *
 *   small_models [--iters N] [--rounds R] [--busy] [--help] */
#define _GNU_SOURCE /* sched_setaffinity */
#include <getopt.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_parse.h"
#include "tg/tg.h"
#include "timing.h"

#define BATCH 64
#define N_MODELS 2
#define MAX_PARAMS 8
static const char *const model_names[N_MODELS] = {"mlp", "cnn"};
static const int thread_counts[2] = {1, 2};

typedef struct model {
  int n_params;
  tg_tensor *params[MAX_PARAMS];
  tg_tensor *x, *target;
  tg_optimizer *opt;
} model;

static void check(const void *p, const char *what) {
  if (!p) {
    fprintf(stderr, "small_models: %s: %s\n", what, tg_last_error_message());
    exit(1);
  }
}

static void check_status(tg_status st, const char *what) {
  if (st != TG_OK) check(NULL, what);
}

/* A parameter of the given sizes, scaled randn (fan-in), owned by the program. */
static tg_tensor *param(model *m, int ndim, const int64_t *sizes, double scale) {
  tg_scope s = tg_scope_begin();
  tg_tensor *p = tg_retain(tg_mul_scalar(tg_randn(ndim, sizes, TG_OPTS_DEFAULT, NULL), scale));
  tg_scope_end(s);
  check(p, "parameter");
  check_status(tg_set_requires_grad(p, true), "requires_grad");
  m->params[m->n_params++] = p;
  return p;
}

static tg_tensor *bias(model *m, int64_t n) {
  tg_tensor *b = tg_retain(tg_zeros(TG_SHAPE(n), TG_OPTS_DEFAULT));
  check(b, "bias");
  check_status(tg_set_requires_grad(b, true), "requires_grad");
  m->params[m->n_params++] = b;
  return b;
}

static void make_data(model *m, int ndim, const int64_t *x_sizes) {
  m->x = tg_retain(tg_randn(ndim, x_sizes, TG_OPTS_DEFAULT, NULL));
  int64_t labels[BATCH];
  for (int i = 0; i < BATCH; i++) labels[i] = (int64_t)((unsigned)(i * 7 + 3) % 10u);
  m->target = tg_retain(tg_from_data(TG_SHAPE(BATCH), labels, TG_OPTS(.dtype = TG_I64)));
  check(m->x, "x");
  check(m->target, "target");
}

static void make_optimizer(model *m) {
  m->opt = tg_sgd_new(m->n_params, m->params, (tg_sgd_options){.lr = 0.01});
  check(m->opt, "sgd");
}

/* ---- the MLP ---- */
static void mlp_init(model *m) {
  param(m, TG_SHAPE(64, 128), 0.125);
  bias(m, 128);
  param(m, TG_SHAPE(128, 128), 0.088);
  bias(m, 128);
  param(m, TG_SHAPE(128, 10), 0.088);
  bias(m, 10);
  make_data(m, TG_SHAPE(BATCH, 64));
  make_optimizer(m);
}

static tg_tensor *mlp_forward(const model *m) {
  tg_tensor *const *p = m->params;
  tg_tensor *h = tg_relu(tg_addmm(p[1], m->x, p[0], 1, 1));
  h = tg_relu(tg_addmm(p[3], h, p[2], 1, 1));
  return tg_addmm(p[5], h, p[4], 1, 1);
}

/* ---- the CNN (channels last: [B, H, W, C]) ---- */
static void cnn_init(model *m) {
  param(m, TG_SHAPE(9 * 1, 16), 0.33);
  bias(m, 16);
  param(m, TG_SHAPE(9 * 16, 32), 0.083);
  bias(m, 32);
  param(m, TG_SHAPE(2 * 2 * 32, 10), 0.088);
  bias(m, 10);
  make_data(m, TG_SHAPE(BATCH, 8, 8, 1));
  make_optimizer(m);
}

/* x [B, H, W, C] with a border of zeros: [B, H + 2, W + 2, C]. */
static tg_tensor *pad1(const tg_tensor *x) {
  const int64_t b = tg_size(x, 0), h = tg_size(x, 1), w = tg_size(x, 2), c = tg_size(x, 3);
  tg_tensor *rows = tg_zeros(TG_SHAPE(b, 1, w, c), TG_OPTS_DEFAULT);
  tg_tensor *y = tg_cat(3, (const tg_tensor *const[]){rows, x, rows}, 1);
  tg_tensor *cols = tg_zeros(TG_SHAPE(b, h + 2, 1, c), TG_OPTS_DEFAULT);
  return tg_cat(3, (const tg_tensor *const[]){cols, y, cols}, 2);
}

/* A 3x3 convolution with padding 1, then relu: im2col by nine shifted views. */
static tg_tensor *conv3x3_relu(const tg_tensor *x, const tg_tensor *weight, const tg_tensor *b) {
  const int64_t n = tg_size(x, 0), h = tg_size(x, 1), w = tg_size(x, 2), c = tg_size(x, 3);
  tg_tensor *xp = pad1(x);
  const tg_tensor *shifted[9];
  for (int di = 0; di < 3; di++)
    for (int dj = 0; dj < 3; dj++)
      shifted[di * 3 + dj] = tg_narrow(tg_narrow(xp, 1, di, h), 2, dj, w);
  tg_tensor *cols = tg_reshape(tg_cat(9, shifted, 3), TG_SHAPE(n * h * w, 9 * c));
  tg_tensor *y = tg_relu(tg_addmm(b, cols, weight, 1, 1));
  return tg_reshape(y, TG_SHAPE(n, h, w, tg_size(weight, 1)));
}

/* 2x2 max pooling of [B, H, W, C]. */
static tg_tensor *maxpool2(const tg_tensor *x) {
  const int64_t n = tg_size(x, 0), h = tg_size(x, 1), w = tg_size(x, 2), c = tg_size(x, 3);
  tg_tensor *v = tg_reshape(x, TG_SHAPE(n, h / 2, 2, w / 2, 2, c)), *a = NULL, *b = NULL;
  if (tg_max_dim(v, 4, false, &a, NULL) != TG_OK) return NULL;
  if (tg_max_dim(a, 2, false, &b, NULL) != TG_OK) return NULL;
  return b;
}

static tg_tensor *cnn_forward(const model *m) {
  tg_tensor *const *p = m->params;
  tg_tensor *h = maxpool2(conv3x3_relu(m->x, p[0], p[1])); /* [B, 4, 4, 16] */
  h = maxpool2(conv3x3_relu(h, p[2], p[3]));               /* [B, 2, 2, 32] */
  return tg_addmm(p[5], tg_reshape(h, TG_SHAPE(BATCH, 2 * 2 * 32)), p[4], 1, 1);
}

/* ---- timing ---- */
static void step(const model *m, int which) {
  tg_scope s = tg_scope_begin();
  tg_tensor *logits = which == 0 ? mlp_forward(m) : cnn_forward(m);
  check(logits, "forward");
  tg_tensor *loss = tg_cross_entropy(logits, m->target);
  check(loss, "loss");
  check_status(tg_optimizer_zero_grad(m->opt), "zero_grad");
  check_status(tg_backward(loss, NULL), "backward");
  check_status(tg_optimizer_step(m->opt), "step");
  tg_scope_end(s);
}

static volatile double sink;

/* The spinning neighbour: a child process on the last CPU of this process's set. */
static pid_t start_busy_child(void) {
  cpu_set_t set;
  int last = -1;
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; c++)
      if (CPU_ISSET(c, &set)) last = c;
  fflush(NULL);
  const pid_t pid = fork();
  if (pid == 0) {
    if (last >= 0) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(last, &one);
      sched_setaffinity(0, sizeof one, &one);
    }
    double x = 0;
    for (;;) sink = x += 1e-9;
  }
  return pid;
}

static const char usage[] =
    "usage: small_models [--iters N] [--rounds R] [--busy]\n"
    "Median ms per training step (forward, backward, SGD) of a small MLP and CNN on 1 and 2\n"
    "threads, in R alternating rounds of N timed steps (defaults 50 and 6). --busy: beside a\n"
    "process spinning on the last CPU.\n";

static int parse_args(int argc, char **argv, int *iters, int *rounds, bool *busy) {
  const char *me = "small_models";
  enum { ITERS = 256, ROUNDS, BUSY };
  static const struct option options[] = {{"iters", required_argument, NULL, ITERS},
                                          {"rounds", required_argument, NULL, ROUNDS},
                                          {"busy", no_argument, NULL, BUSY},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
    bool ok = true;
    switch (c) {
    case 'h':
      fputs(usage, stdout);
      return -1;
    case ITERS:
      ok = cli_parse_int(me, "--iters", optarg, 1, 1000000, iters);
      break;
    case ROUNDS:
      ok = cli_parse_int(me, "--rounds", optarg, 1, 10000, rounds);
      break;
    case BUSY:
      *busy = true;
      break;
    default:
      return cli_usage_error(me);
    }
    if (!ok) return CLI_EXIT_USAGE;
  }
  if (optind < argc) {
    fprintf(stderr, "%s: unexpected argument '%s'\n", me, argv[optind]);
    return cli_usage_error(me);
  }
  return 0;
}

int main(int argc, char **argv) {
  int iters = 50, rounds = 6;
  bool busy = false;
  int parsed = parse_args(argc, argv, &iters, &rounds, &busy);
  if (parsed) return parsed < 0 ? 0 : parsed;
  tg_manual_seed(0);
  model models[N_MODELS] = {{0}};
  mlp_init(&models[0]);
  cnn_init(&models[1]);
  const pid_t child = busy ? start_busy_child() : 0;
  if (child < 0) return 1;
  const int per = iters * rounds;
  double *times = malloc(sizeof(double) * (size_t)(N_MODELS * 2 * per));
  if (!times) return 1;
  for (int r = 0; r < rounds; r++)
    for (int t = 0; t < 2; t++) {
      tg_set_num_threads(thread_counts[t]);
      for (int mi = 0; mi < N_MODELS; mi++) {
        for (int i = 0; i < 3; i++) step(&models[mi], mi);
        double *out = times + ((size_t)(mi * 2 + t) * (size_t)per) + (size_t)(r * iters);
        for (int i = 0; i < iters; i++) {
          const double t0 = tg_bench_now_us();
          step(&models[mi], mi);
          out[i] = (tg_bench_now_us() - t0) * 1e-3;
        }
      }
    }
  if (child > 0) {
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
  }
  double med[N_MODELS][2];
  for (int mi = 0; mi < N_MODELS; mi++)
    for (int t = 0; t < 2; t++) {
      med[mi][t] = tg_bench_median(times + (size_t)(mi * 2 + t) * (size_t)per, per);
      printf("{\"bench\": \"small_models\", \"model\": \"%s\", \"threads\": %d, \"busy\": %s, "
             "\"batch\": %d, \"steps\": %d, \"step_ms\": %.4f}\n",
             model_names[mi], thread_counts[t], busy ? "true" : "false", BATCH, per, med[mi][t]);
    }
  printf("# median ms per training step, batch %d, %d steps per cell%s\n", BATCH, per,
         busy ? ", beside a spinning process" : "");
  printf("%-6s %10s %10s %8s\n", "model", "1 thread", "2 threads", "1t / 2t");
  for (int mi = 0; mi < N_MODELS; mi++)
    printf("%-6s %10.3f %10.3f %8.2f\n", model_names[mi], med[mi][0], med[mi][1],
           med[mi][0] / med[mi][1]);
  free(times);
  for (int mi = 0; mi < N_MODELS; mi++) {
    tg_optimizer_free(models[mi].opt);
    for (int i = 0; i < models[mi].n_params; i++) tg_release(models[mi].params[i]);
    tg_release(models[mi].x);
    tg_release(models[mi].target);
  }
  return 0;
}
