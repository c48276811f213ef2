/* The calibration's cache: one text file per CPU and library versions, in the user's cache
 * directory, so that only the first process on a machine spends the seconds measuring.
 *
 *   tg gemm engines 3, 160 classes
 *   key <cpu brand>|<vendor> <family> <model> <stepping>|<tg threads>|tg <ver>|BLIS ... MKL ...
 *   engines <name> <name> ...
 *   <class> <chosen engine> <us of each engine, -1: not taken>     one line per class
 *   end
 *
 * A file is used only when its key and engine list are this process's and it holds every
 * class once, with known engines: anything else is a foreign or corrupt cache, ignored by
 * the caller with a message (and replaced by a new calibration). The file is written to a
 * temporary name beside it and renamed over it: readers see an old or a new file, never half
 * of one. The choice is performance only: no code is loaded from it. */
#define _POSIX_C_SOURCE 200809L /* mkstemp, fdopen */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ops/cpu/cpu_features.h"
#include "ops/cpu/gemm_engine.h"
#include "tensor/fnv1a.h"
#include "tg/cpu.h"

#define TG_GEMM_CACHE_MAGIC "tg gemm engines 3, 160 classes"

void tg__gemm_cache_key(char *buf, size_t size) {
  const tg_cpu_features f = tg_cpu_features_read();
  char versions[256];
  tg__gemm_engine_versions(versions, sizeof versions);
  /* The brand string is padded with spaces by some vendors: trimmed. */
  const char *brand = f.brand;
  while (*brand == ' ') brand++;
  size_t len = strlen(brand);
  while (len && brand[len - 1] == ' ') len--;
  snprintf(buf, size, "%.*s|%s %d %d %d|threads %d|tg %s|%s", (int)len, brand, f.vendor, f.family,
           f.model, f.stepping, tg_get_num_threads(), tg_version_string(), versions);
}

/* Every directory of path's parent, created 0700 where missing. */
static bool make_parent_dirs(const char *path) {
  char dir[PATH_MAX];
  if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir) return false;
  char *slash = strrchr(dir, '/');
  if (!slash || slash == dir) return true;
  *slash = '\0';
  for (char *p = dir + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) return false;
    *p = '/';
  }
  return mkdir(dir, 0700) == 0 || errno == EEXIST;
}

bool tg__gemm_cache_path(char *buf, size_t size) {
  const char *env = getenv("TG_GEMM_CACHE");
  if (env) return env[0] && strcmp(env, "off") != 0 && snprintf(buf, size, "%s", env) < (int)size;
  char key[512];
  tg__gemm_cache_key(key, sizeof key);
  const unsigned long long hash = (unsigned long long)tg__fnv1a(TG_FNV1A_START, key, strlen(key));
  int n;
  if ((env = getenv("XDG_CACHE_HOME")) && env[0] == '/') /* the spec: absolute only */
    n = snprintf(buf, size, "%s/tg/gemm-engines-%016llx.txt", env, hash);
  else if ((env = getenv("HOME")) && env[0])
    n = snprintf(buf, size, "%s/.cache/tg/gemm-engines-%016llx.txt", env, hash);
  else
    return false;
  return n > 0 && n < (int)size;
}

static bool fail(char *why, size_t size, const char *what) {
  snprintf(why, size, "%s", what);
  return false;
}

/* The next line without its newline; false at the end or for a line too long. */
static bool next_line(FILE *f, char *line, size_t size) {
  if (!fgets(line, (int)size, f)) return false;
  size_t len = strlen(line);
  if (len == 0 || line[len - 1] != '\n') return false;
  line[len - 1] = '\0';
  return true;
}

static bool parse(FILE *f, tg_gemm_table *t, char *why, size_t why_size) {
  char line[1024], expect[1024];
  if (!next_line(f, line, sizeof line)) return fail(why, why_size, "empty or unterminated");
  if (strncmp(line, "tg gemm engines ", 16) == 0 && strcmp(line, TG_GEMM_CACHE_MAGIC) != 0)
    return fail(why, why_size, "written by another version of the calibration");
  if (strcmp(line, TG_GEMM_CACHE_MAGIC) != 0)
    return fail(why, why_size, "not a tg GEMM engine cache (first line)");
  tg__gemm_cache_key(expect, sizeof expect);
  if (!next_line(f, line, sizeof line) || strncmp(line, "key ", 4) != 0)
    return fail(why, why_size, "no key line");
  if (strcmp(line + 4, expect) != 0)
    return fail(why, why_size, "made for another CPU, thread count or library version");
  const int engines = tg__gemm_engine_count();
  char *end = expect;
  end += snprintf(expect, sizeof expect, "engines");
  for (int e = 0; e < engines; e++)
    end +=
        snprintf(end, sizeof expect - (size_t)(end - expect), " %s", tg__gemm_engine_at(e)->name);
  if (!next_line(f, line, sizeof line) || strcmp(line, expect) != 0)
    return fail(why, why_size, "lists other engines than this process has");
  bool seen[TG_GEMM_CLASSES] = {false};
  for (int i = 0; i < TG_GEMM_CLASSES; i++) {
    char cls_name[64], chosen[32];
    int used = 0;
    if (!next_line(f, line, sizeof line) ||
        sscanf(line, "%63s %31s%n", cls_name, chosen, &used) != 2)
      return fail(why, why_size, "a class line is missing or malformed");
    const int cls = tg__gemm_class_named(cls_name), e = tg__gemm_engine_named(chosen);
    if (cls < 0 || seen[cls] || e < 0)
      return fail(why, why_size, "an unknown or repeated class, or an unknown engine");
    seen[cls] = true;
    t->chosen[cls] = e;
    const char *p = line + used;
    for (int j = 0; j < TG_GEMM_MAX_ENGINES; j++) {
      t->us[cls][j] = -1;
      if (j >= engines) continue;
      char *after = NULL;
      const double us = strtod(p, &after);
      if (after == p || !(us >= -2 && us < 1e12)) return fail(why, why_size, "a bad time");
      t->us[cls][j] = (float)us;
      p = after;
    }
    if (*p != '\0') return fail(why, why_size, "a class line is too long");
  }
  if (!next_line(f, line, sizeof line) || strcmp(line, "end") != 0 || fgetc(f) != EOF)
    return fail(why, why_size, "truncated, or more after its end");
  t->threads = tg_get_num_threads();
  return true;
}

int tg__gemm_cache_read(const char *path, tg_gemm_table *table, char *why, size_t why_size) {
  FILE *f = fopen(path, "r");
  if (!f) {
    snprintf(why, why_size, "%s", strerror(errno));
    return errno == ENOENT ? 0 : -1;
  }
  static tg_gemm_table t; /* 4.6 KB; the caller holds the choice's lock or once */
  const bool ok = parse(f, &t, why, why_size);
  fclose(f);
  if (ok) *table = t;
  return ok ? 1 : -1;
}

bool tg__gemm_cache_write(const char *path, const tg_gemm_table *table, char *why,
                          size_t why_size) {
  char tmp[PATH_MAX + 16], key[512];
  if (snprintf(tmp, sizeof tmp, "%s.XXXXXX", path) >= (int)sizeof tmp)
    return fail(why, why_size, "path too long");
  if (!make_parent_dirs(path)) {
    snprintf(why, why_size, "cannot create its directory: %s", strerror(errno));
    return false;
  }
  const int fd = mkstemp(tmp);
  if (fd < 0) {
    snprintf(why, why_size, "cannot create a temporary file beside it: %s", strerror(errno));
    return false;
  }
  FILE *f = fdopen(fd, "w");
  if (!f) {
    close(fd);
    unlink(tmp);
    return fail(why, why_size, "fdopen failed");
  }
  tg__gemm_cache_key(key, sizeof key);
  const int engines = tg__gemm_engine_count();
  fprintf(f, "%s\nkey %s\nengines", TG_GEMM_CACHE_MAGIC, key);
  for (int e = 0; e < engines; e++) fprintf(f, " %s", tg__gemm_engine_at(e)->name);
  fputc('\n', f);
  for (int cls = 0; cls < TG_GEMM_CLASSES; cls++) {
    char name[64];
    tg__gemm_class_name(cls, name, sizeof name);
    fprintf(f, "%s %s", name, tg__gemm_engine_at(table->chosen[cls])->name);
    for (int e = 0; e < engines; e++) fprintf(f, " %.1f", (double)table->us[cls][e]);
    fputc('\n', f);
  }
  fputs("end\n", f);
  const bool written = !ferror(f);
  const int saved = errno;
  if (fclose(f) != 0 || !written) {
    unlink(tmp);
    snprintf(why, why_size, "writing failed: %s", strerror(saved));
    return false;
  }
  if (rename(tmp, path) != 0) {
    snprintf(why, why_size, "cannot rename the temporary file over it: %s", strerror(errno));
    unlink(tmp);
    return false;
  }
  return true;
}
