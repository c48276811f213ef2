/* tg — basic types: dtypes, devices, status codes and the thread-local error. */
#ifndef TG_TYPES_H
#define TG_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "export.h"

TG_API_BEGIN
#ifdef __cplusplus
extern "C" {
#endif

#define TG_MAX_DIMS 8

/* Element types. F32 is the zero value and the default. */
typedef enum tg_dtype { TG_F32 = 0, TG_F64 = 1, TG_I64 = 2, TG_NUM_DTYPES } tg_dtype;

/* Device types: the built-in ones, then those registered at run time (tg/device.h), up to
 * TG_NUM_DEVICE_TYPES in all. */
typedef enum tg_device_type {
  TG_CPU = 0,
  TG_CUDA = 1,
  TG_META = 2, /* shapes, strides and dtypes without data (tg/device.h) */
  TG_NUM_DEVICE_TYPES = 8
} tg_device_type;

typedef struct tg_device {
  tg_device_type type;
  int index;
} tg_device;

#define TG_DEVICE_CPU ((tg_device){TG_CPU, 0})
#define TG_DEVICE_CUDA(i) ((tg_device){TG_CUDA, (i)})
#define TG_DEVICE_META ((tg_device){TG_META, 0})

/* Every failure has one of these codes; TG_OK is zero. */
typedef enum tg_status {
  TG_OK = 0,
  TG_ERR_ARGUMENT,    /* NULL or otherwise invalid argument */
  TG_ERR_SHAPE,       /* sizes that do not fit together */
  TG_ERR_DTYPE,       /* unsupported or mismatched dtype */
  TG_ERR_DEVICE,      /* device mismatch, or a device not built / not present */
  TG_ERR_INDEX,       /* dim or element index out of range */
  TG_ERR_MEMORY,      /* allocation failed */
  TG_ERR_STATE,       /* misuse of the autograd state (freed graph, version, ...) */
  TG_ERR_UNSUPPORTED, /* a valid request tg does not implement */
  TG_ERR_GRADCHECK,   /* gradcheck found a mismatch */
  TG_ERR_EXTENSION,   /* an extension could not be built or loaded (include/tg/extension.h) */
  TG_ERR_IO,          /* a file could not be opened, read, written or renamed (tg/io.h) */
  TG_ERR_FORMAT,      /* a file's contents are malformed: truncated, bad magic, lying header */
  TG_ERR_DIST,        /* another rank failed, hung or went another way (tg/dist.h) */
  TG_NUM_STATUS
} tg_status;

typedef struct tg_tensor tg_tensor;

size_t tg_dtype_size(tg_dtype dtype);
const char *tg_dtype_name(tg_dtype dtype);
bool tg_dtype_is_floating(tg_dtype dtype);
/* PyTorch's promote_types: the dtype two dtypes meet in. Categories rank int < float; within
 * floats the wider wins: F32+F64 -> F64, I64+F32 -> F32, I64+F64 -> F64, d+d -> d. An invalid
 * dtype gives TG_NUM_DTYPES (no error is recorded). See docs/dtypes.md; tg_result_type
 * (ops.h) adds the rule for 0-dim tensors. */
tg_dtype tg_promote_types(tg_dtype a, tg_dtype b);
/* The type's name ("cpu", "cuda", "meta", a registered one's); "invalid-device" if none. */
const char *tg_device_type_name(tg_device_type type);
bool tg_device_equal(tg_device a, tg_device b);
const char *tg_status_name(tg_status status);
/* tg's version, "MAJOR.MINOR.PATCH" (extensions and the JIT cache are keyed by it). */
const char *tg_version_string(void);

/* ---- errors: thread-local, first error kept while propagating NULLs ---- */

/* Code of the pending error on this thread (TG_OK if none). */
tg_status tg_last_error(void);
/* Message of the pending error, "" if none. Valid until the next error or clear. */
const char *tg_last_error_message(void);
void tg_clear_error(void);

/* Called on every new error (not on NULL propagation); may abort, log, longjmp... */
typedef void (*tg_error_handler)(tg_status status, const char *message, void *user_data);
void tg_set_error_handler(tg_error_handler handler, void *user_data);

/* Records an error and returns its code. For op and custom-function authors. */
tg_status tg_set_error(tg_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Formats sizes as "[2, 3]" into buf; returns buf. For error messages. */
char *tg_format_sizes(char *buf, size_t buflen, int ndim, const int64_t *sizes);

#ifdef __cplusplus
}
#endif
TG_API_END
#endif
