/* How ops reach devices: the generic drivers every built-in op is written over, the op
 * kernels a device may have, and the device registry behind them.
 *
 * Generic ops (src/ops/ *.c) validate arguments, compute output shapes, allocate outputs
 * and then call the drivers (tg_device_drivers, tg/device.h, called tg_backend here) of the
 * device of their inputs; an op that needs more (the fused LLTM, embedding, cross-entropy)
 * asks the device for its kernels by name (tg__kernel), declared by TG_OP_KERNEL lines next
 * to the op's entry (src/ops/def/ *.def). Devices: CPU in src/ops/cpu/, CUDA in
 * src/ops/cuda/, meta in src/ops/meta/; docs/adding-a-device.md. Unless stated, drivers and
 * kernels:
 *  - receive tensors that all live on the device, already validated;
 *  - accept any strides (including stride 0 from expand) and offsets for inputs;
 *  - write outputs with any strides without internal overlap;
 *  - allow an output to be the same tensor (same geometry) as an input (in-place);
 *  - return TG_OK, or record an error with tg_set_error and return its code. */
#ifndef TG_BACKEND_H
#define TG_BACKEND_H

#include "tg/device.h"
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

/* The generic drivers of one device (tg/device.h); their kinds are the enums above. */
typedef tg_device_drivers tg_backend;

/* The drivers of device's type: NULL with an error naming op when the type is unknown or not
 * built (TG_ERR_DEVICE) or has no drivers (TG_ERR_UNSUPPORTED). */
const tg_backend *tg__backend(const char *op, tg_device device);
/* The functions of device's type: NULL with TG_ERR_DEVICE naming op if it has none. */
const tg_device_ops *tg__device(const char *op, tg_device device);
/* tg__device, then the device's check_device (it exists, is initialised and current). */
const tg_device_ops *tg__device_ready(const char *op, tg_device device);
/* device's kernel named kernel ("<op>.<kernel>"): NULL with TG_ERR_UNSUPPORTED naming op and
 * the device when it has none. */
tg_kernel_fn tg__kernel(const char *op, const char *kernel, tg_device device);
/* device's kernel named kernel, or NULL (no error recorded) when it has none: for
 * TG_OP_FAST_KERNEL lines, whose ops then run their generic path. */
tg_kernel_fn tg__fast_kernel(const char *kernel, tg_device device);

/* The kernel functions the built-in devices define, one per TG_OP_KERNEL line and device
 * (each device's kernel lookup is generated from the same lines). */
#define TG_OP_KERNEL(name, kernel)                                                                 \
  tg_status tg__kernel_##name##_##kernel##_cpu(int n, tg_tensor *const *t);                        \
  tg_status tg__kernel_##name##_##kernel##_cuda(int n, tg_tensor *const *t);
#include "ops/op_kernels.h"
#undef TG_OP_KERNEL
/* ... and the CPU's TG_OP_FAST_KERNEL lines. */
#define TG_OP_FAST_KERNEL(name, kernel)                                                            \
  tg_status tg__kernel_##name##_##kernel##_cpu(int n, tg_tensor *const *t);
#include "ops/op_kernels.h"
#undef TG_OP_FAST_KERNEL

/* In a kernel: refuses a call with another number of tensors than its line documents. */
#define TG__KERNEL_ARITY(kernel, n, expected)                                                      \
  do {                                                                                             \
    if ((n) != (expected))                                                                         \
      return tg_set_error(TG_ERR_ARGUMENT, "%s: called with %d tensors, expected %d", kernel, (n), \
                          (expected));                                                             \
  } while (0)

/* Whether the loaded CUDA module is the CPU emulation (libtg_cuda_emu.so, the tests'):
 * what the JIT compiles an extension's .cu sources for. Loads the module (ops/cuda_module.c). */
bool tg__cuda_is_emulated(void);

/* The built-in device types this library has (src/ops/backend.c, compiled per library):
 * NULL for a type it does not have. The registry (src/ops/device_registry.c) asks once. For
 * CUDA that first ask loads the CUDA module (ops/cuda_module.h). */
const tg_device_ops *tg__builtin_device(tg_device_type type);

/* The built-in devices' tables: the CPU's (src/ops/cpu/backend_cpu.c), the CUDA one's
 * (src/ops/cuda/backend.cu: inside the CUDA module, not libtg; libtg reaches it through the
 * module's entry point) and their drivers, which the backends' tests call directly. */
extern const tg_device_ops tg_cpu_device;
extern const tg_backend tg_cpu_backend;
extern const tg_device_ops tg_cuda_device;
extern const tg_backend tg_cuda_backend;

#endif
