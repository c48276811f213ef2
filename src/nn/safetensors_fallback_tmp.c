/* TEMPORARY (branch i12-mod only, deleted before merge): weak stand-ins for the safetensors
 * reader and writer until the safetensors reader and writer land from i12-st. */
#include "tg/io.h"

__attribute__((weak)) tg_status tg_safetensors_save(const char *path, const tg_tensor_dict *d) {
  (void)path;
  (void)d;
  return tg_set_error(TG_ERR_UNSUPPORTED, "tg_safetensors_save: not merged into this branch yet");
}

__attribute__((weak)) tg_tensor_dict *tg_safetensors_load(const char *path) {
  (void)path;
  tg_set_error(TG_ERR_UNSUPPORTED, "tg_safetensors_load: not merged into this branch yet");
  return NULL;
}
