/* tg_npy_serialize and tg_npy_save: numpy 1.24's header byte for byte, then the elements in
 * C order, little-endian, whatever t's strides and device (tg__io_host_le_bytes). */
#include <stdio.h>
#include <string.h>

#include "io/file_io.h"
#include "io/host_bytes.h"
#include "io/npy.h"
#include "tensor/check.h"
#include "tensor/error_impl.h"
#include "tensor/host_memory.h"
#include "tg/io.h"

size_t tg__npy_wrap_header(const char *dict, size_t len, char *buf, size_t cap) {
  size_t hlen = len + 1; /* with the '\n' */
  size_t field = 2;      /* bytes of the length field: version 1.0 */
  size_t pad = TG__NPY_ALIGN - (TG__NPY_MAGIC_LEN + 2 + field + hlen) % TG__NPY_ALIGN;
  if (hlen + pad > 65535) {
    field = 4; /* version 2.0 */
    pad = TG__NPY_ALIGN - (TG__NPY_MAGIC_LEN + 2 + field + hlen) % TG__NPY_ALIGN;
  }
  size_t total = TG__NPY_MAGIC_LEN + 2 + field + hlen + pad;
  if (total > cap) return total;
  unsigned char *out = (unsigned char *)buf;
  memcpy(out, TG__NPY_MAGIC, TG__NPY_MAGIC_LEN);
  out[6] = field == 2 ? 1 : 2;
  out[7] = 0;
  size_t value = hlen + pad;
  for (size_t b = 0; b < field; b++) out[8 + b] = (unsigned char)(value >> (8 * b));
  size_t at = 8 + field;
  memcpy(out + at, dict, len);
  memset(out + at + len, ' ', pad);
  out[total - 1] = '\n';
  return total;
}

size_t tg__npy_write_header(tg_dtype dtype, int ndim, const int64_t *sizes, char *buf, size_t cap) {
  char dict[TG_MAX_DIMS * 22 + 128];
  int len = snprintf(dict, sizeof dict, "{'descr': '<%s', 'fortran_order': False, 'shape': (",
                     tg__npy_kind[dtype]);
  for (int d = 0; d < ndim; d++)
    len += snprintf(dict + len, sizeof dict - (size_t)len, "%s%lld", d ? ", " : "",
                    (long long)sizes[d]);
  len += snprintf(dict + len, sizeof dict - (size_t)len, "%s), }", ndim == 1 ? "," : "");
  if (ndim > 0) { /* numpy's room for the first dim to grow */
    int digits = snprintf(NULL, 0, "%lld", (long long)sizes[0]);
    len +=
        snprintf(dict + len, sizeof dict - (size_t)len, "%*s", TG__NPY_GROWTH_DIGITS - digits, "");
  }
  return tg__npy_wrap_header(dict, (size_t)len, buf, cap);
}

static void *serialize(const char *fn, const tg_tensor *t, size_t *nbytes) {
  if (nbytes) *nbytes = 0;
  if (!tg__check_arg(fn, "t", t)) return NULL;
  if (!nbytes) {
    tg_set_error(TG_ERR_ARGUMENT, "%s: nbytes is NULL", fn);
    return NULL;
  }
  tg_dtype dtype = tg_tensor_dtype(t);
  char head[TG_MAX_DIMS * 22 + 256];
  size_t head_len = tg__npy_write_header(dtype, tg_ndim(t), tg_sizes(t), head, sizeof head);
  size_t size = tg_dtype_size(dtype);
  size_t data_len = (size_t)tg_numel(t) * size; /* fits: t exists */
  unsigned char *buf = tg__host_malloc(head_len + data_len);
  if (!buf) {
    tg_set_error(TG_ERR_MEMORY, "%s: out of memory for %zu bytes", fn, head_len + data_len);
    return NULL;
  }
  memcpy(buf, head, head_len);
  if (data_len > 0 && tg__io_host_le_bytes(t, buf + head_len, data_len) != TG_OK) {
    tg__error_prefix(fn);
    tg__host_free(buf);
    return NULL;
  }
  *nbytes = head_len + data_len;
  return buf;
}

void *tg_npy_serialize(const tg_tensor *t, size_t *nbytes) {
  return serialize("tg_npy_serialize", t, nbytes);
}

tg_status tg_npy_save(const char *path, const tg_tensor *t) {
  if (!path || !path[0]) {
    if (!t && tg_last_error() != TG_OK) return tg_last_error(); /* keep a failed call's error */
    return tg_set_error(TG_ERR_ARGUMENT, "tg_npy_save: path is %s", path ? "empty" : "NULL");
  }
  size_t n;
  void *buf = serialize("tg_npy_save", t, &n);
  if (!buf) return tg_last_error();
  tg_status st = tg__write_file_atomic("tg_npy_save", path, buf, n);
  tg__host_free(buf);
  return st;
}
