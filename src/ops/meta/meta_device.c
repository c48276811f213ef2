/* The meta device: tensors with sizes, strides and dtypes but no data (PyTorch's meta
 * tensors). Every built-in op runs on it: its forward checks the inputs and makes outputs of
 * the right geometry, the drivers and kernels do nothing, and the allocator hands out
 * addresses that hold nothing while it counts the bytes: what a model's forward and
 * backward would allocate, known before running it.
 *
 * It is built as an out-of-tree device would be: only tg's public headers, registered by
 * name with tg_device_register (src/ops/device_registry.c asks for it on first use). */
#include "ops/meta/meta_device.h"

#include <stdatomic.h>
#include <stdint.h>

#include "tg/device.h"

/* ---- memory: addresses without memory ---- */

/* Non-canonical on x86-64 and unmapped elsewhere: reading through one faults at once, in
 * sanitizer builds too (a real address could lie in a sanitizer's shadow). Storages get
 * distinct, 64-byte aligned ranges so that overlap checks see them apart. */
#define META_ADDRESS_BASE ((uintptr_t)0xdead000000000000u)

/* Atomic: tensors may be made on meta from several threads at once. */
static _Atomic uintptr_t next_address = META_ADDRESS_BASE;
static _Atomic size_t allocated_bytes, peak_bytes;
static _Atomic int64_t allocations;

static void *meta_alloc(void *ctx, size_t nbytes) {
  (void)ctx;
  if (nbytes > SIZE_MAX / 4) return NULL;
  size_t span = ((nbytes + 63) & ~(size_t)63) + 64; /* an empty storage gets its own address */
  uintptr_t p = atomic_fetch_add(&next_address, span);
  if (p > UINTPTR_MAX - span) return NULL; /* 2^60 bytes handed out: not in this process */
  size_t now = atomic_fetch_add(&allocated_bytes, nbytes) + nbytes;
  size_t peak = atomic_load(&peak_bytes);
  while (now > peak && !atomic_compare_exchange_weak(&peak_bytes, &peak, now)) {
  }
  atomic_fetch_add(&allocations, 1);
  return (void *)p;
}

static void meta_free(void *ctx, void *ptr, size_t nbytes) {
  (void)ctx, (void)ptr;
  atomic_fetch_sub(&allocated_bytes, nbytes);
}

static const tg_allocator meta_allocator = {"meta", meta_alloc, meta_free, NULL};

/* Into meta: nothing to write (tg_to(t, meta) keeps the geometry). Out of meta: there is
 * nothing to read. */
static tg_status meta_copy_bytes(const char *op, void *dst, tg_device dst_device, const void *src,
                                 tg_device src_device, size_t nbytes) {
  (void)dst, (void)src, (void)src_device, (void)nbytes;
  if (dst_device.type == TG_META) return TG_OK;
  return tg_set_error(TG_ERR_UNSUPPORTED, "%s: a meta tensor has no data to copy to %s", op,
                      tg_device_type_name(dst_device.type));
}

/* ---- drivers and kernels: the geometry was made by the op; nothing to compute ---- */

static tg_status meta_fill(tg_tensor *out, double value) {
  (void)out, (void)value;
  return TG_OK;
}
static tg_status meta_copy(tg_tensor *out, const tg_tensor *src) {
  (void)out, (void)src;
  return TG_OK;
}
static tg_status meta_unary(int kind, double a, double b, tg_tensor *out, const tg_tensor *x) {
  (void)kind, (void)a, (void)b, (void)out, (void)x;
  return TG_OK;
}
static tg_status meta_binary(int kind, double alpha, tg_tensor *out, const tg_tensor *x,
                             const tg_tensor *y) {
  (void)kind, (void)alpha, (void)out, (void)x, (void)y;
  return TG_OK;
}
static tg_status meta_where(tg_tensor *out, const tg_tensor *cond, const tg_tensor *x,
                            const tg_tensor *y) {
  (void)out, (void)cond, (void)x, (void)y;
  return TG_OK;
}
static tg_status meta_reduce(int kind, tg_tensor *values, tg_tensor *indices, const tg_tensor *x,
                             int dim) {
  (void)kind, (void)values, (void)indices, (void)x, (void)dim;
  return TG_OK;
}
static tg_status meta_gemm(tg_tensor *out, const tg_tensor *a, const tg_tensor *b, double alpha,
                           double beta) {
  (void)out, (void)a, (void)b, (void)alpha, (void)beta;
  return TG_OK;
}
static tg_status meta_random(tg_tensor *out, uint64_t seed, uint64_t offset, double a, double b) {
  (void)out, (void)seed, (void)offset, (void)a, (void)b;
  return TG_OK;
}

static const tg_device_drivers meta_drivers = {
    .fill = meta_fill,
    .copy = meta_copy,
    .unary = meta_unary,
    .binary = meta_binary,
    .where = meta_where,
    .reduce = meta_reduce,
    .gemm = meta_gemm,
    .uniform = meta_random,
    .normal = meta_random,
};

static tg_status meta_kernel_noop(int n, tg_tensor *const *tensors) {
  (void)n, (void)tensors;
  return TG_OK;
}

/* Every op kernel: whatever an op's kernel would compute, meta has nothing to compute. */
static tg_kernel_fn meta_kernel(const char *name) {
  (void)name;
  return meta_kernel_noop;
}

static const tg_device_ops meta_device = {
    .abi = TG_DEVICE_ABI,
    .name = "meta",
    .flags = TG_DEVICE_NO_DATA,
    .allocator = &meta_allocator,
    .copy_bytes = meta_copy_bytes,
    .check_device = NULL, /* one meta device: every index names it */
    .drivers = &meta_drivers,
    .kernel = meta_kernel,
};

tg_status tg__meta_device_register(void) {
  tg_device_type type;
  tg_status st = tg_device_register(&meta_device, &type);
  if (st == TG_OK && type != TG_META)
    return tg_set_error(TG_ERR_STATE, "meta device registered as type %d, not TG_META", (int)type);
  return st;
}

tg_status tg_meta_memory_stats_get(tg_meta_memory_stats *out) {
  if (!out) return tg_set_error(TG_ERR_ARGUMENT, "tg_meta_memory_stats_get: out is NULL");
  *out = (tg_meta_memory_stats){atomic_load(&allocated_bytes), atomic_load(&peak_bytes),
                                atomic_load(&allocations)};
  return TG_OK;
}

void tg_meta_memory_stats_reset(void) {
  atomic_store(&peak_bytes, atomic_load(&allocated_bytes));
  atomic_store(&allocations, 0);
}
