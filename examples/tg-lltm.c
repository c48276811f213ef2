/* tg-lltm: the LLTM cell of PyTorch's "Custom C++ and CUDA Extensions" tutorial, fused and
 * composed, compared, gradient-checked and timed.
 *
 *   tg-lltm                      batch 16, features 32, state 128, F32, CPU (the tutorial's)
 *   tg-lltm --batch 256 --features 1024 --state 1024 --threads 2 --grad all --json
 *
 * 1. Runs both paths on the same inputs (all five requiring grad) and prints the largest
 *    difference of new_h, new_cell and the five gradients of sum(new_h) + sum(new_cell).
 * 2. Gradient-checks both paths in F64 at the official test's size (batch 3, features 17,
 *    state 5) against central differences.
 * 3. Times them like the tutorial's benchmark: forward, then backward of
 *    sum(new_h) + sum(new_cell), each timed on its own; median over --iters iterations
 *    after a warm-up; also the bytes each graph keeps for backward. */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../bench/timing.h" /* stopwatch and median, shared with the benchmark */
#include "cli_parse.h"
#include "tg/tg.h"

typedef struct config {
  int64_t batch, features, state;
  tg_dtype dtype;
  tg_device device;
  int iters, threads;
  bool grad_all; /* time with input, old_h and old_cell requiring grad too */
  bool json;
} config;

static const char *const usage =
    "usage: tg-lltm [--batch N] [--features N] [--state N] [--dtype f32|f64]\n"
    "               [--device cpu|cuda[:I]] [--iters N] [--threads N] [--grad params|all]\n"
    "               [--json]\n"
    "Compares, gradient-checks and times the fused and the composed LLTM cell.\n"
    "Defaults: the tutorial's batch 16, features 32, state 128, F32 on the CPU, 100 timed\n"
    "iterations, tg's default thread count, gradients for the parameters only.\n";

/* ---- command line ---- */

static bool parse_device(const char *text, tg_device *out) {
  if (strcmp(text, "cpu") == 0 || strcmp(text, "cuda") == 0) {
    *out = text[0] == 'c' && text[1] == 'p' ? TG_DEVICE_CPU : TG_DEVICE_CUDA(0);
    return true;
  }
  char *end;
  long index = strncmp(text, "cuda:", 5) == 0 && isdigit((unsigned char)text[5])
                   ? strtol(text + 5, &end, 10)
                   : -1;
  if (index >= 0 && index < 64 && end != text + 5 && *end == '\0') {
    *out = TG_DEVICE_CUDA((int)index);
    return true;
  }
  fprintf(stderr, "tg-lltm: --device wants cpu, cuda or cuda:INDEX, got '%s'\n", text);
  return false;
}

/* Returns 0 to run, else the exit status: CLI_EXIT_USAGE on a bad command line, -1 (for 0)
 * after --help. */
static int parse_args(int argc, char **argv, config *cfg) {
  *cfg = (config){.batch = 16,
                  .features = 32,
                  .state = 128,
                  .dtype = TG_F32,
                  .device = TG_DEVICE_CPU,
                  .iters = 100};
  enum { BATCH = 256, FEATURES, STATE, ITERS, THREADS, DTYPE, DEVICE, GRAD, JSON };
  static const struct option options[] = {{"batch", required_argument, NULL, BATCH},
                                          {"features", required_argument, NULL, FEATURES},
                                          {"state", required_argument, NULL, STATE},
                                          {"iters", required_argument, NULL, ITERS},
                                          {"threads", required_argument, NULL, THREADS},
                                          {"dtype", required_argument, NULL, DTYPE},
                                          {"device", required_argument, NULL, DEVICE},
                                          {"grad", required_argument, NULL, GRAD},
                                          {"json", no_argument, NULL, JSON},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
  const char *me = "tg-lltm";
  int c, index;
  while ((c = getopt_long(argc, argv, "h", options, &index)) != -1) {
    const char *flag = c >= BATCH ? options[index].name : "";
    char name[32];
    snprintf(name, sizeof name, "--%s", flag);
    bool ok = true;
    switch (c) {
    case 'h':
      fputs(usage, stdout);
      return -1;
    case JSON:
      cfg->json = true;
      break;
    case BATCH:
      ok = cli_parse_i64(me, name, optarg, 1, 1 << 24, &cfg->batch);
      break;
    case FEATURES:
      ok = cli_parse_i64(me, name, optarg, 1, 1 << 24, &cfg->features);
      break;
    case STATE:
      ok = cli_parse_i64(me, name, optarg, 1, 1 << 24, &cfg->state);
      break;
    case ITERS:
      ok = cli_parse_int(me, name, optarg, 1, 1000000, &cfg->iters);
      break;
    case THREADS:
      ok = cli_parse_int(me, name, optarg, 1, 1024, &cfg->threads);
      break;
    case DTYPE:
      ok = strcmp(optarg, "f32") == 0 || strcmp(optarg, "f64") == 0;
      cfg->dtype = strcmp(optarg, "f64") == 0 ? TG_F64 : TG_F32;
      if (!ok) fprintf(stderr, "tg-lltm: --dtype wants f32 or f64, got '%s'\n", optarg);
      break;
    case DEVICE:
      ok = parse_device(optarg, &cfg->device);
      break;
    case GRAD:
      ok = strcmp(optarg, "params") == 0 || strcmp(optarg, "all") == 0;
      cfg->grad_all = strcmp(optarg, "all") == 0;
      if (!ok) fprintf(stderr, "tg-lltm: --grad wants params or all, got '%s'\n", optarg);
      break;
    default:
      return cli_usage_error(me);
    }
    if (!ok) return CLI_EXIT_USAGE;
  }
  if (optind < argc) {
    fprintf(stderr, "tg-lltm: unexpected argument '%s'\n", argv[optind]);
    return cli_usage_error(me);
  }
  return 0;
}

/* ---- helpers ---- */

static void fail(const char *what) {
  fprintf(stderr, "tg-lltm: %s failed: %s\n", what, tg_last_error_message());
  exit(1);
}

/* max |a - b| over all elements (tg_max_abs_diff compares on the host in double). */
static double max_abs_diff(const tg_tensor *a, const tg_tensor *b) {
  double m = tg_max_abs_diff(a, b);
  if (m < 0) fail("comparing results");
  return m;
}

/* sum(new_h) + sum(new_cell): the tutorial's loss. The two sums live in a scope of its own;
 * tg_scope_escape hands just the loss to the caller's scope. */
static tg_tensor *loss_of(const tg_tensor *new_h, const tg_tensor *new_cell) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *loss = tg_scope_escape(sc, tg_add(tg_sum(new_h), tg_sum(new_cell)));
  tg_scope_end(sc);
  return loss; /* NULL with the error pending if any step failed */
}

/* ---- 1. fused vs composed ---- */

enum { N_COMPARED = 7 };
static const char *const compared_names[N_COMPARED] = {
    "new_h", "new_cell", "d_input", "d_weights", "d_bias", "d_old_h", "d_old_cell"};

static void compare_paths(tg_lltm_cell *cell, tg_tensor *const inputs[5],
                          double diffs[N_COMPARED]) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *out[2][2], *grads[2][5];
  for (int k = 0; k < 2; k++) {
    tg_lltm_impl impl = k == 0 ? TG_LLTM_FUSED : TG_LLTM_COMPOSED;
    if (tg_lltm_cell_forward(cell, impl, inputs[0], inputs[3], inputs[4], &out[k][0], &out[k][1]) !=
        TG_OK)
      fail(k == 0 ? "fused forward" : "composed forward");
    tg_tensor *loss = loss_of(out[k][0], out[k][1]);
    if (!loss || tg_autograd_grad(1, (const tg_tensor *const[]){loss}, NULL, 5,
                                  (const tg_tensor *const *)inputs, grads[k],
                                  (tg_backward_options){0}, false) != TG_OK)
      fail(k == 0 ? "fused backward" : "composed backward");
  }
  diffs[0] = max_abs_diff(out[0][0], out[1][0]);
  diffs[1] = max_abs_diff(out[0][1], out[1][1]);
  for (int i = 0; i < 5; i++) diffs[2 + i] = max_abs_diff(grads[0][i], grads[1][i]);
  tg_scope_end(sc);
}

/* ---- 2. gradcheck ---- */

static tg_status lltm_fn(void *user, const tg_tensor *const *in, tg_tensor **out) {
  tg_lltm_impl impl = *(const tg_lltm_impl *)user;
  return impl == TG_LLTM_FUSED
             ? tg_lltm(in[0], in[1], in[2], in[3], in[4], &out[0], &out[1])
             : tg_lltm_composed(in[0], in[1], in[2], in[3], in[4], &out[0], &out[1]);
}

/* Gradcheck at batch 3, features 17, state 5 in F64 on cfg's device: "ok", or the
 * report of the first mismatch, in msg. */
static bool gradcheck_path(tg_lltm_impl impl, const config *cfg, char *msg, size_t len) {
  const int64_t B = 3, I = 17, S = 5;
  tg_scope sc = tg_scope_begin();
  tg_generator *gen = tg_generator_new(7);
  tg_options o = {.dtype = TG_F64, .device = cfg->device, .requires_grad = true};
  tg_tensor *in[5] = {tg_randn(TG_SHAPE(B, I), o, gen), tg_randn(TG_SHAPE(3 * S, S + I), o, gen),
                      tg_randn(TG_SHAPE(3 * S), o, gen), tg_randn(TG_SHAPE(B, S), o, gen),
                      tg_randn(TG_SHAPE(B, S), o, gen)};
  tg_generator_free(gen);
  tg_status st = in[0] && in[1] && in[2] && in[3] && in[4]
                     ? tg_gradcheck(lltm_fn, &impl, 5, in, 2, (tg_gradcheck_options){.quiet = true})
                     : tg_last_error();
  snprintf(msg, len, "%s", st == TG_OK ? "ok" : tg_last_error_message());
  tg_clear_error();
  tg_scope_end(sc);
  return st == TG_OK;
}

/* ---- 3. timing ---- */

typedef struct timing {
  double forward_us, backward_us;
  int64_t saved_bytes;
} timing;

static void sync_device(const config *cfg) {
  if (cfg->device.type == TG_CUDA && tg_cuda_synchronize() != TG_OK) fail("cuda synchronize");
}

static void stopwatch_start(tg_bench_stopwatch *w) {
  if (tg_bench_stopwatch_start(w) != TG_OK) fail("cuda timer");
}

static double stopwatch_us(tg_bench_stopwatch *w) {
  double us;
  if (tg_bench_stopwatch_us(w, &us) != TG_OK) fail("cuda timer");
  return us;
}

static timing time_path(tg_lltm_impl impl, const config *cfg, tg_lltm_cell *cell,
                        tg_tensor *const inputs[5]) {
  const int warmup = cfg->iters / 10 > 3 ? cfg->iters / 10 : 3;
  double *fwd = malloc(sizeof(double) * (size_t)cfg->iters);
  double *bwd = malloc(sizeof(double) * (size_t)cfg->iters);
  if (!fwd || !bwd) {
    fprintf(stderr, "tg-lltm: out of memory\n");
    exit(1);
  }
  timing t = {0};
  tg_bench_stopwatch watch = {0};
  if (cfg->device.type == TG_CUDA && !(watch.timer = tg_cuda_timer_new())) fail("cuda timer");
  for (int i = 0; i < warmup + cfg->iters; i++) {
    tg_scope sc = tg_scope_begin();
    tg_tensor *new_h, *new_cell;
    sync_device(cfg);
    stopwatch_start(&watch);
    if (tg_lltm_cell_forward(cell, impl, inputs[0], inputs[3], inputs[4], &new_h, &new_cell) !=
        TG_OK)
      fail("forward");
    double forward_us = stopwatch_us(&watch);
    if (i == 0)
      t.saved_bytes = tg_graph_saved_bytes(2, (const tg_tensor *const[]){new_h, new_cell}, 5,
                                           (const tg_tensor *const *)inputs);
    stopwatch_start(&watch);
    if (tg_backward(loss_of(new_h, new_cell), NULL) != TG_OK) fail("backward");
    double backward_us = stopwatch_us(&watch);
    tg_scope_end(sc);
    if (i >= warmup) {
      fwd[i - warmup] = forward_us;
      bwd[i - warmup] = backward_us;
    }
  }
  tg_cuda_timer_free(watch.timer);
  t.forward_us = tg_bench_median(fwd, cfg->iters);
  t.backward_us = tg_bench_median(bwd, cfg->iters);
  free(fwd);
  free(bwd);
  return t;
}

/* ---- main ---- */

/* x, W, b, h, c: W and b are the cell's; x, h, c ~ N(0, 1). */
static void make_inputs(const config *cfg, tg_lltm_cell *cell, bool inputs_grad,
                        tg_tensor *inputs[5]) {
  tg_generator *gen = tg_generator_new(1);
  tg_options o = {.dtype = cfg->dtype, .device = cfg->device, .requires_grad = inputs_grad};
  inputs[0] = tg_randn(TG_SHAPE(cfg->batch, cfg->features), o, gen);
  inputs[1] = tg_lltm_cell_weights(cell);
  inputs[2] = tg_lltm_cell_bias(cell);
  inputs[3] = tg_randn(TG_SHAPE(cfg->batch, cfg->state), o, gen);
  inputs[4] = tg_randn(TG_SHAPE(cfg->batch, cfg->state), o, gen);
  tg_generator_free(gen);
  if (!inputs[0] || !inputs[3] || !inputs[4]) fail("making the inputs");
}

static void print_text(const config *cfg, const double diffs[N_COMPARED], const char *gc_fused,
                       const char *gc_composed, const timing *fused, const timing *composed) {
  printf("tg-lltm: LLTM cell, batch %lld, features %lld, state %lld, %s on %s:%d, %d thread(s), "
         "BLIS %s kernels (chosen by %s)%s%s\n",
         (long long)cfg->batch, (long long)cfg->features, (long long)cfg->state,
         tg_dtype_name(cfg->dtype), tg_device_type_name(cfg->device.type), cfg->device.index,
         tg_get_num_threads(), tg_blis_kernels(), tg_blis_kernels_source(),
         tg_blis_large_kernels() ? ", large GEMMs on " : "",
         tg_blis_large_kernels() ? tg_blis_large_kernels() : "");
  if (cfg->device.type == TG_CPU) {
    char engines[1024];
    tg_gemm_engine_report(engines, sizeof engines, false);
    /* The gate GEMM [B, I+S] @ W^T, on this run's threads. */
    const int64_t k = cfg->features + cfg->state;
    printf("%s\nthe gate GEMM (%lld x %lld x %lld) runs on %s\n\n", engines, (long long)cfg->batch,
           (long long)(3 * cfg->state), (long long)k,
           tg_gemm_engine_for(cfg->batch, 3 * cfg->state, k, false, true, tg_get_num_threads()));
  }
  printf("fused vs composed, max |difference| (gradients of sum(new_h) + sum(new_cell)):\n");
  for (int i = 0; i < N_COMPARED; i++) printf("  %-11s %.3g\n", compared_names[i], diffs[i]);
  printf("\ngradcheck (F64, batch 3, features 17, state 5, all five inputs):\n");
  printf("  fused      %s\n", gc_fused);
  printf("  composed   %s\n", gc_composed);
  printf("\ntiming: median of %d iterations after warm-up; gradients for %s\n", cfg->iters,
         cfg->grad_all ? "all five inputs" : "weights and bias (the tutorial's benchmark)");
  printf("                  forward us   backward us   saved for backward\n");
  printf("  composed        %10.1f    %10.1f   %10lld bytes\n", composed->forward_us,
         composed->backward_us, (long long)composed->saved_bytes);
  printf("  fused           %10.1f    %10.1f   %10lld bytes\n", fused->forward_us,
         fused->backward_us, (long long)fused->saved_bytes);
  printf("  fused/composed  %10.2f    %10.2f   %10.2f\n", fused->forward_us / composed->forward_us,
         fused->backward_us / composed->backward_us,
         (double)fused->saved_bytes / (double)composed->saved_bytes);
  printf("  fused forward+backward is %.2fx as fast as composed\n",
         (composed->forward_us + composed->backward_us) / (fused->forward_us + fused->backward_us));
}

/* A JSON string literal of s (quotes and backslashes escaped, control characters dropped). */
static void print_json_string(const char *s) {
  putchar('"');
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') putchar('\\');
    if ((unsigned char)*s >= 0x20) putchar(*s);
  }
  putchar('"');
}

static void print_json(const config *cfg, const double diffs[N_COMPARED], const char *gc_fused,
                       const char *gc_composed, const timing *fused, const timing *composed) {
  printf("{\"batch\": %lld, \"features\": %lld, \"state\": %lld, \"dtype\": \"%s\", "
         "\"device\": \"%s:%d\", \"threads\": %d, \"mode\": \"%s\", \"iters\": %d, "
         "\"blis_kernels\": \"%s\", \"gemm_engines_chosen_by\": \"%s\", ",
         (long long)cfg->batch, (long long)cfg->features, (long long)cfg->state,
         tg_dtype_name(cfg->dtype), tg_device_type_name(cfg->device.type), cfg->device.index,
         tg_get_num_threads(), cfg->grad_all ? "all" : "params", cfg->iters, tg_blis_kernels(),
         tg_gemm_engine_source());
  printf("\"max_abs_diff\": {");
  for (int i = 0; i < N_COMPARED; i++)
    printf("%s\"%s\": %.6g", i ? ", " : "", compared_names[i], diffs[i]);
  printf("}, \"gradcheck\": {\"fused\": ");
  print_json_string(gc_fused);
  printf(", \"composed\": ");
  print_json_string(gc_composed);
  printf("}, ");
  const timing *t[2] = {composed, fused};
  for (int k = 0; k < 2; k++)
    printf("\"%s\": {\"forward_us\": %.3f, \"backward_us\": %.3f, \"saved_bytes\": %lld}, ",
           k ? "fused" : "composed", t[k]->forward_us, t[k]->backward_us,
           (long long)t[k]->saved_bytes);
  printf(
      "\"fused_over_composed\": {\"forward\": %.4f, \"backward\": %.4f, \"saved_bytes\": %.4f}}\n",
      fused->forward_us / composed->forward_us, fused->backward_us / composed->backward_us,
      (double)fused->saved_bytes / (double)composed->saved_bytes);
}

int main(int argc, char **argv) {
  config cfg;
  int parsed = parse_args(argc, argv, &cfg);
  if (parsed) return parsed < 0 ? 0 : parsed;
  if (!tg_blis_kernels()) fail("choosing BLIS's kernels");
  if (cfg.threads > 0) tg_set_num_threads(cfg.threads);

  tg_generator *gen = tg_generator_new(42);
  tg_lltm_cell *cell = tg_lltm_cell_new(
      cfg.features, cfg.state, (tg_options){.dtype = cfg.dtype, .device = cfg.device}, gen);
  tg_generator_free(gen);
  if (!cell) fail("creating the LLTM cell");

  /* 1. Same inputs through both paths, every gradient. */
  double diffs[N_COMPARED];
  tg_scope sc = tg_scope_begin();
  tg_tensor *inputs[5];
  make_inputs(&cfg, cell, true, inputs);
  compare_paths(cell, inputs, diffs);
  tg_scope_end(sc);

  /* 2. Gradcheck both paths. */
  char gc_fused[512], gc_composed[512];
  bool gradcheck_ok = gradcheck_path(TG_LLTM_FUSED, &cfg, gc_fused, sizeof gc_fused);
  gradcheck_ok &= gradcheck_path(TG_LLTM_COMPOSED, &cfg, gc_composed, sizeof gc_composed);

  /* 3. Timing, composed first, each with its own inputs. */
  timing t[2];
  for (int k = 0; k < 2; k++) {
    sc = tg_scope_begin();
    make_inputs(&cfg, cell, cfg.grad_all, inputs);
    t[k] = time_path(k ? TG_LLTM_FUSED : TG_LLTM_COMPOSED, &cfg, cell, inputs);
    tg_scope_end(sc);
    tg_tensor *params[2];
    tg_lltm_cell_parameters(cell, params, 2);
    for (int i = 0; i < 2; i++) tg_set_grad(params[i], NULL);
  }
  tg_lltm_cell_free(cell);

  if (cfg.json)
    print_json(&cfg, diffs, gc_fused, gc_composed, &t[1], &t[0]);
  else
    print_text(&cfg, diffs, gc_fused, gc_composed, &t[1], &t[0]);
  return gradcheck_ok ? 0 : 1;
}
