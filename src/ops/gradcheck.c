/* Gradient checking: the Jacobian from backward against central finite differences, in F64.
 *
 * tg_gradcheck builds one graph at the unperturbed inputs and reads the analytical Jacobian
 * from it one output element at a time (tg_autograd_grad with a one-hot grad_output, run
 * twice to check that backward is re-entrant). Only then does it perturb inputs in place:
 * a perturbation bumps the storage version, which would invalidate tensors saved by a graph
 * built earlier, so every numerical evaluation builds its own graph (or none). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/host_memory.h"
#include "tensor/tensor_impl.h"
#include "tg/autograd.h"

#define DEFAULT_EPS 1e-6
#define DEFAULT_ATOL 1e-5
#define DEFAULT_RTOL 1e-3
#define GRADGRAD_SEED 0x67726164u /* fixed: a failing gradgradcheck reproduces exactly */

typedef struct gc_output {
  int ndim;
  int64_t sizes[TG_MAX_DIMS];
  int64_t numel;
  int64_t offset;      /* first row of this output in the Jacobian */
  bool checked;        /* its rows are compared */
  bool differentiable; /* requires grad: rows come from backward, else they must be zero */
} gc_output;

typedef struct gc_problem {
  const char *name; /* "tg_gradcheck" or "tg_gradgradcheck" */
  tg_gradcheck_fn fn;
  void *user;
  int n_inputs;
  tg_tensor *const *inputs;
  int n_primary; /* inputs past this one are gradgradcheck's upstream gradients */
  int n_outputs;
  tg_gradcheck_options opts;
  gc_output *outs;
  int64_t n_rows; /* elements of all checked outputs */
  int n_diff;     /* inputs that require grad */
  int *diff;      /* their indices */
  double **jac;   /* per differentiable input: n_rows x numel, row-major (analytical) */
} gc_problem;

static int64_t numel_of(const tg_tensor *t) { return tg__numel(t->ndim, t->sizes); }

static void unravel(int64_t flat, int ndim, const int64_t *sizes, int64_t *index) {
  for (int d = ndim - 1; d >= 0; d--) {
    index[d] = sizes[d] > 0 ? flat % sizes[d] : 0;
    flat = sizes[d] > 0 ? flat / sizes[d] : 0;
  }
}

static void describe_input(const gc_problem *p, int i, char *buf, size_t len) {
  if (i < p->n_primary)
    snprintf(buf, len, "input %d", i);
  else
    snprintf(buf, len, "upstream gradient %d (input %d)", i - p->n_primary, i);
}

/* ---- argument checks ---- */

static tg_status check_inputs(gc_problem *p) {
  const char *name = p->name;
  if (!p->fn) return tg_set_error(TG_ERR_ARGUMENT, "%s: fn is NULL", name);
  if (p->n_inputs <= 0 || !p->inputs)
    return tg_set_error(TG_ERR_ARGUMENT, "%s: need at least one input (got %d)", name, p->n_inputs);
  if (p->n_outputs <= 0)
    return tg_set_error(TG_ERR_ARGUMENT, "%s: need at least one output (got %d)", name,
                        p->n_outputs);
  if (!(p->opts.eps >= 0) || !(p->opts.atol >= 0) || !(p->opts.rtol >= 0))
    return tg_set_error(TG_ERR_ARGUMENT, "%s: eps %g, atol %g, rtol %g must not be negative", name,
                        p->opts.eps, p->opts.atol, p->opts.rtol);
  p->diff = tg__host_calloc((size_t)p->n_inputs, sizeof *p->diff);
  if (!p->diff) return tg_set_error(TG_ERR_MEMORY, "%s: out of memory", name);
  for (int i = 0; i < p->n_inputs; i++) {
    const tg_tensor *t = p->inputs[i];
    char what[64];
    describe_input(p, i, what, sizeof what);
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

/* Runs fn into outs (results owned by the caller's scope) and checks they were all set. */
static tg_status evaluate(const gc_problem *p, tg_tensor **outs) {
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
    g->numel = numel_of(o);
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

/* ---- analytical Jacobian ---- */

/* Reads one backward result into row `row` of every differentiable input's Jacobian. */
static tg_status store_row(gc_problem *p, int64_t row, tg_tensor *const *grads, double *scratch) {
  for (int k = 0; k < p->n_diff; k++) {
    const tg_tensor *x = p->inputs[p->diff[k]], *g = grads[k];
    int64_t n = numel_of(x);
    double *dst = p->jac[k] + row * n;
    if (!g) { /* allow_unused: this output does not depend on the input */
      memset(dst, 0, sizeof(double) * (size_t)n);
      continue;
    }
    if (g->dtype != TG_F64 || !tg__same_sizes(g, x)) {
      char what[64];
      describe_input(p, p->diff[k], what, sizeof what);
      return tg_set_error(TG_ERR_GRADCHECK, "%s: the gradient of %s %s is %s %s", p->name, what,
                          tg__sizes_str(x), tg__sizes_str(g), tg_dtype_name(g->dtype));
    }
    tg_status st = tg_to_host_array(g, scratch, sizeof(double) * (size_t)n);
    if (st != TG_OK) return st;
    memcpy(dst, scratch, sizeof(double) * (size_t)n);
  }
  return TG_OK;
}

/* The same row again, from a second backward over the same graph: it must match exactly. */
static tg_status check_reentrant(gc_problem *p, int64_t row, int j, int64_t k,
                                 tg_tensor *const *grads, double *scratch) {
  for (int d = 0; d < p->n_diff; d++) {
    const tg_tensor *x = p->inputs[p->diff[d]];
    int64_t n = numel_of(x);
    const double *first = p->jac[d] + row * n;
    if (grads[d]) {
      tg_status st = tg_to_host_array(grads[d], scratch, sizeof(double) * (size_t)n);
      if (st != TG_OK) return st;
    } else {
      memset(scratch, 0, sizeof(double) * (size_t)n);
    }
    for (int64_t e = 0; e < n; e++)
      if (memcmp(&first[e], &scratch[e], sizeof(double)) != 0) {
        char what[64];
        describe_input(p, p->diff[d], what, sizeof what);
        return tg_set_error(TG_ERR_GRADCHECK,
                            "%s: backward is not re-entrant: running it twice for output %d "
                            "element %lld gave %.17g then %.17g for %s element %lld",
                            p->name, j, (long long)k, first[e], scratch[e], what, (long long)e);
      }
  }
  return TG_OK;
}

/* Builds the graph once at the unperturbed inputs and fills p->jac row by row. */
static tg_status analytical_jacobian(gc_problem *p, tg_tensor *const *outs) {
  int n_roots = 0;
  for (int j = 0; j < p->n_outputs; j++) n_roots += p->outs[j].differentiable;
  if (n_roots == 0) return TG_OK; /* p->jac stays zero (calloc) */
  const tg_tensor **roots = tg__host_calloc((size_t)n_roots, sizeof *roots);
  tg_tensor **seeds = tg__host_calloc((size_t)n_roots, sizeof *seeds);
  const tg_tensor **targets = tg__host_calloc((size_t)p->n_diff, sizeof *targets);
  tg_tensor **grads = tg__host_calloc((size_t)p->n_diff, sizeof *grads);
  int64_t max_in = 1;
  for (int d = 0; d < p->n_diff; d++)
    if (numel_of(p->inputs[p->diff[d]]) > max_in) max_in = numel_of(p->inputs[p->diff[d]]);
  double *scratch = tg__host_malloc(sizeof(double) * (size_t)max_in);
  tg_status st = TG_OK;
  if (!roots || !seeds || !targets || !grads || !scratch) {
    st = tg_set_error(TG_ERR_MEMORY, "%s: out of memory", p->name);
    goto done;
  }
  for (int d = 0; d < p->n_diff; d++) targets[d] = p->inputs[p->diff[d]];
  int r = 0;
  for (int j = 0; j < p->n_outputs && st == TG_OK; j++) {
    if (!p->outs[j].differentiable) continue;
    roots[r] = outs[j];
    seeds[r] = tg_zeros_like(outs[j]); /* owned by the caller's scope */
    if (!seeds[r]) st = tg_last_error();
    r++;
  }
  tg_backward_options keep = {.retain_graph = true};
  r = 0;
  for (int j = 0; j < p->n_outputs && st == TG_OK; j++) {
    const gc_output *g = &p->outs[j];
    if (!g->differentiable) continue;
    for (int64_t k = 0; k < g->numel && st == TG_OK; k++) {
      int64_t index[TG_MAX_DIMS];
      unravel(k, g->ndim, g->sizes, index);
      if ((st = tg_set(seeds[r], index, 1.0)) != TG_OK) break;
      tg_scope scope = tg_scope_begin();
      st = tg_autograd_grad(n_roots, roots, (const tg_tensor *const *)seeds, p->n_diff, targets,
                            grads, keep, true);
      if (st == TG_OK) st = store_row(p, g->offset + k, grads, scratch);
      if (st == TG_OK)
        st = tg_autograd_grad(n_roots, roots, (const tg_tensor *const *)seeds, p->n_diff, targets,
                              grads, keep, true);
      if (st == TG_OK) st = check_reentrant(p, g->offset + k, j, k, grads, scratch);
      tg_scope_end(scope);
      if (st == TG_OK) st = tg_set(seeds[r], index, 0.0);
    }
    r++;
  }
done:
  tg__host_free(roots);
  tg__host_free(seeds);
  tg__host_free(targets);
  tg__host_free(grads);
  tg__host_free(scratch);
  return st;
}

/* ---- numerical Jacobian and the comparison ---- */

static tg_status report_mismatch(const gc_problem *p, int input, int64_t e, int64_t row,
                                 double numerical, double analytical) {
  const tg_tensor *x = p->inputs[input];
  int j = 0;
  while (j + 1 < p->n_outputs && !(p->outs[j].checked && row >= p->outs[j].offset &&
                                   row < p->outs[j].offset + p->outs[j].numel))
    j++;
  const gc_output *g = &p->outs[j];
  int64_t in_idx[TG_MAX_DIMS], out_idx[TG_MAX_DIMS];
  unravel(e, x->ndim, x->sizes, in_idx);
  unravel(row - g->offset, g->ndim, g->sizes, out_idx);
  char what[64];
  describe_input(p, input, what, sizeof what);
  double tol = p->opts.atol + p->opts.rtol * fabs(numerical);
  tg_status st = tg_set_error(
      TG_ERR_GRADCHECK,
      "%s: Jacobian mismatch for %s element %lld %s and output %d element %lld %s: "
      "numerical %.10g, analytical %.10g, difference %.3g (tolerance %.3g = atol %g + rtol %g "
      "* |numerical|)%s",
      p->name, what, (long long)e, tg__dims_str(x->ndim, in_idx), j, (long long)(row - g->offset),
      tg__dims_str(g->ndim, out_idx), numerical, analytical, fabs(analytical - numerical), tol,
      p->opts.atol, p->opts.rtol,
      g->differentiable ? "" : "; the output does not require grad, so backward gives zero");
  if (!p->opts.quiet) fprintf(stderr, "%s\n", tg_last_error_message());
  return st;
}

/* Evaluates fn with input element `index` of x set to value; values get the outputs. */
static tg_status evaluate_at(const gc_problem *p, tg_tensor *x, const int64_t *index, double value,
                             tg_tensor **outs, double *values) {
  tg_no_grad_begin();
  tg_status st = tg_set(x, index, value);
  tg_no_grad_end();
  if (st != TG_OK) return st;
  tg_scope scope = tg_scope_begin();
  st = evaluate(p, outs);
  if (st == TG_OK) st = read_values(p, outs, values);
  tg_scope_end(scope);
  return st;
}

/* Central differences for every element of every differentiable input, each column compared
 * with the analytical one as soon as it is known. Inputs are restored exactly. */
static tg_status numerical_check(gc_problem *p) {
  double *plus = tg__host_malloc(sizeof(double) * (size_t)(p->n_rows > 0 ? p->n_rows : 1));
  double *minus = tg__host_malloc(sizeof(double) * (size_t)(p->n_rows > 0 ? p->n_rows : 1));
  tg_tensor **outs = tg__host_calloc((size_t)p->n_outputs, sizeof *outs);
  tg_status st = TG_OK;
  if (!plus || !minus || !outs) st = tg_set_error(TG_ERR_MEMORY, "%s: out of memory", p->name);
  double eps = p->opts.eps;
  for (int d = 0; d < p->n_diff && st == TG_OK; d++) {
    tg_tensor *x = p->inputs[p->diff[d]];
    int64_t n = numel_of(x);
    for (int64_t e = 0; e < n && st == TG_OK; e++) {
      int64_t index[TG_MAX_DIMS];
      unravel(e, x->ndim, x->sizes, index);
      double orig;
      if ((st = tg_get(x, index, &orig)) != TG_OK) break;
      st = evaluate_at(p, x, index, orig + eps, outs, plus);
      if (st == TG_OK) st = evaluate_at(p, x, index, orig - eps, outs, minus);
      tg_no_grad_begin();
      tg_status restored = tg_set(x, index, orig);
      tg_no_grad_end();
      if (st == TG_OK) st = restored;
      for (int64_t row = 0; row < p->n_rows && st == TG_OK; row++) {
        double numerical = (plus[row] - minus[row]) / (2 * eps);
        double analytical = p->jac[d][row * n + e];
        /* Written so that a NaN on either side fails. */
        if (!(fabs(analytical - numerical) <= p->opts.atol + p->opts.rtol * fabs(numerical)))
          st = report_mismatch(p, p->diff[d], e, row, numerical, analytical);
      }
    }
  }
  tg__host_free(plus);
  tg__host_free(minus);
  tg__host_free(outs);
  return st;
}

/* ---- entry points ---- */

typedef struct grad_state {
  tg_tensor *grad;
  bool requires_grad;
} grad_state;

static tg_status gradcheck_impl(const char *name, tg_gradcheck_fn fn, void *user, int n_inputs,
                                tg_tensor *const *inputs, int n_primary, int n_outputs,
                                tg_gradcheck_options opts) {
  gc_problem p = {name, fn,   user, n_inputs, inputs, n_primary, n_outputs,
                  opts, NULL, 0,    0,        NULL,   NULL};
  if (p.opts.eps == 0) p.opts.eps = DEFAULT_EPS;
  if (p.opts.atol == 0) p.opts.atol = DEFAULT_ATOL;
  if (p.opts.rtol == 0) p.opts.rtol = DEFAULT_RTOL;
  grad_state *before = NULL;
  tg_tensor **outs = NULL;
  tg_status st = check_inputs(&p);
  if (st != TG_OK) goto done;
  p.outs = tg__host_calloc((size_t)n_outputs, sizeof *p.outs);
  p.jac = tg__host_calloc((size_t)p.n_diff, sizeof *p.jac);
  before = tg__host_calloc((size_t)n_inputs, sizeof *before);
  outs = tg__host_calloc((size_t)n_outputs, sizeof *outs);
  if (!p.outs || !p.jac || !before || !outs) {
    st = tg_set_error(TG_ERR_MEMORY, "%s: out of memory", name);
    goto done;
  }
  for (int i = 0; i < n_inputs; i++)
    before[i] = (grad_state){inputs[i]->grad, inputs[i]->requires_grad};

  tg_scope scope = tg_scope_begin();
  st = evaluate(&p, outs);
  if (st == TG_OK) st = describe_outputs(&p, outs);
  for (int d = 0; d < p.n_diff && st == TG_OK; d++) {
    size_t cells = (size_t)(p.n_rows * numel_of(inputs[p.diff[d]]));
    p.jac[d] = tg__host_calloc(cells > 0 ? cells : 1, sizeof(double));
    if (!p.jac[d]) st = tg_set_error(TG_ERR_MEMORY, "%s: out of memory for the Jacobian", name);
  }
  if (st == TG_OK) st = analytical_jacobian(&p, outs);
  tg_scope_end(scope); /* frees the graph before any input is perturbed */

  if (st == TG_OK) st = numerical_check(&p);

  /* Checking must leave the inputs' autograd state as it found it: tg_autograd_grad never
   * writes .grad, and an input that does not require grad never gets one. */
  for (int i = 0; i < n_inputs && st == TG_OK; i++) {
    if (inputs[i]->grad == before[i].grad && inputs[i]->requires_grad == before[i].requires_grad)
      continue;
    char what[64];
    describe_input(&p, i, what, sizeof what);
    st = tg_set_error(TG_ERR_GRADCHECK,
                      "%s: %s's .grad or requires_grad was changed by evaluating and "
                      "differentiating fn (%s grad before, %s after; requires_grad %d -> %d)",
                      name, what, before[i].grad ? "a" : "no", inputs[i]->grad ? "a" : "no",
                      before[i].requires_grad, inputs[i]->requires_grad);
    if (!opts.quiet) fprintf(stderr, "%s\n", tg_last_error_message());
  }
done:
  if (p.jac)
    for (int d = 0; d < p.n_diff; d++) tg__host_free(p.jac[d]);
  tg__host_free(p.jac);
  tg__host_free(p.outs);
  tg__host_free(p.diff);
  tg__host_free(before);
  tg__host_free(outs);
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
  gc_problem p = {name, fn,   user, n_inputs, inputs, n_inputs, n_outputs,
                  opts, NULL, 0,    0,        NULL,   NULL};
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
  gen = tg_generator_new(GRADGRAD_SEED);
  if (!g.v_output || !outs || !all || !gen) {
    st = tg_set_error(TG_ERR_MEMORY, "%s: out of memory", name);
    goto done;
  }
  tg_scope scope = tg_scope_begin();
  st = evaluate(&p, outs);
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
