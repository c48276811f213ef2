/* Internal error helpers. Not part of the public API. */
#ifndef TG_ERROR_IMPL_H
#define TG_ERROR_IMPL_H

/* Prefixes the pending error's message with "prefix: " unless it already starts so, without
 * calling the error handler again (it saw the error where it arose). Lets a public entry
 * point name itself first for errors raised below it, e.g. by an op inside a backward. */
void tg__error_prefix(const char *prefix);

/* What a file's st_mode says it is, for messages that refuse one: "a regular file",
 * "a directory", "a FIFO (named pipe)", "a socket", "a character device", ... */
const char *tg__file_kind(unsigned mode);

#endif
