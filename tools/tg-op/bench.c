/* tg-op bench: the tutorial's benchmark script for any ops that take the same inputs. The first
 * op's bench sample (tg_sample_request.bench) gives the inputs; every named op runs on them:
 * forward alone, and forward + backward (ones as upstream gradients for every output that
 * requires grad, tg_autograd_grad with respect to every input that does). Medians over
 * --iters runs after --warmup, on a monotonic clock, the device synchronised around each
 * timed run; ratios against the first op. An in-place op runs on a fresh clone of input 0
 * each time. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tg_op.h"

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return 1e6 * (double)ts.tv_sec + 1e-3 * (double)ts.tv_nsec;
}

static int compare_doubles(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, compare_doubles);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* One op's run: what it computes on the sample, and the backward's operands. */
typedef struct bench_run {
  const tgop_target *target;
  const tg_sample *sample;
  tg_device device;
  int n_outputs;
  /* backward: outputs that require grad get ones; inputs that require grad get gradients */
  int n_grad_inputs;
  const tg_tensor *grad_inputs[TG_SAMPLE_MAX_INPUTS];
  bool has_backward;
  bool inplace; /* writes input 0: each run gets a fresh clone of it */
} bench_run;

static tg_status sync_device(tg_device device) {
  return device.type == TG_CUDA ? tg_cuda_synchronize() : TG_OK;
}

/* One timed call (inside a scope the caller ends after timing): forward, and backward when
 * asked. */
static tg_status run_once(const bench_run *r, bool backward, double *us) {
  tg_tensor *out[TGOP_MAX_OUTPUTS];
  tg_sample call = *r->sample;
  tg_status st = TG_OK;
  if (r->inplace && !(call.inputs[0] = tg_clone(r->sample->inputs[0]))) st = tg_last_error();
  if (st == TG_OK) st = sync_device(r->device);
  double t0 = now_us();
  if (st == TG_OK) st = tgop_run(r->target, &call, r->n_outputs, out);
  if (st == TG_OK && backward) {
    const tg_tensor *roots[TGOP_MAX_OUTPUTS], *ones[TGOP_MAX_OUTPUTS];
    int n_roots = 0;
    for (int j = 0; j < r->n_outputs && st == TG_OK; j++) {
      if (!tg_requires_grad(out[j])) continue;
      roots[n_roots] = out[j];
      ones[n_roots] = tg_ones_like(out[j]);
      if (!ones[n_roots++]) st = tg_last_error();
    }
    tg_tensor *grads[TG_SAMPLE_MAX_INPUTS];
    if (st == TG_OK && n_roots == 0)
      st = tg_set_error(TG_ERR_STATE, "%s: no output requires grad", r->target->name);
    if (st == TG_OK)
      st = tg_autograd_grad(n_roots, roots, ones, r->n_grad_inputs, r->grad_inputs, grads,
                            (tg_backward_options){0}, true);
  }
  if (st == TG_OK) st = sync_device(r->device);
  *us = now_us() - t0;
  return st;
}

/* Median microseconds of iters runs after warmup ones. */
static tg_status time_runs(const bench_run *r, bool backward, const tgop_options *opts,
                           double *median_us) {
  double *samples = malloc(sizeof(double) * (size_t)opts->iters);
  if (!samples) return tg_set_error(TG_ERR_MEMORY, "tg-op bench: out of memory");
  tg_status st = TG_OK;
  for (int i = 0; i < opts->warmup + opts->iters && st == TG_OK; i++) {
    tg_scope s = tg_scope_begin();
    double us = 0;
    st = run_once(r, backward, &us);
    tg_scope_end(s); /* releasing the results is not timed */
    if (i >= opts->warmup) samples[i - opts->warmup] = us;
  }
  if (st == TG_OK) *median_us = median(samples, opts->iters);
  free(samples);
  return st;
}

static void print_inputs(const tg_sample *s) {
  for (int i = 0; i < s->n_inputs; i++) {
    char buf[128];
    const tg_tensor *t = s->inputs[i];
    printf("%s%s%s", i ? " " : "", tg_format_sizes(buf, sizeof buf, tg_ndim(t), tg_sizes(t)),
           tg_requires_grad(t) ? "*" : "");
  }
}

/* Whether one untimed forward gives an output that requires grad (an op may be
 * differentiable and still not, for these inputs). False also when the forward fails: the
 * timed runs then report its error. */
static bool any_output_requires_grad(const bench_run *r) {
  tg_tensor *out[TGOP_MAX_OUTPUTS];
  tg_sample call = *r->sample;
  bool any = false;
  tg_scope s = tg_scope_begin();
  if (!r->inplace || (call.inputs[0] = tg_clone(r->sample->inputs[0])))
    if (tgop_run(r->target, &call, r->n_outputs, out) == TG_OK)
      for (int j = 0; j < r->n_outputs; j++) any |= tg_requires_grad(out[j]);
  tg_scope_end(s);
  tg_clear_error();
  return any;
}

static bench_run run_of(const tgop_target *t, const tg_sample *s, tg_device device) {
  bench_run r = {
      .target = t, .sample = s, .device = device, .n_outputs = tgop_target_outputs(t, s)};
  for (int i = 0; i < s->n_inputs; i++)
    if (tg_requires_grad(s->inputs[i])) r.grad_inputs[r.n_grad_inputs++] = s->inputs[i];
  r.has_backward = r.n_grad_inputs > 0 && (!t->op || t->op->backward);
  /* An in-place op may not write a leaf that requires grad: it writes a clone (made before
   * the clock starts), through which backward reaches the leaf. */
  r.inplace = t->op && (t->op->flags & TG_OP_INPLACE);
  r.has_backward = r.has_backward && any_output_requires_grad(&r);
  return r;
}

typedef struct bench_result {
  double forward_us, full_us; /* full_us < 0: no backward */
  size_t meta_peak_bytes;     /* on meta: the most a run held at once, beyond the inputs */
} bench_result;

static void print_table(int n, const tgop_target *targets, const bench_result *res) {
  printf("%-22s %14s %7s %16s %7s\n", "op", "forward (us)", "ratio", "fwd+bwd (us)", "ratio");
  for (int k = 0; k < n; k++) {
    printf("%-22s %14.1f %7.2f", targets[k].name, res[k].forward_us,
           res[k].forward_us / res[0].forward_us);
    if (res[k].full_us >= 0 && res[0].full_us >= 0)
      printf(" %16.1f %7.2f\n", res[k].full_us, res[k].full_us / res[0].full_us);
    else if (res[k].full_us >= 0)
      printf(" %16.1f %7s\n", res[k].full_us, "-");
    else
      printf(" %16s %7s\n", "-", "-");
  }
}

/* On meta the times are tg's overhead alone; what counts is the memory a run would take. */
static void print_meta_bytes(int n, const tgop_target *targets, const bench_result *res) {
  printf("meta: peak bytes a run allocates beyond its inputs (forward and backward)\n");
  for (int k = 0; k < n; k++) printf("%-22s %14zu\n", targets[k].name, res[k].meta_peak_bytes);
}

static int bench_targets(const tgop_options *opts, int n, const tgop_target *targets,
                         const tg_op_desc *sample_op, tg_generator *gen) {
  tg_sample samples[TG_SAMPLE_MAX];
  tg_sample_request rq = {.dtype = opts->dtype,
                          .device = opts->device,
                          .gen = gen,
                          .bench = true,
                          .n_sizes = opts->n_sizes,
                          .sizes = opts->n_sizes ? opts->sizes : NULL};
  int count = sample_op->sample_inputs(&rq, samples);
  if (count < 1) {
    fprintf(stderr, "tg-op bench: the bench sample of %s: %s\n", sample_op->name,
            count < 0 ? tg_last_error_message() : "none given");
    /* sizes the op cannot take are a bad command line */
    return count < 0 && tg_last_error() == TG_ERR_ARGUMENT ? TGOP_EXIT_USAGE : TGOP_EXIT_FAIL;
  }
  const tg_sample *s = &samples[0];
  if (!tgop_check_targets("bench", n, targets, s, opts->device)) return TGOP_EXIT_USAGE;
  printf("bench: sample '%s' of %s: inputs ", s->label ? s->label : "", sample_op->name);
  print_inputs(s);
  printf(" (* requires grad), %s on %s", tg_dtype_name(opts->dtype),
         tg_device_type_name(opts->device.type));
  if (opts->device.type == TG_CPU)
    printf(", %d thread%s", tg_get_num_threads(), tg_get_num_threads() == 1 ? "" : "s");
  printf("; median of %d runs after %d warm-up\n", opts->iters, opts->warmup);
  fflush(stdout); /* before any error on stderr */

  bench_result *res = calloc((size_t)n, sizeof *res);
  if (!res) return TGOP_EXIT_FAIL;
  tg_status st = TG_OK;
  for (int k = 0; k < n && st == TG_OK; k++) {
    bench_run r = run_of(&targets[k], s, opts->device);
    tg_meta_memory_stats_reset();
    tg_meta_memory_stats before, after;
    tg_meta_memory_stats_get(&before);
    st = time_runs(&r, false, opts, &res[k].forward_us);
    res[k].full_us = -1;
    if (st == TG_OK && r.has_backward) st = time_runs(&r, true, opts, &res[k].full_us);
    tg_meta_memory_stats_get(&after);
    res[k].meta_peak_bytes = after.peak_bytes - before.allocated_bytes;
    if (st != TG_OK)
      fprintf(stderr, "tg-op bench: %s: %s\n", targets[k].name, tg_last_error_message());
  }
  if (st == TG_OK) print_table(n, targets, res);
  if (st == TG_OK && opts->device.type == TG_META) print_meta_bytes(n, targets, res);
  free(res);
  return st == TG_OK ? TGOP_EXIT_OK : TGOP_EXIT_FAIL;
}

int tgop_bench(const tgop_options *opts, int n_names, char *const *names) {
  if (n_names < 1) {
    fprintf(stderr, "tg-op bench: name at least one op\n");
    return TGOP_EXIT_USAGE;
  }
  tgop_target *targets = calloc((size_t)n_names, sizeof *targets);
  if (!targets) return TGOP_EXIT_FAIL;
  int code = TGOP_EXIT_OK;
  for (int i = 0; i < n_names && code == TGOP_EXIT_OK; i++)
    if (!tgop_resolve(names[i], &targets[i])) {
      fprintf(stderr, "tg-op bench: unknown op '%s' (tg-op list shows the ops)\n", names[i]);
      code = TGOP_EXIT_USAGE;
    }
  const tg_op_desc *sample_op = code == TGOP_EXIT_OK ? tgop_sample_op(&targets[0]) : NULL;
  if (code == TGOP_EXIT_OK && !sample_op) code = TGOP_EXIT_USAGE;
  if (code == TGOP_EXIT_OK && opts->device.type == TG_CUDA && !tg_cuda_is_available()) {
    fprintf(stderr, "tg-op bench: --device cuda: no CUDA device (%s)\n",
            tg_cuda_is_built() ? "none present" : "this tg is built without CUDA");
    code = TGOP_EXIT_FAIL;
  }
  if (code == TGOP_EXIT_OK) {
    if (opts->threads > 0) tg_set_num_threads(opts->threads);
    tg_generator *gen = tg_generator_new(opts->seed);
    tg_scope s = tg_scope_begin();
    code = gen ? bench_targets(opts, n_names, targets, sample_op, gen) : TGOP_EXIT_FAIL;
    tg_scope_end(s);
    tg_generator_free(gen);
    tg_clear_error();
  }
  free(targets);
  return code;
}
