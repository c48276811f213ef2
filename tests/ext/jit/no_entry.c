/* A JIT test source that compiles but defines no TG_EXTENSION entry point. */
#include <tg/tg.h>

int jit_no_entry_answer(void) { return 42; }
