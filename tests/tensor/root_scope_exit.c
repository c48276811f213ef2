/* The main thread's root scope is drained at exit: tensors and tape nodes made with no scope
 * open (and, in the emulation build, CUDA storages) are all released by the time the last
 * atexit handler runs. A plain program, so that it can watch its own exit; the ASan build's
 * leak check and valgrind see the same exit. */
#include <stdio.h>
#include <stdlib.h>

#include "tg/tg.h"

/* Registered before tg's own handler, so it runs after it. */
static void check_at_exit(void) {
  int64_t live = tg_live_objects();
  if (live != 0) {
    fprintf(stderr, "root_scope_exit: %lld object(s) alive after exit drained the root scope\n",
            (long long)live);
    _Exit(1);
  }
  printf("root_scope_exit: the root scope was drained at exit\n");
}

static int make(tg_device device) {
  tg_tensor *x = tg_ones(TG_SHAPE(3), TG_OPTS(.device = device, .requires_grad = true));
  tg_tensor *y = tg_sum(tg_mul_scalar(x, 2.0)); /* a tape node and intermediates */
  if (!y || tg_backward(y, NULL) != TG_OK) {
    fprintf(stderr, "root_scope_exit: %s\n", tg_last_error_message());
    return 1;
  }
  return 0;
}

int main(void) {
  if (atexit(check_at_exit) != 0) return 1;
  if (tg_scope_depth() != 0) return 1;
  if (make(TG_DEVICE_CPU)) return 1;
#ifdef TG_CUDA_EMULATION
  if (make(TG_DEVICE_CUDA(0))) return 1;
#endif
  if (tg_live_objects() == 0) {
    fprintf(stderr, "root_scope_exit: the root scope holds nothing\n");
    return 1;
  }
  return 0; /* everything above is still alive: exit's handler releases it */
}
