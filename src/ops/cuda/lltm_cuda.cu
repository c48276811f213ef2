/* The fused LLTM on CUDA (lltm_cuda.h). Forward: X = [old_h, input] by two copies, the
 * gate GEMM, then one kernel that adds the bias, applies the gates and writes both
 * outputs. Backward: one kernel for the gate gradients, then cuBLAS for d_weights, d_old_h
 * and d_input, and a gemv with ones for d_bias. One thread per (b, j) element, grid-stride;
 * the per-element math is ops/lltm_cell.h, the same code as the CPU loop. */
extern "C" {
#include "ops/cuda/lltm_cuda.h"
}

#include "allocator.cuh"
#include "elementwise.cuh"
#include "ops.cuh"
#include "ops/lltm_cell.h"

namespace {

const char *const kForward = "lltm (cuda forward)";
const char *const kBackward = "lltm (cuda backward)";

/* A 2-D strided matrix in a kernel (row-major indexing, any strides). */
template <typename T> struct mat {
  T *p;
  int64_t s0, s1;
  TG_HOST_DEVICE T &operator()(int64_t i, int64_t j) const { return p[i * s0 + j * s1]; }
};
template <typename T> mat<T> mat_of(const tg_cu_view &v) {
  return mat<T>{(T *)v.data, v.strides[0], v.ndim > 1 ? v.strides[1] : 0};
}
/* A vector [n] seen as a matrix [1, n], so one accessor type serves both. */
template <typename T> mat<T> row_of(const tg_cu_view &v) {
  return mat<T>{(T *)v.data, 0, v.strides[0]};
}

/* gates (b, :) holds X W^T on entry; adds the bias there, so gates keeps the
 * pre-activations for backward, and writes the cell's outputs. */
template <typename T>
__global__ void forward_kernel(int64_t batch, int64_t state, mat<T> gates, mat<T> bias,
                               mat<T> old_cell, mat<T> new_h, mat<T> new_cell) {
  TG_CU_GRID_STRIDE(e, batch * state) {
    int64_t b = e / state, j = e % state;
    T g0 = gates(b, j) + bias(0, j);
    T g1 = gates(b, state + j) + bias(0, state + j);
    T g2 = gates(b, 2 * state + j) + bias(0, 2 * state + j);
    gates(b, j) = g0;
    gates(b, state + j) = g1;
    gates(b, 2 * state + j) = g2;
    T ig, og, cand, nc, nh;
    tg_lltm_cell_forward(g0, g1, g2, old_cell(b, j), &ig, &og, &cand, &nc, &nh);
    new_cell(b, j) = nc;
    new_h(b, j) = nh;
  }
}

/* d_gates from the pre-activations and new_cell. A missing upstream gradient (p == NULL)
 * is zero; a missing d_old_cell is not written. */
template <typename T>
__global__ void backward_kernel(int64_t batch, int64_t state, mat<T> grad_h, mat<T> grad_cell,
                                mat<T> new_cell, mat<T> gates, mat<T> d_gates, mat<T> d_old_cell) {
  TG_CU_GRID_STRIDE(e, batch * state) {
    int64_t b = e / state, j = e % state;
    T gh = grad_h.p ? grad_h(b, j) : T(0);
    T gc = grad_cell.p ? grad_cell(b, j) : T(0);
    T d0, d1, d2, doc;
    tg_lltm_cell_backward_from_preact(gh, gc, new_cell(b, j), gates(b, j), gates(b, state + j),
                                      gates(b, 2 * state + j), &d0, &d1, &d2, &doc);
    d_gates(b, j) = d0;
    d_gates(b, state + j) = d1;
    d_gates(b, 2 * state + j) = d2;
    if (d_old_cell.p) d_old_cell(b, j) = doc;
  }
}

bool has_sizes(const tg_cu_view &v, int ndim, int64_t s0, int64_t s1) {
  return v.ndim == ndim && v.sizes[0] == s0 && (ndim < 2 || v.sizes[1] == s1);
}

/* Views of the non-NULL tensors, all on one CUDA device with one floating dtype. */
tg_status views_checked(const char *op, int n, const tg_tensor *const *ts, tg_cu_view *views) {
  const tg_tensor *present[16] = {};
  int idx[16] = {}, m = 0;
  for (int i = 0; i < n; i++)
    if (ts[i]) present[m] = ts[i], idx[m++] = i;
  tg_cu_view got[16];
  tg_status st = tg_cu_views_of(op, m, present, got);
  if (st != TG_OK) return st;
  for (int i = 0; i < m; i++) {
    if (got[i].dtype != got[0].dtype)
      return tg_set_error(TG_ERR_DTYPE, "%s: tensors are %s and %s", op,
                          tg_dtype_name(got[0].dtype), tg_dtype_name(got[i].dtype));
    views[idx[i]] = got[i];
  }
  if (got[0].dtype != TG_F32 && got[0].dtype != TG_F64)
    return tg_set_error(TG_ERR_DTYPE, "%s: dtype %s is not supported (F32, F64 only)", op,
                        tg_dtype_name(got[0].dtype));
  return TG_OK;
}

} // namespace

extern "C" tg_status tg__lltm_forward_cuda(const tg_tensor *input, const tg_tensor *weights,
                                           const tg_tensor *bias, const tg_tensor *old_h,
                                           const tg_tensor *old_cell, tg_tensor *new_h,
                                           tg_tensor *new_cell, tg_tensor *X, tg_tensor *gates) {
  const char *op = kForward;
  const tg_tensor *ts[9] = {input, weights, bias, old_h, old_cell, new_h, new_cell, X, gates};
  for (int i = 0; i < 9; i++)
    if (!ts[i]) return tg_set_error(TG_ERR_ARGUMENT, "%s: tensor argument %d is NULL", op, i);
  tg_cu_view v[9];
  tg_status st = views_checked(op, 9, ts, v);
  if (st != TG_OK) return st;
  const tg_cu_view &in = v[0], &w = v[1], &oh = v[3], &oc = v[4], &nh = v[5], &nc = v[6],
                   &xv = v[7], &gv = v[8];
  tg_cu_view bi = v[2];
  if (bi.ndim == 2 && bi.sizes[0] == 1) { /* a [1, 3S] bias: its row */
    bi.ndim = 1;
    bi.sizes[0] = bi.sizes[1];
    bi.strides[0] = bi.strides[1];
  }
  int64_t B = in.ndim == 2 ? in.sizes[0] : -1, I = in.ndim == 2 ? in.sizes[1] : -1;
  int64_t S = oh.ndim == 2 ? oh.sizes[1] : -1;
  if (B < 0 || S < 0 || !has_sizes(w, 2, 3 * S, S + I) || !has_sizes(bi, 1, 3 * S, 0) ||
      !has_sizes(oh, 2, B, S) || !has_sizes(oc, 2, B, S) || !has_sizes(nh, 2, B, S) ||
      !has_sizes(nc, 2, B, S) || !has_sizes(xv, 2, B, S + I) || !has_sizes(gv, 2, B, 3 * S))
    return tg_set_error(TG_ERR_SHAPE,
                        "%s: expects input [B, I], weights [3S, S+I], bias [3S], old_h and "
                        "old_cell [B, S] and outputs to match",
                        op);
  if ((st = tg_cu_copy(op, tg_cu_narrow(xv, 1, 0, S), oh)) != TG_OK) return st;
  if ((st = tg_cu_copy(op, tg_cu_narrow(xv, 1, S, I), in)) != TG_OK) return st;
  /* gates = X @ W^T; W^T is a transposed view, read by cuBLAS in place. */
  if ((st = tg_cu_gemm(op, gv, xv, tg_cu_transpose(w, 0, 1), 1.0, 0.0)) != TG_OK) return st;
  if (B * S == 0) return TG_OK;
  tg_cu_device *dev;
  if ((st = tg_cu_device_get(op, gv.device, &dev)) != TG_OK) return st;
  TG_DISPATCH_FLOATING_TYPES(gv.dtype, op, {
    TG_CU_LAUNCH(op, B * S, dev->stream, forward_kernel<scalar_t>, B, S, mat_of<scalar_t>(gv),
                 row_of<scalar_t>(bi), mat_of<scalar_t>(oc), mat_of<scalar_t>(nh),
                 mat_of<scalar_t>(nc));
  });
  return TG_OK;
}

extern "C" tg_status tg__lltm_backward_cuda(const tg_tensor *grad_h, const tg_tensor *grad_cell,
                                            const tg_tensor *new_cell, const tg_tensor *X,
                                            const tg_tensor *gates, const tg_tensor *weights,
                                            tg_tensor *d_old_h, tg_tensor *d_input,
                                            tg_tensor *d_weights, tg_tensor *d_bias,
                                            tg_tensor *d_old_cell) {
  const char *op = kBackward;
  const tg_tensor *ts[11] = {grad_h,  grad_cell, new_cell,  X,      gates,     weights,
                             d_old_h, d_input,   d_weights, d_bias, d_old_cell};
  for (int i = 2; i < 6; i++)
    if (!ts[i]) return tg_set_error(TG_ERR_ARGUMENT, "%s: tensor argument %d is NULL", op, i);
  tg_cu_view v[11] = {};
  tg_status st = views_checked(op, 11, ts, v);
  if (st != TG_OK) return st;
  const tg_cu_view &gh = v[0], &gc = v[1], &nc = v[2], &xv = v[3], &gv = v[4], &w = v[5];
  int64_t B = nc.ndim == 2 ? nc.sizes[0] : -1, S = nc.ndim == 2 ? nc.sizes[1] : -1;
  int64_t I = xv.ndim == 2 ? xv.sizes[1] - S : -1;
  bool ok = B >= 0 && I >= 0 && has_sizes(xv, 2, B, S + I) && has_sizes(gv, 2, B, 3 * S) &&
            has_sizes(w, 2, 3 * S, S + I) && (!grad_h || has_sizes(gh, 2, B, S)) &&
            (!grad_cell || has_sizes(gc, 2, B, S)) && (!d_old_h || has_sizes(v[6], 2, B, S)) &&
            (!d_input || has_sizes(v[7], 2, B, I)) &&
            (!d_weights || has_sizes(v[8], 2, 3 * S, S + I)) &&
            (!d_bias || has_sizes(v[9], 1, 3 * S, 0)) && (!d_old_cell || has_sizes(v[10], 2, B, S));
  if (!ok)
    return tg_set_error(TG_ERR_SHAPE,
                        "%s: expects new_cell [B, S], X [B, S+I], gates [B, 3S], weights "
                        "[3S, S+I] and gradients to match",
                        op);
  tg_cu_device *dev;
  if ((st = tg_cu_device_get(op, nc.device, &dev)) != TG_OK) return st;
  int64_t dg_sizes[2] = {B, 3 * S};
  tg_cu_temp dg_buf;
  dg_buf.ptr = tg_cu_alloc(op, nc.device, (size_t)(B * 3 * S) * tg_dtype_size(nc.dtype));
  if (!dg_buf.ptr) return tg_last_error();
  tg_cu_view dg = tg_cu_view_dense(dg_buf.ptr, nc.dtype, nc.device, 2, dg_sizes);
  if (B * S > 0) {
    TG_DISPATCH_FLOATING_TYPES(nc.dtype, op, {
      mat<scalar_t> none{nullptr, 0, 0};
      TG_CU_LAUNCH(op, B * S, dev->stream, backward_kernel<scalar_t>, B, S,
                   grad_h ? mat_of<scalar_t>(gh) : none, grad_cell ? mat_of<scalar_t>(gc) : none,
                   mat_of<scalar_t>(nc), mat_of<scalar_t>(gv), mat_of<scalar_t>(dg),
                   d_old_cell ? mat_of<scalar_t>(v[10]) : none);
    });
  }
  /* d_weights = d_gates^T @ X; d_X = d_gates @ W, split into its two column blocks. */
  if (d_weights && (st = tg_cu_gemm(op, v[8], tg_cu_transpose(dg, 0, 1), xv, 1.0, 0.0)) != TG_OK)
    return st;
  if (d_old_h && (st = tg_cu_gemm(op, v[6], dg, tg_cu_narrow(w, 1, 0, S), 1.0, 0.0)) != TG_OK)
    return st;
  if (d_input && (st = tg_cu_gemm(op, v[7], dg, tg_cu_narrow(w, 1, S, I), 1.0, 0.0)) != TG_OK)
    return st;
  if (d_bias) {
    /* d_bias as the keepdim form [1, 3S] of a sum over the batch dim. */
    tg_cu_view db = tg_cu_expand_rows(v[9], 1);
    if ((st = tg_cu_sum_dim(op, db, dg, 0)) != TG_OK) return st;
  }
  return TG_OK;
}
