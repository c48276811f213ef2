/* The per-device primitive kernels every generic op is built from.
 *
 * Generic ops (src/ops/ *.c) validate arguments, compute output shapes, allocate outputs
 * and then call these primitives on the device of their inputs. A device backend (CPU in
 * src/ops/cpu/, CUDA in src/ops/cuda/) implements every entry. Unless stated, primitives:
 *  - receive tensors that all live on the backend's device, already validated;
 *  - accept any strides (including stride 0 from expand) and offsets for inputs;
 *  - write outputs with any strides without internal overlap;
 *  - allow an output to be the same tensor (same geometry) as an input (in-place);
 *  - return TG_OK, or record an error with tg_set_error and return its code. */
#ifndef TG_BACKEND_H
#define TG_BACKEND_H

#include "tg/tensor.h"

/* The pointwise kinds, generated from their lists (the math: ops/pointwise_math.h). */
typedef enum tg_unary_kind {
#define TG_UNARY_KIND(KIND, name, cost) TG_UNARY_##KIND,
#include "ops/def/unary.def"
  TG_NUM_UNARY
} tg_unary_kind;

typedef enum tg_binary_kind {
#define TG_BINARY_KIND(KIND, name) TG_BINARY_##KIND,
#include "ops/def/binary.def"
  TG_NUM_BINARY
} tg_binary_kind;

/* The reduction kinds, generated from their list (ops/def/reduction.def). */
typedef enum tg_reduce_kind {
#define TG_REDUCE_KIND(KIND, name, how) TG_REDUCE_##KIND,
#include "ops/def/reduction.def"
  TG_NUM_REDUCE
} tg_reduce_kind;

typedef struct tg_backend {
  const char *name;
  /* out[...] = value. out: any dtype. */
  tg_status (*fill)(tg_tensor *out, double value);
  /* out = src elementwise; same sizes (src may be an expanded view); converts dtype. */
  tg_status (*copy)(tg_tensor *out, const tg_tensor *src);
  /* out = f(x); out and x have the same sizes and a floating dtype (x's dtype == out's). */
  tg_status (*unary)(tg_unary_kind kind, double a, double b, tg_tensor *out, const tg_tensor *x);
  /* out = a (op) b; a and b already expanded to out's sizes; same floating dtype. */
  tg_status (*binary)(tg_binary_kind kind, double alpha, tg_tensor *out, const tg_tensor *a,
                      const tg_tensor *b);
  /* out = cond != 0 ? a : b elementwise (a NaN cond counts as nonzero, as in a bool cast);
   * cond, a and b already expanded to out's sizes; a, b and out share one dtype (F32, F64
   * or I64), cond has any dtype. */
  tg_status (*where)(tg_tensor *out, const tg_tensor *cond, const tg_tensor *a, const tg_tensor *b);
  /* values = the reduction of x over dim; values has x's ndim with sizes[dim] == 1
   * (keepdim form), x is floating, values has x's dtype. A SUM kind takes indices NULL (an
   * empty dim sums to 0); a SELECT kind (max, min) also writes the I64 index of the picked
   * element into indices (keepdim form): the first index wins ties, NaN propagates (a NaN
   * is picked), an empty dim is an error. */
  tg_status (*reduce)(tg_reduce_kind kind, tg_tensor *values, tg_tensor *indices,
                      const tg_tensor *x, int dim);
  /* out = beta*out + alpha*(a @ b) for 2-D a [m,k], b [k,n], out [m,n], any strides.
   * beta == 0 means out's old contents are ignored (NaN-safe). k == 0 gives beta*out. */
  tg_status (*gemm)(tg_tensor *out, const tg_tensor *a, const tg_tensor *b, double alpha,
                    double beta);
  /* out[i] = x[i, index[i]] for 2-D x [n, c], I64 index [n], out [n]. Indices are checked
   * by the caller. */
  tg_status (*gather_rows)(tg_tensor *out, const tg_tensor *x, const tg_tensor *index);
  /* out[i, index[i]] += src[i] for out [n, c], src [n], I64 index [n]. */
  tg_status (*scatter_add_rows)(tg_tensor *out, const tg_tensor *src, const tg_tensor *index);
  /* out[i, :] = x[index[i], :] for x [n, d], I64 index [m] (in [0, n): checked by the
   * caller), out [m, d] (embedding's forward). */
  tg_status (*index_select_rows)(tg_tensor *out, const tg_tensor *x, const tg_tensor *index);
  /* out[index[i], :] += src[i, :] for out [n, d], src [m, d], I64 index [m] (checked by the
   * caller); repeated indices add up, in index order on the CPU (deterministic), by atomics
   * on CUDA (embedding's backward). */
  tg_status (*index_add_rows)(tg_tensor *out, const tg_tensor *src, const tg_tensor *index);
  /* Fills out (contiguous, floating) from Philox(seed, offset + i): uniform in [a, b) or
   * normal with mean a, std b. */
  tg_status (*uniform)(tg_tensor *out, uint64_t seed, uint64_t offset, double a, double b);
  tg_status (*normal)(tg_tensor *out, uint64_t seed, uint64_t offset, double a, double b);

  /* ---- device memory: the only way anything reaches a device's memory ---- */
  /* The default storage allocator (what tg_get_allocator gives unless one is installed).
   * It allocates on the current device: call check_device first. */
  const tg_allocator *allocator;
  /* Copies nbytes between the host and this device, or between devices of this type.
   * Storages keep it (tg_storage.copy_bytes) so the tensor layer can read them. */
  tg_status (*copy_bytes)(const char *op, void *dst, tg_device dst_device, const void *src,
                          tg_device src_device, size_t nbytes);
  /* Checks that device exists (initialising the device lazily) and makes it current;
   * records TG_ERR_DEVICE naming op otherwise. */
  tg_status (*check_device)(const char *op, tg_device device);

  /* ---- the fused LLTM's elementwise passes (src/ops/lltm.c runs the GEMMs around them;
   * the cell math is ops/lltm_cell.h). B = batch, S = state; F32 or F64. ---- */
  /* gates [B, 3S] (unit column stride) holds X @ W^T on entry; adds bias ([3S] or [1, 3S]),
   * writes new_h and new_cell [B, S] from old_cell [B, S] and overwrites gates with the
   * activations (input gate, output gate, candidate) that backward reads. */
  tg_status (*lltm_forward_pointwise)(tg_tensor *gates, const tg_tensor *bias,
                                      const tg_tensor *old_cell, tg_tensor *new_h,
                                      tg_tensor *new_cell);
  /* From grad_h, grad_cell [B, S] (NULL = zero), the activations in gates and old_cell:
   * writes the gate gradients d_gates [B, 3S], d_old_cell [B, S] and d_bias [1, 3S], the
   * column sums of d_gates (NULL = not wanted; d_gates always is). */
  tg_status (*lltm_backward_pointwise)(const tg_tensor *grad_h, const tg_tensor *grad_cell,
                                       const tg_tensor *gates, const tg_tensor *old_cell,
                                       tg_tensor *d_gates, tg_tensor *d_old_cell,
                                       tg_tensor *d_bias);
} tg_backend;

/* The backend of a device type: NULL with TG_ERR_DEVICE recorded (naming op) when that
 * device is not built in (for CUDA: when its module cannot be loaded, ops/cuda_module.h).
 * The one registration point is src/ops/backend.c. */
const tg_backend *tg__backend(const char *op, tg_device device);

/* Whether the loaded CUDA module is the CPU emulation (libtg_cuda_emu.so, the tests'):
 * what the JIT compiles an extension's .cu sources for. Loads the module (ops/cuda_module.c). */
bool tg__cuda_is_emulated(void);

/* The backend tables (src/ops/cpu/backend_cpu.c, src/ops/cuda/backend.cu). Ops reach them
 * through tg__backend; only src/ops/backend.c, the CUDA module's entry (module_entry.cu) and
 * the backends' tests name them (tg_cuda_backend is inside the CUDA module, not libtg). */
extern const tg_backend tg_cpu_backend;
extern const tg_backend tg_cuda_backend;

#endif
