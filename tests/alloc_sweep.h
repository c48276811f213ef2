/* The allocation-failure sweep shared by tests/tensor/test_alloc_failure.c and the CUDA suite: a
 * step runs once cleanly, counting its host allocations N (tensor/host_memory.h) and
 * recording its results, then once more for every k in 1..N+2 with the k-th allocation
 * failing. Each run must report TG_ERR_MEMORY with a message or give the recorded results,
 * leave no error pending after a success, no scope open and no object alive. All of it runs
 * in one process (Criterion forks per test, not per k). Include after testutil.h. */
#ifndef TG_ALLOC_SWEEP_H
#define TG_ALLOC_SWEEP_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "tensor/host_memory.h"

enum { MAX_RESULTS = 1024, B = 3, I = 4, S = 5 };

/* A step: builds what it needs, runs, writes its results into out (up to MAX_RESULTS) and
 * frees everything, returning the first error. */
typedef tg_status (*step_fn)(void *user, double *out, int *n_out);

/* A NULL without an error recorded: a bug the sweep reports. */
#define NULL_WITHOUT_ERROR ((tg_status)1000)
static tg_status status_of(const void *p) {
  if (p) return TG_OK;
  return tg_last_error() != TG_OK ? tg_last_error() : NULL_WITHOUT_ERROR;
}

/* Relative tolerance of the comparison with the clean run: 0, exact, unless a device's
 * reductions may add in another order from run to run. */
static double sweep_rtol = 0.0;

/* The sweep in progress, for messages. */
static const char *current_sweep = "";
static int64_t current_k;

/* A call that returned TG_OK must not leave an error behind (one it swallowed). */
static tg_status clean(tg_status st) {
  if (st == TG_OK)
    cr_assert_eq(tg_last_error(), TG_OK,
                 "%s, k=%lld: a call succeeded with an error pending: %s (%s)", current_sweep,
                 (long long)current_k, tg_status_name(tg_last_error()), tg_last_error_message());
  return st;
}

/* Appends t's elements (any dtype, any strides) to out. */
static tg_status append(const tg_tensor *t, double *out, int *n) {
  if (!t) return status_of(t);
  int64_t numel = tg_numel(t);
  cr_assert(*n + numel <= MAX_RESULTS, "too many results");
  tg_scope sc = tg_scope_begin();
  tg_tensor *d = tg_contiguous(tg_to_device(tg_to_dtype(t, TG_F64), TG_DEVICE_CPU));
  tg_status st = status_of(d);
  if (st == TG_OK) st = clean(tg_to_host_array(d, out + *n, sizeof(double) * (size_t)numel));
  tg_scope_end(sc);
  if (st == TG_OK) *n += (int)numel;
  return st;
}

typedef struct sweep_result {
  int64_t n;        /* allocations of one clean step */
  int failed;       /* runs that reported an error */
  int succeeded;    /* runs that succeeded although an allocation failed */
  int not_injected; /* runs where the k-th allocation never came */
} sweep_result;

/* One run of step in a scope of its own, which owns whatever step makes outside its own
 * scopes; the sweep checks that closing it leaves nothing alive. */
static tg_status scoped_step(step_fn step, void *user, double *out, int *n_out) {
  tg_scope sc = tg_scope_begin();
  tg_status st = step(user, out, n_out);
  tg_scope_end(sc);
  return st;
}

static sweep_result sweep(const char *name, step_fn step, void *user) {
  static double ref[MAX_RESULTS], got[MAX_RESULTS];
  sweep_result r = {0};
  int64_t live = tg_live_objects();
  int depth = tg_scope_depth();
  int n_ref = 0;
  current_sweep = name;
  current_k = 0;
  tg_clear_error();
  int64_t before = tg__host_allocation_count();
  tg_status st = scoped_step(step, user, ref, &n_ref);
  r.n = tg__host_allocation_count() - before;
  cr_assert_eq(st, TG_OK, "%s: clean run failed: %s", name, tg_last_error_message());
  cr_assert_eq(tg_last_error(), TG_OK, "%s: clean run left an error: %s", name,
               tg_last_error_message());
  cr_assert_gt(r.n, 0, "%s: no allocation counted", name);

  for (int64_t k = 1; k <= r.n + 2; k++) {
    tg_clear_error();
    int64_t fired = tg__host_injected_failures();
    int n_got = 0;
    current_k = k;
    tg__host_fail_allocation(k);
    st = scoped_step(step, user, got, &n_got);
    tg__host_fail_allocation(0);
    bool injected = tg__host_injected_failures() != fired;
    cr_assert_neq(st, NULL_WITHOUT_ERROR, "%s, k=%lld: NULL returned with no error recorded", name,
                  (long long)k);
    if (st == TG_OK) {
      cr_assert_eq(tg_last_error(), TG_OK, "%s, k=%lld: success with an error pending: %s (%s)",
                   name, (long long)k, tg_status_name(tg_last_error()), tg_last_error_message());
      cr_assert_eq(n_got, n_ref, "%s, k=%lld: %d results, expected %d", name, (long long)k, n_got,
                   n_ref);
      for (int i = 0; i < n_ref; i++)
        cr_assert(fabs(got[i] - ref[i]) <= sweep_rtol * fabs(ref[i]) ||
                      (isnan(got[i]) && isnan(ref[i])),
                  "%s, k=%lld: result %d is %.17g, expected %.17g", name, (long long)k, i, got[i],
                  ref[i]);
      if (injected)
        r.succeeded++;
      else
        r.not_injected++;
    } else {
      cr_assert(injected, "%s, k=%lld: failed with no allocation failing: %s", name, (long long)k,
                tg_last_error_message());
      cr_assert_eq(tg_last_error(), TG_ERR_MEMORY, "%s, k=%lld: got %s (%s), expected %s", name,
                   (long long)k, tg_status_name(tg_last_error()), tg_last_error_message(),
                   tg_status_name(TG_ERR_MEMORY));
      cr_assert(tg_last_error_message()[0] != '\0', "%s, k=%lld: no error message", name,
                (long long)k);
      r.failed++;
    }
    tg_clear_error();
    cr_assert_eq(tg_scope_depth(), depth, "%s, k=%lld: %d scope(s) left open", name, (long long)k,
                 tg_scope_depth() - depth);
    cr_assert_eq(tg_live_objects(), live, "%s, k=%lld: %lld live objects, expected %lld", name,
                 (long long)k, (long long)tg_live_objects(), (long long)live);
  }
  cr_assert(r.not_injected >= 2, "%s: the sweep did not reach past the last allocation", name);
  cr_log_info("%s: %lld allocations swept: %d errors, %d successes despite the failure, %d "
              "past the end",
              name, (long long)r.n, r.failed, r.succeeded, r.not_injected);
  return r;
}

/* ---- an LLTM training step: the cell over two time steps, a Linear readout, mse_loss,
 * backward, one Adam step; modules, optimizer and data are made inside the step ---- */

typedef struct lltm_step_case {
  tg_lltm_impl impl;
  tg_device device;
} lltm_step_case;

/* inline: not every program that includes this sweeps it */
static inline tg_status lltm_training_step(void *user, double *out, int *n_out) {
  const lltm_step_case *c0 = user;
  tg_lltm_impl impl = c0->impl;
  tg_options opts = {.device = c0->device};
  tg_generator *gen = tg_generator_new(7);
  tg_lltm_cell *cell = gen ? tg_lltm_cell_new(I, S, opts, gen) : NULL;
  tg_linear *readout = cell ? tg_linear_new(S, 1, true, opts, gen) : NULL;
  tg_optimizer *opt = NULL;
  tg_tensor *params[4];
  int n_params = 0;
  if (readout) {
    n_params = tg_lltm_cell_parameters(cell, params, 2);
    n_params += tg_linear_parameters(readout, params + n_params, 2);
    opt = tg_adam_new(n_params, params, (tg_adam_options){.lr = 1e-2});
  }
  tg_status st = status_of(opt);

  if (st == TG_OK) {
    tg_scope sc = tg_scope_begin();
    tg_tensor *h = tg_zeros(TG_SHAPE(B, S), opts);
    tg_tensor *c = tg_zeros(TG_SHAPE(B, S), opts);
    tg_tensor *target = tg_randn(TG_SHAPE(B, 1), opts, gen);
    tg_tensor *loss = tg_zeros(0, NULL, opts);
    for (int t = 0; t < 2 && st == TG_OK; t++) {
      tg_tensor *x = tg_randn(TG_SHAPE(B, I), opts, gen);
      st = tg_lltm_cell_forward(cell, impl, x, h, c, &h, &c);
      if (st == TG_OK)
        st = status_of(loss = tg_add(loss, tg_mse_loss(tg_linear_forward(readout, h), target)));
    }
    if (st == TG_OK) st = append(loss, out, n_out);
    if (st == TG_OK) st = clean(tg_optimizer_zero_grad(opt));
    if (st == TG_OK) st = clean(tg_backward(loss, NULL));
    if (st == TG_OK) st = clean(tg_optimizer_step(opt));
    tg_scope_end(sc);
  }
  for (int p = 0; p < n_params && st == TG_OK; p++) st = append(params[p], out, n_out);
  for (int p = 0; p < n_params && st == TG_OK; p++) st = append(tg_grad(params[p]), out, n_out);

  tg_optimizer_free(opt);
  tg_linear_free(readout);
  tg_lltm_cell_free(cell);
  tg_generator_free(gen);
  return st;
}

#endif
