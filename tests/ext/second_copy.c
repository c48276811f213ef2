/* A program with tg linked in statically loads an extension that links libtg.so: the
 * extension would run against a second copy of tg (its own registry, errors, scopes), so
 * loading must be refused with an error that says so. Exits 0 when it is. */
#include <stdio.h>
#include <string.h>
#include <tg/extension.h>

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  tg_extension *ext = tg_extension_load(argv[1]);
  if (ext) {
    fprintf(stderr, "second_copy: '%s' was loaded\n", argv[1]);
    tg_extension_unload(ext);
    return 1;
  }
  const char *msg = tg_last_error_message();
  printf("second_copy: refused: %s\n", msg);
  return tg_last_error() == TG_ERR_EXTENSION && strstr(msg, "second copy of tg") ? 0 : 1;
}
