/* tg — device types: what a device provides, how one is registered, which ops it runs.
 *
 * A device type is a table of functions (tg_device_ops): its memory (an allocator and a byte
 * copy to and from the host), optionally the generic drivers every built-in op is written
 * over (fill, copy, pointwise, reduction, GEMM, random fills), and optionally the kernels
 * of the ops that need their own (the fused LLTM, embedding, cross-entropy): the op names
 * the kernel table it wants and the device hands it out by op name. A device may be partial:
 * an op it cannot run is TG_ERR_UNSUPPORTED naming op and device (tg_op_supported asks
 * first), never a NULL call.
 *
 * Built in: cpu; cuda (a module loaded on first use, when the install has one); meta (shapes,
 * strides and dtypes without data, registered through tg_device_register like any
 * out-of-tree device: src/ops/meta/). A program or extension registers its own by name, the
 * C form of PyTorch's PrivateUse1; tensors move to and from it with tg_to. The guide:
 * docs/adding-a-device.md. */
#ifndef TG_DEVICE_H
#define TG_DEVICE_H

#include "autograd.h"
#include "tensor.h"
#include "types.h"

TG_API_BEGIN
#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever tg_device_ops or tg_device_drivers change shape or meaning. */
#define TG_DEVICE_ABI 1u

/* The families of the generic drivers' kinds. A kind is an int in [0, tg_kind_count(f)),
 * named by tg_kind_name (e.g. unary "exp", binary "add", reduce "sum"); the numbering is
 * this build's (src/ops/def/unary.def, binary.def, reduction.def), so a device maps kinds by
 * name when it registers rather than by number. */
typedef enum tg_kind_family { TG_KIND_UNARY, TG_KIND_BINARY, TG_KIND_REDUCE } tg_kind_family;
int tg_kind_count(tg_kind_family family);
const char *tg_kind_name(tg_kind_family family, int kind); /* NULL outside the family */

/* The generic drivers. Tensors passed all live on the device, are validated and accept any
 * strides; an output may be an input (same geometry, in place). Each returns TG_OK or a
 * recorded error. A device provides all of them or none (tg_device_register checks). */
typedef struct tg_device_drivers {
  /* out[...] = value; out has any dtype. */
  tg_status (*fill)(tg_tensor *out, double value);
  /* out = src elementwise; same sizes (src may be an expanded view); converts dtype. */
  tg_status (*copy)(tg_tensor *out, const tg_tensor *src);
  /* out = f_kind(x; a, b); same sizes, one dtype (floating, or I64 for the integer kinds). */
  tg_status (*unary)(int kind, double a, double b, tg_tensor *out, const tg_tensor *x);
  /* out = x (kind) y, with alpha for add/sub; x and y already expanded to out's sizes. */
  tg_status (*binary)(int kind, double alpha, tg_tensor *out, const tg_tensor *x,
                      const tg_tensor *y);
  /* out = cond != 0 ? x : y (NaN counts as nonzero); all expanded to out's sizes. */
  tg_status (*where)(tg_tensor *out, const tg_tensor *cond, const tg_tensor *x, const tg_tensor *y);
  /* values (keepdim form, sizes[dim] == 1) = the reduction of x over dim; indices (I64, keepdim
   * form) gets the picked element's index for the selecting kinds (max, min), NULL for sums:
   * first index wins ties, NaN propagates, an empty dim is an error for those. */
  tg_status (*reduce)(int kind, tg_tensor *values, tg_tensor *indices, const tg_tensor *x, int dim);
  /* out = beta*out + alpha*(a @ b), 2-D, any strides; beta == 0 ignores out (NaN-safe). */
  tg_status (*gemm)(tg_tensor *out, const tg_tensor *a, const tg_tensor *b, double alpha,
                    double beta);
  /* Fills contiguous floating out from Philox(seed, offset + i): uniform in [a, b), or normal
   * with mean a and standard deviation b. */
  tg_status (*uniform)(tg_tensor *out, uint64_t seed, uint64_t offset, double a, double b);
  tg_status (*normal)(tg_tensor *out, uint64_t seed, uint64_t offset, double a, double b);
} tg_device_drivers;

/* An op's device kernel: tensors[0..n) in the order its TG_OP_KERNEL line documents (an
 * optional one may be NULL), all on the device, validated by the op. */
typedef tg_status (*tg_kernel_fn)(int n, tg_tensor *const *tensors);

/* The device has no data: tensors have sizes, strides and dtypes only (meta). Ops skip the
 * checks that read values (indices in range) and reading values is an error. */
#define TG_DEVICE_NO_DATA 1u

typedef struct tg_device_ops {
  unsigned abi; /* TG_DEVICE_ABI */
  const char *name;
  unsigned flags; /* TG_DEVICE_* */
  /* The default storage allocator (tg_set_allocator can replace it). Required. */
  const tg_allocator *allocator;
  /* Copies nbytes between the host and this device, or within this device type. Required. */
  tg_status (*copy_bytes)(const char *op, void *dst, tg_device dst_device, const void *src,
                          tg_device src_device, size_t nbytes);
  /* Checks that the device index exists (initialising it lazily) and makes it current;
   * records TG_ERR_DEVICE naming op otherwise. NULL: every index is valid. */
  tg_status (*check_device)(const char *op, tg_device device);
  /* The generic drivers, or NULL: then only the ops this device has kernels for run on it. */
  const tg_device_drivers *drivers;
  /* This device's kernel named name ("<op>.<kernel>", e.g. "embedding.index_select_rows"),
   * or NULL. The built-in ops' kernels and their arguments are listed with the ops
   * (TG_OP_KERNEL lines of src/ops/def/ *.def). NULL: the device has none. */
  tg_kernel_fn (*kernel)(const char *name);
} tg_device_ops;

/* Registers a device type: *type gets its number (at most TG_NUM_DEVICE_TYPES types in all).
 * The name must be new and of lowercase letters, digits and '_' (it is how tg_device_parse
 * and tg_to_string spell the device); ops is kept, not copied. Not thread-safe: register
 * before other threads use tg. */
tg_status tg_device_register(const tg_device_ops *ops, tg_device_type *type);
/* The device type named name: TG_ERR_DEVICE (and TG_NUM_DEVICE_TYPES) when there is none. */
tg_status tg_device_type_find(const char *name, tg_device_type *type);
/* "cpu", "cuda:1", "meta", "mydev:0" -> a device. */
tg_status tg_device_parse(const char *text, tg_device *device);
/* The functions of a registered device type; NULL (TG_ERR_DEVICE) for an unknown one. For
 * cuda this loads the module. */
const tg_device_ops *tg_device_ops_of(tg_device_type type);

/* Installs an allocator for a device type (NULL restores the default); returns the previous.
 * An unregistered type is TG_ERR_ARGUMENT. */
const tg_allocator *tg_set_allocator(tg_device_type type, const tg_allocator *allocator);
const tg_allocator *tg_get_allocator(tg_device_type type);

/* Whether op runs on device's type: the op has a forward for it (tg_op_desc.forward), or it
 * is a built-in op, the device has the generic drivers and every kernel table the op needs.
 * Sets no error. Calling an op that is not supported is TG_ERR_UNSUPPORTED naming both. */
bool tg_op_supported(const tg_op_desc *op, tg_device device);

/* The bytes the meta device's allocator hands out now, and the most it held at once since
 * the last reset: what a forward and backward would allocate, counted without running. */
typedef struct tg_meta_memory_stats {
  size_t allocated_bytes;
  size_t peak_bytes;
  int64_t allocations; /* storages made since the reset */
} tg_meta_memory_stats;
tg_status tg_meta_memory_stats_get(tg_meta_memory_stats *out);
void tg_meta_memory_stats_reset(void); /* peak = now; allocations = 0 */

#ifdef __cplusplus
}
#endif
TG_API_END

#endif
