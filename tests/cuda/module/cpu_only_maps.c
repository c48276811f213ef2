/* A CPU-only program must not map the CUDA runtime (issue 22): after a training step of a
 * small MLP on the CPU (forward, backward, an SGD step), /proc/self/maps must hold no
 * libcudart, libcublas, libcublasLt and no tg CUDA module. With --then-cuda it then asks for
 * a tensor on cuda:0 (which may fail on a machine without a GPU) and checks that the module
 * IS mapped now: the first use of the device loads it. Exit status 0 = pass. */
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "tg/cuda.h"
#include "tg/nn.h"
#include "tg/tensor.h"

static const char *const cuda_libraries[] = {"libcudart", "libcublas", "libcublasLt", "libtg_cuda"};

/* Whether a mapped file's name contains name; its line of /proc/self/maps into found. An
 * unreadable maps file counts as mapped (the test then fails rather than passes blind). */
static bool mapped(const char *name, char *found, size_t size) {
  FILE *maps = fopen("/proc/self/maps", "r");
  if (!maps) {
    snprintf(found, size, "/proc/self/maps cannot be read\n");
    return true;
  }
  char line[4096];
  bool any = false;
  while (!any && fgets(line, sizeof line, maps)) {
    if (strstr(line, name)) {
      snprintf(found, size, "%s", line);
      any = true;
    }
  }
  fclose(maps);
  return any;
}

/* One SGD step of a 2-layer MLP (8 -> 16 -> 4) on a batch of 32, with an MSE loss. */
static bool train_step(void) {
  tg_scope scope = tg_scope_begin();
  tg_manual_seed(0);
  tg_linear *l1 = tg_linear_new(8, 16, true, TG_OPTS_DEFAULT, NULL);
  tg_linear *l2 = tg_linear_new(16, 4, true, TG_OPTS_DEFAULT, NULL);
  tg_tensor *params[4] = {l1 ? tg_linear_weight(l1) : NULL, l1 ? tg_linear_bias(l1) : NULL,
                          l2 ? tg_linear_weight(l2) : NULL, l2 ? tg_linear_bias(l2) : NULL};
  tg_optimizer *opt = l1 && l2 ? tg_sgd_new(4, params, (tg_sgd_options){.lr = 0.1}) : NULL;
  tg_tensor *x = tg_randn(TG_SHAPE(32, 8), TG_OPTS_DEFAULT, NULL);
  tg_tensor *target = tg_randn(TG_SHAPE(32, 4), TG_OPTS_DEFAULT, NULL);
  tg_tensor *loss = tg_mse_loss(tg_linear_forward(l2, tg_relu(tg_linear_forward(l1, x))), target);
  bool ok = opt && loss && tg_backward(loss, NULL) == TG_OK && tg_optimizer_step(opt) == TG_OK;
  if (!ok) fprintf(stderr, "cpu_only_maps: training step failed: %s\n", tg_last_error_message());
  tg_optimizer_free(opt);
  tg_linear_free(l2);
  tg_linear_free(l1);
  tg_scope_end(scope);
  return ok;
}

int main(int argc, char **argv) {
  bool then_cuda = argc > 1 && strcmp(argv[1], "--then-cuda") == 0;
  if (!train_step()) return 1;
  char found[4096];
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  printf("cpu_only_maps: max resident after a CPU training step: %ld kB\n", usage.ru_maxrss);
  for (size_t i = 0; i < sizeof cuda_libraries / sizeof cuda_libraries[0]; i++) {
    if (mapped(cuda_libraries[i], found, sizeof found)) {
      fprintf(stderr, "cpu_only_maps: a CPU-only program maps %s:\n%s", cuda_libraries[i], found);
      return 1;
    }
  }
  printf("cpu_only_maps: no CUDA library mapped after a CPU training step\n");
  if (!then_cuda) return 0;

  tg_scope scope = tg_scope_begin();
  tg_tensor *t = tg_zeros(TG_SHAPE(3), TG_OPTS(.device = TG_DEVICE_CUDA(0)));
  if (!t) printf("cpu_only_maps: cuda:0: %s\n", tg_last_error_message());
  tg_scope_end(scope);
  if (!mapped("libtg_cuda", found, sizeof found)) {
    fprintf(stderr, "cpu_only_maps: the CUDA module is not mapped after the first use of "
                    "cuda:0\n");
    return 1;
  }
  printf("cpu_only_maps: the CUDA module is mapped after the first use of cuda:0\n");
  return tg_live_objects() == 0 ? 0 : 1;
}
