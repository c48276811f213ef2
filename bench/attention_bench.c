/* The fused scaled dot-product attention against its composition (tg/attention.h): forward,
 * and forward + backward (the gradients of q, k and v), F32 on the CPU, at GPT shapes: issue
 * 25's small config (batch 8, 4 heads, T 256, head size 64) and GPT-2 small's (batch 4, 12
 * heads, T 64, head size 64), causal. Fused and composed run in alternating rounds (one timed
 * run of each per round), so a load that comes and goes on a shared machine falls on both;
 * medians of the rounds, their ratio (composed / fused: above 1, the fused op is faster), and
 * the bytes each graph keeps beyond q, k and v. A third column, "per head", runs the composed
 * form once per (batch, head) on 2-D leaves of its own: what the composition costs with a
 * batched matmul that costs no more than its heads' products (tg_attention_composed on [B, H,
 * T, D] falls back to one tg_mm per head through tg_select while tg_matmul takes no batches,
 * and select's backward writes a full-size zero tensor per head: quadratic in B * H).
 *
 *   attention_bench [--iters N] [--threads 1,2] [--shapes 8x4x256x64,4x12x64x64]
 *                   [--causal 0|1] [--dropout P]
 *
 * A shape is batch x heads x T x D. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli_parse.h"
#include "tg/tg.h"
#include "timing.h"

static const char *const me = "attention_bench";
enum { MAX_LIST = 16, MAX_ITERS = 1000 };

typedef struct options {
  int iters, n_threads, n_shapes, causal;
  double dropout;
  int threads[MAX_LIST];
  int64_t shapes[MAX_LIST][4]; /* batch, heads, T, D */
} options;

typedef tg_tensor *(*attention_fn)(const tg_tensor *, const tg_tensor *, const tg_tensor *,
                                   tg_attention_options);

/* One run: forward, and backward when asked; *bytes (if given) gets what the graph keeps. */
static tg_status run_once(attention_fn fn, tg_tensor *const *qkv, const tg_attention_options *o,
                          bool backward, int64_t *bytes) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *y = fn(qkv[0], qkv[1], qkv[2], *o);
  tg_status st = y ? TG_OK : tg_last_error();
  if (st == TG_OK && bytes)
    *bytes =
        tg_graph_saved_bytes(1, (const tg_tensor *const[]){y}, 3, (const tg_tensor *const *)qkv);
  if (st == TG_OK && backward) st = tg_backward(y, tg_ones_like(y));
  for (int i = 0; i < 3 && backward; i++) tg_zero_grad(qkv[i]);
  tg_scope_end(sc);
  return st;
}

/* The composed form once per head over heads[3 * h + (q, k, v)], 2-D leaves. */
static tg_status run_per_head(int64_t n_heads, tg_tensor *const *heads,
                              const tg_attention_options *o, bool backward) {
  tg_status st = TG_OK;
  for (int64_t h = 0; h < n_heads && st == TG_OK; h++)
    st = run_once(tg_attention_composed, heads + 3 * h, o, backward, NULL);
  return st;
}

/* Medians (us) of fused, composed and composed per head over alternating rounds, after one
 * warm-up each. */
static bool time_three(const options *o, tg_tensor *const *qkv, int64_t n_heads,
                       tg_tensor *const *heads, const tg_attention_options *a, bool backward,
                       double *us) {
  double t[3][MAX_ITERS];
  tg_bench_stopwatch sw = {0};
  if (run_once(tg_scaled_dot_product_attention, qkv, a, backward, NULL) != TG_OK ||
      run_once(tg_attention_composed, qkv, a, backward, NULL) != TG_OK ||
      run_per_head(n_heads, heads, a, backward) != TG_OK)
    return false;
  for (int i = 0; i < o->iters; i++) {
    for (int k = 0; k < 3; k++) {
      tg_status st = tg_bench_stopwatch_start(&sw);
      if (st == TG_OK)
        st = k == 2 ? run_per_head(n_heads, heads, a, backward)
                    : run_once(k ? tg_attention_composed : tg_scaled_dot_product_attention, qkv, a,
                               backward, NULL);
      if (st != TG_OK || tg_bench_stopwatch_us(&sw, &t[k][i]) != TG_OK) return false;
    }
  }
  for (int k = 0; k < 3; k++) us[k] = tg_bench_median(t[k], o->iters);
  return true;
}

static bool bench_shape(const options *o, const int64_t *s, int threads) {
  tg_scope sc = tg_scope_begin();
  tg_generator *gen = tg_generator_new(1);
  const tg_options f32 = {.dtype = TG_F32, .requires_grad = true};
  const int64_t n_heads = s[0] * s[1];
  tg_tensor *qkv[3], **heads = calloc((size_t)(3 * n_heads), sizeof *heads);
  bool ok = gen && heads;
  for (int i = 0; i < 3 && ok; i++)
    ok = (qkv[i] = tg_randn(TG_SHAPE(s[0], s[1], s[2], s[3]), f32, gen)) != NULL;
  for (int64_t i = 0; i < 3 * n_heads && ok; i++)
    ok = (heads[i] = tg_randn(TG_SHAPE(s[2], s[3]), f32, gen)) != NULL;
  const tg_attention_options a = {.is_causal = o->causal, .dropout_p = o->dropout, .gen = gen};
  double f[3] = {0}, b[3] = {0};
  int64_t bytes_f = 0, bytes_c = 0;
  ok = ok && run_once(tg_scaled_dot_product_attention, qkv, &a, false, &bytes_f) == TG_OK &&
       run_once(tg_attention_composed, qkv, &a, false, &bytes_c) == TG_OK &&
       time_three(o, qkv, n_heads, heads, &a, false, f) &&
       time_three(o, qkv, n_heads, heads, &a, true, b);
  if (ok)
    printf("%-12s %3d %7.2f %8.2f %8.2f %6.2fx %7.2f %8.2f %8.2f %6.2fx %7.2f %8.2f\n", "", threads,
           f[0] / 1e3, f[1] / 1e3, f[2] / 1e3, f[2] / f[0], b[0] / 1e3, b[1] / 1e3, b[2] / 1e3,
           b[2] / b[0], (double)bytes_f / 1048576.0, (double)bytes_c / 1048576.0);
  else
    fprintf(stderr, "%s: %s\n", me, tg_last_error_message());
  free(heads);
  tg_generator_free(gen);
  tg_scope_end(sc);
  return ok;
}

static bool parse_shapes(const char *opt, const char *text, options *o) {
  const char *p = text;
  o->n_shapes = 0;
  do {
    char item[64];
    if (o->n_shapes == MAX_LIST || !cli_next_item(me, opt, text, &p, item, sizeof item) ||
        !cli_parse_dims(me, opt, item, 4, 1, 1 << 16, o->shapes[o->n_shapes++]))
      return false;
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
  options o = {.iters = 9,
               .causal = 1,
               .n_threads = 2,
               .threads = {1, 2},
               .n_shapes = 2,
               .shapes = {{8, 4, 256, 64}, {4, 12, 64, 64}}};
  static const struct option longs[] = {{"iters", required_argument, NULL, 'i'},
                                        {"threads", required_argument, NULL, 't'},
                                        {"shapes", required_argument, NULL, 's'},
                                        {"causal", required_argument, NULL, 'c'},
                                        {"dropout", required_argument, NULL, 'd'},
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
    else if (c == 'c')
      ok = cli_parse_int(me, "--causal", optarg, 0, 1, &o.causal);
    else if (c == 'd') {
      char *end;
      o.dropout = strtod(optarg, &end);
      ok = *optarg && !*end && o.dropout >= 0 && o.dropout < 1;
      if (!ok) fprintf(stderr, "%s: --dropout: '%s' is not a number in [0, 1)\n", me, optarg);
    } else if (c == 'h') {
      printf("usage: %s [--iters N] [--threads 1,2] [--shapes 8x4x256x64,...] [--causal 0|1] "
             "[--dropout P]\n",
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
  printf("scaled dot-product attention, F32, CPU, %s, dropout %g: ms (median of %d alternating "
         "rounds); ratio = composed per head / fused; MiB kept beyond q, k, v\n",
         o.causal ? "causal" : "not causal", o.dropout, o.iters);
  printf("%-12s %3s %7s %8s %8s %7s %7s %8s %8s %7s %7s %8s\n", "BxHxTxD", "thr", "fwd", "composed",
         "per head", "ratio", "f+b", "composed", "per head", "ratio", "MiB", "composed");
  for (int s = 0; s < o.n_shapes; s++) {
    printf("%lldx%lldx%lldx%lld\n", (long long)o.shapes[s][0], (long long)o.shapes[s][1],
           (long long)o.shapes[s][2], (long long)o.shapes[s][3]);
    for (int t = 0; t < o.n_threads; t++) {
      tg_set_num_threads(o.threads[t]);
      if (!bench_shape(&o, o.shapes[s], o.threads[t])) return 1;
    }
  }
  return 0;
}
