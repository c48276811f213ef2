/* lltm_ext: the LLTM of PyTorch's C++/CUDA extension tutorial, written as a tg extension
 * the way the tutorial writes it: a shared library, built outside tg, that registers the op
 * "lltm_ext" when it is loaded (tg_extension_load, or compiled and loaded by tg_extension_jit).
 * docs/extensions.md walks through building, loading, checking and timing it.
 *
 * Like the built-in "lltm" op it takes input [B, I], weights [3S, S+I], bias [3S] (or
 * [1, 3S]), old_h [B, S], old_cell [B, S] (F32 or F64, one device) and returns new_h and
 * new_cell [B, S]. As in the tutorial:
 *
 *   forward   composed of tg ops (cat, addmm, chunk, sigmoid, elu, mul, add, tanh); grad
 *             mode is off inside an op's forward, so nothing is recorded but the op itself;
 *   backward  hand-written with tg ops from what forward saved (d_sigmoid, d_tanh, d_elu);
 *   CUDA      (built with TG_EXTENSION_CUDA, lltm_ext.cu) the GEMMs through tg ops and the
 *             elementwise parts in the tutorial's kernels.
 *
 * The backward works from saved intermediates (the gates), which a second backward would
 * treat as constants, and its CUDA part is a raw kernel: the op is once-differentiable. */
#include <tg/extension.h>
#include <tg/tg.h>

#ifdef TG_EXTENSION_CUDA
#include "lltm_ext.h"
#endif

enum { IN_INPUT, IN_WEIGHTS, IN_BIAS, IN_OLD_H, IN_OLD_CELL, N_INPUTS };
/* What forward saves, in this order (the tutorial's lltm_forward returns the same). */
enum {
  SAVED_X,
  SAVED_GATE_WEIGHTS,
  SAVED_WEIGHTS,
  SAVED_NEW_CELL,
  SAVED_INPUT_GATE,
  SAVED_OUTPUT_GATE,
  SAVED_CANDIDATE_CELL,
  N_SAVED
};

/* ---- argument checks: the shapes the tg ops below would reject less clearly ---- */

static bool is_matrix(const tg_tensor *t, int64_t rows, int64_t cols) {
  return tg_ndim(t) == 2 && tg_size(t, 0) == rows && tg_size(t, 1) == cols;
}

static tg_status check_args(const tg_tensor *const *in) {
  static const char *const names[N_INPUTS] = {"input", "weights", "bias", "old_h", "old_cell"};
  static const char *const wanted[N_INPUTS] = {"", "[3*state, state+features]",
                                               "[3*state] or [1, 3*state]", "[batch, state]",
                                               "[batch, state]"};
  const tg_tensor *input = in[IN_INPUT], *old_h = in[IN_OLD_H];
  char a[64], b[64];
  if (tg_ndim(input) != 2 || tg_ndim(old_h) != 2)
    return tg_set_error(TG_ERR_SHAPE, "lltm_ext: input and old_h must be 2-D, got %s and %s",
                        tg_format_sizes(a, sizeof a, tg_ndim(input), tg_sizes(input)),
                        tg_format_sizes(b, sizeof b, tg_ndim(old_h), tg_sizes(old_h)));
  const int64_t B = tg_size(input, 0), I = tg_size(input, 1), S = tg_size(old_h, 1);
  for (int i = IN_WEIGHTS; i < N_INPUTS; i++) {
    const tg_tensor *t = in[i];
    bool ok = i == IN_WEIGHTS ? is_matrix(t, 3 * S, S + I)
              : i == IN_BIAS ? (tg_ndim(t) == 1 && tg_size(t, 0) == 3 * S) || is_matrix(t, 1, 3 * S)
                             : is_matrix(t, B, S);
    if (!ok)
      return tg_set_error(TG_ERR_SHAPE,
                          "lltm_ext: %s is %s but must be %s, with batch %lld and features %lld "
                          "from input %s and state %lld from old_h",
                          names[i], tg_format_sizes(a, sizeof a, tg_ndim(t), tg_sizes(t)),
                          wanted[i], (long long)B, (long long)I,
                          tg_format_sizes(b, sizeof b, tg_ndim(input), tg_sizes(input)),
                          (long long)S);
  }
  return TG_OK;
}

/* ---- forward ---- */

/* gate_weights = cat([old_h, input], 1) @ weights^T + bias, as the tutorial; X kept. */
static tg_tensor *gate_weights_of(const tg_tensor *const *in, tg_tensor **X) {
  *X = tg_cat(2, (const tg_tensor *const[]){in[IN_OLD_H], in[IN_INPUT]}, 1);
  return tg_addmm(in[IN_BIAS], *X, tg_t(in[IN_WEIGHTS]), 1.0, 1.0);
}

/* new_h, then the outputs (first, so that new_cell is saved as the output it is) and what
 * backward needs. */
static tg_status finish_forward(tg_ctx *ctx, tg_tensor **out, tg_tensor *const saved[N_SAVED]) {
  out[0] = tg_mul(tg_tanh(saved[SAVED_NEW_CELL]), saved[SAVED_OUTPUT_GATE]);
  out[1] = saved[SAVED_NEW_CELL];
  if (!out[0]) return tg_last_error(); /* an op given NULL (a failed op) passes its error on */
  return tg_ctx_save_for_backward(ctx, N_SAVED, (const tg_tensor *const *)saved);
}

static tg_status lltm_ext_forward(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  if (check_args(in) != TG_OK) return tg_last_error();
  tg_tensor *s[N_SAVED] = {0}, *gates[3] = {0};
  s[SAVED_GATE_WEIGHTS] = gate_weights_of(in, &s[SAVED_X]);
  int n_gates = 0;
  if (!s[SAVED_GATE_WEIGHTS] || tg_chunk(s[SAVED_GATE_WEIGHTS], 3, 1, gates, &n_gates) != TG_OK)
    return tg_last_error();
  s[SAVED_WEIGHTS] = (tg_tensor *)in[IN_WEIGHTS];
  s[SAVED_INPUT_GATE] = tg_sigmoid(gates[0]);
  s[SAVED_OUTPUT_GATE] = tg_sigmoid(gates[1]);
  s[SAVED_CANDIDATE_CELL] = tg_elu(gates[2], 1.0);
  s[SAVED_NEW_CELL] = tg_add(in[IN_OLD_CELL], tg_mul(s[SAVED_CANDIDATE_CELL], s[SAVED_INPUT_GATE]));
  return finish_forward(ctx, out, s);
}

#ifdef TG_EXTENSION_CUDA
/* The tutorial's lltm_cuda_forward: the GEMM through tg, the rest in one kernel. */
static tg_status lltm_ext_forward_cuda(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  if (check_args(in) != TG_OK) return tg_last_error();
  tg_tensor *s[N_SAVED] = {0};
  tg_tensor *gw = gate_weights_of(in, &s[SAVED_X]);
  s[SAVED_GATE_WEIGHTS] = gw ? tg_contiguous(gw) : NULL;
  const tg_tensor *old_cell = tg_contiguous(in[IN_OLD_CELL]);
  if (!s[SAVED_GATE_WEIGHTS] || !old_cell) return tg_last_error();
  s[SAVED_WEIGHTS] = (tg_tensor *)in[IN_WEIGHTS];
  s[SAVED_NEW_CELL] = tg_empty_like(old_cell);
  s[SAVED_INPUT_GATE] = tg_empty_like(old_cell);
  s[SAVED_OUTPUT_GATE] = tg_empty_like(old_cell);
  s[SAVED_CANDIDATE_CELL] = tg_empty_like(old_cell);
  tg_tensor *new_h = tg_empty_like(old_cell);
  if (!s[SAVED_NEW_CELL] || !s[SAVED_INPUT_GATE] || !s[SAVED_OUTPUT_GATE] ||
      !s[SAVED_CANDIDATE_CELL] || !new_h)
    return tg_last_error();
  tg_status st = lltm_ext_cuda_forward_pointwise(s[SAVED_GATE_WEIGHTS], old_cell, new_h,
                                                 s[SAVED_NEW_CELL], s[SAVED_INPUT_GATE],
                                                 s[SAVED_OUTPUT_GATE], s[SAVED_CANDIDATE_CELL]);
  if (st != TG_OK) return st;
  out[0] = new_h;
  out[1] = s[SAVED_NEW_CELL];
  return tg_ctx_save_for_backward(ctx, N_SAVED, (const tg_tensor *const *)s);
}
#endif

/* ---- backward ---- */

/* sigmoid'(z) = (1 - s) * s */
static tg_tensor *d_sigmoid(const tg_tensor *z) {
  tg_tensor *s = tg_sigmoid(z);
  return tg_mul(tg_rsub_scalar(s, 1.0), s);
}

/* tanh'(z) = 1 - tanh^2(z) */
static tg_tensor *d_tanh(const tg_tensor *z) {
  return tg_rsub_scalar(tg_pow_scalar(tg_tanh(z), 2.0), 1.0);
}

/* elu'(z) = relu'(z) + { alpha * exp(z) if alpha * (exp(z) - 1) < 0, else 0 } */
static tg_tensor *d_elu(const tg_tensor *z, double alpha) {
  tg_tensor *e = tg_exp(z);
  tg_tensor *zero = z ? tg_zeros_like(z) : NULL;
  tg_tensor *mask = tg_lt(tg_mul_scalar(tg_sub_scalar(e, 1.0), alpha), zero);
  return tg_add(tg_gt(z, zero), tg_mul(mask, tg_mul_scalar(e, alpha)));
}

/* The tutorial's lltm_backward up to d_gates, with tg ops. */
static tg_status backward_pointwise(const tg_tensor *grad_h, const tg_tensor *grad_cell,
                                    tg_tensor *const *s, tg_tensor **d_old_cell,
                                    tg_tensor **d_gates) {
  tg_tensor *d_output_gate = tg_mul(tg_tanh(s[SAVED_NEW_CELL]), grad_h);
  tg_tensor *d_tanh_new_cell = tg_mul(s[SAVED_OUTPUT_GATE], grad_h);
  tg_tensor *d_new_cell = tg_add(tg_mul(d_tanh(s[SAVED_NEW_CELL]), d_tanh_new_cell), grad_cell);
  tg_tensor *d_candidate_cell = tg_mul(s[SAVED_INPUT_GATE], d_new_cell);
  tg_tensor *d_input_gate = tg_mul(s[SAVED_CANDIDATE_CELL], d_new_cell);
  tg_tensor *gates[3] = {0};
  int n_gates = 0;
  if (!s[SAVED_GATE_WEIGHTS] || tg_chunk(s[SAVED_GATE_WEIGHTS], 3, 1, gates, &n_gates) != TG_OK)
    return tg_last_error();
  const tg_tensor *d[3] = {tg_mul(d_input_gate, d_sigmoid(gates[0])),
                           tg_mul(d_output_gate, d_sigmoid(gates[1])),
                           tg_mul(d_candidate_cell, d_elu(gates[2], 1.0))};
  *d_old_cell = d_new_cell;
  *d_gates = tg_cat(3, d, 1);
  return *d_gates && *d_old_cell ? TG_OK : tg_last_error();
}

#ifdef TG_EXTENSION_CUDA
static tg_status backward_pointwise_cuda(const tg_tensor *grad_h, const tg_tensor *grad_cell,
                                         tg_tensor *const *s, tg_tensor **d_old_cell,
                                         tg_tensor **d_gates) {
  const tg_tensor *gh = tg_contiguous(grad_h), *gc = tg_contiguous(grad_cell);
  *d_old_cell = tg_empty_like(s[SAVED_NEW_CELL]);
  *d_gates = tg_empty_like(s[SAVED_GATE_WEIGHTS]);
  if (!gh || !gc || !*d_old_cell || !*d_gates) return tg_last_error();
  return lltm_ext_cuda_backward_pointwise(gh, gc, s[SAVED_NEW_CELL], s[SAVED_INPUT_GATE],
                                          s[SAVED_OUTPUT_GATE], s[SAVED_CANDIDATE_CELL],
                                          s[SAVED_GATE_WEIGHTS], *d_old_cell, *d_gates);
}
#endif

static tg_status lltm_ext_backward(tg_ctx *ctx, const tg_tensor *const *grads, tg_tensor **gin) {
  tg_tensor *s[N_SAVED];
  for (int i = 0; i < N_SAVED; i++)
    if (!(s[i] = tg_ctx_saved(ctx, i))) return tg_last_error(); /* e.g. modified in place */
  tg_tensor *d_old_cell = NULL, *d_gates = NULL;
  tg_status st;
#ifdef TG_EXTENSION_CUDA
  if (tg_tensor_device(s[SAVED_X]).type == TG_CUDA)
    st = backward_pointwise_cuda(grads[0], grads[1], s, &d_old_cell, &d_gates);
  else
#endif
    st = backward_pointwise(grads[0], grads[1], s, &d_old_cell, &d_gates);
  if (st != TG_OK) return st;

  /* The GEMMs and the bias sum; only the gradients asked for. */
  const int64_t S = tg_size(s[SAVED_NEW_CELL], 1), I = tg_size(s[SAVED_X], 1) - S;
  if (tg_ctx_needs_input_grad(ctx, IN_WEIGHTS) &&
      !(gin[IN_WEIGHTS] = tg_mm(tg_t(d_gates), s[SAVED_X])))
    return tg_last_error();
  if (tg_ctx_needs_input_grad(ctx, IN_BIAS)) {
    /* summed over the batch, in the bias's own shape ([3S] or [1, 3S]) */
    gin[IN_BIAS] = tg_reshape(tg_sum_dim(d_gates, 0, true), tg_ctx_input_ndim(ctx, IN_BIAS),
                              tg_ctx_input_sizes(ctx, IN_BIAS));
    if (!gin[IN_BIAS]) return tg_last_error();
  }
  if (tg_ctx_needs_input_grad(ctx, IN_OLD_H) || tg_ctx_needs_input_grad(ctx, IN_INPUT)) {
    tg_tensor *d_X = tg_mm(d_gates, s[SAVED_WEIGHTS]);
    if (!d_X) return tg_last_error();
    if (tg_ctx_needs_input_grad(ctx, IN_OLD_H) && !(gin[IN_OLD_H] = tg_narrow(d_X, 1, 0, S)))
      return tg_last_error();
    if (tg_ctx_needs_input_grad(ctx, IN_INPUT) && !(gin[IN_INPUT] = tg_narrow(d_X, 1, S, I)))
      return tg_last_error();
  }
  if (tg_ctx_needs_input_grad(ctx, IN_OLD_CELL)) gin[IN_OLD_CELL] = d_old_cell;
  return TG_OK;
}

/* ---- sample inputs, so that `tg-op gradcheck lltm_ext` and `tg-op bench lltm_ext` work ---- */

typedef struct lltm_shape {
  int64_t batch, features, state;
  bool bias_2d;           /* bias as [1, 3S] instead of [3S] */
  bool transposed_inputs; /* input and old_h as transposed views (strided, not contiguous) */
} lltm_shape;

/* A leaf of the requested dtype and device with requires_grad set: [rows, cols], [cols] when
 * rows is 0, or a transposed view of a [cols, rows] tensor (strided, not contiguous). */
static tg_tensor *leaf(const tg_sample_request *rq, int64_t rows, int64_t cols, bool transposed) {
  tg_options o = {.dtype = rq->dtype, .device = rq->device};
  tg_tensor *t = rows == 0    ? tg_randn(TG_SHAPE(cols), o, rq->gen)
                 : transposed ? tg_detach(tg_t(tg_randn(TG_SHAPE(cols, rows), o, rq->gen)))
                              : tg_randn(TG_SHAPE(rows, cols), o, rq->gen);
  if (!t || tg_set_requires_grad(t, true) != TG_OK) return NULL;
  return t;
}

static bool fill_sample(const tg_sample_request *rq, const char *label, lltm_shape sh,
                        tg_sample *out) {
  const int64_t B = sh.batch, I = sh.features, S = sh.state;
  *out = (tg_sample){.label = label, .n_inputs = N_INPUTS, .n_outputs = 2};
  out->inputs[IN_INPUT] = leaf(rq, B, I, sh.transposed_inputs);
  out->inputs[IN_WEIGHTS] = leaf(rq, 3 * S, S + I, false);
  out->inputs[IN_BIAS] = leaf(rq, sh.bias_2d ? 1 : 0, 3 * S, false);
  out->inputs[IN_OLD_H] = leaf(rq, B, S, sh.transposed_inputs);
  out->inputs[IN_OLD_CELL] = leaf(rq, B, S, false);
  for (int i = 0; i < N_INPUTS; i++)
    if (!out->inputs[i]) return false;
  return true;
}

/* Checking: small shapes, each bias layout, strided inputs, a batch of one. Bench: one call
 * at request->sizes = batch, input features, state size (the tutorial's 16, 32, 128 for
 * any left out). */
static int lltm_ext_samples(const tg_sample_request *rq, tg_sample *samples) {
  if (rq->bench) {
    int64_t dims[3] = {16, 32, 128};
    if (rq->n_sizes > 3)
      return tg_set_error(TG_ERR_ARGUMENT,
                          "lltm_ext: bench sizes are batch, features, state: %d given",
                          rq->n_sizes),
             -1;
    for (int i = 0; i < rq->n_sizes; i++) {
      if (rq->sizes[i] < 1)
        return tg_set_error(TG_ERR_ARGUMENT, "lltm_ext: bench size %d is %lld, must be >= 1", i,
                            (long long)rq->sizes[i]),
               -1;
      dims[i] = rq->sizes[i];
    }
    lltm_shape sh = {.batch = dims[0], .features = dims[1], .state = dims[2]};
    return fill_sample(rq, "batch x features x state", sh, &samples[0]) ? 1 : -1;
  }
  static const struct {
    const char *label;
    lltm_shape shape;
  } cases[] = {
      {"3x4x5", {3, 4, 5, false, false}},
      {"bias [1, 3S]", {2, 3, 4, true, false}},
      {"transposed input, old_h", {4, 3, 2, false, true}},
      {"batch 1", {1, 2, 3, false, false}},
  };
  const int n = (int)(sizeof cases / sizeof cases[0]);
  for (int i = 0; i < n; i++)
    if (!fill_sample(rq, cases[i].label, cases[i].shape, &samples[i])) return -1;
  return n;
}

/* ---- the entry point: what tg_extension_load calls ---- */

TG_EXTENSION(api) {
  tg_op_desc lltm_ext = {
      .name = "lltm_ext",
      .n_inputs = N_INPUTS,
      .n_outputs = 2,
      .forward = {[TG_CPU] = lltm_ext_forward},
      .backward = lltm_ext_backward,
      .flags = TG_OP_ONCE_DIFFERENTIABLE,
      .sample_inputs = lltm_ext_samples,
  };
#ifdef TG_EXTENSION_CUDA
  lltm_ext.forward[TG_CUDA] = lltm_ext_forward_cuda;
#endif
  return api->register_op(api, &lltm_ext);
}
