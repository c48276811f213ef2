/* A JIT test source that does not compile: tests/ext/test_jit.c looks for this identifier in
 * the error message. */
#include <tg/extension.h>

int jit_broken(void) { return jit_test_undeclared_identifier; }
