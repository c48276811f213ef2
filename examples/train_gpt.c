/* GPT-2 (llm.c's train_gpt2.c architecture, examples/gpt/gpt_model.h) trained by tg on the
 * bytes of a text file (by default the GPL, which ships with every Debian system), or on
 * random token ids for timing a vocabulary like GPT-2's. Built on tg's public API only.
 *
 *   train_gpt [--layers L] [--heads H] [--channels C] [--seq T] [--batch B] [--vocab V]
 *             [--steps N] [--lr LR] [--seed S] [--threads N] [--device D] [--f64]
 *             [--fused | --composed]
 *             [--text PATH | --random-tokens N] [--sequential] [--csv PATH] [--plot PNG]
 *             [--checkpoint PATH [--checkpoint-every N]] [--resume] [--sample N
 *             [--prompt TEXT] [--temperature X]] [--save-init PATH] [--llmc-dir DIR]
 *             [--val-windows N] [--check] [--expect-below X] [--profile N] [--quiet]
 *
 * Batches are B windows of T+1 tokens at random places in the first 90% of the tokens
 * (picked with a tg_generator, saved in the checkpoint, so --resume continues bit for bit),
 * or with --sequential llm.c's unshuffled order (batch after batch from the start); the last
 * 10% is held out for the validation loss. The optimizer is AdamW as llm.c's CPU reference
 * trains (betas 0.9, 0.999, eps 1e-8, no weight decay). --save-init writes the initial
 * state (safetensors) and --llmc-dir llm.c's model file and token files, for the agreement
 * checks of docs/gpt.md. --device cuda trains on the GPU: the model is made on the CPU (the same
 * initial weights as there) and moved, the batches are drawn on the CPU and copied over. Exit
 * status: 0, 1 when a check or a step fails, 2 on bad usage. */
#define _GNU_SOURCE /* getopt_long, popen, isatty, clock_gettime */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_parse.h"
#include "gpt/gpt_data.h"
#include "gpt/gpt_model.h"
#include "gpt/gpt_ops.h"
#include "gpt/llmc_io.h"
#include "proc_status.h"
#include "train_options.h"
#include "train_run.h"
#include "train_util.h"
#include "tg/tg.h"

#define PROG "train_gpt"
/* --check: what training must gain over the first step, in nats per token (the first loss
 * is about log V; on a text the unigram entropy is reached only after many more steps). */
#define CHECK_MARGIN 1.0
#define CSV_HEADER "step,loss,tokens_per_s,elapsed_s,val_loss"

typedef struct options {
  long long layers, heads, channels, seq, batch, vocab, steps, threads, seed;
  long long random_tokens, sample, val_windows, profile;
  double lr, temperature, expect_below;
  int f64, composed, sequential;
  const char *text, *prompt, *save_init, *llmc_dir;
  train_options common; /* --csv, --plot, --checkpoint, ... (train_options.h) */
  tg_device device;     /* --device, parsed */
} options;

static void usage(FILE *f) {
  fprintf(f, "usage: " PROG " [options]\n"
             "  --layers L           transformer blocks (default 4)\n"
             "  --heads H            attention heads (default 4)\n"
             "  --channels C         embedding size, a multiple of H (default 128)\n"
             "  --seq T              tokens per sequence, also the position table's rows "
             "(default 64)\n"
             "  --batch B            sequences per step (default 8)\n"
             "  --vocab V            token ids (default 256: the bytes of the text)\n"
             "  --steps N            training steps (default 300)\n"
             "  --lr LR              AdamW's learning rate (default 0.001)\n"
             "  --seed S             initialisation and batch sampling (default 1)\n"
             "  --threads N          CPU threads (default: tg's, usually all cores)\n"
             "  --device D           where the model trains: cpu (default), cuda, cuda:I\n"
             "  --f64                train in float64 (default float32)\n"
             "  --fused | --composed the attention: tg's fused op or generic ops (default fused)\n"
             "  --text PATH          training text (default /usr/share/common-licenses/GPL-3)\n"
             "  --random-tokens N    N uniformly random ids in [0, V) instead of a text\n"
             "  --sequential         llm.c's batch order (consecutive, unshuffled) instead of\n"
             "                       random windows\n"
             "  --csv PATH           step, loss, tokens/s, elapsed, validation loss per row\n"
             "  --plot PATH.png      the loss curve, drawn by gnuplot when it is installed\n"
             "  --checkpoint PATH    save model, optimizer, step and sampler there (and\n"
             "                       keep the thread count under load: tg_set_deterministic)\n"
             "  --checkpoint-every N every N steps (default: only at the end)\n"
             "  --resume             continue from --checkpoint's step, bit for bit\n"
             "  --sample N           generate N tokens at the end (default 0)\n"
             "  --prompt TEXT        what the sample starts from (default \"The \")\n"
             "  --temperature X      sampling temperature (default 0.8)\n"
             "  --save-init PATH     write the initial state (safetensors) before training\n"
             "  --llmc-dir DIR       write llm.c's files there before training: model.bin\n"
             "                       (initial weights), train.bin and val.bin (the tokens);\n"
             "                       neither is written on --resume\n"
             "  --val-windows N      windows of T held-out tokens the validation loss takes\n"
             "                       (default 256, fewer where the text has fewer)\n"
             "  --log-every N        steps between progress lines when not on a terminal\n"
             "  --check              fail unless the final validation loss is 1 nat below the\n"
             "                       first training loss\n"
             "  --expect-below X     fail unless the final validation loss is below X\n"
             "  --profile N          time every op from the second step on (tg_profile_start;\n"
             "                       on CUDA each op waits for the device) and print the N\n"
             "                       ops that took longest\n"
             "  --quiet              only the summary\n");
}

enum {
  OPT_LAYERS = 256,
  OPT_HEADS,
  OPT_CHANNELS,
  OPT_SEQ,
  OPT_BATCH,
  OPT_VOCAB,
  OPT_STEPS,
  OPT_LR,
  OPT_SEED,
  OPT_THREADS,
  OPT_F64,
  OPT_FUSED,
  OPT_COMPOSED,
  OPT_TEXT,
  OPT_RANDOM,
  OPT_SEQUENTIAL,
  OPT_SAMPLE,
  OPT_PROMPT,
  OPT_TEMPERATURE,
  OPT_SAVE_INIT,
  OPT_LLMC_DIR,
  OPT_VAL_WINDOWS,
  OPT_PROFILE,
  OPT_EXPECT_BELOW,
  OPT_HELP,
};

/* The integer options: where each goes and its range. */
static long long *int_option(options *o, int c, const char **name, long long *lo, long long *hi) {
  *lo = 1, *hi = 1 << 20;
  switch (c) {
  case OPT_LAYERS:
    return *name = "--layers", *hi = 1024, &o->layers;
  case OPT_HEADS:
    return *name = "--heads", *hi = 1024, &o->heads;
  case OPT_CHANNELS:
    return *name = "--channels", *hi = 65536, &o->channels;
  case OPT_SEQ:
    return *name = "--seq", *hi = 65536, &o->seq;
  case OPT_BATCH:
    return *name = "--batch", *hi = 65536, &o->batch;
  case OPT_VOCAB:
    return *name = "--vocab", *lo = 2, &o->vocab;
  case OPT_STEPS:
    return *name = "--steps", *hi = 100000000, &o->steps;
  case OPT_SEED:
    return *name = "--seed", *lo = 0, *hi = INT64_MAX, &o->seed;
  case OPT_THREADS:
    return *name = "--threads", *hi = 4096, &o->threads;
  case OPT_RANDOM:
    return *name = "--random-tokens", *lo = 2, *hi = 1LL << 31, &o->random_tokens;
  case OPT_SAMPLE:
    return *name = "--sample", *lo = 0, *hi = 100000000, &o->sample;
  case OPT_VAL_WINDOWS:
    return *name = "--val-windows", *hi = 100000000, &o->val_windows;
  case OPT_PROFILE:
    return *name = "--profile", *hi = TG_PROFILE_MAX_ROWS, &o->profile;
  default:
    return NULL;
  }
}

/* 1: go on, 0: exit 0 (--help), -1: exit 2. */
static int parse_options(int argc, char **argv, options *o) {
  static const struct option longs[] = {
      {"layers", required_argument, 0, OPT_LAYERS},
      {"heads", required_argument, 0, OPT_HEADS},
      {"channels", required_argument, 0, OPT_CHANNELS},
      {"seq", required_argument, 0, OPT_SEQ},
      {"batch", required_argument, 0, OPT_BATCH},
      {"vocab", required_argument, 0, OPT_VOCAB},
      {"steps", required_argument, 0, OPT_STEPS},
      {"lr", required_argument, 0, OPT_LR},
      {"seed", required_argument, 0, OPT_SEED},
      {"threads", required_argument, 0, OPT_THREADS},
      {"device", required_argument, 0, TRAIN_OPT_DEVICE},
      {"f64", no_argument, 0, OPT_F64},
      {"fused", no_argument, 0, OPT_FUSED},
      {"composed", no_argument, 0, OPT_COMPOSED},
      {"text", required_argument, 0, OPT_TEXT},
      {"random-tokens", required_argument, 0, OPT_RANDOM},
      {"sequential", no_argument, 0, OPT_SEQUENTIAL},
      {"csv", required_argument, 0, TRAIN_OPT_CSV},
      {"plot", required_argument, 0, TRAIN_OPT_PLOT},
      {"checkpoint", required_argument, 0, TRAIN_OPT_CKPT},
      {"checkpoint-every", required_argument, 0, TRAIN_OPT_CKPT_EVERY},
      {"resume", no_argument, 0, TRAIN_OPT_RESUME},
      {"sample", required_argument, 0, OPT_SAMPLE},
      {"prompt", required_argument, 0, OPT_PROMPT},
      {"temperature", required_argument, 0, OPT_TEMPERATURE},
      {"save-init", required_argument, 0, OPT_SAVE_INIT},
      {"llmc-dir", required_argument, 0, OPT_LLMC_DIR},
      {"log-every", required_argument, 0, TRAIN_OPT_LOG_EVERY},
      {"val-windows", required_argument, 0, OPT_VAL_WINDOWS},
      {"check", no_argument, 0, TRAIN_OPT_CHECK},
      {"expect-below", required_argument, 0, OPT_EXPECT_BELOW},
      {"profile", required_argument, 0, OPT_PROFILE},
      {"quiet", no_argument, 0, TRAIN_OPT_QUIET},
      {"help", no_argument, 0, OPT_HELP},
      {0, 0, 0, 0},
  };
  int impl_flags = 0, text_given = 0, c, ok = 1;
  while (ok && (c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
    const char *a = optarg, *name;
    long long lo, hi, *target = int_option(o, c, &name, &lo, &hi);
    if (target) {
      ok = cli_parse_ll(PROG, name, a, lo, hi, target);
      continue;
    }
    int taken = train_option(PROG, c, a, &o->common);
    if (taken >= 0) {
      ok = taken;
      continue;
    }
    switch (c) {
    case OPT_LR:
      ok = cli_parse_double(PROG, "--lr", a, 1e-9, 10, &o->lr);
      break;
    case OPT_TEMPERATURE:
      ok = cli_parse_double(PROG, "--temperature", a, 1e-3, 100, &o->temperature);
      break;
    case OPT_EXPECT_BELOW:
      ok = cli_parse_double(PROG, "--expect-below", a, 0, 1e30, &o->expect_below);
      break;
    case OPT_F64:
      o->f64 = 1;
      break;
    case OPT_FUSED:
      o->composed = 0, impl_flags++;
      break;
    case OPT_COMPOSED:
      o->composed = 1, impl_flags++;
      break;
    case OPT_TEXT:
      o->text = a, text_given = 1;
      break;
    case OPT_SEQUENTIAL:
      o->sequential = 1;
      break;
    case OPT_PROMPT:
      o->prompt = a;
      break;
    case OPT_SAVE_INIT:
      o->save_init = a;
      break;
    case OPT_LLMC_DIR:
      o->llmc_dir = a;
      break;
    case OPT_HELP:
      usage(stdout);
      return 0;
    default:
      ok = 0; /* getopt_long said what is wrong */
    }
  }
  ok = ok && train_no_operands(PROG, optind, argc, argv);
  ok = ok && train_one_impl(PROG, impl_flags, "--fused, --composed");
  if (ok && o->channels % o->heads) {
    fprintf(stderr, PROG ": --channels %lld is not a multiple of --heads %lld\n", o->channels,
            o->heads);
    ok = 0;
  }
  if (ok && text_given && o->random_tokens) {
    fprintf(stderr, PROG ": give --text or --random-tokens, not both\n");
    ok = 0;
  }
  if (ok && !o->random_tokens && o->vocab < 256) {
    fprintf(stderr,
            PROG ": --vocab %lld: a text's tokens are bytes, so it needs 256 or more "
                 "(or --random-tokens)\n",
            o->vocab);
    ok = 0;
  }
  ok = ok && train_checkpoint_options_ok(PROG, &o->common);
  ok = ok && train_parse_device(PROG, &o->common, &o->device);
  if (!ok) cli_usage_error(PROG);
  return ok ? 1 : -1;
}

/* ---- the run ---- */

typedef struct run {
  gpt_model *model;
  tg_optimizer *opt;
  tg_generator *sampler; /* where the batches come from */
  tg_dtype dtype;
  tg_device device; /* --device */
  double loss, first_loss, smooth, val_loss, train_seconds;
  double *losses, *val_at, *step_ms, *opt_ms; /* per step */
} run;

static int fail(const char *what) {
  fprintf(stderr, PROG ": %s: %s (%s)\n", what, tg_last_error_message(),
          tg_status_name(tg_last_error()));
  return 0;
}

static void run_free(run *r) {
  tg_optimizer_free(r->opt);
  gpt_model_free(r->model);
  tg_generator_free(r->sampler);
  free(r->losses);
  free(r->val_at);
  free(r->step_ms);
  free(r->opt_ms);
}

static int run_init(run *r, const options *o) {
  size_t steps = (size_t)o->steps;
  r->losses = malloc(sizeof *r->losses * steps);
  r->val_at = malloc(sizeof *r->val_at * steps);
  r->step_ms = malloc(sizeof *r->step_ms * steps);
  r->opt_ms = malloc(sizeof *r->opt_ms * steps);
  if (!r->losses || !r->val_at || !r->step_ms || !r->opt_ms)
    return fprintf(stderr, PROG ": out of memory\n"), 0;
  for (size_t i = 0; i < steps; i++)
    r->losses[i] = r->val_at[i] = r->step_ms[i] = r->opt_ms[i] = NAN;
  r->dtype = o->f64 ? TG_F64 : TG_F32;
  if (!train_device_ready(PROG, &o->common, o->device)) return 0;
  r->device = o->device;
  gpt_config c = {.layers = o->layers,
                  .heads = o->heads,
                  .channels = o->channels,
                  .vocab = o->vocab,
                  .max_seq = o->seq};
  tg_generator *init = tg_generator_new((uint64_t)o->seed);
  r->sampler = tg_generator_new((uint64_t)o->seed + 1);
  if (!init || !r->sampler) return tg_generator_free(init), fail("setup");
  r->model =
      gpt_model_new(c, o->composed ? GPT_ATTENTION_COMPOSED : GPT_ATTENTION_FUSED, r->dtype, init);
  tg_generator_free(init);
  if (!r->model) return fail("the model");
  /* before the optimizer: its moments are made where the parameters are */
  if (tg_module_to_device(r->model->module, r->device) != TG_OK) return fail("--device");
  r->opt = gpt_optimizer_new(r->model->module, o->lr);
  return r->opt ? 1 : fail("AdamW");
}

/* The mean loss over windows at starts[0, n) (scope-owned). */
static tg_tensor *window_loss(run *r, const gpt_data *d, const int64_t *starts, int64_t n,
                              int64_t T) {
  int64_t *x = malloc(sizeof *x * (size_t)(n * T)), *y = malloc(sizeof *y * (size_t)(n * T));
  tg_tensor *loss = NULL;
  if (x && y) {
    gpt_data_windows(d, starts, n, T, x, y);
    tg_options i64 = {.dtype = TG_I64};
    loss = gpt_model_loss(r->model, tg_from_data(TG_SHAPE(n, T), x, i64),
                          tg_from_data(TG_SHAPE(n, T), y, i64)); /* moved to the model's device */
  } else {
    tg_set_error(TG_ERR_MEMORY, PROG ": out of memory for a batch");
  }
  free(x);
  free(y);
  return loss;
}

static int train_step(run *r, const options *o, const gpt_data *d, long long step) {
  double t0 = train_now_seconds();
  int64_t B = o->batch, T = o->seq;
  int64_t *starts = malloc(sizeof *starts * (size_t)B);
  float *u = malloc(sizeof *u * (size_t)B);
  tg_scope sc = tg_scope_begin();
  tg_status st = starts && u ? TG_OK : tg_set_error(TG_ERR_MEMORY, PROG ": out of memory");
  if (st == TG_OK && o->sequential) {
    gpt_data_sequential_starts(d, step, B, T, starts);
  } else if (st == TG_OK) {
    tg_tensor *draw = tg_rand(TG_SHAPE(B), TG_OPTS_DEFAULT, r->sampler);
    st = draw ? tg_to_host_array(draw, u, sizeof *u * (size_t)B) : tg_last_error();
    int64_t room = d->n_train - T - 1; /* the last start that fits in the training tokens */
    for (int64_t b = 0; b < B && st == TG_OK; b++) {
      int64_t s = (int64_t)((double)u[b] * (double)(room + 1));
      starts[b] = s > room ? room : s;
    }
  }
  tg_tensor *loss = st == TG_OK ? window_loss(r, d, starts, B, T) : NULL;
  if (st == TG_OK && !loss) st = tg_last_error();
  if (st == TG_OK) st = tg_item(loss, &r->loss);
  if (st == TG_OK) st = tg_optimizer_zero_grad(r->opt);
  if (st == TG_OK) st = tg_backward(loss, NULL);
  double t_opt = train_now_seconds();
  if (st == TG_OK) st = tg_optimizer_step(r->opt);
  if (st == TG_OK) st = train_sync(r->device);
  r->opt_ms[step] = 1e3 * (train_now_seconds() - t_opt);
  tg_scope_end(sc);
  free(starts);
  free(u);
  double seconds = train_now_seconds() - t0;
  r->train_seconds += seconds;
  r->step_ms[step] = 1e3 * seconds;
  return st == TG_OK ? 1 : fail("training step");
}

/* Mean loss over consecutive windows of the held-out tokens (at most --val-windows). */
static int validate(run *r, const options *o, const gpt_data *d) {
  int64_t T = o->seq, first = d->n_train, per_batch = o->batch;
  int64_t n_windows = (d->n - first - 1) / T;
  if (n_windows > o->val_windows) n_windows = o->val_windows;
  int64_t *starts = malloc(sizeof *starts * (size_t)per_batch);
  double sum = 0;
  tg_status st = starts ? TG_OK : tg_set_error(TG_ERR_MEMORY, PROG ": out of memory");
  tg_no_grad_begin();
  for (int64_t w = 0; w < n_windows && st == TG_OK; w += per_batch) {
    int64_t n = n_windows - w < per_batch ? n_windows - w : per_batch;
    for (int64_t b = 0; b < n; b++) starts[b] = first + (w + b) * T;
    tg_scope sc = tg_scope_begin();
    double l = 0;
    tg_tensor *loss = window_loss(r, d, starts, n, T);
    st = loss ? tg_item(loss, &l) : tg_last_error();
    sum += l * (double)n;
    tg_scope_end(sc);
  }
  tg_no_grad_end();
  free(starts);
  r->val_loss = n_windows ? sum / (double)n_windows : NAN;
  return st == TG_OK ? 1 : fail("validation");
}

/* ---- sampling: the whole context through the model for each new token ---- */

static void put_token(int64_t token) {
  if (token < 256)
    putchar((int)token);
  else
    printf("<%lld>", (long long)token);
}

static int sample_tokens(run *r, const options *o, const gpt_data *d) {
  int64_t V = o->vocab, T = o->seq, plen = (int64_t)strlen(o->prompt);
  int64_t cap = plen + o->sample + 1;
  int64_t *ctx = malloc(sizeof *ctx * (size_t)cap);
  double *probs = malloc(sizeof *probs * (size_t)V);
  tg_generator *g = tg_generator_new((uint64_t)o->seed + 2);
  tg_status st = ctx && probs && g ? TG_OK : tg_set_error(TG_ERR_MEMORY, PROG ": out of memory");
  int64_t n = 0;
  if (st == TG_OK && !isnan(d->unigram)) /* a text: the prompt's bytes are tokens */
    for (int64_t i = 0; i < plen; i++) ctx[n++] = (unsigned char)o->prompt[i];
  if (st == TG_OK && n == 0) ctx[n++] = d->tokens[0];
  printf("\n--- sample (%lld tokens, temperature %g) ---\n", o->sample, o->temperature);
  for (int64_t i = 0; i < n; i++) put_token(ctx[i]);
  tg_no_grad_begin();
  for (long long i = 0; i < o->sample && st == TG_OK; i++) {
    tg_scope sc = tg_scope_begin();
    int64_t len = n < T ? n : T;
    tg_tensor *x = tg_from_data(TG_SHAPE(1, len), ctx + n - len, (tg_options){.dtype = TG_I64});
    tg_tensor *last = tg_select(gpt_model_logits(r->model, x), 0, len - 1);
    tg_tensor *p = tg_to_dtype(tg_softmax(tg_div_scalar(last, o->temperature), 0), TG_F64);
    tg_tensor *draw = tg_rand(TG_SHAPE(1), (tg_options){.dtype = TG_F64}, g);
    double u = 0;
    st = p && draw ? tg_to_host_array(p, probs, sizeof *probs * (size_t)V) : tg_last_error();
    if (st == TG_OK) st = tg_item(draw, &u);
    tg_scope_end(sc);
    int64_t next = V - 1;
    double acc = 0;
    for (int64_t v = 0; v < V; v++)
      if ((acc += probs[v]) > u) {
        next = v;
        break;
      }
    ctx[n++] = next;
    put_token(next);
  }
  tg_no_grad_end();
  printf("\n--- end of sample ---\n");
  free(ctx);
  free(probs);
  tg_generator_free(g);
  return st == TG_OK ? 1 : fail("sampling");
}

/* ---- the files for the agreement checks ---- */

static int export_files(run *r, const options *o, const gpt_data *d) {
  if (o->save_init && tg_module_save(r->model->module, o->save_init) != TG_OK)
    return fail("--save-init");
  if (!o->llmc_dir) return 1;
  char path[4096];
  snprintf(path, sizeof path, "%s/model.bin", o->llmc_dir);
  if (gpt_llmc_write_model(path, r->model) != TG_OK) return fail("--llmc-dir");
  snprintf(path, sizeof path, "%s/train.bin", o->llmc_dir);
  if (gpt_llmc_write_tokens(path, d->tokens, d->n_train) != TG_OK) return fail("--llmc-dir");
  snprintf(path, sizeof path, "%s/val.bin", o->llmc_dir);
  if (gpt_llmc_write_tokens(path, d->tokens + d->n_train, d->n - d->n_train) != TG_OK)
    return fail("--llmc-dir");
  return 1;
}

/* ---- progress, plot, report ---- */

static void progress_line(const options *o, const run *r, long long done, long long start,
                          double elapsed, int tty) {
  double tokens = (double)(done - start) * (double)(o->batch * o->seq);
  train_progress_start(done, o->steps, tty);
  printf("  loss %.4f %.0f tok/s", r->smooth, tokens / r->train_seconds);
  train_progress_end(done, start, o->steps, elapsed, tty);
}

static void plot(const options *o, const gpt_data *d, const run *r, long long start) {
  FILE *g = train_gnuplot_open(o->common.plot);
  if (!g) return;
  fprintf(g, "set title 'train_gpt: L%lld H%lld C%lld T%lld B%lld V%lld'\n", o->layers, o->heads,
          o->channels, o->seq, o->batch, o->vocab);
  fprintf(g, "set xlabel 'step'\nset ylabel 'loss (nats/token)'\nset grid\nset key top right\n");
  fprintf(g, "set xrange [%lld:%lld]\n", start, o->steps);
  fprintf(g, "plot %.6f with lines dt 2 lc 'gray' title 'log V (uniform guess)'",
          log((double)o->vocab));
  if (!isnan(d->unigram))
    fprintf(g, ", %.6f with lines dt 3 lc 'black' title 'unigram entropy'", d->unigram);
  fprintf(g, ", '-' with lines lw 1.5 title 'training loss (mean of 50)', "
             "'-' with linespoints pt 7 title 'validation loss'\n");
  train_gnuplot_smoothed(g, r->losses, start, o->steps);
  for (long long s = start; s < o->steps; s++)
    if (!isnan(r->val_at[s])) fprintf(g, "%lld %.6f\n", s + 1, r->val_at[s]);
  fprintf(g, "e\n");
  train_gnuplot_close(g, o->common.plot, o->common.quiet);
}

static int compare_doubles(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The median of x[0, n) (NAN when memory runs out). */
static double median(const double *x, long long n) {
  double *sorted = malloc(sizeof *sorted * (size_t)n), m = NAN;
  if (sorted) {
    memcpy(sorted, x, sizeof *sorted * (size_t)n);
    qsort(sorted, (size_t)n, sizeof *sorted, compare_doubles);
    m = sorted[n / 2];
  }
  free(sorted);
  return m;
}

static int train(const options *o, const gpt_data *d, run *r, long long *start_out, FILE *csv) {
  long long start = 0;
  char why[8192]; /* tg_last_error_message, which may quote a long path */
  if (o->common.resume && !train_resume(o->common.checkpoint, r->model->module, r->opt, &r->sampler,
                                        o->steps, o->common.quiet, &start, why, sizeof why))
    return fprintf(stderr, PROG ": %s\n", why), 0;
  *start_out = start;
  train_progress progress = train_progress_new(o->common.log_every, start, o->steps);
  long long val_every = (o->steps + 9) / 10;
  double t_start = train_now_seconds();
  for (long long s = start; s < o->steps; s++) {
    /* From the second step: the first allocates what the others reuse and tunes GEMMs. */
    if (o->profile && s == start + 1 && tg_profile_start(r->device.type == TG_CUDA) != TG_OK)
      return fail("--profile");
    if (!train_step(r, o, d, s)) return 0;
    if (s == start) r->first_loss = r->smooth = r->loss;
    r->smooth = 0.98 * r->smooth + 0.02 * r->loss;
    r->losses[s] = r->loss;
    long long done = s + 1;
    int validating = done % val_every == 0 || done == o->steps;
    if (validating && !validate(r, o, d)) return 0;
    if (validating) r->val_at[s] = r->val_loss;
    double elapsed = train_now_seconds() - t_start;
    if (csv) {
      double tps = (double)(done - start) * (double)(o->batch * o->seq) / r->train_seconds;
      fprintf(csv, "%lld,%.17g,%.1f,%.3f,", done, r->loss, tps, elapsed);
      if (validating) fprintf(csv, "%.17g", r->val_loss);
      fprintf(csv, "\n");
    }
    if (train_checkpoint_if_due(&o->common, r->model->module, r->opt, &r->sampler, done,
                                o->steps) != TG_OK)
      return fail("checkpoint");
    if (!o->common.quiet && train_progress_due(&progress, done, start, o->steps, elapsed))
      progress_line(o, r, done, start, elapsed, progress.tty);
  }
  if (!o->common.quiet && progress.tty) printf("\n");
  if (o->profile) tg_profile_stop(); /* --profile's; TG_PROFILE's runs to the end */
  if (start == o->steps && !validate(r, o, d)) return 0;
  return 1;
}

static int report(const options *o, const gpt_data *d, run *r, long long start, double wall) {
  long long steps = o->steps - start;
  printf("\n");
  if (steps) {
    /* the median step, leaving out the first (it allocates what the others reuse) */
    long long skip = steps > 1;
    double step = median(r->step_ms + start + skip, steps - skip);
    double opt = median(r->opt_ms + start + skip, steps - skip);
    printf("train: median %.2f ms/step (AdamW's step %.2f ms of it), %.0f tokens/s (%lld steps "
           "of %lld tokens in %.1f s of training)\n",
           step, opt, (double)(o->batch * o->seq) * 1e3 / step, steps, o->batch * o->seq,
           r->train_seconds);
    printf("final train loss %.17g (last step)\n", r->loss);
  }
  printf("final val loss %.17g nats/token", r->val_loss);
  if (!isnan(d->unigram))
    printf(" = %.3f x the unigram entropy (%.4f)", r->val_loss / d->unigram, d->unigram);
  long long peak_kb = proc_status_kb("VmHWM");
  printf("\npeak RSS %.1f MB\n", (peak_kb < 0 ? -1.0 : (double)peak_kb * 1024) / 1e6);
  train_print_device_memory(r->device);
  printf("wall time %.1f s\n", wall);
  if (o->profile && steps > 1) {
    printf("\nops by self time, steps %lld-%lld (their validation passes included)%s:\n", start + 2,
           o->steps, r->device.type == TG_CUDA ? ", each waiting for the device" : "");
    if (tg_profile_print(stdout, o->profile) != TG_OK) return fail("--profile");
  }
  int ok = 1;
  if (o->common.check && !(r->val_loss < r->first_loss - CHECK_MARGIN)) {
    printf("CHECK FAILED: validation loss %.4f is not %g below the first training loss %.4f\n",
           r->val_loss, CHECK_MARGIN, r->first_loss);
    ok = 0;
  }
  if (o->expect_below > 0 && !(r->val_loss < o->expect_below)) {
    printf("CHECK FAILED: validation loss %.4f is not below %g\n", r->val_loss, o->expect_below);
    ok = 0;
  }
  if (ok && (o->common.check || o->expect_below > 0)) printf("check passed\n");
  return ok;
}

/* ---- main ---- */

static int load_data(const options *o, gpt_data *d) {
  tg_status st = o->random_tokens
                     ? gpt_data_random(o->random_tokens, o->vocab, (uint64_t)o->seed + 3, d)
                     : gpt_data_read_text(o->text, d);
  if (st != TG_OK) {
    fprintf(stderr, PROG ": %s\n", tg_last_error_message());
    return 0;
  }
  /* both parts need a window of T + 1; --sequential a whole batch of them */
  int64_t need = o->sequential ? o->batch * o->seq + 1 : o->seq + 1;
  if (d->n_train < need || d->n - d->n_train < o->seq + 1) {
    fprintf(stderr,
            PROG ": %lld tokens are too few for --seq %lld%s (10%% is held out for "
                 "validation)\n",
            (long long)d->n, o->seq, o->sequential ? " and --batch with --sequential" : "");
    return 0;
  }
  return 1;
}

int main(int argc, char **argv) {
  options o = {
      .layers = 4,
      .heads = 4,
      .channels = 128,
      .seq = 64,
      .batch = 8,
      .vocab = 256,
      .steps = 300,
      .lr = 1e-3,
      .seed = 1,
      .temperature = 0.8,
      .text = "/usr/share/common-licenses/GPL-3",
      .prompt = "The ",
      .val_windows = 256,
  };
  int parsed = parse_options(argc, argv, &o);
  if (parsed <= 0) return parsed == 0 ? 0 : CLI_EXIT_USAGE;
  train_setup_threads(o.threads, &o.common);

  gpt_data d = {0};
  run r = {0};
  int ok = load_data(&o, &d) && run_init(&r, &o);
  if (ok && !o.common.quiet) {
    if (o.random_tokens)
      printf("tokens: %lld uniformly random ids in [0, %lld)", o.random_tokens, o.vocab);
    else
      printf("text: %s, %lld bytes (unigram entropy %.4f nats/byte)", o.text, (long long)d.n,
             d.unigram);
    printf(", train %lld, validation %lld\n", (long long)d.n_train, (long long)(d.n - d.n_train));
    printf("model: GPT-2, %lld layers, %lld heads, %lld channels, vocab %lld, seq %lld, %s "
           "attention, %s; %lld parameters\n",
           o.layers, o.heads, o.channels, o.vocab, o.seq, o.composed ? "composed" : "fused",
           o.f64 ? "float64" : "float32", (long long)tg_module_parameter_count(r.model->module));
    printf("training: %lld steps of batch %lld (%s), AdamW lr %g, seed %lld, %d threads, on %s\n",
           o.steps, o.batch, o.sequential ? "sequential" : "random windows", o.lr, o.seed,
           tg_get_num_threads(), o.common.device ? o.common.device : "cpu");
  }
  if (ok && !o.common.resume) ok = export_files(&r, &o, &d);
  FILE *csv = NULL;
  if (ok && o.common.csv && !(csv = train_csv_open(o.common.csv, o.common.resume, CSV_HEADER))) {
    fprintf(stderr, PROG ": cannot write '%s': %s\n", o.common.csv, strerror(errno));
    ok = 0;
  }
  long long start = 0;
  double t0 = train_now_seconds();
  if (ok) ok = train(&o, &d, &r, &start, csv);
  double wall = train_now_seconds() - t0;
  if (!train_csv_close(csv, PROG, o.common.csv)) ok = 0;
  int checks = 1;
  if (ok) checks = report(&o, &d, &r, start, wall);
  if (ok && o.sample > 0) ok = sample_tokens(&r, &o, &d);
  if (ok && o.common.plot) plot(&o, &d, &r, start);
  run_free(&r);
  gpt_data_free(&d);
  if (!train_no_leaks(PROG)) ok = 0;
  return ok && checks ? 0 : 1;
}
