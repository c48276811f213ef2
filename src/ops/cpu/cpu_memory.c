/* tg/cpu.h's CPU memory calls: the cache of freed storage blocks (src/tensor/host_cache.c). */
#include "tensor/host_memory.h"
#include "tg/cpu.h"
#include "tg/types.h"

tg_status tg_host_memory_stats_get(tg_host_memory_stats *out) {
  if (!out) return tg_set_error(TG_ERR_ARGUMENT, "tg_host_memory_stats_get: out is NULL");
  tg__host_cache_stats(&out->bytes_in_use, &out->peak_bytes_in_use, &out->cache_limit);
  out->bytes_cached = tg__host_cache_bytes();
  return TG_OK;
}

void tg_host_empty_cache(void) { tg__host_cache_drain(); }
