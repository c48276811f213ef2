/* Contiguous little-endian host bytes of a tensor (host_bytes.h). */
#include "io/host_bytes.h"

#include "tg/tensor.h"

tg_status tg__io_host_le_bytes(const tg_tensor *t, void *dst, size_t nbytes) {
  tg_scope sc = tg_scope_begin();
  tg_status st = tg_to_host_array(t, dst, nbytes);
  tg_scope_end(sc);
  if (st == TG_OK) tg__io_little_endian(dst, nbytes, tg_dtype_size(tg_tensor_dtype(t)));
  return st;
}

void tg__io_little_endian(void *data, size_t nbytes, size_t item) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  unsigned char *p = data;
  for (size_t at = 0; at + item <= nbytes; at += item)
    for (size_t i = 0; i < item / 2; i++) {
      unsigned char b = p[at + i];
      p[at + i] = p[at + item - 1 - i];
      p[at + item - 1 - i] = b;
    }
#else
  (void)data, (void)nbytes, (void)item;
#endif
}
