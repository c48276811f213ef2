/* The CPU's own convolution: oneDNN's (Debian's libdnnl2), loaded at run time where found,
 * never required. conv2d, conv_transpose2d and conv2d_weight (src/ops/conv.c) ask for it
 * first (the conv2d.forward / backward_data / backward_weights kernels of
 * src/ops/def/conv.def) and run their im2col + GEMM path where it declines.
 *
 * Why a library: oneDNN's JIT direct convolutions run 3x3 layers at 75% of an AVX2 core's
 * FMA peak, forward and both backwards; tg's im2col + BLIS reached 57% (ResNet-18's layers,
 * batch 8, Zen 3: README "Convolutional networks" has the numbers and the command). It is
 * the library PyTorch's CPU convolutions run.
 *
 * Where it declines (TG_ERR_UNSUPPORTED, no error recorded): the library is absent or off
 * (TG_ONEDNN_LIBRARY=off, or a path to load instead of libdnnl.so.2), a dtype other than F32,
 * an empty tensor, operands that are not contiguous, windows that stop short of the image's
 * end (a negative trailing padding, which oneDNN refuses), or a problem oneDNN has no
 * implementation for. Every buffer it needs (its blocked copies of the operands, its
 * scratchpad) comes from tg's allocator, so a test can make each fail.
 *
 * Threads: tg's count (one inside a pool chunk or while the cores are contended, as GEMMs
 * run), set for the calling thread's OpenMP team: Debian's oneDNN runs on GNU OpenMP, the
 * runtime tg links for BLIS. */
#define _GNU_SOURCE /* RTLD_* */
#include <dlfcn.h>
#include <omp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/backend.h"
#include "ops/cpu/conv_onednn.h"
#include "ops/cpu/conv_winograd.h"
#include "ops/cpu/cpu_internal.h"
#include "ops/cpu/thread_pool.h"
#include "tensor/check.h"
#include "tensor/checked.h"
#include "tensor/host_memory.h"
#include "tensor/tensor_impl.h"

#if TG_WITH_ONEDNN_HEADERS
#include <oneapi/dnnl/dnnl.h>

/* The functions tg calls, resolved by name from the loaded library. */
typedef struct dnnl_api {
  dnnl_status_t (*engine_create)(dnnl_engine_t *, dnnl_engine_kind_t, size_t);
  dnnl_status_t (*stream_create)(dnnl_stream_t *, dnnl_engine_t, unsigned);
  dnnl_status_t (*stream_wait)(dnnl_stream_t);
  dnnl_status_t (*stream_destroy)(dnnl_stream_t);
  dnnl_status_t (*memory_desc_init_by_tag)(dnnl_memory_desc_t *, int, const dnnl_dims_t,
                                           dnnl_data_type_t, dnnl_format_tag_t);
  int (*memory_desc_equal)(const dnnl_memory_desc_t *, const dnnl_memory_desc_t *);
  size_t (*memory_desc_get_size)(const dnnl_memory_desc_t *);
  dnnl_status_t (*memory_create)(dnnl_memory_t *, const dnnl_memory_desc_t *, dnnl_engine_t,
                                 void *);
  dnnl_status_t (*memory_destroy)(dnnl_memory_t);
  dnnl_status_t (*forward_desc_init)(dnnl_convolution_desc_t *, dnnl_prop_kind_t, dnnl_alg_kind_t,
                                     const dnnl_memory_desc_t *, const dnnl_memory_desc_t *,
                                     const dnnl_memory_desc_t *, const dnnl_memory_desc_t *,
                                     const dnnl_dims_t, const dnnl_dims_t, const dnnl_dims_t,
                                     const dnnl_dims_t);
  dnnl_status_t (*backward_data_desc_init)(dnnl_convolution_desc_t *, dnnl_alg_kind_t,
                                           const dnnl_memory_desc_t *, const dnnl_memory_desc_t *,
                                           const dnnl_memory_desc_t *, const dnnl_dims_t,
                                           const dnnl_dims_t, const dnnl_dims_t, const dnnl_dims_t);
  dnnl_status_t (*backward_weights_desc_init)(
      dnnl_convolution_desc_t *, dnnl_alg_kind_t, const dnnl_memory_desc_t *,
      const dnnl_memory_desc_t *, const dnnl_memory_desc_t *, const dnnl_memory_desc_t *,
      const dnnl_dims_t, const dnnl_dims_t, const dnnl_dims_t, const dnnl_dims_t);
  dnnl_status_t (*attr_create)(dnnl_primitive_attr_t *);
  dnnl_status_t (*attr_set_scratchpad_mode)(dnnl_primitive_attr_t, dnnl_scratchpad_mode_t);
  dnnl_status_t (*attr_destroy)(dnnl_primitive_attr_t);
  dnnl_status_t (*pd_create)(dnnl_primitive_desc_t *, const_dnnl_op_desc_t,
                             const_dnnl_primitive_attr_t, dnnl_engine_t,
                             const_dnnl_primitive_desc_t);
  const dnnl_memory_desc_t *(*pd_query_md)(const_dnnl_primitive_desc_t, dnnl_query_t, int);
  dnnl_status_t (*pd_destroy)(dnnl_primitive_desc_t);
  dnnl_status_t (*reorder_pd_create)(dnnl_primitive_desc_t *, const dnnl_memory_desc_t *,
                                     dnnl_engine_t, const dnnl_memory_desc_t *, dnnl_engine_t,
                                     const_dnnl_primitive_attr_t);
  dnnl_status_t (*primitive_create)(dnnl_primitive_t *, const_dnnl_primitive_desc_t);
  dnnl_status_t (*primitive_execute)(const_dnnl_primitive_t, dnnl_stream_t, int,
                                     const dnnl_exec_arg_t *);
  dnnl_status_t (*primitive_destroy)(dnnl_primitive_t);
  const dnnl_version_t *(*version)(void);
} dnnl_api;

/* Each entry's name in the library, in dnnl_api's order. */
static const char *const api_names[] = {
    "dnnl_engine_create",
    "dnnl_stream_create",
    "dnnl_stream_wait",
    "dnnl_stream_destroy",
    "dnnl_memory_desc_init_by_tag",
    "dnnl_memory_desc_equal",
    "dnnl_memory_desc_get_size",
    "dnnl_memory_create",
    "dnnl_memory_destroy",
    "dnnl_dilated_convolution_forward_desc_init",
    "dnnl_dilated_convolution_backward_data_desc_init",
    "dnnl_dilated_convolution_backward_weights_desc_init",
    "dnnl_primitive_attr_create",
    "dnnl_primitive_attr_set_scratchpad_mode",
    "dnnl_primitive_attr_destroy",
    "dnnl_primitive_desc_create",
    "dnnl_primitive_desc_query_md",
    "dnnl_primitive_desc_destroy",
    "dnnl_reorder_primitive_desc_create",
    "dnnl_primitive_create",
    "dnnl_primitive_execute",
    "dnnl_primitive_destroy",
    "dnnl_version",
};
#define API_SIZE (sizeof api_names / sizeof api_names[0])

static struct {
  pthread_once_t once;
  void *lib;
  union {
    dnnl_api fn;
    void (*slot[API_SIZE])(void);
  } api;
  dnnl_engine_t engine;
  char version[32], name[48], with_winograd[96]; /* "2.6.3", "oneDNN 2.6.3", and "oneDNN 2.6.3,
                                                  * Winograd F(2x2,3x3) where faster" */
} onednn = {.once = PTHREAD_ONCE_INIT};

/* Whether dnnl_api is exactly the list of names (every member a function pointer). */
_Static_assert(sizeof(dnnl_api) == API_SIZE * sizeof(void (*)(void)), "dnnl_api != api_names");

static bool disabled = false; /* tests: tg__cpu_conv_onednn_enable */
static _Atomic int64_t runs;  /* calls oneDNN completed: tg__cpu_conv_onednn_runs */

/* A sanitized build (TG_SANITIZE, TG_FUZZ) loads it only where TG_ONEDNN_LIBRARY names it:
 * with Debian's oneDNN 2.6.3 loaded, GCC 12's LeakSanitizer dies at every process's exit
 * ("Tracer caught signal 11" while it scans the threads), and ThreadSanitizer cannot see
 * into its OpenMP. Those builds check tg's generic path; Release runs oneDNN's. */
static void *open_library(void) {
  const char *pinned = getenv("TG_ONEDNN_LIBRARY");
  if (pinned) return pinned[0] && strcmp(pinned, "off") != 0 ? dlopen(pinned, RTLD_NOW) : NULL;
  return TG_SANITIZED ? NULL : dlopen("libdnnl.so.2", RTLD_NOW);
}

static void load_once(void) {
  void *lib = open_library();
  if (!lib) return;
  for (size_t i = 0; i < API_SIZE; i++) {
    void *sym = dlsym(lib, api_names[i]);
    if (!sym) { /* another major version, or not oneDNN */
      dlclose(lib);
      return;
    }
    onednn.api.slot[i] = (void (*)(void))(uintptr_t)sym;
  }
  const dnnl_version_t *v = onednn.api.fn.version();
  if (!v || v->major != 2 ||
      onednn.api.fn.engine_create(&onednn.engine, dnnl_cpu, 0) != dnnl_success) {
    dlclose(lib);
    return;
  }
  snprintf(onednn.version, sizeof onednn.version, "%d.%d.%d", v->major, v->minor, v->patch);
  snprintf(onednn.name, sizeof onednn.name, "oneDNN %s", onednn.version);
  snprintf(onednn.with_winograd, sizeof onednn.with_winograd,
           "oneDNN %s, Winograd F(2x2,3x3) where faster", onednn.version);
  onednn.lib = lib;
}

bool tg__cpu_conv_onednn_available(void) {
  pthread_once(&onednn.once, load_once);
  return onednn.lib != NULL && !disabled;
}

const char *tg__cpu_conv_onednn_version(void) {
  return tg__cpu_conv_onednn_available() ? onednn.version : NULL;
}

void tg__cpu_conv_onednn_enable(bool on) { disabled = !on; }

int64_t tg__cpu_conv_onednn_runs(void) { return runs; }

const char *tg_conv_engine(void) {
  if (!tg__cpu_conv_onednn_available()) return "im2col + GEMM";
  return tg__cpu_conv_winograd_enabled() ? onednn.with_winograd : onednn.name;
}

/* ---- one call ---- */

typedef enum pass { FORWARD, BACKWARD_DATA, BACKWARD_WEIGHTS } pass;
static const char *const pass_names[] = {"conv2d.forward", "conv2d.backward_data",
                                         "conv2d.backward_weights"};

/* What one call holds, released by finish() whatever happened. */
typedef struct call {
  const char *name;
  dnnl_primitive_desc_t forward_pd, pd;
  dnnl_primitive_attr_t attr;
  dnnl_stream_t stream;
  dnnl_memory_t mem[8];
  int n_mem;
  void *buffer[8];
  size_t buffer_size[8];
  int n_buffers;
  dnnl_status_t failed; /* the first oneDNN failure, or dnnl_success */
  const char *failed_at;
} call;

static bool ok(call *c, dnnl_status_t s, const char *what) {
  if (s != dnnl_success && c->failed == dnnl_success) {
    c->failed = s;
    c->failed_at = what;
  }
  return s == dnnl_success;
}

/* A memory object over data (which the call owns or the caller's tensor holds). */
static dnnl_memory_t memory_over(call *c, const dnnl_memory_desc_t *md, void *data) {
  dnnl_memory_t m = NULL;
  if (c->n_mem == (int)(sizeof c->mem / sizeof c->mem[0]) ||
      !ok(c, onednn.api.fn.memory_create(&m, md, onednn.engine, data), "memory_create"))
    return NULL;
  c->mem[c->n_mem++] = m;
  return m;
}

/* A buffer of md's size from tg's allocator (NULL: out of memory, recorded as such). */
static void *buffer_for(call *c, const dnnl_memory_desc_t *md) {
  const size_t size = onednn.api.fn.memory_desc_get_size(md);
  void *p = c->n_buffers < (int)(sizeof c->buffer / sizeof c->buffer[0])
                ? tg__host_cached_alloc(size ? size : 1)
                : NULL;
  if (!p) {
    ok(c, dnnl_out_of_memory, "a buffer");
    return NULL;
  }
  c->buffer[c->n_buffers] = p;
  c->buffer_size[c->n_buffers++] = size ? size : 1;
  return p;
}

static bool reorder(call *c, dnnl_memory_t from, const dnnl_memory_desc_t *from_md,
                    dnnl_memory_t to, const dnnl_memory_desc_t *to_md) {
  dnnl_primitive_desc_t rpd = NULL;
  dnnl_primitive_t r = NULL;
  bool done =
      ok(c,
         onednn.api.fn.reorder_pd_create(&rpd, from_md, onednn.engine, to_md, onednn.engine, NULL),
         "reorder_primitive_desc_create") &&
      ok(c, onednn.api.fn.primitive_create(&r, rpd), "reorder primitive_create");
  if (done) {
    const dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
    done = ok(c, onednn.api.fn.primitive_execute(r, c->stream, 2, args), "reorder execute");
  }
  if (r) onednn.api.fn.primitive_destroy(r);
  if (rpd) onednn.api.fn.pd_destroy(rpd);
  return done;
}

/* The operand the primitive reads, in the layout it asks for: the user's memory itself, or a
 * reordered copy. */
static dnnl_memory_t input_as(call *c, const dnnl_memory_desc_t *user_md, void *data,
                              dnnl_query_t what) {
  const dnnl_memory_desc_t *want = onednn.api.fn.pd_query_md(c->pd, what, 0);
  dnnl_memory_t user = want ? memory_over(c, user_md, data) : NULL;
  if (!user || onednn.api.fn.memory_desc_equal(user_md, want)) return user;
  void *copy = buffer_for(c, want);
  dnnl_memory_t m = copy ? memory_over(c, want, copy) : NULL;
  return m && reorder(c, user, user_md, m, want) ? m : NULL;
}

/* Where the primitive writes: the user's memory itself, or a buffer in its layout (*back:
 * reorder it into the user's afterwards). */
static dnnl_memory_t output_as(call *c, const dnnl_memory_desc_t *user_md, void *data,
                               dnnl_query_t what, dnnl_memory_t *user, bool *back) {
  const dnnl_memory_desc_t *want = onednn.api.fn.pd_query_md(c->pd, what, 0);
  *user = want ? memory_over(c, user_md, data) : NULL;
  *back = *user && !onednn.api.fn.memory_desc_equal(user_md, want);
  if (!*user || !*back) return *user;
  void *buffer = buffer_for(c, want);
  return buffer ? memory_over(c, want, buffer) : NULL;
}

/* Releases what the call holds; its outcome stays in c->failed. */
static void finish(call *c) {
  for (int i = 0; i < c->n_mem; i++) onednn.api.fn.memory_destroy(c->mem[i]);
  for (int i = 0; i < c->n_buffers; i++) tg__host_cached_free(c->buffer[i], c->buffer_size[i]);
  if (c->pd) onednn.api.fn.pd_destroy(c->pd);
  if (c->forward_pd) onednn.api.fn.pd_destroy(c->forward_pd);
  if (c->attr) onednn.api.fn.attr_destroy(c->attr);
  if (c->stream) onednn.api.fn.stream_destroy(c->stream);
}

/* The geometry's 13 ints (src/ops/conv_internal.h's order) from the host I64 tensor. */
enum { STRIDE_H, STRIDE_W, PAD_H, PAD_W, DIL_H, DIL_W, GROUPS, H, W, OUT_H, OUT_W, KH, KW, N_INTS };

static bool geometry_of(const tg_tensor *t, int64_t *g) {
  if (t->dtype != TG_I64 || t->storage->device.type != TG_CPU || tg_numel(t) != N_INTS ||
      !tg_is_contiguous(t))
    return false;
  memcpy(g, (const int64_t *)tg_data_ptr(t), N_INTS * sizeof *g);
  return true;
}

/* Padding after the image along one dim: what the last window reaches beyond it. */
static int64_t trailing_pad(int64_t size, int64_t pad, int64_t out, int64_t stride,
                            int64_t dilation, int64_t kernel) {
  return (out - 1) * stride + (kernel - 1) * dilation + 1 - size - pad;
}

/* Whether x, w and y have the sizes the geometry gives them. The kernels can be called by name
 * with anything (tg_device_ops.kernel), and oneDNN would read and write by the geometry: a
 * mismatch is an error, never a read past a tensor. */
static bool fits(const char *kernel, tg_tensor *const *t, const int64_t *g) {
  const tg_tensor *x = t[0], *w = t[1], *y = t[2];
  bool ok = x->ndim == 4 && w->ndim == 4 && y->ndim == 4 && g[GROUPS] >= 1;
  for (int i = 0; ok && i < N_INTS; i++)
    ok = g[i] >= (i == PAD_H || i == PAD_W ? 0 : 1) && g[i] < ((int64_t)1 << 31);
  ok = ok && x->sizes[2] == g[H] && x->sizes[3] == g[W] && y->sizes[0] == x->sizes[0] &&
       y->sizes[2] == g[OUT_H] && y->sizes[3] == g[OUT_W] && w->sizes[0] == y->sizes[1] &&
       w->sizes[1] * g[GROUPS] == x->sizes[1] && y->sizes[1] % g[GROUPS] == 0 &&
       w->sizes[2] == g[KH] && w->sizes[3] == g[KW];
  if (!ok)
    tg_set_error(TG_ERR_SHAPE,
                 "%s: x %s, w %s and y %s do not fit the geometry (image %lld x %lld, grid %lld "
                 "x %lld, kernel %lld x %lld, groups %lld)",
                 kernel, tg__sizes_str(x), tg__sizes_str(w), tg__sizes_str(y), (long long)g[H],
                 (long long)g[W], (long long)g[OUT_H], (long long)g[OUT_W], (long long)g[KH],
                 (long long)g[KW], (long long)g[GROUPS]);
  return ok;
}

static bool takes(tg_tensor *const *t, const int64_t *g) {
  for (int i = 0; i < 3; i++)
    if (t[i]->dtype != TG_F32 || tg_numel(t[i]) == 0 || !tg_is_contiguous(t[i])) return false;
  return trailing_pad(g[H], g[PAD_H], g[OUT_H], g[STRIDE_H], g[DIL_H], g[KH]) >= 0 &&
         trailing_pad(g[W], g[PAD_W], g[OUT_W], g[STRIDE_W], g[DIL_W], g[KW]) >= 0;
}

/* One convolution over n images: x [n, c_in, h, w], w [c_out, c_in / groups, kh, kw], y [n,
 * c_out, out_h, out_w], all contiguous F32; the pass writes one of them (y, x or w) and reads
 * the other two. */
typedef struct problem {
  pass p;
  const int64_t *g;
  int64_t n, c_in, c_out;
  float *x, *w, *y;
} problem;

/* What a problem's call ended with: dnnl_success, or the first failure and where. */
typedef struct outcome {
  dnnl_status_t status;
  const char *at;
} outcome;

static outcome convolve(const problem *pr) {
  call c = {.name = pass_names[pr->p]};
  const int64_t *g = pr->g, groups = g[GROUPS];
  const dnnl_dims_t x_dims = {pr->n, pr->c_in, g[H], g[W]},
                    y_dims = {pr->n, pr->c_out, g[OUT_H], g[OUT_W]},
                    w_dims = {groups, pr->c_out / groups, pr->c_in / groups, g[KH], g[KW]},
                    strides = {g[STRIDE_H], g[STRIDE_W]},
                    dilates = {g[DIL_H] - 1, g[DIL_W] - 1}, /* oneDNN counts the gaps */
      pad_l = {g[PAD_H], g[PAD_W]},
                    pad_r = {trailing_pad(g[H], g[PAD_H], g[OUT_H], g[STRIDE_H], g[DIL_H], g[KH]),
                             trailing_pad(g[W], g[PAD_W], g[OUT_W], g[STRIDE_W], g[DIL_W], g[KW])};
  const int w_ndims = groups > 1 ? 5 : 4; /* [groups,] c_out / groups, c_in / groups, kh, kw */
  const int64_t *w_at = groups > 1 ? w_dims : w_dims + 1;
  dnnl_memory_desc_t x_md, y_md, w_md, x_any, y_any, w_any;
  const dnnl_api *api = &onednn.api.fn;
  if (!ok(&c, api->memory_desc_init_by_tag(&x_md, 4, x_dims, dnnl_f32, dnnl_nchw), "md") ||
      !ok(&c, api->memory_desc_init_by_tag(&y_md, 4, y_dims, dnnl_f32, dnnl_nchw), "md") ||
      !ok(&c,
          api->memory_desc_init_by_tag(&w_md, w_ndims, w_at, dnnl_f32,
                                       groups > 1 ? dnnl_goihw : dnnl_oihw),
          "md") ||
      !ok(&c, api->memory_desc_init_by_tag(&x_any, 4, x_dims, dnnl_f32, dnnl_format_tag_any),
          "md") ||
      !ok(&c, api->memory_desc_init_by_tag(&y_any, 4, y_dims, dnnl_f32, dnnl_format_tag_any),
          "md") ||
      !ok(&c, api->memory_desc_init_by_tag(&w_any, w_ndims, w_at, dnnl_f32, dnnl_format_tag_any),
          "md")) {
    finish(&c);
    return (outcome){c.failed, c.failed_at};
  }

  /* The forward's description: the backward passes' hint, and the forward itself. */
  dnnl_convolution_desc_t forward, backward;
  dnnl_status_t st =
      api->forward_desc_init(&forward, dnnl_forward_training, dnnl_convolution_direct, &x_any,
                             &w_any, NULL, &y_any, strides, dilates, pad_l, pad_r);
  if (st == dnnl_success && pr->p == BACKWARD_DATA)
    st = api->backward_data_desc_init(&backward, dnnl_convolution_direct, &x_any, &w_any, &y_any,
                                      strides, dilates, pad_l, pad_r);
  if (st == dnnl_success && pr->p == BACKWARD_WEIGHTS)
    st = api->backward_weights_desc_init(&backward, dnnl_convolution_direct, &x_any, &w_any, NULL,
                                         &y_any, strides, dilates, pad_l, pad_r);
  if (st == dnnl_success) st = api->attr_create(&c.attr);
  if (st == dnnl_success) st = api->attr_set_scratchpad_mode(c.attr, dnnl_scratchpad_mode_user);
  if (st == dnnl_success) st = api->pd_create(&c.forward_pd, &forward, c.attr, onednn.engine, NULL);
  if (st == dnnl_success && pr->p != FORWARD)
    st = api->pd_create(&c.pd, &backward, c.attr, onednn.engine, c.forward_pd);
  if (!ok(&c, st, "primitive_desc_create")) {
    finish(&c);
    return (outcome){c.failed, c.failed_at};
  }
  if (pr->p == FORWARD) {
    c.pd = c.forward_pd;
    c.forward_pd = NULL;
  }

  /* The two operands read and the one written, with their argument names and queries. */
  typedef struct operand {
    float *data;
    const dnnl_memory_desc_t *md;
    int arg;
    dnnl_query_t query;
  } operand;
  operand in[2], out;
  if (pr->p == FORWARD) {
    in[0] = (operand){pr->x, &x_md, DNNL_ARG_SRC, dnnl_query_src_md};
    in[1] = (operand){pr->w, &w_md, DNNL_ARG_WEIGHTS, dnnl_query_weights_md};
    out = (operand){pr->y, &y_md, DNNL_ARG_DST, dnnl_query_dst_md};
  } else if (pr->p == BACKWARD_DATA) {
    in[0] = (operand){pr->y, &y_md, DNNL_ARG_DIFF_DST, dnnl_query_diff_dst_md};
    in[1] = (operand){pr->w, &w_md, DNNL_ARG_WEIGHTS, dnnl_query_weights_md};
    out = (operand){pr->x, &x_md, DNNL_ARG_DIFF_SRC, dnnl_query_diff_src_md};
  } else {
    in[0] = (operand){pr->x, &x_md, DNNL_ARG_SRC, dnnl_query_src_md};
    in[1] = (operand){pr->y, &y_md, DNNL_ARG_DIFF_DST, dnnl_query_diff_dst_md};
    out = (operand){pr->w, &w_md, DNNL_ARG_DIFF_WEIGHTS, dnnl_query_diff_weights_md};
  }
  dnnl_exec_arg_t args[4] = {{0}};
  dnnl_memory_t user_out = NULL;
  bool back = false;
  if (ok(&c, api->stream_create(&c.stream, onednn.engine, dnnl_stream_default_flags),
         "stream_create")) {
    for (int i = 0; i < 2; i++)
      args[i] = (dnnl_exec_arg_t){in[i].arg, input_as(&c, in[i].md, in[i].data, in[i].query)};
    args[2] =
        (dnnl_exec_arg_t){out.arg, output_as(&c, out.md, out.data, out.query, &user_out, &back)};
    const dnnl_memory_desc_t *scratch_md = api->pd_query_md(c.pd, dnnl_query_scratchpad_md, 0);
    void *scratch = scratch_md ? buffer_for(&c, scratch_md) : NULL;
    args[3] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD,
                                scratch ? memory_over(&c, scratch_md, scratch) : NULL};
  }
  dnnl_primitive_t prim = NULL;
  if (args[0].memory && args[1].memory && args[2].memory && args[3].memory &&
      ok(&c, api->primitive_create(&prim, c.pd), "primitive_create") &&
      ok(&c, api->primitive_execute(prim, c.stream, 4, args), "execute") &&
      (!back ||
       reorder(&c, args[2].memory, api->pd_query_md(c.pd, out.query, 0), user_out, out.md)))
    ok(&c, api->stream_wait(c.stream), "stream_wait");
  if (prim) api->primitive_destroy(prim);
  finish(&c);
  return (outcome){c.failed, c.failed_at};
}

/* ---- the batch split over tg's pool ----
 * With more than one thread the images are split into one part per thread, each convolved by
 * a one-thread oneDNN call on a pool thread (the weight gradient as per-part sums added in
 * part order): tg's pool and oneDNN's OpenMP team then never hold the cores at once. Left to
 * its own OpenMP threads, oneDNN's spin after each call (GNU OpenMP's default wait) and took
 * the other core from tg's pool: train_cnn's step ran 7.96 ms on 2 threads against 8.18 on
 * one (Zen 3). A batch of one image keeps oneDNN's own threads. */
enum { MAX_PARTS = 64 };

typedef struct split {
  problem whole;
  int64_t parts, x_image, y_image, w_numel;
  float *partial_w; /* parts - 1 weight gradients after the first part's */
  outcome out[MAX_PARTS];
} split;

/* A problem on `threads` OpenMP threads of the calling thread's own (oneDNN sizes its split of
 * the work when it describes the primitive: the count is set before, and restored after). */
static outcome convolve_on(int threads, const problem *pr) {
  const int threads_before = omp_get_max_threads();
  omp_set_num_threads(threads);
  const outcome o = convolve(pr);
  omp_set_num_threads(threads_before);
  return o;
}

/* oneDNN has no implementation for the problem: the call is declined, the generic path runs. */
static bool declined(outcome o) {
  return o.status == dnnl_unimplemented || o.status == dnnl_invalid_arguments;
}

static void run_part(int64_t k, void *ctx) {
  split *s = ctx;
  problem pr = s->whole;
  const int64_t b0 = pr.n * k / s->parts, b1 = pr.n * (k + 1) / s->parts;
  pr.n = b1 - b0;
  pr.x += b0 * s->x_image;
  pr.y += b0 * s->y_image;
  if (pr.p == BACKWARD_WEIGHTS && k > 0) pr.w = s->partial_w + (k - 1) * s->w_numel;
  s->out[k] = convolve_on(1, &pr);
}

static tg_status error_of(pass p, outcome o) {
  if (o.status == dnnl_success) return TG_OK;
  if (o.status == dnnl_out_of_memory)
    return tg_set_error(TG_ERR_MEMORY, "%s: out of memory (oneDNN's %s)", pass_names[p], o.at);
  return tg_set_error(TG_ERR_UNSUPPORTED, "%s: oneDNN %s's %s failed with status %d", pass_names[p],
                      onednn.version, o.at, (int)o.status);
}

/* One pass on oneDNN, after run's checks. */
static tg_status onednn_pass(int pass_index, tg_tensor *const *t, const int64_t *g) {
  const pass p = (pass)pass_index;
  const int threads = tg_get_num_threads() > 1 && !tg_cpu_pool_busy_here() && !tg_cpu_contended()
                          ? tg_get_num_threads()
                          : 1;
  split s = {.whole = {p, g, t[0]->sizes[0], t[0]->sizes[1], t[1]->sizes[0], tg_data_ptr(t[0]),
                       tg_data_ptr(t[1]), tg_data_ptr(t[2])},
             .x_image = t[0]->sizes[1] * g[H] * g[W],
             .y_image = t[1]->sizes[0] * g[OUT_H] * g[OUT_W],
             .w_numel = tg_numel(t[1])};
  s.parts = s.whole.n < threads ? s.whole.n : threads;
  if (s.parts > MAX_PARTS) s.parts = MAX_PARTS;
  if (s.parts <= 1) {
    const outcome o = convolve_on(threads, &s.whole);
    if (declined(o)) return TG_ERR_UNSUPPORTED;
    runs += o.status == dnnl_success;
    return error_of(p, o);
  }
  int64_t partial_bytes = 0;
  if (p == BACKWARD_WEIGHTS &&
      (tg__mul_ovf(s.parts - 1, s.w_numel, &partial_bytes) ||
       tg__mul_ovf(partial_bytes, (int64_t)sizeof(float), &partial_bytes) ||
       !(s.partial_w = tg__host_cached_alloc((size_t)partial_bytes))))
    return tg_set_error(TG_ERR_MEMORY, "%s: out of memory for %lld partial weight gradients",
                        pass_names[p], (long long)(s.parts - 1));
  tg_cpu_parallel_for(s.parts, run_part, &s);
  tg_status st = TG_OK;
  bool any_declined = false;
  for (int64_t k = 0; k < s.parts; k++) {
    any_declined |= declined(s.out[k]);
    if (st == TG_OK && !any_declined) st = error_of(p, s.out[k]);
  }
  if (st == TG_OK && !any_declined && p == BACKWARD_WEIGHTS) {
    float *dw = s.whole.w;
    for (int64_t k = 1; k < s.parts; k++)
      for (int64_t i = 0; i < s.w_numel; i++) dw[i] += s.partial_w[(k - 1) * s.w_numel + i];
  }
  if (s.partial_w) tg__host_cached_free(s.partial_w, (size_t)partial_bytes);
  runs += st == TG_OK && !any_declined;
  return st == TG_OK && any_declined ? TG_ERR_UNSUPPORTED : st;
}

/* x, w, y and the geometry: the checks every pass makes first; then Winograd's F(2x2, 3x3)
 * where it applies and measured faster on the shape, else oneDNN (conv_winograd_choice.c). */
static tg_status run(pass p, int n, tg_tensor *const *t) {
  TG__KERNEL_ARITY(pass_names[p], n, 4);
  int64_t g[N_INTS];
  if (!tg__cpu_conv_onednn_available() || !geometry_of(t[3], g))
    return TG_ERR_UNSUPPORTED; /* declined, nothing recorded */
  if (!fits(pass_names[p], t, g)) return tg_last_error();
  if (!takes(t, g)) return TG_ERR_UNSUPPORTED;
  return tg__cpu_conv_winograd_or((int)p, t, g, onednn_pass);
}

#else /* built without oneDNN's headers: the generic path runs every convolution */

bool tg__cpu_conv_onednn_available(void) { return false; }
const char *tg__cpu_conv_onednn_version(void) { return NULL; }
void tg__cpu_conv_onednn_enable(bool on) { (void)on; }
int64_t tg__cpu_conv_onednn_runs(void) { return 0; }
const char *tg_conv_engine(void) { return "im2col + GEMM"; }

typedef enum pass { FORWARD, BACKWARD_DATA, BACKWARD_WEIGHTS } pass;
static tg_status run(pass p, int n, tg_tensor *const *t) {
  (void)p, (void)n, (void)t;
  return TG_ERR_UNSUPPORTED;
}

#endif

tg_status tg__kernel_conv2d_forward_cpu(int n, tg_tensor *const *t) { return run(FORWARD, n, t); }

tg_status tg__kernel_conv2d_backward_data_cpu(int n, tg_tensor *const *t) {
  return run(BACKWARD_DATA, n, t);
}

tg_status tg__kernel_conv2d_backward_weights_cpu(int n, tg_tensor *const *t) {
  return run(BACKWARD_WEIGHTS, n, t);
}
