/* Threads tuning GEMM shapes together (src/ops/cpu/gemm_shapes.c): four of the caller's own
 * threads run small products of six shapes, each shape's first call tuning it under the
 * table's lock while others read settled shapes without it. A plain program, so that
 * scripts/test-tsan.sh can run it under ThreadSanitizer (Criterion's runner cannot start
 * there); ctest runs it too. Exit status 0 when every product is right and every shape
 * settled. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ops/cpu/gemm_engine.h"
#include "tg/tg.h"

static void *run_products(void *arg) {
  const int64_t k0 = (int64_t)(intptr_t)arg;
  for (int call = 0; call < 30; call++) {
    const int64_t k = k0 + call % 5;
    tg_scope sc = tg_scope_begin();
    tg_tensor *a = tg_full(TG_SHAPE(8, k), 1.0, (tg_options){0});
    tg_tensor *b = tg_full(TG_SHAPE(k, 24), 0.5, (tg_options){0});
    tg_tensor *c = tg_mm(a, b);
    double v = -1;
    const bool ok = c && tg_get(c, (int64_t[]){7, 23}, &v) == TG_OK && v == 0.5 * (double)k;
    tg_scope_end(sc);
    if (!ok) return (void *)1;
  }
  return NULL;
}

int main(void) {
  char dir[] = "/tmp/tg-gemm-shapes-XXXXXX", cache[64];
  if (!mkdtemp(dir)) return perror("mkdtemp"), 1;
  snprintf(cache, sizeof cache, "%s/engines.txt", dir);
  /* A measured table (a quick calibration into a private cache): what shapes are tuned under */
  setenv("TG_GEMM_CACHE", cache, 1);
  unsetenv("TG_GEMM_ENGINE");
  unsetenv("TG_GEMM_SHAPES");
  unsetenv("BLIS_ARCH_TYPE"); /* a pinned kernel set means the built-in rules, no table */
  tg__gemm_calibration_quick(true);
  tg__gemm_choice_again();
  int status = tg__gemm_choice_measured() ? 0 : 1;
  if (status)
    fprintf(stderr, "gemm_shapes_threads: no measured table (%s)\n", tg_gemm_engine_source());
  pthread_t threads[4];
  for (int i = 0; i < 4; i++)
    pthread_create(&threads[i], NULL, run_products, (void *)(intptr_t)(32 + i % 2));
  for (int i = 0; i < 4; i++) {
    void *failed = NULL;
    pthread_join(threads[i], &failed);
    if (failed)
      fprintf(stderr, "gemm_shapes_threads: thread %d got a wrong product\n", i), status = 1;
  }
  /* k from 32 to 37: six shapes */
  if (tg__gemm_shapes_settled_count() != 6)
    fprintf(stderr, "gemm_shapes_threads: %d shapes settled, not 6\n",
            tg__gemm_shapes_settled_count()),
        status = 1;
  unlink(cache);
  rmdir(dir);
  if (!status) printf("gemm_shapes_threads: passed\n");
  return status;
}
