/* One small function per op of tests/parity/refs.txt: how the op name of a case maps to tg
 * calls. The arguments mirror the torch function of the same name in gen_refs.py (p: the
 * double parameters, ip: the integer ones). A new op joins with a line in ADAPTERS. */
#include <string.h>

#include "parity.h"

#define PT_ARGS                                                                                    \
  tg_tensor **in, int nin, const double *p, const int64_t *ip, int nip, tg_tensor **out, int *nout
#define PT_UNUSED (void)in, (void)nin, (void)p, (void)ip, (void)nip

static tg_status pending(void) {
  tg_status s = tg_last_error();
  return s != TG_OK ? s : TG_NUM_STATUS;
}

static tg_status one(tg_tensor **out, int *nout, tg_tensor *t) {
  out[0] = t;
  *nout = t ? 1 : 0;
  return t ? TG_OK : pending();
}

/* In-place ops write into a clone when the target requires grad (a leaf cannot be written),
 * as gen_refs.py's inplace_target does. */
static tg_tensor *target(tg_tensor *t) { return tg_requires_grad(t) ? tg_clone(t) : t; }

static tg_status inplace(tg_tensor **out, int *nout, tg_tensor *t, tg_status s) {
  *nout = 0;
  if (s != TG_OK) return s;
  return one(out, nout, t);
}

static tg_options opts_of(int64_t dtype) { return TG_OPTS(.dtype = (tg_dtype)dtype); }

static int ints(const int64_t *ip, int n, int *out) {
  for (int k = 0; k < n; k++) out[k] = (int)ip[k];
  return n;
}

#define UNARY_ONLY(name)                                                                           \
  static tg_status pt_##name(PT_ARGS) {                                                            \
    PT_UNUSED;                                                                                     \
    return one(out, nout, tg_##name(in[0]));                                                       \
  }
#define UNARY(name)                                                                                \
  UNARY_ONLY(name)                                                                                 \
  static tg_status pt_##name##_(PT_ARGS) {                                                         \
    PT_UNUSED;                                                                                     \
    tg_tensor *t = target(in[0]);                                                                  \
    return t ? inplace(out, nout, t, tg_##name##_(t)) : pending();                                 \
  }
#define UNARY_P(name)                                                                              \
  static tg_status pt_##name(PT_ARGS) {                                                            \
    PT_UNUSED;                                                                                     \
    return one(out, nout, tg_##name(in[0], p[0]));                                                 \
  }
#define UNARY_P_(name)                                                                             \
  static tg_status pt_##name##_(PT_ARGS) {                                                         \
    PT_UNUSED;                                                                                     \
    tg_tensor *t = target(in[0]);                                                                  \
    return t ? inplace(out, nout, t, tg_##name##_(t, p[0])) : pending();                           \
  }
#define BINARY(name)                                                                               \
  static tg_status pt_##name(PT_ARGS) {                                                            \
    PT_UNUSED;                                                                                     \
    return one(out, nout, tg_##name(in[0], in[1]));                                                \
  }
#define BINARY_(name)                                                                              \
  static tg_status pt_##name##_(PT_ARGS) {                                                         \
    PT_UNUSED;                                                                                     \
    tg_tensor *t = target(in[0]);                                                                  \
    return t ? inplace(out, nout, t, tg_##name##_(t, in[1])) : pending();                          \
  }

static tg_status pt_where(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout, tg_where(in[0], in[1], in[2]));
}

UNARY(neg)
UNARY(exp)
UNARY(log)
UNARY(sqrt)
UNARY(sigmoid)
UNARY(tanh)
UNARY(relu)
UNARY(abs)
UNARY(reciprocal)
UNARY(softplus)
UNARY_P(pow_scalar)
UNARY_P_(pow_scalar)
UNARY_P(elu)
UNARY_P_(elu)
UNARY_P(add_scalar)
UNARY_P_(add_scalar)
UNARY_P(sub_scalar)
UNARY_P(rsub_scalar)
UNARY_P(mul_scalar)
UNARY_P_(mul_scalar)
UNARY_P(div_scalar)
BINARY(add)
BINARY_(add)
BINARY(sub)
BINARY_(sub)
BINARY(mul)
BINARY_(mul)
BINARY(div)
BINARY_(div)
BINARY(eq)
BINARY(ne)
BINARY(gt)
BINARY(ge)
BINARY(lt)
BINARY(le)
BINARY(mm)
BINARY(matmul)
BINARY(mse_loss)
BINARY(cross_entropy)

static tg_status pt_add_scaled(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout, tg_add_scaled(in[0], in[1], p[0]));
}
static tg_status pt_add_scaled_(PT_ARGS) {
  PT_UNUSED;
  tg_tensor *t = target(in[0]);
  return t ? inplace(out, nout, t, tg_add_scaled_(t, in[1], p[0])) : pending();
}

/* Aliased writes: the operand is a view of the target. */
static tg_status pt_copy_alias_t(PT_ARGS) {
  PT_UNUSED;
  return inplace(out, nout, in[0], tg_copy_(in[0], tg_t(in[0])));
}
static tg_status pt_add_alias_t(PT_ARGS) {
  PT_UNUSED;
  return inplace(out, nout, in[0], tg_add_(in[0], tg_t(in[0])));
}
static tg_status shifted(tg_tensor **in, tg_tensor **out, int *nout, bool copy) {
  int64_t n = tg_size(in[0], 0);
  tg_tensor *dst = tg_narrow(in[0], 0, 1, n - 1), *src = tg_narrow(in[0], 0, 0, n - 1);
  if (!dst || !src) return pending();
  return inplace(out, nout, in[0], copy ? tg_copy_(dst, src) : tg_mul_(dst, src));
}
static tg_status pt_copy_alias_shift(PT_ARGS) {
  PT_UNUSED;
  return shifted(in, out, nout, true);
}
static tg_status pt_mul_alias_shift(PT_ARGS) {
  PT_UNUSED;
  return shifted(in, out, nout, false);
}
static tg_status pt_copy_alias_self(PT_ARGS) {
  PT_UNUSED;
  return inplace(out, nout, in[0], tg_copy_(in[0], in[0]));
}
static tg_status pt_add_alias_self(PT_ARGS) {
  PT_UNUSED;
  return inplace(out, nout, in[0], tg_add_(in[0], in[0]));
}

/* ---- reductions ---- */
UNARY_ONLY(sum)
UNARY_ONLY(mean)
UNARY_ONLY(max)
UNARY_ONLY(min)
static tg_status pt_sum_dim(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout, tg_sum_dim(in[0], (int)ip[0], ip[1] != 0));
}
static tg_status pt_mean_dim(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout, tg_mean_dim(in[0], (int)ip[0], ip[1] != 0));
}
static tg_status values_indices(tg_status s, int *nout) {
  *nout = s == TG_OK ? 2 : 0;
  return s;
}
static tg_status pt_max_dim(PT_ARGS) {
  PT_UNUSED;
  return values_indices(tg_max_dim(in[0], (int)ip[0], ip[1] != 0, &out[0], &out[1]), nout);
}
static tg_status pt_min_dim(PT_ARGS) {
  PT_UNUSED;
  return values_indices(tg_min_dim(in[0], (int)ip[0], ip[1] != 0, &out[0], &out[1]), nout);
}
static tg_status pt_sum_to_size(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout, tg_sum_to_size(in[0], nip, ip));
}

/* ---- linear algebra, shape, indexing, softmax ---- */
static tg_status pt_addmm(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout, tg_addmm(in[0], in[1], in[2], p[0], p[1]));
}
static tg_status pt_cat(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout, tg_cat(nin, (const tg_tensor *const *)in, (int)ip[0]));
}
static tg_status pt_stack(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout, tg_stack(nin, (const tg_tensor *const *)in, (int)ip[0]));
}
static tg_status pt_embedding(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout, tg_embedding(in[0], in[1]));
}
/* bias_gelu has no front end: it is called by name, as docs/adding-a-fused-op.md shows. */
static tg_status pt_bias_gelu(PT_ARGS) {
  PT_UNUSED;
  const tg_op_desc *op = tg_op_lookup("bias_gelu");
  return one(out, nout, op ? tg_apply1(op, 2, (const tg_tensor *const *)in, 0, NULL) : NULL);
}
static tg_status pt_softmax(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout, tg_softmax(in[0], (int)ip[0]));
}
static tg_status pt_log_softmax(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout, tg_log_softmax(in[0], (int)ip[0]));
}

/* ---- views ---- */
static tg_status pt_view(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout, tg_view(in[0], (int)ip[0], ip + 1));
}
static tg_status pt_reshape(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout, tg_reshape(in[0], (int)ip[0], ip + 1));
}
UNARY_ONLY(flatten)
static tg_status pt_transpose(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout, tg_transpose(in[0], (int)ip[0], (int)ip[1]));
}
UNARY_ONLY(t)
static tg_status pt_permute(PT_ARGS) {
  PT_UNUSED;
  int dims[TG_MAX_DIMS];
  int n = ints(ip + 1, (int)ip[0], dims);
  return one(out, nout, tg_permute(in[0], n, dims));
}
static tg_status pt_narrow(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout, tg_narrow(in[0], (int)ip[0], ip[1], ip[2]));
}
static tg_status pt_slice(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout, tg_slice(in[0], (int)ip[0], ip[1], ip[2], ip[3]));
}
static tg_status pt_select(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout, tg_select(in[0], (int)ip[0], ip[1]));
}
static tg_status pt_chunk(PT_ARGS) {
  PT_UNUSED;
  *nout = 0;
  if (ip[0] > PT_MAX_OUT) return TG_ERR_ARGUMENT;
  return tg_chunk(in[0], (int)ip[0], (int)ip[1], out, nout);
}
static tg_status pt_split(PT_ARGS) {
  PT_UNUSED;
  *nout = 0;
  return tg_split(in[0], ip[0], (int)ip[1], out, PT_MAX_OUT, nout);
}
static tg_status pt_expand(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout, tg_expand(in[0], nip, ip));
}
static tg_status pt_squeeze(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout, tg_squeeze(in[0], (int)ip[0]));
}
UNARY_ONLY(squeeze_all)
static tg_status pt_unsqueeze(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout, tg_unsqueeze(in[0], (int)ip[0]));
}
static tg_status pt_as_strided(PT_ARGS) {
  PT_UNUSED;
  int n = (int)ip[0];
  return one(out, nout, tg_as_strided(in[0], n, ip + 1, ip + 1 + n, ip[1 + 2 * n]));
}

/* ---- copies and creation ---- */
UNARY_ONLY(contiguous)
UNARY_ONLY(clone)
static tg_status pt_copy_(PT_ARGS) {
  PT_UNUSED;
  tg_tensor *t = target(in[0]);
  return t ? inplace(out, nout, t, tg_copy_(t, in[1])) : pending();
}
static tg_status pt_to_dtype(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout, tg_to_dtype(in[0], (tg_dtype)ip[0]));
}
static tg_status pt_fill_(PT_ARGS) {
  PT_UNUSED;
  return inplace(out, nout, in[0], tg_fill_(in[0], p[0]));
}
static tg_status pt_zero_(PT_ARGS) {
  PT_UNUSED;
  return inplace(out, nout, in[0], tg_zero_(in[0]));
}
static tg_status pt_zeros(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout, tg_zeros(nip - 1, ip + 1, opts_of(ip[0])));
}
static tg_status pt_ones(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout, tg_ones(nip - 1, ip + 1, opts_of(ip[0])));
}
static tg_status pt_full(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout, tg_full(nip - 1, ip + 1, p[0], opts_of(ip[0])));
}
static tg_status pt_scalar(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout, tg_scalar(p[0], opts_of(ip[0])));
}
static tg_status pt_arange(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout, tg_arange(p[0], p[1], p[2], opts_of(ip[0])));
}
UNARY_ONLY(zeros_like)
UNARY_ONLY(ones_like)
static tg_status pt_full_like(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout, tg_full_like(in[0], p[0]));
}

/* ---- element access and comparing: a value comes back as a 0-dim F64 tensor ---- */
static tg_status value(tg_tensor **out, int *nout, double v) {
  if (tg_last_error() != TG_OK) return *nout = 0, tg_last_error();
  return one(out, nout, tg_scalar(v, TG_OPTS(.dtype = TG_F64)));
}
static tg_status pt_expand_as(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout, tg_expand_as(in[0], in[1]));
}
static tg_status pt_to_device(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout, tg_to_device(in[0], TG_DEVICE_CPU));
}
static tg_status pt_item(PT_ARGS) {
  PT_UNUSED;
  double v = 0;
  tg_status s = tg_item(in[0], &v);
  return s != TG_OK ? (*nout = 0, s) : value(out, nout, v);
}
static tg_status pt_get(PT_ARGS) {
  PT_UNUSED;
  double v = 0;
  tg_status s = tg_get(in[0], ip, &v);
  return s != TG_OK ? (*nout = 0, s) : value(out, nout, v);
}
static tg_status pt_set(PT_ARGS) {
  PT_UNUSED;
  return inplace(out, nout, in[0], tg_set(in[0], ip, p[0]));
}
static tg_status pt_all_finite(PT_ARGS) {
  PT_UNUSED;
  return value(out, nout, tg_all_finite(in[0]));
}
static tg_status pt_allclose(PT_ARGS) {
  PT_UNUSED;
  return value(out, nout, tg_allclose(in[0], in[1], p[0], p[1]));
}
static tg_status pt_allclose_nan(PT_ARGS) {
  PT_UNUSED;
  return value(out, nout, tg_allclose_ex(in[0], in[1], p[0], p[1], true));
}
static tg_status pt_max_abs_diff(PT_ARGS) {
  PT_UNUSED;
  return value(out, nout, tg_max_abs_diff(in[0], in[1]));
}

/* ---- the convolution family (tg/conv.h); ints as gen_refs.py's conv section lists them ---- */
static tg_status pt_conv2d(PT_ARGS) {
  PT_UNUSED;
  const tg_conv2d_opts o = {.stride = {ip[0], ip[1]},
                            .padding = {ip[2], ip[3]},
                            .dilation = {ip[4], ip[5]},
                            .groups = ip[6],
                            .padding_mode = (tg_conv_padding_mode)ip[7],
                            .fill = nip > 8 ? (tg_conv_padding_fill)ip[8] : TG_CONV_FILL_ZEROS};
  return one(out, nout, tg_conv2d(in[0], in[1], nin > 2 ? in[2] : NULL, &o));
}
static tg_status pt_conv1d(PT_ARGS) {
  PT_UNUSED;
  const tg_conv1d_opts o = {.stride = ip[0],
                            .padding = ip[1],
                            .dilation = ip[2],
                            .groups = ip[3],
                            .padding_mode = (tg_conv_padding_mode)ip[4],
                            .fill = nip > 5 ? (tg_conv_padding_fill)ip[5] : TG_CONV_FILL_ZEROS};
  return one(out, nout, tg_conv1d(in[0], in[1], nin > 2 ? in[2] : NULL, &o));
}
static tg_status pt_conv_transpose2d(PT_ARGS) {
  PT_UNUSED;
  const tg_conv_transpose2d_opts o = {.stride = {ip[0], ip[1]},
                                      .padding = {ip[2], ip[3]},
                                      .output_padding = {ip[4], ip[5]},
                                      .dilation = {ip[6], ip[7]},
                                      .groups = ip[8]};
  return one(out, nout, tg_conv_transpose2d(in[0], in[1], nin > 2 ? in[2] : NULL, &o));
}
static tg_fold_opts fold_opts(const int64_t *ip) {
  return (tg_fold_opts){.kernel_size = {ip[0], ip[1]},
                        .dilation = {ip[2], ip[3]},
                        .padding = {ip[4], ip[5]},
                        .stride = {ip[6], ip[7]}};
}
static tg_status pt_unfold(PT_ARGS) {
  PT_UNUSED;
  const tg_fold_opts o = fold_opts(ip);
  return one(out, nout, tg_unfold(in[0], &o));
}
static tg_status pt_fold(PT_ARGS) {
  PT_UNUSED;
  const tg_fold_opts o = fold_opts(ip + 2);
  return one(out, nout, tg_fold(in[0], ip[0], ip[1], &o));
}

/* ---- pooling and padding (issue 24, helper "pool"; tg/pool.h) ---- */
static tg_status pt_max_pool2d(PT_ARGS) {
  PT_UNUSED;
  const tg_max_pool2d_options o = {{ip[2], ip[3]}, {ip[4], ip[5]}, {ip[6], ip[7]}, ip[8] != 0};
  return values_indices(tg_max_pool2d_with_indices(in[0], ip, o, &out[0], &out[1]), nout);
}
static tg_status pt_avg_pool2d(PT_ARGS) {
  PT_UNUSED;
  const tg_avg_pool2d_options o = {{ip[2], ip[3]}, {ip[4], ip[5]}, ip[6] != 0, ip[7] == 0, ip[8]};
  return one(out, nout, tg_avg_pool2d(in[0], ip, o));
}
static tg_status pt_adaptive_avg_pool2d(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout, tg_adaptive_avg_pool2d(in[0], ip));
}
static tg_status pt_pad(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout, tg_pad(in[0], nip - 1, ip + 1, (tg_pad_options){(tg_pad_mode)ip[0], p[0]}));
}

/* ---- issue 24, normalization family (helper norm): include/tg/norm.h ---- */
static tg_status pt_var_std(PT_ARGS, bool std) {
  PT_UNUSED;
  int dims[PT_MAX_IP];
  const int n = ints(ip + 1, nip - 1, dims);
  return one(out, nout, (std ? tg_std : tg_var)(in[0], n, dims, p[0], ip[0] != 0));
}
static tg_status pt_var(PT_ARGS) { return pt_var_std(in, nin, p, ip, nip, out, nout, false); }
static tg_status pt_std(PT_ARGS) { return pt_var_std(in, nin, p, ip, nip, out, nout, true); }
/* running [2, C]: row 0 the running mean, row 1 the running var, updated in place */
static tg_status pt_batch_norm_train(PT_ARGS) {
  PT_UNUSED;
  tg_tensor *y =
      tg_batch_norm(in[0], tg_select(in[3], 0, 0), tg_select(in[3], 0, 1), in[1], in[2],
                    (tg_batch_norm_options){.training = true, .momentum = p[0], .eps = p[1]});
  out[0] = y, out[1] = in[3];
  *nout = y ? 2 : 0;
  return y ? TG_OK : pending();
}
static tg_status pt_batch_norm_eval(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout,
             tg_batch_norm(in[0], tg_select(in[1], 0, 0), tg_select(in[1], 0, 1), in[2], in[3],
                           (tg_batch_norm_options){.eps = p[0]}));
}
static tg_status pt_layer_norm(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout,
             tg_layer_norm(in[0], nip, ip, in[1], in[2], (tg_layer_norm_options){.eps = p[0]}));
}
static tg_status pt_group_norm(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout,
             tg_group_norm(in[0], ip[0], in[1], in[2], (tg_group_norm_options){.eps = p[0]}));
}
static tg_status pt_dropout(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout, tg_dropout(in[0], p[0], ip[0] != 0, NULL));
}
/* issue 25, fused scaled dot-product attention (helper "attn"): p scale, ip is_causal */
static tg_attention_options attention_options(const double *p, const int64_t *ip) {
  return (tg_attention_options){.is_causal = ip[0] != 0, .scale = p[0]};
}
static tg_status pt_scaled_dot_product_attention(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout,
             tg_scaled_dot_product_attention(in[0], in[1], in[2], attention_options(p, ip)));
}
static tg_status pt_attention_composed(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout, tg_attention_composed(in[0], in[1], in[2], attention_options(p, ip)));
}

/* ---- issue 25, pointwise (helper pointwise): gelu, silu, clamp, maximum, minimum, cumsum,
 * logsumexp; p and ip as gen_refs.py's section lists them ---- */
static tg_status pt_gelu(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout, tg_gelu(in[0], p[0] != 0 ? TG_GELU_TANH : TG_GELU_NONE));
}
UNARY(silu)
static tg_status pt_clamp(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout, tg_clamp(in[0], p[0], p[1]));
}
BINARY(maximum)
BINARY_(maximum)
BINARY(minimum)
BINARY_(minimum)
static tg_status pt_cumsum(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout, tg_cumsum(in[0], (int)ip[0]));
}
static tg_status pt_logsumexp(PT_ARGS) {
  PT_UNUSED;
  int dims[PT_MAX_IP];
  const int n = ints(ip + 1, nip - 1, dims);
  return one(out, nout, tg_logsumexp(in[0], n, dims, ip[0] != 0));
}

/* ---- issue 25, helper bmm: batched matmul, bmm, tril/triu, masked_fill ---- */
BINARY(bmm)
static tg_status pt_matmul_batched(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout, tg_matmul(in[0], in[1]));
}
static tg_status pt_tril(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout, tg_tril(in[0], ip[0]));
}
static tg_status pt_triu(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout, tg_triu(in[0], ip[0]));
}
static tg_status pt_masked_fill(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout, tg_masked_fill(in[0], in[1], p[0]));
}

/* ---- indexing along a dim (issue 25, helper "index"): include/tg/index.h ---- */
static tg_status pt_gather(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout, tg_gather(in[0], (int)ip[0], in[1]));
}
static tg_status pt_scatter_add(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout, tg_scatter_add(in[0], (int)ip[0], in[1], in[2]));
}
static tg_status pt_index_select(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout, tg_index_select(in[0], (int)ip[0], in[1]));
}
static tg_status pt_index_add(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout, tg_index_add(in[0], (int)ip[0], in[1], in[2], p[0]));
}
/* ip: k, dim, largest, sorted */
static tg_status pt_topk(PT_ARGS) {
  PT_UNUSED;
  *nout = 0;
  tg_status st = tg_topk(in[0], ip[0], (int)ip[1], ip[2] != 0, ip[3] != 0, &out[0], &out[1]);
  if (st == TG_OK) *nout = 2;
  return st;
}
/* ip: has_dim (0: TG_ALL_DIMS), dim, keepdim */
static tg_status pt_argmax(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout, tg_argmax(in[0], ip[0] ? (int)ip[1] : TG_ALL_DIMS, ip[2] != 0));
}
static tg_status pt_argmin(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout, tg_argmin(in[0], ip[0] ? (int)ip[1] : TG_ALL_DIMS, ip[2] != 0));
}
static tg_status pt_one_hot(PT_ARGS) {
  PT_UNUSED;
  return one(out, nout, tg_one_hot(in[0], ip[0]));
}

#define ROW(name)                                                                                  \
  { #name, pt_##name }
static const struct {
  const char *name;
  pt_fn fn;
} ADAPTERS[] = {
    ROW(neg),
    ROW(neg_),
    ROW(exp),
    ROW(exp_),
    ROW(log),
    ROW(log_),
    ROW(sqrt),
    ROW(sqrt_),
    ROW(sigmoid),
    ROW(sigmoid_),
    ROW(tanh),
    ROW(tanh_),
    ROW(relu),
    ROW(relu_),
    ROW(abs),
    ROW(abs_),
    ROW(reciprocal),
    ROW(reciprocal_),
    ROW(softplus),
    ROW(softplus_),
    ROW(pow_scalar),
    ROW(pow_scalar_),
    ROW(elu),
    ROW(elu_),
    ROW(add_scalar),
    ROW(add_scalar_),
    ROW(sub_scalar),
    ROW(rsub_scalar),
    ROW(mul_scalar),
    ROW(mul_scalar_),
    ROW(div_scalar),
    ROW(add),
    ROW(add_),
    ROW(sub),
    ROW(sub_),
    ROW(mul),
    ROW(mul_),
    ROW(div),
    ROW(div_),
    ROW(add_scaled),
    ROW(add_scaled_),
    ROW(where),
    ROW(eq),
    ROW(ne),
    ROW(gt),
    ROW(ge),
    ROW(lt),
    ROW(le),
    ROW(copy_alias_t),
    ROW(add_alias_t),
    ROW(copy_alias_shift),
    ROW(mul_alias_shift),
    ROW(copy_alias_self),
    ROW(add_alias_self),
    ROW(sum),
    ROW(mean),
    ROW(max),
    ROW(min),
    ROW(sum_dim),
    ROW(mean_dim),
    ROW(max_dim),
    ROW(min_dim),
    ROW(sum_to_size),
    ROW(mm),
    ROW(matmul),
    ROW(addmm),
    ROW(cat),
    ROW(stack),
    ROW(embedding),
    ROW(softmax),
    ROW(log_softmax),
    ROW(mse_loss),
    ROW(bias_gelu),
    ROW(cross_entropy),
    ROW(view),
    ROW(reshape),
    ROW(flatten),
    ROW(transpose),
    ROW(t),
    ROW(permute),
    ROW(narrow),
    ROW(slice),
    ROW(select),
    ROW(chunk),
    ROW(split),
    ROW(expand),
    ROW(squeeze),
    ROW(squeeze_all),
    ROW(unsqueeze),
    ROW(as_strided),
    ROW(contiguous),
    ROW(clone),
    ROW(copy_),
    ROW(to_dtype),
    ROW(fill_),
    ROW(zero_),
    ROW(zeros),
    ROW(ones),
    ROW(full),
    ROW(scalar),
    ROW(arange),
    ROW(zeros_like),
    ROW(ones_like),
    ROW(expand_as),
    ROW(to_device),
    ROW(item),
    ROW(get),
    ROW(set),
    ROW(all_finite),
    ROW(allclose),
    ROW(allclose_nan),
    ROW(max_abs_diff),
    ROW(full_like),
    /* the convolution family */
    ROW(conv2d),
    ROW(conv1d),
    ROW(conv_transpose2d),
    ROW(unfold),
    ROW(fold),
    /* pooling and padding (issue 24, helper "pool") */
    ROW(max_pool2d),
    ROW(avg_pool2d),
    ROW(adaptive_avg_pool2d),
    ROW(pad),
    /* issue 24, normalization family (helper norm) */
    ROW(var),
    ROW(std),
    ROW(batch_norm_train),
    ROW(batch_norm_eval),
    ROW(layer_norm),
    ROW(group_norm),
    ROW(dropout),
    /* issue 25, pointwise (helper pointwise) */
    ROW(gelu),
    ROW(silu),
    ROW(silu_),
    ROW(clamp),
    ROW(maximum),
    ROW(maximum_),
    ROW(minimum),
    ROW(minimum_),
    ROW(cumsum),
    ROW(logsumexp),
    /* issue 25, helper bmm */
    ROW(bmm),
    ROW(matmul_batched),
    ROW(tril),
    ROW(triu),
    ROW(masked_fill),
    /* indexing along a dim (issue 25, helper "index") */
    ROW(gather),
    ROW(scatter_add),
    ROW(index_select),
    ROW(index_add),
    ROW(topk),
    ROW(argmax),
    ROW(argmin),
    ROW(one_hot),
    /* issue 25, fused scaled dot-product attention (helper "attn") */
    ROW(scaled_dot_product_attention),
    ROW(attention_composed),
};

pt_fn pt_adapter(const char *op) {
  for (size_t k = 0; k < sizeof ADAPTERS / sizeof ADAPTERS[0]; k++)
    if (!strcmp(ADAPTERS[k].name, op)) return ADAPTERS[k].fn;
  return NULL;
}
