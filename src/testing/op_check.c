/* tg_op_check: an op checked by its sample inputs (tg's OpInfo; the contract is in
 * include/tg/autograd.h).
 *
 * Per sample, in F64 on the CPU (values from a generator of a fixed seed, so a failure
 * reproduces): gradcheck through tg_apply_ex when the op has a backward and an input requires
 * grad, else one forward call; then gradgradcheck, or for a TG_OP_ONCE_DIFFERENTIABLE op
 * the check that double backward is refused with TG_ERR_STATE. An in-place op runs on a
 * clone of input 0 made inside the checked function (so the sample's leaf is never written
 * and the clone's gradient reaches it); when the op takes any number of inputs (-1), as
 * the built-in in-place forms do, a second clone follows the sample's inputs as "input 0's
 * old value", which their backward may read.
 *
 * CPU against CUDA (a device present, the op with a CUDA kernel, not skip_cuda): the samples
 * are made twice from the same seed, once per device, in F32 and in F64; the inputs must
 * agree, then the forward outputs, and in F64 the gradients of every input that requires
 * grad for the same random upstream gradients. Tolerances, |cuda - cpu| <= atol + rtol|cpu|:
 * F64 rtol 1e-9, atol 1e-12 (the devices may sum in another order and their libm may differ
 * in the last bits); F32 rtol 1e-4, atol 1e-5 (the same, at F32's 6e-8 epsilon, over sums of
 * up to a few dozen terms); I64 outputs (indices) exactly. NaN matches only NaN.
 *
 * Failures are TG_ERR_GRADCHECK (a check found a mismatch) or the error that stopped a step,
 * prefixed "tg_op_check: op '<name>' sample <i> (<label>): <check>: ". */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tensor/error_impl.h"
#include "tensor/host_memory.h"
#include "tg/cuda.h"
#include "tg/ops.h"
#include "tg/testing.h"

#define CHECK_SEED 0x6f70696e666full /* "opinfo": samples of every run are the same */
#define UPSTREAM_SEED 0x75707374ull  /* the CPU-vs-CUDA upstream gradients */
#define MAX_OUTPUTS 16
#define CUDA_RTOL_F64 1e-9
#define CUDA_ATOL_F64 1e-12
#define CUDA_RTOL_F32 1e-4
#define CUDA_ATOL_F32 1e-5

/* One sample of one op, and what it is called in messages. */
typedef struct op_call {
  const tg_op_desc *op;
  const tg_sample *s;
  int index;
  int n_outputs;
  const char *device; /* "" on the CPU pass, "cuda f32 " / "cuda f64 " on the CUDA ones */
} op_call;

/* Prefixes the pending error with op, sample and check; returns its code. */
static tg_status failed(const op_call *c, const char *check) {
  char prefix[256];
  snprintf(prefix, sizeof prefix, "tg_op_check: op '%s' sample %d (%s): %s%s", c->op->name,
           c->index, c->s->label ? c->s->label : "?", c->device, check);
  if (tg_last_error() == TG_OK)
    tg_set_error(TG_ERR_STATE, "%s: failed without an error message", prefix);
  else
    tg__error_prefix(prefix);
  return tg_last_error();
}

static void passed(const op_call *c, const char *check, bool verbose) {
  if (verbose)
    printf("tg_op_check: op '%s' sample %d (%s): %s%s ok\n", c->op->name, c->index, c->s->label,
           c->device, check);
}

/* ---- calling the op on a sample ---- */

/* The op on the sample's inputs (as gradcheck's function: in holds the sample's inputs). */
static tg_status call_op(void *user, const tg_tensor *const *in, tg_tensor **out) {
  const op_call *c = user;
  const tg_sample *s = c->s;
  const tg_tensor *inputs[TG_SAMPLE_MAX_INPUTS + 1];
  int n = s->n_inputs;
  for (int i = 0; i < n; i++) inputs[i] = in[i];
  if (c->op->flags & TG_OP_INPLACE) {
    tg_tensor *target = tg_clone(in[0]);
    if (!target) return tg_last_error();
    inputs[0] = target;
    if (c->op->n_inputs == -1) {
      tg_tensor *old = tg_clone(in[0]);
      if (!old) return tg_last_error();
      inputs[n++] = old;
    }
  }
  return tg_apply_ex(c->op, n, inputs, s->n_scalars, s->scalars, s->n_ints, s->ints, c->n_outputs,
                     out);
}

static bool any_requires_grad(const tg_sample *s) {
  for (int i = 0; i < s->n_inputs; i++)
    if (tg_requires_grad(s->inputs[i])) return true;
  return false;
}

/* ---- validating what a sample function returned ---- */

static tg_status sample_error(const tg_op_desc *op, int index, const tg_sample *s,
                              const char *what) {
  return tg_set_error(TG_ERR_ARGUMENT, "tg_op_check: op '%s' sample %d (%s): %s", op->name, index,
                      s->label ? s->label : "no label", what);
}

/* Checks the sample's counts against the op and resolves its number of outputs. */
static tg_status validate(const tg_op_desc *op, int index, const tg_sample *s, int *n_outputs) {
  char what[160];
  if (!s->label) return sample_error(op, index, s, "label is NULL");
  if (s->n_inputs < 1 || s->n_inputs > TG_SAMPLE_MAX_INPUTS ||
      (op->n_inputs >= 0 && s->n_inputs != op->n_inputs)) {
    snprintf(what, sizeof what, "n_inputs is %d; the op takes %d (at most %d)", s->n_inputs,
             op->n_inputs, TG_SAMPLE_MAX_INPUTS);
    return sample_error(op, index, s, what);
  }
  for (int i = 0; i < s->n_inputs; i++)
    if (!s->inputs[i]) {
      snprintf(what, sizeof what, "input %d is NULL", i);
      return sample_error(op, index, s, what);
    }
  if (s->n_scalars < 0 || s->n_scalars > TG_CTX_MAX_SCALARS || s->n_ints < 0 ||
      s->n_ints > TG_CTX_MAX_INTS) {
    snprintf(what, sizeof what, "n_scalars %d and n_ints %d must lie in 0..%d and 0..%d",
             s->n_scalars, s->n_ints, TG_CTX_MAX_SCALARS, TG_CTX_MAX_INTS);
    return sample_error(op, index, s, what);
  }
  int n = s->n_outputs != 0 ? s->n_outputs : op->n_outputs;
  if (n < 1 || n > MAX_OUTPUTS || (op->n_outputs >= 0 && n != op->n_outputs)) {
    snprintf(what, sizeof what, "n_outputs is %d; the op has %d (-1: any, then the sample says)",
             s->n_outputs, op->n_outputs);
    return sample_error(op, index, s, what);
  }
  if (!(s->atol >= 0) || !(s->rtol >= 0)) {
    snprintf(what, sizeof what, "atol %g and rtol %g must not be negative", s->atol, s->rtol);
    return sample_error(op, index, s, what);
  }
  *n_outputs = n;
  return TG_OK;
}

/* Calls the op's sample function; returns the count, or -1 with the error pending. */
static int get_samples(const tg_op_desc *op, const tg_sample_request *req, tg_sample *samples) {
  int n = op->sample_inputs(req, samples);
  if (n == -1) {
    if (tg_last_error() == TG_OK) tg_set_error(TG_ERR_STATE, "returned -1 without an error");
    char prefix[160];
    snprintf(prefix, sizeof prefix, "tg_op_check: op '%s': sample_inputs (%s, %s)", op->name,
             tg_dtype_name(req->dtype), tg_device_type_name(req->device.type));
    tg__error_prefix(prefix);
    return -1;
  }
  if (n < 1 || n > TG_SAMPLE_MAX) {
    tg_set_error(TG_ERR_ARGUMENT,
                 "tg_op_check: op '%s': sample_inputs returned %d; it must return 1..%d samples "
                 "(TG_SAMPLE_MAX) or -1 with an error",
                 op->name, n, TG_SAMPLE_MAX);
    return -1;
  }
  return n;
}

/* ---- the CPU checks ---- */

static tg_gradcheck_options sample_options(tg_gradcheck_options base, const tg_sample *s) {
  if (s->atol > 0) base.atol = s->atol;
  if (s->rtol > 0) base.rtol = s->rtol;
  return base;
}

/* Double backward through a once-differentiable op must fail with TG_ERR_STATE. */
static tg_status check_refusal(const op_call *c) {
  const tg_sample *s = c->s;
  tg_tensor *outs[MAX_OUTPUTS] = {NULL};
  const tg_tensor *roots[MAX_OUTPUTS], *targets[TG_SAMPLE_MAX_INPUTS];
  tg_tensor *seeds[MAX_OUTPUTS], *grads[TG_SAMPLE_MAX_INPUTS] = {NULL};
  tg_tensor *grads2[TG_SAMPLE_MAX_INPUTS] = {NULL};
  int n_roots = 0, n_targets = 0;
  tg_status st = call_op((void *)c, (const tg_tensor *const *)s->inputs, outs);
  if (st != TG_OK) return st;
  for (int j = 0; j < c->n_outputs; j++)
    if (tg_requires_grad(outs[j])) {
      roots[n_roots] = outs[j];
      if (!(seeds[n_roots++] = tg_ones_like(outs[j]))) return tg_last_error();
    }
  for (int i = 0; i < s->n_inputs; i++)
    if (tg_requires_grad(s->inputs[i])) targets[n_targets++] = s->inputs[i];
  st = tg_autograd_grad(n_roots, roots, (const tg_tensor *const *)seeds, n_targets, targets, grads,
                        (tg_backward_options){.create_graph = true}, true);
  if (st != TG_OK) return st;
  /* The first-order gradients that could be differentiated again. */
  const tg_tensor *roots2[TG_SAMPLE_MAX_INPUTS];
  tg_tensor *seeds2[TG_SAMPLE_MAX_INPUTS];
  int n_roots2 = 0;
  for (int i = 0; i < n_targets; i++)
    if (grads[i] && tg_requires_grad(grads[i])) {
      roots2[n_roots2] = grads[i];
      if (!(seeds2[n_roots2++] = tg_ones_like(grads[i]))) return tg_last_error();
    }
  if (n_roots2 == 0) return TG_OK; /* no gradient to differentiate again: nothing to refuse */
  st = tg_autograd_grad(n_roots2, roots2, (const tg_tensor *const *)seeds2, n_targets, targets,
                        grads2, (tg_backward_options){0}, true);
  if (st == TG_ERR_STATE && strstr(tg_last_error_message(), "once-differentiable")) {
    tg_clear_error();
    return TG_OK;
  }
  if (st != TG_OK) return st; /* it failed before reaching the op (out of memory, ...) */
  /* Unreachable while the engine guards once-differentiable backwards (engine.c). */
  return tg_set_error(TG_ERR_GRADCHECK, "double backward ran, but the op is "
                                        "TG_OP_ONCE_DIFFERENTIABLE: it must be refused with "
                                        "TG_ERR_STATE");
}

static tg_status check_cpu_sample(const op_call *c, tg_op_check_options opts) {
  const tg_sample *s = c->s;
  bool differentiable = c->op->backward && any_requires_grad(s);
  if (!differentiable) {
    tg_tensor *outs[MAX_OUTPUTS];
    tg_scope scope = tg_scope_begin();
    tg_status st = call_op((void *)c, (const tg_tensor *const *)s->inputs, outs);
    tg_scope_end(scope);
    if (st != TG_OK) return failed(c, "forward");
    passed(c, "forward", opts.verbose);
    return TG_OK;
  }
  tg_gradcheck_options gc = sample_options(opts.gradcheck, s);
  if (tg_gradcheck(call_op, (void *)c, s->n_inputs, s->inputs, c->n_outputs, gc) != TG_OK)
    return failed(c, "gradcheck");
  passed(c, "gradcheck", opts.verbose);
  if (opts.skip_gradgradcheck) return TG_OK;
  if (c->op->flags & TG_OP_ONCE_DIFFERENTIABLE) {
    tg_scope scope = tg_scope_begin();
    tg_status st = check_refusal(c);
    tg_scope_end(scope);
    if (st != TG_OK) return failed(c, "once-differentiable refusal");
    passed(c, "once-differentiable refusal", opts.verbose);
    return TG_OK;
  }
  if (tg_gradgradcheck(call_op, (void *)c, s->n_inputs, s->inputs, c->n_outputs, gc) != TG_OK)
    return failed(c, "gradgradcheck");
  passed(c, "gradgradcheck", opts.verbose);
  return TG_OK;
}

/* ---- CPU against CUDA ---- */

/* t's elements in row-major order as doubles on the host (caller frees); NULL on error. */
static double *host_values(const tg_tensor *t) {
  int64_t n = tg_numel(t);
  double *v = tg__host_malloc(sizeof *v * (size_t)(n > 0 ? n : 1));
  if (!v) {
    tg_set_error(TG_ERR_MEMORY, "out of memory for %lld values", (long long)n);
    return NULL;
  }
  tg_scope scope = tg_scope_begin();
  tg_tensor *h = tg_to_dtype(tg_to_device(t, TG_DEVICE_CPU), TG_F64);
  tg_status st = h ? tg_to_host_array(h, v, sizeof *v * (size_t)n) : tg_last_error();
  tg_scope_end(scope);
  if (st != TG_OK) {
    tg__host_free(v);
    return NULL;
  }
  return v;
}

/* The CUDA tensor against its CPU twin: sizes, dtype, then every element. */
static tg_status compare(const char *what, int k, const tg_tensor *cpu, const tg_tensor *cuda) {
  if (!cpu || !cuda) {
    if (!cpu && !cuda) return TG_OK;
    return tg_set_error(TG_ERR_GRADCHECK, "%s %d: the CPU gives %s, CUDA %s", what, k,
                        cpu ? "a tensor" : "none", cuda ? "a tensor" : "none");
  }
  char a[128], b[128];
  tg_format_sizes(a, sizeof a, tg_ndim(cpu), tg_sizes(cpu));
  tg_format_sizes(b, sizeof b, tg_ndim(cuda), tg_sizes(cuda));
  tg_dtype dtype = tg_tensor_dtype(cpu);
  bool same_sizes = tg_ndim(cpu) == tg_ndim(cuda);
  for (int d = 0; same_sizes && d < tg_ndim(cpu); d++)
    same_sizes = tg_sizes(cpu)[d] == tg_sizes(cuda)[d];
  if (!same_sizes || dtype != tg_tensor_dtype(cuda))
    return tg_set_error(TG_ERR_GRADCHECK, "%s %d is %s %s on the CPU but %s %s on CUDA", what, k, a,
                        tg_dtype_name(dtype), b, tg_dtype_name(tg_tensor_dtype(cuda)));
  double rtol = dtype == TG_F64 ? CUDA_RTOL_F64 : dtype == TG_F32 ? CUDA_RTOL_F32 : 0.0;
  double atol = dtype == TG_F64 ? CUDA_ATOL_F64 : dtype == TG_F32 ? CUDA_ATOL_F32 : 0.0;
  double *x = host_values(cpu), *y = x ? host_values(cuda) : NULL;
  tg_status st = y ? TG_OK : tg_last_error();
  for (int64_t e = 0; st == TG_OK && e < tg_numel(cpu); e++) {
    bool both_nan = isnan(x[e]) && isnan(y[e]);
    if (!both_nan && !(fabs(y[e] - x[e]) <= atol + rtol * fabs(x[e])))
      st = tg_set_error(TG_ERR_GRADCHECK,
                        "%s %d %s %s element %lld: CPU %.10g, CUDA %.10g, difference %.3g "
                        "(tolerance atol %g + rtol %g * |CPU|)",
                        what, k, a, tg_dtype_name(dtype), (long long)e, x[e], y[e],
                        fabs(y[e] - x[e]), atol, rtol);
  }
  tg__host_free(x);
  tg__host_free(y);
  return st;
}

/* d outputs / d inputs (those that require grad) for upstream gradients ups. */
static tg_status gradients(const op_call *c, tg_tensor *const *outs, tg_tensor *const *ups,
                           tg_tensor **grads) {
  const tg_tensor *roots[MAX_OUTPUTS], *seeds[MAX_OUTPUTS], *targets[TG_SAMPLE_MAX_INPUTS];
  int n_roots = 0, n_targets = 0;
  for (int j = 0; j < c->n_outputs; j++)
    if (tg_requires_grad(outs[j])) {
      roots[n_roots] = outs[j];
      seeds[n_roots++] = ups[j];
    }
  for (int i = 0; i < c->s->n_inputs; i++)
    if (tg_requires_grad(c->s->inputs[i])) targets[n_targets++] = c->s->inputs[i];
  if (n_roots == 0) return TG_OK;
  return tg_autograd_grad(n_roots, roots, seeds, n_targets, targets, grads,
                          (tg_backward_options){0}, true);
}

/* One sample on both devices: inputs, forward outputs, and in F64 the gradients. */
static tg_status compare_sample(const op_call *cpu, const op_call *cuda, tg_generator *gen,
                                tg_op_check_options opts) {
  const tg_sample *s = cpu->s, *t = cuda->s;
  for (int i = 0; i < s->n_inputs; i++)
    if (compare("input", i, s->inputs[i], t->inputs[i]) != TG_OK)
      return failed(cpu, "sample inputs differ between the devices");
  bool grads = tg_tensor_dtype(s->inputs[0]) == TG_F64 && cpu->op->backward && any_requires_grad(s);
  tg_tensor *outs[MAX_OUTPUTS], *outs_cuda[MAX_OUTPUTS];
  bool was = tg_set_grad_enabled(grads);
  tg_status st = call_op((void *)cpu, (const tg_tensor *const *)s->inputs, outs);
  if (st == TG_OK) st = call_op((void *)cuda, (const tg_tensor *const *)t->inputs, outs_cuda);
  tg_set_grad_enabled(was);
  if (st != TG_OK) return failed(cpu, "forward");
  for (int j = 0; j < cpu->n_outputs; j++)
    if (compare("output", j, outs[j], outs_cuda[j]) != TG_OK) return failed(cpu, "forward");
  passed(cpu, "forward", opts.verbose);
  if (!grads) return TG_OK;
  /* The same upstream gradients on both devices: drawn on the CPU, copied. */
  tg_tensor *ups[MAX_OUTPUTS] = {NULL}, *ups_cuda[MAX_OUTPUTS] = {NULL};
  for (int j = 0; j < cpu->n_outputs; j++) {
    if (!tg_requires_grad(outs[j])) continue;
    ups[j] = tg_randn(tg_ndim(outs[j]), tg_sizes(outs[j]), (tg_options){.dtype = TG_F64}, gen);
    ups_cuda[j] = tg_to_device(ups[j], tg_tensor_device(outs_cuda[j]));
    if (!ups_cuda[j]) return failed(cpu, "upstream gradients");
  }
  tg_tensor *g[TG_SAMPLE_MAX_INPUTS] = {NULL}, *g_cuda[TG_SAMPLE_MAX_INPUTS] = {NULL};
  if (gradients(cpu, outs, ups, g) != TG_OK || gradients(cuda, outs_cuda, ups_cuda, g_cuda))
    return failed(cpu, "backward");
  for (int k = 0, i = 0; i < s->n_inputs; i++) {
    if (!tg_requires_grad(s->inputs[i])) continue;
    if (compare("gradient of input", i, g[k], g_cuda[k]) != TG_OK) return failed(cpu, "backward");
    k++;
  }
  passed(cpu, "backward", opts.verbose);
  return TG_OK;
}

static tg_status check_cuda(const tg_op_desc *op, tg_dtype dtype, tg_op_check_options opts) {
  tg_generator *gen_cpu = tg_generator_new(CHECK_SEED), *gen_cuda = tg_generator_new(CHECK_SEED);
  tg_generator *gen_up = tg_generator_new(UPSTREAM_SEED);
  if (!gen_cpu || !gen_cuda || !gen_up) {
    tg_generator_free(gen_cpu);
    tg_generator_free(gen_cuda);
    tg_generator_free(gen_up);
    return tg_set_error(TG_ERR_MEMORY, "tg_op_check: out of memory for generators");
  }
  tg_sample cpu[TG_SAMPLE_MAX], cuda[TG_SAMPLE_MAX];
  tg_sample_request req = {.dtype = dtype, .device = TG_DEVICE_CPU, .gen = gen_cpu};
  tg_sample_request req_cuda = {.dtype = dtype, .device = TG_DEVICE_CUDA(0), .gen = gen_cuda};
  const char *device = dtype == TG_F64 ? "cuda f64 " : "cuda f32 ";
  tg_scope scope = tg_scope_begin();
  tg_status st = TG_OK;
  int n = get_samples(op, &req, cpu), m = n < 0 ? -1 : get_samples(op, &req_cuda, cuda);
  if (n < 0 || m < 0) st = tg_last_error();
  if (st == TG_OK && n != m)
    st = tg_set_error(TG_ERR_GRADCHECK,
                      "tg_op_check: op '%s': %d samples on the CPU but %d on CUDA (%s)", op->name,
                      n, m, tg_dtype_name(dtype));
  for (int i = 0; i < n && st == TG_OK; i++) {
    op_call c = {op, &cpu[i], i, 0, device}, d = {op, &cuda[i], i, 0, device};
    st = validate(op, i, &cpu[i], &c.n_outputs);
    if (st == TG_OK) st = validate(op, i, &cuda[i], &d.n_outputs);
    if (st != TG_OK) break;
    if (c.n_outputs != d.n_outputs || cpu[i].n_inputs != cuda[i].n_inputs) {
      st = tg_set_error(TG_ERR_GRADCHECK,
                        "tg_op_check: op '%s' sample %d (%s): the CUDA sample has %d inputs and "
                        "%d outputs, the CPU one %d and %d",
                        op->name, i, cpu[i].label, cuda[i].n_inputs, d.n_outputs, cpu[i].n_inputs,
                        c.n_outputs);
      break;
    }
    tg_scope inner = tg_scope_begin();
    st = compare_sample(&c, &d, gen_up, opts);
    tg_scope_end(inner);
  }
  tg_scope_end(scope);
  tg_generator_free(gen_cpu);
  tg_generator_free(gen_cuda);
  tg_generator_free(gen_up);
  return st;
}

/* ---- the entry point ---- */

tg_status tg_op_check(const tg_op_desc *op, tg_op_check_options opts) {
  if (!op) return tg_set_error(TG_ERR_ARGUMENT, "tg_op_check: op is NULL");
  if (!op->name) return tg_set_error(TG_ERR_ARGUMENT, "tg_op_check: op has no name");
  if (!op->sample_inputs)
    return tg_set_error(TG_ERR_UNSUPPORTED,
                        "tg_op_check: op '%s' has no sample inputs (tg_op_desc.sample_inputs is "
                        "NULL): nothing to check it with",
                        op->name);
  tg_generator *gen = tg_generator_new(CHECK_SEED);
  if (!gen) return tg_set_error(TG_ERR_MEMORY, "tg_op_check: out of memory for a generator");
  tg_sample samples[TG_SAMPLE_MAX];
  tg_sample_request req = {.dtype = TG_F64, .device = TG_DEVICE_CPU, .gen = gen};
  tg_scope scope = tg_scope_begin();
  int n = get_samples(op, &req, samples);
  tg_status st = n < 0 ? tg_last_error() : TG_OK;
  for (int i = 0; i < n && st == TG_OK; i++) {
    op_call c = {op, &samples[i], i, 0, ""};
    st = validate(op, i, &samples[i], &c.n_outputs);
    if (st == TG_OK) st = check_cpu_sample(&c, opts);
  }
  tg_scope_end(scope);
  tg_generator_free(gen);
  bool cuda = !opts.skip_cuda && op->forward[TG_CUDA] && tg_cuda_is_available();
  if (st == TG_OK && cuda) st = check_cuda(op, TG_F32, opts);
  if (st == TG_OK && cuda) st = check_cuda(op, TG_F64, opts);
  return st;
}
