/* The elementwise kernel family: one thread per element (grid-stride), any strides on
 * every operand (stride 0 included, so broadcasting is an expanded view), different
 * element types per operand, the per-element work a functor. Fill, copy/convert, unary,
 * binary, where and random fills are all instances. */
#ifndef TG_CUDA_ELEMENTWISE_CUH
#define TG_CUDA_ELEMENTWISE_CUH

#include "context.cuh"
#include "ops/coalesce.h"
#include "view.cuh"

/* Maps a logical (row-major) element index to the element offset of each of N operands.
 * Built from the coalesced dims (ops/coalesce.h: size-1 dims dropped, dims contiguous in
 * every operand merged), so a dense tensor is one dim and costs no division at all. */
template <int N> struct tg_cu_indexer {
  int ndim;
  int64_t sizes[TG_MAX_DIMS];
  int64_t strides[N][TG_MAX_DIMS];

  TG_HOST_DEVICE void offsets(int64_t linear, int64_t *off) const {
    if (ndim == 1) { /* the common dense case: no 64-bit division */
      for (int k = 0; k < N; k++) off[k] = linear * strides[k][0];
      return;
    }
    for (int k = 0; k < N; k++) off[k] = 0;
    for (int d = ndim - 1; d >= 0; d--) {
      int64_t i = linear % sizes[d];
      linear /= sizes[d];
      for (int k = 0; k < N; k++) off[k] += i * strides[k][d];
    }
  }
};

/* strides[k] are operand k's strides over the shared sizes. Coalesced as the CPU loops are
 * (ops/coalesce.h) but in logical order: a functor may depend on the logical index (the
 * random fills) and the reductions index their rows by it. */
template <int N>
static tg_cu_indexer<N> tg_cu_make_indexer(int ndim, const int64_t *sizes,
                                           const int64_t *const *strides) {
  static_assert(N <= TG_COALESCE_MAX_OPERANDS, "too many operands to coalesce");
  tg_coalesced c;
  tg_coalesce(&c, ndim, sizes, N, strides, false);
  tg_cu_indexer<N> ix;
  ix.ndim = c.ndim == 1 && c.sizes[0] == 1 ? 0 : c.ndim; /* one element: no dims at all */
  for (int d = 0; d < c.ndim; d++) {
    ix.sizes[d] = c.sizes[d];
    for (int k = 0; k < N; k++) ix.strides[k][d] = c.strides[k][d];
  }
  return ix;
}

template <typename F, typename out_t>
__global__ void tg_cu_nullary_kernel(int64_t n, tg_cu_indexer<1> ix, out_t *out, F f) {
  TG_CU_GRID_STRIDE(i, n) {
    int64_t o[1];
    ix.offsets(i, o);
    out[o[0]] = f(i);
  }
}

template <typename F, typename out_t, typename a_t>
__global__ void tg_cu_unary_kernel(int64_t n, tg_cu_indexer<2> ix, out_t *out, const a_t *a, F f) {
  TG_CU_GRID_STRIDE(i, n) {
    int64_t o[2];
    ix.offsets(i, o);
    out[o[0]] = f(a[o[1]]);
  }
}

template <typename F, typename out_t, typename a_t, typename b_t>
__global__ void tg_cu_binary_kernel(int64_t n, tg_cu_indexer<3> ix, out_t *out, const a_t *a,
                                    const b_t *b, F f) {
  TG_CU_GRID_STRIDE(i, n) {
    int64_t o[3];
    ix.offsets(i, o);
    out[o[0]] = f(a[o[1]], b[o[2]]);
  }
}

template <typename F, typename out_t, typename a_t, typename b_t, typename c_t>
__global__ void tg_cu_ternary_kernel(int64_t n, tg_cu_indexer<4> ix, out_t *out, const a_t *a,
                                     const b_t *b, const c_t *c, F f) {
  TG_CU_GRID_STRIDE(i, n) {
    int64_t o[4];
    ix.offsets(i, o);
    out[o[0]] = f(a[o[1]], b[o[2]], c[o[3]]);
  }
}

/* out[i] = f(i) for the logical index i. */
template <typename out_t, typename F>
static tg_status tg_cu_nullary(const char *op, const tg_cu_view &out, F f) {
  int64_t n = tg_cu_numel(out);
  if (n == 0) return TG_OK;
  tg_cu_device *dev;
  tg_status st = tg_cu_device_get(op, out.device, &dev);
  if (st != TG_OK) return st;
  const int64_t *strides[1] = {out.strides};
  tg_cu_indexer<1> ix = tg_cu_make_indexer<1>(out.ndim, out.sizes, strides);
  TG_CU_LAUNCH(op, n, dev->stream, tg_cu_nullary_kernel<F, out_t>, n, ix, (out_t *)out.data, f);
  return TG_OK;
}

/* out = f(a); a has out's sizes. */
template <typename out_t, typename a_t, typename F>
static tg_status tg_cu_unary(const char *op, const tg_cu_view &out, const tg_cu_view &a, F f) {
  int64_t n = tg_cu_numel(out);
  if (n == 0) return TG_OK;
  tg_cu_device *dev;
  tg_status st = tg_cu_device_get(op, out.device, &dev);
  if (st != TG_OK) return st;
  const int64_t *strides[2] = {out.strides, a.strides};
  tg_cu_indexer<2> ix = tg_cu_make_indexer<2>(out.ndim, out.sizes, strides);
  TG_CU_LAUNCH(op, n, dev->stream, tg_cu_unary_kernel<F, out_t, a_t>, n, ix, (out_t *)out.data,
               (const a_t *)a.data, f);
  return TG_OK;
}

/* out = f(a, b); a and b have out's sizes. */
template <typename out_t, typename a_t, typename b_t, typename F>
static tg_status tg_cu_binary(const char *op, const tg_cu_view &out, const tg_cu_view &a,
                              const tg_cu_view &b, F f) {
  int64_t n = tg_cu_numel(out);
  if (n == 0) return TG_OK;
  tg_cu_device *dev;
  tg_status st = tg_cu_device_get(op, out.device, &dev);
  if (st != TG_OK) return st;
  const int64_t *strides[3] = {out.strides, a.strides, b.strides};
  tg_cu_indexer<3> ix = tg_cu_make_indexer<3>(out.ndim, out.sizes, strides);
  TG_CU_LAUNCH(op, n, dev->stream, tg_cu_binary_kernel<F, out_t, a_t, b_t>, n, ix,
               (out_t *)out.data, (const a_t *)a.data, (const b_t *)b.data, f);
  return TG_OK;
}

/* out = f(a, b, c); a, b and c have out's sizes. */
template <typename out_t, typename a_t, typename b_t, typename c_t, typename F>
static tg_status tg_cu_ternary(const char *op, const tg_cu_view &out, const tg_cu_view &a,
                               const tg_cu_view &b, const tg_cu_view &c, F f) {
  int64_t n = tg_cu_numel(out);
  if (n == 0) return TG_OK;
  tg_cu_device *dev;
  tg_status st = tg_cu_device_get(op, out.device, &dev);
  if (st != TG_OK) return st;
  const int64_t *strides[4] = {out.strides, a.strides, b.strides, c.strides};
  tg_cu_indexer<4> ix = tg_cu_make_indexer<4>(out.ndim, out.sizes, strides);
  TG_CU_LAUNCH(op, n, dev->stream, tg_cu_ternary_kernel<F, out_t, a_t, b_t, c_t>, n, ix,
               (out_t *)out.data, (const a_t *)a.data, (const b_t *)b.data, (const c_t *)c.data, f);
  return TG_OK;
}

#endif
