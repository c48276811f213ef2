/* What the file writers (npy, safetensors) share: a tensor's elements as the contiguous,
 * little-endian host bytes both formats store, and the byte-order swap the readers use too.
 * Not part of the public API. */
#ifndef TG_IO_HOST_BYTES_H
#define TG_IO_HOST_BYTES_H

#include <stddef.h>

#include "tg/tensor.h"

/* t's elements in C order, little-endian, into dst (nbytes: exactly numel * itemsize), from
 * any device and any strides (tg_to_host_array, inside its own scope). On failure the error
 * is tg_to_host_array's, unprefixed. */
tg_status tg__io_host_le_bytes(const tg_tensor *t, void *dst, size_t nbytes);

/* Swaps each item of `item` bytes in data[0..nbytes) on a big-endian host, does nothing on a
 * little-endian one: the same call converts to and from little-endian. */
void tg__io_little_endian(void *data, size_t nbytes, size_t item);

#endif
