/* tg — extensions: ops written outside tg, in a shared library of their own, loaded (and
 * unloaded) at run time; built ahead of time (CMake's tg_add_extension, or one cc line with
 * pkg-config) or compiled on first use by tg itself (tg_extension_jit). docs/extensions.md
 * walks through one, start to finish.
 *
 * An extension is C (or CUDA) that defines its entry point with TG_EXTENSION:
 *
 *   #include <tg/extension.h>
 *   static tg_status square_fwd(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out);
 *   static tg_status square_bwd(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gin);
 *   TG_EXTENSION(api) {
 *     tg_op_desc square = {.name = "my_square", .n_inputs = 1, .n_outputs = 1,
 *                          .forward = {[TG_CPU] = square_fwd}, .backward = square_bwd};
 *     return api->register_op(api, &square);
 *   }
 *
 * CUDA sources (.cu) include tg/cuda_ext.cuh and launch kernels with tg_cuda_launch on
 * tg_cuda_stream's stream (so that they also run on tg's CPU emulation of CUDA).
 *
 * Loading checks the ABI version the extension was compiled for, calls its entry point, and
 * registers the ops it offered all together or none of them (a name that clashes with an
 * op already registered, or an entry point that fails, leaves the registry as it was).
 * Extension and program must use the same libtg.so: an extension that brings a second copy
 * of tg is refused. */
#ifndef TG_EXTENSION_H
#define TG_EXTENSION_H

#include "autograd.h"
#include "ops.h" /* tg_op_lookup and the registry */

TG_API_BEGIN
#ifdef __cplusplus
extern "C" {
#endif

/* The extension ABI: tg_op_desc, tg_extension_api and what the entry point may assume.
 * It changes whenever any of them changes layout or meaning. */
#define TG_EXTENSION_ABI_VERSION 2u
/* The entry point and the ABI marker an extension exports (TG_EXTENSION defines both). */
#define TG_EXTENSION_INIT_SYMBOL "tg_extension_init"
#define TG_EXTENSION_ABI_SYMBOL "tg_extension_abi"

/* The table an extension's entry point receives. Registration through it is provisional
 * until the entry point returns TG_OK; then all its ops are registered together. */
typedef struct tg_extension_api {
  uint32_t abi_version;   /* TG_EXTENSION_ABI_VERSION of the loading tg */
  uint32_t size;          /* sizeof(tg_extension_api) of the loading tg */
  const char *tg_version; /* tg_version_string() of the loading tg */
  const char *path;       /* the file being loaded */
  void *loader;           /* tg's, opaque: pass api back as is */
  /* Offers one op (the desc is copied; its name must be new). Errors (bad desc, a name
   * offered twice) are reported at once; clashes with existing ops when the entry point
   * returns. */
  tg_status (*register_op)(const struct tg_extension_api *api, const tg_op_desc *desc);
} tg_extension_api;

typedef tg_status (*tg_extension_init_fn)(const tg_extension_api *api);

#if defined(__GNUC__) || defined(__clang__)
#define TG_EXTENSION_EXPORT __attribute__((visibility("default")))
#else
#define TG_EXTENSION_EXPORT
#endif
#ifdef __cplusplus
#define TG_EXTENSION_LINKAGE extern "C"
#else
#define TG_EXTENSION_LINKAGE
#endif
/* Defines the extension's entry point (and its ABI marker): TG_EXTENSION(api) { ... }. */
#define TG_EXTENSION(api)                                                                          \
  TG_EXTENSION_LINKAGE TG_EXTENSION_EXPORT const uint32_t tg_extension_abi =                       \
      TG_EXTENSION_ABI_VERSION;                                                                    \
  TG_EXTENSION_LINKAGE TG_EXTENSION_EXPORT tg_status tg_extension_init(const tg_extension_api *api)

/* ---- loading ---- */
typedef struct tg_extension tg_extension;

/* Loads the shared library at path and registers its ops. NULL with an error (TG_ERR_EXTENSION:
 * not loadable, no entry point, ABI mismatch, a second copy of tg, its entry point failed;
 * TG_ERR_ARGUMENT: an op name clash, naming the op) and nothing registered otherwise. Loading
 * a library that is already loaded is an error. Registry changes are not thread-safe: load
 * and unload while no other thread applies or looks up ops. */
tg_extension *tg_extension_load(const char *path);
/* Unregisters its ops and unloads the library. Refused with TG_ERR_STATE, the extension
 * still loaded and usable, while a graph node made by one of its ops is alive (release the
 * tensors whose history reaches one and call again). On TG_OK ext is gone, and so are the
 * tg_op_desc pointers tg_op_lookup gave for its ops. NULL is a no-op. */
tg_status tg_extension_unload(tg_extension *ext);
const char *tg_extension_path(const tg_extension *ext); /* as given, or the JIT cache file */
int tg_extension_num_ops(const tg_extension *ext);
const char *tg_extension_op_name(const tg_extension *ext, int index); /* NULL if out of range */
/* Extensions loaded now, and one by index (in load order). */
int tg_extension_count(void);
tg_extension *tg_extension_at(int index);

/* ---- compiling at run time (the twin of torch.utils.cpp_extension.load) ----
 * Compiles the sources into a shared library with the system's C compiler ($CC, else cc)
 * and, for .cu sources when this tg has CUDA, $NVCC (else nvcc), with the flags of the
 * running tg (its headers, its libtg.so), and loads it. C is compiled as -std=c11 -O2 with
 * implicit function declarations and int-to-pointer conversions as errors (a forgotten
 * #include would otherwise load and crash). The library is cached under
 * cache_dir/<name>-<key>/, key = SHA-256 of the sources, the flags, the compilers' command
 * lines and tg's version: an unchanged extension is loaded without running a compiler. A
 * lock file keeps two processes from building one entry at once (the second waits, then
 * loads the first one's build). The cache directory is created 0700; a directory or library
 * not owned by this user, or writable by others, is refused, and a cached library is loaded
 * only if its manifest's key and content hash match. Errors (TG_ERR_EXTENSION): compiler not
 * found, compile failure (the message carries the first error lines and the log's path),
 * nvcc missing for a .cu, a library without the entry point. */
typedef struct tg_jit_options {
  const char *cache_dir; /* NULL: $TG_EXTENSIONS_DIR, else $XDG_CACHE_HOME/tg/extensions,
                            else $HOME/.cache/tg/extensions */
  int n_cflags;          /* extra flags for every compile */
  const char *const *cflags;
  int n_ldflags; /* extra flags for the link (-l..., -L...) */
  const char *const *ldflags;
  bool verbose; /* print each command and the cache decision to stderr */
} tg_jit_options;

/* name: [A-Za-z0-9_]+, names the cache entry and the library file. Sources: paths ending in
 * .c or .cu. */
tg_extension *tg_extension_jit(const char *name, int n_sources, const char *const *sources,
                               tg_jit_options opts);
/* The same from source text: c_source (may be NULL) is compiled as C, cuda_source (may be
 * NULL) as CUDA; at least one is given. */
tg_extension *tg_extension_jit_inline(const char *name, const char *c_source,
                                      const char *cuda_source, tg_jit_options opts);
/* Whether the last tg_extension_jit* call on this thread ran a compiler (false: cache hit). */
bool tg_extension_jit_compiled(void);

#ifdef __cplusplus
}
#endif
TG_API_END
#endif
