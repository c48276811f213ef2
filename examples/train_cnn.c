/* A small convolutional network on Fashion-MNIST: (conv 3x3 -> batch norm -> ReLU -> max pool
 * 2) twice -> flatten -> linear -> cross entropy, trained with SGD (momentum) or Adam. Built
 * on tg's public API only; the model is examples/cnn/cnn_model.c, the same code the PyTorch
 * agreement test runs (tests/nn/python/cnn_torch.py).
 *
 *   train_cnn [--data DIR] [--steps N] [--batch B] [--optimizer sgd|adam] [--lr LR]
 *             [--momentum M] [--c1 C] [--c2 C] [--train-size N] [--test-size N] [--seed S]
 *             [--threads N] [--device D] [--fused | --composed] [--csv PATH] [--plot PATH.png]
 *             [--checkpoint PATH [--checkpoint-every N]] [--resume] [--log-every N]
 *             [--check] [--expect-accuracy X] [--quiet]
 *
 * The data set is Debian's package dataset-fashion-mnist (scripts/deps.sh installs it): the
 * IDX files of Zalando's Fashion-MNIST, 60,000 training and 10,000 test images of 28x28
 * grey levels in 10 classes, read from /usr/share/datasets/fashion-mnist. No download at
 * run time. Preferred over scikit-learn's 8x8 digits (python3-sklearn), which a linear
 * model nearly solves. Batches are B images drawn at random (with replacement) from the
 * first --train-size training images by a tg_generator that the checkpoint saves, so
 * --resume continues bit for bit. The test accuracy is measured on the first --test-size
 * test images in eval mode (batch norm's running statistics). Exit status: 0, 1 when a
 * check fails (--check, --expect-accuracy, objects left alive) or a file cannot be read,
 * 2 on bad usage. --device cuda trains on the GPU: the model is made on the CPU (the same
 * initial weights) and moved; the batches are drawn on the CPU and copied over. */
#define _GNU_SOURCE /* getopt_long, popen, clock_gettime */
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
#include "cnn/cnn_model.h"
#include "tg/tg.h"

#define PROG "train_cnn"
/* --check: the test accuracy the run must reach (10 classes: chance is 0.1). */
#define CHECK_ACCURACY 0.5
#define CSV_HEADER "step,impl,loss,images_per_s,elapsed_s,test_loss,test_accuracy"
/* Fashion-MNIST's pixel mean and standard deviation (of x / 255 over the training set). */
#define PIXEL_MEAN 0.2860
#define PIXEL_STD 0.3530

/* ---- options ---- */

enum optimizer_choice { OPT_SGD, OPT_ADAM };

typedef struct options {
  const char *data;
  long long steps, batch, c1, c2, train_size, test_size, seed, threads;
  double lr, momentum, expect_accuracy;
  enum optimizer_choice optimizer;
  cnn_conv_bn conv_bn;
  train_options common; /* --csv, --plot, --checkpoint, ... (train_options.h) */
  tg_device device;     /* --device, parsed */
} options;

static void usage(FILE *f) {
  fprintf(f, "usage: " PROG " [options]\n"
             "  --data DIR           Fashion-MNIST's IDX files, gzipped or not (default\n"
             "                       /usr/share/datasets/fashion-mnist: dataset-fashion-mnist)\n"
             "  --steps N            training steps (default 1000)\n"
             "  --batch B            images per step (default 64)\n"
             "  --optimizer sgd|adam SGD with momentum or Adam (default sgd)\n"
             "  --lr LR              learning rate (default 0.05 for sgd, 0.002 for adam)\n"
             "  --momentum M         SGD's momentum (default 0.9)\n"
             "  --c1 C, --c2 C       the convolutions' channels (default 8 and 16)\n"
             "  --train-size N       train on the first N training images (default 60000)\n"
             "  --test-size N        test on the first N test images (default 10000)\n"
             "  --seed S             initialisation and batch sampling (default 1)\n"
             "  --threads N          CPU threads (default: tg's, usually all cores)\n"
             "  --device D           where the model trains: cpu (default), cuda, cuda:I\n"
             "  --fused | --composed conv+batch norm as one fused op or as tg_conv2d then\n"
             "                       tg_batch_norm (default composed)\n"
             "  --csv PATH           step, loss, images/s, elapsed, test loss and accuracy\n"
             "  --plot PATH.png      loss and accuracy curves, drawn by gnuplot when installed\n"
             "  --checkpoint PATH    save model (with batch norm's running statistics),\n"
             "                       optimizer, step and sampler there (and keep the thread\n"
             "                       count under load: tg_set_deterministic)\n"
             "  --checkpoint-every N every N steps (default: only at the end)\n"
             "  --resume             continue from --checkpoint's step, bit for bit\n"
             "  --log-every N        steps between progress lines when not on a terminal\n"
             "  --check              fail unless the training loss falls (the mean of the\n"
             "                       last 50 steps below the first step's) and the test\n"
             "                       accuracy reaches 0.5\n"
             "  --expect-accuracy X  fail unless the final test accuracy is at least X\n"
             "  --quiet              only the summary\n");
}

enum {
  O_DATA = 256,
  O_STEPS,
  O_BATCH,
  O_OPTIMIZER,
  O_LR,
  O_MOMENTUM,
  O_C1,
  O_C2,
  O_TRAIN_SIZE,
  O_TEST_SIZE,
  O_SEED,
  O_THREADS,
  O_FUSED,
  O_COMPOSED,
  O_EXPECT_ACCURACY,
  O_HELP,
};

/* 1: go on, 0: exit 0 (--help), -1: exit 2. */
static int parse_options(int argc, char **argv, options *o) {
  static const struct option longs[] = {
      {"data", required_argument, 0, O_DATA},
      {"steps", required_argument, 0, O_STEPS},
      {"batch", required_argument, 0, O_BATCH},
      {"optimizer", required_argument, 0, O_OPTIMIZER},
      {"lr", required_argument, 0, O_LR},
      {"momentum", required_argument, 0, O_MOMENTUM},
      {"c1", required_argument, 0, O_C1},
      {"c2", required_argument, 0, O_C2},
      {"train-size", required_argument, 0, O_TRAIN_SIZE},
      {"test-size", required_argument, 0, O_TEST_SIZE},
      {"seed", required_argument, 0, O_SEED},
      {"threads", required_argument, 0, O_THREADS},
      {"device", required_argument, 0, TRAIN_OPT_DEVICE},
      {"fused", no_argument, 0, O_FUSED},
      {"composed", no_argument, 0, O_COMPOSED},
      {"csv", required_argument, 0, TRAIN_OPT_CSV},
      {"plot", required_argument, 0, TRAIN_OPT_PLOT},
      {"checkpoint", required_argument, 0, TRAIN_OPT_CKPT},
      {"checkpoint-every", required_argument, 0, TRAIN_OPT_CKPT_EVERY},
      {"resume", no_argument, 0, TRAIN_OPT_RESUME},
      {"log-every", required_argument, 0, TRAIN_OPT_LOG_EVERY},
      {"check", no_argument, 0, TRAIN_OPT_CHECK},
      {"expect-accuracy", required_argument, 0, O_EXPECT_ACCURACY},
      {"quiet", no_argument, 0, TRAIN_OPT_QUIET},
      {"help", no_argument, 0, O_HELP},
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
    case O_DATA:
      o->data = a;
      break;
    case O_STEPS:
      ok = cli_parse_ll(PROG, "--steps", a, 1, 100000000, &o->steps);
      break;
    case O_BATCH:
      ok = cli_parse_ll(PROG, "--batch", a, 1, 65536, &o->batch);
      break;
    case O_OPTIMIZER:
      if (strcmp(a, "sgd") == 0) {
        o->optimizer = OPT_SGD;
      } else if (strcmp(a, "adam") == 0) {
        o->optimizer = OPT_ADAM;
      } else {
        fprintf(stderr, PROG ": --optimizer: '%s' is not sgd or adam\n", a);
        ok = 0;
      }
      break;
    case O_LR:
      ok = cli_parse_double(PROG, "--lr", a, 1e-9, 10, &o->lr);
      break;
    case O_MOMENTUM:
      ok = cli_parse_double(PROG, "--momentum", a, 0, 0.999, &o->momentum);
      break;
    case O_C1:
      ok = cli_parse_ll(PROG, "--c1", a, 1, 4096, &o->c1);
      break;
    case O_C2:
      ok = cli_parse_ll(PROG, "--c2", a, 1, 4096, &o->c2);
      break;
    case O_TRAIN_SIZE:
      ok = cli_parse_ll(PROG, "--train-size", a, 1, 100000000, &o->train_size);
      break;
    case O_TEST_SIZE:
      ok = cli_parse_ll(PROG, "--test-size", a, 1, 100000000, &o->test_size);
      break;
    case O_SEED:
      ok = cli_parse_ll(PROG, "--seed", a, 0, INT64_MAX, &o->seed);
      break;
    case O_THREADS:
      ok = cli_parse_ll(PROG, "--threads", a, 1, 4096, &o->threads);
      break;
    case O_FUSED:
      o->conv_bn = CNN_FUSED, impl_flags++;
      break;
    case O_COMPOSED:
      o->conv_bn = CNN_COMPOSED, impl_flags++;
      break;
    case O_EXPECT_ACCURACY:
      ok = cli_parse_double(PROG, "--expect-accuracy", a, 0, 1, &o->expect_accuracy);
      break;
    case O_HELP:
      usage(stdout);
      return 0;
    default: /* getopt_long said what is wrong */
      ok = 0;
    }
  }
  ok = ok && train_no_operands(PROG, optind, argc, argv);
  ok = ok && train_one_impl(PROG, impl_flags, "--fused, --composed");
  ok = ok && train_checkpoint_options_ok(PROG, &o->common);
  ok = ok && train_parse_device(PROG, &o->common, &o->device);
  if (!ok) cli_usage_error(PROG);
  return ok ? 1 : -1;
}

/* ---- the data: IDX files (big-endian header, then bytes) ---- */

typedef struct images {
  int64_t n, rows, cols;
  unsigned char *pixels; /* n * rows * cols */
  unsigned char *labels; /* n, 0..9 */
} images;

/* Opens path through `gzip -dcf`, which inflates a .gz file and copies any other as it is.
 * gzip is Essential in Debian (always installed), so this needs no zlib headers to build
 * and no inflate of our own, and an unpacked copy of the files reads the same. */
static FILE *open_inflated(const char *path) {
  if (access(path, R_OK) != 0) {
    fprintf(stderr, PROG ": cannot open '%s': %s (Debian: apt install dataset-fashion-mnist)\n",
            path, strerror(errno));
    return NULL;
  }
  char cmd[4200];
  size_t len = (size_t)snprintf(cmd, sizeof cmd, "gzip -dcf -- '");
  for (const char *p = path; *p && len < sizeof cmd - 8; p++) /* quoted for the shell */
    len += (size_t)snprintf(cmd + len, sizeof cmd - len, *p == '\'' ? "'\\''" : "%c", *p);
  snprintf(cmd + len, sizeof cmd - len, "'");
  FILE *f = popen(cmd, "r");
  if (!f) fprintf(stderr, PROG ": cannot run gzip for '%s': %s\n", path, strerror(errno));
  return f;
}

static int64_t be32(const unsigned char *b) {
  return (int64_t)b[0] << 24 | (int64_t)b[1] << 16 | (int64_t)b[2] << 8 | (int64_t)b[3];
}

/* Reads an IDX file of n_dims dims (1: labels, 3: images), keeping the first `keep` items
 * (all when fewer). sizes gets the dims; *out a malloc'ed copy of the kept bytes. */
static int read_idx(const char *path, int n_dims, int64_t keep, int64_t *sizes,
                    unsigned char **out) {
  FILE *f = open_inflated(path);
  if (!f) return 0;
  unsigned char head[16];
  size_t head_bytes = 4 + 4 * (size_t)n_dims;
  int ok = fread(head, 1, head_bytes, f) == head_bytes && head[0] == 0 && head[1] == 0 &&
           head[2] == 0x08 && head[3] == n_dims;
  int64_t item = 1;
  for (int d = 0; ok && d < n_dims; d++) {
    sizes[d] = be32(head + 4 + 4 * d);
    if (d > 0) item *= sizes[d];
  }
  if (ok && (sizes[0] < 1 || item < 1 || item > 1 << 20)) ok = 0;
  if (ok && keep < sizes[0]) sizes[0] = keep;
  size_t bytes = ok ? (size_t)(sizes[0] * item) : 0;
  *out = ok ? malloc(bytes) : NULL;
  if (ok && !*out) {
    fprintf(stderr, PROG ": out of memory for '%s'\n", path);
    ok = -1;
  }
  if (ok == 1 && fread(*out, 1, bytes, f) != bytes) ok = 0;
  /* the rest of the stream is not needed: drain it so that gzip ends well */
  char sink[1 << 14];
  while (fread(sink, 1, sizeof sink, f) > 0) {
  }
  int rc = pclose(f);
  if (ok == 1 && rc != 0) {
    fprintf(stderr, PROG ": gzip failed on '%s' (status %d)\n", path, rc);
    ok = -1;
  }
  if (ok == 0)
    fprintf(stderr, PROG ": '%s' is not an IDX file of %d dims (or is cut short)\n", path, n_dims);
  if (ok != 1) free(*out), *out = NULL;
  return ok == 1;
}

/* prefix "train" or "t10k": DIR/<prefix>-images-idx3-ubyte[.gz] and -labels-idx1-ubyte[.gz]. */
static int read_split(const char *dir, const char *prefix, int64_t keep, images *im) {
  char path[4096];
  const char *kinds[2] = {"images-idx3", "labels-idx1"};
  char *found[2];
  for (int k = 0; k < 2; k++) {
    snprintf(path, sizeof path, "%s/%s-%s-ubyte.gz", dir, prefix, kinds[k]);
    if (access(path, F_OK) != 0)
      snprintf(path, sizeof path, "%s/%s-%s-ubyte", dir, prefix, kinds[k]);
    found[k] = strdup(path);
  }
  int64_t isz[3] = {0}, lsz[1] = {0};
  int ok = found[0] && found[1] && read_idx(found[0], 3, keep, isz, &im->pixels) &&
           read_idx(found[1], 1, keep, lsz, &im->labels);
  if (ok && lsz[0] != isz[0]) {
    fprintf(stderr, PROG ": '%s' has %lld labels for %lld images\n", found[1], (long long)lsz[0],
            (long long)isz[0]);
    ok = 0;
  }
  for (int64_t i = 0; ok && i < lsz[0]; i++)
    if (im->labels[i] > 9) {
      fprintf(stderr, PROG ": '%s': label %d of item %lld is not a class 0..9\n", found[1],
              im->labels[i], (long long)i);
      ok = 0;
    }
  im->n = isz[0], im->rows = isz[1], im->cols = isz[2];
  if (ok && (im->rows % 4 || im->cols % 4)) {
    fprintf(stderr, PROG ": '%s' has %lldx%lld images: the two poolings need multiples of 4\n",
            found[0], (long long)im->rows, (long long)im->cols);
    ok = 0;
  }
  free(found[0]);
  free(found[1]);
  return ok;
}

static void images_free(images *im) {
  free(im->pixels);
  free(im->labels);
}

/* Images [n, 1, rows, cols] (normalized F32) and labels [n] (I64) of items idx[0..n-1] on
 * device, owned by the innermost scope. */
static int make_batch(const images *im, const int64_t *idx, int64_t n, tg_device device,
                      tg_tensor **x, tg_tensor **y) {
  int64_t plane = im->rows * im->cols;
  float *px = malloc(sizeof *px * (size_t)(n * plane));
  int64_t *lab = malloc(sizeof *lab * (size_t)n);
  *x = *y = NULL;
  if (px && lab) {
    for (int64_t b = 0; b < n; b++) {
      const unsigned char *src = im->pixels + idx[b] * plane;
      for (int64_t p = 0; p < plane; p++)
        px[b * plane + p] = (float)(((double)src[p] / 255.0 - PIXEL_MEAN) / PIXEL_STD);
      lab[b] = im->labels[idx[b]];
    }
    *x =
        tg_to_device(tg_from_data(TG_SHAPE(n, 1, im->rows, im->cols), px, TG_OPTS_DEFAULT), device);
    *y = tg_to_device(tg_from_data(TG_SHAPE(n), lab, (tg_options){.dtype = TG_I64}), device);
  } else {
    tg_set_error(TG_ERR_MEMORY, PROG ": out of memory for a batch of %lld", (long long)n);
  }
  free(px);
  free(lab);
  return *x && *y;
}

/* ---- training ---- */

typedef struct run {
  cnn_model *model;
  tg_optimizer *opt;
  tg_generator *sampler; /* which images each batch takes */
  tg_device device;      /* --device */
  double train_seconds;  /* in training steps only */
  double loss, smooth, first_loss, test_loss, test_accuracy;
  double *losses;   /* per step, for --check and the plot */
  double *accuracy; /* test accuracy per step (NAN where not measured) */
} run;

static int fail(const char *what) {
  fprintf(stderr, PROG ": %s: %s (%s)\n", what, tg_last_error_message(),
          tg_status_name(tg_last_error()));
  return 0;
}

/* One step: B random training images, forward, backward, the optimizer. */
static int train_step(run *r, const options *o, const images *train) {
  double t0 = train_now_seconds();
  tg_scope sc = tg_scope_begin();
  int64_t B = o->batch;
  int64_t *idx = malloc(sizeof *idx * (size_t)B);
  float *u = malloc(sizeof *u * (size_t)B);
  tg_tensor *draw = tg_rand(TG_SHAPE(B), TG_OPTS_DEFAULT, r->sampler);
  tg_status st = !idx || !u ? tg_set_error(TG_ERR_MEMORY, PROG ": out of memory")
                 : draw     ? tg_to_host_array(draw, u, sizeof *u * (size_t)B)
                            : tg_last_error();
  for (int64_t b = 0; b < B && st == TG_OK; b++) {
    int64_t i = (int64_t)((double)u[b] * (double)train->n);
    idx[b] = i < train->n ? i : train->n - 1;
  }
  tg_tensor *x = NULL, *y = NULL;
  if (st == TG_OK && !make_batch(train, idx, B, r->device, &x, &y)) st = tg_last_error();
  tg_tensor *loss = st == TG_OK ? tg_cross_entropy(cnn_model_logits(r->model, x), y) : NULL;
  if (st == TG_OK && !loss) st = tg_last_error();
  if (st == TG_OK) st = tg_item(loss, &r->loss);
  if (st == TG_OK) st = tg_optimizer_zero_grad(r->opt);
  if (st == TG_OK) st = tg_backward(loss, NULL);
  if (st == TG_OK) st = tg_optimizer_step(r->opt);
  if (st == TG_OK) st = train_sync(r->device);
  tg_scope_end(sc);
  free(idx);
  free(u);
  r->train_seconds += train_now_seconds() - t0;
  return st == TG_OK ? 1 : fail("training step");
}

/* Test loss and accuracy over the test images, in eval mode, batches of 500. */
static int evaluate(run *r, const images *test) {
  enum { CHUNK = 500 };
  int64_t idx[CHUNK], right = 0;
  float logits[CHUNK * 10];
  double sum = 0;
  tg_status st = TG_OK;
  tg_module_train(r->model->module, false);
  tg_no_grad_begin();
  for (int64_t at = 0; at < test->n && st == TG_OK; at += CHUNK) {
    int64_t n = test->n - at < CHUNK ? test->n - at : CHUNK;
    for (int64_t b = 0; b < n; b++) idx[b] = at + b;
    tg_scope sc = tg_scope_begin();
    tg_tensor *x, *y, *z = NULL;
    double l = 0;
    if (!make_batch(test, idx, n, r->device, &x, &y) || !(z = cnn_model_logits(r->model, x)))
      st = tg_last_error();
    if (st == TG_OK) st = tg_item(tg_cross_entropy(z, y), &l);
    if (st == TG_OK) st = tg_to_host_array(z, logits, sizeof logits[0] * (size_t)(n * 10));
    for (int64_t b = 0; b < n && st == TG_OK; b++) {
      int best = 0;
      for (int k = 1; k < 10; k++)
        if (logits[b * 10 + k] > logits[b * 10 + best]) best = k;
      right += best == test->labels[at + b];
    }
    sum += l * (double)n;
    tg_scope_end(sc);
  }
  tg_no_grad_end();
  tg_module_train(r->model->module, true);
  r->test_loss = sum / (double)test->n;
  r->test_accuracy = (double)right / (double)test->n;
  return st == TG_OK ? 1 : fail("evaluation");
}

static void run_free(run *r) {
  tg_optimizer_free(r->opt);
  cnn_model_free(r->model);
  tg_generator_free(r->sampler);
  free(r->losses);
  free(r->accuracy);
}

static int run_init(run *r, const options *o, const images *train) {
  r->losses = malloc(sizeof *r->losses * (size_t)o->steps);
  r->accuracy = malloc(sizeof *r->accuracy * (size_t)o->steps);
  if (!r->losses || !r->accuracy) return fprintf(stderr, PROG ": out of memory\n"), 0;
  for (long long i = 0; i < o->steps; i++) r->losses[i] = r->accuracy[i] = NAN;
  if (!train_device_ready(PROG, &o->common, o->device)) return 0;
  r->device = o->device;
  tg_generator *init = tg_generator_new((uint64_t)o->seed);
  r->sampler = tg_generator_new((uint64_t)o->seed + 1);
  if (!init || !r->sampler) return tg_generator_free(init), fail("setup");
  cnn_sizes sizes = {.channels = 1,
                     .height = train->rows,
                     .width = train->cols,
                     .c1 = o->c1,
                     .c2 = o->c2,
                     .classes = 10};
  r->model = cnn_model_new(sizes, o->conv_bn, TG_F32, init);
  tg_generator_free(init);
  if (!r->model) return fail("the model");
  /* before the optimizer: its state is made where the parameters are */
  if (tg_module_to_device(r->model->module, r->device) != TG_OK) return fail("--device");
  r->opt =
      o->optimizer == OPT_ADAM
          ? tg_adam_for(r->model->module, (tg_adam_options){.lr = o->lr})
          : tg_sgd_for(r->model->module, (tg_sgd_options){.lr = o->lr, .momentum = o->momentum});
  return r->opt ? 1 : fail("the optimizer");
}

/* ---- progress ---- */

static void progress_line(const options *o, const run *r, long long done, long long start,
                          double elapsed, int tty) {
  train_progress_start(done, o->steps, tty);
  printf("  loss %.4f  %.0f img/s", r->smooth,
         (double)(done - start) * (double)o->batch / r->train_seconds);
  if (!isnan(r->test_accuracy)) printf("  test acc %.4f", r->test_accuracy);
  train_progress_end(done, start, o->steps, elapsed, tty);
}

/* ---- the plot ---- */

static void plot(const options *o, const run *r, long long start) {
  FILE *g = train_gnuplot_open(o->common.plot);
  if (!g) return;
  fprintf(g, "set title 'train_cnn: Fashion-MNIST (%s, batch %lld, c1 %lld, c2 %lld, %s)'\n",
          o->optimizer == OPT_ADAM ? "Adam" : "SGD", o->batch, o->c1, o->c2,
          o->conv_bn == CNN_FUSED ? "fused" : "composed");
  fprintf(g,
          "set xlabel 'step'\nset ylabel 'loss (nats)'\nset y2label 'test accuracy'\n"
          "set y2range [0:1]\nset y2tics\nset ytics nomirror\nset grid\n"
          "set key center right\nset xrange [%lld:%lld]\n",
          start, o->steps);
  fprintf(g, "plot '-' with lines lw 1.5 title 'training loss (mean of 50)', "
             "'-' axes x1y2 with linespoints pt 7 title 'test accuracy'\n");
  train_gnuplot_smoothed(g, r->losses, start, o->steps);
  for (long long s = start; s < o->steps; s++)
    if (!isnan(r->accuracy[s])) fprintf(g, "%lld %.6f\n", s + 1, r->accuracy[s]);
  fprintf(g, "e\n");
  train_gnuplot_close(g, o->common.plot, o->common.quiet);
}

/* ---- main ---- */

static int train(const options *o, const images *tr, const images *te, run *r, long long *start_out,
                 FILE *csv) {
  long long start = 0;
  char why[8192]; /* tg_last_error_message, which may quote a long path */
  if (o->common.resume && !train_resume(o->common.checkpoint, r->model->module, r->opt, &r->sampler,
                                        o->steps, o->common.quiet, &start, why, sizeof why))
    return fprintf(stderr, PROG ": %s\n", why), 0;
  *start_out = start;
  train_progress progress = train_progress_new(o->common.log_every, start, o->steps);
  long long test_every = (o->steps + 9) / 10;
  double t_start = train_now_seconds();
  r->test_accuracy = NAN;
  for (long long s = start; s < o->steps; s++) {
    if (!train_step(r, o, tr)) return 0;
    if (s == start) r->first_loss = r->smooth = r->loss;
    r->smooth = 0.95 * r->smooth + 0.05 * r->loss;
    r->losses[s] = r->loss;
    long long done = s + 1;
    int testing = done % test_every == 0 || done == o->steps;
    if (testing && !evaluate(r, te)) return 0;
    if (testing) r->accuracy[s] = r->test_accuracy;
    double elapsed = train_now_seconds() - t_start;
    if (csv) {
      fprintf(csv, "%lld,%s,%.9g,%.1f,%.3f,", done, o->conv_bn == CNN_FUSED ? "fused" : "composed",
              r->loss, (double)(done - start) * (double)o->batch / r->train_seconds, elapsed);
      if (testing)
        fprintf(csv, "%.9g,%.6f", r->test_loss, r->test_accuracy);
      else
        fprintf(csv, ",");
      fprintf(csv, "\n");
    }
    if (train_checkpoint_if_due(&o->common, r->model->module, r->opt, &r->sampler, done,
                                o->steps) != TG_OK)
      return fail("checkpoint");
    if (!o->common.quiet && train_progress_due(&progress, done, start, o->steps, elapsed))
      progress_line(o, r, done, start, elapsed, progress.tty);
  }
  if (!o->common.quiet && progress.tty) printf("\n");
  if (start == o->steps && !evaluate(r, te)) return 0;
  return 1;
}

static int report(const options *o, const images *te, const run *r, long long start, double wall) {
  long long steps = o->steps - start;
  printf("\n");
  if (steps) {
    printf("%.0f images/s, %.2f ms/step (%lld steps of %lld images in %.1f s of training)\n",
           (double)steps * (double)o->batch / r->train_seconds,
           1e3 * r->train_seconds / (double)steps, steps, o->batch, r->train_seconds);
    long long n_mean = steps < 50 ? steps : 50;
    printf("final train loss %.17g (last step), %.4f (mean of the last %lld steps; first step "
           "%.4f)\n",
           r->loss, train_mean_last(r->losses, start, o->steps, n_mean), n_mean, r->first_loss);
  }
  printf("final test loss %.17g\n", r->test_loss);
  printf("test accuracy %.4f (%lld of %lld test images)\n", r->test_accuracy,
         (long long)llround(r->test_accuracy * (double)te->n), (long long)te->n);
  train_print_device_memory(r->device);
  printf("wall time %.1f s\n", wall);
  int ok = 1;
  if (o->common.check && steps) {
    long long n_mean = steps < 50 ? steps : 50;
    double last = train_mean_last(r->losses, start, o->steps, n_mean);
    if (!(last < r->first_loss)) {
      printf("CHECK FAILED: the training loss did not fall: mean of the last %lld steps %.4f, "
             "first step %.4f\n",
             n_mean, last, r->first_loss);
      ok = 0;
    }
  }
  if (o->common.check && !(r->test_accuracy >= CHECK_ACCURACY)) {
    printf("CHECK FAILED: test accuracy %.4f is below %g\n", r->test_accuracy, CHECK_ACCURACY);
    ok = 0;
  }
  if (o->expect_accuracy > 0 && !(r->test_accuracy >= o->expect_accuracy)) {
    printf("CHECK FAILED: test accuracy %.4f is below %g\n", r->test_accuracy, o->expect_accuracy);
    ok = 0;
  }
  if (ok && (o->common.check || o->expect_accuracy > 0)) printf("check passed\n");
  return ok;
}

int main(int argc, char **argv) {
  options o = {
      .data = "/usr/share/datasets/fashion-mnist",
      .steps = 1000,
      .batch = 64,
      .c1 = 8,
      .c2 = 16,
      .train_size = 60000,
      .test_size = 10000,
      .momentum = 0.9,
      .seed = 1,
  };
  int parsed = parse_options(argc, argv, &o);
  if (parsed <= 0) return parsed == 0 ? 0 : CLI_EXIT_USAGE;
  if (o.lr == 0) o.lr = o.optimizer == OPT_ADAM ? 2e-3 : 0.05;
  train_setup_threads(o.threads, &o.common);

  images train_set = {0}, test_set = {0};
  int ok = read_split(o.data, "train", o.train_size, &train_set) &&
           read_split(o.data, "t10k", o.test_size, &test_set);
  if (ok && (train_set.rows != test_set.rows || train_set.cols != test_set.cols)) {
    fprintf(stderr, PROG ": training images are %lldx%lld, test images %lldx%lld\n",
            (long long)train_set.rows, (long long)train_set.cols, (long long)test_set.rows,
            (long long)test_set.cols);
    ok = 0;
  }
  run r = {0};
  if (ok) ok = run_init(&r, &o, &train_set);
  if (ok && !o.common.quiet) {
    printf("data: %s, %lld training and %lld test images of %lldx%lld (Fashion-MNIST)\n", o.data,
           (long long)train_set.n, (long long)test_set.n, (long long)train_set.rows,
           (long long)train_set.cols);
    printf("model: (conv 3x3 -> batch norm -> ReLU -> max pool 2) x 2, %lld and %lld channels, "
           "conv+bn %s -> linear %lld x 10; %lld parameters\n",
           o.c1, o.c2, o.conv_bn == CNN_FUSED ? "fused" : "composed",
           o.c2 * (train_set.rows / 4) * (train_set.cols / 4),
           (long long)tg_module_parameter_count(r.model->module));
    printf("training: %lld steps of batch %lld, %s lr %g", o.steps, o.batch,
           o.optimizer == OPT_ADAM ? "Adam" : "SGD", o.lr);
    if (o.optimizer == OPT_SGD) printf(" momentum %g", o.momentum);
    printf(", seed %lld, %d threads, on %s\n", o.seed, tg_get_num_threads(),
           o.common.device ? o.common.device : "cpu");
  }
  FILE *csv = NULL;
  if (ok && o.common.csv && !(csv = train_csv_open(o.common.csv, o.common.resume, CSV_HEADER))) {
    fprintf(stderr, PROG ": cannot write '%s': %s\n", o.common.csv, strerror(errno));
    ok = 0;
  }
  long long start = 0;
  double t0 = train_now_seconds();
  if (ok) ok = train(&o, &train_set, &test_set, &r, &start, csv);
  double wall = train_now_seconds() - t0;
  if (!train_csv_close(csv, PROG, o.common.csv)) ok = 0;
  int checks = 1;
  if (ok) checks = report(&o, &test_set, &r, start, wall);
  if (ok && o.common.plot) plot(&o, &r, start);

  run_free(&r);
  images_free(&train_set);
  images_free(&test_set);
  if (!train_no_leaks(PROG)) ok = 0;
  return ok && checks ? 0 : 1;
}
