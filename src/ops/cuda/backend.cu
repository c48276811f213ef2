/* The CUDA backend table (ops/backend.h): each primitive checks that its tensors share one
 * CUDA device, takes their views and runs the view-level op. */
#include "allocator.cuh"
#include "context.cuh"
#include "ops.cuh"

tg_status tg_cu_views_of(const char *op, int n, const tg_tensor *const *ts, tg_cu_view *views) {
  tg_device first = tg_tensor_device(ts[0]);
  for (int i = 0; i < n; i++) {
    tg_device d = tg_tensor_device(ts[i]);
    if (d.type != TG_CUDA || d.index != first.index)
      return tg_set_error(TG_ERR_DEVICE,
                          "%s: tensors on %s:%d and %s:%d (the CUDA backend needs them all on "
                          "one CUDA device)",
                          op, tg_device_type_name(first.type), first.index,
                          tg_device_type_name(d.type), d.index);
    views[i] = tg_cu_view_of(ts[i]);
  }
  return TG_OK;
}

/* The fused LLTM's elementwise passes (lltm_cuda.cu). */
/* embedding's row gather and scatter-add (embedding.cu). */
tg_status tg_cuda_index_select_rows(tg_tensor *out, const tg_tensor *x, const tg_tensor *index);
tg_status tg_cuda_index_add_rows(tg_tensor *out, const tg_tensor *src, const tg_tensor *index);

tg_status tg_cuda_lltm_forward_pointwise(tg_tensor *gates, const tg_tensor *bias,
                                         const tg_tensor *old_cell, tg_tensor *new_h,
                                         tg_tensor *new_cell);
tg_status tg_cuda_lltm_backward_pointwise(const tg_tensor *grad_h, const tg_tensor *grad_cell,
                                          const tg_tensor *gates, const tg_tensor *old_cell,
                                          tg_tensor *d_gates, tg_tensor *d_old_cell,
                                          tg_tensor *d_bias);

namespace {

#define VIEWS(op, ...)                                                                             \
  const tg_tensor *const ts_[] = {__VA_ARGS__};                                                    \
  tg_cu_view v[sizeof ts_ / sizeof ts_[0]];                                                        \
  tg_status st_ = tg_cu_views_of((op), (int)(sizeof ts_ / sizeof ts_[0]), ts_, v);                 \
  if (st_ != TG_OK) return st_

tg_status fill(tg_tensor *out, double value) {
  VIEWS("cuda.fill", out);
  return tg_cu_fill("cuda.fill", v[0], value);
}

tg_status copy(tg_tensor *out, const tg_tensor *src) {
  VIEWS("cuda.copy", out, src);
  return tg_cu_copy("cuda.copy", v[0], v[1]);
}

tg_status unary(tg_unary_kind kind, double a, double b, tg_tensor *out, const tg_tensor *x) {
  VIEWS("cuda.unary", out, x);
  return tg_cu_unary_op("cuda.unary", kind, a, b, v[0], v[1]);
}

tg_status binary(tg_binary_kind kind, double alpha, tg_tensor *out, const tg_tensor *a,
                 const tg_tensor *b) {
  VIEWS("cuda.binary", out, a, b);
  return tg_cu_binary_op("cuda.binary", kind, alpha, v[0], v[1], v[2]);
}

tg_status where(tg_tensor *out, const tg_tensor *cond, const tg_tensor *a, const tg_tensor *b) {
  VIEWS("cuda.where", out, cond, a, b);
  return tg_cu_where("cuda.where", v[0], v[1], v[2], v[3]);
}

tg_status reduce(tg_reduce_kind kind, tg_tensor *values, tg_tensor *indices, const tg_tensor *x,
                 int dim) {
  if (!indices) {
    VIEWS("cuda.reduce", values, x);
    return tg_cu_reduce("cuda.reduce", kind, v[0], NULL, v[1], dim);
  }
  VIEWS("cuda.reduce", values, indices, x);
  return tg_cu_reduce("cuda.reduce", kind, v[0], &v[1], v[2], dim);
}

tg_status gemm(tg_tensor *out, const tg_tensor *a, const tg_tensor *b, double alpha, double beta) {
  VIEWS("cuda.gemm", out, a, b);
  return tg_cu_gemm("cuda.gemm", v[0], v[1], v[2], alpha, beta);
}

tg_status gather_rows(tg_tensor *out, const tg_tensor *x, const tg_tensor *index) {
  VIEWS("cuda.gather_rows", out, x, index);
  return tg_cu_gather_rows("cuda.gather_rows", v[0], v[1], v[2]);
}

tg_status scatter_add_rows(tg_tensor *out, const tg_tensor *src, const tg_tensor *index) {
  VIEWS("cuda.scatter_add_rows", out, src, index);
  return tg_cu_scatter_add_rows("cuda.scatter_add_rows", v[0], v[1], v[2]);
}

tg_status uniform(tg_tensor *out, uint64_t seed, uint64_t offset, double a, double b) {
  VIEWS("cuda.uniform", out);
  return tg_cu_random("cuda.uniform", v[0], false, seed, offset, a, b);
}

tg_status normal(tg_tensor *out, uint64_t seed, uint64_t offset, double a, double b) {
  VIEWS("cuda.normal", out);
  return tg_cu_random("cuda.normal", v[0], true, seed, offset, a, b);
}

#undef VIEWS

} // namespace

/* Named by src/ops/backend.c, the registration point (declared in ops/backend.h). */
const tg_backend tg_cuda_backend = {
    "cuda",
    fill,
    copy,
    unary,
    binary,
    where,
    reduce,
    gemm,
    gather_rows,
    scatter_add_rows,
    tg_cuda_index_select_rows,
    tg_cuda_index_add_rows,
    uniform,
    normal,
    /* device memory */
    &tg_cu_storage_allocator,
    tg_cu_memcpy,
    tg_cu_check_device,
    /* the fused LLTM's elementwise passes */
    tg_cuda_lltm_forward_pointwise,
    tg_cuda_lltm_backward_pointwise,
};
