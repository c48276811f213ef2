/* tg — tensors to and from files: named tensor collections, .npy, safetensors.
 *
 * Files are untrusted input. A reader checks every size and offset against the bytes it
 * has before it allocates or copies, and fails with TG_ERR_FORMAT naming the file and what
 * is wrong (truncated, wrong magic, a header that lies about the data size, ...); it never
 * returns a half-read tensor. A writer writes a temporary file beside the target, fsyncs it
 * and renames it over the target, so a crash or a failed write leaves the old file whole.
 * I/O failures (open, read, write, fsync, rename) are TG_ERR_IO with the path and strerror.
 *
 * Tensors read from files are CPU tensors that own their memory (no mapping), without
 * grad. Tensors written may have any strides and live on any device (copied to the host). */
#ifndef TG_IO_H
#define TG_IO_H

#include "tensor.h"

TG_API_BEGIN
#ifdef __cplusplus
extern "C" {
#endif

/* ---- named tensors: an ordered map from names to tensors ----
 * What a module's state, an optimizer's state and a safetensors file are. The dict holds a
 * reference to each tensor (the tensors are shared, not copied); names are copied. Also a
 * map of string metadata (safetensors' "__metadata__"). Order is insertion order; setting
 * an existing name replaces its tensor in place in that order. */
typedef struct tg_tensor_dict tg_tensor_dict;
tg_tensor_dict *tg_tensor_dict_new(void);    /* NULL + TG_ERR_MEMORY */
void tg_tensor_dict_free(tg_tensor_dict *d); /* NULL is a no-op */
/* name: non-empty, at most TG_TENSOR_NAME_MAX bytes, no NUL; t non-NULL. */
tg_status tg_tensor_dict_set(tg_tensor_dict *d, const char *name, const tg_tensor *t);
/* Borrowed; NULL without an error when the name is absent. */
tg_tensor *tg_tensor_dict_get(const tg_tensor_dict *d, const char *name);
int tg_tensor_dict_size(const tg_tensor_dict *d);
/* Entry i (0 <= i < size), borrowed; NULL + TG_ERR_INDEX outside. */
const char *tg_tensor_dict_name(const tg_tensor_dict *d, int i);
tg_tensor *tg_tensor_dict_at(const tg_tensor_dict *d, int i);
/* Metadata: string to string, insertion order; set replaces. */
tg_status tg_tensor_dict_set_meta(tg_tensor_dict *d, const char *key, const char *value);
const char *tg_tensor_dict_get_meta(const tg_tensor_dict *d, const char *key); /* NULL: absent */
int tg_tensor_dict_meta_size(const tg_tensor_dict *d);
const char *tg_tensor_dict_meta_key(const tg_tensor_dict *d, int i);
const char *tg_tensor_dict_meta_value(const tg_tensor_dict *d, int i);

#define TG_TENSOR_NAME_MAX 1024

/* ---- .npy (NumPy's format, versions 1.0, 2.0 and 3.0) ----
 * Reads F32 ('<f4', '>f4'), F64 ('<f8', '>f8') and I64 ('<i8', '>i8'), C or Fortran order,
 * any number of dims up to TG_MAX_DIMS (0-dim and zero-size included); writes version 1.0
 * (2.0 when the header needs it), little-endian, C order. Anything else ('<f2', object
 * arrays, structured dtypes) is TG_ERR_DTYPE naming the descr; a valid file with more dims
 * than TG_MAX_DIMS is TG_ERR_UNSUPPORTED. docs/io.md has the details. */
tg_status tg_npy_save(const char *path, const tg_tensor *t);
tg_tensor *tg_npy_load(const char *path); /* scope-owned, like every op's result */
/* The same from and to memory (a network buffer, a fuzzer's input). tg_npy_serialize
 * returns a malloc'd buffer the caller frees with free(), its length in *nbytes. */
tg_tensor *tg_npy_parse(const void *data, size_t nbytes);
void *tg_npy_serialize(const tg_tensor *t, size_t *nbytes);

/* ---- safetensors (the format of the Python `safetensors` package) ----
 * An 8-byte little-endian header length N, N bytes of JSON {name: {"dtype", "shape",
 * "data_offsets": [begin, end]}, "__metadata__": {str: str}}, then the data. Reads and
 * writes F32, F64, I64 ("F32", "F64", "I64"); another dtype in a file is TG_ERR_DTYPE naming
 * the tensor. A file is rejected (TG_ERR_FORMAT) when the header is longer than the file or
 * than TG_SAFETENSORS_MAX_HEADER, is not a JSON object, names a tensor twice, or when a
 * tensor's offsets are out of range, overlap another's, leave holes, or do not match its
 * shape times its dtype size. Tensors come back in the file's data order. */
#define TG_SAFETENSORS_MAX_HEADER ((size_t)100 << 20)
tg_status tg_safetensors_save(const char *path, const tg_tensor_dict *d);
tg_tensor_dict *tg_safetensors_load(const char *path); /* caller frees; tensors owned by it */
tg_tensor_dict *tg_safetensors_parse(const void *data, size_t nbytes);
void *tg_safetensors_serialize(const tg_tensor_dict *d, size_t *nbytes);

#ifdef __cplusplus
}
#endif
TG_API_END
#endif
