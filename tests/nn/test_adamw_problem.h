/* The small problem that tests/nn/python/optim_refs.py trains with PyTorch, written again
 * in tg: W [3,4], b [4], c [2,2] filled by closed formulas, fixed x [5,3] and y [5,4], and
 * loss = sum(tanh(x @ W + b) * y) + 0.5 * sum(c^3). Shared by test_adamw.c and
 * test_param_groups.c. */
#ifndef TG_TEST_ADAMW_PROBLEM_H
#define TG_TEST_ADAMW_PROBLEM_H

#include <math.h>

#include "testutil.h"

typedef struct problem {
  tg_tensor *W, *b, *c; /* owned references (leaves that require grad) */
  tg_tensor *x, *y;
} problem;

/* NULL (with the error) on failure: the allocation sweeps build problems too. */
static inline tg_tensor *problem_fill(int n, int ndim, const int64_t *sizes, tg_dtype dtype,
                                      double (*f)(int), bool param) {
  double v[32];
  for (int i = 0; i < n; i++) v[i] = f(i);
  tg_scope s = tg_scope_begin();
  tg_tensor *t = tg_to_dtype(tg_from_data(ndim, sizes, v, (tg_options){.dtype = TG_F64}), dtype);
  if (t) t = tg_retain(tg_clone(t)); /* a leaf of its own */
  tg_scope_end(s);
  if (t && param && tg_set_requires_grad(t, true) != TG_OK) {
    tg_release(t);
    t = NULL;
  }
  return t;
}

static inline double fill_W(int i) { return 0.5 * sin(0.7 * i + 0.1); }
static inline double fill_b(int i) { return 0.3 * cos(1.3 * i); }
static inline double fill_c(int i) { return 0.2 * i - 0.3; }
static inline double fill_x(int i) { return sin(0.37 * i + 0.5); }
static inline double fill_y(int i) { return cos(0.23 * i); }

static inline problem problem_new(tg_dtype dtype) {
  return (problem){
      .W = problem_fill(12, TG_SHAPE(3, 4), dtype, fill_W, true),
      .b = problem_fill(4, TG_SHAPE(4), dtype, fill_b, true),
      .c = problem_fill(4, TG_SHAPE(2, 2), dtype, fill_c, true),
      .x = problem_fill(15, TG_SHAPE(5, 3), dtype, fill_x, false),
      .y = problem_fill(20, TG_SHAPE(5, 4), dtype, fill_y, false),
  };
}

/* Whether every tensor of p was made (else the error is set). */
static inline bool problem_ok(const problem *p) { return p->W && p->b && p->c && p->x && p->y; }

static inline void problem_free(problem *p) {
  tg_release(p->W);
  tg_release(p->b);
  tg_release(p->c);
  tg_release(p->x);
  tg_release(p->y);
}

/* sum(tanh(x @ W + b) * y) over rows [row0, row0 + rows) of x and y (scope-owned; NULL with
 * the error on failure). */
static inline tg_tensor *problem_fit(const problem *p, int64_t row0, int64_t rows) {
  tg_tensor *x = tg_narrow(p->x, 0, row0, rows), *y = tg_narrow(p->y, 0, row0, rows);
  return tg_sum(tg_mul(tg_tanh(tg_add(tg_mm(x, p->W), p->b)), y));
}

/* PyTorch's loss: the fit of all 5 rows + 0.5 * sum(c^3). */
static inline tg_tensor *problem_loss(const problem *p) {
  return tg_add_scaled(problem_fit(p, 0, 5), tg_sum(tg_mul(tg_mul(p->c, p->c), p->c)), 0.5);
}

/* zero_grad, loss (its value to *loss_value), backward, step. */
static inline tg_status problem_step(const problem *p, tg_optimizer *opt, double *loss_value) {
  tg_scope s = tg_scope_begin();
  tg_status st = tg_optimizer_zero_grad(opt);
  tg_tensor *loss = st == TG_OK ? problem_loss(p) : NULL;
  if (st == TG_OK && !loss) st = tg_last_error();
  if (st == TG_OK && loss_value) st = tg_item(loss, loss_value);
  if (st == TG_OK) st = tg_backward(loss, NULL);
  if (st == TG_OK) st = tg_optimizer_step(opt);
  tg_scope_end(s);
  return st;
}

#endif
