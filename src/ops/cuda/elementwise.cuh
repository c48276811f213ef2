/* The elementwise kernel family: one thread per element (grid-stride), any strides on
 * every operand (stride 0 included, so broadcasting is an expanded view), different
 * element types per operand, the per-element work a functor. Fill, copy/convert, unary,
 * binary and random fills are all instances. */
#ifndef TG_CUDA_ELEMENTWISE_CUH
#define TG_CUDA_ELEMENTWISE_CUH

#include "context.cuh"
#include "view.cuh"

/* Maps a logical (row-major) element index to the element offset of each of N operands.
 * Built with dims of size 1 dropped and dims that are contiguous in every operand merged,
 * so a dense tensor is one dim and costs no division at all. */
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

/* strides[k] are operand k's strides over the shared sizes. */
template <int N>
static tg_cu_indexer<N> tg_cu_make_indexer(int ndim, const int64_t *sizes,
                                           const int64_t *const *strides) {
  tg_cu_indexer<N> ix;
  /* Keep the dims that are not 1, innermost first. */
  int n = 0;
  for (int d = ndim - 1; d >= 0; d--) {
    if (sizes[d] == 1) continue;
    ix.sizes[n] = sizes[d];
    for (int k = 0; k < N; k++) ix.strides[k][n] = strides[k][d];
    n++;
  }
  /* Merge an outer dim into the current one when every operand steps over it as if the
   * two were one dim. */
  int m = 0;
  for (int d = 1; d < n; d++) {
    bool merge = true;
    for (int k = 0; k < N; k++) merge = merge && ix.strides[k][d] == ix.strides[k][m] * ix.sizes[m];
    if (merge) {
      ix.sizes[m] *= ix.sizes[d];
    } else {
      m++;
      ix.sizes[m] = ix.sizes[d];
      for (int k = 0; k < N; k++) ix.strides[k][m] = ix.strides[k][d];
    }
  }
  ix.ndim = n ? m + 1 : 0;
  /* Back to outermost first. */
  for (int lo = 0, hi = ix.ndim - 1; lo < hi; lo++, hi--) {
    int64_t s = ix.sizes[lo];
    ix.sizes[lo] = ix.sizes[hi];
    ix.sizes[hi] = s;
    for (int k = 0; k < N; k++) {
      int64_t t = ix.strides[k][lo];
      ix.strides[k][lo] = ix.strides[k][hi];
      ix.strides[k][hi] = t;
    }
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

#endif
