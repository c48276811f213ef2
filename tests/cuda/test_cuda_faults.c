/* The emulation makes host code that touches device memory fail as on a GPU: device
 * buffers are inaccessible to the host outside emulated copies, launches and cuBLAS
 * calls. Only meaningful (and only built) against the emulation. */
#include <math.h>
#include <signal.h>

#include "cuda_testutil.h"

#ifdef TG_CUDA_EMULATION

TG_CUDA_TEST(cuda_faults, device_pointers_are_device_memory) {
  tg_tensor *c = tg_zeros(TG_SHAPE(8), TG_OPTS(.device = TG_CUDA0));
  tg_tensor *h = tg_zeros(TG_SHAPE(8), TG_OPTS_DEFAULT);
  cr_assert(tg_emu_is_device_pointer(tg_data_ptr(c)));
  cr_assert(!tg_emu_is_device_pointer(tg_data_ptr(h)));
}

/* No cleanup is reached: the test ends in the signal. */
Test(cuda_faults, host_read_of_device_memory_faults, .signal = SIGSEGV) {
  tg_tensor *c = tg_ones(TG_SHAPE(8), TG_OPTS(.device = TG_CUDA0));
  cr_assert(c, "%s", tg_last_error_message());
  volatile float *p = (volatile float *)tg_data_ptr(c);
  float v = p[0];
  cr_assert_fail("read %g from device memory without a fault", (double)v);
}

Test(cuda_faults, host_write_to_device_memory_faults, .signal = SIGSEGV) {
  tg_tensor *c = tg_zeros(TG_SHAPE(8), TG_OPTS(.dtype = TG_F64, .device = TG_CUDA0));
  cr_assert(c, "%s", tg_last_error_message());
  ((volatile double *)tg_data_ptr(c))[3] = 1.0;
  cr_assert_fail("wrote to device memory without a fault");
}

TG_CUDA_TEST(cuda_faults, fresh_device_memory_is_not_zero) {
  /* A kernel that reads what nobody wrote sees NaN, as it would see garbage on a GPU. */
  tg_tensor *c = tg_empty(TG_SHAPE(4), TG_OPTS(.device = TG_CUDA0));
  cr_assert(isnan(tg_test_at(c, 0)));
}

TG_CUDA_TEST(cuda_faults, copies_past_a_buffer_are_errors) {
  tg_tensor *c = tg_zeros(TG_SHAPE(4), TG_OPTS(.device = TG_CUDA0));
  float host[1024] = {0};
  /* the class is 512 B; 4 KiB reach past the buffer */
  cr_assert_eq(tg__device("test", TG_CUDA0)
                   ->copy_bytes("test", host, TG_DEVICE_CPU, tg_data_ptr(c), TG_CUDA0, sizeof host),
               TG_ERR_DEVICE);
  tg_expect_error(TG_ERR_DEVICE, "cudaMemcpyAsync failed", "invalid argument");
  /* a host pointer named as device memory */
  cr_assert_eq(
      tg__device("test", TG_CUDA0)->copy_bytes("test", host, TG_CUDA0, host + 8, TG_DEVICE_CPU, 16),
      TG_ERR_DEVICE);
  tg_expect_error(TG_ERR_DEVICE);
}

#endif
