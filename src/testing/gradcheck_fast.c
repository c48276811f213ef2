/* Fast-mode gradient checking (PyTorch's gradcheck(fast_mode=True)): instead of the whole
 * Jacobian J, per differentiable input the scalar v^T J u for a random unit vector u over the
 * input's elements and v over the checked outputs' elements. Analytically it takes one
 * backward with grad_outputs v for all inputs at once (then a dot product with each u);
 * numerically two evaluations of fn per input, at x + eps u and x - eps u. So an op at a
 * realistic size costs a few forwards and backwards rather than one backward per output
 * element and two forwards per input element.
 *
 * The tolerance. u and v are drawn uniform in (0, 1] and then normalised (as PyTorch draws
 * them), so every entry is positive. Full mode accepts cell (r, c) when
 * |A - N| <= atol + rtol |N| (A analytical, N numerical); summing that with weights v_r u_c
 * >= 0 gives |v^T (A - N) u| <= atol sum(u) sum(v) + rtol v^T |N| u. The first term is
 * exactly what full mode's atol allows (PyTorch scales atol the same way). v^T |N| u needs
 * the whole Jacobian; sum_r v_r |(N u)_r| stands in for it: it is at least |v^T N u| (what
 * PyTorch uses) and equals v^T |N| u when the entries of each row of N share a sign, so fast
 * mode is stricter than full mode only where a row's entries cancel along u. That is why a
 * mismatch is checked again in full mode when the Jacobian is small enough (at most
 * fast_mode_report_limit cells): full mode names the elements, and when every element is
 * within tolerance the input passes, as it would in full mode. Above the limit the report
 * gives the projections, the tolerance's terms and the seed.
 *
 * What it can miss: a wrong cell moves v^T J u by only u_c v_r times its error, against a
 * tolerance that grows with the number of cells, so one wrong element among many may pass
 * (as in PyTorch). Fast mode is for ops at sizes full mode cannot afford; full mode on a
 * small sample of the same op is the element-exact check. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "testing/gradcheck_internal.h"
#include "tensor/host_memory.h"
#include "tensor/tensor_impl.h"

#define DEFAULT_REPORT_LIMIT ((uint64_t)1 << 20)

struct gc_fast {
  uint64_t seed;
  double *v; /* n_rows, over the checked outputs in row order */
  double sum_v;
  double **u;         /* per differentiable input, over its elements in row-major order */
  double *sum_u;      /* per differentiable input */
  double *analytical; /* per differentiable input: v^T J u from backward */
};

/* splitmix64: a few lines, the same numbers everywhere, independent of tg's generators. */
static uint64_t next_random(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15u);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

/* x[0..n) uniform in (0, 1], scaled to unit length; returns the sum of the entries. */
static double unit_vector(uint64_t *state, double *x, int64_t n) {
  double norm2 = 0, sum = 0;
  for (int64_t i = 0; i < n; i++) {
    x[i] = ((double)(next_random(state) >> 11) + 1.0) * 0x1.0p-53;
    norm2 += x[i] * x[i];
  }
  double scale = n > 0 ? 1.0 / sqrt(norm2) : 0.0;
  for (int64_t i = 0; i < n; i++) sum += x[i] *= scale;
  return sum;
}

static double dot(const double *a, const double *b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
  return s;
}

void tg__gc_fast_free(gc_fast *f) {
  if (!f) return;
  tg__host_free(f->v);
  tg__host_free(f->u ? f->u[0] : NULL); /* one block for every input */
  tg__host_free(f->u);
  tg__host_free(f->sum_u);
  tg__host_free(f->analytical);
  tg__host_free(f);
}

gc_fast *tg__gc_fast_new(const gc_problem *p) {
  gc_fast *f = tg__host_calloc(1, sizeof *f);
  int64_t total = 0;
  for (int d = 0; d < p->n_diff; d++) total += tg__gc_numel(p->inputs[p->diff[d]]);
  if (f) {
    f->seed = tg__gc_seed(&p->opts);
    f->v = tg__host_malloc(sizeof(double) * (size_t)(p->n_rows > 0 ? p->n_rows : 1));
    f->u = tg__host_calloc((size_t)p->n_diff, sizeof *f->u);
    if (f->u) f->u[0] = tg__host_malloc(sizeof(double) * (size_t)(total > 0 ? total : 1));
    f->sum_u = tg__host_calloc((size_t)p->n_diff, sizeof *f->sum_u);
    f->analytical = tg__host_calloc((size_t)p->n_diff, sizeof *f->analytical);
  }
  if (!f || !f->v || !f->u || !f->u[0] || !f->sum_u || !f->analytical) {
    tg__gc_fast_free(f);
    tg_set_error(TG_ERR_MEMORY, "%s: out of memory", p->name);
    return NULL;
  }
  uint64_t state = f->seed;
  f->sum_v = unit_vector(&state, f->v, p->n_rows);
  for (int d = 0; d < p->n_diff; d++) {
    int64_t n = tg__gc_numel(p->inputs[p->diff[d]]);
    if (d + 1 < p->n_diff) f->u[d + 1] = f->u[d] + n;
    f->sum_u[d] = unit_vector(&state, f->u[d], n);
  }
  return f;
}

/* ---- analytical: v^T J from one backward, dotted with each u ---- */

/* The backward with grad_outputs v, twice; the first run's gradients go to first[]. */
static tg_status backward_twice(gc_fast *f, const gc_problem *p, tg_tensor *const *outs,
                                const tg_tensor **roots, tg_tensor **seeds,
                                const tg_tensor **targets, tg_tensor **grads, double *first,
                                double *second) {
  int n_roots = 0;
  for (int j = 0; j < p->n_outputs; j++) {
    const gc_output *g = &p->outs[j];
    if (!g->differentiable) continue; /* a differentiable output is also a checked one */
    roots[n_roots] = outs[j];
    seeds[n_roots] =
        tg_from_data(g->ndim, g->sizes, f->v + g->offset,
                     (tg_options){.dtype = TG_F64, .device = outs[j]->storage->device});
    if (!seeds[n_roots++]) return tg_last_error();
  }
  tg_backward_options keep = {.retain_graph = true};
  for (int run = 0; run < 2; run++) {
    tg_status st = tg_autograd_grad(n_roots, roots, (const tg_tensor *const *)seeds, p->n_diff,
                                    targets, grads, keep, true);
    double *dst = run == 0 ? first : second;
    for (int d = 0; d < p->n_diff && st == TG_OK; d++) {
      int64_t n = tg__gc_numel(p->inputs[p->diff[d]]);
      st = tg__gc_read_grad(p, d, grads[d], dst);
      if (run == 0) {
        f->analytical[d] = dot(dst, f->u[d], n);
        dst += n;
        continue;
      }
      const double *before = first + (f->u[d] - f->u[0]);
      for (int64_t e = 0; e < n && st == TG_OK; e++)
        if (!tg__gc_reentrant_equal(before[e], dst[e], p->opts.nondet_tol))
          st = tg__gc_fail_not_reentrant(p, "with the same grad_outputs (fast mode's v)", d, e,
                                         before[e], dst[e]);
    }
    if (st != TG_OK) return st;
  }
  return TG_OK;
}

tg_status tg__gc_fast_analytical(gc_fast *f, const gc_problem *p, tg_tensor *const *outs) {
  int n_roots = 0;
  for (int j = 0; j < p->n_outputs; j++) n_roots += p->outs[j].differentiable;
  if (n_roots == 0) return TG_OK; /* backward gives zero: f->analytical stays 0 */
  int64_t total = 0, max_in = 1;
  for (int d = 0; d < p->n_diff; d++) {
    int64_t n = tg__gc_numel(p->inputs[p->diff[d]]);
    total += n;
    if (n > max_in) max_in = n;
  }
  const tg_tensor **roots = tg__host_calloc((size_t)n_roots, sizeof *roots);
  tg_tensor **seeds = tg__host_calloc((size_t)n_roots, sizeof *seeds);
  const tg_tensor **targets = tg__host_calloc((size_t)p->n_diff, sizeof *targets);
  tg_tensor **grads = tg__host_calloc((size_t)p->n_diff, sizeof *grads);
  double *first = tg__host_malloc(sizeof(double) * (size_t)(total > 0 ? total : 1));
  double *second = tg__host_malloc(sizeof(double) * (size_t)max_in);
  tg_status st = TG_OK;
  if (!roots || !seeds || !targets || !grads || !first || !second)
    st = tg_set_error(TG_ERR_MEMORY, "%s: out of memory", p->name);
  for (int d = 0; d < p->n_diff && st == TG_OK; d++) targets[d] = p->inputs[p->diff[d]];
  if (st == TG_OK) {
    tg_scope scope = tg_scope_begin();
    st = backward_twice(f, p, outs, roots, seeds, targets, grads, first, second);
    tg_scope_end(scope);
  }
  tg__host_free(roots);
  tg__host_free(seeds);
  tg__host_free(targets);
  tg__host_free(grads);
  tg__host_free(first);
  tg__host_free(second);
  return st;
}

/* ---- numerical: central differences along u, dotted with v ---- */

/* fn at x = orig + step * u (written in place); the checked outputs into values. */
static tg_status evaluate_along(const gc_problem *p, tg_tensor *x, const double *orig,
                                const double *u, double step, double *shifted, tg_tensor **outs,
                                double *values) {
  int64_t n = tg__gc_numel(x);
  for (int64_t i = 0; i < n; i++) shifted[i] = orig[i] + step * u[i];
  tg_status st = tg__gc_write_input(x, shifted);
  return st == TG_OK ? tg__gc_evaluate_values(p, outs, values) : st;
}

typedef struct projection {
  double analytical, numerical;
  double weight; /* sum_r v_r |(N u)_r|, the rtol term's stand-in for v^T |N| u */
  double tol;
} projection;

static tg_status report_mismatch(const gc_fast *f, const gc_problem *p, int d, projection q) {
  const tg_tensor *x = p->inputs[p->diff[d]];
  uint64_t limit =
      p->opts.fast_mode_report_limit ? p->opts.fast_mode_report_limit : DEFAULT_REPORT_LIMIT;
  uint64_t cells = (uint64_t)p->n_rows * (uint64_t)tg__gc_numel(x);
  char what[64];
  tg__gc_describe_input(p, p->diff[d], what, sizeof what);
  if (cells > limit)
    return tg__gc_fail(
        p,
        "%s: fast mode: v^T J u mismatch for %s %s: numerical %.10g, analytical %.10g, "
        "difference %.3g (tolerance %.3g = atol %g * sum(u) %.4g * sum(v) %.4g + rtol %g * "
        "sum(v * |J u|) %.4g; seed %llu). Its Jacobian, %lld output elements x %lld input "
        "elements = %llu cells, is over fast_mode_report_limit %llu: too large for an element "
        "report (raise the limit, or run full mode on a smaller problem, to name the elements)",
        p->name, what, tg__sizes_str(x), q.numerical, q.analytical,
        fabs(q.analytical - q.numerical), q.tol, p->opts.atol, f->sum_u[d], f->sum_v, p->opts.rtol,
        q.weight, (unsigned long long)f->seed, (long long)p->n_rows, (long long)tg__gc_numel(x),
        (unsigned long long)cells, (unsigned long long)limit);

  /* Small enough: full mode on this input alone, for the element-naming report. */
  gc_problem full = *p;
  full.n_diff = 1;
  full.diff = &p->diff[d];
  full.opts.fast_mode = false;
  full.opts.skip_undefined_grad_check = true; /* done already, on the whole problem */
  full.opts.quiet = true;
  tg_status st = tg__gc_run(&full);
  if (st == TG_OK) return TG_OK; /* every element within tolerance: see the top of the file */
  if (st != TG_ERR_GRADCHECK) return st;
  char report[1024];
  snprintf(report, sizeof report, "%s", tg_last_error_message());
  return tg__gc_fail(p,
                     "%s (found by fast mode: v^T J u for %s numerical %.10g, analytical %.10g, "
                     "tolerance %.3g; seed %llu)",
                     report, what, q.numerical, q.analytical, q.tol, (unsigned long long)f->seed);
}

/* One input: perturbs it along u both ways, restores it exactly, compares. */
static tg_status check_input(const gc_fast *f, const gc_problem *p, int d, double *orig,
                             double *shifted, double *plus, double *minus, tg_tensor **outs) {
  tg_tensor *x = p->inputs[p->diff[d]];
  int64_t n = tg__gc_numel(x);
  double eps = p->opts.eps;
  tg_status st = tg_to_host_array(x, orig, sizeof(double) * (size_t)n);
  if (st != TG_OK) return st;
  st = evaluate_along(p, x, orig, f->u[d], eps, shifted, outs, plus);
  if (st == TG_OK) st = evaluate_along(p, x, orig, f->u[d], -eps, shifted, outs, minus);
  tg_status restored = tg__gc_write_input(x, orig);
  if (st == TG_OK) st = restored;
  if (st != TG_OK) return st;
  projection q = {.analytical = f->analytical[d]};
  for (int64_t r = 0; r < p->n_rows; r++) {
    double slope = (plus[r] - minus[r]) / (2 * eps); /* (N u)_r */
    q.numerical += f->v[r] * slope;
    q.weight += f->v[r] * fabs(slope);
  }
  q.tol = p->opts.atol * f->sum_u[d] * f->sum_v + p->opts.rtol * q.weight;
  /* Written so that a NaN on either side fails. */
  if (fabs(q.analytical - q.numerical) <= q.tol) return TG_OK;
  return report_mismatch(f, p, d, q);
}

tg_status tg__gc_fast_numerical(gc_fast *f, const gc_problem *p) {
  int64_t max_in = 1;
  for (int d = 0; d < p->n_diff; d++)
    if (tg__gc_numel(p->inputs[p->diff[d]]) > max_in) max_in = tg__gc_numel(p->inputs[p->diff[d]]);
  size_t rows = (size_t)(p->n_rows > 0 ? p->n_rows : 1);
  double *orig = tg__host_malloc(sizeof(double) * (size_t)max_in);
  double *shifted = tg__host_malloc(sizeof(double) * (size_t)max_in);
  double *plus = tg__host_malloc(sizeof(double) * rows);
  double *minus = tg__host_malloc(sizeof(double) * rows);
  tg_tensor **outs = tg__host_calloc((size_t)p->n_outputs, sizeof *outs);
  tg_status st = TG_OK;
  if (!orig || !shifted || !plus || !minus || !outs)
    st = tg_set_error(TG_ERR_MEMORY, "%s: out of memory", p->name);
  for (int d = 0; d < p->n_diff && st == TG_OK; d++)
    if (p->n_rows > 0 && tg__gc_numel(p->inputs[p->diff[d]]) > 0)
      st = check_input(f, p, d, orig, shifted, plus, minus, outs);
  tg__host_free(orig);
  tg__host_free(shifted);
  tg__host_free(plus);
  tg__host_free(minus);
  tg__host_free(outs);
  return st;
}
