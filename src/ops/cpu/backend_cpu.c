/* The CPU device: its memory, the generic drivers and the ops' kernels, implemented in
 * src/ops/cpu/cpu_*.c. */
#include <string.h>

#include "ops/cpu/cpu_internal.h"
#include "tensor/host_memory.h"

/* ---- device memory ---- */

/* 64-byte aligned so vector loads and BLIS packing never straddle cache lines. Freed blocks
 * wait in the host cache for the next storage of their size (a training loop's temporaries
 * are the same every step). nbytes is the storage's capacity both times. */
static void *cpu_alloc(void *ctx, size_t nbytes) {
  (void)ctx;
  return tg__host_cached_alloc(nbytes);
}
static void cpu_free(void *ctx, void *ptr, size_t nbytes) {
  (void)ctx;
  tg__host_cached_free(ptr, nbytes);
}
static const tg_allocator cpu_allocator = {"cpu", cpu_alloc, cpu_free, NULL};

/* Host to host: the only copy a CPU storage needs (other devices copy to and from it). */
static tg_status cpu_copy_bytes(const char *op, void *dst, tg_device dst_device, const void *src,
                                tg_device src_device, size_t nbytes) {
  if (dst_device.type != TG_CPU || src_device.type != TG_CPU)
    return tg_set_error(TG_ERR_DEVICE, "%s: a device copy routed to the CPU backend", op);
  if (nbytes > 0) memcpy(dst, src, nbytes);
  return TG_OK;
}

/* There is one host: any index names it (as before the hook existed). */
static tg_status cpu_check_device(const char *op, tg_device device) {
  (void)op, (void)device;
  return TG_OK;
}

/* The generic drivers (every built-in op is written over them). */
const tg_backend tg_cpu_backend = {
    .fill = tg_cpu_fill,
    .copy = tg_cpu_copy,
    .unary = tg_cpu_unary,
    .binary = tg_cpu_binary,
    .where = tg_cpu_where,
    .reduce = tg_cpu_reduce,
    .gemm = tg_cpu_gemm,
    .uniform = tg_cpu_uniform,
    .normal = tg_cpu_normal,
};

/* The ops' kernels, one per TG_OP_KERNEL and TG_OP_FAST_KERNEL line (each defined next to its
 * implementation). */
static tg_kernel_fn cpu_kernel(const char *name) {
#define TG_OP_KERNEL(op, kernel)                                                                   \
  if (strcmp(name, #op "." #kernel) == 0) return tg__kernel_##op##_##kernel##_cpu;
#define TG_OP_FAST_KERNEL(op, kernel) TG_OP_KERNEL(op, kernel)
#include "ops/op_kernels.h"
#undef TG_OP_FAST_KERNEL
#undef TG_OP_KERNEL
  return NULL;
}

const tg_device_ops tg_cpu_device = {
    .abi = TG_DEVICE_ABI,
    .name = "cpu",
    .allocator = &cpu_allocator,
    .copy_bytes = cpu_copy_bytes,
    .check_device = cpu_check_device,
    .drivers = &tg_cpu_backend,
    .kernel = cpu_kernel,
};
