/* .npy internals shared by npy_header.c, npy_read.c and npy_write.c. Not part of the public API.
 *
 * The format (numpy.lib.format): the magic "\x93NUMPY", a major and a minor version byte,
 * the header length (2 bytes little-endian in version 1.0, 4 in 2.0 and 3.0), the header,
 * a Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded
 * with spaces and ended by '\n', then the data: the elements in C or Fortran order. */
#ifndef TG_IO_NPY_H
#define TG_IO_NPY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tg/types.h"

#define TG__NPY_MAGIC "\x93NUMPY"
#define TG__NPY_MAGIC_LEN 6
/* numpy aligns the data to 64 bytes (ARRAY_ALIGN); tg writes the same. */
#define TG__NPY_ALIGN 64
/* numpy >= 1.23 leaves room after the dict so that the first dim can grow in place: spaces
 * for 21 digits (GROWTH_AXIS_MAX_DIGITS) less the digits of that dim. tg writes the same, so
 * its files equal numpy's byte for byte. */
#define TG__NPY_GROWTH_DIGITS 21
/* tg_npy_load reads the whole file into memory first (then copies it into the tensor); a
 * larger file is TG_ERR_FORMAT before anything is allocated. 16 GiB (64-bit). */
#if SIZE_MAX > 0xffffffffu
#define TG__NPY_MAX_FILE ((size_t)1 << 34)
#else
#define TG__NPY_MAX_FILE SIZE_MAX
#endif

/* The descr kind of each dtype, after its byte-order character: what the writer writes
 * ('<' + kind) and the reader accepts. */
static const char tg__npy_kind[TG_NUM_DTYPES][3] = {
    [TG_F32] = "f4", [TG_F64] = "f8", [TG_I64] = "i8"};

/* Who is reading, for messages: "<fn>: " or "<fn>: '<path>': ". */
typedef struct tg__npy_source {
  const char *fn;
  const char *path; /* NULL for memory */
} tg__npy_source;

/* Records code and "<fn>: ['<path>': ]<message>"; returns code. */
tg_status tg__npy_fail(const tg__npy_source *src, tg_status code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* What a header says, after every check that needs no data. */
typedef struct tg__npy_header {
  tg_dtype dtype;
  bool big_endian; /* the data's byte order */
  bool fortran_order;
  int ndim;
  int64_t sizes[TG_MAX_DIMS];
  int64_t data_bytes; /* numel * itemsize, overflow-checked */
  size_t data_offset; /* where the data starts: prefix + header length */
} tg__npy_header;

/* Checks the magic, version, header length and the header dict of data[0..n); on success
 * fills *h (the data's size is not yet compared with n - data_offset). TG_ERR_FORMAT for a
 * malformed file, TG_ERR_DTYPE for a descr tg does not read, TG_ERR_UNSUPPORTED for more
 * than TG_MAX_DIMS dims. Allocates nothing. */
tg_status tg__npy_read_header(const tg__npy_source *src, const unsigned char *data, size_t n,
                              tg__npy_header *h);

/* The header tg writes for (dtype, sizes) in C order, prefix included, exactly as numpy 1.24
 * writes it, into buf (cap bytes); returns its length, which may be more than cap (then buf
 * holds nothing usable). */
size_t tg__npy_write_header(tg_dtype dtype, int ndim, const int64_t *sizes, char *buf, size_t cap);

/* The prefix, dict text, padding and '\n' for a dict text of len bytes, as numpy's
 * _wrap_header: version 1.0 unless the padded header is longer than 65535 bytes, then 2.0.
 * Into buf (cap bytes); returns the length, which may be more than cap (then buf holds
 * nothing usable). Never longer than len + 12 + TG__NPY_ALIGN. */
size_t tg__npy_wrap_header(const char *dict, size_t len, char *buf, size_t cap);

/* Whether this machine stores numbers little-endian. */
static inline bool tg__npy_host_little_endian(void) {
  const uint16_t one = 1;
  return *(const unsigned char *)&one == 1;
}

#endif
