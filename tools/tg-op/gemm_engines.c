/* tg-op gemm-engines: which CPU GEMM engine runs each shape class, and why (measured now, read
 * from the cache, pinned by TG_GEMM_ENGINE or BLIS_ARCH_TYPE). --calibrate measures again. */
#include <stdio.h>
#include <stdlib.h>

#include "tg_op.h"

int tgop_gemm_engines(const tgop_options *opts) {
  if (opts->threads > 0) tg_set_num_threads(opts->threads);
  if (opts->calibrate && tg_gemm_calibrate() != TG_OK) {
    fprintf(stderr, "tg-op gemm-engines: %s\n", tg_last_error_message());
    return TGOP_EXIT_FAIL;
  }
  if (!tg_gemm_engine_source()) {
    fprintf(stderr, "tg-op gemm-engines: %s\n", tg_last_error_message());
    return TGOP_EXIT_FAIL;
  }
  const size_t need = tg_gemm_engine_report(NULL, 0, true) + 1;
  char *text = malloc(need);
  if (!text) {
    fprintf(stderr, "tg-op gemm-engines: out of memory\n");
    return TGOP_EXIT_FAIL;
  }
  tg_gemm_engine_report(text, need, true);
  printf("%s\n", text);
  free(text);
  return TGOP_EXIT_OK;
}
