/* The CUDA device (tg/device.h, ops/backend.h): each driver and kernel checks that its
 * tensors share one CUDA device, takes their views and runs the view-level op. */
#include <string.h>

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

tg_status tg_cu_views_floating(const char *op, int n, const tg_tensor *const *ts,
                               tg_cu_view *views) {
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

tg_status unary(int kind, double a, double b, tg_tensor *out, const tg_tensor *x) {
  VIEWS("cuda.unary", out, x);
  return tg_cu_unary_op("cuda.unary", (tg_unary_kind)kind, a, b, v[0], v[1]);
}

tg_status binary(int kind, double alpha, tg_tensor *out, const tg_tensor *a, const tg_tensor *b) {
  VIEWS("cuda.binary", out, a, b);
  return tg_cu_binary_op("cuda.binary", (tg_binary_kind)kind, alpha, v[0], v[1], v[2]);
}

tg_status where(tg_tensor *out, const tg_tensor *cond, const tg_tensor *a, const tg_tensor *b) {
  VIEWS("cuda.where", out, cond, a, b);
  return tg_cu_where("cuda.where", v[0], v[1], v[2], v[3]);
}

tg_status reduce(int kind, tg_tensor *values, tg_tensor *indices, const tg_tensor *x, int dim) {
  if (!indices) {
    VIEWS("cuda.reduce", values, x);
    return tg_cu_reduce("cuda.reduce", (tg_reduce_kind)kind, v[0], NULL, v[1], dim);
  }
  VIEWS("cuda.reduce", values, indices, x);
  return tg_cu_reduce("cuda.reduce", (tg_reduce_kind)kind, v[0], &v[1], v[2], dim);
}

tg_status gemm(tg_tensor *out, const tg_tensor *a, const tg_tensor *b, double alpha, double beta) {
  VIEWS("cuda.gemm", out, a, b);
  return tg_cu_gemm("cuda.gemm", v[0], v[1], v[2], alpha, beta);
}

tg_status uniform(tg_tensor *out, uint64_t seed, uint64_t offset, double a, double b) {
  VIEWS("cuda.uniform", out);
  return tg_cu_random("cuda.uniform", v[0], false, seed, offset, a, b);
}

tg_status normal(tg_tensor *out, uint64_t seed, uint64_t offset, double a, double b) {
  VIEWS("cuda.normal", out);
  return tg_cu_random("cuda.normal", v[0], true, seed, offset, a, b);
}

} // namespace

/* ---- cross-entropy's kernels (TG_OP_KERNEL lines in src/ops/def/loss.def) ---- */
tg_status tg__kernel_cross_entropy_gather_rows_cuda(int n, tg_tensor *const *t) {
  TG__KERNEL_ARITY("cross_entropy.gather_rows", n, 3);
  VIEWS("cuda.gather_rows", t[0], t[1], t[2]);
  return tg_cu_gather_rows("cuda.gather_rows", v[0], v[1], v[2]);
}

tg_status tg__kernel_cross_entropy_scatter_add_rows_cuda(int n, tg_tensor *const *t) {
  TG__KERNEL_ARITY("cross_entropy.scatter_add_rows", n, 3);
  VIEWS("cuda.scatter_add_rows", t[0], t[1], t[2]);
  return tg_cu_scatter_add_rows("cuda.scatter_add_rows", v[0], v[1], v[2]);
}

#undef VIEWS

namespace {
/* The ops' kernels, one per TG_OP_KERNEL line (each defined next to its implementation). */
tg_kernel_fn kernel(const char *name) {
#define TG_OP_KERNEL(op, kernel)                                                                   \
  if (strcmp(name, #op "." #kernel) == 0) return tg__kernel_##op##_##kernel##_cuda;
#include "ops/op_kernels.h"
#undef TG_OP_KERNEL
  return NULL;
}
} // namespace

/* The generic drivers and the device's table (named by src/ops/backend.c). Positional:
 * C++17 has no designated initialisers; the order is tg/device.h's. */
const tg_backend tg_cuda_backend = {
    fill, copy, unary, binary, where, reduce, gemm, uniform, normal,
};

const tg_device_ops tg_cuda_device = {
    TG_DEVICE_ABI,      "cuda",           0,      &tg_cu_storage_allocator, tg_cu_memcpy,
    tg_cu_check_device, &tg_cuda_backend, kernel,
};
