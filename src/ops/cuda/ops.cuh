/* The CUDA primitives on views (view.cuh), shared by the backend table (backend.cu) and the
 * fused LLTM. Contracts as in ops/backend.h; every view on one device. */
#ifndef TG_CUDA_OPS_CUH
#define TG_CUDA_OPS_CUH

#include "view.cuh"

/* Views of n tensors that must all be on one CUDA device; TG_ERR_DEVICE naming op when one
 * is on the CPU or on another CUDA device. */
tg_status tg_cu_views_of(const char *op, int n, const tg_tensor *const *ts, tg_cu_view *views);
/* The same for n <= 16 tensors of which some may be NULL (their views are left as they are),
 * which must also share one floating dtype (TG_ERR_DTYPE otherwise): what the op kernels ask. */
tg_status tg_cu_views_floating(const char *op, int n, const tg_tensor *const *ts,
                               tg_cu_view *views);

tg_status tg_cu_fill(const char *op, const tg_cu_view &out, double value);
/* out = src converting the dtype; src has out's sizes (may be expanded). */
tg_status tg_cu_copy(const char *op, const tg_cu_view &out, const tg_cu_view &src);
tg_status tg_cu_unary_op(const char *op, tg_unary_kind kind, double a, double b,
                         const tg_cu_view &out, const tg_cu_view &x);
tg_status tg_cu_binary_op(const char *op, tg_binary_kind kind, double alpha, const tg_cu_view &out,
                          const tg_cu_view &a, const tg_cu_view &b);
/* out = cond != 0 ? a : b; cond of any dtype, a and b of out's. */
tg_status tg_cu_where(const char *op, const tg_cu_view &out, const tg_cu_view &cond,
                      const tg_cu_view &a, const tg_cu_view &b);
/* The reduction kind over dim (keepdim-form values; indices for a select kind, else NULL).
 * A sum is a cuBLAS gemv with a ones vector when x is a matrix cuBLAS can read in place,
 * else a kernel. */
tg_status tg_cu_reduce(const char *op, tg_reduce_kind kind, const tg_cu_view &values,
                       const tg_cu_view *indices, const tg_cu_view &x, int dim);
/* out = beta*out + alpha*(a @ b), 2-D, through cuBLAS. */
tg_status tg_cu_gemm(const char *op, const tg_cu_view &out, const tg_cu_view &a,
                     const tg_cu_view &b, double alpha, double beta);
tg_status tg_cu_gather_rows(const char *op, const tg_cu_view &out, const tg_cu_view &x,
                            const tg_cu_view &index);
tg_status tg_cu_scatter_add_rows(const char *op, const tg_cu_view &out, const tg_cu_view &src,
                                 const tg_cu_view &index);
tg_status tg_cu_random(const char *op, const tg_cu_view &out, bool normal, uint64_t seed,
                       uint64_t offset, double a, double b);

#endif
