/* ops.def with only its TG_OP_KERNEL lines visible: define TG_OP_KERNEL(name, kernel),
 * include this file, undefine it. Deliberately without an include guard. */
#define TG_OP(name, nin, nout, flags)
#define TG_OP_NOGRAD(name, nin, nout, flags)
#define TG_OP_INPLACE_OF(name, base, nin, nout, flags)
#include "ops/ops.def"
#undef TG_OP
#undef TG_OP_NOGRAD
#undef TG_OP_INPLACE_OF
