/* The engine's arithmetic (autograd/grad_arith.h), implemented with ops and the backends. */
#include "autograd/grad_arith.h"
#include "ops/backend.h"
#include "ops/creation.h"
#include "tg/ops.h"

static tg_status add_into(const char *op, tg_tensor *out, const tg_tensor *a, const tg_tensor *b) {
  const tg_backend *be = tg__backend(op, out->storage->device);
  return be ? be->binary(TG_BINARY_ADD, 1.0, out, a, b) : tg_last_error();
}

static tg_status copy_into(const char *op, tg_tensor *out, const tg_tensor *src) {
  const tg_backend *be = tg__backend(op, out->storage->device);
  return be ? be->copy(out, src) : tg_last_error();
}

static tg_status fill(const char *op, tg_tensor *t, double value) {
  const tg_backend *be = tg__backend(op, t->storage->device);
  return be ? be->fill(t, value) : tg_last_error();
}

const tg_grad_arith tg__ops_grad_arith = {
    .add = tg_add,
    .zeros = tg_zeros,
    .ones_like = tg_ones_like,
    .empty = tg__empty_raw,
    .add_into = add_into,
    .copy_into = copy_into,
    .fill = fill,
};
