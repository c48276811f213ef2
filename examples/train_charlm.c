/* A character-level language model: embedding -> LLTM over T steps -> linear -> cross
 * entropy, trained with Adam on the bytes of a text file (by default the GPL, which ships
 * with every Debian system). Built on tg's public API only: modules, the LLTM sequence
 * model, checkpoints, generators.
 *
 *   train_charlm [--steps N] [--batch B] [--seq-len T] [--hidden H] [--embed E] [--lr LR]
 *                [--seed S] [--threads N] [--fused | --composed | --both] [--text PATH]
 *                [--csv PATH] [--plot PATH.png] [--checkpoint PATH [--checkpoint-every N]]
 *                [--resume] [--sample N [--prompt TEXT] [--temperature X]] [--clip X]
 *                [--check] [--expect-below X] [--quiet] [--dist [--bucket-kb N] [--no-overlap]]
 *
 * Batches are B windows of T+1 bytes at random places in the first 90% of the text (picked
 * with a tg_generator, saved in the checkpoint, so --resume continues bit for bit); the
 * last 10% is held out for the validation loss. The unigram entropy of the text (what a
 * model that knows only the byte frequencies scores) is printed first: the model must get
 * well below it. --both trains a fused and a composed model side by side from the same
 * seed and compares their tokens/s. Exit status: 0, 1 when a check fails (--check,
 * --expect-below, objects left alive), 2 on bad usage.
 *
 * --dist, under `mpirun -np N`: data-parallel training with tg_dist (tg/dist.h,
 * docs/distributed.md). --batch stays the global batch: every rank draws all B windows with
 * the same sampler and trains on its own slice of them (its shard), the DDP averages the
 * gradients, so the run follows the single-process one up to rounding. Rank 0 alone prints,
 * writes the CSV and the checkpoints; a rank that fails ends the job (tg_dist_abort). */
#define _GNU_SOURCE /* getopt_long, popen, isatty, clock_gettime */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli_parse.h"
#include "train_options.h"
#include "train_run.h"
#include "train_util.h"
#include "tg/dist.h"
#include "tg/tg.h"

#define PROG "train_charlm"
/* --check: what the model must gain over byte frequencies alone, in nats per character. */
#define CHECK_MARGIN 0.5
#define CSV_HEADER "step,impl,loss,tokens_per_s,elapsed_s,val_loss"

/* ---- options ---- */

enum impl_choice { RUN_FUSED, RUN_COMPOSED, RUN_BOTH };

typedef struct options {
  const char *text;
  long long steps, batch, seq_len, hidden, embed, threads, sample;
  long long bucket_kb; /* --dist: the DDP's bucket size (0: tg_dist's default) */
  double lr, temperature, clip, expect_below;
  long long seed;
  enum impl_choice impl;
  const char *prompt;
  int dist, no_overlap;
  train_options common; /* --csv, --plot, --checkpoint, ... (train_options.h) */
} options;

/* Where this process stands in a --dist job (rank 0 of 1 without it): the whole program's
 * state, read by the printing and the sharding below. */
static struct { int on, rank, world; } dist = {0, 0, 1};

static void usage(FILE *f) {
  fprintf(f, "usage: " PROG " [options]\n"
             "  --text PATH          training text (default /usr/share/common-licenses/GPL-3)\n"
             "  --steps N            training steps (default 1500)\n"
             "  --batch B            sequences per step (default 32)\n"
             "  --seq-len T          characters per sequence (default 64)\n"
             "  --hidden H           LLTM state size (default 128)\n"
             "  --embed E            embedding size (default 32)\n"
             "  --lr LR              Adam's learning rate (default 0.003)\n"
             "  --clip X             clip the gradients' global norm to X (default: off)\n"
             "  --seed S             initialisation and batch sampling (default 1)\n"
             "  --threads N          CPU threads (default: tg's, usually all cores)\n"
             "  --fused | --composed | --both   the LLTM's implementation (default fused);\n"
             "                       --both trains one of each side by side (tokens/s)\n"
             "  --csv PATH           step, loss, tokens/s, elapsed, validation loss per row\n"
             "  --plot PATH.png      the loss curve, drawn by gnuplot when it is installed\n"
             "  --checkpoint PATH    save model, optimizer, step and sampler there (and\n"
             "                       keep the thread count under load: tg_set_deterministic)\n"
             "  --checkpoint-every N every N steps (default: only at the end)\n"
             "  --resume             continue from --checkpoint's step, bit for bit\n"
             "  --sample N           generate N characters at the end (default 0)\n"
             "  --prompt TEXT        what the sample starts from (default \"The \")\n"
             "  --temperature X      sampling temperature (default 0.8)\n"
             "  --log-every N        steps between progress lines when not on a terminal\n"
             "  --check              fail unless the validation loss ends 0.5 nats below the\n"
             "                       unigram entropy and below the first step's training loss\n"
             "  --expect-below X     fail unless the final validation loss is below X\n"
             "  --quiet              only the summary\n"
             "  --dist               data-parallel over the ranks of `mpirun -np N` (tg_dist);\n"
             "                       --batch is the global batch, divided among the ranks\n"
             "  --bucket-kb N        --dist: gradient bucket size in KiB (default 1024)\n"
             "  --no-overlap         --dist: all-reduce after backward, not during it\n");
}

/* cli_parse.h's integers, into the long longs of options. */
enum {
  OPT_TEXT = 256,
  OPT_STEPS,
  OPT_BATCH,
  OPT_SEQ,
  OPT_HIDDEN,
  OPT_EMBED,
  OPT_LR,
  OPT_CLIP,
  OPT_SEED,
  OPT_THREADS,
  OPT_FUSED,
  OPT_COMPOSED,
  OPT_BOTH,
  OPT_SAMPLE,
  OPT_PROMPT,
  OPT_TEMPERATURE,
  OPT_EXPECT_BELOW,
  OPT_DIST,
  OPT_BUCKET_KB,
  OPT_NO_OVERLAP,
  OPT_HELP,
};

/* 1: go on, 0: exit 0 (--help), -1: exit 2. */
static int parse_options(int argc, char **argv, options *o) {
  static const struct option longs[] = {
      {"text", required_argument, 0, OPT_TEXT},
      {"steps", required_argument, 0, OPT_STEPS},
      {"batch", required_argument, 0, OPT_BATCH},
      {"seq-len", required_argument, 0, OPT_SEQ},
      {"hidden", required_argument, 0, OPT_HIDDEN},
      {"embed", required_argument, 0, OPT_EMBED},
      {"lr", required_argument, 0, OPT_LR},
      {"clip", required_argument, 0, OPT_CLIP},
      {"seed", required_argument, 0, OPT_SEED},
      {"threads", required_argument, 0, OPT_THREADS},
      {"fused", no_argument, 0, OPT_FUSED},
      {"composed", no_argument, 0, OPT_COMPOSED},
      {"both", no_argument, 0, OPT_BOTH},
      {"csv", required_argument, 0, TRAIN_OPT_CSV},
      {"plot", required_argument, 0, TRAIN_OPT_PLOT},
      {"checkpoint", required_argument, 0, TRAIN_OPT_CKPT},
      {"checkpoint-every", required_argument, 0, TRAIN_OPT_CKPT_EVERY},
      {"resume", no_argument, 0, TRAIN_OPT_RESUME},
      {"sample", required_argument, 0, OPT_SAMPLE},
      {"prompt", required_argument, 0, OPT_PROMPT},
      {"temperature", required_argument, 0, OPT_TEMPERATURE},
      {"log-every", required_argument, 0, TRAIN_OPT_LOG_EVERY},
      {"check", no_argument, 0, TRAIN_OPT_CHECK},
      {"expect-below", required_argument, 0, OPT_EXPECT_BELOW},
      {"quiet", no_argument, 0, TRAIN_OPT_QUIET},
      {"dist", no_argument, 0, OPT_DIST},
      {"bucket-kb", required_argument, 0, OPT_BUCKET_KB},
      {"no-overlap", no_argument, 0, OPT_NO_OVERLAP},
      {"help", no_argument, 0, OPT_HELP},
      {0, 0, 0, 0},
  };
  int impl_flags = 0, c, ok = 1;
  while (ok && (c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
    const char *a = optarg;
    int taken = train_option(PROG, c, a, &o->common);
    if (taken >= 0) {
      ok = taken;
      continue;
    }
    switch (c) {
    case OPT_TEXT:
      o->text = a;
      break;
    case OPT_STEPS:
      ok = cli_parse_ll(PROG, "--steps", a, 1, 100000000, &o->steps);
      break;
    case OPT_BATCH:
      ok = cli_parse_ll(PROG, "--batch", a, 1, 65536, &o->batch);
      break;
    case OPT_SEQ:
      ok = cli_parse_ll(PROG, "--seq-len", a, 1, 65536, &o->seq_len);
      break;
    case OPT_HIDDEN:
      ok = cli_parse_ll(PROG, "--hidden", a, 1, 65536, &o->hidden);
      break;
    case OPT_EMBED:
      ok = cli_parse_ll(PROG, "--embed", a, 1, 65536, &o->embed);
      break;
    case OPT_LR:
      ok = cli_parse_double(PROG, "--lr", a, 1e-9, 10, &o->lr);
      break;
    case OPT_CLIP:
      ok = cli_parse_double(PROG, "--clip", a, 0, 1e30, &o->clip);
      break;
    case OPT_SEED:
      ok = cli_parse_ll(PROG, "--seed", a, 0, INT64_MAX, &o->seed);
      break;
    case OPT_THREADS:
      ok = cli_parse_ll(PROG, "--threads", a, 1, 4096, &o->threads);
      break;
    case OPT_FUSED:
      o->impl = RUN_FUSED, impl_flags++;
      break;
    case OPT_COMPOSED:
      o->impl = RUN_COMPOSED, impl_flags++;
      break;
    case OPT_BOTH:
      o->impl = RUN_BOTH, impl_flags++;
      break;
    case OPT_SAMPLE:
      ok = cli_parse_ll(PROG, "--sample", a, 0, 100000000, &o->sample);
      break;
    case OPT_PROMPT:
      o->prompt = a;
      break;
    case OPT_TEMPERATURE:
      ok = cli_parse_double(PROG, "--temperature", a, 1e-3, 100, &o->temperature);
      break;
    case OPT_EXPECT_BELOW:
      ok = cli_parse_double(PROG, "--expect-below", a, 0, 1e30, &o->expect_below);
      break;
    case OPT_DIST:
      o->dist = 1;
      break;
    case OPT_BUCKET_KB:
      ok = cli_parse_ll(PROG, "--bucket-kb", a, 1, 1LL << 30, &o->bucket_kb);
      break;
    case OPT_NO_OVERLAP:
      o->no_overlap = 1;
      break;
    case OPT_HELP:
      usage(stdout);
      return 0;
    default: /* getopt_long said what is wrong */
      ok = 0;
    }
  }
  ok = ok && train_no_operands(PROG, optind, argc, argv);
  ok = ok && train_one_impl(PROG, impl_flags, "--fused, --composed, --both");
  ok = ok && train_checkpoint_options_ok(PROG, &o->common);
  if (ok && o->common.checkpoint && o->impl == RUN_BOTH) {
    fprintf(stderr, PROG ": --checkpoint saves one model: not with --both\n");
    ok = 0;
  }
  if (ok && o->dist && o->impl == RUN_BOTH) {
    fprintf(stderr, PROG ": --dist trains one model: not with --both\n");
    ok = 0;
  }
  if (ok && !o->dist && (o->bucket_kb || o->no_overlap)) {
    fprintf(stderr, PROG ": --bucket-kb and --no-overlap need --dist\n");
    ok = 0;
  }
  if (!ok) cli_usage_error(PROG);
  return ok ? 1 : -1;
}

/* ---- the text ---- */

typedef struct corpus {
  int vocab;      /* distinct bytes */
  int id_of[256]; /* byte -> token, -1 if absent */
  unsigned char byte_of[256];
  int64_t *tokens, n; /* the whole text as tokens */
  int64_t n_train;    /* the first 90% trains, the rest validates */
  double unigram;     /* entropy of the byte frequencies, nats per character */
} corpus;

static int read_corpus(const char *path, corpus *c) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, PROG ": cannot open '%s': %s\n", path, strerror(errno));
    return 0;
  }
  size_t cap = 1 << 16, n = 0;
  unsigned char *bytes = malloc(cap);
  size_t got;
  while (bytes && (got = fread(bytes + n, 1, cap - n, f)) > 0) {
    n += got;
    if (n == cap) {
      unsigned char *bigger = realloc(bytes, cap *= 2);
      if (!bigger) free(bytes);
      bytes = bigger;
    }
  }
  int read_error = ferror(f);
  fclose(f);
  if (!bytes || read_error) {
    fprintf(stderr, PROG ": cannot read '%s'\n", path);
    free(bytes);
    return 0;
  }
  int64_t count[256] = {0};
  for (size_t i = 0; i < n; i++) count[bytes[i]]++;
  c->vocab = 0;
  c->unigram = 0;
  for (int b = 0; b < 256; b++) {
    c->id_of[b] = count[b] ? c->vocab : -1;
    if (count[b]) {
      double p = (double)count[b] / (double)n;
      c->unigram -= p * log(p);
      c->byte_of[c->vocab++] = (unsigned char)b;
    }
  }
  c->n = (int64_t)n;
  c->tokens = malloc(sizeof *c->tokens * (n ? n : 1));
  if (c->tokens)
    for (size_t i = 0; i < n; i++) c->tokens[i] = c->id_of[bytes[i]];
  free(bytes);
  c->n_train = c->n - c->n / 10;
  return c->tokens != NULL;
}

/* ---- the model ---- */

typedef struct run {
  const char *name;
  tg_lltm_impl impl;
  tg_module *model; /* owns the three layers */
  tg_embedding_layer *embed;
  tg_lltm_seq *rnn;
  tg_linear *head;
  tg_optimizer *opt;
  tg_generator *sampler; /* where the batches come from */
  tg_ddp *ddp;           /* --dist: averages the gradients across the ranks */
  tg_ddp_stats stats;    /* --dist: its statistics, times averaged over the ranks */
  double stats_during;   /* buckets sent during backward, averaged over the ranks */
  double train_seconds;  /* in training steps only */
  double loss, smooth, first_loss, val_loss;
  double *losses; /* per step, for the plot */
  double *val_at; /* validation loss per step (NAN where not measured) */
} run;

/* The last failure, for the message tg_dist_abort prints (--dist). */
static char failure[512] = PROG ": see the messages above";

/* "train_charlm: ..." on stderr, kept in failure. Returns 0. */
static int complain(const char *fmt, ...) {
  size_t len = (size_t)snprintf(failure, sizeof failure, PROG ": ");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(failure + len, sizeof failure - len, fmt, ap);
  va_end(ap);
  fprintf(stderr, "%s\n", failure);
  return 0;
}

static int fail(const char *what) {
  return complain("%s: %s (%s)", what, tg_last_error_message(), tg_status_name(tg_last_error()));
}

static void run_free(run *r) {
  tg_ddp_free(r->ddp); /* before the module it holds */
  tg_optimizer_free(r->opt);
  tg_module_free(r->model);
  tg_generator_free(r->sampler);
  free(r->losses);
  free(r->val_at);
}

static int run_init(run *r, const options *o, const corpus *c, tg_lltm_impl impl) {
  r->impl = impl;
  r->name = impl == TG_LLTM_FUSED ? "fused" : "composed";
  r->losses = malloc(sizeof *r->losses * (size_t)o->steps);
  r->val_at = malloc(sizeof *r->val_at * (size_t)o->steps);
  if (!r->losses || !r->val_at) return fprintf(stderr, PROG ": out of memory\n"), 0;
  for (long long i = 0; i < o->steps; i++) r->losses[i] = r->val_at[i] = NAN;
  tg_generator *init = tg_generator_new((uint64_t)o->seed);
  r->sampler = tg_generator_new((uint64_t)o->seed + 1);
  r->model = tg_module_new("charlm");
  if (!init || !r->sampler || !r->model) return tg_generator_free(init), fail("setup");
  r->embed = tg_embedding_layer_new(c->vocab, o->embed, TG_OPTS_DEFAULT, init);
  if (!r->embed || tg_module_add_child(r->model, "embed", tg_embedding_layer_module(r->embed)))
    return tg_embedding_layer_free(r->embed), tg_generator_free(init), fail("embedding");
  r->rnn = tg_lltm_seq_new(o->embed, o->hidden, impl, TG_OPTS_DEFAULT, init);
  if (!r->rnn || tg_module_add_child(r->model, "rnn", tg_lltm_seq_module(r->rnn)))
    return tg_lltm_seq_free(r->rnn), tg_generator_free(init), fail("LLTM");
  r->head = tg_linear_new(o->hidden, c->vocab, true, TG_OPTS_DEFAULT, init);
  if (!r->head || tg_module_add_child(r->model, "head", tg_linear_module(r->head)))
    return tg_linear_free(r->head), tg_generator_free(init), fail("linear");
  tg_generator_free(init);
  r->opt = tg_adam_for(r->model, (tg_adam_options){.lr = o->lr});
  return r->opt ? 1 : fail("Adam");
}

/* Mean cross entropy of the model over windows x [T, B] -> y [T*B] (B = n_windows), each
 * window given by its start in the text. Scope-owned. */
static tg_tensor *window_loss(const run *r, const corpus *c, const int64_t *starts, int64_t n,
                              int64_t T) {
  int64_t *x = malloc(sizeof *x * (size_t)(T * n)), *y = malloc(sizeof *y * (size_t)(T * n));
  tg_tensor *loss = NULL;
  if (x && y) {
    for (int64_t b = 0; b < n; b++)
      for (int64_t t = 0; t < T; t++) {
        x[t * n + b] = c->tokens[starts[b] + t];
        y[t * n + b] = c->tokens[starts[b] + t + 1];
      }
    tg_options i64 = {.dtype = TG_I64};
    tg_tensor *xs = tg_embedding_layer_forward(r->embed, tg_from_data(TG_SHAPE(T, n), x, i64));
    tg_tensor *hs = NULL;
    if (tg_lltm_seq_forward(r->rnn, xs, NULL, NULL, &hs, NULL, NULL) == TG_OK) {
      tg_tensor *logits = tg_linear_forward(
          r->head,
          tg_reshape(hs, TG_SHAPE(T * n, tg_lltm_cell_state_size(tg_lltm_seq_cell(r->rnn)))));
      loss = tg_cross_entropy(logits, tg_from_data(TG_SHAPE(T * n), y, i64));
    }
  } else {
    tg_set_error(TG_ERR_MEMORY, PROG ": out of memory for a batch");
  }
  free(x);
  free(y);
  return loss;
}

/* Scales the gradients so that their global norm is at most max_norm. */
static tg_status clip_gradients(const run *r, double max_norm) {
  tg_scope sc = tg_scope_begin();
  double total = 0;
  tg_status st = TG_OK;
  int n = tg_module_num_parameters(r->model);
  for (int i = 0; i < n && st == TG_OK; i++) {
    tg_tensor *g = tg_grad(tg_module_parameter(r->model, i, NULL));
    double sq = 0;
    if (g) st = tg_item(tg_sum(tg_mul(g, g)), &sq);
    total += sq;
  }
  double norm = sqrt(total);
  if (st == TG_OK && norm > max_norm) {
    tg_no_grad_begin();
    for (int i = 0; i < n && st == TG_OK; i++) {
      tg_tensor *g = tg_grad(tg_module_parameter(r->model, i, NULL));
      if (g) st = tg_mul_scalar_(g, max_norm / norm);
    }
    tg_no_grad_end();
  }
  tg_scope_end(sc);
  return st;
}

/* --dist: the mean (or sum) of every rank's x, in place; x alone without --dist. */
static tg_status reduce_double(double *x, tg_reduce_op op) {
  if (!dist.on) return TG_OK;
  tg_scope sc = tg_scope_begin();
  tg_tensor *t = tg_scalar(*x, (tg_options){.dtype = TG_F64});
  tg_status st = t ? tg_dist_all_reduce(t, op) : tg_last_error();
  if (st == TG_OK) st = tg_item(t, x);
  tg_scope_end(sc);
  return st;
}

/* One step: B windows at random places in the training text, forward, backward, Adam. With
 * --dist every rank draws all B starts (same sampler, same state) and trains on its slice
 * [rank B/N, (rank+1) B/N); the DDP averages the gradients, and the loss reported is the
 * mean of the ranks' (each the mean over its equal share of the batch). */
static int train_step(run *r, const options *o, const corpus *c) {
  double t0 = train_now_seconds();
  tg_scope sc = tg_scope_begin();
  int64_t B = o->batch, T = o->seq_len;
  int64_t *starts = malloc(sizeof *starts * (size_t)B);
  float *u = malloc(sizeof *u * (size_t)B);
  tg_tensor *draw = tg_rand(TG_SHAPE(B), TG_OPTS_DEFAULT, r->sampler);
  tg_status st = !starts || !u ? tg_set_error(TG_ERR_MEMORY, PROG ": out of memory")
                 : draw        ? tg_to_host_array(draw, u, sizeof *u * (size_t)B)
                               : tg_last_error();
  int64_t room = c->n_train - T - 1; /* the last start that fits in the training text */
  for (int64_t b = 0; b < B && st == TG_OK; b++) {
    int64_t s = (int64_t)((double)u[b] * (double)(room + 1));
    starts[b] = s > room ? room : s;
  }
  int64_t shard = B / dist.world;
  tg_tensor *loss = st == TG_OK ? window_loss(r, c, starts + dist.rank * shard, shard, T) : NULL;
  if (st == TG_OK && !loss) st = tg_last_error();
  if (st == TG_OK) st = tg_item(loss, &r->loss);
  if (st == TG_OK) st = tg_optimizer_zero_grad(r->opt);
  if (st == TG_OK) st = r->ddp ? tg_ddp_backward(r->ddp, loss) : tg_backward(loss, NULL);
  /* after the DDP's synchronize: no collective may overlap its communication thread */
  if (st == TG_OK) st = reduce_double(&r->loss, TG_REDUCE_MEAN);
  if (st == TG_OK && o->clip > 0) st = clip_gradients(r, o->clip);
  if (st == TG_OK) st = tg_optimizer_step(r->opt);
  tg_scope_end(sc);
  free(starts);
  free(u);
  r->train_seconds += train_now_seconds() - t0;
  return st == TG_OK ? 1 : fail("training step");
}

/* Mean loss over consecutive windows of the held-out text (at most 256 of them). With --dist
 * each rank scores its share of the windows and the sums are added up. */
static int validate(run *r, const options *o, const corpus *c) {
  int64_t T = o->seq_len, first = c->n_train;
  int64_t n_windows = (c->n - first - 1) / T;
  if (n_windows > 256) n_windows = 256;
  int64_t lo = n_windows * dist.rank / dist.world, hi = n_windows * (dist.rank + 1) / dist.world;
  int64_t per_batch = o->batch > 0 ? o->batch : 1;
  int64_t *starts = malloc(sizeof *starts * (size_t)per_batch);
  double sum = 0;
  tg_status st = starts ? TG_OK : tg_set_error(TG_ERR_MEMORY, PROG ": out of memory");
  tg_no_grad_begin();
  for (int64_t w = lo; w < hi && st == TG_OK; w += per_batch) {
    int64_t n = hi - w < per_batch ? hi - w : per_batch;
    for (int64_t b = 0; b < n; b++) starts[b] = first + (w + b) * T;
    tg_scope sc = tg_scope_begin();
    double l = 0;
    tg_tensor *loss = window_loss(r, c, starts, n, T);
    st = loss ? tg_item(loss, &l) : tg_last_error();
    sum += l * (double)n;
    tg_scope_end(sc);
  }
  tg_no_grad_end();
  free(starts);
  if (st == TG_OK) st = reduce_double(&sum, TG_REDUCE_SUM);
  r->val_loss = n_windows ? sum / (double)n_windows : NAN;
  return st == TG_OK ? 1 : fail("validation");
}

/* ---- sampling: one character at a time through the cell ---- */

/* Feeds token through embedding -> cell -> linear; *h and *c are references the caller
 * owns (replaced here); returns the next-token probabilities into probs. */
static tg_status feed(const run *r, int64_t token, tg_tensor **h, tg_tensor **cstate,
                      double temperature, float *probs, int vocab) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_embedding_layer_forward(
      r->embed, tg_from_data(TG_SHAPE(1), &token, (tg_options){.dtype = TG_I64}));
  tg_tensor *nh = NULL, *nc = NULL;
  tg_status st = tg_lltm_cell_forward(tg_lltm_seq_cell(r->rnn), r->impl, x, *h, *cstate, &nh, &nc);
  if (st == TG_OK) {
    tg_tensor *p = tg_softmax(tg_div_scalar(tg_linear_forward(r->head, nh), temperature), 1);
    st = p ? tg_to_host_array(p, probs, sizeof *probs * (size_t)vocab) : tg_last_error();
  }
  if (st == TG_OK) {
    tg_release(*h);
    tg_release(*cstate);
    *h = tg_retain(nh);
    *cstate = tg_retain(nc);
  }
  tg_scope_end(sc);
  return st;
}

static int sample_text(const run *r, const options *o, const corpus *c) {
  int64_t H = tg_lltm_cell_state_size(tg_lltm_seq_cell(r->rnn));
  float *probs = malloc(sizeof *probs * (size_t)c->vocab);
  tg_generator *g = tg_generator_new((uint64_t)o->seed + 2);
  tg_tensor *h = NULL, *cs = NULL;
  tg_status st = probs && g ? TG_OK : tg_set_error(TG_ERR_MEMORY, PROG ": out of memory");
  tg_no_grad_begin();
  tg_scope sc = tg_scope_begin();
  if (st == TG_OK) {
    h = tg_retain(tg_zeros(TG_SHAPE(1, H), TG_OPTS_DEFAULT));
    cs = tg_retain(tg_zeros(TG_SHAPE(1, H), TG_OPTS_DEFAULT));
    if (!h || !cs) st = tg_last_error();
  }
  tg_scope_end(sc);
  printf("\n--- sample (%lld characters, temperature %g) ---\n", o->sample, o->temperature);
  int64_t fed = 0;
  for (const char *p = o->prompt; *p && st == TG_OK; p++) {
    int id = c->id_of[(unsigned char)*p];
    if (id < 0) continue; /* a character the text never has */
    putchar(*p);
    st = feed(r, id, &h, &cs, o->temperature, probs, c->vocab);
    fed++;
  }
  if (st == TG_OK && fed == 0) { /* nothing usable: start from the text's first character */
    putchar(c->byte_of[c->tokens[0]]);
    st = feed(r, c->tokens[0], &h, &cs, o->temperature, probs, c->vocab);
  }
  for (long long i = 0; i < o->sample && st == TG_OK; i++) {
    tg_scope s2 = tg_scope_begin();
    float u = 0;
    tg_tensor *draw = tg_rand(TG_SHAPE(1), TG_OPTS_DEFAULT, g);
    st = draw ? tg_to_host_array(draw, &u, sizeof u) : tg_last_error();
    tg_scope_end(s2);
    int next = c->vocab - 1;
    double acc = 0;
    for (int v = 0; v < c->vocab; v++)
      if ((acc += probs[v]) > u) {
        next = v;
        break;
      }
    putchar(c->byte_of[next]);
    if (st == TG_OK) st = feed(r, next, &h, &cs, o->temperature, probs, c->vocab);
  }
  printf("\n--- end of sample ---\n");
  tg_no_grad_end();
  tg_release(h);
  tg_release(cs);
  tg_generator_free(g);
  free(probs);
  return st == TG_OK ? 1 : fail("sampling");
}

/* ---- progress ---- */

static void progress_line(const options *o, run *runs, int n_runs, long long done, long long start,
                          double elapsed, int tty) {
  double tokens = (double)(done - start) * (double)(o->batch * o->seq_len);
  train_progress_start(done, o->steps, tty);
  for (int i = 0; i < n_runs; i++)
    printf("  %s%sloss %.4f %.0f tok/s", n_runs > 1 ? runs[i].name : "", n_runs > 1 ? " " : "",
           runs[i].smooth, tokens / runs[i].train_seconds);
  train_progress_end(done, start, o->steps, elapsed, tty);
}

/* ---- the plot ---- */

static void plot(const options *o, const corpus *c, run *runs, int n_runs, long long start) {
  FILE *g = train_gnuplot_open(o->common.plot);
  if (!g) return;
  fprintf(g, "set title 'train_charlm: %s (batch %lld, seq-len %lld, hidden %lld, embed %lld)'\n",
          o->text, o->batch, o->seq_len, o->hidden, o->embed);
  fprintf(g, "set xlabel 'step'\nset ylabel 'loss (nats/char)'\nset grid\nset key top right\n");
  fprintf(g, "set xrange [%lld:%lld]\n", start, o->steps);
  fprintf(g, "plot %.6f with lines dt 2 lc 'gray' title 'unigram entropy (%.2f)'", c->unigram,
          c->unigram);
  for (int i = 0; i < n_runs; i++)
    fprintf(g,
            ", '-' with lines lw 1.5 title '%s training loss (mean of 50)', "
            "'-' with linespoints pt 7 title '%s validation loss (held-out last 10%%)'",
            runs[i].name, runs[i].name);
  fprintf(g, "\n");
  for (int i = 0; i < n_runs; i++) {
    train_gnuplot_smoothed(g, runs[i].losses, start, o->steps);
    for (long long s = start; s < o->steps; s++)
      if (!isnan(runs[i].val_at[s])) fprintf(g, "%lld %.6f\n", s + 1, runs[i].val_at[s]);
    fprintf(g, "e\n");
  }
  train_gnuplot_close(g, o->common.plot, o->common.quiet);
}

/* ---- --dist ---- */

/* Joins the job. Returns -1 to go on, else the exit status (after the message). Ranks other
 * than 0 keep quiet and write no files: options as they see them. */
static int dist_start(options *o) {
  if (!tg_dist_is_built()) {
    fprintf(stderr, PROG ": --dist: this tg_dist was built without MPI (configure tg with "
                         "-DTG_MPI=ON, Open MPI installed)\n");
    return 1;
  }
  if (tg_dist_init(NULL, NULL, (tg_dist_options){0}) != TG_OK) {
    fail("--dist");
    tg_dist_finalize(); /* ends the job if MPI came up half way; else a no-op */
    return 1;
  }
  dist.on = 1;
  dist.rank = tg_dist_rank();
  dist.world = tg_dist_world_size();
  if (o->batch % dist.world != 0) { /* every rank finds it: all end cleanly */
    if (dist.rank == 0)
      fprintf(stderr,
              PROG ": --batch %lld is the global batch and must divide among the %d ranks "
                   "(give a multiple of %d)\n",
              o->batch, dist.world, dist.world);
    tg_dist_finalize();
    return CLI_EXIT_USAGE;
  }
  if (dist.rank != 0) {
    o->common.quiet = 1;
    o->common.csv = o->common.plot = NULL;
    o->sample = 0;
  }
  return -1;
}

/* The DDP's statistics, times averaged over the ranks (a collective: every rank calls). */
static int dist_stats(run *r) {
  if (tg_ddp_stats_get(r->ddp, &r->stats) != TG_OK) return fail("tg_ddp_stats_get");
  double t[3] = {r->stats.allreduce_seconds, r->stats.exposed_seconds,
                 (double)r->stats.buckets_during_backward};
  tg_scope sc = tg_scope_begin();
  tg_tensor *mean = tg_from_data(TG_SHAPE(3), t, (tg_options){.dtype = TG_F64});
  tg_status st = mean ? tg_dist_all_reduce(mean, TG_REDUCE_MEAN) : tg_last_error();
  if (st == TG_OK) st = tg_to_host_array(mean, t, sizeof t);
  tg_scope_end(sc);
  r->stats.allreduce_seconds = t[0];
  r->stats.exposed_seconds = t[1];
  r->stats_during = t[2];
  return st == TG_OK ? 1 : fail("--dist statistics");
}

/* "ddp: ..." and the steps/s, the lines bench/dist_bench.sh reads. */
static void dist_report(const run *r, const options *o, long long steps) {
  const tg_ddp_stats *s = &r->stats;
  double per = s->steps ? 1e3 / (double)s->steps : 0;
  printf("dist: %d ranks, %.2f steps/s, batch %lld per rank\n", dist.world,
         r->train_seconds > 0 ? (double)steps / r->train_seconds : 0.0, o->batch / dist.world);
  printf("ddp: %d buckets (largest %.1f KiB), allreduce %.3f ms/step, exposed %.3f ms/step, "
         "hidden %.1f%%, %.2f buckets/step sent during backward (mean of %d ranks, %lld "
         "steps)\n",
         s->n_buckets, (double)s->bucket_bytes_max / 1024, s->allreduce_seconds * per,
         s->exposed_seconds * per,
         s->allreduce_seconds > 0 ? 100 * (1 - s->exposed_seconds / s->allreduce_seconds) : 0.0,
         r->stats_during * (s->steps ? 1.0 / (double)s->steps : 0), dist.world,
         (long long)s->steps);
}

/* ---- main ---- */

static int train(const options *o, const corpus *c, run *runs, int n_runs, long long *start_out,
                 FILE *csv) {
  long long start = 0;
  char why[8192]; /* tg_last_error_message, which may quote a long path */
  if (o->common.resume &&
      !train_resume(o->common.checkpoint, runs[0].model, runs[0].opt, &runs[0].sampler, o->steps,
                    o->common.quiet, &start, why, sizeof why))
    return complain("%s", why);
  *start_out = start;
  if (dist.on) { /* after --resume: every rank loaded the same file, rank 0's values win */
    size_t cap = o->bucket_kb ? (size_t)o->bucket_kb * 1024 : 0;
    runs[0].ddp = tg_ddp_new(
        runs[0].model, (tg_ddp_options){.bucket_cap_bytes = cap, .no_overlap = o->no_overlap != 0});
    if (!runs[0].ddp) return fail("tg_ddp_new");
  }
  train_progress progress = train_progress_new(o->common.log_every, start, o->steps);
  long long val_every = (o->steps + 9) / 10;
  double t_start = train_now_seconds();
  for (long long s = start; s < o->steps; s++) {
    for (int i = 0; i < n_runs; i++) {
      run *r = &runs[i];
      if (!train_step(r, o, c)) return 0;
      if (s == start) r->first_loss = r->smooth = r->loss;
      r->smooth = 0.98 * r->smooth + 0.02 * r->loss;
      r->losses[s] = r->loss;
    }
    long long done = s + 1;
    int validating = done % val_every == 0 || done == o->steps;
    for (int i = 0; i < n_runs && validating; i++) {
      if (!validate(&runs[i], o, c)) return 0;
      runs[i].val_at[s] = runs[i].val_loss;
    }
    double elapsed = train_now_seconds() - t_start;
    for (int i = 0; csv && i < n_runs; i++) {
      double tps = (double)(done - start) * (double)(o->batch * o->seq_len) / runs[i].train_seconds;
      fprintf(csv, "%lld,%s,%.9g,%.1f,%.3f,", done, runs[i].name, runs[i].loss, tps, elapsed);
      if (validating) fprintf(csv, "%.9g", runs[i].val_loss);
      fprintf(csv, "\n");
    }
    if (dist.rank == 0 && train_checkpoint_if_due(&o->common, runs[0].model, runs[0].opt,
                                                  &runs[0].sampler, done, o->steps) != TG_OK)
      return fail("checkpoint");
    if (!o->common.quiet && train_progress_due(&progress, done, start, o->steps, elapsed))
      progress_line(o, runs, n_runs, done, start, elapsed, progress.tty);
  }
  if (!o->common.quiet && progress.tty) printf("\n");
  if (start == o->steps)
    for (int i = 0; i < n_runs; i++)
      if (!validate(&runs[i], o, c)) return 0;
  return 1;
}

static int report(const options *o, const corpus *c, run *runs, int n_runs, long long start,
                  double wall) {
  int ok = 1;
  long long steps = o->steps - start;
  double tokens = (double)steps * (double)(o->batch * o->seq_len);
  printf("\n");
  for (int i = 0; i < n_runs; i++) {
    run *r = &runs[i];
    printf("%s: %.0f tokens/s (%lld steps of %lld tokens in %.1f s of training)\n", r->name,
           steps ? tokens / r->train_seconds : 0.0, steps, o->batch * o->seq_len, r->train_seconds);
    if (steps) {
      long long n_mean = steps < 100 ? steps : 100;
      printf("%s: final train loss %.17g (last step), %.4f (mean of the last %lld steps)\n",
             r->name, r->loss, train_mean_last(r->losses, start, o->steps, n_mean), n_mean);
    }
    printf("%s: final val loss %.17g nats/char = %.3f x the unigram entropy (%.4f)\n", r->name,
           r->val_loss, r->val_loss / c->unigram, c->unigram);
  }
  if (n_runs == 2 && steps)
    printf("fused / composed tokens/s: %.2fx\n", runs[1].train_seconds / runs[0].train_seconds);
  if (dist.on) dist_report(&runs[0], o, steps);
  printf("wall time %.1f s\n", wall);
  for (int i = 0; i < n_runs; i++) {
    const run *r = &runs[i];
    if (o->common.check &&
        !(r->val_loss < c->unigram - CHECK_MARGIN && (!steps || r->val_loss < r->first_loss))) {
      printf("CHECK FAILED: %s validation loss %.4f is not %g below the unigram entropy %.4f "
             "and below the first training loss %.4f\n",
             r->name, r->val_loss, CHECK_MARGIN, c->unigram, r->first_loss);
      ok = 0;
    }
    if (o->expect_below > 0 && !(r->val_loss < o->expect_below)) {
      printf("CHECK FAILED: %s validation loss %.4f is not below %g\n", r->name, r->val_loss,
             o->expect_below);
      ok = 0;
    }
  }
  if (ok && (o->common.check || o->expect_below > 0)) printf("check passed\n");
  return ok;
}

int main(int argc, char **argv) {
  options o = {
      .text = "/usr/share/common-licenses/GPL-3",
      .steps = 1500,
      .batch = 32,
      .seq_len = 64,
      .hidden = 128,
      .embed = 32,
      .lr = 3e-3,
      .temperature = 0.8,
      .seed = 1,
      .prompt = "The ",
  };
  int parsed = parse_options(argc, argv, &o);
  if (parsed <= 0) return parsed == 0 ? 0 : CLI_EXIT_USAGE;
  int joined = o.dist ? dist_start(&o) : -1;
  if (joined >= 0) return joined;
  train_setup_threads(o.threads, &o.common);

  corpus c = {0};
  int ok = read_corpus(o.text, &c);
  if (ok && (c.n - c.n_train < o.seq_len + 1 || c.n_train < o.seq_len + 1)) {
    fprintf(stderr, PROG ": '%s' has %lld bytes: too short for --seq-len %lld (10%% is held out)\n",
            o.text, (long long)c.n, o.seq_len);
    ok = 0;
  }
  if (!ok) {
    free(c.tokens);
    if (dist.on) tg_dist_abort(1, PROG ": no usable text (the message above)");
    return 1;
  }
  run runs[2] = {{0}};
  int n_runs = o.impl == RUN_BOTH ? 2 : 1;
  ok = run_init(&runs[0], &o, &c, o.impl == RUN_COMPOSED ? TG_LLTM_COMPOSED : TG_LLTM_FUSED);
  if (ok && n_runs == 2) ok = run_init(&runs[1], &o, &c, TG_LLTM_COMPOSED);
  if (ok && !o.common.quiet) {
    printf("text: %s, %lld bytes, %d distinct (train %lld, validation %lld)\n", o.text,
           (long long)c.n, c.vocab, (long long)c.n_train, (long long)(c.n - c.n_train));
    printf("unigram entropy: %.4f nats/char (the loss of a model that knows only the byte "
           "frequencies)\n",
           c.unigram);
    printf("model: embedding %d x %lld -> LLTM (%s) state %lld over %lld steps -> linear %lld x "
           "%d; %lld parameters\n",
           c.vocab, o.embed, n_runs == 2 ? "fused and composed" : runs[0].name, o.hidden, o.seq_len,
           o.hidden, c.vocab, (long long)tg_module_parameter_count(runs[0].model));
    printf("training: %lld steps of batch %lld, Adam lr %g, seed %lld, %d threads", o.steps,
           o.batch, o.lr, o.seed, tg_get_num_threads());
    if (dist.on)
      printf(" per rank, %d ranks of batch %lld (--dist)", dist.world, o.batch / dist.world);
    printf("\n");
  }
  FILE *csv = NULL;
  if (ok && o.common.csv && !(csv = train_csv_open(o.common.csv, o.common.resume, CSV_HEADER)))
    ok = complain("cannot write '%s': %s", o.common.csv, strerror(errno));
  long long start = 0;
  double t0 = train_now_seconds();
  if (ok) ok = train(&o, &c, runs, n_runs, &start, csv);
  double wall = train_now_seconds() - t0;
  if (ok && dist.on) ok = dist_stats(&runs[0]);
  /* A rank that failed ends the job now, before any cleanup: its peers wait for it in a
   * collective (until the timeout), or still hold a bucket in flight. */
  if (dist.on && !ok) tg_dist_abort(1, failure);
  if (!train_csv_close(csv, PROG, o.common.csv)) ok = 0;
  int checks = 1;
  if (ok && dist.rank == 0) checks = report(&o, &c, runs, n_runs, start, wall);
  if (ok && o.sample > 0) ok = sample_text(&runs[0], &o, &c);
  if (ok && o.common.plot) plot(&o, &c, runs, n_runs, start);

  for (int i = 0; i < n_runs; i++) run_free(&runs[i]);
  free(c.tokens);
  if (!train_no_leaks(PROG)) ok = 0;
  /* After training every rank is past its last collective: a failure here (a leak) or a
   * failed check (rank 0's report) is this rank's exit status alone. */
  if (dist.on && tg_dist_finalize() != TG_OK) return fail("tg_dist_finalize"), 1;
  return ok && checks ? 0 : 1;
}
