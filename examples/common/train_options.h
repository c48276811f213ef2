/* The command-line options every training example (train_charlm.c, train_cnn.c, train_gpt.c)
 * takes alike: files (--csv, --plot, --checkpoint), --checkpoint-every, --resume, --log-every,
 * --check, --quiet and --device (read by train_run.h's train_parse_device: it needs tg), and the
 * checks after getopt_long that they share. Each program lists them in its own getopt_long table
 * (whose order getopt_long's messages follow) with the codes below, and hands any code to
 * train_option first. Header-only; no tg inside. */
#ifndef TG_TRAIN_OPTIONS_H
#define TG_TRAIN_OPTIONS_H

#include <stdio.h>

#include "cli_parse.h"

typedef struct train_options {
  const char *csv, *plot, *checkpoint;
  const char *device;                    /* --device as given (NULL: the CPU) */
  long long checkpoint_every, log_every; /* 0: only at the end; about 20 lines a run */
  int resume, check, quiet;
} train_options;

/* getopt_long codes, above those the programs number from 256. */
enum {
  TRAIN_OPT_CSV = 1024,
  TRAIN_OPT_PLOT,
  TRAIN_OPT_CKPT,
  TRAIN_OPT_CKPT_EVERY,
  TRAIN_OPT_RESUME,
  TRAIN_OPT_LOG_EVERY,
  TRAIN_OPT_CHECK,
  TRAIN_OPT_QUIET,
  TRAIN_OPT_DEVICE,
};

/* One of the options above: 1 taken, 0 a bad value (after the message), -1 not one of them. */
static inline int train_option(const char *prog, int code, const char *arg, train_options *t) {
  switch (code) {
  case TRAIN_OPT_CSV:
    return t->csv = arg, 1;
  case TRAIN_OPT_PLOT:
    return t->plot = arg, 1;
  case TRAIN_OPT_CKPT:
    return t->checkpoint = arg, 1;
  case TRAIN_OPT_CKPT_EVERY:
    return cli_parse_ll(prog, "--checkpoint-every", arg, 1, 100000000, &t->checkpoint_every);
  case TRAIN_OPT_RESUME:
    return t->resume = 1, 1;
  case TRAIN_OPT_LOG_EVERY:
    return cli_parse_ll(prog, "--log-every", arg, 1, 100000000, &t->log_every);
  case TRAIN_OPT_CHECK:
    return t->check = 1, 1;
  case TRAIN_OPT_QUIET:
    return t->quiet = 1, 1;
  case TRAIN_OPT_DEVICE:
    return t->device = arg, 1;
  default:
    return -1;
  }
}

/* After the options: 0, after a message, when words are left over. */
static inline int train_no_operands(const char *prog, int optind_, int argc, char **argv) {
  if (optind_ >= argc) return 1;
  fprintf(stderr, "%s: unexpected argument '%s'\n", prog, argv[optind_]);
  return 0;
}

/* 0, after a message, when more than one of the implementations (impl_list) was asked for. */
static inline int train_one_impl(const char *prog, int impl_flags, const char *impl_list) {
  if (impl_flags <= 1) return 1;
  fprintf(stderr, "%s: give one of %s\n", prog, impl_list);
  return 0;
}

/* 0, after a message, when --resume or --checkpoint-every come without --checkpoint. */
static inline int train_checkpoint_options_ok(const char *prog, const train_options *t) {
  if (!(t->resume || t->checkpoint_every) || t->checkpoint) return 1;
  fprintf(stderr, "%s: --resume and --checkpoint-every need --checkpoint PATH\n", prog);
  return 0;
}

#endif
