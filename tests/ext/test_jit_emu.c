/* The JIT of a tg whose CUDA device is the CPU emulation (libtg_emu.so, the tests' build):
 * an extension's .cu sources compile as C++ against the emulated CUDA runtime (tg/cuda_ext.cuh),
 * so its kernels run here, without a GPU: examples/extension's lltm_ext.c + lltm_ext.cu,
 * checked CPU against (emulated) CUDA by tg_op_check and by hand. */
#define _GNU_SOURCE /* mkdtemp, nftw */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ops/cuda/emu/emu_control.h"
#include "testutil.h"
#include "tg/extension.h"

static char cache_dir[] = "/tmp/tg-jit-emu-XXXXXX";

static int remove_entry(const char *path, const struct stat *s, int flag, struct FTW *f) {
  (void)s, (void)flag, (void)f;
  return remove(path);
}

static tg_extension *jit_lltm_ext(void) {
  cr_assert(mkdtemp(cache_dir), "mkdtemp: %s", strerror(errno));
  const char *sources[] = {TG_TEST_EXAMPLES_DIR "/lltm_ext.c", TG_TEST_EXAMPLES_DIR "/lltm_ext.cu"};
  tg_extension *ext =
      tg_extension_jit("lltm_ext_emu", 2, sources, (tg_jit_options){.cache_dir = cache_dir});
  cr_assert(ext, "%s", tg_last_error_message());
  return ext;
}

static void unload(tg_extension *ext) {
  cr_assert_eq(tg_extension_unload(ext), TG_OK, "%s", tg_last_error_message());
  nftw(cache_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

TG_TEST(jit_emu, lltm_ext_registers_its_cuda_kernels_and_passes_tg_op_check) {
  cr_assert(tg_cuda_is_available(), "the emulation reports a device");
  tg_extension *ext = jit_lltm_ext();
  const tg_op_desc *op = tg_op_lookup("lltm_ext");
  cr_assert(op && op->forward[TG_CUDA], "lltm_ext registered no CUDA forward");
  /* every sample: gradcheck, the refusal of double backward, and CPU against CUDA (forward
   * in F32 and F64, gradients in F64): the kernels of lltm_ext.cu, forward and backward */
  cr_assert_eq(tg_op_check(op, (tg_op_check_options){0}), TG_OK, "%s", tg_last_error_message());
  unload(ext);
}

/* The same by hand, so that the CUDA path is seen to run: outputs on the device, equal to
 * the CPU's, and the gradients too. */
TG_TEST(jit_emu, lltm_ext_on_cuda_matches_the_cpu) {
  tg_extension *ext = jit_lltm_ext();
  const tg_op_desc *op = tg_op_lookup("lltm_ext");
  tg_scope sc = tg_scope_begin();
  tg_generator *gen = tg_generator_new(3);
  const int64_t B = 3, I = 4, S = 5;
  tg_options f64 = {.dtype = TG_F64};
  tg_tensor *cpu[5] = {tg_randn(TG_SHAPE(B, I), f64, gen),
                       tg_randn(TG_SHAPE(3 * S, S + I), f64, gen),
                       tg_randn(TG_SHAPE(3 * S), f64, gen), tg_randn(TG_SHAPE(B, S), f64, gen),
                       tg_randn(TG_SHAPE(B, S), f64, gen)};
  tg_tensor *dev[5];
  for (int i = 0; i < 5; i++) {
    dev[i] = tg_to_device(cpu[i], TG_DEVICE_CUDA(0));
    cr_assert(dev[i], "%s", tg_last_error_message());
    tg_set_requires_grad(cpu[i], true);
    tg_set_requires_grad(dev[i], true);
  }
  tg_tensor *out_cpu[2], *out_dev[2];
  cr_assert_eq(tg_apply(op, 5, (const tg_tensor *const *)cpu, 0, NULL, 2, out_cpu), TG_OK, "%s",
               tg_last_error_message());
  cr_assert_eq(tg_apply(op, 5, (const tg_tensor *const *)dev, 0, NULL, 2, out_dev), TG_OK, "%s",
               tg_last_error_message());
  for (int j = 0; j < 2; j++) {
    cr_assert_eq(tg_tensor_device(out_dev[j]).type, TG_CUDA);
    tg_assert_close(out_dev[j], out_cpu[j], 1e-12, 1e-12);
  }
  tg_tensor *loss_cpu = tg_add(tg_sum(out_cpu[0]), tg_sum(tg_mul(out_cpu[1], out_cpu[1])));
  tg_tensor *loss_dev = tg_add(tg_sum(out_dev[0]), tg_sum(tg_mul(out_dev[1], out_dev[1])));
  cr_assert_eq(tg_backward(loss_cpu, NULL), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(tg_backward(loss_dev, NULL), TG_OK, "%s", tg_last_error_message());
  for (int i = 0; i < 5; i++) tg_assert_close(tg_grad(dev[i]), tg_grad(cpu[i]), 1e-10, 1e-12);
  tg_generator_free(gen);
  tg_scope_end(sc);
  unload(ext);
}

/* A failing launch (the first of the call: tg's cat, or the extension's kernel) is a tg
 * error, not a crash, and leaves nothing behind. */
TG_TEST(jit_emu, a_failing_launch_is_an_error) {
  tg_extension *ext = jit_lltm_ext();
  tg_scope sc = tg_scope_begin();
  tg_options cuda = {.dtype = TG_F64, .device = TG_DEVICE_CUDA(0)};
  const tg_tensor *in[5] = {tg_ones(TG_SHAPE(2, 3), cuda), tg_ones(TG_SHAPE(12, 7), cuda),
                            tg_ones(TG_SHAPE(12), cuda), tg_ones(TG_SHAPE(2, 4), cuda),
                            tg_ones(TG_SHAPE(2, 4), cuda)};
  tg_tensor *out[2];
  tg_emu_fail_launches(1);
  cr_assert_neq(tg_apply(tg_op_lookup("lltm_ext"), 5, in, 0, NULL, 2, out), TG_OK);
  tg_expect_error(TG_ERR_DEVICE, "launch");
  tg_emu_fail_launches(0);
  tg_scope_end(sc);
  unload(ext);
}
