/* The JIT in a program with tg linked in statically (this test links libtg.a, and so sees
 * tg's internals): the JIT refuses it, with a clear error, before any compiler runs (an
 * extension links libtg.so, whose registry would not be this program's); and allocation
 * failures on the way there, and in building the command lines, are clean TG_ERR_MEMORY
 * errors (test_jit, linked to libtg.so, cannot inject them). */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "testutil.h"

#include "alloc_sweep.h"
#include "ext/jit.h"
#include "tg/extension.h"

TG_TEST(jit_static, refused_with_a_clear_error) {
  tg_jit_options opts = {.cache_dir = "/nonexistent/tg-jit-static-test"};
  cr_assert_null(tg_extension_jit_inline("square", "int x;", NULL, opts));
  tg_expect_error(TG_ERR_EXTENSION, "tg_extension_jit_inline: tg is linked statically into",
                  "link libtg.so to load extensions");
  cr_assert_not(tg_extension_jit_compiled());
  cr_assert_null(tg_extension_jit("square", 1, (const char *const[]){__FILE__}, opts));
  tg_expect_error(TG_ERR_EXTENSION, "link libtg.so to load extensions");
}

/* tg_extension_jit up to the refusal: the sources read, $CC split into words. */
static tg_status jit_until_refused(void *user, double *out, int *n_out) {
  (void)user, (void)out, (void)n_out;
  tg_jit_options opts = {.cache_dir = "/nonexistent/tg-jit-static-test"};
  tg_extension *ext =
      tg_extension_jit("square", 2, (const char *const[]){__FILE__, __FILE__}, opts);
  cr_assert_null(ext);
  if (tg_last_error() != TG_ERR_EXTENSION) return tg_last_error();
  cr_assert(strstr(tg_last_error_message(), "link libtg.so"), "%s", tg_last_error_message());
  tg_clear_error();
  return TG_OK;
}

TG_TEST(jit_static, allocation_failures_before_the_refusal) {
  setenv("CC", "ccache  cc", 1);
  sweep_result r = sweep("tg_extension_jit in a static program", jit_until_refused, NULL);
  cr_assert_gt(r.failed, 0);
}

/* The command lines of a C and a CUDA source, with a toolchain made up here; results: each
 * command's length. */
static tg_status make_commands(void *user, double *out, int *n_out) {
  (void)user;
  char *cc[] = {"ccache", "cc"};
  tg__jit_toolchain tc = {.libtg = "/opt/tg/lib/libtg.so.0.1.0",
                          .libdir = "/opt/tg/lib",
                          .include_dir = "/opt/tg/include",
                          .cc = cc,
                          .n_cc = 2,
                          .nvcc = "nvcc",
                          .cuda_include_dir = "/cuda/include",
                          .cuda_library_dir = "/cuda/lib64"};
  tg__jit_source sources[2] = {{.name = "a.c", .text = "", .size = 0},
                               {.name = "b.cu", .text = "", .size = 0, .cuda = true}};
  tg__jit_request rq = {.fn = "make_commands",
                        .name = "ab",
                        .n_sources = 2,
                        .sources = sources,
                        .opts = {.n_cflags = 1,
                                 .cflags = (const char *const[]){"-DX=1"},
                                 .n_ldflags = 1,
                                 .ldflags = (const char *const[]){"-lm"}}};
  tg__jit_commands cmds;
  tg_status st = tg__jit_commands_make(&rq, &tc, "/cache/ab-0123456789abcdef", &cmds);
  if (st) return st;
  cr_assert_eq(cmds.n, 2);
  for (int c = 0; c < cmds.n; c++) out[(*n_out)++] = cmds.cmd[c].n;
  cr_assert_str_eq(cmds.cmd[0].arg[0], "nvcc");
  cr_assert_str_eq(cmds.cmd[0].arg[cmds.cmd[0].n - 1], "/cache/ab-0123456789abcdef/ab_cuda1.o");
  cr_assert_str_eq(cmds.cmd[1].arg[0], "ccache");
  cr_assert_str_eq(cmds.cmd[1].arg[1], "cc");
  cr_assert_str_eq(cmds.cmd[1].arg[cmds.cmd[1].n - 1], "-lm");
  cr_assert_null(cmds.cmd[1].arg[cmds.cmd[1].n]);
  tg__jit_commands_free(&cmds);
  return TG_OK;
}

TG_TEST(jit_static, allocation_failures_in_the_command_lines) {
  sweep_result r = sweep("tg__jit_commands_make", make_commands, NULL);
  cr_assert_gt(r.failed, 0);
}
