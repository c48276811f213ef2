/* tg's OpInfo: every built-in op has sample inputs and passes tg_op_check (gradcheck,
 * gradgradcheck or the once-differentiable refusal), every bench sample is one valid call,
 * and tg_op_check catches what it must: a wrong backward, an op without samples, bad sample
 * functions. */
#define _POSIX_C_SOURCE 200809L /* fileno, dup, dup2 */
#include <stdio.h>
#include <unistd.h>

#include "ops/registry.h"
#include "opinfo_cases.h"
#include "testutil.h"

#include "alloc_sweep.h"

static const tg_op_check_options quiet = {.gradcheck = {.quiet = true}};

/* ---- the registry walk ---- */

TG_TEST(opinfo, every_builtin_op_has_samples_and_passes_tg_op_check) {
  cr_assert_geq(tg_op_count(), TG_NUM_BUILTIN_OPS);
  for (int i = 0; i < TG_NUM_BUILTIN_OPS; i++) {
    const tg_op_desc *op = tg_op_at(i);
    cr_assert_not_null(op);
    cr_expect_not_null(op->sample_inputs, "built-in op '%s' has no sample inputs", op->name);
    tg_status st = tg_op_check(op, quiet);
    cr_expect_eq(st, TG_OK, "%s", tg_last_error_message());
    tg_clear_error();
  }
}

/* Every bench sample: one call of the op's arity that runs (forward, grad mode off). */
TG_TEST(opinfo, every_bench_sample_is_one_call_that_runs) {
  tg_generator *gen = tg_generator_new(7);
  for (int i = 0; i < TG_NUM_BUILTIN_OPS; i++) {
    const tg_op_desc *op = tg_op_at(i);
    tg_scope scope = tg_scope_begin();
    tg_sample s[TG_SAMPLE_MAX];
    tg_sample_request req = {.dtype = TG_F32, .device = TG_DEVICE_CPU, .gen = gen, .bench = true};
    int n = op->sample_inputs(&req, s);
    cr_expect_eq(n, 1, "op '%s': %d bench samples (%s)", op->name, n, tg_last_error_message());
    if (n == 1) {
      int n_out = s[0].n_outputs ? s[0].n_outputs : op->n_outputs;
      tg_tensor *outs[4];
      const tg_tensor *in[TG_SAMPLE_MAX_INPUTS + 1];
      int n_in = s[0].n_inputs;
      for (int k = 0; k < n_in; k++) in[k] = s[0].inputs[k];
      if (op->flags & TG_OP_INPLACE) {
        in[0] = tg_clone(in[0]);
        if (op->n_inputs == -1) in[n_in++] = tg_clone(s[0].inputs[0]);
      }
      tg_no_grad_begin();
      tg_status st = tg_apply_ex(op, n_in, in, s[0].n_scalars, s[0].scalars, s[0].n_ints, s[0].ints,
                                 n_out, outs);
      tg_no_grad_end();
      cr_expect_eq(st, TG_OK, "op '%s' bench: %s", op->name, tg_last_error_message());
      int64_t numel = 0; /* what it reads and writes */
      for (int k = 0; k < s[0].n_inputs; k++) numel += tg_numel(s[0].inputs[k]);
      for (int k = 0; st == TG_OK && k < n_out; k++) numel += tg_numel(outs[k]);
      cr_expect_geq(numel, 1 << 16, "op '%s': the bench call has only %lld elements", op->name,
                    (long long)numel);
    }
    tg_clear_error();
    tg_scope_end(scope);
  }
  tg_generator_free(gen);
}

TG_TEST(opinfo, lltm_bench_sample_reads_its_sizes) {
  tg_generator *gen = tg_generator_new(1);
  const tg_op_desc *op = tg_op_lookup("lltm");
  tg_sample s[TG_SAMPLE_MAX];
  tg_sample_request req = {.dtype = TG_F32, .gen = gen, .bench = true};
  cr_assert_eq(op->sample_inputs(&req, s), 1);
  tg_assert_sizes(s[0].inputs[0], 16, 32); /* the tutorial's batch 16, 32 features */
  tg_assert_sizes(s[0].inputs[1], 384, 160);
  req.n_sizes = 3;
  req.sizes = (const int64_t[]){2, 3, 4};
  cr_assert_eq(op->sample_inputs(&req, s), 1);
  tg_assert_sizes(s[0].inputs[0], 2, 3);
  tg_assert_sizes(s[0].inputs[1], 12, 7);
  tg_assert_sizes(s[0].inputs[4], 2, 4);
  req.sizes = (const int64_t[]){2, 0, 4};
  cr_assert_eq(op->sample_inputs(&req, s), -1);
  tg_expect_error(TG_ERR_ARGUMENT, "lltm", "positive");
  tg_generator_free(gen);
}

TG_TEST(opinfo, mm_bench_sample_reads_its_sizes) {
  tg_generator *gen = tg_generator_new(1);
  tg_sample s[TG_SAMPLE_MAX];
  tg_sample_request req = {.dtype = TG_F32, .gen = gen, .bench = true};
  cr_assert_eq(tg_op_lookup("mm")->sample_inputs(&req, s), 1);
  tg_assert_sizes(s[0].inputs[0], 256, 512);
  tg_assert_sizes(s[0].inputs[1], 512, 512);
  req.n_sizes = 3;
  req.sizes = (const int64_t[]){2, 3, 4};
  cr_assert_eq(tg_op_lookup("addmm")->sample_inputs(&req, s), 1);
  tg_assert_sizes(s[0].inputs[0], 4);
  tg_assert_sizes(s[0].inputs[1], 2, 3);
  tg_assert_sizes(s[0].inputs[2], 3, 4);
  req.sizes = (const int64_t[]){2, 3, -4};
  cr_assert_eq(tg_op_lookup("mm")->sample_inputs(&req, s), -1);
  tg_expect_error(TG_ERR_ARGUMENT, "mm samples", "positive");
  tg_generator_free(gen);
}

/* ---- a custom op: y = x^2, with a backward that may be wrong by a factor ---- */

static double backward_factor = 2.0;

static tg_status fwd_square(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  out[0] = tg_mul(in[0], in[0]);
  return out[0] && tg_ctx_save_for_backward(ctx, 1, in) == TG_OK ? TG_OK : tg_last_error();
}

static tg_status bwd_square(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  gi[0] = tg_mul(g[0], tg_mul_scalar(tg_ctx_saved(ctx, 0), backward_factor));
  return gi[0] ? TG_OK : tg_last_error();
}

static double sample_rtol;

static int square_samples(const tg_sample_request *r, tg_sample *out) {
  tg_tensor *x = tg_rand(TG_SHAPE(2, 3), (tg_options){r->dtype, r->device, true}, r->gen);
  tg_tensor *y = tg_rand(TG_SHAPE(4), (tg_options){r->dtype, r->device, true}, r->gen);
  if (!x || !y) return -1;
  out[0] = (tg_sample){.label = "2-D", .n_inputs = 1, .inputs = {x}, .rtol = sample_rtol};
  out[1] = (tg_sample){.label = "1-D", .n_inputs = 1, .inputs = {y}, .rtol = sample_rtol};
  return 2;
}

static const tg_op_desc *register_square(const char *name, unsigned flags, tg_sample_fn samples) {
  tg_op_desc desc = {.name = name,
                     .n_inputs = 1,
                     .n_outputs = 1,
                     .forward = {fwd_square, fwd_square},
                     .backward = bwd_square,
                     .flags = flags,
                     .sample_inputs = samples};
  cr_assert_eq(tg_op_register(&desc), TG_OK, "%s", tg_last_error_message());
  return tg_op_lookup(name);
}

TG_TEST(opinfo, a_registered_op_with_samples_is_checked) {
  const tg_op_desc *op = register_square("test_square", 0, square_samples);
  cr_expect_eq(tg_op_check(op, quiet), TG_OK, "%s", tg_last_error_message());
  /* The walk reaches it too. */
  bool found = false;
  for (int i = TG_NUM_BUILTIN_OPS; i < tg_op_count(); i++) found |= tg_op_at(i) == op;
  cr_expect(found);
}

TG_TEST(opinfo, a_wrong_backward_is_caught_naming_op_sample_and_check) {
  const tg_op_desc *op = register_square("test_square_wrong", 0, square_samples);
  backward_factor = 3.0;
  tg_status st = tg_op_check(op, quiet);
  backward_factor = 2.0;
  cr_expect_eq(st, TG_ERR_GRADCHECK);
  tg_expect_error(TG_ERR_GRADCHECK, "tg_op_check: op 'test_square_wrong' sample 0 (2-D): gradcheck",
                  "Jacobian mismatch");
}

/* A sample's own tolerance wins over the options' (and the default's). */
TG_TEST(opinfo, a_samples_tolerance_is_used) {
  const tg_op_desc *op = register_square("test_square_tol", 0, square_samples);
  backward_factor = 2.0 * 1.01; /* 1% off: beyond the default rtol 1e-3 */
  cr_expect_eq(tg_op_check(op, quiet), TG_ERR_GRADCHECK);
  tg_clear_error();
  sample_rtol = 0.05;
  tg_op_check_options loose = quiet;
  loose.skip_gradgradcheck = true; /* the second derivative is off by 1% as well */
  cr_expect_eq(tg_op_check(op, loose), TG_OK, "%s", tg_last_error_message());
  sample_rtol = 0;
  backward_factor = 2.0;
}

/* Runs tg_op_check with verbose on and returns what it printed (static buffer). */
static const char *verbose_output(const tg_op_desc *op, tg_status *st) {
  static char buf[8192];
  fflush(stdout);
  int saved = dup(STDOUT_FILENO);
  FILE *tmp = tmpfile();
  cr_assert(saved >= 0 && tmp);
  dup2(fileno(tmp), STDOUT_FILENO);
  tg_op_check_options opts = quiet;
  opts.verbose = true;
  *st = tg_op_check(op, opts);
  fflush(stdout);
  dup2(saved, STDOUT_FILENO);
  close(saved);
  rewind(tmp);
  size_t n = fread(buf, 1, sizeof buf - 1, tmp);
  buf[n] = '\0';
  fclose(tmp);
  return buf;
}

TG_TEST(opinfo, once_differentiable_ops_are_checked_for_the_refusal) {
  tg_status st;
  const char *out = verbose_output(tg_op_lookup("lltm"), &st);
  cr_expect_eq(st, TG_OK, "%s", tg_last_error_message());
  cr_expect(strstr(out, "tg_op_check: op 'lltm' sample 0 (every input): gradcheck ok\n"), "%s",
            out);
  cr_expect(strstr(out, "tg_op_check: op 'lltm' sample 0 (every input): once-differentiable "
                        "refusal ok\n"),
            "%s", out);
  cr_expect_null(strstr(out, "gradgradcheck"), "%s", out);
  /* A user op marked so gets the same treatment. */
  const tg_op_desc *op =
      register_square("test_square_once", TG_OP_ONCE_DIFFERENTIABLE, square_samples);
  out = verbose_output(op, &st);
  cr_expect_eq(st, TG_OK, "%s", tg_last_error_message());
  cr_expect(strstr(out, "op 'test_square_once' sample 1 (1-D): once-differentiable refusal ok"),
            "%s", out);
  /* Unmarked, the same op gets a gradgradcheck instead. */
  out = verbose_output(register_square("test_square_twice", 0, square_samples), &st);
  cr_expect_eq(st, TG_OK, "%s", tg_last_error_message());
  cr_expect(strstr(out, "op 'test_square_twice' sample 1 (1-D): gradgradcheck ok"), "%s", out);
}

TG_TEST(opinfo, non_differentiable_ops_get_a_forward_run) {
  tg_status st;
  const char *out = verbose_output(tg_op_lookup("eq"), &st);
  cr_expect_eq(st, TG_OK, "%s", tg_last_error_message());
  cr_expect(strstr(out, "tg_op_check: op 'eq' sample 0 (same sizes): forward ok\n"), "%s", out);
  cr_expect_null(strstr(out, "gradcheck"), "%s", out);
}

/* ---- errors ---- */

TG_TEST(opinfo, null_op_is_an_argument_error) {
  cr_expect_eq(tg_op_check(NULL, quiet), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_op_check", "op is NULL");
}

TG_TEST(opinfo, an_op_without_a_name_is_an_argument_error) {
  tg_op_desc nameless = {.n_inputs = 1, .n_outputs = 1};
  cr_expect_eq(tg_op_check(&nameless, quiet), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_op_check", "no name");
}

TG_TEST(opinfo, an_op_without_samples_is_unsupported) {
  const tg_op_desc *op = register_square("test_square_unsampled", 0, NULL);
  cr_expect_eq(tg_op_check(op, quiet), TG_ERR_UNSUPPORTED);
  tg_expect_error(TG_ERR_UNSUPPORTED, "tg_op_check", "'test_square_unsampled'", "no sample inputs");
}

static int fails_with_error(const tg_sample_request *r, tg_sample *out) {
  (void)r, (void)out;
  tg_set_error(TG_ERR_SHAPE, "my samples broke");
  return -1;
}
static int fails_silently(const tg_sample_request *r, tg_sample *out) {
  (void)r, (void)out;
  return -1;
}
static int too_many(const tg_sample_request *r, tg_sample *out) {
  (void)r, (void)out;
  return TG_SAMPLE_MAX + 1;
}
static int none(const tg_sample_request *r, tg_sample *out) {
  (void)r, (void)out;
  return 0;
}
static int two_inputs(const tg_sample_request *r, tg_sample *out) {
  tg_tensor *x = tg_rand(TG_SHAPE(2), (tg_options){r->dtype, r->device, true}, r->gen);
  out[0] = (tg_sample){.label = "pair", .n_inputs = 2, .inputs = {x, x}};
  return 1;
}
static int null_input(const tg_sample_request *r, tg_sample *out) {
  (void)r;
  out[0] = (tg_sample){.label = "hole", .n_inputs = 1};
  return 1;
}
static int three_outputs(const tg_sample_request *r, tg_sample *out) {
  tg_tensor *x = tg_rand(TG_SHAPE(2), (tg_options){r->dtype, r->device, true}, r->gen);
  out[0] = (tg_sample){.label = "outs", .n_inputs = 1, .inputs = {x}, .n_outputs = 3};
  return 1;
}
static int negative_atol(const tg_sample_request *r, tg_sample *out) {
  tg_tensor *x = tg_rand(TG_SHAPE(2), (tg_options){r->dtype, r->device, true}, r->gen);
  out[0] = (tg_sample){.label = "tol", .n_inputs = 1, .inputs = {x}, .atol = -1};
  return 1;
}
static int no_label(const tg_sample_request *r, tg_sample *out) {
  tg_tensor *x = tg_rand(TG_SHAPE(2), (tg_options){r->dtype, r->device, true}, r->gen);
  out[0] = (tg_sample){.n_inputs = 1, .inputs = {x}};
  return 1;
}

static const tg_op_desc *register_square_sampled(const char *name, tg_sample_fn samples) {
  return register_square(name, 0, samples);
}

TG_TEST(opinfo, bad_sample_functions_are_errors) {
  const bad_samples_case cases[] = {
      {"test_bad_error", fails_with_error, TG_ERR_SHAPE, {"sample_inputs", "my samples broke"}},
      {"test_bad_silent", fails_silently, TG_ERR_STATE, {"sample_inputs", "without an error"}},
      {"test_bad_many", too_many, TG_ERR_ARGUMENT, {"returned 17", "TG_SAMPLE_MAX"}},
      {"test_bad_none", none, TG_ERR_ARGUMENT, {"returned 0", "1..16"}},
      {"test_bad_inputs", two_inputs, TG_ERR_ARGUMENT, {"sample 0 (pair)", "n_inputs is 2"}},
      {"test_bad_null", null_input, TG_ERR_ARGUMENT, {"sample 0 (hole)", "input 0 is NULL"}},
      {"test_bad_outputs", three_outputs, TG_ERR_ARGUMENT, {"sample 0 (outs)", "n_outputs is 3"}},
      {"test_bad_tol", negative_atol, TG_ERR_ARGUMENT, {"sample 0 (tol)", "atol -1"}},
      {"test_bad_label", no_label, TG_ERR_ARGUMENT, {"sample 0 (no label)", "label is NULL"}},
  };
  expect_bad_samples_refused(cases, sizeof cases / sizeof cases[0], register_square_sampled, quiet);
}

/* The sample functions of the built-in ops fail cleanly on a bad request. */
TG_TEST(opinfo, a_sample_function_reports_a_failure) {
  tg_generator *gen = tg_generator_new(3);
  tg_sample s[TG_SAMPLE_MAX];
  /* A device this build does not have (or with no CUDA device present). */
  tg_sample_request req = {.dtype = TG_F64, .device = TG_DEVICE_CUDA(7), .gen = gen};
  if (tg_cuda_device_count() <= 7) {
    cr_expect_eq(tg_op_lookup("add")->sample_inputs(&req, s), -1);
    cr_expect_neq(tg_last_error(), TG_OK);
    tg_clear_error();
  }
  tg_generator_free(gen);
}

/* ---- allocation failure ---- */

static tg_status check_op(void *user, double *out, int *n_out) {
  (void)out, (void)n_out;
  return tg_op_check(user, quiet);
}

/* Every host allocation of a check fails in turn: TG_ERR_MEMORY, nothing left alive. */
TG_TEST(opinfo, allocation_failure_is_an_error) {
  const tg_op_desc *op = register_square("test_square_sweep", 0, square_samples);
  sweep_result r = sweep("tg_op_check", check_op, (void *)op);
  cr_expect_gt(r.failed, 0);
  r = sweep(
      "tg_op_check of a once-differentiable op", check_op,
      (void *)register_square("test_square_once_sweep", TG_OP_ONCE_DIFFERENTIABLE, square_samples));
  cr_expect_gt(r.failed, 0);
}

/* as_strided joined the walk when it became differentiable: its samples (overlapping
 * windows, storage outside a stepped input) pass gradcheck and gradgradcheck. */
TG_TEST(opinfo, as_strided_samples_are_gradchecked_twice) {
  tg_status st;
  const char *out = verbose_output(tg_op_lookup("as_strided"), &st);
  cr_expect_eq(st, TG_OK, "%s", tg_last_error_message());
  cr_expect(strstr(out, "op 'as_strided' sample 1 (overlapping 3x3 patches (im2col)): "
                        "gradcheck ok"),
            "%s", out);
  cr_expect(strstr(out, "op 'as_strided' sample 1 (overlapping 3x3 patches (im2col)): "
                        "gradgradcheck ok"),
            "%s", out);
  cr_expect(strstr(out, "(stepped input, storage it does not cover): gradgradcheck ok"), "%s", out);
}
