/* NumPy broadcasting of shapes. */
#include "broadcast.h"

bool tg__broadcast_shapes(const char *op, const char *a_name, int a_ndim, const int64_t *a_sizes,
                          const char *b_name, int b_ndim, const int64_t *b_sizes, int *out_ndim,
                          int64_t *out_sizes) {
  int n = a_ndim > b_ndim ? a_ndim : b_ndim;
  int64_t sizes[TG_MAX_DIMS];
  for (int d = n - 1; d >= 0; d--) {
    int da = d - (n - a_ndim), db = d - (n - b_ndim);
    int64_t sa = da >= 0 ? a_sizes[da] : 1, sb = db >= 0 ? b_sizes[db] : 1;
    if (!tg__check(sa == sb || sa == 1 || sb == 1, TG_ERR_SHAPE, op,
                   "%s is %s and %s is %s: sizes are not broadcastable at dim %d", a_name,
                   tg__dims_str(a_ndim, a_sizes), b_name, tg__dims_str(b_ndim, b_sizes), d))
      return false;
    sizes[d] = sa == 1 ? sb : sa;
  }
  *out_ndim = n;
  for (int d = 0; d < n; d++) out_sizes[d] = sizes[d];
  return true;
}

bool tg__broadcasts_to(int src_ndim, const int64_t *src_sizes, int dst_ndim,
                       const int64_t *dst_sizes) {
  if (src_ndim > dst_ndim) return false;
  for (int d = 1; d <= src_ndim; d++) {
    int64_t s = src_sizes[src_ndim - d], t = dst_sizes[dst_ndim - d];
    if (s != t && s != 1) return false;
  }
  return true;
}

bool tg__check_broadcasts_to(const char *op, const char *src_name, int src_ndim,
                             const int64_t *src_sizes, const char *dst_name, int dst_ndim,
                             const int64_t *dst_sizes) {
  return tg__check(tg__broadcasts_to(src_ndim, src_sizes, dst_ndim, dst_sizes), TG_ERR_SHAPE, op,
                   "%s is %s and %s is %s: %s does not broadcast to %s's sizes", src_name,
                   tg__dims_str(src_ndim, src_sizes), dst_name, tg__dims_str(dst_ndim, dst_sizes),
                   src_name, dst_name);
}

tg_tensor *tg__broadcast_view(const tg_tensor *t, int ndim, const int64_t *sizes) {
  int64_t strides[TG_MAX_DIMS];
  int lead = ndim - t->ndim;
  for (int d = 0; d < ndim; d++) {
    int s = d - lead;
    strides[d] = s < 0 || (t->sizes[s] == 1 && sizes[d] != 1) ? 0 : t->strides[s];
  }
  return tg__tensor_new(t->storage, t->offset, ndim, sizes, strides, t->dtype);
}
