/* Loading and unloading extensions: shared libraries whose entry point offers ops through a
 * versioned table (include/tg/extension.h). Nothing of an extension is registered unless all
 * of it is; its ops are unregistered, and its code unloaded, only when no tape node made by
 * one of them is alive (src/autograd/op_refs.c counts them). */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "ops/registry.h"
#include "tensor/check.h"
#include "tensor/error_impl.h"
#include "tensor/host_memory.h"
#include "tg/extension.h"

struct tg_extension {
  char *path;
  void *handle;
  int n_ops;
  const tg_op_desc **ops; /* the registry's copies */
};

/* Loaded extensions, in load order (registry changes are single-threaded by contract). */
static tg_extension **loaded;
static int n_loaded, loaded_capacity;

/* What an entry point offers while it runs: copies, registered together when it returns. */
typedef struct pending_ops {
  const char *path;
  tg_op_desc *descs;
  int count, capacity;
  tg_status failure; /* the first register_op error, returned even if init ignores it */
} pending_ops;

static void free_pending(pending_ops *p) {
  for (int i = 0; i < p->count; i++) tg__host_free((char *)p->descs[i].name);
  tg__host_free(p->descs);
}

static tg_status offer_op(const tg_extension_api *api, const tg_op_desc *desc) {
  if (!tg__check(api && api->loader, TG_ERR_ARGUMENT, "register_op",
                 "api is NULL or not the one tg passed"))
    return tg_last_error();
  pending_ops *p = api->loader;
  tg_status st = tg__op_validate("register_op", desc);
  for (int i = 0; st == TG_OK && i < p->count; i++)
    st = tg__check_status(strcmp(p->descs[i].name, desc->name) != 0, TG_ERR_ARGUMENT, "register_op",
                          "op '%s' is offered twice by '%s'", desc->name, p->path);
  if (st == TG_OK && p->count == p->capacity) {
    int cap = p->capacity ? p->capacity * 2 : 4;
    tg_op_desc *grown =
        cap > 1 << 20 ? NULL : tg__host_realloc(p->descs, sizeof *grown * (size_t)cap);
    if (!grown)
      st = tg_set_error(TG_ERR_MEMORY, "register_op: out of memory");
    else {
      p->descs = grown;
      p->capacity = cap;
    }
  }
  char *name = st == TG_OK ? tg__host_strdup(desc->name) : NULL;
  if (st == TG_OK && !name) st = tg_set_error(TG_ERR_MEMORY, "register_op: out of memory");
  if (st != TG_OK) {
    if (p->failure == TG_OK) p->failure = st;
    return st;
  }
  p->descs[p->count] = *desc;
  p->descs[p->count++].name = name;
  return TG_OK;
}

/* The file a symbol comes from, for messages. */
static const char *file_of(const void *symbol) {
  Dl_info info;
  return symbol && dladdr(symbol, &info) && info.dli_fname ? info.dli_fname : "?";
}

/* The checks between dlopen and the entry point; returns the entry point or NULL. */
static tg_extension_init_fn check_library(const char *path, void *handle) {
  for (int i = 0; i < n_loaded; i++)
    if (!tg__check(loaded[i]->handle != handle, TG_ERR_STATE, "tg_extension_load",
                   "'%s' is already loaded (as '%s')", path, loaded[i]->path))
      return NULL;
  const uint32_t *abi = dlsym(handle, TG_EXTENSION_ABI_SYMBOL);
  tg_extension_init_fn init;
  *(void **)&init = dlsym(handle, TG_EXTENSION_INIT_SYMBOL); /* object to function pointer */
  if (!abi || !init) {
    tg_set_error(TG_ERR_EXTENSION,
                 "tg_extension_load: '%s' has no %s: not a tg extension (define its entry "
                 "point with TG_EXTENSION(api) from tg/extension.h)",
                 path, !abi ? TG_EXTENSION_ABI_SYMBOL : TG_EXTENSION_INIT_SYMBOL);
    return NULL;
  }
  if (*abi != TG_EXTENSION_ABI_VERSION) {
    tg_set_error(TG_ERR_EXTENSION,
                 "tg_extension_load: '%s' was built for extension ABI %u; this tg (%s) has ABI "
                 "%u: rebuild it against this tg",
                 path, (unsigned)*abi, tg_version_string(), (unsigned)TG_EXTENSION_ABI_VERSION);
    return NULL;
  }
  /* An extension linked against another libtg would keep its own registry, errors and
   * scopes: its ops would run against the wrong ones. */
  void *theirs = dlsym(handle, "tg_version_string");
  const char *(*version_fn)(void) = tg_version_string;
  void *ours;
  memcpy(&ours, &version_fn, sizeof ours); /* function to object pointer, as POSIX allows */
  if (theirs && theirs != ours) {
    tg_set_error(TG_ERR_EXTENSION,
                 "tg_extension_load: '%s' uses a second copy of tg (%s) beside this program's "
                 "(%s): link the program and the extension against the same libtg.so",
                 path, file_of(theirs), file_of(ours));
    return NULL;
  }
  return init;
}

static bool remember(tg_extension *ext) {
  if (n_loaded == loaded_capacity) {
    int cap = loaded_capacity ? loaded_capacity * 2 : 4;
    tg_extension **grown = loaded_capacity > INT_MAX / 2
                               ? NULL
                               : tg__host_realloc(loaded, sizeof *grown * (size_t)cap);
    if (!grown) return false;
    loaded = grown;
    loaded_capacity = cap;
  }
  loaded[n_loaded++] = ext;
  return true;
}

static void forget(tg_extension *ext) {
  for (int i = 0; i < n_loaded; i++)
    if (loaded[i] == ext) {
      memmove(&loaded[i], &loaded[i + 1], sizeof *loaded * (size_t)(n_loaded - i - 1));
      n_loaded--;
      break;
    }
  if (n_loaded == 0) {
    tg__host_free(loaded);
    loaded = NULL;
    loaded_capacity = 0;
  }
}

static void free_extension(tg_extension *ext) {
  if (!ext) return;
  tg__host_free(ext->path);
  tg__host_free(ext->ops);
  tg__host_free(ext);
}

/* Runs the entry point and registers what it offered; on failure nothing is registered. */
static tg_status run_entry_point(tg_extension *ext, tg_extension_init_fn init) {
  pending_ops pending = {.path = ext->path};
  tg_extension_api api = {.abi_version = TG_EXTENSION_ABI_VERSION,
                          .size = sizeof(tg_extension_api),
                          .tg_version = tg_version_string(),
                          .path = ext->path,
                          .loader = &pending,
                          .register_op = offer_op};
  tg_scope scope = tg_scope_begin(); /* whatever the entry point creates dies with it */
  tg_status st = init(&api);
  tg_scope_end(scope);
  if (st == TG_OK && pending.failure != TG_OK) st = pending.failure;
  if (st != TG_OK) {
    const char *why = tg_last_error() != TG_OK ? tg_last_error_message() : tg_status_name(st);
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", why);
    free_pending(&pending);
    return tg_set_error(st == TG_ERR_MEMORY ? TG_ERR_MEMORY : TG_ERR_EXTENSION,
                        "tg_extension_load: the entry point of '%s' failed: %s", ext->path, msg);
  }
  const tg_op_desc **offered =
      tg__host_calloc((size_t)(pending.count ? pending.count : 1), sizeof *offered);
  ext->ops = tg__host_calloc((size_t)(pending.count ? pending.count : 1), sizeof *ext->ops);
  if (!offered || !ext->ops) {
    tg__host_free(offered);
    free_pending(&pending);
    return tg_set_error(TG_ERR_MEMORY, "tg_extension_load: out of memory");
  }
  for (int i = 0; i < pending.count; i++) offered[i] = &pending.descs[i];
  char who[512];
  snprintf(who, sizeof who, "tg_extension_load: '%s'", ext->path);
  st = tg__op_register_all(who, pending.count, offered, ext->ops);
  if (st == TG_OK) ext->n_ops = pending.count;
  tg__host_free(offered);
  free_pending(&pending);
  return st;
}

tg_extension *tg_extension_load(const char *path) {
  if (!tg__check(path && path[0], TG_ERR_ARGUMENT, "tg_extension_load", "path is NULL or empty"))
    return NULL;
  /* dlopen would block forever opening a FIFO; a path with a slash names the file itself
   * (without one, dlopen searches its directories). What does not exist dlopen reports. */
  struct stat file;
  if (strchr(path, '/') && stat(path, &file) == 0 && !S_ISREG(file.st_mode)) {
    tg_set_error(TG_ERR_EXTENSION, "tg_extension_load: '%s' is not a regular file: it is %s", path,
                 tg__file_kind((unsigned)file.st_mode));
    return NULL;
  }
  tg_extension *ext = tg__host_calloc(1, sizeof *ext);
  char *copy = ext ? tg__host_strdup(path) : NULL;
  if (!copy) {
    tg__host_free(ext);
    tg_set_error(TG_ERR_MEMORY, "tg_extension_load: out of memory");
    return NULL;
  }
  ext->path = copy;
  dlerror();
  ext->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!ext->handle) {
    const char *why = dlerror();
    tg_set_error(TG_ERR_EXTENSION, "tg_extension_load: cannot load '%s': %s", path,
                 why ? why : "unknown dlopen error");
    free_extension(ext);
    return NULL;
  }
  tg_extension_init_fn init = check_library(path, ext->handle);
  tg_status st = init ? run_entry_point(ext, init) : tg_last_error();
  if (st == TG_OK && !remember(ext)) {
    tg__op_unregister_all("tg_extension_load", ext->n_ops, ext->ops);
    st = tg_set_error(TG_ERR_MEMORY, "tg_extension_load: out of memory");
  }
  if (st != TG_OK) {
    dlclose(ext->handle);
    free_extension(ext);
    return NULL;
  }
  return ext;
}

tg_status tg_extension_unload(tg_extension *ext) {
  if (!ext) return TG_OK;
  bool known = false;
  for (int i = 0; i < n_loaded; i++) known |= loaded[i] == ext;
  if (!tg__check(known, TG_ERR_ARGUMENT, "tg_extension_unload", "not a loaded extension"))
    return tg_last_error();
  char who[512];
  snprintf(who, sizeof who, "tg_extension_unload: '%s'", ext->path);
  tg_status st = tg__op_unregister_all(who, ext->n_ops, ext->ops);
  if (st != TG_OK) return st;
  forget(ext);
  dlclose(ext->handle);
  free_extension(ext);
  return TG_OK;
}

const char *tg_extension_path(const tg_extension *ext) { return ext ? ext->path : NULL; }
int tg_extension_num_ops(const tg_extension *ext) { return ext ? ext->n_ops : 0; }
const char *tg_extension_op_name(const tg_extension *ext, int index) {
  return ext && index >= 0 && index < ext->n_ops ? ext->ops[index]->name : NULL;
}
int tg_extension_count(void) { return n_loaded; }
tg_extension *tg_extension_at(int index) {
  return index >= 0 && index < n_loaded ? loaded[index] : NULL;
}
