/* The CPU's GEMM engines (gemm_engines.c), the shape classes GEMMs are sorted into
 * (gemm_classes.c), and the per-class choice among the engines: measured on the running CPU,
 * cached, or pinned (gemm_choice.c, gemm_calibrate.c, gemm_choice_cache.c). Internal. */
#ifndef TG_GEMM_ENGINE_H
#define TG_GEMM_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tg/types.h"

/* c[m, n] = alpha * a[m, k] @ b[k, n] + beta * c, as cpu_gemm.c hands it to an engine: every
 * matrix has positive strides, one of them unit (row- or column-major), and the room behind it
 * that BLIS's kernels may read. Strides in elements. */
typedef struct tg_gemm_problem {
  tg_dtype dtype; /* TG_F32 or TG_F64 */
  int64_t m, n, k;
  char *c;
  int64_t c_rs, c_cs;
  const char *a;
  int64_t a_rs, a_cs;
  const char *b;
  int64_t b_rs, b_cs;
  double alpha, beta;
  int threads; /* the engine's team: 1, or tg's thread count */
} tg_gemm_problem;

/* ---- engines (gemm_engines.c) ---- */
typedef enum tg_gemm_engine_kind {
  TG_GEMM_ENGINE_BLIS,     /* one of BLIS's kernel sets, through its expert API */
  TG_GEMM_ENGINE_XSMM,     /* libxsmm's JIT kernels: C and B with unit column stride */
  TG_GEMM_ENGINE_MKL,      /* MKL's cblas, loaded at run time where it is found (mkl_gemm.c) */
  TG_GEMM_ENGINE_OPENBLAS, /* OpenBLAS's cblas, the same way (openblas_gemm.c) */
} tg_gemm_engine_kind;

typedef struct tg_gemm_engine {
  char name[32]; /* "blis-zen3", "blis-zen3-packed", "libxsmm", "mkl", "openblas": what
                  * TG_GEMM_ENGINE and the cache say */
  tg_gemm_engine_kind kind;
  void *blis_cntx;  /* a BLIS set's context; NULL: the set BLIS runs for the process */
  bool blis_packed; /* BLIS's small/unpacked ("sup") path off: every product packed */
} tg_gemm_engine;

/* Three BLIS sets, each also packed, libxsmm, MKL, OpenBLAS: 9 on an AVX-512 CPU. */
#define TG_GEMM_MAX_ENGINES 12
/* The engines this process can run, after tg_cpu_blis_ready: BLIS's own set first, then the
 * other BLIS sets the CPU executes and this build reaches, each set again packed, libxsmm,
 * MKL, OpenBLAS. */
int tg__gemm_engine_count(void);
const tg_gemm_engine *tg__gemm_engine_at(int index);
/* The index of the engine of that name, or -1. */
int tg__gemm_engine_named(const char *name);
/* Runs p on engine index; false when the engine does not take p (a layout, sizes past
 * 32-bit BLAS integers): nothing written then. A product of more than one thread runs as
 * blocks of out, one per thread, each a one-thread product on tg's thread pool. */
bool tg__gemm_engine_run(int index, const tg_gemm_problem *p);
/* Whether engine index takes p (layouts, sizes, team): what tg__gemm_engine_run would. */
bool tg__gemm_engine_takes(int index, const tg_gemm_problem *p);
/* The one-thread product the first thread of p's team runs (its block of out, as
 * tg__gemm_engine_run splits p); p itself on one thread where p does not split. */
tg_gemm_problem tg__gemm_block_of(const tg_gemm_problem *p);
/* "BLIS 0.9.0, libxsmm 1.17, MKL 2025.2, OpenBLAS 0.3.21": the versions the cache is keyed
 * on. */
void tg__gemm_engine_versions(char *buf, size_t size);

/* MKL (mkl_gemm.c): loaded once, from TG_MKL_LIBRARY when set ("off": never), else
 * libmkl_rt from the loader's path or $VIRTUAL_ENV/lib. */
bool tg__mkl_available(void);
const char *tg__mkl_version(void); /* NULL: not loaded */
/* Whether MKL's cblas takes p's layouts and sizes (32-bit integers). */
bool tg__mkl_takes(const tg_gemm_problem *p);
/* Runs p on one thread (MKL's local count), after tg__mkl_takes. */
bool tg__mkl_gemm(const tg_gemm_problem *p);

/* OpenBLAS (openblas_gemm.c): loaded once, from TG_OPENBLAS_LIBRARY when set ("off": never),
 * else Debian's serial build or libopenblas.so.0 from the loader's path. */
bool tg__openblas_available(void);
const char *tg__openblas_version(void); /* NULL: not loaded */
/* One-thread products only (its calls are serialised: openblas_gemm.c says why). */
bool tg__openblas_takes(const tg_gemm_problem *p);
/* Runs p on the calling thread, after tg__openblas_takes. */
bool tg__openblas_gemm(const tg_gemm_problem *p);

/* ---- shape classes (gemm_classes.c) ----
 * A class is (size, aspect, layout, threads): five sizes by multiply-adds (tiny < 2^16,
 * small < 2^22, mid < 2^25, large < 2^28, huge), four aspects (even, or which of m, n, k is under
 * half of the next smallest), the four layouts of a and b (row-major or transposed), and one thread
 * or more (tiny and small products always run one thread: TG_CPU_GEMM_PARALLEL_MIN_MACS). */
enum {
  TG_GEMM_SIZE_CLASSES = 5,
  TG_GEMM_ASPECTS = 4,
  TG_GEMM_LAYOUTS = 4,
  TG_GEMM_THREAD_CLASSES = 2,
  TG_GEMM_CLASSES =
      TG_GEMM_SIZE_CLASSES * TG_GEMM_ASPECTS * TG_GEMM_LAYOUTS * TG_GEMM_THREAD_CLASSES,
};
/* The class of a product (threads: its team size). a_t: a is column-major (transposed). */
int tg__gemm_class_of(int64_t m, int64_t n, int64_t k, bool a_t, bool b_t, int threads);
/* Whether the class is measured (false: a tiny or small class of more than one thread, which
 * runs one thread and shares the one-thread class's engine). */
bool tg__gemm_class_measured(int cls);
/* The one-thread twin of an unmeasured class (the class itself otherwise). */
int tg__gemm_class_canonical(int cls);
/* The shape calibration times the class at; threads_many: the class runs more than one. */
void tg__gemm_class_shape(int cls, int64_t *m, int64_t *n, int64_t *k, bool *a_t, bool *b_t,
                          bool *threads_many);
/* The second shape it is timed at: same class, a larger footprint (gemm_classes.c). */
void tg__gemm_class_far_shape(int cls, int64_t *m, int64_t *n, int64_t *k);
/* "mid/m-short/NT/t2"-like name (t1 or tN), in buf. */
void tg__gemm_class_name(int cls, char *buf, size_t size);
/* The class of that name, or -1. */
int tg__gemm_class_named(const char *name);

/* ---- the choice (gemm_choice.c) ---- */
/* The engine index for p, or -1: tg's built-in rules (cpu_gemm.c). Starts the choice once
 * (TG_GEMM_ENGINE, the cache, or a calibration); TG_ERR_ARGUMENT for a bad TG_GEMM_ENGINE,
 * reported through *status (engine -1 then). */
int tg__gemm_engine_choice(const tg_gemm_problem *p, tg_status *status);

/* The engine tg's built-in rules run p on: libxsmm for one-thread products below
 * TG_XSMM_MAX_MACS (the HUGE classes' lower bound, so that no HUGE class starts on it: its
 * representative shape sits on that bound) where b is row-major, BLIS's large set
 * (tg_blis_large_kernels) from TG_BLIS_LARGE_MIN_MACS, else BLIS's own set (index 0). */
int tg__gemm_builtin_engine(const tg_gemm_problem *p);
/* Tests: decides again as on the first GEMM (reads TG_GEMM_ENGINE and the cache again). */
void tg__gemm_choice_again(void);

/* A calibration's result: per measured class, each engine's median microseconds (negative:
 * not taken or not measured) and the engine chosen. */
typedef struct tg_gemm_table {
  int chosen[TG_GEMM_CLASSES];
  float us[TG_GEMM_CLASSES][TG_GEMM_MAX_ENGINES];
  int threads; /* tg's thread count when measured: what "tN" classes ran */
} tg_gemm_table;

/* Whether the choice is a table (calibrated or cached), not the built-in rules or a pin. */
bool tg__gemm_choice_measured(void);

/* ---- exact shapes (gemm_shapes.c) ----
 * A class's engine is measured at two shapes of the class, and a product of another shape
 * can run faster elsewhere (the LLTM's 16 x 32 x 128 weight gradient, 384 x 160 x 16: BLIS
 * 27.3 us, libxsmm 23.4 us on Zen 3, in a class BLIS won; GPT's 768 x 256 x 2048 weight
 * gradient on two threads: its class's BLIS set ran each thread's 384 x 256 x 2048 block at
 * 48 GF/s, the same set packed at 77). Products whose block (tg__gemm_block_of: the whole
 * product on one thread) is under TG_GEMM_SHAPE_MAX_MACS are therefore tuned per exact shape
 * (sizes, layouts, dtype, team) while the choice is a table, deterministic mode is off and
 * TG_GEMM_SHAPES is not "off": the shape's first call times every engine that takes the
 * product as it will run (one thread on the thread's CPU clock, a team split on tg's pool on
 * the wall clock), TG_GEMM_SHAPE_ROUNDS rounds into a scratch output (an engine over 3x the
 * fastest after two rounds is not timed again), and the fastest (the class's engine unless
 * another is 3% faster) runs that call and every later one. Up to 1024 shapes; the others,
 * and a first call without memory for the scratch output, keep their class's engine. */
#define TG_GEMM_SHAPE_MAX_MACS (1LL << 30)
enum { TG_GEMM_SHAPE_ROUNDS = 3 };
/* The engine to run p on, given its class's (-1 passes through). */
int tg__gemm_shape_engine(const tg_gemm_problem *p, int class_engine);
/* The engine p's exact shape settled on, or -1. */
int tg__gemm_shape_settled(const tg_gemm_problem *p);
/* How many shapes have settled in this process. */
int tg__gemm_shapes_settled_count(void);
/* Forgets every shape and reads TG_GEMM_SHAPES again (tg__gemm_choice_again). */
void tg__gemm_shapes_reset(void);
/* Tests: a clock read before and after each engine's timed run, in place of the thread's CPU
 * clock (NULL: the real one). */
void tg__gemm_shapes_fake_clock(int64_t (*clock)(int engine));

/* How much faster than the engine a choice starts from another must be to replace it, so that
 * noise does not move choices about (calibration per class, tuning per shape). */
#define TG_GEMM_CHOICE_MARGIN 0.03

/* ---- calibration (gemm_calibrate.c) ---- */
/* Measures every engine on every measured class: TG_OK, or TG_ERR_MEMORY. The engine the
 * built-in rules would run (builtin[cls]) keeps a class unless another is 3% faster. *noisy:
 * the runs spread too widely to keep the result beyond this process (a busy machine). */
tg_status tg__gemm_calibrate(tg_gemm_table *table, const int builtin[TG_GEMM_CLASSES], bool *noisy);
/* Tests: calibrate at shapes of at most 32 x 32 x 32 (milliseconds instead of seconds; the
 * spread of their runs is not judged). */
void tg__gemm_calibration_quick(bool quick);
/* Tests: every calibration counts as noisy (not cached). */
void tg__gemm_calibration_assume_noisy(bool noisy);

/* ---- the cache (gemm_choice_cache.c) ---- */
/* The cache file for this CPU and these libraries: TG_GEMM_CACHE (a file; "off": none), else
 * $XDG_CACHE_HOME/tg/ or ~/.cache/tg/ gemm-engines-<key hash>.txt. false: no cache. */
bool tg__gemm_cache_path(char *buf, size_t size);
/* The key a cache must carry: CPU brand, family, model, stepping, cores, tg's, BLIS's and the
 * engines' versions. */
void tg__gemm_cache_key(char *buf, size_t size);
/* Reads path into table: 1; 0 when there is no such file; -1 when it is not this process's
 * cache, with why (no message printed). */
int tg__gemm_cache_read(const char *path, tg_gemm_table *table, char *why, size_t why_size);
/* Writes atomically (a temporary file renamed over path): true, or false with why. */
bool tg__gemm_cache_write(const char *path, const tg_gemm_table *table, char *why, size_t why_size);

#endif
