/* Which of BLIS's kernel sets the CPU GEMMs run, decided once, before BLIS starts.
 *
 * BLIS 0.9 picks its kernel set when it initialises, from BLIS_ARCH_TYPE if set, read with
 * atoi (so "haswell" means 0, skx), and aborts the process on a number it was not built for;
 * a set the CPU cannot execute dies of SIGILL later. Unset, it falls back to its slow generic
 * kernels on CPUs it does not know (AMD family 0x1A, Zen 5), and its choice is not the
 * fastest on others. So tg checks a user's value first, names the set itself where it
 * measured a better one, then lets BLIS initialise.
 *
 * A second set for large GEMMs: BLIS keeps one set per process, but its expert API takes a
 * context, and the contexts of every set it was built with sit in its global kernel
 * structure (bli_gks_lookup_id). That function is not exported by libblis.so, so this
 * needs BLIS linked statically (TG_BLIS_CONTEXTS, set by CMake when Debian's libblis.a is
 * found). Where a second set is faster for large products and the user did not pin a set,
 * GEMMs of at least TG_BLIS_LARGE_MIN_MACS multiply-adds run it; smaller ones keep the
 * first set's small-matrix (sup) kernels. The second set reads only packed copies BLIS
 * makes itself, so tg's over-read guards (cpu_gemm.c) are unaffected. */
#define _POSIX_C_SOURCE 200809L /* setenv, unsetenv */
#include <blis.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cpu/blis_kernels.h"
#include "ops/cpu/cpu_internal.h"

typedef enum need {
  NEED_NONE,
  NEED_SSSE3,
  NEED_AVX,
  NEED_AVX2_FMA,
  NEED_SKX,
  NEED_KNL,
  NEED_FMA4,
  NEED_FMA4_XOP
} need;

typedef struct kernel_set {
  int id; /* BLIS 0.9's arch_t value: what BLIS_ARCH_TYPE holds */
  const char *name;
  need needs;
} kernel_set;

/* The x86-64 sets of Debian's BLIS 0.9 build ("x86_64" configuration family; knc is not in
 * it), with the instructions their kernels use. */
static const kernel_set sets[] = {
    {BLIS_ARCH_SKX, "skx", NEED_SKX},
    {BLIS_ARCH_KNL, "knl", NEED_KNL},
    {BLIS_ARCH_HASWELL, "haswell", NEED_AVX2_FMA},
    {BLIS_ARCH_SANDYBRIDGE, "sandybridge", NEED_AVX},
    {BLIS_ARCH_PENRYN, "penryn", NEED_SSSE3},
    {BLIS_ARCH_ZEN3, "zen3", NEED_AVX2_FMA},
    {BLIS_ARCH_ZEN2, "zen2", NEED_AVX2_FMA},
    {BLIS_ARCH_ZEN, "zen", NEED_AVX2_FMA},
    {BLIS_ARCH_EXCAVATOR, "excavator", NEED_FMA4},
    {BLIS_ARCH_STEAMROLLER, "steamroller", NEED_FMA4},
    {BLIS_ARCH_PILEDRIVER, "piledriver", NEED_FMA4},
    {BLIS_ARCH_BULLDOZER, "bulldozer", NEED_FMA4_XOP},
    {BLIS_ARCH_GENERIC, "generic", NEED_NONE},
};
enum { N_SETS = sizeof sets / sizeof sets[0] };

static const char *need_text(need n) {
  switch (n) {
  case NEED_SSSE3:
    return "SSSE3";
  case NEED_AVX:
    return "AVX";
  case NEED_AVX2_FMA:
    return "AVX2 and FMA3";
  case NEED_SKX:
    return "AVX-512 F/DQ/BW/VL";
  case NEED_KNL:
    return "AVX-512 F/PF/ER (Xeon Phi)";
  case NEED_FMA4:
    return "FMA4";
  case NEED_FMA4_XOP:
    return "FMA4 and XOP";
  default:
    return "nothing";
  }
}

static bool can_run(const tg_cpu_features *f, need n) {
  switch (n) {
  case NEED_NONE:
    return true;
  case NEED_SSSE3:
    return f->ssse3;
  case NEED_AVX:
    return f->avx;
  case NEED_AVX2_FMA:
    return f->avx2 && f->fma3;
  case NEED_SKX:
    return f->avx2 && f->fma3 && f->avx512f && f->avx512dq && f->avx512bw && f->avx512vl;
  case NEED_KNL:
    return f->avx2 && f->fma3 && f->avx512f && f->avx512pf && f->avx512er;
  case NEED_FMA4:
    return f->fma4;
  case NEED_FMA4_XOP:
    return f->fma4 && f->xop;
  }
  return false;
}

static const kernel_set *set_with_id(long id) {
  for (int i = 0; i < N_SETS; i++)
    if (sets[i].id == id) return &sets[i];
  return NULL;
}

static const kernel_set *set_named(const char *name) {
  for (int i = 0; i < N_SETS; i++)
    if (strcmp(sets[i].name, name) == 0) return &sets[i];
  return NULL;
}

/* "0 skx, 3 haswell, ..." for the sets this CPU can run. */
static void list_runnable(const tg_cpu_features *f, char *buf, size_t len) {
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < N_SETS && used < len; i++) {
    if (!can_run(f, sets[i].needs)) continue;
    int w =
        snprintf(buf + used, len - used, "%s%d (%s)", used ? ", " : "", sets[i].id, sets[i].name);
    if (w < 0) break;
    used += (size_t)w;
  }
}

static struct {
  pthread_once_t once;
  const char *kernels; /* the set BLIS runs; NULL while BLIS_ARCH_TYPE is invalid */
  const char *large;   /* the set for large GEMMs, or NULL: kernels for all */
  cntx_t *large_cntx;  /* its context */
  const char *source;  /* "BLIS_ARCH_TYPE", "tg" or "BLIS" */
  char error[512];     /* why BLIS_ARCH_TYPE was refused */
} state = {PTHREAD_ONCE_INIT, NULL, NULL, NULL, NULL, ""};

/* What tg__blis_prefer_large_kernels asked for before BLIS started ("" = no override). */
static const char *large_override = "";

/* A user's BLIS_ARCH_TYPE: a number BLIS 0.9 reads as meant, built into it, runnable here. */
static bool check_user_value(const char *value, const tg_cpu_features *f) {
  char runnable[256];
  list_runnable(f, runnable, sizeof runnable);
  char *end = NULL;
  long id = value[0] >= '0' && value[0] <= '9' ? strtol(value, &end, 10) : -1;
  if (!end || *end != '\0') {
    const kernel_set *named = set_named(value);
    if (named)
      snprintf(state.error, sizeof state.error,
               "BLIS_ARCH_TYPE='%s': BLIS 0.9 reads this variable as a number and would take "
               "this as 0 (skx); set BLIS_ARCH_TYPE=%d for %s (this CPU runs: %s)",
               value, named->id, named->name, runnable);
    else
      snprintf(state.error, sizeof state.error,
               "BLIS_ARCH_TYPE='%s' is not a kernel set number (this CPU runs: %s)", value,
               runnable);
    return false;
  }
  const kernel_set *set = set_with_id(id);
  if (!set) {
    snprintf(state.error, sizeof state.error,
             "BLIS_ARCH_TYPE=%s is not a kernel set of this BLIS %s build, which would abort "
             "(this CPU runs: %s)",
             value, bli_info_get_version_str(), runnable);
    return false;
  }
  if (!can_run(f, set->needs)) {
    snprintf(state.error, sizeof state.error,
             "BLIS_ARCH_TYPE=%s selects %s, whose kernels need %s, which this CPU (%s family "
             "0x%x) lacks (this CPU runs: %s)",
             value, set->name, need_text(set->needs), f->vendor, (unsigned)f->family, runnable);
    return false;
  }
  return true;
}

/* tg's choice where BLIS 0.9's own is slower or generic:
 * - AMD CPUs with AVX-512 (Zen 4, family 0x19; Zen 5, 0x1A) get haswell. BLIS picks zen3 on
 *   Zen 4; its sgemm is as fast as haswell's up to mid sizes but half as fast at large k
 *   (256 x 3072 x 2048, 1 thread: 63.5 ms vs 33.1 ms; haswell 97 GFLOP/s there, as fast as
 *   MKL and OpenBLAS on that CPU; bench/gemm_engines.c). skx is slower than both on Zen 4.
 * - Other AMD family 0x1A and later CPUs with AVX2 get zen3 (BLIS 0.9 does not know them
 *   and would run its generic kernels, about 4x slower). */
static const kernel_set *tg_choice(const tg_cpu_features *f) {
  if (strcmp(f->vendor, "AuthenticAMD") != 0 || !can_run(f, NEED_AVX2_FMA)) return NULL;
  if (f->family >= 0x19 && can_run(f, NEED_SKX)) return set_named("haswell");
  if (f->family >= 0x1a) return set_named("zen3");
  return NULL;
}

const char *tg__blis_default_kernels(const tg_cpu_features *f) {
  const kernel_set *set = tg_choice(f);
  return set ? set->name : NULL;
}

bool tg__blis_can_run(const tg_cpu_features *f, const char *name) {
  const kernel_set *set = set_named(name);
  return set && can_run(f, set->needs);
}

/* The set for large GEMMs on a CPU where another set than BLIS's beats it there: Intel
 * CPUs with AVX-512, where BLIS 0.9 runs haswell, get skx from TG_BLIS_LARGE_MIN_MACS on
 * (measured on a Xeon, issue 10: fused LLTM at 256 x 1024 x 1024 28.9 ms forward with skx
 * vs 41.4 ms with haswell, 64 x 1024 x 128 backward 1.21 vs 2.05 ms; at the tutorial's
 * 16 x 32 x 128 skx, without small-matrix kernels, took 56 us vs 33 us). */
static const kernel_set *tg_large_choice(const tg_cpu_features *f, const kernel_set *in_use) {
  if (strcmp(f->vendor, "GenuineIntel") == 0 && in_use && strcmp(in_use->name, "haswell") == 0 &&
      can_run(f, NEED_SKX))
    return set_named("skx");
  return NULL;
}

const char *tg__blis_large_kernels(const tg_cpu_features *f, const char *in_use) {
  const kernel_set *set = tg_large_choice(f, in_use ? set_named(in_use) : NULL);
  return set ? set->name : NULL;
}

void tg__blis_prefer_large_kernels(const char *name) { large_override = name; }

/* The context of a set BLIS was built with (NULL: not reachable in this build). */
static cntx_t *context_of(const kernel_set *set) {
#if TG_BLIS_CONTEXTS
  cntx_t **per_method = bli_gks_lookup_id((arch_t)set->id);
  return per_method ? per_method[BLIS_NAT] : NULL;
#else
  (void)set;
  return NULL;
#endif
}

void *tg__blis_context_named(const char *name) {
  const kernel_set *set = set_named(name);
  return set ? context_of(set) : NULL;
}

static void choose_large(const tg_cpu_features *f, const kernel_set *in_use) {
  const kernel_set *large = large_override[0] ? set_named(large_override) : NULL;
  if (!large && !large_override[0]) large = tg_large_choice(f, in_use);
  if (!large || large == in_use || !can_run(f, large->needs)) return;
  state.large_cntx = context_of(large);
  if (state.large_cntx) state.large = large->name;
}

static void choose_once(void) {
  const tg_cpu_features f = tg_cpu_features_read();
  const char *user = getenv("BLIS_ARCH_TYPE");
  const kernel_set *mine = NULL;
  if (user) {
    if (!check_user_value(user, &f)) return; /* BLIS is never started with a bad value */
    state.source = "BLIS_ARCH_TYPE";
  } else if ((mine = tg_choice(&f)) != NULL) {
    char id[16];
    snprintf(id, sizeof id, "%d", mine->id);
    /* BLIS reads the variable once, when it initialises; the process's environment is
     * restored right after. */
    setenv("BLIS_ARCH_TYPE", id, 1);
    state.source = "tg";
  } else {
    state.source = "BLIS";
  }
  bli_init(); /* reads BLIS_ARCH_TYPE; bli_arch_query_id aborts before it */
  const arch_t id = bli_arch_query_id();
  if (mine) unsetenv("BLIS_ARCH_TYPE");
  const kernel_set *in_use = set_with_id((long)id);
  state.kernels = in_use ? in_use->name : bli_arch_string(id);
  if (!user) choose_large(&f, in_use); /* a pinned set runs every GEMM */
}

tg_status tg_cpu_blis_ready(const char *op) {
  pthread_once(&state.once, choose_once);
  if (state.kernels) return TG_OK;
  return tg_set_error(TG_ERR_ARGUMENT, "%s: %s", op, state.error);
}

const char *tg_blis_kernels(void) {
  return tg_cpu_blis_ready("tg_blis_kernels") == TG_OK ? state.kernels : NULL;
}

const char *tg_blis_kernels_source(void) {
  return tg_cpu_blis_ready("tg_blis_kernels_source") == TG_OK ? state.source : NULL;
}

const char *tg_blis_large_kernels(void) {
  return tg_cpu_blis_ready("tg_blis_large_kernels") == TG_OK ? state.large : NULL;
}

bool tg_cpu_blis_pinned(void) {
  pthread_once(&state.once, choose_once);
  return state.source && strcmp(state.source, "BLIS_ARCH_TYPE") == 0;
}
