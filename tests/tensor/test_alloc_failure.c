/* Allocation failure: every host allocation tg makes can fail (tensor/host_memory.h), and
 * whichever one does, a call reports an error or gives the right answer; it never crashes,
 * leaks, returns a freed tensor or succeeds with an error pending.
 *
 * The sweeps (tests/alloc_sweep.h) fail every allocation of a step in turn. */
#include "testutil.h"

#include "alloc_sweep.h"

TG_TEST(alloc_failure, fused_training_step) {
  lltm_step_case c = {TG_LLTM_FUSED, TG_DEVICE_CPU};
  sweep_result r = sweep("fused LLTM training step", lltm_training_step, &c);
  cr_assert_gt(r.failed, 0);
}

TG_TEST(alloc_failure, composed_training_step) {
  lltm_step_case c = {TG_LLTM_COMPOSED, TG_DEVICE_CPU};
  sweep_result r = sweep("composed LLTM training step", lltm_training_step, &c);
  cr_assert_gt(r.failed, 0);
}

/* ---- generic ops, forward and backward ---- */

typedef enum generic_case {
  SUM_TRANSPOSED,
  SUM_NARROWED,
  MM,
  MM_COPIED,
  CAT,
  COPY,
  WHERE
} generic_case;

static tg_status generic_step(void *user, double *out, int *n_out) {
  generic_case which = *(const generic_case *)user;
  tg_generator *gen = tg_generator_new(3);
  tg_status st = status_of(gen);
  tg_scope sc = tg_scope_begin();
  tg_tensor *a = gen ? tg_randn(TG_SHAPE(4, 6), TG_OPTS(.requires_grad = true), gen) : NULL;
  tg_tensor *b = a ? tg_randn(TG_SHAPE(6, 5), TG_OPTS(.requires_grad = true), gen) : NULL;
  tg_tensor *y = NULL;
  if (st == TG_OK && (st = status_of(b)) == TG_OK) {
    switch (which) {
    case SUM_TRANSPOSED:
      y = tg_sum(tg_t(a));
      break; /* dense, not contiguous */
    case SUM_NARROWED:
      y = tg_sum(tg_narrow(tg_t(a), 0, 1, 4));
      break; /* not dense */
    case MM:
      y = tg_mm(a, b);
      break;
    case MM_COPIED: /* a's columns 2 apart: no unit stride, so gemm copies it */
      y = tg_mm(tg_slice(a, 1, 0, 6, 2), tg_slice(b, 0, 0, 6, 2));
      break;
    case CAT:
      y = tg_cat(3, (const tg_tensor *const[]){a, tg_t(b), tg_mul_scalar(a, 2.0)}, 0);
      break;
    case COPY: /* recorded: a column of b, broadcast and converted, over a's history */
      y = tg_mul_scalar(a, 2.0);
      if (y && tg_copy_(y, tg_to_dtype(tg_select(b, 1, 0), TG_F64)) != TG_OK) y = NULL;
      break;
    case WHERE: { /* a ternary kernel, and relu's backward, which is a where */
      tg_tensor *c = tg_narrow(tg_t(b), 0, 0, 4);
      y = tg_relu(tg_where(tg_lt(a, c), a, c));
      break;
    }
    }
    st = append(y, out, n_out);
  }
  if (st == TG_OK) st = clean(tg_backward(tg_sum(tg_mul(y, y)), NULL));
  if (st == TG_OK) st = append(tg_grad(a), out, n_out);
  if (st == TG_OK && which != SUM_TRANSPOSED && which != SUM_NARROWED)
    st = append(tg_grad(b), out, n_out);
  tg_scope_end(sc);
  tg_generator_free(gen);
  return st;
}

TG_TEST(alloc_failure, generic_ops) {
  static const struct {
    generic_case which;
    const char *name;
  } cases[] = {{SUM_TRANSPOSED, "sum of a transposed tensor"},
               {SUM_NARROWED, "sum of a narrowed transposed tensor"},
               {MM, "mm"},
               {MM_COPIED, "mm of an operand gemm copies"},
               {CAT, "cat"},
               {COPY, "copy_ recorded"},
               {WHERE, "relu of where"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    generic_case which = cases[i].which;
    sweep(cases[i].name, generic_step, &which);
  }
}

/* ---- the bugs of issue 8, one by one ---- */

/* A scope that must grow to register an op's result: the op fails cleanly, never returns a
 * released tensor. */
static tg_status add_scalar_in_full_scope(void *user, double *out, int *n_out) {
  const tg_tensor *x = user;
  tg_status st = TG_OK;
  tg_scope sc = tg_scope_begin();
  for (int i = 0; i < 16 && st == TG_OK; i++)
    st = status_of(tg_zeros(TG_SHAPE(2), TG_OPTS_DEFAULT));
  tg_tensor *y = st == TG_OK ? tg_add_scalar(x, 1.0) : NULL;
  if (st == TG_OK) st = append(y, out, n_out); /* reads y: a use-after-free if y was released */
  tg_scope_end(sc);
  return st;
}

TG_TEST(alloc_failure, op_result_in_a_full_scope) {
  tg_tensor *x = tg_ones(TG_SHAPE(3), TG_OPTS_DEFAULT);
  cr_assert(x);
  sweep("add_scalar with a full scope", add_scalar_in_full_scope, x);
  /* Directly: 16 tensors fill the first block of a scope; the next registration grows it. */
  tg_scope sc = tg_scope_begin();
  for (int i = 0; i < 16; i++) tg_zeros(TG_SHAPE(2), TG_OPTS_DEFAULT);
  for (int k = 1; k <= 8; k++) {
    tg__host_fail_allocation(k);
    tg_tensor *y = tg_add_scalar(x, 1.0);
    tg__host_fail_allocation(0);
    if (!y) {
      tg_expect_error(TG_ERR_MEMORY);
      continue;
    }
    double v;
    cr_assert_eq(tg_get(y, (const int64_t[]){2}, &v), TG_OK);
    cr_assert_eq(v, 2.0);
  }
  tg_scope_end(sc);
}

/* tg_scope_begin at every depth up to past the first block, with its allocation failing:
 * never aborts; the scope still pairs with one tg_scope_end and the ops in it fail. */
TG_TEST(alloc_failure, scope_begin_never_aborts) {
  tg_tensor *x = tg_ones(TG_SHAPE(3), TG_OPTS_DEFAULT);
  cr_assert(x);
  int64_t live = tg_live_objects();
  int base = tg_scope_depth(); /* tg_test_scope */
  int failed_begins = 0;
  for (int depth = 1; depth <= 80; depth++) {
    tg_scope outer = tg_scope_begin(); /* the levels below the one whose allocation fails */
    for (int d = 2; d < depth; d++) (void)tg_scope_begin();
    cr_assert_eq(tg_last_error(), TG_OK);
    int64_t fired = tg__host_injected_failures();
    tg__host_fail_allocation(1);
    tg_scope sc2 = depth > 1 ? tg_scope_begin() : outer;
    tg__host_fail_allocation(0);
    cr_assert_eq(tg_scope_depth(), base + depth);
    if (tg__host_injected_failures() != fired) {
      failed_begins++;
      tg_expect_error(TG_ERR_MEMORY, "tg_scope_begin");
      cr_assert_null(tg_add_scalar(x, 1.0), "an op in a scope that could not open succeeded");
      tg_expect_error(TG_ERR_MEMORY);
      tg_scope sc3 = tg_scope_begin(); /* nested inside the failed one: fails too, and pairs */
      tg_expect_error(TG_ERR_MEMORY);
      cr_assert_null(tg_zeros(TG_SHAPE(2), TG_OPTS_DEFAULT));
      tg_expect_error(TG_ERR_MEMORY);
      cr_assert_eq(tg_scope_end(sc3), TG_OK);
      cr_assert_eq(tg_scope_depth(), base + depth);
    } else {
      tg_expect_ok();
      /* No op that opens a scope inside: the stack, once grown, stays grown while
       * tg_test_scope is open, and the injected failure must meet its first growth. */
      cr_assert(tg_zeros(TG_SHAPE(2), TG_OPTS_DEFAULT));
    }
    cr_assert_eq(tg_scope_end(sc2), TG_OK, "%s", tg_last_error_message());
    /* The levels below were left open on purpose: ending the outermost unwinds them. */
    if (depth > 1) cr_assert_eq(tg_scope_end(outer), depth > 2 ? TG_ERR_STATE : TG_OK);
    tg_clear_error();
    cr_assert_eq(tg_scope_depth(), base);
    cr_assert_eq(tg_live_objects(), live);
  }
  cr_assert_gt(failed_begins, 0, "no scope_begin allocated: deeper nesting needed");
  /* The failure left nothing behind: scopes work again. */
  tg_scope sc2 = tg_scope_begin();
  cr_assert(tg_add_scalar(x, 1.0));
  tg_scope_end(sc2);
  tg_expect_ok();
}

/* A backward whose graph walk runs out of memory at every point: no grads array or work
 * list is leaked, and the graph can still be released. */
static tg_status long_chain_backward(void *user, double *out, int *n_out) {
  (void)user;
  tg_tensor *x = tg_ones(TG_SHAPE(2), TG_OPTS(.requires_grad = true));
  tg_status st = status_of(x);
  tg_scope sc = tg_scope_begin();
  tg_tensor *y = x;
  for (int i = 0; i < 100 && y; i++) y = tg_mul_scalar(tg_add_scalar(y, 1.0), 0.5);
  if (st == TG_OK) st = status_of(y);
  if (st == TG_OK) st = clean(tg_backward(tg_sum(y), NULL));
  if (st == TG_OK) st = append(tg_grad(x), out, n_out);
  tg_scope_end(sc);
  return st;
}

TG_TEST(alloc_failure, backward_graph_walk) {
  sweep("backward through a chain of 200 nodes", long_chain_backward, NULL);
}

/* Releasing a graph allocates nothing, so it cannot fail half-way and leak the rest. */
TG_TEST(alloc_failure, releasing_a_long_graph_allocates_nothing) {
  tg_tensor *x = tg_ones(TG_SHAPE(2), TG_OPTS(.requires_grad = true));
  int64_t live = tg_live_objects();
  tg_tensor *y = tg_retain(x);
  for (int i = 0; i < 5000; i++) { /* the chain is held only by its last tensor */
    tg_scope sc = tg_scope_begin();
    tg_tensor *next = tg_retain(tg_add_scalar(y, 1.0));
    tg_scope_end(sc);
    cr_assert(next, "%s", tg_last_error_message());
    tg_release(y);
    y = next;
  }
  cr_assert_gt(tg_live_objects(), 5000);
  int64_t before = tg__host_allocation_count();
  tg__host_fail_allocation(1);
  tg_release(y);
  tg__host_fail_allocation(0);
  cr_assert_eq(tg__host_allocation_count(), before, "releasing the graph allocated");
  cr_assert_eq(tg_live_objects(), live);
}

/* sum over all elements of a dense tensor: a failed view header is an error, not a silent
 * switch to the other summation order with TG_ERR_MEMORY pending. */
static tg_status sum_dense(void *user, double *out, int *n_out) {
  const tg_tensor *x = user;
  tg_scope sc = tg_scope_begin();
  tg_status st = append(tg_sum(x), out, n_out);
  if (st == TG_OK) st = append(tg_sum(tg_t(x)), out, n_out);
  tg_scope_end(sc);
  return st;
}

TG_TEST(alloc_failure, sum_of_a_dense_tensor) {
  tg_tensor *x = tg_randn(TG_SHAPE(7, 9), TG_OPTS_DEFAULT, NULL);
  cr_assert(x);
  sweep("sum of a dense tensor", sum_dense, x);
}

/* The hooks themselves. */
TG_TEST(alloc_failure, host_memory_hooks) {
  int64_t before = tg__host_allocation_count();
  tg__host_fail_allocation(2);
  void *a = tg__host_malloc(8), *b = tg__host_calloc(2, 8), *c = tg__host_malloc(0);
  tg__host_fail_allocation(0);
  cr_assert(a && !b && c);
  cr_assert_eq(tg__host_allocation_count() - before, 3);
  cr_assert_null(tg__host_calloc(SIZE_MAX / 2, 4), "calloc overflow not caught");
  cr_assert_null(tg__host_aligned_alloc(64, SIZE_MAX - 3), "aligned size overflow not caught");
  void *d = tg__host_aligned_alloc(64, 1);
  cr_assert(d && ((uintptr_t)d & 63) == 0);
  void *e = tg__host_realloc(a, 0);
  cr_assert(e);
  tg__host_free(e);
  tg__host_free(c);
  tg__host_free(d);
  tg__host_free(NULL);
}

/* ---- more of the library: a classifier step with SGD, stack, printing, saved bytes,
 * gradcheck ---- */

static tg_status classifier_steps(void *user, double *out, int *n_out) {
  (void)user;
  tg_generator *gen = tg_generator_new(11);
  tg_linear *lin = gen ? tg_linear_new(4, 3, true, TG_OPTS_DEFAULT, gen) : NULL;
  tg_optimizer *opt = NULL;
  tg_tensor *params[2];
  int n_params = 0;
  if (lin) {
    n_params = tg_linear_parameters(lin, params, 2);
    opt = tg_sgd_new(
        n_params, params,
        (tg_sgd_options){.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true});
  }
  tg_status st = status_of(opt);
  for (int step = 0; step < 2 && st == TG_OK; step++) { /* the second uses the momentum */
    tg_scope sc = tg_scope_begin();
    tg_tensor *x = tg_randn(TG_SHAPE(B, 4), TG_OPTS_DEFAULT, gen);
    tg_tensor *target =
        tg_from_data(TG_SHAPE(B), (const int64_t[]){0, 2, 1}, TG_OPTS(.dtype = TG_I64));
    tg_tensor *loss = tg_cross_entropy(tg_linear_forward(lin, x), target);
    st = append(loss, out, n_out);
    if (st == TG_OK) st = clean(tg_optimizer_zero_grad(opt));
    if (st == TG_OK) st = clean(tg_backward(loss, NULL));
    if (st == TG_OK) st = clean(tg_optimizer_step(opt));
    tg_scope_end(sc);
  }
  for (int p = 0; p < n_params && st == TG_OK; p++) st = append(params[p], out, n_out);
  tg_optimizer_free(opt);
  tg_linear_free(lin);
  tg_generator_free(gen);
  return st;
}

TG_TEST(alloc_failure, classifier_with_sgd) {
  sweep("linear + cross_entropy + SGD, two steps", classifier_steps, NULL);
}

static tg_status stack_print_saved_bytes(void *user, double *out, int *n_out) {
  (void)user;
  tg_scope sc = tg_scope_begin();
  tg_tensor *a = tg_ones(TG_SHAPE(2, 3), TG_OPTS(.requires_grad = true));
  tg_tensor *b = tg_zeros(TG_SHAPE(2, 3), TG_OPTS_DEFAULT);
  tg_tensor *s = tg_stack(2, (const tg_tensor *const[]){a, b}, 1);
  tg_tensor *y = tg_mul(tg_tanh(s), s);
  tg_status st = append(y, out, n_out);
  int64_t bytes =
      st == TG_OK ? tg_graph_saved_bytes(1, (const tg_tensor *const[]){y}, 0, NULL) : -1;
  if (st == TG_OK && bytes < 0)
    st = tg_last_error() != TG_OK ? tg_last_error() : NULL_WITHOUT_ERROR;
  if (st == TG_OK) out[(*n_out)++] = (double)bytes;
  char *text = st == TG_OK ? tg_to_string(y) : NULL;
  if (st == TG_OK) st = status_of(text);
  if (st == TG_OK) {
    double sum = 0;
    for (const char *c = text; *c; c++) sum = sum * 31 + (unsigned char)*c;
    out[(*n_out)++] = sum;
    out[(*n_out)++] = (double)strlen(text);
  }
  free(text);
  tg_scope_end(sc);
  return st;
}

TG_TEST(alloc_failure, stack_print_and_saved_bytes) {
  sweep("stack, tg_to_string and tg_graph_saved_bytes", stack_print_saved_bytes, NULL);
}

static tg_status product(void *user, const tg_tensor *const *in, tg_tensor **out) {
  (void)user;
  out[0] = tg_mul(tg_tanh(in[0]), in[1]);
  return out[0] ? TG_OK : tg_last_error();
}

static tg_status gradchecks(void *user, double *out, int *n_out) {
  (void)user;
  tg_tensor *a = tg_from_data(TG_SHAPE(2), (const double[]){0.3, -0.7},
                              TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  tg_tensor *b = tg_from_data(TG_SHAPE(2), (const double[]){1.1, 0.4},
                              TG_OPTS(.dtype = TG_F64, .requires_grad = true));
  tg_status st = status_of(a);
  if (st == TG_OK) st = status_of(b);
  tg_gradcheck_options opts = {.quiet = true};
  if (st == TG_OK) st = clean(tg_gradcheck(product, NULL, 2, (tg_tensor *const[]){a, b}, 1, opts));
  if (st == TG_OK)
    st = clean(tg_gradgradcheck(product, NULL, 2, (tg_tensor *const[]){a, b}, 1, opts));
  if (st == TG_OK) out[(*n_out)++] = 1.0;
  return st;
}

TG_TEST(alloc_failure, gradcheck) { sweep("gradcheck and gradgradcheck", gradchecks, NULL); }

/* ---- a failed optimizer step or in-place op leaves everything as it was ---- */

/* A Linear with gradients and an optimizer that has taken one step already (so SGD has its
 * momentum buffers); a second backward leaves fresh gradients for the step under test. */
static tg_optimizer *optimizer_ready(bool adam, tg_generator **gen, tg_linear **lin,
                                     tg_tensor **params) {
  *gen = tg_generator_new(5);
  *lin = tg_linear_new(4, 3, true, TG_OPTS_DEFAULT, *gen);
  cr_assert(*gen && *lin);
  cr_assert_eq(tg_linear_parameters(*lin, params, 2), 2);
  tg_optimizer *opt =
      adam ? tg_adam_new(2, params, (tg_adam_options){.lr = 0.01, .weight_decay = 0.1})
           : tg_sgd_new(2, params, (tg_sgd_options){.lr = 0.1, .momentum = 0.9});
  cr_assert(opt);
  for (int step = 0; step < 2; step++) {
    tg_scope sc = tg_scope_begin();
    tg_tensor *x = tg_randn(TG_SHAPE(B, 4), TG_OPTS_DEFAULT, *gen);
    cr_assert_eq(tg_optimizer_zero_grad(opt), TG_OK);
    cr_assert_eq(tg_backward(tg_sum(tg_tanh(tg_linear_forward(*lin, x))), NULL), TG_OK);
    if (step == 0) cr_assert_eq(tg_optimizer_step(opt), TG_OK);
    tg_scope_end(sc);
  }
  return opt;
}

static int snapshot(tg_tensor *const *params, double *out) {
  int n = 0;
  for (int p = 0; p < 2; p++) cr_assert_eq(append(params[p], out, &n), TG_OK);
  return n;
}

static void optimizer_all_or_nothing(bool adam) {
  static double ref[MAX_RESULTS], before[MAX_RESULTS], after[MAX_RESULTS];
  int64_t live = tg_live_objects();
  int n = 0, failures = 0;
  for (int64_t k = 0;; k++) {
    tg_generator *gen;
    tg_linear *lin;
    tg_tensor *params[2];
    tg_optimizer *opt = optimizer_ready(adam, &gen, &lin, params);
    n = snapshot(params, before);
    int64_t fired = tg__host_injected_failures();
    tg__host_fail_allocation(k);
    tg_status st = tg_optimizer_step(opt);
    tg__host_fail_allocation(0);
    bool injected = tg__host_injected_failures() != fired;
    if (st != TG_OK) {
      cr_assert(injected);
      tg_expect_error(TG_ERR_MEMORY);
      failures++;
      cr_assert_eq(snapshot(params, after), n);
      cr_assert_arr_eq(after, before, sizeof(double) * (size_t)n,
                       "k=%lld: a failed step changed the parameters", (long long)k);
      st = tg_optimizer_step(opt); /* the retry is the step that failed, not a later one */
      cr_assert_eq(st, TG_OK, "%s", tg_last_error_message());
    }
    tg_expect_ok();
    cr_assert_eq(snapshot(params, after), n);
    if (k == 0)
      memcpy(ref, after, sizeof(double) * (size_t)n);
    else
      cr_assert_arr_eq(after, ref, sizeof(double) * (size_t)n, "k=%lld: wrong update",
                       (long long)k);
    tg_optimizer_free(opt);
    tg_linear_free(lin);
    tg_generator_free(gen);
    cr_assert_eq(tg_live_objects(), live);
    if (k > 0 && !injected) break;
  }
  cr_assert_gt(failures, 0);
  cr_log_info("%s step: %d allocations failed in turn, each left the parameters as they were",
              adam ? "Adam" : "SGD", failures);
}

TG_TEST(alloc_failure, adam_step_is_all_or_nothing) { optimizer_all_or_nothing(true); }
TG_TEST(alloc_failure, sgd_step_is_all_or_nothing) { optimizer_all_or_nothing(false); }

/* In-place ops that fail leave their target's values and version as they were. */
TG_TEST(alloc_failure, failed_inplace_ops_leave_the_target) {
  tg_tensor *src = tg_randn(TG_SHAPE(3, 4), TG_OPTS_DEFAULT, NULL);
  /* row requires grad: mul_ then gets a's old value and div_ saves its output. */
  tg_tensor *row = tg_randn(TG_SHAPE(4), TG_OPTS(.requires_grad = true), NULL);
  cr_assert(src && row);
  for (int op = 0; op < 8; op++) {
    int failures = 0;
    for (int64_t k = 1;; k++) {
      tg_tensor *leaf = tg_randn(TG_SHAPE(3, 4), TG_OPTS(.requires_grad = true), NULL);
      cr_assert(leaf);
      tg_scope sc = tg_scope_begin();
      tg_tensor *t = tg_mul_scalar(leaf, 1.0); /* recorded: in-place ops on it are too */
      double was[12], now[12];
      int n = 0;
      cr_assert_eq(append(t, was, &n), TG_OK);
      uint64_t version = tg_version(t);
      int64_t fired = tg__host_injected_failures();
      tg__host_fail_allocation(k);
      tg_status st = op == 0   ? tg_add_(t, row) /* broadcast */
                     : op == 1 ? tg_add_scaled_(t, src, 0.5)
                     : op == 2 ? tg_mul_scalar_(t, 3.0)
                     : op == 3 ? tg_mul_(t, row)
                     : op == 4 ? tg_tanh_(t)
                     : op == 5 ? tg_div_(t, row)
                     : op == 6 ? tg_elu_(t, -0.5) /* saves the output and the old value */
                               : tg_pow_scalar_(t, 3.0);
      tg__host_fail_allocation(0);
      bool injected = tg__host_injected_failures() != fired;
      if (st != TG_OK) {
        cr_assert(injected, "op %d, k=%lld: failed with no allocation failing: %s", op,
                  (long long)k, tg_last_error_message());
        tg_expect_error(TG_ERR_MEMORY);
        failures++;
        n = 0;
        cr_assert_eq(append(t, now, &n), TG_OK);
        cr_assert_arr_eq(now, was, sizeof was, "op %d, k=%lld: a failed in-place op wrote", op,
                         (long long)k);
        cr_assert_eq(tg_version(t), version);
      }
      tg_expect_ok();
      tg_scope_end(sc);
      if (!injected) break;
    }
    cr_assert_gt(failures, 0);
  }
}
