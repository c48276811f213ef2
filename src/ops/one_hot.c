/* one_hot (include/tg/index.h): I64 zeros [*index, C] with a 1 added at each index along the
 * last dim, by the scatter_add op (src/ops/index.c), so it runs on every device with that
 * kernel. The indices are checked on the host first (and read there for C = max + 1). */
#include "ops/index_internal.h"
#include "ops/op_params.h"
#include "tensor/check.h"
#include "tensor/device_names.h"
#include "tensor/tensor_impl.h"
#include "tg/index.h"
#include "tg/ops.h"

/* num_classes, or max(index) + 1 for -1; -1 on error. */
static int64_t classes_of(const char *op, const tg_tensor *index, int64_t num_classes) {
  if (num_classes != -1) return num_classes;
  double max = 0.0;
  if (!tg__check(tg__numel(index->ndim, index->sizes) > 0, TG_ERR_SHAPE, op,
                 "index %s is empty: num_classes = -1 cannot be inferred from it",
                 tg__sizes_str(index)) ||
      !tg__check(tg__device_type_has_data(index->storage->device.type), TG_ERR_UNSUPPORTED, op,
                 "num_classes = -1 needs the index's values, which device %s does not hold",
                 tg_device_type_name(index->storage->device.type)))
    return -1;
  tg_tensor *m = tg_max(index);
  if (!m || tg_item(m, &max) != TG_OK) return -1;
  return max < 0 ? 0 : (int64_t)max + 1;
}

tg_tensor *tg_one_hot(const tg_tensor *index, int64_t num_classes) {
  static const char *op = "tg_one_hot";
  if (!tg__check_arg(op, "index", index) ||
      !tg__check(index->dtype == TG_I64, TG_ERR_DTYPE, op,
                 "index is %s; one_hot takes int64 (I64) class indices",
                 tg_dtype_name(index->dtype)) ||
      !tg__check(num_classes >= -1, TG_ERR_ARGUMENT, op,
                 "num_classes = %lld: must be >= 0, or -1 for max(index) + 1",
                 (long long)num_classes) ||
      !tg__check(index->ndim < TG_MAX_DIMS, TG_ERR_SHAPE, op,
                 "index has %d dims; the output would have %d (at most %d)", index->ndim,
                 index->ndim + 1, TG_MAX_DIMS))
    return NULL;
  const bool grad = tg_set_grad_enabled(false);
  tg_tensor *out = NULL;
  const int64_t c = classes_of(op, index, num_classes);
  if (c >= 0 && tg__check_indices(op, "index", index, c, "the classes")) {
    int64_t sizes[TG_MAX_DIMS];
    for (int d = 0; d < index->ndim; d++) sizes[d] = index->sizes[d];
    sizes[index->ndim] = 1;
    const tg_options opts = {TG_I64, index->storage->device, false};
    tg_tensor *column = tg_reshape(index, index->ndim + 1, sizes);
    tg_tensor *ones = column ? tg_ones(index->ndim + 1, sizes, opts) : NULL;
    sizes[index->ndim] = c;
    out =
        ones ? tg__scatter_add_into_zeros(index->ndim + 1, sizes, index->ndim, column, ones) : NULL;
  }
  tg_set_grad_enabled(grad);
  return out;
}
