/* The fused LLTM op "lltm", one op for every device: argument checks, the front end, the
 * forward and the hand-written backward. lltm.c runs cat, the GEMMs and the bias reduction
 * through the backend (ops/backend.h); the device supplies only the elementwise passes,
 * lltm_forward_pointwise and lltm_backward_pointwise (CPU: src/ops/cpu/cpu_lltm.c, CUDA:
 * src/ops/cuda/lltm_cuda.cu), both over the cell math of ops/lltm_cell.h.
 *
 * Forward: gates [B, 3S] = X @ W^T with X = cat([old_h, input]) a temporary (one GEMM
 * measured faster than two into the same buffer), then the forward pass, which adds the
 * bias, computes the cell and overwrites gates with the activations (input gate, output
 * gate, candidate). Saved for backward: that buffer, the only memory the op keeps beyond
 * its inputs; old_cell (tanh(new_cell) is recomputed from it); old_h and input only when
 * weights need a gradient, weights only when old_h or input do. Inputs are saved by
 * reference. The other layout (X, the pre-activations and new_cell, as the CUDA op used to
 * keep) saves B*(S+I) + B*S more elements and its backward pass evaluates five
 * transcendental functions per element instead of one: measured on the CPU it took 1.04x
 * the time forward+backward at the tutorial's 16 x 32 x 128 (1 and 2 threads), 1.00x at
 * 64 x 1024 x 128.
 *
 * Backward: the backward pass for d_gates (stored transposed when large, the layout BLIS
 * runs fastest), d_old_cell and d_bias = the column sums of d_gates (in the same pass on the
 * CPU, while d_gates is in cache),
 * d_W = d_gates^T @ X (X rebuilt from the saved inputs), and d_X = d_gates @ W as one GEMM
 * when both old_h and input need a gradient (else only the block needed). Nothing is
 * computed for an input that needs no gradient. The backward is not itself differentiable
 * (TG_OP_ONCE_DIFFERENTIABLE). */
#include "autograd/grad_destination.h"
#include "ops/backend.h"
#include "ops/lltm_internal.h"
#include "ops/registry.h"
#include "tg/lltm.h"

/* ---- argument checks ---- */

static bool check_matrix(const char *op, const char *arg, const tg_tensor *t, const char *what) {
  return tg__check(t->ndim == 2, TG_ERR_SHAPE, op, "%s must be 2-D %s, got %s", arg, what,
                   tg__sizes_str(t));
}

tg_status tg__lltm_check(const char *op, const tg_tensor *input, const tg_tensor *weights,
                         const tg_tensor *bias, const tg_tensor *old_h, const tg_tensor *old_cell,
                         tg_lltm_dims *dims) {
  if (!tg__check_arg(op, "input", input) || !tg__check_arg(op, "weights", weights) ||
      !tg__check_arg(op, "bias", bias) || !tg__check_arg(op, "old_h", old_h) ||
      !tg__check_arg(op, "old_cell", old_cell))
    return tg_last_error();
  /* All five alike with input, which is floating. */
  if (!tg__check_floating(op, "input", input) ||
      !tg__check_alike(op, "weights", weights, "input", input) ||
      !tg__check_alike(op, "bias", bias, "input", input) ||
      !tg__check_alike(op, "old_h", old_h, "input", input) ||
      !tg__check_alike(op, "old_cell", old_cell, "input", input))
    return tg_last_error();
  if (!check_matrix(op, "input", input, "[batch, features]") ||
      !check_matrix(op, "old_h", old_h, "[batch, state]"))
    return tg_last_error();
  const int64_t B = input->sizes[0], I = input->sizes[1], S = old_h->sizes[1];
  bool cell_ok = old_cell->ndim == 2 && old_cell->sizes[0] == B && old_cell->sizes[1] == S;
  bool weights_ok = weights->ndim == 2 && weights->sizes[0] == 3 * S && weights->sizes[1] == S + I;
  bool bias_ok = (bias->ndim == 1 && bias->sizes[0] == 3 * S) ||
                 (bias->ndim == 2 && bias->sizes[0] == 1 && bias->sizes[1] == 3 * S);
  if (!tg__check(old_h->sizes[0] == B, TG_ERR_SHAPE, op,
                 "old_h is %s but input is %s: batch sizes differ", tg__sizes_str(old_h),
                 tg__sizes_str(input)) ||
      !tg__check(cell_ok, TG_ERR_SHAPE, op, "old_cell is %s but old_h is %s: they must match",
                 tg__sizes_str(old_cell), tg__sizes_str(old_h)) ||
      !tg__check(weights_ok, TG_ERR_SHAPE, op,
                 "weights is %s but must be [3*state, state+features] = [%lld, %lld] (state "
                 "%lld from old_h, features %lld from input)",
                 tg__sizes_str(weights), (long long)(3 * S), (long long)(S + I), (long long)S,
                 (long long)I) ||
      !tg__check(bias_ok, TG_ERR_SHAPE, op,
                 "bias is %s but must be [3*state] = [%lld] (or [1, %lld])", tg__sizes_str(bias),
                 (long long)(3 * S), (long long)(3 * S)))
    return tg_last_error();
  if (dims) *dims = (tg_lltm_dims){B, I, S};
  return TG_OK;
}

/* ---- the front end ---- */

tg_status tg_lltm(const tg_tensor *input, const tg_tensor *weights, const tg_tensor *bias,
                  const tg_tensor *old_h, const tg_tensor *old_cell, tg_tensor **new_h,
                  tg_tensor **new_cell) {
  if (new_h) *new_h = NULL;
  if (new_cell) *new_cell = NULL;
  if (!new_h || !new_cell)
    return tg_set_error(TG_ERR_ARGUMENT, "tg_lltm: new_h and new_cell must not be NULL");
  tg_status st = tg__lltm_check("tg_lltm", input, weights, bias, old_h, old_cell, NULL);
  if (st != TG_OK) return st;
  tg_tensor *outs[2];
  st = tg_apply(TG__OP(lltm), TG__IN(input, weights, bias, old_h, old_cell), TG__NO_SC, 2, outs);
  if (st != TG_OK) return st;
  *new_h = outs[0];
  *new_cell = outs[1];
  return TG_OK;
}

/* ---- helpers ---- */

enum { IN_INPUT, IN_WEIGHTS, IN_BIAS, IN_OLD_H, IN_OLD_CELL };

/* d_gates elements from which backward stores d_gates transposed (see tg__bwd_lltm). */
#define TG_LLTM_TRANSPOSED_D_GATES_MIN 65536

/* A scope-owned 2-D view of t's block [row0, row0+rows) x [col0, col0+cols), transposed
 * when asked. Made directly (no tape, no checks): the callers' geometry is valid. */
static tg_tensor *block(const tg_tensor *t, int64_t row0, int64_t col0, int64_t rows, int64_t cols,
                        bool transposed) {
  tg_tensor *v = tg__alias_raw(t);
  if (!v) return NULL;
  v->offset = t->offset + row0 * t->strides[0] + col0 * t->strides[1];
  v->sizes[0] = transposed ? cols : rows;
  v->sizes[1] = transposed ? rows : cols;
  v->strides[0] = transposed ? t->strides[1] : t->strides[0];
  v->strides[1] = transposed ? t->strides[0] : t->strides[1];
  return tg__scoped(v);
}

/* A new uninitialised [rows, cols] tensor of t's dtype and device (scope-owned). */
static tg_tensor *matrix_like(const tg_tensor *t, int64_t rows, int64_t cols) {
  tg_options o = {.dtype = t->dtype, .device = t->storage->device};
  return tg_empty(TG_SHAPE(rows, cols), o);
}

/* Which inputs the forward saves, in order, given which gradients are wanted. */
typedef struct saved_plan {
  bool x_for_weights; /* input, old_h: for d_weights */
  bool w_for_x;       /* weights: for d_input, d_old_h */
} saved_plan;

static saved_plan plan_of(const tg_ctx *ctx) {
  return (saved_plan){
      .x_for_weights = tg_ctx_needs_input_grad(ctx, IN_WEIGHTS),
      .w_for_x = tg_ctx_needs_input_grad(ctx, IN_INPUT) || tg_ctx_needs_input_grad(ctx, IN_OLD_H),
  };
}

/* X = cat([old_h, input], 1) as a new [B, S+I] tensor (scope-owned). */
static tg_tensor *concat_x(const tg_backend *be, const tg_tensor *old_h, const tg_tensor *input) {
  const int64_t B = input->sizes[0], I = input->sizes[1], S = old_h->sizes[1];
  tg_tensor *X = matrix_like(input, B, S + I);
  tg_tensor *x_h = X ? block(X, 0, 0, B, S, false) : NULL;
  tg_tensor *x_in = X ? block(X, 0, S, B, I, false) : NULL;
  if (!x_h || !x_in || be->copy(x_h, old_h) != TG_OK || be->copy(x_in, input) != TG_OK) return NULL;
  return X;
}

/* ---- forward ---- */

tg_status tg__fwd_lltm(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  const tg_tensor *input = in[IN_INPUT], *W = in[IN_WEIGHTS], *bias = in[IN_BIAS];
  const tg_tensor *old_h = in[IN_OLD_H], *old_cell = in[IN_OLD_CELL];
  /* Again here (an O(1) check beside the GEMM): tg_apply may run the op directly. */
  tg_status st = tg__lltm_check("tg_lltm", input, W, bias, old_h, old_cell, NULL);
  if (st != TG_OK) return st;
  const int64_t B = input->sizes[0], S = old_h->sizes[1];
  const tg_backend *be = tg__backend("tg_lltm", input->storage->device);
  tg_kernel_fn pointwise =
      be ? tg__kernel("tg_lltm", "lltm.forward_pointwise", input->storage->device) : NULL;
  if (!pointwise) return tg_last_error();

  /* One GEMM over a temporary X = [old_h, input] beats two GEMMs into the same gates
   * (measured with BLIS: 25 vs 34 us at the tutorial's size; BLIS packs the other
   * operand once instead of twice). X is not kept. */
  tg_tensor *X = concat_x(be, old_h, input);
  tg_tensor *gates = matrix_like(input, B, 3 * S);
  tg_tensor *new_h = matrix_like(input, B, S), *new_cell = matrix_like(input, B, S);
  tg_tensor *w_t = block(W, 0, 0, 3 * S, W->sizes[1], true);
  if (!X || !gates || !new_h || !new_cell || !w_t) return tg_last_error();
  st = be->gemm(gates, X, w_t, 1.0, 0.0);
  if (st == TG_OK)
    st = pointwise(
        5, (tg_tensor *const[]){gates, (tg_tensor *)bias, (tg_tensor *)old_cell, new_h, new_cell});
  if (st != TG_OK) return st;

  const saved_plan p = plan_of(ctx);
  st = tg_ctx_save_for_backward(ctx, 2, (const tg_tensor *const[]){gates, old_cell});
  if (st == TG_OK && p.x_for_weights)
    st = tg_ctx_save_for_backward(ctx, 2, (const tg_tensor *const[]){input, old_h});
  if (st == TG_OK && p.w_for_x)
    st = tg_ctx_save_for_backward(ctx, 1, (const tg_tensor *const[]){W});
  if (st != TG_OK) return st;
  out[0] = new_h;
  out[1] = new_cell;
  return TG_OK;
}

/* ---- backward ---- */

/* d_bias comes out as [1, 3S]; the engine wants the bias's own shape ([3S] or [1, 3S]). */
static tg_tensor *as_bias_shape(const tg_ctx *ctx, tg_tensor *d_bias) {
  if (!d_bias || tg_ctx_input_ndim(ctx, IN_BIAS) == 2) return d_bias;
  return tg_view(d_bias, 1, tg_ctx_input_sizes(ctx, IN_BIAS));
}

/* d_old_h, d_input = d_gates @ W, split by columns; one GEMM when both are wanted. */
static tg_status grad_h_x(const tg_tensor *d_gates, const tg_tensor *W, bool need_h, bool need_x,
                          tg_tensor **d_h, tg_tensor **d_x) {
  const tg_backend *be = tg__backend("tg_lltm", d_gates->storage->device);
  if (!be) return tg_last_error();
  const int64_t B = d_gates->sizes[0], S = d_gates->sizes[1] / 3, I = W->sizes[1] - S;
  const int64_t col0 = need_h ? 0 : S, cols = (need_h ? S : 0) + (need_x ? I : 0);
  tg_tensor *d = matrix_like(d_gates, B, cols);
  tg_tensor *w = block(W, 0, col0, 3 * S, cols, false);
  if (!d || !w) return tg_last_error();
  tg_status st = be->gemm(d, d_gates, w, 1.0, 0.0);
  if (st != TG_OK) return st;
  *d_h = need_h ? (need_x ? block(d, 0, 0, B, S, false) : d) : NULL;
  *d_x = need_x ? (need_h ? block(d, 0, S, B, I, false) : d) : NULL;
  if ((need_h && !*d_h) || (need_x && !*d_x)) return tg_last_error();
  return TG_OK;
}

tg_status tg__bwd_lltm(tg_ctx *ctx, const tg_tensor *const *grads, tg_tensor **gin) {
  const bool need_x = tg_ctx_needs_input_grad(ctx, IN_INPUT);
  const bool need_w = tg_ctx_needs_input_grad(ctx, IN_WEIGHTS);
  const bool need_b = tg_ctx_needs_input_grad(ctx, IN_BIAS);
  const bool need_h = tg_ctx_needs_input_grad(ctx, IN_OLD_H);
  const bool need_c = tg_ctx_needs_input_grad(ctx, IN_OLD_CELL);
  const saved_plan p = plan_of(ctx);
  int k = 0;
  tg_tensor *gates = tg_ctx_saved(ctx, k++), *old_cell = tg_ctx_saved(ctx, k++);
  tg_tensor *input = p.x_for_weights ? tg_ctx_saved(ctx, k++) : NULL;
  tg_tensor *old_h = p.x_for_weights ? tg_ctx_saved(ctx, k++) : NULL;
  tg_tensor *W = p.w_for_x ? tg_ctx_saved(ctx, k++) : NULL;
  if (!gates || !old_cell || (p.x_for_weights && (!input || !old_h)) || (p.w_for_x && !W))
    return tg_last_error();
  const int64_t B = old_cell->sizes[0], S = old_cell->sizes[1];
  const int64_t I = tg_ctx_input_sizes(ctx, IN_INPUT)[1];
  const tg_backend *be = tg__backend("tg_lltm", gates->storage->device);
  tg_kernel_fn pointwise =
      be ? tg__kernel("tg_lltm", "lltm.backward_pointwise", gates->storage->device) : NULL;
  if (!pointwise) return tg_last_error();

  /* The elementwise pass. Large d_gates [B, 3S] are stored transposed (d_gates_t [3S, B]
   * contiguous): BLIS runs d_weights = d_gates_t @ X up to 1.45x faster from that layout
   * (31.8 vs 45.1 ms at B=256, I=S=1024; 2.9 vs 4.3 ms at B=128, I=256, S=512), and
   * d_X = d_gates @ W as fast either way. Small ones gain nothing in the GEMM and lose a
   * little in the pass's scattered stores, so they stay row-major. */
  const bool transposed = B * 3 * S >= TG_LLTM_TRANSPOSED_D_GATES_MIN;
  tg_tensor *d_gates_t = transposed ? matrix_like(gates, 3 * S, B) : NULL;
  tg_tensor *d_gates = transposed ? (d_gates_t ? block(d_gates_t, 0, 0, 3 * S, B, true) : NULL)
                                  : matrix_like(gates, B, 3 * S);
  if (!transposed && d_gates) d_gates_t = block(d_gates, 0, 0, B, 3 * S, true);
  tg_tensor *d_bias = need_b ? matrix_like(gates, 1, 3 * S) : NULL;
  tg_tensor *d_old_cell = need_c ? matrix_like(gates, B, S) : NULL;
  if (!d_gates || !d_gates_t || (need_b && !d_bias) || (need_c && !d_old_cell))
    return tg_last_error();
  tg_status st = pointwise(7, (tg_tensor *const[]){(tg_tensor *)grads[0], (tg_tensor *)grads[1],
                                                   gates, old_cell, d_gates, d_old_cell, d_bias});
  if (st != TG_OK) return st;

  /* d_weights = d_gates^T @ X, X = [old_h, input] rebuilt: one GEMM packs d_gates once
   * (two GEMMs into d_weights' column blocks took up to 1.7x longer). When weights is a
   * leaf with a .grad already, the GEMM adds into it (beta 1) rather than writing a new
   * tensor for the engine to add: one pass over [3S, S+I] and its allocation saved. */
  tg_tensor *d_w = NULL;
  if (need_w) {
    tg_tensor *into = tg__ctx_grad_destination(ctx, IN_WEIGHTS);
    d_w = into ? NULL : matrix_like(gates, 3 * S, S + I);
    tg_tensor *X = concat_x(be, old_h, input);
    if ((!into && !d_w) || !X) return tg_last_error();
    if ((st = be->gemm(into ? into : d_w, d_gates_t, X, 1.0, into ? 1.0 : 0.0)) != TG_OK) return st;
  }

  tg_tensor *d_h = NULL, *d_x = NULL;
  if ((need_h || need_x) && (st = grad_h_x(d_gates, W, need_h, need_x, &d_h, &d_x)) != TG_OK)
    return st;

  gin[IN_INPUT] = d_x;
  gin[IN_WEIGHTS] = d_w;
  gin[IN_BIAS] = as_bias_shape(ctx, d_bias);
  gin[IN_OLD_H] = d_h;
  gin[IN_OLD_CELL] = d_old_cell;
  if (need_b && !gin[IN_BIAS]) return tg_last_error();
  return TG_OK;
}
