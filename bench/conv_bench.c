/* conv2d's speed: forward, and forward + backward (dx and dw), at ResNet-18's 3x3 layers
 * (batch 8: 64 -> 64 channels at 56x56, 128 -> 128 at 28x28, 256 -> 256 at 14x14; stride 1,
 * padding 1), F32 on the CPU or a CUDA device, in GFLOP/s beside the GEMM engine's rate on the
 * forward's product alone ([C_out, C_in * 9] @ [C_in * 9, H * W], once per batch element), so the
 * share im2col, col2im and the copies cost shows.
 *
 *   conv_bench [--iters N] [--threads 1,2] [--shapes 8x64x56,8x128x28,8x256x14] [--json]
 *              [--device cpu|cuda]
 *
 * A shape is batch x channels x size (square images), or batch x in x out channels x size.
 * Median of N timed runs after one warm-up. FLOPs: 2 * N * C_out * C_in * 9 * H * W forward;
 * three times that with backward (dx, dw; the first layer's dx is not needed by a model, but
 * PyTorch's peer, bench/pytorch_conv.py, computes it too). --json: one line per point, for
 * bench/conv_compare.py. On CUDA the operands are drawn on the CPU (the same values) and
 * copied over, and every span is timed with events on tg's stream (timing.h); --threads then
 * sets only the host's threads. */
#include <getopt.h>
#include <stdio.h>

#include "cli_parse.h"
#include "tg/tg.h"
#include "timing.h"

static const char *const me = "conv_bench";
enum { MAX_LIST = 16, MAX_ITERS = 1000 };

typedef struct options {
  int iters, n_threads, n_shapes;
  bool json;
  tg_device device;
  int threads[MAX_LIST];
  int64_t shapes[MAX_LIST][4]; /* batch, in, out, size */
} options;

/* What runs the convolutions: the CPU's engine (tg_conv_engine) or the device's name. */
static const char *engine_name(const options *o) {
  return o->device.type == TG_CPU ? tg_conv_engine() : tg_device_type_name(o->device.type);
}

/* The median of o->iters runs of one of three steps, in microseconds. */
typedef enum step { FORWARD, FORWARD_BACKWARD, GEMM } step;

static tg_status run_step(step s, tg_tensor *x, tg_tensor *w, tg_tensor *b, tg_tensor *wm,
                          tg_tensor *cols) {
  tg_scope sc = tg_scope_begin();
  tg_status st = TG_OK;
  const tg_conv2d_opts opts = {.padding = {1, 1}};
  if (s == GEMM) {
    for (int64_t n = 0; n < tg_size(x, 0) && st == TG_OK; n++)
      if (!tg_mm(wm, cols)) st = tg_last_error();
  } else {
    tg_tensor *y = tg_conv2d(x, w, b, &opts);
    if (!y)
      st = tg_last_error();
    else if (s == FORWARD_BACKWARD)
      st = tg_backward(tg_sum(y), NULL);
  }
  tg_scope_end(sc);
  return st;
}

static bool time_step(const options *o, step s, tg_tensor *x, tg_tensor *w, tg_tensor *b,
                      tg_tensor *wm, tg_tensor *cols, double *median_us) {
  double us[MAX_ITERS];
  tg_bench_stopwatch sw = {0};
  if (o->device.type == TG_CUDA && !(sw.timer = tg_cuda_timer_new())) return false;
  bool ok = run_step(s, x, w, b, wm, cols) == TG_OK; /* warm-up */
  for (int i = 0; ok && i < o->iters; i++)
    ok = tg_bench_stopwatch_start(&sw) == TG_OK && run_step(s, x, w, b, wm, cols) == TG_OK &&
         tg_bench_stopwatch_us(&sw, &us[i]) == TG_OK;
  tg_cuda_timer_free(sw.timer);
  if (!ok) return false;
  *median_us = tg_bench_median(us, o->iters);
  return true;
}

static bool bench_shape(const options *o, const int64_t *shape, int threads) {
  const int64_t n = shape[0], c = shape[1], co = shape[2], hw = shape[3];
  tg_scope sc = tg_scope_begin();
  tg_generator *gen = tg_generator_new(1);
  const tg_options f32 = {.dtype = TG_F32};
  const tg_device d = o->device;
  tg_tensor *x = tg_to_device(tg_randn(TG_SHAPE(n, c, hw, hw), f32, gen), d);
  tg_tensor *w = tg_to_device(tg_randn(TG_SHAPE(co, c, 3, 3), f32, gen), d);
  tg_tensor *b = tg_to_device(tg_randn(TG_SHAPE(co), f32, gen), d);
  tg_tensor *wm = tg_to_device(tg_randn(TG_SHAPE(co, c * 9), f32, gen), d);
  tg_tensor *cols = tg_to_device(tg_randn(TG_SHAPE(c * 9, hw * hw), f32, gen), d);
  bool ok = cols && tg_set_requires_grad(x, true) == TG_OK &&
            tg_set_requires_grad(w, true) == TG_OK && tg_set_requires_grad(b, true) == TG_OK;
  double fwd = 0, fwd_bwd = 0, gemm = 0;
  ok = ok && time_step(o, FORWARD, x, w, b, wm, cols, &fwd) &&
       time_step(o, FORWARD_BACKWARD, x, w, b, wm, cols, &fwd_bwd) &&
       time_step(o, GEMM, x, w, b, wm, cols, &gemm);
  if (ok) {
    const double flops = 2.0 * (double)n * (double)co * (double)c * 9.0 * (double)(hw * hw);
    if (o->json)
      printf("{\"impl\": \"tg\", \"engine\": \"%s\", \"batch\": %lld, \"in\": %lld, "
             "\"out\": %lld, \"size\": %lld, \"threads\": %d, \"forward_us\": %.3f, "
             "\"forward_backward_us\": %.3f, \"gemm_us\": %.3f, \"iters\": %d}\n",
             engine_name(o), (long long)n, (long long)c, (long long)co, (long long)hw, threads, fwd,
             fwd_bwd, gemm, o->iters);
    else
      printf("%-18s %7d %10.2f %9.1f %12.2f %9.1f %11.1f\n", "", threads, fwd / 1e3,
             flops / fwd / 1e3, fwd_bwd / 1e3, 3 * flops / fwd_bwd / 1e3, flops / gemm / 1e3);
  } else {
    fprintf(stderr, "%s: %s\n", me, tg_last_error_message());
  }
  tg_generator_free(gen);
  tg_scope_end(sc);
  return ok;
}

/* NxCxS or NxCinxCoutxS items. */
static bool parse_shapes(const char *opt, const char *text, options *o) {
  const char *p = text;
  o->n_shapes = 0;
  do {
    char item[64];
    if (o->n_shapes == MAX_LIST || !cli_next_item(me, opt, text, &p, item, sizeof item))
      return false;
    int dims = 1;
    for (const char *q = item; *q; q++) dims += *q == 'x';
    int64_t *shape = o->shapes[o->n_shapes++];
    if (!cli_parse_dims(me, opt, item, dims == 4 ? 4 : 3, 1, 1 << 16, shape)) return false;
    if (dims != 4) shape[3] = shape[2], shape[2] = shape[1];
  } while (*p);
  return true;
}

static bool parse_list(const char *opt, const char *text, options *o) {
  const char *p = text;
  o->n_threads = 0;
  do {
    char item[32];
    if (o->n_threads == MAX_LIST || !cli_next_item(me, opt, text, &p, item, sizeof item) ||
        !cli_parse_int(me, opt, item, 1, 4096, &o->threads[o->n_threads++]))
      return false;
  } while (*p);
  return true;
}

int main(int argc, char **argv) {
  options o = {.iters = 5,
               .n_threads = 2,
               .threads = {1, 2},
               .n_shapes = 3,
               .shapes = {{8, 64, 64, 56}, {8, 128, 128, 28}, {8, 256, 256, 14}}};
  static const struct option longs[] = {{"iters", required_argument, NULL, 'i'},
                                        {"threads", required_argument, NULL, 't'},
                                        {"shapes", required_argument, NULL, 's'},
                                        {"json", no_argument, NULL, 'j'},
                                        {"device", required_argument, NULL, 'd'},
                                        {"help", no_argument, NULL, 'h'},
                                        {NULL, 0, NULL, 0}};
  for (int c; (c = getopt_long(argc, argv, "", longs, NULL)) != -1;) {
    bool ok = true;
    if (c == 'i')
      ok = cli_parse_int(me, "--iters", optarg, 1, MAX_ITERS, &o.iters);
    else if (c == 't')
      ok = parse_list("--threads", optarg, &o);
    else if (c == 's')
      ok = parse_shapes("--shapes", optarg, &o);
    else if (c == 'j')
      o.json = true;
    else if (c == 'd') {
      ok = tg_device_parse(optarg, &o.device) == TG_OK;
      if (!ok) fprintf(stderr, "%s: --device %s: %s\n", me, optarg, tg_last_error_message());
    } else if (c == 'h') {
      printf("usage: %s [--iters N] [--threads 1,2] [--shapes 8x64x56,8x1x16x28,...] [--json]\n"
             "       [--device cpu|cuda]\n",
             me);
      return 0;
    } else
      return cli_usage_error(me);
    if (!ok) return CLI_EXIT_USAGE;
  }
  if (optind < argc) {
    fprintf(stderr, "%s: unexpected argument '%s'\n", me, argv[optind]);
    return cli_usage_error(me);
  }
  if (!o.json) {
    printf("conv2d 3x3, padding 1, F32, on %s; times in ms (median of %d), rates in GFLOP/s\n",
           engine_name(&o), o.iters);
    printf("%-18s %7s %10s %9s %12s %9s %11s\n", "shape (NxCinxCoutxHW)", "threads", "fwd ms",
           "fwd GF/s", "fwd+bwd ms", "f+b GF/s", "GEMM GF/s");
  }
  for (int s = 0; s < o.n_shapes; s++) {
    if (!o.json)
      printf("%lldx%lldx%lldx%lld\n", (long long)o.shapes[s][0], (long long)o.shapes[s][1],
             (long long)o.shapes[s][2], (long long)o.shapes[s][3]);
    for (int t = 0; t < o.n_threads; t++) {
      tg_set_num_threads(o.threads[t]);
      if (!bench_shape(&o, o.shapes[s], o.threads[t])) return 1;
    }
  }
  return 0;
}
