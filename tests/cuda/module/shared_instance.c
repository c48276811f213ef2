/* A program that links libtg_cuda_emu.so (for the emulation's controls) and then has libtg
 * load the module by its path must get one instance, not two: dlopen finds the file already
 * mapped. Checked through state (the emulated device count set through the linked copy is
 * what libtg's forwarders read) and identity (the device table libtg hands out is the linked
 * tg_cuda_device). Exit status 0 = pass. */
#include <stdio.h>

#include "ops/backend.h"
#include "ops/cuda/emu/emu_control.h"
#include "tg/cuda.h"

int main(void) {
  tg_emu_set_device_count(3);
  int seen = tg_cuda_device_count(); /* the first use: libtg loads the module here */
  const tg_device_ops *dev = tg__device("shared_instance", TG_DEVICE_CUDA(0));
  printf("shared_instance: device count %d, device table %p (linked: %p)\n", seen,
         (const void *)dev, (const void *)&tg_cuda_device);
  if (seen != 3 || dev != &tg_cuda_device) {
    fprintf(stderr, "shared_instance: libtg loaded a second copy of the module\n");
    return 1;
  }
  return 0;
}
