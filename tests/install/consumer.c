/* A program outside the tg tree: built against an installed tg by check_install.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <tg/tg.h>

int main(void) {
  tg_scope s = tg_scope_begin();
  tg_tensor *t = tg_zeros(TG_SHAPE(2, 3), TG_OPTS_DEFAULT); /* owned by s */
  if (!t || tg_print(t) != TG_OK) {
    fprintf(stderr, "consumer: %s\n", tg_last_error_message());
    return 1;
  }
  /* safetensors: a static link of tg needs libcjson (Libs.private, the CMake package) */
  tg_tensor_dict *d = tg_tensor_dict_new();
  size_t n = 0;
  void *bytes =
      d && tg_tensor_dict_set(d, "t", t) == TG_OK ? tg_safetensors_serialize(d, &n) : NULL;
  tg_tensor_dict *back = bytes ? tg_safetensors_parse(bytes, n) : NULL;
  free(bytes);
  tg_tensor_dict_free(d);
  if (!back || tg_tensor_dict_size(back) != 1) {
    fprintf(stderr, "consumer: safetensors: %s\n", tg_last_error_message());
    return 1;
  }
  tg_tensor_dict_free(back);
  if (tg_scope_end(s) != TG_OK) return 1;
  if (tg_live_objects() != 0) {
    fprintf(stderr, "consumer: %lld objects still alive\n", (long long)tg_live_objects());
    return 1;
  }
  return 0;
}
