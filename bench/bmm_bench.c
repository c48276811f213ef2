/* Batched matmul at GPT's attention shapes (issue 25): the scores q @ k^T, [B, H, T, D] @
 * [B, H, D, T], and the output p @ v, [B, H, T, T] @ [B, H, T, D], F32, forward and
 * forward + backward, median ms over alternating rounds at each thread count.
 * bench/bmm_torch.py times the same calls in PyTorch.
 *
 *   bmm_bench [--threads 1,2] [--iters N] [--sizes BxHxTxD]
 *
 * TG_CPU_PARALLEL_MIN=1000000000000 keeps tg's thread pool out (so bmm's batch split too):
 * the GEMMs then thread themselves; that is how the split was measured against no split. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "timing.h"

static int parse_list(const char *s, int *out, int max) {
  int n = 0;
  while (*s && n < max) {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || v <= 0) return -1;
    out[n++] = (int)v;
    s = *end == ',' ? end + 1 : end;
    if (*end && *end != ',') return -1;
  }
  return n;
}

/* One call of a @ b (b^T when transpose_b, a view made inside the timed call as in a model). */
static double time_once(const tg_tensor *a, const tg_tensor *b, bool transpose_b, bool backward) {
  tg_scope s = tg_scope_begin();
  const double t0 = tg_bench_now_us();
  tg_tensor *y = tg_matmul(a, transpose_b ? tg_transpose(b, -2, -1) : b);
  if (!y || (backward && tg_backward(tg_sum(y), NULL) != TG_OK)) {
    fprintf(stderr, "bmm_bench: %s\n", tg_last_error_message());
    exit(1);
  }
  const double dt = tg_bench_now_us() - t0;
  tg_scope_end(s);
  return dt / 1000.0;
}

int main(int argc, char **argv) {
  int threads[8] = {1, 2}, n_threads = 2, iters = 20;
  long long B = 8, H = 4, T = 256, D = 64;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
      if ((n_threads = parse_list(argv[++i], threads, 8)) <= 0) goto usage;
    } else if (!strcmp(argv[i], "--iters") && i + 1 < argc) {
      if ((iters = atoi(argv[++i])) <= 0) goto usage;
    } else if (!strcmp(argv[i], "--sizes") && i + 1 < argc) {
      if (sscanf(argv[++i], "%lldx%lldx%lldx%lld", &B, &H, &T, &D) != 4 || B <= 0 || H <= 0 ||
          T <= 0 || D <= 0)
        goto usage;
    } else {
      goto usage;
    }
  }
  tg_options o = {.dtype = TG_F32, .requires_grad = true};
  tg_tensor *q = tg_uniform(TG_SHAPE(B, H, T, D), -1, 1, o, NULL);
  tg_tensor *k = tg_uniform(TG_SHAPE(B, H, T, D), -1, 1, o, NULL);
  tg_tensor *p = tg_uniform(TG_SHAPE(B, H, T, T), 0, 1, o, NULL);
  if (!q || !k || !p) return fprintf(stderr, "bmm_bench: %s\n", tg_last_error_message()), 1;
  struct {
    const char *name;
    const tg_tensor *a, *b;
    bool transpose_b;
  } calls[] = {{"q @ k^T", q, k, true}, {"p @ v", p, k, false}};
  double *samples = malloc(sizeof(double) * (size_t)iters * 16);
  printf("sizes B=%lld H=%lld T=%lld D=%lld, F32, median ms of %d rounds\n", B, H, T, D, iters);
  printf("%-8s %-4s %10s %14s\n", "call", "thr", "forward", "fwd+bwd");
  for (int c = 0; c < 2; c++) {
    for (int t = 0; t < n_threads; t++) { /* warm-up */
      tg_set_num_threads(threads[t]);
      time_once(calls[c].a, calls[c].b, calls[c].transpose_b, true);
    }
    for (int r = 0; r < iters; r++) /* alternating thread counts */
      for (int t = 0; t < n_threads; t++) {
        tg_set_num_threads(threads[t]);
        samples[(t * 2 + 0) * iters + r] =
            time_once(calls[c].a, calls[c].b, calls[c].transpose_b, false);
        samples[(t * 2 + 1) * iters + r] =
            time_once(calls[c].a, calls[c].b, calls[c].transpose_b, true);
      }
    for (int t = 0; t < n_threads; t++)
      printf("%-8s %-4d %10.3f %14.3f\n", calls[c].name, threads[t],
             tg_bench_median(samples + (t * 2) * iters, iters),
             tg_bench_median(samples + (t * 2 + 1) * iters, iters));
  }
  free(samples);
  return 0;
usage:
  fprintf(stderr, "usage: bmm_bench [--threads 1,2] [--iters N] [--sizes BxHxTxD]\n");
  return 2;
}
