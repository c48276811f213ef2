/* Runs one compiler command: posix_spawnp with an argv array (no shell), stdin from
 * /dev/null, stdout and stderr into the entry's build log. A failure's message carries the
 * log's path and the first error lines from it. */
#define _GNU_SOURCE /* dprintf, strcasestr */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ext/jit.h"
#include "tensor/host_memory.h"

extern char **environ;

#define ERROR_LINES_MAX 5
#define ERROR_LINE_CHARS 160
#define LOG_READ_MAX ((size_t)64 << 10)

/* The command as a shell would show it ('quoted' where it has odd characters), one line. */
static void write_command(int fd, const char *prefix, const tg__jit_argv *argv) {
  dprintf(fd, "%s", prefix);
  for (int i = 0; i < argv->n; i++) {
    const char *a = argv->arg[i];
    bool plain = *a && strspn(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                 "0123456789-_./=,:+@%") == strlen(a);
    dprintf(fd, plain ? "%s%s" : "%s'%s'", i ? " " : "", a);
  }
  dprintf(fd, "\n");
}

/* Appends up to ERROR_LINES_MAX lines of the log to msg: those that say "error" (our own
 * "$ command" lines excepted), else the first lines. */
static void error_lines(const char *log_path, char *msg, size_t size) {
  msg[0] = '\0';
  char *text = tg__host_malloc(LOG_READ_MAX + 1);
  int fd = text ? open(log_path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) : -1;
  ssize_t got = fd >= 0 ? read(fd, text, LOG_READ_MAX) : -1;
  if (fd >= 0) close(fd);
  if (got <= 0) {
    tg__host_free(text);
    return;
  }
  text[got] = '\0';
  for (int pass = 0; pass < 2 && !msg[0]; pass++) {
    int taken = 0;
    for (char *line = text; *line && taken < ERROR_LINES_MAX;) {
      size_t len = strcspn(line, "\n");
      char save = line[len];
      line[len] = '\0';
      if (line[0] && line[0] != '$' && (pass == 1 || strcasestr(line, "error"))) {
        size_t used = strlen(msg);
        snprintf(msg + used, size - used, "\n  %.*s", ERROR_LINE_CHARS, line);
        taken++;
      }
      line[len] = save;
      line += len + (save != '\0');
    }
  }
  tg__host_free(text);
}

tg_status tg__jit_run(const char *fn, const char *name, const tg__jit_argv *argv, int log_fd,
                      const char *log_path, bool verbose) {
  const char *program = argv->arg[0];
  write_command(log_fd, "$ ", argv);
  if (verbose) write_command(STDERR_FILENO, "tg jit: ", argv);
  posix_spawn_file_actions_t actions;
  int rc = posix_spawn_file_actions_init(&actions);
  if (rc) return tg_set_error(TG_ERR_EXTENSION, "%s: cannot run a compiler: %s", fn, strerror(rc));
  rc = posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  if (!rc) rc = posix_spawn_file_actions_adddup2(&actions, log_fd, STDOUT_FILENO);
  if (!rc) rc = posix_spawn_file_actions_adddup2(&actions, log_fd, STDERR_FILENO);
  pid_t pid = -1;
  if (!rc) rc = posix_spawnp(&pid, program, &actions, NULL, argv->arg, environ);
  posix_spawn_file_actions_destroy(&actions);
  bool is_nvcc = strstr(program, "nvcc") != NULL;
  if (rc == ENOENT)
    return tg_set_error(TG_ERR_EXTENSION, "%s: building '%s': compiler '%s' not found (set %s)", fn,
                        name, program, is_nvcc ? "NVCC to CUDA's nvcc" : "CC to a C compiler");
  if (rc)
    return tg_set_error(TG_ERR_EXTENSION, "%s: building '%s': cannot run '%s': %s", fn, name,
                        program, strerror(rc));
  int status;
  pid_t waited;
  while ((waited = waitpid(pid, &status, 0)) < 0 && errno == EINTR) continue;
  if (waited < 0)
    return tg_set_error(TG_ERR_EXTENSION, "%s: building '%s': lost '%s': %s", fn, name, program,
                        strerror(errno));
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return TG_OK;
  char how[64];
  if (WIFEXITED(status))
    snprintf(how, sizeof how, "exited with status %d", WEXITSTATUS(status));
  else
    snprintf(how, sizeof how, "was killed by signal %d",
             WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  char lines[ERROR_LINES_MAX * (ERROR_LINE_CHARS + 4) + 1];
  error_lines(log_path, lines, sizeof lines);
  return tg_set_error(TG_ERR_EXTENSION, "%s: building '%s' failed: '%s' %s (log: %s)%s", fn, name,
                      program, how, log_path, lines);
}
