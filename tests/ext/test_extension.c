/* Extensions (include/tg/extension.h): load, call, gradcheck, unload, reload; all-or-nothing
 * registration; unloading refused while a graph refers to an extension's op; and every way a
 * library can fail to be an extension. The extensions are the files in tests/ext/, built by
 * tg_add_extension into TG_TEST_EXT_DIR. */
#define _GNU_SOURCE /* mkstemps */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"
#include "tg/extension.h"

static const char *ext_path(const char *name) {
  static char path[4096];
  snprintf(path, sizeof path, "%s/lib%s.so", TG_TEST_EXT_DIR, name);
  return path;
}

static tg_tensor *apply_square(tg_tensor *x) {
  const tg_op_desc *op = tg_op_lookup("ext_square");
  cr_assert(op, "%s", tg_last_error_message());
  return tg_apply1(op, 1, (const tg_tensor *const[]){x}, 0, NULL);
}

static tg_status square_fn(void *user, const tg_tensor *const *in, tg_tensor **out) {
  out[0] = tg_apply1(user, 1, in, 0, NULL);
  return out[0] ? TG_OK : tg_last_error();
}

TG_TEST(extension, load_call_gradcheck_unload_reload) {
  int builtin = tg_op_count();
  for (int round = 0; round < 2; round++) { /* the second round: reload after unload */
    tg_extension *ext = tg_extension_load(ext_path("ext_square"));
    cr_assert(ext, "%s", tg_last_error_message());
    cr_assert_eq(tg_op_count(), builtin + 2);
    cr_assert_eq(tg_extension_count(), 1);
    cr_assert_eq(tg_extension_at(0), ext);
    cr_assert_null(tg_extension_at(1));
    cr_assert_str_eq(tg_extension_path(ext), ext_path("ext_square"));
    cr_assert_eq(tg_extension_num_ops(ext), 2);
    cr_assert_str_eq(tg_extension_op_name(ext, 0), "ext_square");
    cr_assert_str_eq(tg_extension_op_name(ext, 1), "ext_negate");
    cr_assert_null(tg_extension_op_name(ext, 2));

    tg_scope sc = tg_scope_begin();
    tg_tensor *x = tg_test_tensor_of(TG_F64, TG_SHAPE(3), (double[]){1, -2, 3});
    tg_tensor *y = apply_square(x);
    tg_test_expect_values(y, 3, (double[]){1, 4, 9}, 0);
    cr_assert_str_eq(tg_op_lookup("ext_square")->name, "ext_square");
    cr_assert(tg_op_lookup("ext_square")->sample_inputs != NULL);
    tg_set_requires_grad(x, true);
    cr_assert_eq(tg_gradcheck(square_fn, (void *)tg_op_lookup("ext_square"), 1, &x, 1,
                              (tg_gradcheck_options){0}),
                 TG_OK, "%s", tg_last_error_message());
    /* by name, on the samples it registered (what `tg-op gradcheck ext_square` runs) */
    cr_assert_eq(tg_op_check(tg_op_lookup("ext_square"), (tg_op_check_options){0}), TG_OK, "%s",
                 tg_last_error_message());
    tg_tensor *n = tg_apply1(tg_op_lookup("ext_negate"), 1, (const tg_tensor *const[]){x}, 0, NULL);
    tg_test_expect_values(n, 3, (double[]){-1, 2, -3}, 0);
    tg_scope_end(sc);

    cr_assert_eq(tg_extension_unload(ext), TG_OK, "%s", tg_last_error_message());
    cr_assert_eq(tg_op_count(), builtin);
    cr_assert_eq(tg_extension_count(), 0);
    cr_assert_null(tg_op_lookup("ext_square"));
    tg_expect_error(TG_ERR_ARGUMENT, "no op named 'ext_square'");
  }
}

/* A graph node made by an extension's op keeps the extension loaded: unloading is refused
 * (and the extension stays usable) until the tensors whose history reaches it are gone. */
TG_TEST(extension, unload_refused_while_a_graph_refers_to_its_op) {
  tg_extension *ext = tg_extension_load(ext_path("ext_square"));
  cr_assert(ext, "%s", tg_last_error_message());
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_test_tensor_of(TG_F64, TG_SHAPE(2), (double[]){2, 3});
  tg_set_requires_grad(x, true);
  tg_tensor *z = tg_mul_scalar(apply_square(x), 2.0); /* the ext node is interior */
  cr_assert_eq(tg_extension_unload(ext), TG_ERR_STATE);
  tg_expect_error(TG_ERR_STATE, "tg_extension_unload", "ext_square", "1 graph node(s)");
  cr_assert_eq(tg_extension_count(), 1);
  cr_assert_eq(tg_backward(tg_sum(z), NULL), TG_OK, "%s", tg_last_error_message());
  tg_test_expect_values(tg_grad(x), 2, (double[]){8, 12}, 0); /* d(2x^2) = 4x */
  /* backward freed the saved tensors, not the nodes: still refused */
  cr_assert_eq(tg_extension_unload(ext), TG_ERR_STATE);
  tg_expect_error(TG_ERR_STATE, "ext_square");
  /* without grad mode nothing is recorded, so nothing pins the extension */
  tg_no_grad_begin();
  tg_tensor *plain = apply_square(x);
  tg_no_grad_end();
  cr_assert_null(tg_grad_fn_name(plain));
  tg_scope_end(sc);
  cr_assert_eq(tg_extension_unload(ext), TG_OK, "%s", tg_last_error_message());
}

TG_TEST(extension, a_clash_registers_nothing) {
  int before = tg_op_count();
  cr_assert_null(tg_extension_load(ext_path("ext_clash")));
  tg_expect_error(TG_ERR_ARGUMENT, "ext_clash", "an op named 'mul' already exists");
  cr_assert_eq(tg_op_count(), before);
  cr_assert_eq(tg_extension_count(), 0);
  cr_assert_null(tg_op_lookup("ext_clash_new"));
  tg_clear_error();
  cr_assert(tg_op_lookup("mul") != NULL); /* the built-in is untouched */
}

/* Two files offering the same op name: the second is refused whole, the first unharmed. */
TG_TEST(extension, a_clash_with_another_extension) {
  char copy[] = "/tmp/tg-ext-copy-XXXXXX.so";
  int fd = mkstemps(copy, 3);
  cr_assert(fd >= 0);
  FILE *in = fopen(ext_path("ext_square"), "rb"), *out = fdopen(fd, "wb");
  cr_assert(in && out);
  char buf[65536];
  for (size_t n; (n = fread(buf, 1, sizeof buf, in)) > 0;) fwrite(buf, 1, n, out);
  fclose(in);
  fclose(out);
  tg_extension *first = tg_extension_load(ext_path("ext_square"));
  cr_assert(first, "%s", tg_last_error_message());
  int with_first = tg_op_count();
  cr_assert_null(tg_extension_load(copy));
  tg_expect_error(TG_ERR_ARGUMENT, copy, "an op named 'ext_square' already exists");
  cr_assert_eq(tg_op_count(), with_first);
  cr_assert_eq(tg_extension_count(), 1);
  unlink(copy);
  cr_assert_eq(tg_extension_unload(first), TG_OK, "%s", tg_last_error_message());
}

TG_TEST(extension, loading_one_twice_is_refused) {
  tg_extension *ext = tg_extension_load(ext_path("ext_square"));
  cr_assert(ext, "%s", tg_last_error_message());
  cr_assert_null(tg_extension_load(ext_path("ext_square")));
  tg_expect_error(TG_ERR_STATE, "is already loaded");
  cr_assert_eq(tg_extension_count(), 1);
  cr_assert_eq(tg_extension_unload(ext), TG_OK, "%s", tg_last_error_message());
}

TG_TEST(extension, abi_mismatch) {
  cr_assert_null(tg_extension_load(ext_path("ext_abi")));
  tg_expect_error(TG_ERR_EXTENSION, "ext_abi", "built for extension ABI 999", "this tg",
                  "has ABI 2", "rebuild it");
}

TG_TEST(extension, missing_entry_point) {
  cr_assert_null(tg_extension_load(ext_path("ext_no_entry")));
  tg_expect_error(TG_ERR_EXTENSION, "ext_no_entry", "has no tg_extension_init",
                  "not a tg extension");
}

TG_TEST(extension, not_an_extension) {
  cr_assert_null(tg_extension_load(ext_path("ext_plain")));
  tg_expect_error(TG_ERR_EXTENSION, "ext_plain", "has no tg_extension_abi");
}

TG_TEST(extension, missing_file) {
  cr_assert_null(tg_extension_load("/nonexistent/libnothing.so"));
  tg_expect_error(TG_ERR_EXTENSION, "cannot load '/nonexistent/libnothing.so'");
}

/* dlopen would block forever opening a FIFO: refused at once, named. */
TG_TEST(extension, fifo_is_refused_without_waiting, .timeout = 20) {
  char dir[] = "/tmp/tg-test-extension-XXXXXX";
  cr_assert(mkdtemp(dir));
  char fifo[64];
  snprintf(fifo, sizeof fifo, "%s/libpipe.so", dir);
  cr_assert_eq(mkfifo(fifo, 0600), 0);
  cr_assert_null(tg_extension_load(fifo));
  tg_expect_error(TG_ERR_EXTENSION, "tg_extension_load: '", "libpipe.so' is not a regular file",
                  "a FIFO");
  cr_assert_null(tg_extension_load(dir));
  tg_expect_error(TG_ERR_EXTENSION, "is not a regular file: it is a directory");
  unlink(fifo);
  rmdir(dir);
}

TG_TEST(extension, failing_entry_point_registers_nothing) {
  int before = tg_op_count();
  cr_assert_null(tg_extension_load(ext_path("ext_failing")));
  tg_expect_error(TG_ERR_EXTENSION, "the entry point of", "ext_failing",
                  "the device it needs is missing");
  cr_assert_eq(tg_op_count(), before);
  cr_assert_null(tg_op_lookup("ext_failing_op"));
  tg_clear_error();
}

TG_TEST(extension, an_op_offered_twice) {
  int before = tg_op_count();
  cr_assert_null(tg_extension_load(ext_path("ext_twice")));
  tg_expect_error(TG_ERR_EXTENSION, "op 'ext_twice_op' is offered twice");
  cr_assert_eq(tg_op_count(), before);
}

TG_TEST(extension, bad_arguments) {
  cr_assert_null(tg_extension_load(NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_extension_load", "path is NULL or empty");
  cr_assert_null(tg_extension_load(""));
  tg_expect_error(TG_ERR_ARGUMENT, "path is NULL or empty");
  cr_assert_eq(tg_extension_unload(NULL), TG_OK);
  char not_one[64] = {0};
  cr_assert_eq(tg_extension_unload((tg_extension *)not_one), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "not a loaded extension");
  cr_assert_null(tg_extension_path(NULL));
  cr_assert_eq(tg_extension_num_ops(NULL), 0);
  cr_assert_null(tg_extension_op_name(NULL, 0));
  cr_assert_null(tg_extension_at(-1));
}
