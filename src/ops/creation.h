/* Storages and tensors on a device, for ops and the engine (src/ops/creation.c). */
#ifndef TG_OPS_CREATION_H
#define TG_OPS_CREATION_H

#include "autograd/grad_arith.h"
#include "tensor/tensor_impl.h"

/* The engine's arithmetic as ops implement it (src/ops/grad_arith.c); installed by the
 * first storage made here. */
extern const tg_grad_arith tg__ops_grad_arith;

/* Storage for nbytes on device via that device's allocator (refcount 1). */
tg_storage *tg__storage_new(size_t nbytes, tg_device device);
/* Uninitialised contiguous tensor, refcount 1, NOT registered in a scope. */
tg_tensor *tg__empty_raw(int ndim, const int64_t *sizes, tg_dtype dtype, tg_device device);
/* The same, with errors naming op instead of tg_empty. */
tg_tensor *tg__empty_op(const char *op, int ndim, const int64_t *sizes, tg_dtype dtype,
                        tg_device device);
/* A contiguous host copy of t in t's dtype (refcount 1, NOT in a scope); NULL on error
 * (src/ops/copy.c). */
tg_tensor *tg__host_contiguous(const char *op, const tg_tensor *t);
/* True when value can be written into an element of dtype, as PyTorch decides for fill_,
 * full and scalar_tensor: F32 refuses a finite value beyond FLT_MAX (inf and NaN pass), I64
 * refuses NaN, inf and values outside [-2^63, 2^63) (others truncate toward zero). False
 * with TG_ERR_ARGUMENT naming op, arg and value (src/ops/creation.c). */
bool tg__check_value_fits(const char *op, const char *arg, tg_dtype dtype, double value);

#endif
