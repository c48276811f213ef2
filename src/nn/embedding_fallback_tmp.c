/* TEMPORARY (branch i12-mod only, deleted before merge): a weak stand-in for the op
 * tg_embedding until src/ops/embedding.c lands from i12-emb. */
#include "tg/ops.h"

__attribute__((weak)) tg_tensor *tg_embedding(const tg_tensor *weight, const tg_tensor *indices) {
  (void)weight;
  (void)indices;
  tg_set_error(TG_ERR_UNSUPPORTED, "tg_embedding: not merged into this branch yet");
  return NULL;
}
