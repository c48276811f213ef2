/* Whole-file reads and atomic whole-file writes for tg's file formats (npy, safetensors,
 * checkpoints). Not part of the public API. */
#ifndef TG_FILE_IO_H
#define TG_FILE_IO_H

#include <stddef.h>

#include "tg/types.h"

/* Reads path into a tg__host_malloc'd buffer (*data, *nbytes; free with tg__host_free).
 * TG_ERR_IO "<fn>: cannot read '<path>': <strerror>" on failure, or "'<path>' is not a
 * regular file: it is a FIFO (named pipe)" (a directory, a device...: refused without
 * waiting, where a FIFO would block an open or a read forever), TG_ERR_FORMAT when the file
 * is larger than max_bytes, TG_ERR_MEMORY. Nothing is returned on failure. */
tg_status tg__read_file(const char *fn, const char *path, size_t max_bytes, void **data,
                        size_t *nbytes);

/* Writes data to path atomically: to a new temporary file beside it (path.tmp.XXXXXX, mode
 * 0666 less the umask, as fopen would create it), fsync, rename over path, fsync the
 * directory. On any failure the temporary file is removed, path is left as it was, and the
 * error is TG_ERR_IO naming fn, the path and the step that failed. Written in chunks of
 * TG__WRITE_CHUNK bytes. A process killed mid-write leaves its temporary file: the writer
 * holds an exclusive flock(2) on it until the rename, the kernel drops that lock when the
 * process dies, and each successful write of path removes the path.tmp.XXXXXX files it can
 * lock (no live writer), best effort. */
#define TG__WRITE_CHUNK ((size_t)1 << 20)
tg_status tg__write_file_atomic(const char *fn, const char *path, const void *data, size_t nbytes);

/* For tests: called after each chunk is written to the temporary file, with the bytes
 * written so far (a test kills the process there to simulate a crash mid-write; returning
 * false makes the write fail as an I/O error would). NULL removes it. Process-wide. */
typedef bool (*tg__write_hook)(size_t written, void *user);
void tg__set_write_hook(tg__write_hook hook, void *user);

#endif
