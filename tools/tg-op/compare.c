/* tg-op compare: the tutorial's check script for any ops that take the same inputs. Every
 * checking sample of the first op runs through every named op; their forward outputs, and
 * the gradients of the inputs that require grad for the same random upstream gradients,
 * must agree with the first op's within |x - first| <= atol + rtol * |first| (defaults by
 * dtype: F64 rtol 1e-9, atol 1e-12; F32 rtol 1e-4, atol 1e-5, as tg_op_check allows CPU
 * against CUDA). An in-place op runs on a clone of input 0. */
#include <math.h>
#include <stdio.h>

#include "tg_op.h"

#define UPSTREAM_SEED 0x636f6d70ull /* "comp": the same upstream gradients for every op */

/* What one op gave on one sample: outputs, then the inputs' gradients. */
typedef struct op_result {
  int n_outputs, n_grads;
  tg_tensor *outputs[TGOP_MAX_OUTPUTS];
  tg_tensor *grads[TG_SAMPLE_MAX_INPUTS]; /* NULL: the op's result does not depend on it */
} op_result;

/* Runs t on s (scope-owned results); upstream[j] (made on the first call, from a fixed seed)
 * are the gradients of the outputs that require grad. */
static tg_status run_target(const tgop_target *t, const tg_sample *s, tg_tensor **upstream,
                            op_result *r) {
  tg_sample call = *s;
  if (t->op && (t->op->flags & TG_OP_INPLACE) && !(call.inputs[0] = tg_clone(s->inputs[0])))
    return tg_last_error();
  r->n_outputs = tgop_target_outputs(t, s);
  tg_status st = tgop_run(t, &call, r->n_outputs, r->outputs);
  const tg_tensor *roots[TGOP_MAX_OUTPUTS], *seeds[TGOP_MAX_OUTPUTS], *wrt[TG_SAMPLE_MAX_INPUTS];
  int n_roots = 0;
  r->n_grads = 0;
  for (int i = 0; i < s->n_inputs; i++)
    if (tg_requires_grad(s->inputs[i])) wrt[r->n_grads++] = s->inputs[i];
  for (int j = 0; j < r->n_outputs && st == TG_OK; j++) {
    if (!tg_requires_grad(r->outputs[j])) continue;
    if (!upstream[j]) {
      tg_generator *gen = tg_generator_new(UPSTREAM_SEED + (uint64_t)j);
      upstream[j] = gen ? tg_randn(tg_ndim(r->outputs[j]), tg_sizes(r->outputs[j]),
                                   TG_OPTS(.dtype = tg_tensor_dtype(r->outputs[j]),
                                           .device = tg_tensor_device(r->outputs[j])),
                                   gen)
                        : NULL;
      tg_generator_free(gen);
      if (!upstream[j]) return tg_last_error() ? tg_last_error() : TG_ERR_MEMORY;
    }
    roots[n_roots] = r->outputs[j];
    seeds[n_roots++] = upstream[j];
  }
  if (st == TG_OK && n_roots > 0 && r->n_grads > 0)
    st = tg_autograd_grad(n_roots, roots, seeds, r->n_grads, wrt, r->grads,
                          (tg_backward_options){0}, true);
  else
    r->n_grads = 0;
  return st;
}

/* max |a - b|, and whether every element is within atol + rtol * |b|; false with a message
 * when they cannot be compared. */
static bool compare_tensors(const tg_tensor *a, const tg_tensor *b, double rtol, double atol,
                            double *max_diff, bool *close, char *why, size_t why_len) {
  char sa[64], sb[64];
  if (!a || !b) {
    snprintf(why, why_len, "%s", a ? "no gradient from the first op" : "no gradient");
    return a == b;
  }
  bool same = tg_tensor_dtype(a) == tg_tensor_dtype(b) && tg_ndim(a) == tg_ndim(b);
  for (int d = 0; same && d < tg_ndim(a); d++) same = tg_size(a, d) == tg_size(b, d);
  if (!same) {
    snprintf(why, why_len, "%s %s against %s %s", tg_dtype_name(tg_tensor_dtype(a)),
             tg_format_sizes(sa, sizeof sa, tg_ndim(a), tg_sizes(a)),
             tg_dtype_name(tg_tensor_dtype(b)),
             tg_format_sizes(sb, sizeof sb, tg_ndim(b), tg_sizes(b)));
    return false;
  }
  double d = tg_max_abs_diff(a, b);
  bool within = d >= 0 && tg_allclose(a, b, rtol, atol); /* NaN anywhere fails */
  if (d < 0 || (!within && tg_last_error() != TG_OK)) {
    snprintf(why, why_len, "%s", tg_last_error_message());
    tg_clear_error();
    return false;
  }
  *max_diff = d;
  *close = within;
  return true;
}

/* Compares r with the first op's result, printing a line; false on a mismatch. */
static bool report(const tgop_target *t, const op_result *first, const op_result *r, double rtol,
                   double atol) {
  double worst = 0;
  bool all_close = r->n_outputs == first->n_outputs && r->n_grads == first->n_grads;
  char why[256] = "";
  if (!all_close)
    snprintf(why, sizeof why, "%d outputs and %d gradients against %d and %d", r->n_outputs,
             r->n_grads, first->n_outputs, first->n_grads);
  for (int k = 0; all_close && k < r->n_outputs + r->n_grads; k++) {
    bool output = k < r->n_outputs;
    const tg_tensor *a = output ? r->outputs[k] : r->grads[k - r->n_outputs];
    const tg_tensor *b = output ? first->outputs[k] : first->grads[k - r->n_outputs];
    double d = 0;
    bool close = true;
    if (!compare_tensors(a, b, rtol, atol, &d, &close, why, sizeof why) || !close) {
      if (why[0] == '\0') snprintf(why, sizeof why, "max |diff| %.3g", d);
      printf("  %-22s MISMATCH %s %d: %s\n", t->name, output ? "output" : "gradient of input",
             output ? k : k - r->n_outputs, why);
      return false;
    }
    if (d > worst) worst = d;
  }
  if (!all_close)
    printf("  %-22s MISMATCH %s\n", t->name, why);
  else
    printf("  %-22s ok (max |diff| %.3g over %d outputs, %d gradients)\n", t->name, worst,
           r->n_outputs, r->n_grads);
  return all_close;
}

static int compare_targets(const tgop_options *opts, int n, const tgop_target *targets,
                           const tg_op_desc *sample_op, tg_generator *gen) {
  tg_sample samples[TG_SAMPLE_MAX];
  tg_sample_request rq = {.dtype = opts->dtype, .device = opts->device, .gen = gen};
  int count = sample_op->sample_inputs(&rq, samples);
  if (count < 1) {
    fprintf(stderr, "tg-op compare: the samples of %s: %s\n", sample_op->name,
            count < 0 ? tg_last_error_message() : "none given");
    return TGOP_EXIT_FAIL;
  }
  for (int i = 0; i < count; i++)
    if (!tgop_check_targets("compare", n, targets, &samples[i], opts->device))
      return TGOP_EXIT_USAGE;
  double rtol = opts->rtol >= 0 ? opts->rtol : opts->dtype == TG_F64 ? 1e-9 : 1e-4;
  double atol = opts->atol >= 0 ? opts->atol : opts->dtype == TG_F64 ? 1e-12 : 1e-5;
  printf("compare: %d sample%s of %s, %s on %s, |x - %s| <= %g + %g * |%s|\n", count,
         count == 1 ? "" : "s", sample_op->name, tg_dtype_name(opts->dtype),
         tg_device_type_name(opts->device.type), targets[0].name, atol, rtol, targets[0].name);
  int mismatches = 0;
  for (int i = 0; i < count; i++) {
    printf("sample %d (%s):\n", i, samples[i].label ? samples[i].label : "");
    tg_scope s = tg_scope_begin();
    tg_tensor *upstream[TGOP_MAX_OUTPUTS] = {0};
    op_result first = {0};
    tg_status st = run_target(&targets[0], &samples[i], upstream, &first);
    for (int k = 1; k < n && st == TG_OK; k++) {
      op_result r = {0};
      st = run_target(&targets[k], &samples[i], upstream, &r);
      if (st == TG_OK) mismatches += !report(&targets[k], &first, &r, rtol, atol);
    }
    if (st != TG_OK) {
      fprintf(stderr, "tg-op compare: sample %d: %s\n", i, tg_last_error_message());
      tg_clear_error();
      mismatches++;
    }
    tg_scope_end(s);
  }
  printf("compare: %s\n", mismatches ? "MISMATCH" : "all agree");
  return mismatches ? TGOP_EXIT_FAIL : TGOP_EXIT_OK;
}

int tgop_compare(const tgop_options *opts, int n_names, char *const *names) {
  if (n_names < 2) {
    fprintf(stderr, "tg-op compare: name at least two ops (the first is the reference)\n");
    return TGOP_EXIT_USAGE;
  }
  tgop_target targets[TGOP_MAX_TARGETS];
  if (n_names > TGOP_MAX_TARGETS) {
    fprintf(stderr, "tg-op compare: at most %d ops\n", TGOP_MAX_TARGETS);
    return TGOP_EXIT_USAGE;
  }
  for (int i = 0; i < n_names; i++)
    if (!tgop_resolve(names[i], &targets[i])) {
      fprintf(stderr, "tg-op compare: unknown op '%s' (tg-op list shows the ops)\n", names[i]);
      return TGOP_EXIT_USAGE;
    }
  const tg_op_desc *sample_op = tgop_sample_op(&targets[0]);
  if (!sample_op) return TGOP_EXIT_USAGE;
  if (opts->device.type == TG_CUDA && !tg_cuda_is_available()) {
    fprintf(stderr, "tg-op compare: --device cuda: no CUDA device (%s)\n",
            tg_cuda_is_built() ? "none present" : "this tg is built without CUDA");
    return TGOP_EXIT_FAIL;
  }
  tg_generator *gen = tg_generator_new(opts->seed);
  tg_scope s = tg_scope_begin();
  int code = gen ? compare_targets(opts, n_names, targets, sample_op, gen) : TGOP_EXIT_FAIL;
  tg_scope_end(s);
  tg_generator_free(gen);
  tg_clear_error();
  return code;
}
