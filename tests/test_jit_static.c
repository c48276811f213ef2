/* A program with tg linked in statically (this test links libtg.a) cannot JIT extensions:
 * an extension links libtg.so, whose registry would not be this program's. The refusal is
 * a clear error, before any compiler runs. */
#include "testutil.h"
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
