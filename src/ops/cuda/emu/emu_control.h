/* Test controls of the CUDA emulation (tg_emu only; plain C). They reach situations a
 * machine cannot be put in on demand: no driver, no device, two devices, a failing
 * cudaMalloc, launch, cuBLAS or event call. */
#ifndef TG_EMU_CONTROL_H
#define TG_EMU_CONTROL_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Devices cudaGetDeviceCount reports; default 1, or $TG_EMU_DEVICES. Takes effect for tg
 * only before its lazy initialisation (the first CUDA use in the process). */
void tg_emu_set_device_count(int count);
/* true: cudaGetDeviceCount fails with cudaErrorInsufficientDriver, like a machine with the
 * toolkit but no driver. */
void tg_emu_set_driver_missing(bool missing);
/* The next n calls of that kind fail: cudaMalloc with cudaErrorMemoryAllocation, kernel
 * launches with cudaErrorLaunchFailure, cuBLAS calls with CUBLAS_STATUS_EXECUTION_FAILED. */
void tg_emu_fail_mallocs(int n);
void tg_emu_fail_launches(int n);
void tg_emu_fail_blas(int n);
/* The next n event calls (cudaEventCreate, Record, Synchronize, ElapsedTime) fail with
 * cudaErrorLaunchFailure, as they do on a GPU once an earlier kernel has faulted. */
void tg_emu_fail_events(int n);
/* Emulated CUDA events created and not destroyed. */
size_t tg_emu_live_events(void);
/* Emulated cudaMalloc'd buffers alive now, and their bytes. */
size_t tg_emu_device_allocations(void);
size_t tg_emu_device_bytes(void);
/* Whether p points into emulated device memory. */
bool tg_emu_is_device_pointer(const void *p);

#ifdef __cplusplus
}
#endif
#endif
