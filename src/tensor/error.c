/* The thread-local error: a code and a message, kept until cleared. */
#define _DEFAULT_SOURCE /* S_IFSOCK */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "error_impl.h"
#include "tg/types.h"

#define TG_ERROR_MESSAGE_MAX 1024

static _Thread_local tg_status current_status = TG_OK;
static _Thread_local char current_message[TG_ERROR_MESSAGE_MAX];
static tg_error_handler error_handler = NULL;
static void *error_handler_data = NULL;

tg_status tg_last_error(void) { return current_status; }

const char *tg_last_error_message(void) { return current_status == TG_OK ? "" : current_message; }

void tg_clear_error(void) {
  current_status = TG_OK;
  current_message[0] = '\0';
}

void tg_set_error_handler(tg_error_handler handler, void *user_data) {
  error_handler = handler;
  error_handler_data = user_data;
}

tg_status tg_set_error(tg_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(current_message, sizeof current_message, fmt, ap);
  va_end(ap);
  current_status = status;
  if (error_handler) error_handler(status, current_message, error_handler_data);
  return status;
}

void tg__error_prefix(const char *prefix) {
  size_t n = strlen(prefix);
  if (current_status == TG_OK ||
      (strncmp(current_message, prefix, n) == 0 && current_message[n] == ':'))
    return;
  char old[TG_ERROR_MESSAGE_MAX];
  memcpy(old, current_message, sizeof old);
  int room = (int)(sizeof current_message) - (int)n - 3; /* the old text may lose its end */
  snprintf(current_message, sizeof current_message, "%s: %.*s", prefix, room > 0 ? room : 0, old);
}

const char *tg__file_kind(unsigned mode) {
  switch (mode & S_IFMT) {
  case S_IFREG:
    return "a regular file";
  case S_IFDIR:
    return "a directory";
  case S_IFIFO:
    return "a FIFO (named pipe)";
  case S_IFSOCK:
    return "a socket";
  case S_IFCHR:
    return "a character device";
  case S_IFBLK:
    return "a block device";
  default:
    return "a file of another kind";
  }
}

const char *tg_status_name(tg_status status) {
  static const char *const names[TG_NUM_STATUS] = {
      [TG_OK] = "TG_OK",
      [TG_ERR_ARGUMENT] = "TG_ERR_ARGUMENT",
      [TG_ERR_SHAPE] = "TG_ERR_SHAPE",
      [TG_ERR_DTYPE] = "TG_ERR_DTYPE",
      [TG_ERR_DEVICE] = "TG_ERR_DEVICE",
      [TG_ERR_INDEX] = "TG_ERR_INDEX",
      [TG_ERR_MEMORY] = "TG_ERR_MEMORY",
      [TG_ERR_STATE] = "TG_ERR_STATE",
      [TG_ERR_UNSUPPORTED] = "TG_ERR_UNSUPPORTED",
      [TG_ERR_GRADCHECK] = "TG_ERR_GRADCHECK",
      [TG_ERR_EXTENSION] = "TG_ERR_EXTENSION",
      [TG_ERR_IO] = "TG_ERR_IO",
      [TG_ERR_FORMAT] = "TG_ERR_FORMAT",
      [TG_ERR_DIST] = "TG_ERR_DIST",
  };
  if ((unsigned)status >= TG_NUM_STATUS) return "TG_ERR_UNKNOWN";
  return names[status];
}

char *tg_format_sizes(char *buf, size_t buflen, int ndim, const int64_t *sizes) {
  size_t used = 0;
  if (buflen == 0) return buf;
  used += (size_t)snprintf(buf, buflen, "[");
  for (int d = 0; d < ndim && used < buflen; d++)
    used += (size_t)snprintf(buf + used, buflen - used, d ? ", %lld" : "%lld", (long long)sizes[d]);
  if (used < buflen) snprintf(buf + used, buflen - used, "]");
  return buf;
}
