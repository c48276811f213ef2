/* The fused LLTM's elementwise passes on CUDA: the backend primitives
 * lltm_forward_pointwise and lltm_backward_pointwise (ops/backend.h; registered in
 * backend.cu). src/ops/lltm.c runs the GEMMs and the bias reduction around them. One
 * thread per (b, j) element, grid-stride; the per-element math is ops/lltm_cell.h, the same
 * code as the CPU passes. */
#include "elementwise.cuh"
#include "ops.cuh"
#include "ops/lltm_cell.h"

namespace {

/* A 2-D strided matrix in a kernel (row-major indexing, any strides). */
template <typename T> struct mat {
  T *p;
  int64_t s0, s1;
  TG_HOST_DEVICE T &operator()(int64_t i, int64_t j) const { return p[i * s0 + j * s1]; }
};
template <typename T> mat<T> mat_of(const tg_cu_view &v) {
  return mat<T>{(T *)v.data, v.strides[0], v.ndim > 1 ? v.strides[1] : 0};
}
/* A bias [3S] or [1, 3S] as a matrix [1, 3S], so one accessor type serves both. */
template <typename T> mat<T> row_of(const tg_cu_view &v) {
  return mat<T>{(T *)v.data, 0, v.strides[v.ndim - 1]};
}

/* gates (b, :) holds X W^T on entry; adds the bias and overwrites gates with the
 * activations (what backward reads), and writes the cell's outputs. */
template <typename T>
__global__ void forward_kernel(int64_t batch, int64_t state, mat<T> gates, mat<T> bias,
                               mat<T> old_cell, mat<T> new_h, mat<T> new_cell) {
  TG_CU_GRID_STRIDE(e, batch * state) {
    int64_t b = e / state, j = e % state;
    T g0 = gates(b, j) + bias(0, j);
    T g1 = gates(b, state + j) + bias(0, state + j);
    T g2 = gates(b, 2 * state + j) + bias(0, 2 * state + j);
    T ig, og, cand, nc, nh;
    tg__lltm_math_forward(g0, g1, g2, old_cell(b, j), &ig, &og, &cand, &nc, &nh);
    gates(b, j) = ig;
    gates(b, state + j) = og;
    gates(b, 2 * state + j) = cand;
    new_cell(b, j) = nc;
    new_h(b, j) = nh;
  }
}

/* d_gates from the activations and old_cell. A missing upstream gradient (p == NULL) is
 * zero; a missing d_old_cell is not written. */
template <typename T>
__global__ void backward_kernel(int64_t batch, int64_t state, mat<T> grad_h, mat<T> grad_cell,
                                mat<T> old_cell, mat<T> gates, mat<T> d_gates, mat<T> d_old_cell) {
  TG_CU_GRID_STRIDE(e, batch * state) {
    int64_t b = e / state, j = e % state;
    T gh = grad_h.p ? grad_h(b, j) : T(0);
    T gc = grad_cell.p ? grad_cell(b, j) : T(0);
    T d0, d1, d2, doc;
    tg__lltm_math_backward_from_act(gh, gc, old_cell(b, j), gates(b, j), gates(b, state + j),
                                    gates(b, 2 * state + j), &d0, &d1, &d2, &doc);
    d_gates(b, j) = d0;
    d_gates(b, state + j) = d1;
    d_gates(b, 2 * state + j) = d2;
    if (d_old_cell.p) d_old_cell(b, j) = doc;
  }
}

} // namespace

/* The LLTM's kernels (TG_OP_KERNEL lines in src/ops/def/lltm.def). */
tg_status tg__kernel_lltm_forward_pointwise_cuda(int n, tg_tensor *const *t) {
  TG__KERNEL_ARITY("lltm.forward_pointwise", n, 5);
  tg_tensor *gates = t[0], *new_h = t[3], *new_cell = t[4];
  const tg_tensor *bias = t[1], *old_cell = t[2];
  const char *op = "cuda.lltm_forward_pointwise";
  const tg_tensor *ts[5] = {gates, bias, old_cell, new_h, new_cell};
  tg_cu_view v[5];
  tg_status st = tg_cu_views_floating(op, 5, ts, v);
  if (st != TG_OK) return st;
  const int64_t B = v[2].sizes[0], S = v[2].sizes[1];
  if (B * S == 0) return TG_OK;
  tg_cu_device *dev;
  if ((st = tg_cu_device_get(op, v[0].device, &dev)) != TG_OK) return st;
  TG_DISPATCH_FLOATING_TYPES(v[0].dtype, op, {
    TG_CU_LAUNCH(op, B * S, dev->stream, forward_kernel<scalar_t>, B, S, mat_of<scalar_t>(v[0]),
                 row_of<scalar_t>(v[1]), mat_of<scalar_t>(v[2]), mat_of<scalar_t>(v[3]),
                 mat_of<scalar_t>(v[4]));
  });
  return TG_OK;
}

tg_status tg__kernel_lltm_backward_pointwise_cuda(int n, tg_tensor *const *t) {
  TG__KERNEL_ARITY("lltm.backward_pointwise", n, 7);
  const tg_tensor *grad_h = t[0], *grad_cell = t[1], *gates = t[2], *old_cell = t[3];
  tg_tensor *d_gates = t[4], *d_old_cell = t[5], *d_bias = t[6];
  const char *op = "cuda.lltm_backward_pointwise";
  const tg_tensor *ts[6] = {grad_h, grad_cell, gates, old_cell, d_gates, d_old_cell};
  tg_cu_view v[6] = {};
  tg_status st = tg_cu_views_floating(op, 6, ts, v);
  if (st != TG_OK) return st;
  const int64_t B = v[3].sizes[0], S = v[3].sizes[1];
  if (B * S == 0) return TG_OK;
  tg_cu_device *dev;
  if ((st = tg_cu_device_get(op, v[2].device, &dev)) != TG_OK) return st;
  TG_DISPATCH_FLOATING_TYPES(v[2].dtype, op, {
    mat<scalar_t> none{nullptr, 0, 0};
    TG_CU_LAUNCH(op, B * S, dev->stream, backward_kernel<scalar_t>, B, S,
                 grad_h ? mat_of<scalar_t>(v[0]) : none, grad_cell ? mat_of<scalar_t>(v[1]) : none,
                 mat_of<scalar_t>(v[3]), mat_of<scalar_t>(v[2]), mat_of<scalar_t>(v[4]),
                 d_old_cell ? mat_of<scalar_t>(v[5]) : none);
  });
  if (!d_bias) return TG_OK;
  /* The bias gradient: d_gates' column sums, by the reduction kernels. */
  const tg_tensor *rs[2] = {d_bias, d_gates};
  tg_cu_view r[2];
  if ((st = tg_cu_views_of(op, 2, rs, r)) != TG_OK) return st;
  return tg_cu_reduce(op, TG_REDUCE_SUM, r[0], NULL, r[1], 0);
}
