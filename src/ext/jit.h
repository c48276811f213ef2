/* The pieces of tg_extension_jit (include/tg/extension.h): what to compile with
 * (jit_toolchain.c), the compiler command lines (jit_commands.c), running them
 * (jit_spawn.c), the cache (jit_cache.c), one build (jit_build.c) and the public calls
 * (jit.c). Not public. */
#ifndef TG_EXT_JIT_H
#define TG_EXT_JIT_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "ext/sha256.h"
#include "tg/extension.h"

#ifndef PATH_MAX
#define PATH_MAX 4096
#endif
#define TG_JIT_NAME_MAX 64 /* characters of an extension's name */

/* One source: its name and text are what the key hashes; the compiler reads it where
 * tg__jit_source_path says (for inline sources, the copy written into the cache entry). */
typedef struct tg__jit_source {
  char name[PATH_MAX]; /* the path as given, or "<name>.c" / "<name>.cu" when inline */
  const char *text;
  size_t size;
  char *owned_text; /* text read from a file, freed with the request */
  bool cuda;
} tg__jit_source;

typedef struct tg__jit_request {
  const char *fn; /* the public function, for messages */
  const char *name;
  bool inline_sources;
  int n_sources;
  tg__jit_source *sources;
  tg_jit_options opts;
} tg__jit_request;

/* ---- the compilers and the running tg (jit_toolchain.c) ---- */
typedef struct tg__jit_toolchain {
  char libtg[PATH_MAX];       /* the running libtg.so, resolved */
  char libdir[PATH_MAX];      /* its directory: the extension's rpath */
  char include_dir[PATH_MAX]; /* tg's headers */
  char *cc_text;              /* a copy of $CC (else "cc"), cut at blanks into ... */
  char **cc;                  /* ... its words (n_cc of them) */
  int n_cc;
  const char *nvcc; /* $NVCC, else the configured nvcc, else "nvcc" */
  /* The library's CUDA device is the CPU emulation (tg__cuda_is_emulated): .cu sources are
   * compiled by cxx ($CXX, else c++) against the emulated runtime in emulation_src_dir. */
  bool emulated;
  const char *cxx;
  const char *emulation_src_dir;
  const char *cuda_include_dir, *cuda_library_dir; /* configured; "" without CUDA */
} tg__jit_toolchain;
/* Finds the running libtg.so and its headers; refuses a program with tg linked in
 * statically. */
tg_status tg__jit_toolchain_init(tg__jit_toolchain *tc, const char *fn);
void tg__jit_toolchain_free(tg__jit_toolchain *tc);
/* TG_ERR_EXTENSION unless this tg can run a CUDA source (named in the message). */
tg_status tg__jit_check_cuda(const char *fn, const char *source);
/* nvcc's -gencode flags for tg's own architectures, NULL-terminated. */
const char *const *tg__jit_nvcc_arch_flags(void);

/* ---- command lines (jit_commands.c) ---- */
typedef struct tg__jit_argv {
  char **arg; /* NULL-terminated, for posix_spawnp */
  int n, cap;
} tg__jit_argv;
tg_status tg__jit_argv_push(tg__jit_argv *a, const char *s);
tg_status tg__jit_argv_pushf(tg__jit_argv *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void tg__jit_argv_free(tg__jit_argv *a);

typedef struct tg__jit_commands {
  int n;
  tg__jit_argv *cmd; /* one nvcc -c per .cu source, then the link */
} tg__jit_commands;
/* The commands that build the library into <entry>/lib<name>.so.tmp. The key is computed
 * over them with entry = TG_JIT_ENTRY_PLACEHOLDER (an entry's name holds its key). */
#define TG_JIT_ENTRY_PLACEHOLDER "<cache-entry>"
tg_status tg__jit_commands_make(const tg__jit_request *rq, const tg__jit_toolchain *tc,
                                const char *entry, tg__jit_commands *out);
void tg__jit_commands_free(tg__jit_commands *c);
/* Where a source is compiled from: its own path, or its copy in the entry when inline. */
tg_status tg__jit_source_path(const tg__jit_request *rq, int index, const char *entry, char *buf,
                              size_t size);

/* ---- running a compiler (jit_spawn.c) ---- */
/* Runs argv (no shell), its output appended to log_fd (log_path names it in messages);
 * TG_ERR_EXTENSION when it cannot be started or fails. */
tg_status tg__jit_run(const char *fn, const char *name, const tg__jit_argv *argv, int log_fd,
                      const char *log_path, bool verbose);

/* ---- the cache (jit_cache.c) ---- */
/* The cache directory (opts, else the environment), created 0700 and checked: ours, a
 * directory, not a symlink, not writable by group or others. */
tg_status tg__jit_cache_dir(const char *fn, const tg_jit_options *opts, char *dir, size_t size);
/* Creates (if needed) and checks the entry directory, then opens and flocks its lock file:
 * *lock_fd is released with tg__jit_unlock. */
tg_status tg__jit_entry_lock(const char *fn, const char *entry, int *lock_fd);
void tg__jit_unlock(int lock_fd);
/* Whether lib is ours, private, and hashes to what the entry's manifest says for key
 * (reason says why not, for verbose). */
bool tg__jit_entry_valid(const char *entry, const char *lib, const char key_hex[TG_SHA256_HEX],
                         const char **reason);
/* The SHA-256 (hex) of a file's bytes, read through a descriptor opened without following
 * symlinks. */
tg_status tg__jit_hash_file(const char *fn, const char *path, char hex[TG_SHA256_HEX]);
/* Writes bytes to path atomically (a temporary file in the same directory, renamed), 0600. */
tg_status tg__jit_write_file(const char *fn, const char *path, const void *bytes, size_t n);
tg_status tg__jit_write_manifest(const char *fn, const char *entry,
                                 const char key_hex[TG_SHA256_HEX],
                                 const char lib_hex[TG_SHA256_HEX]);
/* snprintf that reports truncation as an error naming fn. */
tg_status tg__jit_path(const char *fn, char *buf, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* ---- the build (jit.c) ---- */
typedef struct tg__jit_build_result {
  char lib[PATH_MAX]; /* the verified library in the cache */
  int lock_fd;        /* the entry's lock, held until the caller has loaded lib */
  bool compiled;      /* a compiler ran */
} tg__jit_build_result;
/* Finds rq's library in the cache or builds it there. On TG_OK the caller loads out->lib
 * and then calls tg__jit_unlock(out->lock_fd). */
tg_status tg__jit_build(tg__jit_request *rq, tg__jit_build_result *out);
void tg__jit_request_free(tg__jit_request *rq);

#endif
