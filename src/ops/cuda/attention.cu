/* The fused attention's CUDA kernels (src/ops/attention.c; lines in
 * src/ops/def/attention.def): the straightforward scheme, one thread per query row (forward
 * and dq) or key row (dk, dv), each looping over the other side with an online softmax
 * (forward) or the probabilities recomputed from lse (backward), so nothing [Tq, Tk]-sized
 * exists here either. Threads of a block share no memory and never synchronise, so the
 * emulation (src/ops/cuda/emu) runs these as written; a tiled kernel with shared memory is
 * the next step on a real GPU. The dropout mask is attention_math.h's, the CPU's bit for bit. */
#include "elementwise.cuh"
#include "ops.cuh"
#include "ops/attention_math.h"

namespace {

TG_HOST_DEVICE inline float exp_of(float x) { return expf(x); }
TG_HOST_DEVICE inline double exp_of(double x) { return exp(x); }
TG_HOST_DEVICE inline float log_of(float x) { return logf(x); }
TG_HOST_DEVICE inline double log_of(double x) { return log(x); }
TG_HOST_DEVICE inline float drop_of(uint64_t seed, uint64_t pos, float below, float keep) {
  return tg_attention_drop_f(seed, pos, below, keep);
}
TG_HOST_DEVICE inline double drop_of(uint64_t seed, uint64_t pos, double below, double keep) {
  return tg_attention_drop_d(seed, pos, below, keep);
}

/* Sizes and the decoded params, passed by value to every kernel. */
struct shape {
  int64_t n, tq, tk, d, dv;
  double scale, dropout_p;
  int causal;
  uint64_t seed, offset;
};

template <typename T> TG_HOST_DEVICE inline T dot(const T *a, const T *b, int64_t len) {
  T s = 0;
  for (int64_t x = 0; x < len; x++) s += a[x] * b[x];
  return s;
}

/* Keys row i sees: all, or 0..i when causal. */
TG_HOST_DEVICE inline int64_t keys_of(const shape &s, int64_t i) {
  return s.causal && i + 1 < s.tk ? i + 1 : s.tk;
}

/* Row (n, i): out row = sum_j softmax_j * z_ij v_j by an online softmax, lse. */
template <typename T>
__global__ void forward_kernel(shape s, T *out, T *lse, const T *q, const T *k, const T *v) {
  TG_CU_GRID_STRIDE(row, s.n * s.tq) {
    const int64_t n = row / s.tq, i = row % s.tq;
    const T *qi = q + row * s.d, *kn = k + n * s.tk * s.d, *vn = v + n * s.tk * s.dv;
    T *o = out + row * s.dv;
    const T scale = (T)s.scale, below = (T)(1 - s.dropout_p), keep = (T)(1 / (1 - s.dropout_p));
    for (int64_t x = 0; x < s.dv; x++) o[x] = 0;
    T m = -(T)INFINITY, l = 0;
    const int64_t kend = keys_of(s, i);
    for (int64_t j = 0; j < kend; j++) {
      const T sc = dot(qi, kn + j * s.d, s.d) * scale;
      if (sc > m) { /* rescale what came before (alpha = 0 while m was -inf) */
        const T alpha = exp_of(m - sc);
        l *= alpha;
        for (int64_t x = 0; x < s.dv; x++) o[x] *= alpha;
        m = sc;
      } else if (sc != sc) {
        m = sc; /* NaN: the row becomes NaN */
      }
      const T p = exp_of(sc - (m == -(T)INFINITY ? (T)0 : m));
      l += p;
      const T pz = s.dropout_p > 0
                       ? p * drop_of(s.seed, s.offset + (uint64_t)(row * s.tk + j), below, keep)
                       : p;
      for (int64_t x = 0; x < s.dv; x++) o[x] += pz * vn[j * s.dv + x];
    }
    const bool any = l > 0 || l != l;
    for (int64_t x = 0; x < s.dv; x++) o[x] = any ? o[x] / l : (T)0;
    lse[row] = any ? m + log_of(l) : -(T)INFINITY;
  }
}

/* Row (n, i): dq_i = scale sum_j P_ij (z_ij g_i . v_j - Delta_i) k_j. */
template <typename T>
__global__ void dq_kernel(shape s, T *dq, const T *g, const T *q, const T *k, const T *v,
                          const T *out, const T *lse) {
  TG_CU_GRID_STRIDE(row, s.n * s.tq) {
    const int64_t n = row / s.tq, i = row % s.tq;
    const T *qi = q + row * s.d, *gi = g + row * s.dv, *kn = k + n * s.tk * s.d;
    const T *vn = v + n * s.tk * s.dv;
    T *d = dq + row * s.d;
    const T scale = (T)s.scale, below = (T)(1 - s.dropout_p), keep = (T)(1 / (1 - s.dropout_p));
    const T delta = dot(gi, out + row * s.dv, s.dv);
    for (int64_t x = 0; x < s.d; x++) d[x] = 0;
    const int64_t kend = keys_of(s, i);
    for (int64_t j = 0; j < kend; j++) {
      const T p = exp_of(dot(qi, kn + j * s.d, s.d) * scale - lse[row]);
      T dp = dot(gi, vn + j * s.dv, s.dv);
      if (s.dropout_p > 0)
        dp *= drop_of(s.seed, s.offset + (uint64_t)(row * s.tk + j), below, keep);
      const T ds = p * (dp - delta) * scale;
      for (int64_t x = 0; x < s.d; x++) d[x] += ds * kn[j * s.d + x];
    }
  }
}

/* Key row (n, j): dv_j = sum_i P_ij z_ij g_i, dk_j = scale sum_i dS_ij q_i. */
template <typename T>
__global__ void dkv_kernel(shape s, T *dk, T *dv, const T *g, const T *q, const T *k, const T *v,
                           const T *out, const T *lse) {
  TG_CU_GRID_STRIDE(key, s.n * s.tk) {
    const int64_t n = key / s.tk, j = key % s.tk;
    const T *kj = k + key * s.d, *vj = v + key * s.dv;
    T *dkj = dk + key * s.d, *dvj = dv + key * s.dv;
    const T scale = (T)s.scale, below = (T)(1 - s.dropout_p), keep = (T)(1 / (1 - s.dropout_p));
    for (int64_t x = 0; x < s.d; x++) dkj[x] = 0;
    for (int64_t x = 0; x < s.dv; x++) dvj[x] = 0;
    for (int64_t i = s.causal ? j : 0; i < s.tq; i++) {
      const int64_t row = n * s.tq + i;
      const T *qi = q + row * s.d, *gi = g + row * s.dv;
      const T p = exp_of(dot(qi, kj, s.d) * scale - lse[row]);
      const T z = s.dropout_p > 0
                      ? drop_of(s.seed, s.offset + (uint64_t)(row * s.tk + j), below, keep)
                      : (T)1;
      const T ds = p * (z * dot(gi, vj, s.dv) - dot(gi, out + row * s.dv, s.dv)) * scale;
      for (int64_t x = 0; x < s.dv; x++) dvj[x] += p * z * gi[x];
      for (int64_t x = 0; x < s.d; x++) dkj[x] += ds * qi[x];
    }
  }
}

/* Views of the n device tensors, the shape from q [N, Tq, D], k, v and the host params. */
tg_status prepare(const char *op, int n, tg_tensor *const *t, int q_at, const tg_tensor *params,
                  tg_cu_view *views, shape *s, tg_cu_device **dev) {
  tg_status st = tg_cu_views_floating(op, n, (const tg_tensor *const *)t, views);
  if (st != TG_OK) return st;
  const tg_cu_view pv = tg_cu_view_of(params);
  if (pv.dtype != TG_F64 || pv.ndim != 1 || pv.sizes[0] != TG_ATTN_NUM_PARAMS ||
      tg_tensor_device(params).type != TG_CPU)
    return tg_set_error(TG_ERR_ARGUMENT, "%s: params must be a host F64 [%d]", op,
                        (int)TG_ATTN_NUM_PARAMS);
  const tg_attention_params a = tg_attention_params_read((const double *)pv.data);
  const tg_cu_view &q = views[q_at], &k = views[q_at + 1], &v = views[q_at + 2];
  *s = shape{q.sizes[0], q.sizes[1],  k.sizes[1], q.sizes[2], v.sizes[2],
             a.scale,    a.dropout_p, a.causal,   a.seed,     a.offset};
  return tg_cu_device_get(op, views[0].device, dev);
}

} // namespace

tg_status tg__kernel_scaled_dot_product_attention_forward_cuda(int n_tensors, tg_tensor *const *t) {
  TG__KERNEL_ARITY("scaled_dot_product_attention.forward", n_tensors, 6);
  const char *op = "cuda.scaled_dot_product_attention.forward";
  tg_cu_view v[5];
  shape s;
  tg_cu_device *dev = nullptr;
  tg_status st = prepare(op, 5, t, 2, t[5], v, &s, &dev);
  if (st != TG_OK || s.n * s.tq == 0) return st;
  TG_DISPATCH_FLOATING_TYPES(v[0].dtype, op, {
    TG_CU_LAUNCH(op, s.n * s.tq, dev->stream, forward_kernel<scalar_t>, s, (scalar_t *)v[0].data,
                 (scalar_t *)v[1].data, (const scalar_t *)v[2].data, (const scalar_t *)v[3].data,
                 (const scalar_t *)v[4].data);
  });
  return TG_OK;
}

tg_status tg__kernel_scaled_dot_product_attention_backward_cuda(int n_tensors,
                                                                tg_tensor *const *t) {
  TG__KERNEL_ARITY("scaled_dot_product_attention.backward", n_tensors, 10);
  const char *op = "cuda.scaled_dot_product_attention.backward";
  tg_cu_view v[9]; /* dq, dk, dv, grad, q, k, v, out, lse */
  shape s;
  tg_cu_device *dev = nullptr;
  tg_status st = prepare(op, 9, t, 4, t[9], v, &s, &dev);
  if (st != TG_OK) return st;
  TG_DISPATCH_FLOATING_TYPES(v[0].dtype, op, {
    const scalar_t *g = (const scalar_t *)v[3].data, *q = (const scalar_t *)v[4].data,
                   *k = (const scalar_t *)v[5].data, *vv = (const scalar_t *)v[6].data,
                   *o = (const scalar_t *)v[7].data, *lse = (const scalar_t *)v[8].data;
    if (s.n * s.tq > 0)
      TG_CU_LAUNCH(op, s.n * s.tq, dev->stream, dq_kernel<scalar_t>, s, (scalar_t *)v[0].data, g, q,
                   k, vv, o, lse);
    if (s.n * s.tk > 0)
      TG_CU_LAUNCH(op, s.n * s.tk, dev->stream, dkv_kernel<scalar_t>, s, (scalar_t *)v[1].data,
                   (scalar_t *)v[2].data, g, q, k, vv, o, lse);
  });
  return TG_OK;
}
