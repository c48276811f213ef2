/* Gradient checking, shared between its files: gradcheck.c (arguments, evaluating fn, the
 * entry points), gradcheck_full.c (the full Jacobian), gradcheck_fast.c (fast mode's
 * projections) and gradcheck_undefined.c (backward with outputs that received no gradient).
 * Not part of the public API. */
#ifndef TG_GRADCHECK_INTERNAL_H
#define TG_GRADCHECK_INTERNAL_H

#include "tg/testing.h"

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
  tg_gradcheck_options opts; /* with the defaults filled in */
  gc_output *outs;
  int64_t n_rows; /* elements of all checked outputs */
  int n_diff;     /* inputs that require grad */
  int *diff;      /* their indices */
  double **jac;   /* full mode, per differentiable input: n_rows x numel, row-major */
} gc_problem;

int64_t tg__gc_numel(const tg_tensor *t);
/* The index of row-major element flat of a tensor of the given sizes. */
void tg__gc_unravel(int64_t flat, int ndim, const int64_t *sizes, int64_t *index);
/* "input 2", or for gradgradcheck's extra inputs "upstream gradient 0 (input 2)". */
void tg__gc_describe_input(const gc_problem *p, int i, char *buf, size_t len);
/* "input 2 element 5 [1, 2]": element e (row-major) of input i, described as above. */
void tg__gc_describe_element(const gc_problem *p, int i, int64_t e, char *buf, size_t len);
/* The output that row belongs to (a checked one). */
int tg__gc_output_of_row(const gc_problem *p, int64_t row);

/* Runs fn into outs (scope-owned results) and checks they were all set. */
tg_status tg__gc_evaluate(const gc_problem *p, tg_tensor **outs);
/* tg__gc_evaluate in a scope of its own, the checked outputs read into values[n_rows]. */
tg_status tg__gc_evaluate_values(const gc_problem *p, tg_tensor **outs, double *values);
/* Copies backward's gradient g for differentiable input k into dst (zeros when g is NULL:
 * allow_unused), after checking its sizes and dtype. */
tg_status tg__gc_read_grad(const gc_problem *p, int k, const tg_tensor *g, double *dst);
/* Writes values (row-major, numel of x) into x in place, outside the tape. */
tg_status tg__gc_write_input(tg_tensor *x, const double *values);

/* Two backward runs over one graph agree: bitwise when tol is 0, else within tol. */
bool tg__gc_reentrant_equal(double first, double second, double tol);
/* Sets TG_ERR_GRADCHECK with the message and prints it to stderr unless opts.quiet. */
tg_status tg__gc_fail(const gc_problem *p, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* tg__gc_fail for two backward runs that disagree (tg__gc_reentrant_equal) on element e of
 * differentiable input d: "backward is not re-entrant: running it twice <how> gave ...". */
tg_status tg__gc_fail_not_reentrant(const gc_problem *p, const char *how, int d, int64_t e,
                                    double first, double second);

/* Evaluates fn at the inputs, reads what backward says (the Jacobian or, in fast mode, its
 * projections), checks backward with outputs left out, then compares with central
 * differences. p->outs and p->jac are allocated and freed inside. */
tg_status tg__gc_run(gc_problem *p);

/* opts->seed, or the fixed default for 0. */
uint64_t tg__gc_seed(const tg_gradcheck_options *opts);

/* ---- full mode (gradcheck_full.c) ---- */
/* Fills p->jac (allocated, zeroed) row by row from the graph of outs, running each
 * backward twice to check re-entrancy. */
tg_status tg__gc_full_analytical(gc_problem *p, tg_tensor *const *outs);
/* Central differences for every element of every differentiable input, compared with
 * p->jac; the report names input, output, elements and both values. */
tg_status tg__gc_full_numerical(gc_problem *p);

/* ---- fast mode (gradcheck_fast.c) ---- */
typedef struct gc_fast gc_fast;
/* u and v for a problem whose outputs are described; NULL on error. */
gc_fast *tg__gc_fast_new(const gc_problem *p);
void tg__gc_fast_free(gc_fast *f);
/* v^T J u per input from one backward with grad_outputs v (twice: re-entrancy). */
tg_status tg__gc_fast_analytical(gc_fast *f, const gc_problem *p, tg_tensor *const *outs);
/* The same from central differences along u; a mismatch is checked again in full mode when
 * the Jacobian is small enough, for the element-naming report. */
tg_status tg__gc_fast_numerical(gc_fast *f, const gc_problem *p);

/* ---- outputs that received no gradient (gradcheck_undefined.c) ---- */
/* For fn with two or more differentiable outputs (outs, graph alive): backward with each
 * left out of the roots must equal backward with a zero gradient for it. */
tg_status tg__gc_undefined_grads(const gc_problem *p, tg_tensor *const *outs);

#endif
