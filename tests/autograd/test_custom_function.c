/* Custom functions, the C form of torch.autograd.Function: the reference's examples
 * (linear, MulConstant, cube, a sort with non-differentiable indices, a once-differentiable
 * op) registered with tg_op_register, looked up by name, run with tg_apply and gradchecked;
 * and the registry itself. */
#include <math.h>
#include <stdlib.h>

#include "testutil.h"

static const tg_options f64 = {.dtype = TG_F64};
static const tg_options f64_grad = {.dtype = TG_F64, .requires_grad = true};
static const tg_gradcheck_options quiet = {.quiet = true};

static tg_tensor *randn64(int ndim, const int64_t *sizes, bool requires_grad, uint64_t seed) {
  tg_generator *gen = tg_generator_new(seed);
  tg_tensor *t = tg_randn(ndim, sizes, requires_grad ? f64_grad : f64, gen);
  tg_generator_free(gen);
  return t;
}

/* ---- linear: out = input @ weight^T (+ bias), hand-written backward ---- */

static unsigned linear_grads_computed; /* bit i: backward computed the gradient of input i */

static tg_status linear_forward(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  int n = tg_ctx_num_inputs(ctx);
  if (n != 2 && n != 3)
    return tg_set_error(TG_ERR_ARGUMENT,
                        "test_linear: takes input, weight and an optional bias; %d given", n);
  tg_tensor *y = tg_mm(in[0], tg_t(in[1]));
  if (y && n == 3) y = tg_add(y, in[2]); /* bias [out] broadcasts over the batch */
  if (!y || tg_ctx_save_for_backward(ctx, n, in) != TG_OK) return tg_last_error();
  out[0] = y;
  return TG_OK;
}

static tg_status linear_backward(tg_ctx *ctx, const tg_tensor *const *grad_out,
                                 tg_tensor **grad_in) {
  tg_tensor *input = tg_ctx_saved(ctx, 0), *weight = tg_ctx_saved(ctx, 1);
  if (!input || !weight) return tg_last_error();
  const tg_tensor *g = grad_out[0];
  if (tg_ctx_needs_input_grad(ctx, 0)) {
    linear_grads_computed |= 1;
    if (!(grad_in[0] = tg_mm(g, weight))) return tg_last_error();
  }
  if (tg_ctx_needs_input_grad(ctx, 1)) {
    linear_grads_computed |= 2;
    if (!(grad_in[1] = tg_mm(tg_t(g), input))) return tg_last_error();
  }
  if (tg_ctx_num_inputs(ctx) == 3 && tg_ctx_needs_input_grad(ctx, 2)) {
    linear_grads_computed |= 4;
    /* Summed back to the bias's own sizes: [out], or [1] when one bias was broadcast. */
    grad_in[2] = tg_sum_to_size(g, tg_ctx_input_ndim(ctx, 2), tg_ctx_input_sizes(ctx, 2));
    if (!grad_in[2]) return tg_last_error();
  }
  return TG_OK;
}

/* ---- MulConstant: the constant is a scalar; materialize_grads off ---- */

static tg_status mul_constant_forward(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  tg_ctx_set_materialize_grads(ctx, false);
  out[0] = tg_mul_scalar(in[0], tg_ctx_scalar(ctx, 0));
  return out[0] ? TG_OK : tg_last_error();
}

static tg_status mul_constant_backward(tg_ctx *ctx, const tg_tensor *const *grad_out,
                                       tg_tensor **grad_in) {
  if (!grad_out[0]) return TG_OK; /* no gradient reached the output: none for the input */
  grad_in[0] = tg_mul_scalar(grad_out[0], tg_ctx_scalar(ctx, 0));
  return grad_in[0] ? TG_OK : tg_last_error();
}

/* Two outputs (a x, b x), to see what backward gets for an output that got no gradient. */
static int null_grads_seen, zero_grads_seen;

static tg_status scale_two_forward(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  out[0] = tg_mul_scalar(in[0], tg_ctx_scalar(ctx, 0));
  out[1] = tg_mul_scalar(in[0], tg_ctx_scalar(ctx, 1));
  return out[0] && out[1] ? TG_OK : tg_last_error();
}
static tg_status scale_two_forward_unmaterialized(tg_ctx *ctx, const tg_tensor *const *in,
                                                  tg_tensor **out) {
  tg_ctx_set_materialize_grads(ctx, false);
  return scale_two_forward(ctx, in, out);
}

static tg_status scale_two_backward(tg_ctx *ctx, const tg_tensor *const *grad_out,
                                    tg_tensor **grad_in) {
  tg_tensor *sum = NULL;
  for (int j = 0; j < 2; j++) {
    if (!grad_out[j]) {
      null_grads_seen++;
      continue;
    }
    double m;
    tg_tensor *amax = tg_max(tg_mul(grad_out[j], grad_out[j]));
    if (amax && tg_item(amax, &m) == TG_OK && m == 0) zero_grads_seen++;
    tg_tensor *part = tg_mul_scalar(grad_out[j], tg_ctx_scalar(ctx, j));
    sum = sum ? tg_add(sum, part) : part;
    if (!sum) return tg_last_error();
  }
  grad_in[0] = sum; /* NULL (no gradient) when neither output got one */
  return TG_OK;
}

/* ---- cube: the reference's right and wrong ways to use an intermediate ---- */

/* Right: dx = 3x^2 is returned as a second, differentiable output and saved as such. */
static tg_status cube_forward(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  const tg_tensor *x = in[0];
  out[0] = tg_pow_scalar(x, 3);
  out[1] = tg_mul_scalar(tg_pow_scalar(x, 2), 3);
  if (!out[0] || !out[1]) return tg_last_error();
  /* Outputs are assigned before they are saved, so the context knows them as outputs. */
  return tg_ctx_save_for_backward(ctx, 2, (const tg_tensor *const[]){x, out[1]});
}
static tg_status cube_backward(tg_ctx *ctx, const tg_tensor *const *grad_out, tg_tensor **grad_in) {
  tg_tensor *x = tg_ctx_saved(ctx, 0), *dx = tg_ctx_saved(ctx, 1);
  if (!x || !dx) return tg_last_error();
  /* grad_output * dx + grad_dx * 6x */
  grad_in[0] = tg_add(tg_mul(grad_out[0], dx), tg_mul(grad_out[1], tg_mul_scalar(x, 6)));
  return grad_in[0] ? TG_OK : tg_last_error();
}

/* Wrong (per the reference): dx is a saved intermediate that is not an output, so under
 * create_graph nothing differentiates through it. First derivatives are still right. */
static tg_status cube_wrong_forward(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  tg_tensor *dx = tg_mul_scalar(tg_pow_scalar(in[0], 2), 3);
  out[0] = tg_pow_scalar(in[0], 3);
  if (!dx || !out[0]) return tg_last_error();
  return tg_ctx_save_for_backward(ctx, 1, (const tg_tensor *const[]){dx});
}
static tg_status cube_wrong_backward(tg_ctx *ctx, const tg_tensor *const *grad_out,
                                     tg_tensor **grad_in) {
  tg_tensor *dx = tg_ctx_saved(ctx, 0);
  grad_in[0] = dx ? tg_mul(grad_out[0], dx) : NULL;
  return grad_in[0] ? TG_OK : tg_last_error();
}

/* dx returned but marked non-differentiable: a by-product the graph does not follow. */
static tg_status cube_marked_forward(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  tg_status st = cube_forward(ctx, in, out);
  return st == TG_OK ? tg_ctx_mark_non_differentiable(ctx, out[1]) : st;
}
static bool saved_dx_requires_grad;
static tg_status cube_marked_backward(tg_ctx *ctx, const tg_tensor *const *grad_out,
                                      tg_tensor **grad_in) {
  tg_tensor *x = tg_ctx_saved(ctx, 0), *dx = tg_ctx_saved(ctx, 1);
  if (!x || !dx) return tg_last_error();
  saved_dx_requires_grad = tg_requires_grad(dx);
  grad_in[0] = tg_mul(grad_out[0], tg_mul_scalar(tg_pow_scalar(x, 2), 3));
  return grad_in[0] ? TG_OK : tg_last_error();
}

/* ---- sort of a 1-D tensor: (values, int64 indices), indices non-differentiable;
 * kernels are plain loops, so it is declared once-differentiable ---- */

static const double *sort_keys;
static int by_key(const void *a, const void *b) {
  double x = sort_keys[*(const int64_t *)a], y = sort_keys[*(const int64_t *)b];
  return x < y ? -1 : x > y ? 1 : 0;
}

static tg_status sort_forward(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  if (tg_ndim(in[0]) != 1 || tg_tensor_dtype(in[0]) != TG_F64)
    return tg_set_error(TG_ERR_SHAPE, "test_sort: takes a 1-D float64 tensor");
  int64_t n = tg_numel(in[0]);
  tg_tensor *x = tg_contiguous(in[0]);
  out[0] = tg_empty(1, &n, f64);
  out[1] = tg_empty(1, &n, (tg_options){.dtype = TG_I64});
  if (!x || !out[0] || !out[1]) return tg_last_error();
  const double *xs = tg_data_ptr(x);
  double *values = tg_data_ptr(out[0]);
  int64_t *index = tg_data_ptr(out[1]);
  for (int64_t i = 0; i < n; i++) index[i] = i;
  sort_keys = xs;
  qsort(index, (size_t)n, sizeof *index, by_key);
  for (int64_t i = 0; i < n; i++) values[i] = xs[index[i]];
  if (tg_ctx_mark_non_differentiable(ctx, out[1]) != TG_OK) return tg_last_error();
  return tg_ctx_save_for_backward(ctx, 1, (const tg_tensor *const[]){out[1]});
}

static bool saved_index_requires_grad;
static tg_status sort_backward(tg_ctx *ctx, const tg_tensor *const *grad_out, tg_tensor **grad_in) {
  tg_tensor *index = tg_ctx_saved(ctx, 0);
  tg_tensor *g = tg_contiguous(grad_out[0]);
  if (!index || !g) return tg_last_error();
  saved_index_requires_grad = tg_requires_grad(index);
  int64_t n = tg_numel(index);
  tg_tensor *gx = tg_zeros(1, &n, f64);
  if (!gx) return tg_last_error();
  const int64_t *idx = tg_data_ptr(index);
  const double *gs = tg_data_ptr(g);
  double *dst = tg_data_ptr(gx);
  for (int64_t i = 0; i < n; i++) dst[idx[i]] = gs[i]; /* scatter back to the input's places */
  grad_in[0] = gx;
  return TG_OK;
}

/* ---- an op with user data and a scalar kept for backward ---- */

static int data_frees;
static void count_free(void *p) {
  free(p);
  data_frees++;
}
static tg_status with_data_forward(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  double *factor = malloc(sizeof *factor);
  if (!factor) return tg_set_error(TG_ERR_MEMORY, "test_with_data: out of memory");
  *factor = 2.5;
  tg_ctx_set_data(ctx, factor, count_free);
  if (tg_ctx_set_scalar(ctx, 3, -1.0) != TG_OK) return tg_last_error();
  out[0] = tg_mul_scalar(in[0], *factor * tg_ctx_scalar(ctx, 3));
  return out[0] ? TG_OK : tg_last_error();
}
static tg_status with_data_backward(tg_ctx *ctx, const tg_tensor *const *grad_out,
                                    tg_tensor **grad_in) {
  const double *factor = tg_ctx_data(ctx);
  cr_assert_eq(tg_ctx_num_scalars(ctx), 4);
  grad_in[0] = tg_mul_scalar(grad_out[0], *factor * tg_ctx_scalar(ctx, 3));
  return grad_in[0] ? TG_OK : tg_last_error();
}

/* ---- registration ---- */

static const tg_op_desc test_ops[] = {
    {"test_linear", -1, 1, {linear_forward}, linear_backward, 0, NULL},
    {"test_mul_constant", 1, 1, {mul_constant_forward}, mul_constant_backward, 0, NULL},
    {"test_scale_two", 1, 2, {scale_two_forward}, scale_two_backward, 0, NULL},
    {"test_scale_two_no_materialize",
     1,
     2,
     {scale_two_forward},
     scale_two_backward,
     TG_OP_NO_MATERIALIZE_GRADS,
     NULL},
    {"test_scale_two_ctx_no_materialize",
     1,
     2,
     {scale_two_forward_unmaterialized},
     scale_two_backward,
     0,
     NULL},
    {"test_cube", 1, 2, {cube_forward}, cube_backward, 0, NULL},
    {"test_cube_wrong", 1, 1, {cube_wrong_forward}, cube_wrong_backward, 0, NULL},
    {"test_cube_marked", 1, 2, {cube_marked_forward}, cube_marked_backward, 0, NULL},
    {"test_sort", 1, 2, {sort_forward}, sort_backward, TG_OP_ONCE_DIFFERENTIABLE, NULL},
    {"test_with_data", 1, 1, {with_data_forward}, with_data_backward, 0, NULL},
};
#define N_TEST_OPS (int)(sizeof test_ops / sizeof test_ops[0])

/* Criterion runs each test in a fresh process, so every test registers afresh. */
static void register_test_ops(void) {
  for (int i = 0; i < N_TEST_OPS; i++)
    cr_assert_eq(tg_op_register(&test_ops[i]), TG_OK, "%s", tg_last_error_message());
}

static const tg_op_desc *op(const char *name) {
  const tg_op_desc *d = tg_op_lookup(name);
  cr_assert(d, "%s", tg_last_error_message());
  return d;
}

/* gradcheck adapters: user is the op's name; scalars are fixed per op. */
typedef struct call {
  const char *name;
  int n_inputs, n_outputs;
  int n_scalars;
  double scalars[2];
} call;

static tg_status run_call(void *user, const tg_tensor *const *in, tg_tensor **out) {
  const call *c = user;
  return tg_apply(tg_op_lookup(c->name), c->n_inputs, in, c->n_scalars, c->scalars, c->n_outputs,
                  out);
}

/* ---- the registry ---- */

TG_TEST(registry, lookup_and_listing) {
  int builtins = tg_op_count();
  register_test_ops();
  cr_assert_eq(tg_op_count(), builtins + N_TEST_OPS);
  const tg_op_desc *lin = op("test_linear");
  cr_assert_str_eq(lin->name, "test_linear");
  cr_assert(lin->forward[TG_CPU] == linear_forward && lin->backward == linear_backward);
  cr_assert_eq(lin->n_inputs, -1);
  cr_assert(lin != &test_ops[0], "the registry keeps its own copy");
  cr_assert(op("addmm")->backward != NULL, "built-ins are looked up the same way");

  bool saw_addmm = false, saw_linear = false, saw_sort = false;
  for (int i = 0; i < tg_op_count(); i++) {
    const tg_op_desc *d = tg_op_at(i);
    cr_assert(d && d->name, "entry %d", i);
    saw_addmm |= strcmp(d->name, "addmm") == 0;
    saw_linear |= d == lin;
    saw_sort |= strcmp(d->name, "test_sort") == 0 && (d->flags & TG_OP_ONCE_DIFFERENTIABLE);
  }
  cr_assert(saw_addmm && saw_linear && saw_sort);
  cr_assert_null(tg_op_at(tg_op_count()));
  tg_expect_error(TG_ERR_INDEX, "tg_op_at");
  cr_assert_null(tg_op_at(-1));
  tg_expect_error(TG_ERR_INDEX, "tg_op_at");
  cr_assert_null(tg_op_lookup("no_such_op"));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_op_lookup", "no_such_op");
}

TG_TEST(registry, rejects_bad_registrations) {
  register_test_ops();
  int count = tg_op_count();
  cr_assert_eq(tg_op_register(&test_ops[0]), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_op_register", "'test_linear' already exists");
  tg_op_desc addmm = *op("addmm");
  cr_assert_eq(tg_op_register(&addmm), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "'addmm' already exists");
  cr_assert_eq(tg_op_register(&(tg_op_desc){"test_no_kernel", 1, 1, {NULL}, NULL, 0, NULL}),
               TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "test_no_kernel", "no forward kernel");
  cr_assert_eq(
      tg_op_register(&(tg_op_desc){"test_no_outputs", 1, 0, {linear_forward}, NULL, 0, NULL}),
      TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "test_no_outputs");
  cr_assert_eq(tg_op_register(&(tg_op_desc){NULL, 1, 1, {linear_forward}, NULL, 0, NULL}),
               TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_op_register");
  cr_assert_eq(tg_op_register(NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_op_register");
  cr_assert_eq(tg_op_count(), count, "nothing was added");
}

static tg_status cuda_only_forward(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  (void)ctx;
  out[0] = tg_clone(in[0]);
  return out[0] ? TG_OK : tg_last_error();
}

TG_TEST(registry, a_call_on_a_device_without_a_kernel) {
  tg_op_desc desc = {"test_cuda_only", 1, 1, {NULL}, NULL, 0, NULL};
  desc.forward[TG_CUDA] = cuda_only_forward;
  cr_assert_eq(tg_op_register(&desc), TG_OK, "%s", tg_last_error_message());
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_ones(TG_SHAPE(2), f64);
  cr_assert_null(tg_apply1(op("test_cuda_only"), 1, (const tg_tensor *const[]){x}, 0, NULL));
  tg_expect_error(TG_ERR_UNSUPPORTED, "test_cuda_only", "no kernel for device cpu");
  tg_scope_end(sc);
}

TG_TEST(registry, tg_apply_checks_its_arguments) {
  register_test_ops();
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_ones(TG_SHAPE(2), f64_grad);
  const tg_op_desc *mc = op("test_mul_constant");
  tg_tensor *out[2];
  cr_assert_eq(tg_apply(mc, 2, (const tg_tensor *const[]){x, x}, 1, (double[]){2}, 1, out),
               TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "test_mul_constant", "takes 1 inputs, 2 given");
  cr_assert_eq(tg_apply(mc, 1, (const tg_tensor *const[]){x}, 1, (double[]){2}, 2, out),
               TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "test_mul_constant", "1 outputs, 2 slots");
  cr_assert_eq(tg_apply(mc, 1, (const tg_tensor *const[]){x}, TG_CTX_MAX_SCALARS + 1,
                        (double[TG_CTX_MAX_SCALARS + 1]){0}, 1, out),
               TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "test_mul_constant", "scalars");
  cr_assert_eq(tg_apply(NULL, 1, (const tg_tensor *const[]){x}, 0, NULL, 1, out), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_apply");
  /* A NULL input keeps the error that produced it. */
  tg_tensor *bad = tg_mm(x, x);
  cr_assert_null(bad);
  cr_assert_null(tg_apply1(mc, 1, (const tg_tensor *const[]){bad}, 1, (double[]){2}));
  tg_expect_error(TG_ERR_SHAPE, "tg_mm");
  /* A NULL input with no error pending is named by its position. */
  cr_assert_eq(tg_apply(op("test_linear"), 2, (const tg_tensor *const[]){x, NULL}, 0, NULL, 1, out),
               TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "test_linear: inputs[1] is NULL");
  /* Errors from forward come back unchanged, with nothing left alive. */
  cr_assert_null(tg_apply1(op("test_linear"), 1, (const tg_tensor *const[]){x}, 0, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "test_linear", "1 given");
  tg_scope_end(sc);
}

/* An op that failed a lookup is NULL with the lookup's error pending: that error is kept. */
TG_TEST(registry, tg_apply_keeps_a_failed_lookups_error) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_ones(TG_SHAPE(2), f64), *out[1];
  cr_assert_eq(tg_apply(tg_op_lookup("typo"), 1, (const tg_tensor *const[]){x}, 0, NULL, 1, out),
               TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_op_lookup", "typo");
  cr_assert_null(tg_apply1(tg_op_lookup("typo"), 1, (const tg_tensor *const[]){x}, 0, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_op_lookup", "typo");
  cr_assert_eq(tg_apply(NULL, 1, (const tg_tensor *const[]){x}, 0, NULL, 1, out), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_apply: op is NULL");
  tg_scope_end(sc);
}

/* Kernels with a bug: they fail without tg_set_error, or return TG_OK with no output. */
static tg_status silent_forward(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  (void)ctx, (void)in, (void)out;
  return TG_ERR_UNSUPPORTED;
}
static tg_status bogus_status_forward(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  (void)ctx, (void)in, (void)out;
  return (tg_status)-7;
}
static tg_status no_output_forward(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  (void)ctx, (void)in, (void)out;
  return TG_OK;
}
static tg_status clone_forward(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  (void)ctx;
  out[0] = tg_clone(in[0]);
  return out[0] ? TG_OK : tg_last_error();
}
static tg_status silent_backward(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  (void)ctx, (void)g, (void)gi;
  return TG_ERR_STATE;
}

TG_TEST(registry, a_kernel_failing_without_an_error_gets_one) {
  const tg_op_desc ops[] = {
      {"test_silent", 1, 1, {silent_forward}, NULL, 0, NULL},
      {"test_bogus_status", 1, 1, {bogus_status_forward}, NULL, 0, NULL},
      {"test_no_output", 1, 1, {no_output_forward}, NULL, 0, NULL},
      {"test_silent_backward", 1, 1, {clone_forward}, silent_backward, 0, NULL}};
  for (int i = 0; i < 4; i++) cr_assert_eq(tg_op_register(&ops[i]), TG_OK);
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_ones(TG_SHAPE(2), f64_grad);
  const tg_tensor *const in[] = {x};
  cr_assert_null(tg_apply1(op("test_silent"), 1, in, 0, NULL));
  tg_expect_error(TG_ERR_UNSUPPORTED,
                  "test_silent: forward failed (returned TG_ERR_UNSUPPORTED) without setting an "
                  "error");
  cr_assert_null(tg_apply1(op("test_bogus_status"), 1, in, 0, NULL));
  tg_expect_error(TG_ERR_STATE, "test_bogus_status: forward failed (returned -7, not a tg_status)");
  cr_assert_null(tg_apply1(op("test_no_output"), 1, in, 0, NULL));
  tg_expect_error(TG_ERR_STATE, "test_no_output: forward returned TG_OK but left output 0 NULL");
  tg_tensor *y = tg_apply1(op("test_silent_backward"), 1, in, 0, NULL);
  cr_assert(y, "%s", tg_last_error_message());
  cr_assert_eq(tg_backward(tg_sum(y), NULL), TG_ERR_STATE);
  tg_expect_error(TG_ERR_STATE, "test_silent_backward: backward failed (returned TG_ERR_STATE) "
                                "without setting an error");
  tg_scope_end(sc);
}

/* ---- linear ---- */

TG_TEST(custom_function, linear_values_and_gradcheck) {
  register_test_ops();
  tg_scope sc = tg_scope_begin();
  const tg_op_desc *lin = op("test_linear");
  tg_tensor *x = tg_from_data(TG_SHAPE(2, 3), (double[]){1, 2, 3, 4, 5, 6}, f64_grad);
  tg_tensor *w = tg_from_data(TG_SHAPE(2, 3), (double[]){1, 0, -1, 0.5, 0.5, 0.5}, f64_grad);
  tg_tensor *b = tg_from_data(TG_SHAPE(2), (double[]){10, 20}, f64_grad);
  tg_tensor *y = tg_apply1(lin, 3, (const tg_tensor *const[]){x, w, b}, 0, NULL);
  tg_tensor *want =
      tg_from_data(TG_SHAPE(2, 2), (double[]){1 - 3 + 10, 3 + 20, 4 - 6 + 10, 7.5 + 20}, f64);
  tg_assert_close(y, want, 0, 1e-12);
  cr_assert_str_eq(tg_grad_fn_name(y), "test_linear");
  cr_assert_eq(tg_backward(tg_sum(y), NULL), TG_OK, "%s", tg_last_error_message());
  tg_assert_close(tg_grad(b), tg_full(TG_SHAPE(2), 2, f64), 0, 0);
  tg_assert_close(tg_grad(x),
                  tg_from_data(TG_SHAPE(2, 3), (double[]){1.5, 0.5, -0.5, 1.5, 0.5, -0.5}, f64), 0,
                  1e-12);
  tg_assert_close(tg_grad(w), tg_from_data(TG_SHAPE(2, 3), (double[]){5, 7, 9, 5, 7, 9}, f64), 0,
                  1e-12);

  call with_bias = {"test_linear", 3, 1, 0, {0}}, without_bias = {"test_linear", 2, 1, 0, {0}};
  tg_tensor *in[3] = {randn64(TG_SHAPE(4, 3), true, 1), randn64(TG_SHAPE(5, 3), true, 2),
                      randn64(TG_SHAPE(5), true, 3)};
  cr_assert_eq(tg_gradcheck(run_call, &with_bias, 3, in, 1, quiet), TG_OK, "%s",
               tg_last_error_message());
  cr_assert_eq(tg_gradcheck(run_call, &without_bias, 2, in, 1, quiet), TG_OK, "%s",
               tg_last_error_message());
  /* Backward is written with tg ops, so it is twice differentiable. */
  cr_assert_eq(tg_gradgradcheck(run_call, &with_bias, 3, in, 1, quiet), TG_OK, "%s",
               tg_last_error_message());
  tg_scope_end(sc);
}

TG_TEST(custom_function, linear_with_strided_and_broadcast_inputs) {
  register_test_ops();
  tg_scope sc = tg_scope_begin();
  call with_bias = {"test_linear", 3, 1, 0, {0}};
  tg_tensor *x_t = tg_t(randn64(TG_SHAPE(3, 4), true, 4));                  /* transposed */
  tg_tensor *w_sl = tg_slice(randn64(TG_SHAPE(7, 6), true, 5), 1, 1, 6, 2); /* offset, step */
  w_sl = tg_narrow(w_sl, 0, 2, 5);
  cr_assert(!tg_is_contiguous(x_t) && !tg_is_contiguous(w_sl) && tg_offset(w_sl) > 0);
  tg_tensor *b1 = randn64(TG_SHAPE(1), true, 6); /* one bias broadcast over 5 outputs */
  tg_tensor *in[3] = {x_t, w_sl, b1};
  cr_assert_eq(tg_gradcheck(run_call, &with_bias, 3, in, 1, quiet), TG_OK, "%s",
               tg_last_error_message());
  tg_scope_end(sc);
}

TG_TEST(custom_function, linear_skips_gradients_nobody_needs) {
  register_test_ops();
  tg_scope sc = tg_scope_begin();
  const tg_op_desc *lin = op("test_linear");
  tg_tensor *x = randn64(TG_SHAPE(4, 3), false, 7); /* data: no gradient wanted */
  tg_tensor *w = randn64(TG_SHAPE(5, 3), true, 8);
  tg_tensor *b = randn64(TG_SHAPE(5), false, 9);
  tg_tensor *y = tg_apply1(lin, 3, (const tg_tensor *const[]){x, w, b}, 0, NULL);
  linear_grads_computed = 0;
  cr_assert_eq(tg_backward(tg_sum(y), NULL), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(linear_grads_computed, 2u, "only the weight's gradient was computed");
  cr_assert(tg_grad(w) && !tg_grad(x) && !tg_grad(b));
  /* With nothing requiring grad no node is recorded at all. */
  tg_tensor *y2 = tg_apply1(lin, 2, (const tg_tensor *const[]){x, x}, 0, NULL);
  cr_assert(y2 && !tg_requires_grad(y2) && !tg_grad_fn_name(y2));
  tg_no_grad_begin();
  tg_tensor *y3 = tg_apply1(lin, 2, (const tg_tensor *const[]){x, w}, 0, NULL);
  tg_no_grad_end();
  cr_assert(y3 && !tg_requires_grad(y3), "nor inside a no-grad region");
  tg_scope_end(sc);
}

/* ---- MulConstant and materialize_grads ---- */

TG_TEST(custom_function, mul_constant) {
  register_test_ops();
  tg_scope sc = tg_scope_begin();
  const tg_op_desc *mc = op("test_mul_constant");
  tg_tensor *x = tg_from_data(TG_SHAPE(3), (double[]){1, -2, 4}, f64_grad);
  tg_tensor *y = tg_apply1(mc, 1, (const tg_tensor *const[]){x}, 1, (double[]){3.14});
  tg_assert_close(y, tg_from_data(TG_SHAPE(3), (double[]){3.14, -6.28, 12.56}, f64), 0, 1e-12);
  cr_assert_eq(tg_backward(tg_sum(y), NULL), TG_OK, "%s", tg_last_error_message());
  tg_assert_close(tg_grad(x), tg_full(TG_SHAPE(3), 3.14, f64), 0, 0);

  call c = {"test_mul_constant", 1, 1, 1, {-0.75}};
  tg_tensor *in = randn64(TG_SHAPE(2, 3), true, 10);
  cr_assert_eq(tg_gradcheck(run_call, &c, 1, &in, 1, quiet), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(tg_gradgradcheck(run_call, &c, 1, &in, 1, quiet), TG_OK, "%s",
               tg_last_error_message());
  tg_scope_end(sc);
}

/* Uses only output 0 of (2x, 5x). */
static void backward_through_first_output(const char *name, double *grad_out) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_from_data(TG_SHAPE(2), (double[]){1, 2}, f64_grad);
  tg_tensor *out[2];
  cr_assert_eq(tg_apply(op(name), 1, (const tg_tensor *const[]){x}, 2, (double[]){2, 5}, 2, out),
               TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(tg_backward(tg_sum(out[0]), NULL), TG_OK, "%s", tg_last_error_message());
  *grad_out = tg_test_at(tg_grad(x), 1);
  tg_scope_end(sc);
}

TG_TEST(custom_function, materialize_grads_on_and_off) {
  register_test_ops();
  double g;
  null_grads_seen = zero_grads_seen = 0;
  backward_through_first_output("test_scale_two", &g);
  cr_assert_eq(g, 2);
  cr_assert(null_grads_seen == 0 && zero_grads_seen == 1, "by default: a tensor of zeros");

  null_grads_seen = zero_grads_seen = 0;
  backward_through_first_output("test_scale_two_no_materialize", &g);
  cr_assert_eq(g, 2);
  cr_assert(null_grads_seen == 1 && zero_grads_seen == 0, "TG_OP_NO_MATERIALIZE_GRADS: NULL");

  null_grads_seen = zero_grads_seen = 0;
  backward_through_first_output("test_scale_two_ctx_no_materialize", &g);
  cr_assert_eq(g, 2);
  cr_assert(null_grads_seen == 1 && zero_grads_seen == 0,
            "tg_ctx_set_materialize_grads(ctx, false): NULL");

  tg_scope sc = tg_scope_begin();
  call c = {"test_scale_two_no_materialize", 1, 2, 2, {2, 5}};
  tg_tensor *in = randn64(TG_SHAPE(3), true, 11);
  cr_assert_eq(tg_gradcheck(run_call, &c, 1, &in, 2, quiet), TG_OK, "%s", tg_last_error_message());
  tg_scope_end(sc);
}

/* ---- cube ---- */

TG_TEST(custom_function, cube_returns_its_intermediate_as_a_differentiable_output) {
  register_test_ops();
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_from_data(TG_SHAPE(3), (double[]){-1, 0.5, 2}, f64_grad);
  tg_tensor *out[2];
  cr_assert_eq(tg_apply(op("test_cube"), 1, (const tg_tensor *const[]){x}, 0, NULL, 2, out), TG_OK,
               "%s", tg_last_error_message());
  tg_assert_close(out[0], tg_from_data(TG_SHAPE(3), (double[]){-1, 0.125, 8}, f64), 0, 1e-12);
  tg_assert_close(out[1], tg_from_data(TG_SHAPE(3), (double[]){3, 0.75, 12}, f64), 0, 1e-12);
  cr_assert(tg_requires_grad(out[1]), "dx is an ordinary differentiable output");
  /* cube(x) = output 0 alone: its gradient is dx. */
  cr_assert_eq(tg_backward_ex(tg_sum(out[0]), NULL, (tg_backward_options){.retain_graph = true}),
               TG_OK, "%s", tg_last_error_message());
  tg_assert_close(tg_grad(x), out[1], 0, 1e-12);

  call both = {"test_cube", 1, 2, 0, {0}};
  tg_tensor *in = randn64(TG_SHAPE(2, 2), true, 12);
  cr_assert_eq(tg_gradcheck(run_call, &both, 1, &in, 2, quiet), TG_OK, "%s",
               tg_last_error_message());
  cr_assert_eq(tg_gradgradcheck(run_call, &both, 1, &in, 2, quiet), TG_OK, "%s",
               tg_last_error_message());
  tg_scope_end(sc);
}

static tg_status cube_first_output(void *user, const tg_tensor *const *in, tg_tensor **out) {
  tg_tensor *both[2];
  tg_status st = tg_apply(tg_op_lookup(user), 1, in, 0, NULL, 2, both);
  out[0] = st == TG_OK ? both[0] : NULL;
  return st;
}

TG_TEST(custom_function, cube_saving_an_intermediate_is_wrong_for_double_backward) {
  register_test_ops();
  tg_scope sc = tg_scope_begin();
  call wrong = {"test_cube_wrong", 1, 1, 0, {0}};
  tg_tensor *in = randn64(TG_SHAPE(3), true, 13);
  cr_assert_eq(tg_gradcheck(run_call, &wrong, 1, &in, 1, quiet), TG_OK, "%s",
               tg_last_error_message());
  cr_assert_eq(tg_gradgradcheck(run_call, &wrong, 1, &in, 1, quiet), TG_ERR_GRADCHECK);
  tg_expect_error(TG_ERR_GRADCHECK, "tg_gradgradcheck", "input 0");
  /* The reference's right version passes the same check through its first output. */
  cr_assert_eq(tg_gradgradcheck(cube_first_output, "test_cube", 1, &in, 1, quiet), TG_OK, "%s",
               tg_last_error_message());
  tg_scope_end(sc);
}

TG_TEST(custom_function, cube_with_a_non_differentiable_intermediate) {
  register_test_ops();
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_from_data(TG_SHAPE(2), (double[]){1, 2}, f64_grad);
  tg_tensor *out[2];
  cr_assert_eq(tg_apply(op("test_cube_marked"), 1, (const tg_tensor *const[]){x}, 0, NULL, 2, out),
               TG_OK, "%s", tg_last_error_message());
  cr_assert(tg_requires_grad(out[0]));
  cr_assert(!tg_requires_grad(out[1]) && tg_is_leaf(out[1]), "marked: no grad_fn");
  cr_assert_eq(tg_backward(tg_sum(tg_add(out[0], out[1])), NULL), TG_OK, "%s",
               tg_last_error_message());
  tg_assert_close(tg_grad(x), tg_from_data(TG_SHAPE(2), (double[]){3, 12}, f64), 0, 1e-12);
  cr_assert(!saved_dx_requires_grad, "a saved non-differentiable output stays a constant");
  cr_assert_eq(tg_gradcheck(cube_first_output, "test_cube_marked", 1, &x, 1, quiet), TG_OK, "%s",
               tg_last_error_message());
  cr_assert_eq(tg_ctx_mark_non_differentiable(NULL, x), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_ctx_mark_non_differentiable");
  tg_scope_end(sc);
}

static tg_status mark_an_input(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  out[0] = tg_clone(in[0]);
  if (!out[0]) return tg_last_error();
  return tg_ctx_mark_non_differentiable(ctx, in[0]);
}

TG_TEST(custom_function, only_outputs_can_be_marked_non_differentiable) {
  tg_scope sc = tg_scope_begin();
  tg_op_desc desc = {"test_mark_input", 1, 1, {mark_an_input}, cube_wrong_backward, 0, NULL};
  tg_tensor *x = tg_ones(TG_SHAPE(2), f64_grad);
  cr_assert_null(tg_apply1(&desc, 1, (const tg_tensor *const[]){x}, 0, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "not an output of test_mark_input");
  tg_scope_end(sc);
}

/* ---- sort: non-differentiable indices, once-differentiable backward ---- */

TG_TEST(custom_function, sort_marks_its_indices_non_differentiable) {
  register_test_ops();
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_from_data(TG_SHAPE(4), (double[]){3, -1, 2, 0.5}, f64_grad);
  tg_tensor *out[2];
  cr_assert_eq(tg_apply(op("test_sort"), 1, (const tg_tensor *const[]){x}, 0, NULL, 2, out), TG_OK,
               "%s", tg_last_error_message());
  tg_assert_close(out[0], tg_from_data(TG_SHAPE(4), (double[]){-1, 0.5, 2, 3}, f64), 0, 0);
  cr_assert_eq(tg_tensor_dtype(out[1]), TG_I64);
  cr_assert(tg_requires_grad(out[0]) && !tg_requires_grad(out[1]) && tg_is_leaf(out[1]));
  const double want_index[] = {1, 3, 2, 0};
  for (int i = 0; i < 4; i++) cr_assert_eq(tg_test_at(out[1], i), want_index[i]);
  /* d(sum of the two smallest) = 1 where they came from. */
  cr_assert_eq(tg_backward(tg_sum(tg_narrow(out[0], 0, 0, 2)), NULL), TG_OK, "%s",
               tg_last_error_message());
  tg_assert_close(tg_grad(x), tg_from_data(TG_SHAPE(4), (double[]){0, 1, 0, 1}, f64), 0, 0);
  cr_assert(!saved_index_requires_grad, "a saved int64 output never requires grad");

  call c = {"test_sort", 1, 2, 0, {0}};
  tg_tensor *in = randn64(TG_SHAPE(6), true, 14); /* distinct values: sort is smooth there */
  cr_assert_eq(tg_gradcheck(run_call, &c, 1, &in, 2, quiet), TG_OK, "%s", tg_last_error_message());
  tg_scope_end(sc);
}

TG_TEST(custom_function, once_differentiable_refuses_double_backward) {
  register_test_ops();
  tg_scope sc = tg_scope_begin();
  call c = {"test_sort", 1, 2, 0, {0}};
  tg_tensor *in = randn64(TG_SHAPE(5), true, 15);
  cr_assert_eq(tg_gradgradcheck(run_call, &c, 1, &in, 2, quiet), TG_ERR_STATE);
  tg_expect_error(TG_ERR_STATE, "test_sort", "once-differentiable");

  tg_tensor *out[2], *dx;
  cr_assert_eq(tg_apply(op("test_sort"), 1, (const tg_tensor *const[]){in}, 0, NULL, 2, out),
               TG_OK);
  tg_tensor *loss = tg_sum(tg_mul(out[0], out[0]));
  cr_assert_eq(tg_autograd_grad(1, (const tg_tensor *const[]){loss}, NULL, 1,
                                (const tg_tensor *const[]){in}, &dx,
                                (tg_backward_options){.create_graph = true}, false),
               TG_OK, "%s", tg_last_error_message());
  tg_assert_close(dx, tg_mul_scalar(in, 2), 0, 1e-12); /* first order: fine */
  cr_assert_eq(tg_backward(tg_sum(dx), NULL), TG_ERR_STATE);
  tg_expect_error(TG_ERR_STATE, "test_sort", "once-differentiable");
  tg_scope_end(sc);
}

/* ---- context data and scalars ---- */

TG_TEST(custom_function, context_data_lives_as_long_as_the_node) {
  register_test_ops();
  data_frees = 0;
  tg_tensor *x = tg_from_data(TG_SHAPE(2), (double[]){1, 2}, f64_grad); /* outlives the scopes */
  tg_scope sc = tg_scope_begin();
  tg_tensor *y = tg_apply1(op("test_with_data"), 1, (const tg_tensor *const[]){x}, 0, NULL);
  tg_assert_close(y, tg_from_data(TG_SHAPE(2), (double[]){-2.5, -5}, f64), 0, 0);
  cr_assert_eq(data_frees, 0);
  cr_assert_eq(tg_backward_ex(tg_sum(y), NULL, (tg_backward_options){.retain_graph = true}), TG_OK,
               "%s", tg_last_error_message());
  cr_assert_eq(data_frees, 0, "retain_graph keeps it");
  cr_assert_eq(tg_backward(tg_sum(y), NULL), TG_OK, "%s", tg_last_error_message());
  tg_assert_close(tg_grad(x), tg_full(TG_SHAPE(2), -5, f64), 0, 0);
  cr_assert_eq(data_frees, 1, "freed with the saved tensors");
  tg_tensor *y2 = tg_apply1(op("test_with_data"), 1, (const tg_tensor *const[]){x}, 0, NULL);
  cr_assert(y2);
  tg_scope_end(sc); /* y2's node dies with it */
  cr_assert_eq(data_frees, 2);
  sc = tg_scope_begin();
  tg_no_grad_begin();
  cr_assert(tg_apply1(op("test_with_data"), 1, (const tg_tensor *const[]){x}, 0, NULL));
  tg_no_grad_end();
  cr_assert_eq(data_frees, 3, "an unrecorded call frees it at once");
  tg_scope_end(sc);
}

/* ---- user in-place ops and the version counter ---- */

/* x *= 2 (or x = exp(x)) written through the data pointer, the way a user kernel would:
 * tg_apply bumps the version for it (PyTorch's mark_dirty). */
static tg_status scale_inplace(const tg_tensor *const *in, tg_tensor **out, bool exp_) {
  tg_tensor *x = (tg_tensor *)in[0];
  if (!tg_is_contiguous(x) || tg_tensor_dtype(x) != TG_F64)
    return tg_set_error(TG_ERR_ARGUMENT, "test_inplace: wants a contiguous F64 tensor");
  double *d = tg_data_ptr(x);
  for (int64_t i = 0; i < tg_numel(x); i++) d[i] = exp_ ? exp(d[i]) : 2 * d[i];
  out[0] = x;
  return TG_OK;
}
static tg_status dbl_forward(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  (void)ctx;
  return scale_inplace(in, out, false);
}
static tg_status dbl_backward(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  (void)ctx;
  gi[0] = tg_mul_scalar(g[0], 2.0);
  return gi[0] ? TG_OK : tg_last_error();
}
/* Saves its output (the target, after the write): its own backward must accept it. */
static tg_status exp_forward(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  tg_status st = scale_inplace(in, out, true);
  return st != TG_OK ? st : tg_ctx_save_for_backward(ctx, 1, (const tg_tensor *const *)out);
}
static tg_status exp_backward(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  tg_tensor *y = tg_ctx_saved(ctx, 0);
  gi[0] = y ? tg_mul(g[0], y) : NULL;
  return gi[0] ? TG_OK : tg_last_error();
}
static const tg_op_desc user_dbl_ = {
    "test_user_dbl_", 1, 1, {[TG_CPU] = dbl_forward}, dbl_backward, TG_OP_INPLACE, NULL};
static const tg_op_desc user_exp_ = {
    "test_user_exp_", 1, 1, {[TG_CPU] = exp_forward}, exp_backward, TG_OP_INPLACE, NULL};

TG_TEST(custom_function, user_inplace_op_invalidates_what_others_saved) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_from_data(TG_SHAPE(3), (double[]){1, 2, 3}, f64_grad);
  tg_tensor *y = tg_mul_scalar(x, 1.0);
  tg_tensor *m = tg_mul(y, y); /* saves y */
  uint64_t v = tg_version(y);
  cr_assert_not_null(tg_apply1(&user_dbl_, 1, (const tg_tensor *const[]){y}, 0, NULL), "%s",
                     tg_last_error_message());
  cr_assert_eq(tg_version(y), v + 1, "bumped once");
  /* Without the bump backward returned TG_OK with dx = 12 (correct: 6). */
  cr_assert_eq(tg_backward(tg_sum(m), NULL), TG_ERR_STATE);
  tg_expect_error(TG_ERR_STATE, "tg_backward: mul: saved tensor ", "[3]",
                  "modified by an in-place operation");
  cr_assert_null(tg_grad(x));
  tg_scope_end(sc);
}

TG_TEST(custom_function, user_inplace_op_under_no_grad_bumps_the_version) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_from_data(TG_SHAPE(3), (double[]){1, 2, 3}, f64_grad);
  tg_tensor *m = tg_mul(x, x); /* saves the leaf x */
  tg_no_grad_begin();
  cr_assert_not_null(tg_apply1(&user_dbl_, 1, (const tg_tensor *const[]){x}, 0, NULL));
  tg_no_grad_end();
  cr_assert_eq(tg_backward(tg_sum(m), NULL), TG_ERR_STATE);
  tg_expect_error(TG_ERR_STATE, "modified by an in-place operation");
  tg_scope_end(sc);
}

TG_TEST(custom_function, user_inplace_op_then_backward_is_right) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_from_data(TG_SHAPE(3), (double[]){1, 2, 3}, f64_grad);
  tg_tensor *y = tg_mul_scalar(x, 1.0);
  cr_assert_not_null(tg_apply1(&user_dbl_, 1, (const tg_tensor *const[]){y}, 0, NULL));
  cr_assert_str_eq(tg_grad_fn_name(y), "test_user_dbl_");
  tg_tensor *m = tg_mul(y, y); /* after the write: m = 4x^2, dm/dx = 8x */
  cr_assert_eq(tg_backward(tg_sum(m), NULL), TG_OK, "%s", tg_last_error_message());
  tg_assert_close(tg_grad(x), tg_from_data(TG_SHAPE(3), (double[]){8, 16, 24}, f64), 0, 0);
  /* An op that saves its own output: stamped after the write, so its backward accepts it. */
  tg_tensor *z = tg_mul_scalar(x, 1.0);
  cr_assert_not_null(tg_apply1(&user_exp_, 1, (const tg_tensor *const[]){z}, 0, NULL), "%s",
                     tg_last_error_message());
  cr_assert_eq(tg_set_grad(x, NULL), TG_OK);
  cr_assert_eq(tg_backward(tg_sum(z), NULL), TG_OK, "%s", tg_last_error_message());
  tg_assert_close(tg_grad(x), tg_from_data(TG_SHAPE(3), (double[]){exp(1), exp(2), exp(3)}, f64),
                  1e-15, 0);
  tg_scope_end(sc);
}
