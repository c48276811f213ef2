/* lltm_bench: the fused-vs-composed LLTM benchmark, the tutorial's protocol.
 *
 * For every size, thread count and gradient mode: forward, then backward of
 * sum(new_h) + sum(new_cell), each timed on its own, leaf gradients accumulating across
 * iterations as in the tutorial (and bench/pytorch_lltm.py); median over --iters timed
 * iterations after max(3, iters/10) untimed ones. Modes: "params" (only weights and bias
 * require grad: the tutorial's benchmark) and "all" (input, old_h, old_cell too).
 *
 * Output, one JSON line per (size, threads, mode, impl), impl one of
 *   tg_composed  tg_lltm_composed through the tape
 *   tg_fused     the fused op tg_lltm
 *   tg_gemms     only the GEMMs the fused op runs, with the same operand layouts: tg_mm
 *                with grad mode off (the output's allocation, no elementwise work, no
 *                tape): the floor the fused op is measured against
 * with forward_us, backward_us (medians) and, for the first two, saved_bytes: what the
 * graph keeps for backward beyond the five inputs (tg_graph_saved_bytes), and on the CPU
 * rss_growth_bytes: the process's peak resident memory during the run over its resident
 * memory just before the first forward (tg_bench_rss, bench/rss.h).
 *
 *   lltm_bench [--iters N] [--threads 1,2] [--modes params,all] [--device cpu|cuda]
 *              [--impls composed,fused,gemms]
 *              [--sizes 16x32x128,64x1024x128,128x256x512,256x1024x1024] [--help]
 *
 * On CUDA every timed span is measured with events on tg's stream (tg_cuda_timer). */
#define _POSIX_C_SOURCE 200809L
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_parse.h"
#include "tg/tg.h"
#include "rss.h"
#include "timing.h"

#define MAX_LIST 16
static const char *const default_sizes = "16x32x128,64x1024x128,128x256x512,256x1024x1024";

typedef struct options {
  int iters;
  int n_threads, threads[MAX_LIST];
  int n_modes;
  bool all_grads[2];
  bool impls[3]; /* indexed by IMPL_* */
  int n_sizes;
  int64_t sizes[MAX_LIST][3];
  tg_device device;
} options;

enum { IMPL_COMPOSED, IMPL_FUSED, IMPL_GEMMS };
static const char *const impl_names[] = {"tg_composed", "tg_fused", "tg_gemms"};

/* The device every tensor of the run lives on (set once from --device). */
static tg_device bench_device;

/* ---- command line ---- */

static const char *const me = "lltm_bench";

/* --threads: counts in 1..4096, at most MAX_LIST of them. */
static bool parse_int_list(const char *opt, const char *text, int *out, int *n) {
  *n = 0;
  const char *p = text;
  do {
    char item[32];
    if (*n == MAX_LIST) {
      fprintf(stderr, "%s: %s: '%s' has more than %d items\n", me, opt, text, MAX_LIST);
      return false;
    }
    if (!cli_next_item(me, opt, text, &p, item, sizeof item) ||
        !cli_parse_int(me, opt, item, 1, 4096, &out[(*n)++]))
      return false;
  } while (*p);
  return true;
}

/* --sizes: BxFxS items, each size in 1..2^24. */
static bool parse_sizes(const char *text, options *o) {
  return cli_parse_dims_list(me, "--sizes", text, 3, 1, 1 << 24, MAX_LIST, &o->sizes[0][0],
                             &o->n_sizes);
}

/* A comma-separated list strtok can split without dropping an empty item ("a,,b", "a,"). */
static bool well_formed_list(const char *text, char *buf, size_t size) {
  const size_t n = strlen(text);
  if (n == 0 || n >= size || text[0] == ',' || text[n - 1] == ',' || strstr(text, ",,"))
    return false;
  memcpy(buf, text, n + 1);
  return true;
}

static bool parse_modes(const char *text, options *o) {
  o->n_modes = 0;
  char buf[64];
  if (!well_formed_list(text, buf, sizeof buf)) return false;
  for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
    if (o->n_modes == 2 || (strcmp(tok, "params") && strcmp(tok, "all"))) return false;
    o->all_grads[o->n_modes++] = strcmp(tok, "all") == 0;
  }
  return o->n_modes > 0;
}

/* "fused,composed": the names without their "tg_" prefix, each at most once. */
static bool parse_impls(const char *text, options *o) {
  memset(o->impls, 0, sizeof o->impls);
  char buf[64];
  if (!well_formed_list(text, buf, sizeof buf)) return false;
  int n = 0;
  for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
    int found = -1;
    for (int i = 0; i < 3; i++)
      if (strcmp(tok, impl_names[i] + 3) == 0) found = i;
    if (found < 0 || o->impls[found]) return false;
    o->impls[found] = true;
    n++;
  }
  return n > 0;
}

static const char usage[] =
    "usage: lltm_bench [--iters N] [--threads 1,2] [--modes params,all] [--device cpu|cuda]\n"
    "                  [--impls composed,fused,gemms] [--sizes BxFxS,...]\n"
    "Times the fused and composed LLTM (one JSON line per point). Defaults: 100 iterations,\n"
    "threads 1,2, modes params,all, every impl, on the CPU, sizes %s.\n";

/* Returns 0 to run, else the exit status: CLI_EXIT_USAGE on a bad command line, -1 (for 0)
 * after --help. */
static int parse_args(int argc, char **argv, options *o) {
  *o = (options){.iters = 100};
  parse_int_list("--threads", "1,2", o->threads, &o->n_threads);
  parse_modes("params,all", o);
  parse_impls("composed,fused,gemms", o);
  parse_sizes(default_sizes, o);
  enum { ITERS = 256, THREADS, MODES, IMPLS, SIZES, DEVICE };
  static const struct option options[] = {
      {"iters", required_argument, NULL, ITERS}, {"threads", required_argument, NULL, THREADS},
      {"modes", required_argument, NULL, MODES}, {"impls", required_argument, NULL, IMPLS},
      {"sizes", required_argument, NULL, SIZES}, {"device", required_argument, NULL, DEVICE},
      {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
    bool ok = true;
    const char *bad = NULL; /* a word-list option whose value is not in its list */
    switch (c) {
    case 'h':
      printf(usage, default_sizes);
      return -1;
    case ITERS:
      ok = cli_parse_int(me, "--iters", optarg, 1, 1000000, &o->iters);
      break;
    case THREADS:
      ok = parse_int_list("--threads", optarg, o->threads, &o->n_threads);
      break;
    case SIZES:
      ok = parse_sizes(optarg, o);
      break;
    case MODES:
      if (!parse_modes(optarg, o)) bad = "--modes: want params and/or all, each once";
      break;
    case IMPLS:
      if (!parse_impls(optarg, o)) bad = "--impls: want composed, fused and/or gemms, each once";
      break;
    case DEVICE:
      ok = strcmp(optarg, "cpu") == 0 || strcmp(optarg, "cuda") == 0;
      o->device = strcmp(optarg, "cuda") == 0 ? TG_DEVICE_CUDA(0) : TG_DEVICE_CPU;
      if (!ok) bad = "--device: want cpu or cuda";
      break;
    default:
      return cli_usage_error(me);
    }
    if (bad) fprintf(stderr, "%s: %s, got '%s'\n", me, bad, optarg);
    if (!ok || bad) return CLI_EXIT_USAGE;
  }
  if (optind < argc) {
    fprintf(stderr, "%s: unexpected argument '%s'\n", me, argv[optind]);
    return cli_usage_error(me);
  }
  return 0;
}

/* ---- timing ---- */

/* The stopwatch of every timed span (events on CUDA, the host clock on the CPU). */
static tg_bench_stopwatch watch;

static void span_start(void) {
  if (tg_bench_stopwatch_start(&watch) != TG_OK) {
    fprintf(stderr, "lltm_bench: cuda timer: %s\n", tg_last_error_message());
    exit(1);
  }
}

static double span_us(void) {
  double us;
  if (tg_bench_stopwatch_us(&watch, &us) != TG_OK) {
    fprintf(stderr, "lltm_bench: cuda timer: %s\n", tg_last_error_message());
    exit(1);
  }
  return us;
}

static void check(bool ok, const char *what) {
  if (ok) return;
  fprintf(stderr, "lltm_bench: %s failed: %s\n", what, tg_last_error_message());
  exit(1);
}

typedef struct result {
  double forward_us, backward_us;
  int64_t saved_bytes;
  int64_t rss_growth_bytes; /* -1: unknown */
} result;

/* The GEMMs of the fused op alone, on its operand layouts: forward gates = X @ W^T;
 * backward d_weights = d_gates_t @ X (d_gates stored transposed) and, with all gradients,
 * d_X = d_gates @ W. The operands are made once, outside the timing; each GEMM allocates
 * its output, as the fused op's do. */
typedef struct gemm_buffers {
  tg_tensor *X, *w_t, *d_gates_t, *d_gates;
} gemm_buffers;

static gemm_buffers gemm_buffers_for(tg_tensor *const in[5]) {
  const int64_t B = tg_size(in[0], 0), S = tg_size(in[3], 1);
  tg_options o = {.device = bench_device};
  gemm_buffers g;
  g.X = tg_cat(2, (const tg_tensor *const[]){in[3], in[0]}, 1);
  g.w_t = tg_t(in[1]);
  g.d_gates_t = tg_zeros(TG_SHAPE(3 * S, B), o);
  g.d_gates = tg_t(g.d_gates_t);
  check(g.X && g.w_t && g.d_gates_t && g.d_gates, "buffers");
  return g;
}

/* Grad mode off: W requires grad, and the tape is no part of the floor. The products are
 * owned by the caller's scope. */
static void run_gemms(const gemm_buffers *g, const tg_tensor *W, bool all_grads, bool backward) {
  tg_no_grad_begin();
  if (!backward) {
    check(tg_mm(g->X, g->w_t) != NULL, "gemm");
  } else {
    check(tg_mm(g->d_gates_t, g->X) != NULL, "gemm");
    if (all_grads) check(tg_mm(g->d_gates, W) != NULL, "gemm");
  }
  tg_no_grad_end();
}

static result time_impl(int impl, tg_tensor *const in[5], bool all_grads, int iters) {
  const int warmup = iters / 10 > 3 ? iters / 10 : 3;
  double *fwd = malloc(sizeof(double) * (size_t)iters),
         *bwd = malloc(sizeof(double) * (size_t)iters);
  check(fwd && bwd, "malloc");
  result r = {0};
  const gemm_buffers g = impl == IMPL_GEMMS ? gemm_buffers_for(in) : (gemm_buffers){0};
  tg_bench_rss rss;
  tg_bench_rss_start(&rss);
  for (int i = 0; i < warmup + iters; i++) {
    tg_scope sc = tg_scope_begin();
    tg_tensor *h = NULL, *c = NULL;
    double forward_us, backward_us;
    span_start();
    if (impl == IMPL_GEMMS) {
      run_gemms(&g, in[1], all_grads, false);
      forward_us = span_us();
      span_start();
      run_gemms(&g, in[1], all_grads, true);
      backward_us = span_us();
    } else {
      tg_status st = impl == IMPL_FUSED
                         ? tg_lltm(in[0], in[1], in[2], in[3], in[4], &h, &c)
                         : tg_lltm_composed(in[0], in[1], in[2], in[3], in[4], &h, &c);
      forward_us = span_us();
      check(st == TG_OK, "forward");
      if (i == 0)
        r.saved_bytes = tg_graph_saved_bytes(2, (const tg_tensor *const[]){h, c}, 5,
                                             (const tg_tensor *const *)in);
      span_start();
      check(tg_backward(tg_add(tg_sum(h), tg_sum(c)), NULL) == TG_OK, "backward");
      backward_us = span_us();
    }
    tg_scope_end(sc);
    if (i >= warmup) {
      fwd[i - warmup] = forward_us;
      bwd[i - warmup] = backward_us;
    }
  }
  r.rss_growth_bytes = tg_bench_rss_growth(&rss);
  r.forward_us = tg_bench_median(fwd, iters);
  r.backward_us = tg_bench_median(bwd, iters);
  free(fwd);
  free(bwd);
  return r;
}

/* Fresh inputs per run: weights/bias with the tutorial's init, the rest N(0, 1). */
static void make_inputs(const int64_t size[3], bool all_grads, tg_tensor *in[5]) {
  const int64_t B = size[0], I = size[1], S = size[2];
  tg_generator *gen = tg_generator_new(42);
  const double stdv = 1.0 / sqrt((double)S);
  tg_options p = {.device = bench_device, .requires_grad = true},
             x = {.device = bench_device, .requires_grad = all_grads};
  in[0] = tg_randn(TG_SHAPE(B, I), x, gen);
  in[1] = tg_uniform(TG_SHAPE(3 * S, S + I), -stdv, stdv, p, gen);
  in[2] = tg_uniform(TG_SHAPE(3 * S), -stdv, stdv, p, gen);
  in[3] = tg_randn(TG_SHAPE(B, S), x, gen);
  in[4] = tg_randn(TG_SHAPE(B, S), x, gen);
  tg_generator_free(gen);
  for (int i = 0; i < 5; i++) check(in[i] != NULL, "making inputs");
}

int main(int argc, char **argv) {
  options o;
  int parsed = parse_args(argc, argv, &o);
  if (parsed) return parsed < 0 ? 0 : parsed;
  bench_device = o.device;
  if (!tg_blis_kernels()) {
    fprintf(stderr, "lltm_bench: %s\n", tg_last_error_message());
    return 1;
  }
  if (o.device.type == TG_CUDA && !(watch.timer = tg_cuda_timer_new())) {
    fprintf(stderr, "lltm_bench: --device cuda: %s\n", tg_last_error_message());
    return 1;
  }
  for (int t = 0; t < o.n_threads; t++) {
    tg_set_num_threads(o.threads[t]);
    for (int s = 0; s < o.n_sizes; s++) {
      for (int m = 0; m < o.n_modes; m++) {
        for (int impl = 0; impl < 3; impl++) {
          if (!o.impls[impl]) continue;
          tg_scope sc = tg_scope_begin();
          tg_tensor *in[5];
          make_inputs(o.sizes[s], o.all_grads[m], in);
          result r = time_impl(impl, in, o.all_grads[m], o.iters);
          tg_scope_end(sc);
          printf("{\"impl\": \"%s\", \"batch\": %lld, \"features\": %lld, \"state\": %lld, "
                 "\"threads\": %d, \"mode\": \"%s\", \"device\": \"%s\", "
                 "\"blis_kernels\": \"%s\", \"forward_us\": %.3f, \"backward_us\": %.3f, ",
                 impl_names[impl], (long long)o.sizes[s][0], (long long)o.sizes[s][1],
                 (long long)o.sizes[s][2], o.threads[t], o.all_grads[m] ? "all" : "params",
                 tg_device_type_name(o.device.type), tg_blis_kernels(), r.forward_us,
                 r.backward_us);
          if (o.device.type == TG_CPU)
            printf("\"gemm_engines_chosen_by\": \"%s\", ", tg_gemm_engine_source());
          if (tg_blis_large_kernels())
            printf("\"blis_large_kernels\": \"%s\", ", tg_blis_large_kernels());
          if (impl != IMPL_GEMMS) printf("\"saved_bytes\": %lld, ", (long long)r.saved_bytes);
          if (impl != IMPL_GEMMS && o.device.type == TG_CPU && r.rss_growth_bytes >= 0)
            printf("\"rss_growth_bytes\": %lld, ", (long long)r.rss_growth_bytes);
          printf("\"iters\": %d}\n", o.iters);
          fflush(stdout);
        }
      }
    }
  }
  tg_cuda_timer_free(watch.timer);
  return 0;
}
