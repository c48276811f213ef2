/* Gradient checking: the Jacobian from backward against central finite differences, in F64.
 *
 * tg_gradcheck builds one graph at the unperturbed inputs and reads the analytical Jacobian
 * from it one output element at a time (tg_autograd_grad with a one-hot grad_output, run
 * twice to check that backward is re-entrant), or in fast mode only its projections
 * (gradcheck_fast.c); on the same graph it checks backward with outputs that received no
 * gradient (gradcheck_undefined.c). Only then does it perturb inputs in place: a
 * perturbation bumps the storage version, which would invalidate tensors saved by a graph
 * built earlier, so every numerical evaluation builds its own graph (or none). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testing/gradcheck_internal.h"
#include "tensor/host_memory.h"
#include "tensor/tensor_impl.h"

#define DEFAULT_EPS 1e-6
#define DEFAULT_ATOL 1e-5
#define DEFAULT_RTOL 1e-3
#define DEFAULT_SEED 0x67726164u /* seed 0: fixed, so a failing check reproduces exactly */

int64_t tg__gc_numel(const tg_tensor *t) { return tg__numel(t->ndim, t->sizes); }

void tg__gc_unravel(int64_t flat, int ndim, const int64_t *sizes, int64_t *index) {
  for (int d = ndim - 1; d >= 0; d--) {
    index[d] = sizes[d] > 0 ? flat % sizes[d] : 0;
    flat = sizes[d] > 0 ? flat / sizes[d] : 0;
  }
}

void tg__gc_describe_input(const gc_problem *p, int i, char *buf, size_t len) {
  if (i < p->n_primary)
    snprintf(buf, len, "input %d", i);
  else
    snprintf(buf, len, "upstream gradient %d (input %d)", i - p->n_primary, i);
}

void tg__gc_describe_element(const gc_problem *p, int i, int64_t e, char *buf, size_t len) {
  const tg_tensor *x = p->inputs[i];
  int64_t index[TG_MAX_DIMS];
  tg__gc_unravel(e, x->ndim, x->sizes, index);
  char what[64];
  tg__gc_describe_input(p, i, what, sizeof what);
  snprintf(buf, len, "%s element %lld %s", what, (long long)e, tg__dims_str(x->ndim, index));
}

int tg__gc_output_of_row(const gc_problem *p, int64_t row) {
  int j = 0;
  while (j + 1 < p->n_outputs && !(p->outs[j].checked && row >= p->outs[j].offset &&
                                   row < p->outs[j].offset + p->outs[j].numel))
    j++;
  return j;
}

bool tg__gc_reentrant_equal(double first, double second, double tol) {
  return memcmp(&first, &second, sizeof first) == 0 || (tol > 0 && fabs(first - second) <= tol);
}

tg_status tg__gc_fail(const gc_problem *p, const char *fmt, ...) {
  char message[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message, sizeof message, fmt, ap);
  va_end(ap);
  tg_status st = tg_set_error(TG_ERR_GRADCHECK, "%s", message);
  if (!p->opts.quiet) fprintf(stderr, "%s\n", tg_last_error_message());
  return st;
}

tg_status tg__gc_fail_not_reentrant(const gc_problem *p, const char *how, int d, int64_t e,
                                    double first, double second) {
  char element[192];
  tg__gc_describe_element(p, p->diff[d], e, element, sizeof element);
  return tg__gc_fail(p,
                     "%s: backward is not re-entrant: running it twice %s gave %.17g then %.17g "
                     "for %s (difference %.3g, nondet_tol %g%s)",
                     p->name, how, first, second, element, fabs(first - second), p->opts.nondet_tol,
                     p->opts.nondet_tol == 0 ? ": must agree bitwise" : "");
}

/* ---- argument checks ---- */

static tg_status check_inputs(gc_problem *p) {
  const char *name = p->name;
  if (!p->fn) return tg_set_error(TG_ERR_ARGUMENT, "%s: fn is NULL", name);
  if (p->n_inputs <= 0)
    return tg_set_error(TG_ERR_ARGUMENT, "%s: need at least one input (n_inputs is %d)", name,
                        p->n_inputs);
  if (!p->inputs)
    return tg_set_error(TG_ERR_ARGUMENT, "%s: inputs is NULL (n_inputs is %d)", name, p->n_inputs);
  if (p->n_outputs <= 0)
    return tg_set_error(TG_ERR_ARGUMENT, "%s: need at least one output (n_outputs is %d)", name,
                        p->n_outputs);
  if (!(p->opts.eps >= 0) || !(p->opts.atol >= 0) || !(p->opts.rtol >= 0))
    return tg_set_error(TG_ERR_ARGUMENT, "%s: eps %g, atol %g, rtol %g must not be negative", name,
                        p->opts.eps, p->opts.atol, p->opts.rtol);
  if (!(p->opts.nondet_tol >= 0))
    return tg_set_error(TG_ERR_ARGUMENT, "%s: nondet_tol %g must not be negative", name,
                        p->opts.nondet_tol);
  p->diff = tg__host_calloc((size_t)p->n_inputs, sizeof *p->diff);
  if (!p->diff) return tg_set_error(TG_ERR_MEMORY, "%s: out of memory", name);
  for (int i = 0; i < p->n_inputs; i++) {
    const tg_tensor *t = p->inputs[i];
    char what[64];
    tg__gc_describe_input(p, i, what, sizeof what);
    if (!tg__check_arg(name, what, t)) return tg_last_error();
    /* Integer inputs (indices, labels) are constants; floating ones must be F64 so that
     * finite differences mean something. */
    if (tg_dtype_is_floating(t->dtype) && t->dtype != TG_F64)
      return tg_set_error(TG_ERR_ARGUMENT, "%s: %s is %s; gradcheck needs float64 inputs", name,
                          what, tg_dtype_name(t->dtype));
    if (!t->requires_grad) continue;
    if (tg__has_internal_overlap(t))
      return tg_set_error(TG_ERR_ARGUMENT,
                          "%s: %s %s has overlapping elements (an expanded view); perturbing "
                          "one element would move several: pass a contiguous copy",
                          name, what, tg__sizes_str(t));
    p->diff[p->n_diff++] = i;
  }
  if (p->n_diff == 0)
    return tg_set_error(TG_ERR_ARGUMENT, "%s: no input requires grad; nothing to check", name);
  return TG_OK;
}

/* ---- evaluating fn and reading tensors ---- */

tg_status tg__gc_evaluate(const gc_problem *p, tg_tensor **outs) {
  for (int j = 0; j < p->n_outputs; j++) outs[j] = NULL;
  tg_status st = p->fn(p->user, (const tg_tensor *const *)p->inputs, outs);
  if (st != TG_OK) return tg_last_error() != TG_OK ? tg_last_error() : st;
  for (int j = 0; j < p->n_outputs; j++)
    if (!outs[j])
      return tg_last_error() != TG_OK
                 ? tg_last_error()
                 : tg_set_error(TG_ERR_ARGUMENT, "%s: fn returned TG_OK but left output %d NULL",
                                p->name, j);
  return TG_OK;
}

/* Records the geometry of fn's outputs and which of them are compared. When no output
 * requires grad, every floating output is checked against a zero analytical Jacobian. */
static tg_status describe_outputs(gc_problem *p, tg_tensor *const *outs) {
  bool any_differentiable = false;
  for (int j = 0; j < p->n_outputs; j++)
    any_differentiable |= outs[j]->requires_grad && tg_dtype_is_floating(outs[j]->dtype);
  p->n_rows = 0;
  for (int j = 0; j < p->n_outputs; j++) {
    const tg_tensor *o = outs[j];
    gc_output *g = &p->outs[j];
    g->ndim = o->ndim;
    memcpy(g->sizes, o->sizes, sizeof(int64_t) * (size_t)o->ndim);
    g->numel = tg__gc_numel(o);
    g->differentiable = o->requires_grad && tg_dtype_is_floating(o->dtype);
    g->checked = tg_dtype_is_floating(o->dtype) && (g->differentiable || !any_differentiable);
    g->offset = p->n_rows;
    if (!g->checked) continue;
    if (o->dtype != TG_F64)
      return tg_set_error(TG_ERR_ARGUMENT, "%s: output %d is %s; gradcheck needs float64 outputs",
                          p->name, j, tg_dtype_name(o->dtype));
    p->n_rows += g->numel;
  }
  return TG_OK;
}

/* Copies the checked outputs, flattened, into values[n_rows]. */
static tg_status read_values(const gc_problem *p, tg_tensor *const *outs, double *values) {
  for (int j = 0; j < p->n_outputs; j++) {
    const gc_output *g = &p->outs[j];
    if (!g->checked) continue;
    const tg_tensor *o = outs[j];
    if (!tg__check(o->dtype == TG_F64 && tg__dims_equal(o->ndim, o->sizes, g->ndim, g->sizes),
                   TG_ERR_SHAPE, p->name,
                   "output %d changed from %s to %s %s when an input was perturbed", j,
                   tg__dims_str(g->ndim, g->sizes), tg__sizes_str(o), tg_dtype_name(o->dtype)))
      return tg_last_error();
    tg_status st = tg_to_host_array(o, values + g->offset, sizeof(double) * (size_t)g->numel);
    if (st != TG_OK) return st;
  }
  return TG_OK;
}

tg_status tg__gc_evaluate_values(const gc_problem *p, tg_tensor **outs, double *values) {
  tg_scope scope = tg_scope_begin();
  tg_status st = tg__gc_evaluate(p, outs);
  if (st == TG_OK) st = read_values(p, outs, values);
  tg_scope_end(scope);
  return st;
}

tg_status tg__gc_read_grad(const gc_problem *p, int k, const tg_tensor *g, double *dst) {
  const tg_tensor *x = p->inputs[p->diff[k]];
  int64_t n = tg__gc_numel(x);
  if (!g) { /* allow_unused: the outputs do not depend on the input */
    memset(dst, 0, sizeof(double) * (size_t)n);
    return TG_OK;
  }
  if (g->dtype != TG_F64 || !tg__same_sizes(g, x)) {
    char what[64];
    tg__gc_describe_input(p, p->diff[k], what, sizeof what);
    return tg_set_error(TG_ERR_GRADCHECK, "%s: the gradient of %s %s is %s %s", p->name, what,
                        tg__sizes_str(x), tg__sizes_str(g), tg_dtype_name(g->dtype));
  }
  return tg_to_host_array(g, dst, sizeof(double) * (size_t)n);
}

tg_status tg__gc_write_input(tg_tensor *x, const double *values) {
  tg_scope scope = tg_scope_begin();
  tg_tensor *t = tg_from_data(x->ndim, x->sizes, values,
                              (tg_options){.dtype = TG_F64, .device = x->storage->device});
  tg_status st = t ? TG_OK : tg_last_error();
  tg_no_grad_begin();
  if (st == TG_OK) st = tg_copy_(x, t);
  tg_no_grad_end();
  tg_scope_end(scope);
  return st;
}

/* ---- the check ---- */

/* What backward says, read from one graph at the unperturbed inputs: the Jacobian (full
 * mode) or its projections (fast mode); then backward with outputs left out. */
static tg_status analytical_phase(gc_problem *p, gc_fast **fast, tg_tensor **outs) {
  tg_scope scope = tg_scope_begin();
  tg_status st = tg__gc_evaluate(p, outs);
  if (st == TG_OK) st = describe_outputs(p, outs);
  if (st == TG_OK && p->opts.fast_mode) {
    *fast = tg__gc_fast_new(p);
    st = *fast ? tg__gc_fast_analytical(*fast, p, outs) : tg_last_error();
  } else if (st == TG_OK) {
    p->jac = tg__host_calloc((size_t)p->n_diff, sizeof *p->jac);
    if (!p->jac) st = tg_set_error(TG_ERR_MEMORY, "%s: out of memory", p->name);
    for (int d = 0; d < p->n_diff && st == TG_OK; d++) {
      size_t cells = (size_t)(p->n_rows * tg__gc_numel(p->inputs[p->diff[d]]));
      p->jac[d] = tg__host_calloc(cells > 0 ? cells : 1, sizeof(double));
      if (!p->jac[d])
        st = tg_set_error(TG_ERR_MEMORY, "%s: out of memory for the Jacobian", p->name);
    }
    if (st == TG_OK) st = tg__gc_full_analytical(p, outs);
  }
  if (st == TG_OK && !p->opts.skip_undefined_grad_check) st = tg__gc_undefined_grads(p, outs);
  tg_scope_end(scope); /* frees the graph before any input is perturbed */
  return st;
}

tg_status tg__gc_run(gc_problem *p) {
  gc_fast *fast = NULL;
  tg_tensor **outs = tg__host_calloc((size_t)p->n_outputs, sizeof *outs);
  p->outs = tg__host_calloc((size_t)p->n_outputs, sizeof *p->outs);
  p->jac = NULL;
  tg_status st = TG_OK;
  if (!outs || !p->outs) st = tg_set_error(TG_ERR_MEMORY, "%s: out of memory", p->name);
  if (st == TG_OK) st = analytical_phase(p, &fast, outs);
  if (st == TG_OK) st = fast ? tg__gc_fast_numerical(fast, p) : tg__gc_full_numerical(p);
  tg__gc_fast_free(fast);
  if (p->jac)
    for (int d = 0; d < p->n_diff; d++) tg__host_free(p->jac[d]);
  tg__host_free(p->jac);
  tg__host_free(p->outs);
  tg__host_free(outs);
  p->jac = NULL;
  p->outs = NULL;
  return st;
}

/* ---- entry points ---- */

typedef struct grad_state {
  tg_tensor *grad;
  bool requires_grad;
} grad_state;

uint64_t tg__gc_seed(const tg_gradcheck_options *opts) {
  return opts->seed ? opts->seed : DEFAULT_SEED;
}

static tg_status gradcheck_impl(const char *name, tg_gradcheck_fn fn, void *user, int n_inputs,
                                tg_tensor *const *inputs, int n_primary, int n_outputs,
                                tg_gradcheck_options opts) {
  gc_problem p = {.name = name,
                  .fn = fn,
                  .user = user,
                  .n_inputs = n_inputs,
                  .inputs = inputs,
                  .n_primary = n_primary,
                  .n_outputs = n_outputs,
                  .opts = opts};
  if (p.opts.eps == 0) p.opts.eps = DEFAULT_EPS;
  if (p.opts.atol == 0) p.opts.atol = DEFAULT_ATOL;
  if (p.opts.rtol == 0) p.opts.rtol = DEFAULT_RTOL;
  grad_state *before = NULL;
  tg_status st = check_inputs(&p);
  if (st != TG_OK) goto done;
  before = tg__host_calloc((size_t)n_inputs, sizeof *before);
  if (!before) {
    st = tg_set_error(TG_ERR_MEMORY, "%s: out of memory", name);
    goto done;
  }
  for (int i = 0; i < n_inputs; i++)
    before[i] = (grad_state){inputs[i]->grad, inputs[i]->requires_grad};

  st = tg__gc_run(&p);

  /* Checking must leave the inputs' autograd state as it found it: tg_autograd_grad never
   * writes .grad, and an input that does not require grad never gets one. */
  for (int i = 0; i < n_inputs && st == TG_OK; i++) {
    if (inputs[i]->grad == before[i].grad && inputs[i]->requires_grad == before[i].requires_grad)
      continue;
    char what[64];
    tg__gc_describe_input(&p, i, what, sizeof what);
    st = tg__gc_fail(&p,
                     "%s: %s's .grad or requires_grad was changed by evaluating and "
                     "differentiating fn (%s grad before, %s after; requires_grad %d -> %d)",
                     name, what, before[i].grad ? "a" : "no", inputs[i]->grad ? "a" : "no",
                     before[i].requires_grad, inputs[i]->requires_grad);
  }
done:
  tg__host_free(p.diff);
  tg__host_free(before);
  return st;
}

tg_status tg_gradcheck(tg_gradcheck_fn fn, void *user, int n_inputs, tg_tensor *const *inputs,
                       int n_outputs, tg_gradcheck_options opts) {
  return gradcheck_impl("tg_gradcheck", fn, user, n_inputs, inputs, n_inputs, n_outputs, opts);
}
/* gradgradcheck checks the function (inputs, v) -> d/d inputs of sum(outputs * v), built
 * with create_graph, against finite differences: a gradcheck of the gradient. */
typedef struct gradgrad_fn {
  tg_gradcheck_fn fn;
  void *user;
  int n_inputs, n_outputs;
  int n_diff, *diff;  /* inputs of fn that require grad */
  int n_v, *v_output; /* the outputs that get an upstream gradient v, in order */
} gradgrad_fn;

static tg_status gradgrad_eval(void *user, const tg_tensor *const *in, tg_tensor **out) {
  const gradgrad_fn *g = user;
  tg_tensor **outs = tg__host_calloc((size_t)g->n_outputs, sizeof *outs);
  const tg_tensor **roots = tg__host_calloc((size_t)g->n_v, sizeof *roots);
  const tg_tensor **targets = tg__host_calloc((size_t)g->n_diff, sizeof *targets);
  tg_status st = TG_OK;
  if (!outs || !roots || !targets) {
    st = tg_set_error(TG_ERR_MEMORY, "tg_gradgradcheck: out of memory");
    goto done;
  }
  st = g->fn(g->user, in, outs);
  if (st != TG_OK) {
    st = tg_last_error() != TG_OK ? tg_last_error() : st;
    goto done;
  }
  for (int k = 0; k < g->n_v; k++) {
    roots[k] = outs[g->v_output[k]];
    if (!roots[k] || !roots[k]->requires_grad) {
      st = tg_set_error(TG_ERR_STATE, "tg_gradgradcheck: output %d of fn %s", g->v_output[k],
                        roots[k] ? "no longer requires grad" : "is NULL");
      goto done;
    }
  }
  for (int d = 0; d < g->n_diff; d++) targets[d] = in[g->diff[d]];
  st = tg_autograd_grad(g->n_v, roots, in + g->n_inputs, g->n_diff, targets, out,
                        (tg_backward_options){.create_graph = true}, true);
  for (int d = 0; d < g->n_diff && st == TG_OK; d++)
    if (!out[d] && !(out[d] = tg_zeros_like(targets[d]))) st = tg_last_error();
done:
  tg__host_free(outs);
  tg__host_free(roots);
  tg__host_free(targets);
  return st;
}

tg_status tg_gradgradcheck(tg_gradcheck_fn fn, void *user, int n_inputs, tg_tensor *const *inputs,
                           int n_outputs, tg_gradcheck_options opts) {
  const char *name = "tg_gradgradcheck";
  gc_problem p = {.name = name,
                  .fn = fn,
                  .user = user,
                  .n_inputs = n_inputs,
                  .inputs = inputs,
                  .n_primary = n_inputs,
                  .n_outputs = n_outputs,
                  .opts = opts};
  gradgrad_fn g = {fn, user, n_inputs, n_outputs, 0, NULL, 0, NULL};
  tg_tensor **all = NULL, **outs = NULL;
  tg_generator *gen = NULL;
  tg_status st = check_inputs(&p);
  if (st != TG_OK) goto done;
  g.n_diff = p.n_diff;
  g.diff = p.diff;
  g.v_output = tg__host_calloc((size_t)n_outputs, sizeof *g.v_output);
  outs = tg__host_calloc((size_t)n_outputs, sizeof *outs);
  all = tg__host_calloc((size_t)(n_inputs + n_outputs), sizeof *all);
  gen = tg_generator_new(tg__gc_seed(&opts));
  if (!g.v_output || !outs || !all || !gen) {
    st = tg_set_error(TG_ERR_MEMORY, "%s: out of memory", name);
    goto done;
  }
  tg_scope scope = tg_scope_begin();
  st = tg__gc_evaluate(&p, outs);
  for (int i = 0; i < n_inputs; i++) all[i] = inputs[i];
  /* One random upstream gradient per output that requires grad: inputs of the check. */
  for (int j = 0; j < n_outputs && st == TG_OK; j++) {
    const tg_tensor *o = outs[j];
    if (!o->requires_grad || !tg_dtype_is_floating(o->dtype)) continue;
    if (o->dtype != TG_F64) {
      st = tg_set_error(TG_ERR_ARGUMENT, "%s: output %d is %s; gradcheck needs float64 outputs",
                        name, j, tg_dtype_name(o->dtype));
      break;
    }
    tg_tensor *v = tg_randn(
        o->ndim, o->sizes,
        (tg_options){.dtype = TG_F64, .device = o->storage->device, .requires_grad = true}, gen);
    if (!v) {
      st = tg_last_error();
      break;
    }
    all[n_inputs + g.n_v] = v;
    g.v_output[g.n_v++] = j;
  }
  if (st == TG_OK && g.n_v == 0)
    st = tg_set_error(TG_ERR_ARGUMENT, "%s: no output of fn requires grad; nothing to check", name);
  if (st == TG_OK)
    st = gradcheck_impl(name, gradgrad_eval, &g, n_inputs + g.n_v, all, n_inputs, g.n_diff, opts);
  tg_scope_end(scope);
done:
  tg_generator_free(gen);
  tg__host_free(p.diff);
  tg__host_free(g.v_output);
  tg__host_free(outs);
  tg__host_free(all);
  return st;
}
