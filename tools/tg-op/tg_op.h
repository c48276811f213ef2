/* tg-op: what its files share. tg_op.c parses the command line, loads extensions and
 * dispatches; target.c turns a name into something to run; list.c, gradcheck.c, compare.c and
 * bench.c are the subcommands. tg-op is a user of tg: it sees only include/tg/. */
#ifndef TG_OP_TOOL_H
#define TG_OP_TOOL_H

#include <tg/extension.h>
#include <tg/tg.h>

/* Exit codes: success, a failed check or run, a bad command line (unknown op included). */
enum { TGOP_EXIT_OK = 0, TGOP_EXIT_FAIL = 1, TGOP_EXIT_USAGE = 2 };

#define TGOP_MAX_SIZES 16
#define TGOP_MAX_OUTPUTS 64
#define TGOP_MAX_TARGETS 16

typedef struct tgop_options {
  bool verbose;
  uint64_t seed;
  /* gradcheck */
  bool all, fast, no_gradgrad, no_cuda;
  /* bench */
  int n_sizes;
  int64_t sizes[TGOP_MAX_SIZES];
  int iters, warmup, threads; /* threads 0: tg's default */
  tg_dtype dtype;
  tg_device device;
  /* compare: tolerances, < 0 for the dtype's default */
  double rtol, atol;
  /* gemm-engines */
  bool calibrate;
} tgop_options;

/* Something tg-op can run by name: a registered op, or a composite reference (a function of
 * tg ops, such as tg_lltm_composed) that takes the same inputs as a registered op and
 * borrows its samples (inputs, and the scalars and ints it reads as its options). */
typedef tg_status (*tgop_composite_fn)(const tg_sample *sample, tg_tensor **outputs);
typedef struct tgop_target {
  const char *name;
  const tg_op_desc *op; /* NULL for a composite */
  /* composites only */
  int n_inputs, n_outputs;
  const char *samples_of; /* the registered op whose samples it runs on */
  const char *what;       /* what it is, for `tg-op list` */
  tgop_composite_fn run;
} tgop_target;

/* Finds name among the registered ops, then the composites; false if neither. */
bool tgop_resolve(const char *name, tgop_target *out);
int tgop_num_composites(void);
const tgop_target *tgop_composite_at(int index);
/* The op whose sample_inputs describe calls of t (t's own op, or samples_of). NULL, with a
 * message on stderr, when there is none. */
const tg_op_desc *tgop_sample_op(const tgop_target *t);
/* Inputs t takes (-1: any number) and outputs it gives for sample s. */
int tgop_target_inputs(const tgop_target *t);
int tgop_target_outputs(const tgop_target *t, const tg_sample *s);
/* Whether t can run on devices of this type. */
bool tgop_target_runs_on(const tgop_target *t, tg_device dev);
/* Checks that every target can run on sample s on dev; false with a message naming the
 * command otherwise (a usage error). */
bool tgop_check_targets(const char *command, int n, const tgop_target *targets, const tg_sample *s,
                        tg_device dev);
/* Runs t on s's inputs (and scalars and integers, for a registered op). */
tg_status tgop_run(const tgop_target *t, const tg_sample *s, int n_outputs, tg_tensor **outputs);

/* The subcommands; each returns an exit code. */
int tgop_list(const tgop_options *opts);
/* gemm-engines: the GEMM engine choice (tg_gemm_engine_report), after --calibrate. */
int tgop_gemm_engines(const tgop_options *opts);
int tgop_gradcheck(const tgop_options *opts, int n_names, char *const *names);
int tgop_bench(const tgop_options *opts, int n_names, char *const *names);
int tgop_compare(const tgop_options *opts, int n_names, char *const *names);

#endif
