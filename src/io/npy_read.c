/* tg_npy_parse and tg_npy_load: every check first (npy_header.c, then the data's size),
 * then one allocation, then the copy into C order and this machine's byte order. */
#include <string.h>

#include "io/file_io.h"
#include "io/npy.h"
#include "tensor/error_impl.h"
#include "tensor/host_memory.h"
#include "tg/io.h"

/* One element from the file to the tensor, its bytes reversed when the orders differ. */
static inline void copy_element(unsigned char *dst, const unsigned char *src, size_t size,
                                bool swap) {
  if (!swap) {
    memcpy(dst, src, size);
  } else if (size == 4) {
    uint32_t v;
    memcpy(&v, src, 4);
    v = __builtin_bswap32(v);
    memcpy(dst, &v, 4);
  } else {
    uint64_t v;
    memcpy(&v, src, 8);
    v = __builtin_bswap64(v);
    memcpy(dst, &v, 8);
  }
}

/* The file's elements (C or Fortran order) into dst in C order. */
static void copy_data(unsigned char *dst, const unsigned char *src, const tg__npy_header *h) {
  size_t size = tg_dtype_size(h->dtype);
  int64_t numel = h->data_bytes / (int64_t)size;
  bool swap = h->big_endian == tg__npy_host_little_endian();
  if (!h->fortran_order || h->ndim <= 1) {
    if (!swap) {
      memcpy(dst, src, (size_t)h->data_bytes);
      return;
    }
    for (int64_t k = 0; k < numel; k++) copy_element(dst + k * size, src + k * size, size, swap);
    return;
  }
  /* Fortran order: the first index varies fastest in the file. Walk the C order with an
   * odometer and keep the file offset of the current index. numel > 0 here means no dim is
   * 0, so the strides are below numel. */
  int64_t fstride[TG_MAX_DIMS], index[TG_MAX_DIMS] = {0}, at = 0;
  fstride[0] = 1;
  for (int d = 1; d < h->ndim; d++) fstride[d] = fstride[d - 1] * h->sizes[d - 1];
  for (int64_t k = 0; k < numel; k++) {
    copy_element(dst + k * size, src + at * (int64_t)size, size, swap);
    for (int d = h->ndim - 1; d >= 0; d--) {
      if (++index[d] < h->sizes[d]) {
        at += fstride[d];
        break;
      }
      at -= fstride[d] * (h->sizes[d] - 1);
      index[d] = 0;
    }
  }
}

static tg_tensor *parse(const tg__npy_source *src, const unsigned char *data, size_t n) {
  tg__npy_header h;
  if (tg__npy_read_header(src, data, n, &h) != TG_OK) return NULL;
  size_t have = n - h.data_offset;
  if ((uint64_t)have != (uint64_t)h.data_bytes) {
    char sizes[TG_MAX_DIMS * 22 + 3];
    tg__npy_fail(src, TG_ERR_FORMAT, "header says %s %s = %lld bytes but the file has %zu %s",
                 tg_format_sizes(sizes, sizeof sizes, h.ndim, h.sizes), tg_dtype_name(h.dtype),
                 (long long)h.data_bytes, have,
                 have < (uint64_t)h.data_bytes ? "(truncated data)" : "(trailing bytes)");
    return NULL;
  }
  tg_tensor *t = tg_empty(h.ndim, h.sizes, (tg_options){.dtype = h.dtype});
  if (!t) {
    tg__error_prefix(src->fn);
    return NULL;
  }
  if (h.data_bytes > 0) copy_data(tg_data_ptr(t), data + h.data_offset, &h);
  return t;
}

tg_tensor *tg_npy_parse(const void *data, size_t nbytes) {
  tg__npy_source src = {"tg_npy_parse", NULL};
  if (!data && nbytes > 0) {
    tg_set_error(TG_ERR_ARGUMENT, "tg_npy_parse: data is NULL but nbytes is %zu", nbytes);
    return NULL;
  }
  static const unsigned char nothing[1];
  return parse(&src, data ? data : nothing, nbytes);
}

tg_tensor *tg_npy_load(const char *path) {
  tg__npy_source src = {"tg_npy_load", path};
  void *data;
  size_t n;
  if (tg__read_file("tg_npy_load", path, TG__NPY_MAX_FILE, &data, &n) != TG_OK) return NULL;
  tg_tensor *t = parse(&src, data, n);
  tg__host_free(data);
  return t;
}
