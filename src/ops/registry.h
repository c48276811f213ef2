/* Internal view of the op registry: ids of the built-in ops and their kernels. */
#ifndef TG_REGISTRY_H
#define TG_REGISTRY_H

#include "tg/autograd.h"
#include "tg/ops.h" /* the registry functions are declared there */

#define TG_OP(name, nin, nout, flags) TG_OP_ID_##name,
#define TG_OP_NOGRAD(name, nin, nout, flags) TG_OP_ID_##name,
#define TG_OP_INPLACE_OF(name, base, nin, nout, flags) TG_OP_ID_##name,
typedef enum tg_op_id {
#include "ops/ops.def"
  TG_NUM_BUILTIN_OPS
} tg_op_id;
#undef TG_OP
#undef TG_OP_NOGRAD
#undef TG_OP_INPLACE_OF

#define TG_OP(name, nin, nout, flags)                                                              \
  tg_status tg__fwd_##name(tg_ctx *, const tg_tensor *const *, tg_tensor **);                      \
  tg_status tg__bwd_##name(tg_ctx *, const tg_tensor *const *, tg_tensor **);
#define TG_OP_NOGRAD(name, nin, nout, flags)                                                       \
  tg_status tg__fwd_##name(tg_ctx *, const tg_tensor *const *, tg_tensor **);
#define TG_OP_INPLACE_OF(name, base, nin, nout, flags)                                             \
  tg_status tg__fwd_##name(tg_ctx *, const tg_tensor *const *, tg_tensor **);
#include "ops/ops.def"
#undef TG_OP
#undef TG_OP_NOGRAD
#undef TG_OP_INPLACE_OF

/* Sample inputs (tg's OpInfo), one function per op: src/testing/samples/, the in-place ops'
 * from their base op's (samples/inplace.c). Declared for every entry, so that a built-in op
 * without samples does not link. */
#define TG_OP(name, nin, nout, flags)                                                              \
  int tg__samples_##name(const tg_sample_request *, tg_sample *);
#define TG_OP_NOGRAD(name, nin, nout, flags) TG_OP(name, nin, nout, flags)
#define TG_OP_INPLACE_OF(name, base, nin, nout, flags) TG_OP(name, nin, nout, flags)
#include "ops/ops.def"
#undef TG_OP
#undef TG_OP_NOGRAD
#undef TG_OP_INPLACE_OF

extern const tg_op_desc tg__builtin_ops[TG_NUM_BUILTIN_OPS];
#define TG__OP(name) (&tg__builtin_ops[TG_OP_ID_##name])

/* Run-time registration (src/ext/ and tg_op_register): all of descs[0..n) or none, each
 * checked (tg__op_validate) and new; registered[k] gets the registry's copy of descs[k]. who
 * names the caller in errors. */
tg_status tg__op_validate(const char *who, const tg_op_desc *desc);
tg_status tg__op_register_all(const char *who, int n, const tg_op_desc *const *descs,
                              const tg_op_desc **registered);
/* Removes registry copies made by tg__op_register_all: all or, while a tape node of one of
 * them is alive, none (TG_ERR_STATE). */
tg_status tg__op_unregister_all(const char *who, int n, const tg_op_desc *const *ops);

/* Shorthands for op front ends. */
#define TG__IN(...)                                                                                \
  (int)(sizeof((const tg_tensor *[]){__VA_ARGS__}) / sizeof(tg_tensor *)),                         \
      (const tg_tensor *const[]) {                                                                 \
    __VA_ARGS__                                                                                    \
  }
#define TG__SC(...)                                                                                \
  (int)(sizeof((const double[]){__VA_ARGS__}) / sizeof(double)), (const double[]) { __VA_ARGS__ }
#define TG__NO_SC 0, NULL
/* Integer parameters for tg_apply_ex / tg_apply1_ex, after the scalars. */
#define TG__INTS(...)                                                                              \
  (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (const int64_t[]) { __VA_ARGS__ }

#endif
