/* Backward with outputs that received no gradient (PyTorch's check_undefined_grad). When a
 * loss uses only some outputs of an op, the others get no gradient: a materialising op sees
 * zeros, an op with TG_OP_NO_MATERIALIZE_GRADS sees NULL and must treat it as zero. For fn
 * with two or more differentiable outputs, each is left out of tg_autograd_grad's roots
 * once, with random gradients for the others; the result must equal backward over all roots
 * with a zero gradient for the one left out (as values, -0 equal to +0, or within
 * nondet_tol), and backward must not fail. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "testing/gradcheck_internal.h"
#include "tensor/host_memory.h"
#include "tensor/tensor_impl.h"

/* Keeps these upstream gradients apart from gradgradcheck's, drawn from the same seed. */
#define SEED_SALT 0x756e646566u

typedef struct undefined_check {
  const gc_problem *p;
  int n_roots;
  int *output;             /* fn's output index of each root */
  const tg_tensor **roots; /* all differentiable outputs */
  tg_tensor **seeds;       /* a random gradient for each */
  const tg_tensor **partial_roots;
  tg_tensor **partial_seeds;
  const tg_tensor **targets;
  tg_tensor **grads;
  double *left_out, *zero_seeded; /* one input's gradient, both ways */
} undefined_check;

static bool values_agree(double a, double b, double tol) {
  return a == b || (isnan(a) && isnan(b)) || fabs(a - b) <= tol;
}

static tg_status report_failure(const undefined_check *c, int j) {
  if (tg_last_error() == TG_ERR_MEMORY) return TG_ERR_MEMORY;
  char inner[1024];
  snprintf(inner, sizeof inner, "%s", tg_last_error_message());
  return tg__gc_fail(c->p,
                     "%s: backward failed with output %d left out of the roots (it received no "
                     "gradient: a NULL grad_output for an op with TG_OP_NO_MATERIALIZE_GRADS, "
                     "which backward must treat as zero): %s",
                     c->p->name, j, inner);
}

static tg_status report_mismatch(const undefined_check *c, int j, int d, int64_t e) {
  const gc_problem *p = c->p;
  char element[192];
  tg__gc_describe_element(p, p->diff[d], e, element, sizeof element);
  double a = c->left_out[e], b = c->zero_seeded[e];
  return tg__gc_fail(p,
                     "%s: backward mishandles an output that received no gradient: with output %d "
                     "left out of the roots (a NULL grad_output for an op with "
                     "TG_OP_NO_MATERIALIZE_GRADS) the gradient of %s is %.10g, "
                     "with a zero gradient for output %d it is %.10g (difference %.3g, nondet_tol "
                     "%g): a missing gradient must count as zero",
                     p->name, j, element, a, j, b, fabs(a - b), p->opts.nondet_tol);
}

/* Root r left out, then zero-seeded; the two results compared input by input. */
static tg_status leave_out(undefined_check *c, int r) {
  const gc_problem *p = c->p;
  const int j = c->output[r];
  tg_backward_options keep = {.retain_graph = true};
  int k = 0;
  for (int s = 0; s < c->n_roots; s++)
    if (s != r) {
      c->partial_roots[k] = c->roots[s];
      c->partial_seeds[k++] = c->seeds[s];
    }
  if (tg_autograd_grad(k, c->partial_roots, (const tg_tensor *const *)c->partial_seeds, p->n_diff,
                       c->targets, c->grads, keep, true) != TG_OK)
    return report_failure(c, j);
  tg_tensor **left = tg__host_calloc((size_t)p->n_diff, sizeof *left);
  if (!left) return tg_set_error(TG_ERR_MEMORY, "%s: out of memory", p->name);
  memcpy(left, c->grads, sizeof *left * (size_t)p->n_diff);

  tg_tensor *given = c->seeds[r];
  tg_status st = (c->seeds[r] = tg_zeros_like(c->roots[r])) ? TG_OK : tg_last_error();
  if (st == TG_OK)
    st = tg_autograd_grad(c->n_roots, c->roots, (const tg_tensor *const *)c->seeds, p->n_diff,
                          c->targets, c->grads, keep, true);
  c->seeds[r] = given;
  for (int d = 0; d < p->n_diff && st == TG_OK; d++) {
    int64_t n = tg__gc_numel(p->inputs[p->diff[d]]);
    st = tg__gc_read_grad(p, d, left[d], c->left_out);
    if (st == TG_OK) st = tg__gc_read_grad(p, d, c->grads[d], c->zero_seeded);
    for (int64_t e = 0; e < n && st == TG_OK; e++)
      if (!values_agree(c->left_out[e], c->zero_seeded[e], p->opts.nondet_tol))
        st = report_mismatch(c, j, d, e);
  }
  tg__host_free(left);
  return st;
}

static tg_status run_check(undefined_check *c, tg_tensor *const *outs, tg_generator *gen) {
  const gc_problem *p = c->p;
  int r = 0;
  for (int j = 0; j < p->n_outputs; j++) {
    if (!p->outs[j].differentiable) continue;
    const tg_tensor *o = outs[j];
    c->output[r] = j;
    c->roots[r] = o;
    c->seeds[r] = tg_randn(o->ndim, o->sizes,
                           (tg_options){.dtype = TG_F64, .device = o->storage->device}, gen);
    if (!c->seeds[r++]) return tg_last_error();
  }
  for (int d = 0; d < p->n_diff; d++) c->targets[d] = p->inputs[p->diff[d]];
  for (r = 0; r < c->n_roots; r++) {
    tg_scope scope = tg_scope_begin();
    tg_status st = leave_out(c, r);
    tg_scope_end(scope);
    if (st != TG_OK) return st;
  }
  return TG_OK;
}

tg_status tg__gc_undefined_grads(const gc_problem *p, tg_tensor *const *outs) {
  undefined_check c = {.p = p};
  for (int j = 0; j < p->n_outputs; j++) c.n_roots += p->outs[j].differentiable;
  if (c.n_roots < 2) return TG_OK;
  int64_t max_in = 1;
  for (int d = 0; d < p->n_diff; d++)
    if (tg__gc_numel(p->inputs[p->diff[d]]) > max_in) max_in = tg__gc_numel(p->inputs[p->diff[d]]);
  size_t n = (size_t)c.n_roots;
  c.output = tg__host_calloc(n, sizeof *c.output);
  c.roots = tg__host_calloc(n, sizeof *c.roots);
  c.seeds = tg__host_calloc(n, sizeof *c.seeds);
  c.partial_roots = tg__host_calloc(n, sizeof *c.partial_roots);
  c.partial_seeds = tg__host_calloc(n, sizeof *c.partial_seeds);
  c.targets = tg__host_calloc((size_t)p->n_diff, sizeof *c.targets);
  c.grads = tg__host_calloc((size_t)p->n_diff, sizeof *c.grads);
  c.left_out = tg__host_malloc(sizeof(double) * (size_t)max_in);
  c.zero_seeded = tg__host_malloc(sizeof(double) * (size_t)max_in);
  tg_generator *gen = tg_generator_new(tg__gc_seed(&p->opts) ^ SEED_SALT);
  tg_status st = TG_OK;
  if (!c.output || !c.roots || !c.seeds || !c.partial_roots || !c.partial_seeds || !c.targets ||
      !c.grads || !c.left_out || !c.zero_seeded || !gen)
    st = tg_set_error(TG_ERR_MEMORY, "%s: out of memory", p->name);
  if (st == TG_OK) {
    tg_scope scope = tg_scope_begin();
    st = run_check(&c, outs, gen);
    tg_scope_end(scope);
  }
  tg_generator_free(gen);
  tg__host_free(c.output);
  tg__host_free(c.roots);
  tg__host_free(c.seeds);
  tg__host_free(c.partial_roots);
  tg__host_free(c.partial_seeds);
  tg__host_free(c.targets);
  tg__host_free(c.grads);
  tg__host_free(c.left_out);
  tg__host_free(c.zero_seeded);
  return st;
}
