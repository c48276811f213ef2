/* tg-op: lists tg's registered ops and gradchecks, compares or times any of them by name,
 * optionally after loading extensions (--load lib.so) or compiling one (--jit with C/CUDA sources).
 * The command-line twin of the PyTorch tutorial's check, grad_check and benchmark scripts, for
 * every op. `tg-op --help` says how; docs/extensions.md shows it at work. */
#define _GNU_SOURCE /* getopt_long, strdup */
#include <errno.h>
#include <ctype.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tg_op.h"

static void usage(FILE *f) {
  fputs(
      "usage: tg-op [global options] COMMAND [options] [NAME...]\n"
      "\n"
      "commands:\n"
      "  list                       every registered op: inputs/outputs, kernels, gradient,\n"
      "                             samples, where it comes from; then composite references\n"
      "  gradcheck NAME... | --all  tg_op_check each op on its samples: gradcheck,\n"
      "                             gradgradcheck (or the refusal, once-differentiable),\n"
      "                             CPU against CUDA; exit 1 if any fails\n"
      "      --fast                 fast-mode gradcheck (random projections)\n"
      "      --no-gradgrad          skip gradgradcheck\n"
      "      --no-cuda              skip the CPU-vs-CUDA comparison\n"
      "  compare NAME NAME...       run the samples of the first op through each op: outputs and\n"
      "                             gradients must agree with the first's; exit 1 if not\n"
      "      --rtol R, --atol A     |x - first| <= A + R * |first| (default by dtype: f64\n"
      "                             1e-9, 1e-12; f32 1e-4, 1e-5)\n"
      "      --dtype, --device      as for bench\n"
      "  bench NAME [NAME...]       time forward and forward+backward of each op on the bench\n"
      "                             sample of the first (same inputs for all), with ratios\n"
      "      --sizes A,B,...        sizes for the bench sample (the op says how it reads\n"
      "                             them; the LLTM: batch,features,state)\n"
      "      --iters N              timed runs, median reported (default 100)\n"
      "      --warmup N             untimed runs first (default 10)\n"
      "      --dtype f32|f64        of the floating inputs (default f32)\n"
      "      --device DEV           cpu, cuda[:N], meta (shapes only: reports the bytes\n"
      "                             a call allocates) or a registered device (default cpu)\n"
      "      --threads N            CPU threads (default: tg's)\n"
      "  gemm-engines               the CPU GEMM engines and which runs each shape class\n"
      "                             (measured on first use, or read from the cache)\n"
      "      --calibrate            measure every engine on every class now (seconds) and\n"
      "                             write the cache\n"
      "      --threads N            the thread count the classes of more than one thread use\n"
      "\n"
      "global options:\n"
      "  --load LIB.so              load an extension first (repeatable)\n"
      "  --jit SRC[,SRC...]         compile an extension from .c/.cu sources and load it\n"
      "  --name NAME                the JIT extension's name (default: first source's stem)\n"
      "  --cflag FLAG               an extra compiler flag for --jit (repeatable)\n"
      "  --seed N                   seed of bench's inputs, and of gradcheck's random\n"
      "                             projections and upstream gradients (0: fixed)\n"
      "  -v, --verbose              more output (per-sample checks, JIT commands)\n"
      "  -h, --help                 this text\n"
      "\n"
      "Besides registered ops, NAME may be a composite reference: lltm_composed\n"
      "(tg_lltm_composed, on the samples of op lltm), conv2d_batch_norm_composed\n"
      "(tg_conv2d_batch_norm_composed, on those of conv2d_batch_norm) or attention_composed\n"
      "(tg_attention_composed, on those of scaled_dot_product_attention). Exit: 0 ok, 1 a\n"
      "check or run failed, 2 bad command line or unknown op.\n",
      f);
}

enum {
  OPT_LOAD = 256,
  OPT_JIT,
  OPT_NAME,
  OPT_CFLAG,
  OPT_SEED,
  OPT_ALL,
  OPT_FAST,
  OPT_NO_GRADGRAD,
  OPT_NO_CUDA,
  OPT_SIZES,
  OPT_ITERS,
  OPT_WARMUP,
  OPT_DTYPE,
  OPT_DEVICE,
  OPT_THREADS,
  OPT_CALIBRATE,
  OPT_RTOL,
  OPT_ATOL,
};

static const struct option long_options[] = {
    {"help", no_argument, NULL, 'h'},
    {"verbose", no_argument, NULL, 'v'},
    {"load", required_argument, NULL, OPT_LOAD},
    {"jit", required_argument, NULL, OPT_JIT},
    {"name", required_argument, NULL, OPT_NAME},
    {"cflag", required_argument, NULL, OPT_CFLAG},
    {"seed", required_argument, NULL, OPT_SEED},
    {"all", no_argument, NULL, OPT_ALL},
    {"fast", no_argument, NULL, OPT_FAST},
    {"no-gradgrad", no_argument, NULL, OPT_NO_GRADGRAD},
    {"no-cuda", no_argument, NULL, OPT_NO_CUDA},
    {"sizes", required_argument, NULL, OPT_SIZES},
    {"iters", required_argument, NULL, OPT_ITERS},
    {"warmup", required_argument, NULL, OPT_WARMUP},
    {"dtype", required_argument, NULL, OPT_DTYPE},
    {"device", required_argument, NULL, OPT_DEVICE},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"calibrate", no_argument, NULL, OPT_CALIBRATE},
    {"rtol", required_argument, NULL, OPT_RTOL},
    {"atol", required_argument, NULL, OPT_ATOL},
    {NULL, 0, NULL, 0},
};

/* The command line, parsed. Lists point into argv. */
typedef struct command_line {
  tgop_options opts;
  int n_loads;
  const char **loads;
  const char *jit_sources, *jit_name;
  int n_cflags;
  const char **cflags;
  const char *command;
  int n_names;
  char **names;
  bool help;
  /* which command each option belongs to, to refuse it elsewhere */
  const char *gradcheck_option, *bench_option, *compare_option, *sample_option, *threads_option;
} command_line;

/* A decimal integer in [min, max]; false with a message naming the option otherwise. */
static bool parse_int(const char *option, const char *text, long long min, long long max,
                      long long *out) {
  char *end = NULL;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  /* strtoll would skip leading spaces: only a sign or a digit may start the number */
  bool digit_first = isdigit((unsigned char)text[text[0] == '-' || text[0] == '+']);
  if (errno || !digit_first || *end != '\0' || v < min || v > max) {
    fprintf(stderr, "tg-op: %s: '%s' is not an integer in [%lld, %lld]\n", option, text, min, max);
    return false;
  }
  *out = v;
  return true;
}

/* A tolerance: a finite number >= 0. */
static bool parse_tolerance(const char *option, const char *text, double *out) {
  char *end = NULL;
  errno = 0;
  double v = strtod(text, &end);
  if (errno || end == text || isspace((unsigned char)text[0]) || *end != '\0' || !(v >= 0) ||
      v == HUGE_VAL) {
    fprintf(stderr, "tg-op: %s: '%s' is not a finite number >= 0\n", option, text);
    return false;
  }
  *out = v;
  return true;
}

static bool parse_sizes(const char *text, tgop_options *o) {
  o->n_sizes = 0;
  const char *p = text;
  for (;;) {
    char item[32];
    size_t len = strcspn(p, ",");
    if (len == 0 || len >= sizeof item || o->n_sizes == TGOP_MAX_SIZES) {
      fprintf(stderr,
              "tg-op: --sizes: '%s' is not a list of at most %d positive integers "
              "separated by commas\n",
              text, TGOP_MAX_SIZES);
      return false;
    }
    memcpy(item, p, len);
    item[len] = '\0';
    long long v;
    if (!parse_int("--sizes", item, 1, INT64_MAX, &v)) return false;
    o->sizes[o->n_sizes++] = v;
    if (p[len] == '\0') return true;
    p += len + 1;
  }
}

static bool parse_option(int c, const char *arg, command_line *cl) {
  tgop_options *o = &cl->opts;
  long long v = 0;
  switch (c) {
  case 'h':
    cl->help = true;
    return true;
  case 'v':
    o->verbose = true;
    return true;
  case OPT_LOAD:
    cl->loads[cl->n_loads++] = arg;
    return true;
  case OPT_JIT:
    if (cl->jit_sources) {
      fprintf(stderr, "tg-op: --jit given twice (one JIT extension per run; sources are "
                      "separated by commas)\n");
      return false;
    }
    cl->jit_sources = arg;
    return true;
  case OPT_NAME:
    cl->jit_name = arg;
    return true;
  case OPT_CFLAG:
    cl->cflags[cl->n_cflags++] = arg;
    return true;
  case OPT_SEED:
    if (!parse_int("--seed", arg, 0, INT64_MAX, &v)) return false;
    o->seed = (uint64_t)v;
    return true;
  case OPT_ALL:
    o->all = true;
    cl->gradcheck_option = "--all";
    return true;
  case OPT_FAST:
    o->fast = true;
    cl->gradcheck_option = "--fast";
    return true;
  case OPT_NO_GRADGRAD:
    o->no_gradgrad = true;
    cl->gradcheck_option = "--no-gradgrad";
    return true;
  case OPT_NO_CUDA:
    o->no_cuda = true;
    cl->gradcheck_option = "--no-cuda";
    return true;
  case OPT_SIZES:
    cl->bench_option = "--sizes";
    return parse_sizes(arg, o);
  case OPT_ITERS:
    cl->bench_option = "--iters";
    if (!parse_int("--iters", arg, 1, 100000000, &v)) return false;
    o->iters = (int)v;
    return true;
  case OPT_WARMUP:
    cl->bench_option = "--warmup";
    if (!parse_int("--warmup", arg, 0, 100000000, &v)) return false;
    o->warmup = (int)v;
    return true;
  case OPT_CALIBRATE:
    o->calibrate = true;
    return true;
  case OPT_THREADS:
    cl->threads_option = "--threads";
    if (!parse_int("--threads", arg, 1, 4096, &v)) return false;
    o->threads = (int)v;
    return true;
  case OPT_RTOL:
    cl->compare_option = "--rtol";
    return parse_tolerance("--rtol", arg, &o->rtol);
  case OPT_ATOL:
    cl->compare_option = "--atol";
    return parse_tolerance("--atol", arg, &o->atol);
  case OPT_DTYPE:
    cl->sample_option = "--dtype";
    if (strcmp(arg, "f32") == 0)
      o->dtype = TG_F32;
    else if (strcmp(arg, "f64") == 0)
      o->dtype = TG_F64;
    else {
      fprintf(stderr, "tg-op: --dtype: '%s' is not f32 or f64\n", arg);
      return false;
    }
    return true;
  case OPT_DEVICE:
    cl->sample_option = "--device";
    if (tg_device_parse(arg, &o->device) != TG_OK) {
      fprintf(stderr,
              "tg-op: --device: '%s' is not a device (cpu, cuda, cuda:N, meta or a "
              "registered one)\n",
              arg);
      tg_clear_error();
      return false;
    }
    return true;
  default:
    return false; /* getopt_long printed what was wrong */
  }
}

/* Parses argv into cl (options may come before or after the command); false on a usage
 * error, with a message on stderr. */
static bool parse_command_line(int argc, char **argv, command_line *cl) {
  cl->opts = (tgop_options){
      .iters = 100, .warmup = 10, .dtype = TG_F32, .device = TG_DEVICE_CPU, .rtol = -1, .atol = -1};
  cl->loads = calloc((size_t)argc, sizeof *cl->loads);
  cl->cflags = calloc((size_t)argc, sizeof *cl->cflags);
  if (!cl->loads || !cl->cflags) return false;
  int c;
  while ((c = getopt_long(argc, argv, "hv", long_options, NULL)) != -1)
    if (!parse_option(c, optarg, cl)) return false;
  if (cl->help) return true;
  if (optind >= argc) {
    fprintf(stderr, "tg-op: no command (list, gradcheck, compare, bench or gemm-engines)\n");
    return false;
  }
  cl->command = argv[optind];
  cl->names = argv + optind + 1;
  cl->n_names = argc - optind - 1;
  const bool is_gradcheck = strcmp(cl->command, "gradcheck") == 0;
  const bool is_bench = strcmp(cl->command, "bench") == 0;
  const bool is_compare = strcmp(cl->command, "compare") == 0;
  const bool is_engines = strcmp(cl->command, "gemm-engines") == 0;
  if (!is_gradcheck && !is_bench && !is_compare && !is_engines &&
      strcmp(cl->command, "list") != 0) {
    fprintf(stderr,
            "tg-op: unknown command '%s' (list, gradcheck, compare, bench or gemm-engines)\n",
            cl->command);
    return false;
  }
  if (!is_engines && cl->opts.calibrate) {
    fprintf(stderr, "tg-op: --calibrate is an option of gemm-engines, not %s\n", cl->command);
    return false;
  }
  if (!is_bench && !is_engines && cl->threads_option) {
    fprintf(stderr, "tg-op: --threads is an option of bench and gemm-engines, not %s\n",
            cl->command);
    return false;
  }
  if (!is_gradcheck && cl->gradcheck_option) {
    fprintf(stderr, "tg-op: %s is an option of gradcheck, not %s\n", cl->gradcheck_option,
            cl->command);
    return false;
  }
  if (!is_bench && cl->bench_option) {
    fprintf(stderr, "tg-op: %s is an option of bench, not %s\n", cl->bench_option, cl->command);
    return false;
  }
  if (!is_compare && cl->compare_option) {
    fprintf(stderr, "tg-op: %s is an option of compare, not %s\n", cl->compare_option, cl->command);
    return false;
  }
  if (!is_bench && !is_compare && cl->sample_option) {
    fprintf(stderr, "tg-op: %s is an option of bench and compare, not %s\n", cl->sample_option,
            cl->command);
    return false;
  }
  if (!is_gradcheck && !is_bench && !is_compare && cl->n_names > 0) {
    fprintf(stderr, "tg-op: %s takes no op names (got '%s')\n", cl->command, cl->names[0]);
    return false;
  }
  if ((cl->jit_name || cl->n_cflags) && !cl->jit_sources) {
    fprintf(stderr, "tg-op: --name and --cflag go with --jit\n");
    return false;
  }
  return true;
}

/* ---- extensions ---- */

/* The JIT name when --name is not given: the first source's file name up to its first dot. */
static bool default_jit_name(const char *sources, char *buf, size_t len) {
  const char *start = sources;
  for (const char *p = sources; *p && *p != ','; p++)
    if (*p == '/') start = p + 1;
  size_t n = strcspn(start, ".,");
  if (n == 0 || n >= len) return false;
  memcpy(buf, start, n);
  buf[n] = '\0';
  return true;
}

static bool jit_extension(const command_line *cl) {
  char *list = strdup(cl->jit_sources);
  const char **sources = calloc(strlen(cl->jit_sources) + 1, sizeof *sources);
  char name[256];
  bool ok = list && sources;
  int n = 0;
  for (char *tok = ok ? strtok(list, ",") : NULL; tok; tok = strtok(NULL, ",")) sources[n++] = tok;
  if (ok && n == 0) {
    fprintf(stderr, "tg-op: --jit: no source files in '%s'\n", cl->jit_sources);
    ok = false;
  }
  if (ok && !cl->jit_name && !default_jit_name(cl->jit_sources, name, sizeof name)) {
    fprintf(stderr, "tg-op: --jit: give the extension a --name\n");
    ok = false;
  }
  if (ok) {
    tg_jit_options jo = {
        .n_cflags = cl->n_cflags, .cflags = cl->cflags, .verbose = cl->opts.verbose};
    tg_extension *ext = tg_extension_jit(cl->jit_name ? cl->jit_name : name, n, sources, jo);
    if (!ext)
      fprintf(stderr, "tg-op: --jit %s: %s\n", cl->jit_sources, tg_last_error_message());
    else if (cl->opts.verbose)
      fprintf(stderr, "tg-op: %s %s (%d op%s)\n",
              tg_extension_jit_compiled() ? "compiled and loaded" : "loaded (cached)",
              tg_extension_path(ext), tg_extension_num_ops(ext),
              tg_extension_num_ops(ext) == 1 ? "" : "s");
    ok = ext != NULL;
  }
  tg_clear_error();
  free(list);
  free(sources);
  return ok;
}

static bool load_extensions(const command_line *cl) {
  for (int i = 0; i < cl->n_loads; i++) {
    tg_extension *ext = tg_extension_load(cl->loads[i]);
    if (!ext) {
      fprintf(stderr, "tg-op: --load %s: %s\n", cl->loads[i], tg_last_error_message());
      tg_clear_error();
      return false;
    }
    if (cl->opts.verbose)
      fprintf(stderr, "tg-op: loaded %s (%d op%s)\n", tg_extension_path(ext),
              tg_extension_num_ops(ext), tg_extension_num_ops(ext) == 1 ? "" : "s");
  }
  return cl->jit_sources ? jit_extension(cl) : true;
}

/* Unloads every extension, last loaded first; false if one refuses. */
static bool unload_extensions(void) {
  bool ok = true;
  for (int i = tg_extension_count() - 1; i >= 0; i--) {
    tg_extension *ext = tg_extension_at(i);
    const char *path = tg_extension_path(ext);
    char saved[4096];
    snprintf(saved, sizeof saved, "%s", path ? path : "?");
    if (tg_extension_unload(ext) != TG_OK) {
      fprintf(stderr, "tg-op: unloading %s: %s\n", saved, tg_last_error_message());
      tg_clear_error();
      ok = false;
    }
  }
  return ok;
}

static int run_command(const command_line *cl) {
  if (strcmp(cl->command, "list") == 0) return tgop_list(&cl->opts);
  if (strcmp(cl->command, "gemm-engines") == 0) return tgop_gemm_engines(&cl->opts);
  if (strcmp(cl->command, "gradcheck") == 0)
    return tgop_gradcheck(&cl->opts, cl->n_names, cl->names);
  if (strcmp(cl->command, "compare") == 0) return tgop_compare(&cl->opts, cl->n_names, cl->names);
  return tgop_bench(&cl->opts, cl->n_names, cl->names);
}

int main(int argc, char **argv) {
  command_line cl = {0};
  int code = TGOP_EXIT_OK;
  if (!parse_command_line(argc, argv, &cl))
    code = TGOP_EXIT_USAGE;
  else if (cl.help)
    usage(stdout);
  else if (!load_extensions(&cl))
    code = TGOP_EXIT_FAIL;
  else
    code = run_command(&cl);
  fflush(stdout); /* the command's output before what follows on stderr */
  free(cl.loads);
  free(cl.cflags);
  if (code == TGOP_EXIT_USAGE && !cl.command && !cl.help)
    fputs("tg-op --help lists the commands and options\n", stderr);

  if (!unload_extensions() && code == TGOP_EXIT_OK) code = TGOP_EXIT_FAIL;
  /* Everything ran in scopes that have ended: nothing of tg may be left. */
  int64_t live = tg_live_objects();
  if (live != 0) {
    fprintf(stderr, "tg-op: %" PRId64 " tg objects still alive at exit (a leak)\n", live);
    if (code == TGOP_EXIT_OK) code = TGOP_EXIT_FAIL;
  } else if (cl.opts.verbose) {
    fprintf(stderr, "tg-op: 0 tg objects alive at exit\n");
  }
  return code;
}
