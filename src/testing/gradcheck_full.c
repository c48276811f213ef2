/* Full-mode gradient checking: the whole Jacobian, one backward per output element and two
 * evaluations of fn per input element, every cell compared and a mismatch named by input,
 * output and both elements. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "testing/gradcheck_internal.h"
#include "tensor/host_memory.h"
#include "tensor/tensor_impl.h"

/* ---- analytical Jacobian ---- */

/* The same row again, from a second backward over the same graph: it must match, bitwise or
 * within nondet_tol. */
static tg_status check_reentrant(const gc_problem *p, int64_t row, int j, int64_t k,
                                 tg_tensor *const *grads, double *scratch) {
  for (int d = 0; d < p->n_diff; d++) {
    int64_t n = tg__gc_numel(p->inputs[p->diff[d]]);
    const double *first = p->jac[d] + row * n;
    tg_status st = tg__gc_read_grad(p, d, grads[d], scratch);
    if (st != TG_OK) return st;
    for (int64_t e = 0; e < n; e++)
      if (!tg__gc_reentrant_equal(first[e], scratch[e], p->opts.nondet_tol)) {
        char how[64];
        snprintf(how, sizeof how, "for output %d element %lld", j, (long long)k);
        return tg__gc_fail_not_reentrant(p, how, d, e, first[e], scratch[e]);
      }
  }
  return TG_OK;
}

tg_status tg__gc_full_analytical(gc_problem *p, tg_tensor *const *outs) {
  int n_roots = 0;
  for (int j = 0; j < p->n_outputs; j++) n_roots += p->outs[j].differentiable;
  if (n_roots == 0) return TG_OK; /* p->jac stays zero (calloc) */
  const tg_tensor **roots = tg__host_calloc((size_t)n_roots, sizeof *roots);
  tg_tensor **seeds = tg__host_calloc((size_t)n_roots, sizeof *seeds);
  const tg_tensor **targets = tg__host_calloc((size_t)p->n_diff, sizeof *targets);
  tg_tensor **grads = tg__host_calloc((size_t)p->n_diff, sizeof *grads);
  int64_t max_in = 1;
  for (int d = 0; d < p->n_diff; d++)
    if (tg__gc_numel(p->inputs[p->diff[d]]) > max_in) max_in = tg__gc_numel(p->inputs[p->diff[d]]);
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
      tg__gc_unravel(k, g->ndim, g->sizes, index);
      if ((st = tg_set(seeds[r], index, 1.0)) != TG_OK) break;
      int64_t row = g->offset + k;
      tg_scope scope = tg_scope_begin();
      st = tg_autograd_grad(n_roots, roots, (const tg_tensor *const *)seeds, p->n_diff, targets,
                            grads, keep, true);
      for (int d = 0; d < p->n_diff && st == TG_OK; d++) {
        int64_t n = tg__gc_numel(p->inputs[p->diff[d]]);
        st = tg__gc_read_grad(p, d, grads[d], p->jac[d] + row * n);
      }
      if (st == TG_OK)
        st = tg_autograd_grad(n_roots, roots, (const tg_tensor *const *)seeds, p->n_diff, targets,
                              grads, keep, true);
      if (st == TG_OK) st = check_reentrant(p, row, j, k, grads, scratch);
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
  int j = tg__gc_output_of_row(p, row);
  const gc_output *g = &p->outs[j];
  int64_t out_idx[TG_MAX_DIMS];
  tg__gc_unravel(row - g->offset, g->ndim, g->sizes, out_idx);
  char element[192];
  tg__gc_describe_element(p, input, e, element, sizeof element);
  double tol = p->opts.atol + p->opts.rtol * fabs(numerical);
  return tg__gc_fail(
      p,
      "%s: Jacobian mismatch for %s and output %d element %lld %s: "
      "numerical %.10g, analytical %.10g, difference %.3g (tolerance %.3g = atol %g + rtol %g "
      "* |numerical|)%s",
      p->name, element, j, (long long)(row - g->offset), tg__dims_str(g->ndim, out_idx), numerical,
      analytical, fabs(analytical - numerical), tol, p->opts.atol, p->opts.rtol,
      g->differentiable ? "" : "; the output does not require grad, so backward gives zero");
}

/* Evaluates fn with input element `index` of x set to value; values get the outputs. */
static tg_status evaluate_at(const gc_problem *p, tg_tensor *x, const int64_t *index, double value,
                             tg_tensor **outs, double *values) {
  tg_no_grad_begin();
  tg_status st = tg_set(x, index, value);
  tg_no_grad_end();
  return st == TG_OK ? tg__gc_evaluate_values(p, outs, values) : st;
}

/* Each column is compared with the analytical one as soon as it is known. Inputs are
 * restored exactly. */
tg_status tg__gc_full_numerical(gc_problem *p) {
  double *plus = tg__host_malloc(sizeof(double) * (size_t)(p->n_rows > 0 ? p->n_rows : 1));
  double *minus = tg__host_malloc(sizeof(double) * (size_t)(p->n_rows > 0 ? p->n_rows : 1));
  tg_tensor **outs = tg__host_calloc((size_t)p->n_outputs, sizeof *outs);
  tg_status st = TG_OK;
  if (!plus || !minus || !outs) st = tg_set_error(TG_ERR_MEMORY, "%s: out of memory", p->name);
  double eps = p->opts.eps;
  for (int d = 0; d < p->n_diff && st == TG_OK; d++) {
    tg_tensor *x = p->inputs[p->diff[d]];
    int64_t n = tg__gc_numel(x);
    for (int64_t e = 0; e < n && st == TG_OK; e++) {
      int64_t index[TG_MAX_DIMS];
      tg__gc_unravel(e, x->ndim, x->sizes, index);
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
