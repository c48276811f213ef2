/* A CUDA module that cannot be used (TG_CUDA_MODULE names it: missing, not a shared object,
 * without the entry point, of another ABI or tg version) is a clean TG_ERR_DEVICE that names
 * the path and the reason (argv[1], a part of the expected message), never a crash; the
 * failure is remembered and every later use repeats it. Exit status 0 = pass. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tg/cuda.h"
#include "tg/tensor.h"

static bool expect(const char *what, tg_status st, const char *path, const char *reason) {
  const char *message = tg_last_error_message();
  printf("bad_module: %s: %s\n", what, message);
  if (st != TG_ERR_DEVICE || !strstr(message, path) || !strstr(message, reason)) {
    fprintf(stderr, "bad_module: %s: expected TG_ERR_DEVICE naming '%s' and '%s', got %s\n", what,
            path, reason, tg_status_name(st));
    return false;
  }
  tg_clear_error();
  return true;
}

int main(int argc, char **argv) {
  const char *path = getenv("TG_CUDA_MODULE");
  if (argc != 2 || !path) {
    fprintf(stderr, "usage: TG_CUDA_MODULE=<module> bad_module <part of the reason>\n");
    return 2;
  }
  const char *reason = argv[1];
  bool ok = true;
  tg_scope scope = tg_scope_begin();
  for (int round = 0; round < 2; round++) { /* the second time from the remembered failure */
    tg_tensor *t = tg_zeros(TG_SHAPE(2), TG_OPTS(.device = TG_DEVICE_CUDA(0)));
    ok &= !t && expect("tg_zeros on cuda:0", tg_last_error(), path, reason);
    ok &= expect("tg_cuda_synchronize", tg_cuda_synchronize(), path, reason);
  }
  ok &= !tg_cuda_is_built() && tg_cuda_device_count() == 0 && !tg_cuda_is_available();
  ok &= tg_cuda_timer_new() == NULL && expect("tg_cuda_timer_new", tg_last_error(), path, reason);
  tg_scope_end(scope);
  return ok && tg_live_objects() == 0 ? 0 : 1;
}
