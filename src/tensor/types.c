/* Names and sizes of dtypes and devices. */
#include "tg/types.h"

size_t tg_dtype_size(tg_dtype dtype) {
  switch (dtype) {
  case TG_F32:
    return 4;
  case TG_F64:
    return 8;
  case TG_I64:
    return 8;
  default:
    return 0;
  }
}

const char *tg_dtype_name(tg_dtype dtype) {
  switch (dtype) {
  case TG_F32:
    return "float32";
  case TG_F64:
    return "float64";
  case TG_I64:
    return "int64";
  default:
    return "invalid-dtype";
  }
}

bool tg_dtype_is_floating(tg_dtype dtype) { return dtype == TG_F32 || dtype == TG_F64; }

tg_dtype tg_promote_types(tg_dtype a, tg_dtype b) {
  if ((unsigned)a >= TG_NUM_DTYPES || (unsigned)b >= TG_NUM_DTYPES) return TG_NUM_DTYPES;
  if (a == b) return a;
  if (!tg_dtype_is_floating(a)) return b; /* the other is a float: the higher category */
  if (!tg_dtype_is_floating(b)) return a;
  return TG_F64; /* F32 and F64 */
}

/* tg_device_type_name: src/tensor/device_names.c */

bool tg_device_equal(tg_device a, tg_device b) {
  /* one host and one meta device: any index names them */
  return a.type == b.type && (a.type == TG_CPU || a.type == TG_META || a.index == b.index);
}

const char *tg_version_string(void) { return TG_VERSION_STRING; }
