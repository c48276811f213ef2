/* What a Conv2d + BatchNorm2d training step keeps and costs in tg, fused
 * (tg_conv2d_batch_norm), composed of generic ops (tg_conv2d_batch_norm_composed), or as a
 * user composes the two ops (layers: tg_conv2d then tg_batch_norm, PyTorch's formula at both
 * sizes), one per process so that the peak resident memory is the step's own.
 * bench/conv_bn_memory.py runs it beside PyTorch's composed layers and the reference's
 * autograd.Function.
 *
 *   conv_bn_memory fused|composed|layers reference|realistic|NxCINxCOUTxHW [--iters N]
 *                  [--threads T]
 *
 * reference: the reference's sizes, x [2, 3, 4, 4], w [5, 3, 3, 3], no padding, its formula;
 * realistic: x [64, 32, 32, 32], w [64, 32, 3, 3], padding 1, PyTorch's batch_norm (affine);
 * NxCINxCOUTxHW: the realistic layer at other sizes. F32. Prints one line of key=value:
 * saved_bytes (tg_graph_saved_bytes of the step's graph, its inputs included, as PyTorch's
 * saved-tensor hooks count them), saved_beyond_inputs (x, w, weight and bias left out),
 * peak_rss_growth (VmHWM after one step, reset before it, less VmRSS before it, after a
 * warm-up step on a [2, c_in, 4, 4] batch) and
 * ms_per_step (forward, backward of sum(y * g), averaged over --iters steps). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tg/tg.h"
#include "rss.h"
#include "timing.h"

typedef struct layer {
  tg_tensor *x, *w, *weight, *bias, *g;
  tg_conv2d_opts conv;
  tg_conv_bn_options opts;
} layer;

typedef enum impl { FUSED, COMPOSED, LAYERS } impl;

static tg_tensor *step(const layer *l, impl which) {
  if (which == FUSED)
    return tg_conv2d_batch_norm(l->x, l->w, l->weight, l->bias, NULL, NULL, &l->conv, l->opts);
  if (which == COMPOSED)
    return tg_conv2d_batch_norm_composed(l->x, l->w, l->weight, l->bias, NULL, NULL, &l->conv,
                                         l->opts);
  return tg_batch_norm(tg_conv2d(l->x, l->w, NULL, &l->conv), NULL, NULL, l->weight, l->bias,
                       (tg_batch_norm_options){.training = true});
}

static int fail(const char *what) {
  fprintf(stderr, "conv_bn_memory: %s: %s\n", what, tg_last_error_message());
  return 1;
}

static int usage(void) {
  fprintf(stderr, "usage: conv_bn_memory fused|composed|layers reference|realistic|NxCINxCOUTxHW "
                  "[--iters N] [--threads T]\n");
  return 2;
}

int main(int argc, char **argv) {
  if (argc < 3) return usage();
  impl which;
  if (strcmp(argv[1], "fused") == 0)
    which = FUSED;
  else if (strcmp(argv[1], "composed") == 0)
    which = COMPOSED;
  else if (strcmp(argv[1], "layers") == 0)
    which = LAYERS;
  else
    return usage();
  int iters = 5, threads = 0;
  for (int i = 3; i < argc; i++) {
    if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc && atoi(argv[i + 1]) > 0)
      iters = atoi(argv[++i]);
    else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc && atoi(argv[i + 1]) > 0)
      threads = atoi(argv[++i]);
    else
      return usage();
  }
  long long n = 64, c_in = 32, c_out = 64, hw = 32;
  bool reference = strcmp(argv[2], "reference") == 0;
  if (reference) {
    n = 2, c_in = 3, c_out = 5, hw = 4;
  } else if (strcmp(argv[2], "realistic") != 0 &&
             (sscanf(argv[2], "%lldx%lldx%lldx%lld", &n, &c_in, &c_out, &hw) != 4 || n < 1 ||
              c_in < 1 || c_out < 1 || hw < 1)) {
    return usage();
  }
  if (threads) tg_set_num_threads(threads);
  tg_generator *gen = tg_generator_new(24);
  const tg_options f32 = {.dtype = TG_F32};
  layer l = {
      .conv = {.padding = {reference ? 0 : 1, reference ? 0 : 1}},
      .opts = {.training = true, .formula = reference ? TG_CONV_BN_REFERENCE : TG_CONV_BN_PYTORCH}};
  l.x = tg_randn(TG_SHAPE(n, c_in, hw, hw), f32, gen);
  l.w = tg_mul_scalar(tg_randn(TG_SHAPE(c_out, c_in, 3, 3), f32, gen), 0.1);
  l.weight = reference ? NULL : tg_ones(TG_SHAPE(c_out), f32);
  l.bias = reference ? NULL : tg_zeros(TG_SHAPE(c_out), f32);
  const tg_tensor *leaves[4] = {l.x, l.w, l.weight, l.bias};
  for (int i = 0; i < (reference ? 2 : 4); i++)
    if (!leaves[i] || tg_set_requires_grad((tg_tensor *)leaves[i], true) != TG_OK)
      return fail("inputs");
  const int64_t out_hw = reference ? hw - 2 : hw;
  l.g = tg_randn(TG_SHAPE(n, c_out, out_hw, out_hw), f32, gen);
  tg_generator_free(gen);
  if (!l.g) return fail("inputs");

  /* warm-up on a small batch: one-time initialization (thread pool, GEMM engine choice) is
   * not the step's memory, and the allocator has not yet kept the step's own blocks */
  tg_scope warm = tg_scope_begin();
  layer small = l;
  small.x = tg_zeros(TG_SHAPE(2, c_in, 4, 4), f32);
  tg_tensor *y0 = small.x ? step(&small, which) : NULL;
  if (!y0 || tg_backward(tg_sum(y0), NULL) != TG_OK) return fail("warm-up step");
  tg_scope_end(warm);
  /* the graph's bytes, and the peak memory of one step */
  tg_bench_rss rss;
  tg_bench_rss_start(&rss);
  tg_scope s = tg_scope_begin();
  tg_tensor *y = step(&l, which);
  if (!y) return fail("forward");
  const int64_t saved = tg_graph_saved_bytes(1, (const tg_tensor *const[]){y}, 0, NULL);
  const int64_t beyond =
      tg_graph_saved_bytes(1, (const tg_tensor *const[]){y}, reference ? 2 : 4, leaves);
  if (tg_backward(y, l.g) != TG_OK) return fail("backward");
  tg_scope_end(s);
  /* -1 without the high-water mark's reset: ru_maxrss would include the process's past */
  const int64_t growth = rss.reset ? tg_bench_rss_growth(&rss) : -1;

  const double t0 = (tg_bench_now_us() * 1e-3);
  for (int i = 0; i < iters; i++) {
    tg_scope si = tg_scope_begin();
    tg_tensor *yi = step(&l, which);
    if (!yi || tg_backward(yi, l.g) != TG_OK) return fail("step");
    tg_scope_end(si);
  }
  const double ms = ((tg_bench_now_us() * 1e-3) - t0) / iters;
  printf("impl=tg_%s size=%lldx%lldx%lldx%lld saved_bytes=%lld saved_beyond_inputs=%lld "
         "peak_rss_growth=%lld ms_per_step=%.3f threads=%d\n",
         argv[1], n, c_in, c_out, hw, (long long)saved, (long long)beyond, (long long)growth, ms,
         tg_get_num_threads());
  return 0;
}
