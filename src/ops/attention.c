/* The fused scaled dot-product attention "scaled_dot_product_attention" (tg/attention.h):
 * argument checks, the front end, the forward and the hand-written backward; the
 * FlashAttention scheme. The device supplies two kernels (src/ops/def/attention.def; CPU:
 * src/ops/cpu/attention_cpu.c, CUDA: src/ops/cuda/attention.cu): forward writes out and each
 * row's log-sum-exp lse = log sum_j exp(s_ij) (s = q k^T scale, masked), backward recomputes
 * P_ij = exp(s_ij - lse_i) from q, k and lse and forms, with Z the dropout factors
 * (src/ops/attention_math.h) and g the output's gradient,
 *   dv_j = sum_i P_ij Z_ij g_i,   dP_ij = Z_ij (g_i . v_j),   Delta_i = g_i . out_i,
 *   dS_ij = P_ij (dP_ij - Delta_i),   dq_i = scale sum_j dS_ij k_j,   dk_j = scale sum_i dS_ij q_i.
 * Saved: q, k, v (by reference when contiguous), out and lse ([N, Tq], in the input's dtype:
 * backward's exp(s - lse) is evaluated in that dtype anyway, and one dtype per kernel keeps
 * the devices simple); 5 N Tq D-sized rows against the composed graph's [N, Tq, Tk]
 * probabilities (and its dropout mask). The composed twin: attention_composed.c. */
#include <math.h>

#include "ops/attention_internal.h"
#include "ops/attention_math.h"
#include "ops/backend.h"
#include "ops/registry.h"
#include "tensor/check.h"
#include "tensor/error_impl.h"
#include "tensor/tensor_impl.h"
#include "tg/ops.h"
#include "tg/tensor_ops.h"

static const char *const op = "scaled_dot_product_attention";

enum { SCALAR_DROPOUT_P, SCALAR_SCALE, NUM_SCALARS };
enum { INT_CAUSAL, INT_SEED, INT_OFFSET, NUM_INTS };
enum { SAVED_Q, SAVED_K, SAVED_V, SAVED_OUT, SAVED_LSE };

/* ---- checks ---- */

static bool same_lead(const tg_tensor *a, const tg_tensor *b, int lead) {
  for (int d = 0; d < lead; d++)
    if (a->sizes[d] != b->sizes[d]) return false;
  return true;
}

bool tg__attention_check(const char *fn, const tg_tensor *q, const tg_tensor *k, const tg_tensor *v,
                         tg_attention_dims *dims) {
  if (!tg__check_arg(fn, "q", q) || !tg__check_arg(fn, "k", k) || !tg__check_arg(fn, "v", v) ||
      !tg__check_floating(fn, "q", q) || !tg__check_alike(fn, "k", k, "q", q) ||
      !tg__check_alike(fn, "v", v, "q", q) ||
      !tg__check(q->ndim >= 2, TG_ERR_SHAPE, fn,
                 "q must be [*, Tq, D] (at least 2-D, e.g. [B, H, T, D]), got %s",
                 tg__sizes_str(q)) ||
      !tg__check(k->ndim == q->ndim && v->ndim == q->ndim, TG_ERR_SHAPE, fn,
                 "q %s, k %s and v %s must have the same number of dims", tg__sizes_str(q),
                 tg__sizes_str(k), tg__sizes_str(v)))
    return false;
  const int lead = q->ndim - 2;
  if (!tg__check(same_lead(q, k, lead) && same_lead(q, v, lead), TG_ERR_SHAPE, fn,
                 "q %s, k %s and v %s must share their leading (batch, head) dims",
                 tg__sizes_str(q), tg__sizes_str(k), tg__sizes_str(v)) ||
      !tg__check(k->sizes[lead + 1] == q->sizes[lead + 1], TG_ERR_SHAPE, fn,
                 "k is %s but q is %s: their last dims (D) must match", tg__sizes_str(k),
                 tg__sizes_str(q)) ||
      !tg__check(v->sizes[lead] == k->sizes[lead], TG_ERR_SHAPE, fn,
                 "v is %s but k is %s: they must have as many rows (Tk)", tg__sizes_str(v),
                 tg__sizes_str(k)))
    return false;
  if (dims) {
    int64_t n = 1;
    for (int d = 0; d < lead; d++) n *= q->sizes[d];
    *dims = (tg_attention_dims){
        lead, n, q->sizes[lead], k->sizes[lead], q->sizes[lead + 1], v->sizes[lead + 1]};
  }
  return true;
}

bool tg__attention_options_check(const char *fn, const tg_attention_options *o,
                                 const tg_attention_dims *dims, double *scale) {
  if (!tg__check(o->dropout_p >= 0 && o->dropout_p < 1, TG_ERR_ARGUMENT, fn,
                 "dropout_p = %g must be in [0, 1)", o->dropout_p) ||
      !tg__check(isfinite(o->scale), TG_ERR_ARGUMENT, fn,
                 "scale = %g must be finite (0: 1/sqrt(D))", o->scale))
    return false;
  *scale = o->scale != 0 ? o->scale : dims->d > 0 ? 1 / sqrt((double)dims->d) : 1.0;
  return true;
}

uint64_t tg__attention_dropout_span(const tg_attention_dims *dims) {
  return ((uint64_t)(dims->n * dims->tq * dims->tk) + 3) & ~(uint64_t)3;
}

tg_attention_options tg_attention_defaults(void) {
  return (tg_attention_options){.is_causal = 0, .dropout_p = 0, .gen = NULL, .scale = 0};
}

/* ---- the front end ---- */

tg_tensor *tg_scaled_dot_product_attention(const tg_tensor *q, const tg_tensor *k,
                                           const tg_tensor *v, tg_attention_options opts) {
  static const char *const api = "tg_scaled_dot_product_attention";
  tg_attention_dims dims;
  double scale;
  if (!tg__attention_check(api, q, k, v, &dims) ||
      !tg__attention_options_check(api, &opts, &dims, &scale))
    return NULL;
  const bool dropout = opts.dropout_p > 0;
  const tg_generator_state state =
      dropout ? tg_generator_get_state(opts.gen) : (tg_generator_state){0, 0};
  tg_tensor *out = NULL;
  if (tg_apply_ex(TG__OP(scaled_dot_product_attention), TG__IN(q, k, v),
                  TG__SC(opts.dropout_p, scale),
                  TG__INTS(opts.is_causal != 0, (int64_t)state.seed, (int64_t)state.offset), 1,
                  &out) != TG_OK) {
    tg__error_prefix(api);
    return NULL;
  }
  if (dropout) /* as tg_dropout's draw would have advanced it */
    tg_generator_set_state(
        opts.gen,
        (tg_generator_state){state.seed, state.offset + tg__attention_dropout_span(&dims)});
  return out;
}

/* ---- helpers ---- */

static tg_options options_of(const tg_tensor *t) {
  return (tg_options){t->dtype, t->storage->device, false};
}

/* t as the contiguous [n, rows, cols] the kernels take (t itself when it is contiguous). */
static tg_tensor *as_3d(const tg_tensor *t, int64_t n, int64_t rows, int64_t cols) {
  tg_tensor *c = tg_contiguous(t);
  return c ? tg_reshape(c, 3, (const int64_t[]){n, rows, cols}) : NULL;
}

/* The kernels' host F64 params tensor from the call's scalars and ints. */
static tg_tensor *params_of(const tg_ctx *ctx) {
  const int64_t count = TG_ATTN_NUM_PARAMS;
  tg_tensor *p = tg_empty(1, &count, (tg_options){.dtype = TG_F64});
  if (!p) return NULL;
  tg_attention_params a = {.scale = tg_ctx_scalar(ctx, SCALAR_SCALE),
                           .dropout_p = tg_ctx_scalar(ctx, SCALAR_DROPOUT_P),
                           .causal = tg_ctx_int(ctx, INT_CAUSAL) != 0,
                           .seed = (uint64_t)tg_ctx_int(ctx, INT_SEED),
                           .offset = (uint64_t)tg_ctx_int(ctx, INT_OFFSET)};
  tg_attention_params_write(tg_data_ptr(p), a);
  return p;
}

static bool check_call(const tg_ctx *ctx, const tg_tensor *const *in, tg_attention_dims *dims) {
  const double p = tg_ctx_scalar(ctx, SCALAR_DROPOUT_P), scale = tg_ctx_scalar(ctx, SCALAR_SCALE);
  return tg__check(tg_ctx_num_scalars(ctx) == NUM_SCALARS && tg_ctx_num_ints(ctx) == NUM_INTS,
                   TG_ERR_ARGUMENT, op,
                   "takes 2 scalars (dropout_p, scale) and 3 ints (is_causal, seed, offset); "
                   "%d and %d given",
                   tg_ctx_num_scalars(ctx), tg_ctx_num_ints(ctx)) &&
         tg__check(p >= 0 && p < 1, TG_ERR_ARGUMENT, op, "dropout_p = %g must be in [0, 1)", p) &&
         tg__check(isfinite(scale) && scale != 0, TG_ERR_ARGUMENT, op,
                   "scale = %g must be finite and nonzero", scale) &&
         tg__attention_check(op, in[0], in[1], in[2], dims);
}

/* ---- forward and backward ---- */

tg_status tg__fwd_scaled_dot_product_attention(tg_ctx *ctx, const tg_tensor *const *in,
                                               tg_tensor **out) {
  tg_attention_dims m;
  if (!check_call(ctx, in, &m)) return tg_last_error();
  tg_kernel_fn forward =
      tg__kernel(op, "scaled_dot_product_attention.forward", in[0]->storage->device);
  tg_tensor *q = forward ? as_3d(in[0], m.n, m.tq, m.d) : NULL;
  tg_tensor *k = q ? as_3d(in[1], m.n, m.tk, m.d) : NULL;
  tg_tensor *v = k ? as_3d(in[2], m.n, m.tk, m.dv) : NULL;
  tg_tensor *o = v ? tg_empty(3, (const int64_t[]){m.n, m.tq, m.dv}, options_of(q)) : NULL;
  tg_tensor *lse = o ? tg_empty(2, (const int64_t[]){m.n, m.tq}, options_of(q)) : NULL;
  tg_tensor *params = lse ? params_of(ctx) : NULL;
  if (!params || forward(6, (tg_tensor *const[]){o, lse, q, k, v, params}) != TG_OK ||
      tg_ctx_save_for_backward(ctx, 5, (const tg_tensor *const[]){q, k, v, o, lse}) != TG_OK)
    return tg_last_error();
  int64_t sizes[TG_MAX_DIMS];
  for (int d = 0; d < m.lead; d++) sizes[d] = in[0]->sizes[d];
  sizes[m.lead] = m.tq;
  sizes[m.lead + 1] = m.dv;
  out[0] = tg_reshape(o, m.lead + 2, sizes); /* a view of o */
  return out[0] ? TG_OK : tg_last_error();
}

/* One backward kernel call writes all three gradients (dq and dk share the recomputed dS). */
tg_status tg__bwd_scaled_dot_product_attention(tg_ctx *ctx, const tg_tensor *const *g,
                                               tg_tensor **gi) {
  tg_tensor *q = tg_ctx_saved(ctx, SAVED_Q), *k = tg_ctx_saved(ctx, SAVED_K);
  tg_tensor *v = tg_ctx_saved(ctx, SAVED_V), *o = tg_ctx_saved(ctx, SAVED_OUT);
  tg_tensor *lse = tg_ctx_saved(ctx, SAVED_LSE);
  if (!q || !k || !v || !o || !lse) return tg_last_error();
  tg_kernel_fn backward =
      tg__kernel(op, "scaled_dot_product_attention.backward", q->storage->device);
  const int64_t n = q->sizes[0], tq = q->sizes[1];
  tg_tensor *grad = backward ? as_3d(g[0], n, tq, v->sizes[2]) : NULL;
  tg_tensor *dq = grad ? tg_empty(3, q->sizes, options_of(q)) : NULL;
  tg_tensor *dk = dq ? tg_empty(3, k->sizes, options_of(q)) : NULL;
  tg_tensor *dv = dk ? tg_empty(3, v->sizes, options_of(q)) : NULL;
  tg_tensor *params = dv ? params_of(ctx) : NULL;
  if (!params ||
      backward(10, (tg_tensor *const[]){dq, dk, dv, grad, q, k, v, o, lse, params}) != TG_OK)
    return tg_last_error();
  tg_tensor *const d[3] = {dq, dk, dv};
  for (int i = 0; i < 3; i++)
    if (tg_ctx_needs_input_grad(ctx, i) &&
        !(gi[i] = tg_reshape(d[i], tg_ctx_input_ndim(ctx, i), tg_ctx_input_sizes(ctx, i))))
      return tg_last_error();
  return TG_OK;
}

/* ---- sample inputs (tg's OpInfo), written with the public API ---- */

/* Values drawn on the CPU in F64, then converted, so every device and dtype gets the same. */
static tg_tensor *sample_tensor(const tg_sample_request *r, int ndim, const int64_t *sizes,
                                bool transposed) {
  int64_t s[TG_MAX_DIMS];
  for (int d = 0; d < ndim; d++) s[d] = sizes[d];
  if (transposed) { /* the same shape, its last two dims' strides swapped */
    s[ndim - 2] = sizes[ndim - 1];
    s[ndim - 1] = sizes[ndim - 2];
  }
  tg_tensor *t = tg_randn(ndim, s, (tg_options){.dtype = TG_F64}, r->gen);
  if (t && transposed) t = tg_transpose(t, ndim - 2, ndim - 1);
  if (t) t = tg_to_dtype(t, r->dtype);
  if (t) t = tg_to_device(t, r->device);
  if (t && tg_set_requires_grad(t, true) != TG_OK) return NULL;
  return t;
}

/* One call: q [lead..., tq, d], k [lead..., tk, d], v [lead..., tk, dv]. */
typedef struct attention_case {
  const char *label;
  int lead;
  int64_t b, h, tq, tk, d, dv;
  bool causal, q_transposed;
  double dropout_p, scale;
} attention_case;

static bool make_sample(const tg_sample_request *r, const attention_case *c, tg_sample *s) {
  int64_t qs[4], ks[4], vs[4];
  int at = 0;
  if (c->lead > 1) qs[at] = ks[at] = vs[at] = c->b, at++;
  if (c->lead > 0) qs[at] = ks[at] = vs[at] = c->h, at++;
  qs[at] = c->tq, qs[at + 1] = c->d;
  ks[at] = c->tk, ks[at + 1] = c->d;
  vs[at] = c->tk, vs[at + 1] = c->dv;
  const int ndim = at + 2;
  tg_tensor *q = sample_tensor(r, ndim, qs, c->q_transposed);
  tg_tensor *k = q ? sample_tensor(r, ndim, ks, false) : NULL;
  tg_tensor *v = k ? sample_tensor(r, ndim, vs, false) : NULL;
  if (!v) return false;
  const double scale = c->scale != 0 ? c->scale : c->d > 0 ? 1 / sqrt((double)c->d) : 1.0;
  *s = (tg_sample){.label = c->label,
                   .n_inputs = 3,
                   .inputs = {q, k, v},
                   .n_scalars = NUM_SCALARS,
                   .scalars = {c->dropout_p, scale},
                   .n_ints = NUM_INTS,
                   .ints = {c->causal, 20261127, c->dropout_p > 0 ? 4 : 0}};
  return true;
}

/* Causal and not, Tq != Tk both ways, a dropout (seeded through the ints), Dv != D, T = 1, an
 * empty batch, no keys, transposed q, 3-D and 2-D inputs; the bench call at GPT-2 small's
 * attention in issue 25's small config (B 8, H 4, T 256, D 64, causal; sizes: B, H, T, D). */
int tg__samples_scaled_dot_product_attention(const tg_sample_request *r, tg_sample *out) {
  static const attention_case cases[] = {
      {"[2, 2, 5, 4]", 2, 2, 2, 5, 5, 4, 4, false, false, 0, 0},
      {"causal", 2, 1, 2, 6, 6, 3, 3, true, false, 0, 0},
      {"Tq 3 < Tk 5", 2, 1, 2, 3, 5, 4, 2, false, false, 0, 0},
      {"causal, Tq 5 > Tk 3 (top-left)", 1, 1, 2, 5, 3, 2, 3, true, false, 0, 0},
      {"causal dropout 0.3", 2, 1, 2, 5, 5, 3, 3, true, false, 0.3, 0},
      {"dropout 0.5, scale 0.7", 1, 1, 3, 4, 6, 2, 3, false, false, 0.5, 0.7},
      {"2-D, T 1", 0, 1, 1, 1, 1, 3, 2, true, false, 0, 0},
      {"transposed q, D 5", 1, 1, 2, 4, 4, 5, 2, true, true, 0, 0},
      {"empty batch", 2, 0, 2, 3, 3, 2, 2, true, false, 0, 0},
      {"no keys", 1, 1, 2, 3, 0, 2, 2, false, false, 0, 0},
  };
  const int count = r->bench ? 1 : (int)(sizeof cases / sizeof cases[0]);
  tg_no_grad_begin();
  int made = 0;
  for (; made < count; made++) {
    attention_case c = cases[made];
    if (r->bench) {
      const int64_t *z = r->sizes;
      const int64_t t = r->n_sizes > 2 ? z[2] : 256;
      c = (attention_case){"bench",
                           2,
                           r->n_sizes > 0 ? z[0] : 8,
                           r->n_sizes > 1 ? z[1] : 4,
                           t,
                           t,
                           r->n_sizes > 3 ? z[3] : 64,
                           r->n_sizes > 3 ? z[3] : 64,
                           true,
                           false,
                           0,
                           0};
    }
    if (!make_sample(r, &c, &out[made])) break;
  }
  tg_no_grad_end();
  return made == count ? count : -1;
}
