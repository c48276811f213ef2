/* tg_extension_jit and tg_extension_jit_inline (include/tg/extension.h): check the
 * arguments, gather the sources, build or find the library (jit_build.c), and load it with
 * tg_extension_load while the cache entry is still locked (nobody can replace the verified
 * library before it is loaded). */
#define _GNU_SOURCE /* O_CLOEXEC */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ext/jit.h"
#include "tensor/check.h"
#include "tensor/error_impl.h"
#include "tensor/host_memory.h"

#define SOURCE_MAX_BYTES ((size_t)64 << 20)

static _Thread_local bool last_call_compiled;

bool tg_extension_jit_compiled(void) { return last_call_compiled; }

static tg_status check_name(const char *fn, const char *name) {
  if (!tg__check_not_null(fn, "name", name)) return tg_last_error();
  size_t len = strlen(name);
  size_t ok = strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_");
  return tg__check_status(len > 0 && len <= TG_JIT_NAME_MAX && ok == len, TG_ERR_ARGUMENT, fn,
                          "name '%s' must be 1 to %d characters of [A-Za-z0-9_]", name,
                          TG_JIT_NAME_MAX);
}

static tg_status check_flags(const char *fn, const char *what, int n, const char *const *flags) {
  if (!tg__check(n >= 0 && (n == 0 || flags), TG_ERR_ARGUMENT, fn,
                 "opts.n_%s is %d with opts.%s %s", what, n, what, flags ? "given" : "NULL"))
    return tg_last_error();
  for (int i = 0; i < n; i++)
    if (!tg__check(flags[i], TG_ERR_ARGUMENT, fn, "opts.%s[%d] is NULL", what, i))
      return tg_last_error();
  return TG_OK;
}

static tg_status check_options(const char *fn, const tg_jit_options *opts) {
  tg_status st = check_flags(fn, "cflags", opts->n_cflags, opts->cflags);
  return st ? st : check_flags(fn, "ldflags", opts->n_ldflags, opts->ldflags);
}

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n > k && strcmp(s + n - k, suffix) == 0;
}

static tg_status read_source(const char *fn, tg__jit_source *src) {
  /* O_NONBLOCK: a FIFO would block the open (and the read) until a writer comes */
  int fd = open(src->name, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  struct stat s;
  if (fd < 0 || fstat(fd, &s) != 0) {
    int err = errno;
    if (fd >= 0) close(fd);
    return tg_set_error(TG_ERR_EXTENSION, "%s: cannot read source '%s': %s", fn, src->name,
                        strerror(err));
  }
  tg_status st = TG_OK;
  if (!S_ISREG(s.st_mode))
    st = tg_set_error(TG_ERR_EXTENSION, "%s: source '%s' is not a regular file: it is %s", fn,
                      src->name, tg__file_kind((unsigned)s.st_mode));
  else if ((size_t)s.st_size > SOURCE_MAX_BYTES)
    st = tg_set_error(TG_ERR_EXTENSION, "%s: source '%s' is %lld bytes, more than the %zu read", fn,
                      src->name, (long long)s.st_size, SOURCE_MAX_BYTES);
  else if (!(src->owned_text = tg__host_malloc((size_t)s.st_size + 1)))
    st = tg_set_error(TG_ERR_MEMORY, "%s: out of memory for source '%s' (%lld bytes)", fn,
                      src->name, (long long)s.st_size);
  size_t size = 0;
  while (!st) {
    ssize_t got = read(fd, src->owned_text + size, (size_t)s.st_size - size);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0)
      st = tg_set_error(TG_ERR_EXTENSION, "%s: cannot read source '%s': %s", fn, src->name,
                        strerror(errno));
    if (got <= 0) break; /* the end (it may have shrunk meanwhile: what was read is hashed) */
    size += (size_t)got;
    if (size == (size_t)s.st_size) break;
  }
  close(fd);
  src->text = src->owned_text;
  src->size = size;
  return st;
}

void tg__jit_request_free(tg__jit_request *rq) {
  for (int i = 0; rq->sources && i < rq->n_sources; i++) tg__host_free(rq->sources[i].owned_text);
  tg__host_free(rq->sources);
  rq->sources = NULL;
}

static tg_status alloc_sources(tg__jit_request *rq, int n) {
  rq->sources = tg__host_calloc((size_t)n, sizeof *rq->sources);
  if (!rq->sources) return tg_set_error(TG_ERR_MEMORY, "%s: out of memory", rq->fn);
  rq->n_sources = n;
  return TG_OK;
}

/* Builds (or finds) and loads; frees the request. */
static tg_extension *build_and_load(tg__jit_request *rq, tg_status st) {
  tg__jit_build_result res = {.lock_fd = -1};
  if (!st) st = tg__jit_build(rq, &res);
  last_call_compiled = res.compiled;
  tg_extension *ext = NULL;
  if (!st) {
    ext = tg_extension_load(res.lib);
    if (!ext) tg__error_prefix(rq->fn); /* the loader's reason, e.g. no entry point */
    tg__jit_unlock(res.lock_fd);
  }
  tg__jit_request_free(rq);
  return ext;
}

tg_extension *tg_extension_jit(const char *name, int n_sources, const char *const *sources,
                               tg_jit_options opts) {
  tg__jit_request rq = {.fn = "tg_extension_jit", .name = name, .opts = opts};
  last_call_compiled = false;
  tg_status st = check_name(rq.fn, name);
  if (!st) st = check_options(rq.fn, &opts);
  if (!st)
    st = tg__check_status(n_sources >= 1 && sources, TG_ERR_ARGUMENT, rq.fn,
                          "'%s' needs at least one source (n_sources %d%s)", name, n_sources,
                          sources ? "" : ", sources NULL");
  if (!st) st = alloc_sources(&rq, n_sources);
  for (int i = 0; !st && i < n_sources; i++) {
    tg__jit_source *src = &rq.sources[i];
    if (!tg__check(sources[i], TG_ERR_ARGUMENT, rq.fn, "sources[%d] is NULL", i) ||
        !tg__check(ends_with(sources[i], ".c") || ends_with(sources[i], ".cu"), TG_ERR_ARGUMENT,
                   rq.fn, "source '%s' is neither .c nor .cu", sources[i]))
      st = tg_last_error();
    else
      st = tg__jit_path(rq.fn, src->name, sizeof src->name, "%s", sources[i]);
    if (!st) {
      src->cuda = ends_with(sources[i], ".cu");
      st = read_source(rq.fn, src);
    }
  }
  return build_and_load(&rq, st);
}

tg_extension *tg_extension_jit_inline(const char *name, const char *c_source,
                                      const char *cuda_source, tg_jit_options opts) {
  tg__jit_request rq = {
      .fn = "tg_extension_jit_inline", .name = name, .inline_sources = true, .opts = opts};
  last_call_compiled = false;
  tg_status st = check_name(rq.fn, name);
  if (!st) st = check_options(rq.fn, &opts);
  if (!st)
    st = tg__check_status(c_source || cuda_source, TG_ERR_ARGUMENT, rq.fn,
                          "'%s' needs c_source or cuda_source", name);
  if (!st) st = alloc_sources(&rq, (c_source != NULL) + (cuda_source != NULL));
  /* Written into the entry as <name>.c / <name>.cu: the name the compiler's messages show. */
  for (int i = 0; !st && i < rq.n_sources; i++) {
    tg__jit_source *src = &rq.sources[i];
    src->cuda = !c_source || i == 1;
    src->text = src->cuda ? cuda_source : c_source;
    src->size = strlen(src->text);
    st = tg__jit_path(rq.fn, src->name, sizeof src->name, "%s.%s", name, src->cuda ? "cu" : "c");
  }
  return build_and_load(&rq, st);
}
