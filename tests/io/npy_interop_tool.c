/* tg's side of tests/io/python/npy_interop.py (NumPy interop for .npy):
 *
 *   npy_interop_tool write DIR     saves tensors made in tg (every dtype, 0-dim, zero-size,
 *                                  transposed, sliced, expanded, special values) into DIR
 *   npy_interop_tool dump FILE...  loads each file and prints one line per file:
 *                                  "<file> ok <dtype> <ndim> <sizes...> : <element bits in hex>"
 *                                  or "<file> error <status> <message>"
 *
 * Elements are printed as their bits (float32 as 8 hex digits, float64 and int64 as 16), in
 * C order, so the comparison in Python is exact for NaN and -0.0 too. Exits 1 on a failure
 * of its own (a write that failed, leaked objects). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tg/tg.h"

static tg_tensor *arange(double n, tg_dtype dtype) {
  return tg_arange(0, n, 1, (tg_options){.dtype = dtype});
}

static int save(const char *dir, const char *name, const tg_tensor *t) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.npy", dir, name);
  if (!t || tg_npy_save(path, t) != TG_OK) {
    fprintf(stderr, "npy_interop_tool: %s: %s\n", name, tg_last_error_message());
    return 1;
  }
  return 0;
}

/* The same tensors npy_interop.py builds with numpy (its C_WRITTEN table). */
static int write_all(const char *dir) {
  tg_scope sc = tg_scope_begin();
  int bad = 0;
  /* np.arange(6, dtype=np.float32).reshape(2, 3) * 0.5 - 1 */
  bad |= save(dir, "f32_2x3",
              tg_sub(tg_mul(tg_reshape(arange(6, TG_F32), TG_SHAPE(2, 3)),
                            tg_full(0, NULL, 0.5, TG_OPTS_DEFAULT)),
                     tg_full(0, NULL, 1, TG_OPTS_DEFAULT)));
  bad |= save(dir, "f64_scalar", tg_full(0, NULL, 3.25, TG_OPTS(.dtype = TG_F64)));
  bad |= save(dir, "i64_empty", tg_zeros(TG_SHAPE(3, 0, 2), TG_OPTS(.dtype = TG_I64)));
  bad |= save(dir, "f32_empty_1d", tg_zeros(TG_SHAPE(0), TG_OPTS_DEFAULT));
  /* np.arange(12.0).reshape(3, 4).T */
  bad |= save(dir, "f64_transposed", tg_t(tg_reshape(arange(12, TG_F64), TG_SHAPE(3, 4))));
  /* np.arange(20).reshape(4, 5)[1:4:2, ::2] */
  bad |= save(
      dir, "i64_sliced",
      tg_slice(tg_slice(tg_reshape(arange(20, TG_I64), TG_SHAPE(4, 5)), 0, 1, 4, 2), 1, 0, 5, 2));
  /* np.broadcast_to(np.arange(3, dtype=np.float32).reshape(3, 1), (2, 3, 4)) */
  bad |= save(dir, "f32_expanded",
              tg_expand(tg_reshape(arange(3, TG_F32), TG_SHAPE(3, 1)), TG_SHAPE(2, 3, 4)));
  /* np.arange(48, dtype=np.float32).reshape(1, 2, 1, 3, 1, 2, 1, 4) */
  bad |= save(dir, "f32_8d", tg_reshape(arange(48, TG_F32), TG_SHAPE(1, 2, 1, 3, 1, 2, 1, 4)));
  const double special[] = {
      NAN, -0.0, INFINITY, -INFINITY, 4.9406564584124654e-324, 1.7976931348623157e308};
  bad |= save(dir, "f64_special", tg_from_data(TG_SHAPE(6), special, TG_OPTS(.dtype = TG_F64)));
  const int64_t extremes[] = {INT64_MIN, INT64_MAX, -1, 0};
  bad |= save(dir, "i64_extremes", tg_from_data(TG_SHAPE(4), extremes, TG_OPTS(.dtype = TG_I64)));
  tg_scope_end(sc);
  return bad;
}

static void dump(const char *path) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *t = tg_npy_load(path);
  if (!t) {
    printf("%s error %s %s\n", path, tg_status_name(tg_last_error()), tg_last_error_message());
    tg_clear_error();
    tg_scope_end(sc);
    return;
  }
  tg_dtype dtype = tg_tensor_dtype(t);
  printf("%s ok %s %d", path, tg_dtype_name(dtype), tg_ndim(t));
  for (int d = 0; d < tg_ndim(t); d++) printf(" %lld", (long long)tg_size(t, d));
  printf(" :");
  int64_t n = tg_numel(t);
  size_t size = tg_dtype_size(dtype);
  unsigned char *bytes = malloc((size_t)n * size + 1);
  if (bytes && tg_to_host_array(t, bytes, (size_t)n * size) == TG_OK) {
    for (int64_t i = 0; i < n; i++) {
      if (size == 4) {
        uint32_t v;
        memcpy(&v, bytes + i * 4, 4);
        printf(" %08x", (unsigned)v);
      } else {
        uint64_t v;
        memcpy(&v, bytes + i * 8, 8);
        printf(" %016llx", (unsigned long long)v);
      }
    }
  } else {
    printf(" (cannot read the elements: %s)", tg_last_error_message());
  }
  printf("\n");
  free(bytes);
  tg_scope_end(sc);
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "write") == 0) {
    int bad = write_all(argv[2]);
    if (tg_live_objects() != 0) {
      fprintf(stderr, "npy_interop_tool: %lld objects alive\n", (long long)tg_live_objects());
      return 1;
    }
    return bad;
  }
  if (argc >= 2 && strcmp(argv[1], "dump") == 0) {
    for (int i = 2; i < argc; i++) dump(argv[i]);
    if (tg_live_objects() != 0) {
      fprintf(stderr, "npy_interop_tool: %lld objects alive\n", (long long)tg_live_objects());
      return 1;
    }
    return 0;
  }
  fprintf(stderr, "usage: %s write DIR | dump FILE...\n", argv[0]);
  return 2;
}
