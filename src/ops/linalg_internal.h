/* What the matrix-product files share (src/ops/linalg.c, bmm.c, matmul.c). */
#ifndef TG_LINALG_INTERNAL_H
#define TG_LINALG_INTERNAL_H

#include "tg/tensor.h"

/* The op "bmm" without the front end's checks: a [*, m, k] @ b [*, k, n], batch dims equal
 * (stride 0 allowed), both floating, alike and on one device. Recorded. */
tg_tensor *tg__bmm(const tg_tensor *a, const tg_tensor *b);

#endif
