/* A shared library with tg's ABI marker but no entry point. */
#include <tg/extension.h>

TG_EXTENSION_EXPORT const uint32_t tg_extension_abi = TG_EXTENSION_ABI_VERSION;
TG_EXTENSION_EXPORT int ext_no_entry_something(void);
int ext_no_entry_something(void) { return 42; }
