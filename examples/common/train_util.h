/* What the training examples (train_charlm.c, train_cnn.c, train_gpt.c) share besides option
 * parsing (cli_parse.h) and tg's checkpoints (train_run.h): a clock, the progress line's bar,
 * ETA and cadence, the CSV file's opening and closing, and the gnuplot plot's plumbing.
 * Header-only (static functions); POSIX (popen, access, isatty, clock_gettime). */
#ifndef TG_TRAIN_UTIL_H
#define TG_TRAIN_UTIL_H

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static inline double train_now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* "12m05s", "1h02m", or "?" for a negative, NaN or absurd duration. */
static inline void train_format_duration(double s, char *buf, size_t len) {
  if (!(s >= 0) || s > 1e7) {
    snprintf(buf, len, "?");
  } else if (s >= 3600) {
    snprintf(buf, len, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
  } else {
    snprintf(buf, len, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
  }
}

/* The progress line's start: a bar redrawn in place on a terminal, "step d/n" lines else. */
static inline void train_progress_start(long long done, long long steps, int tty) {
  if (tty) {
    enum { WIDTH = 24 };
    int fill = (int)(WIDTH * done / steps);
    char bar[WIDTH + 1];
    for (int i = 0; i < WIDTH; i++) bar[i] = i < fill ? '#' : '.';
    bar[WIDTH] = '\0';
    printf("\r[%s] %lld/%lld", bar, done, steps);
  } else {
    printf("step %lld/%lld", done, steps);
  }
}

/* Its end: the time left at the pace so far (elapsed over done - start steps). */
static inline void train_progress_end(long long done, long long start, long long steps,
                                      double elapsed, int tty) {
  const double per_step = done > start ? elapsed / (double)(done - start) : NAN;
  char eta[32];
  train_format_duration(per_step * (double)(steps - done), eta, sizeof eta);
  printf("  ETA %s%s", eta, tty ? "\033[K" : "\n");
  fflush(stdout);
}

/* When a progress line is due: on a terminal (a bar redrawn in place) at most every 0.1 s,
 * else every log_every steps (by default about 20 lines a run); always after the last step. */
typedef struct train_progress {
  int tty;
  long long log_every;
  double last_draw; /* elapsed seconds at the last redraw */
} train_progress;

static inline train_progress train_progress_new(long long log_every, long long start,
                                                long long steps) {
  train_progress p = {isatty(STDOUT_FILENO), log_every ? log_every : (steps - start + 19) / 20, 0};
  return p;
}

static inline int train_progress_due(train_progress *p, long long done, long long start,
                                     long long steps, double elapsed) {
  if (!p->tty) return (done - start) % p->log_every == 0 || done == steps;
  if (!(elapsed - p->last_draw > 0.1 || done == steps)) return 0;
  p->last_draw = elapsed;
  return 1;
}

/* The mean of losses[end - n .. end - 1] (not before start), NAN when that is empty. */
static inline double train_mean_last(const double *losses, long long start, long long end,
                                     long long n) {
  long long from = end - n > start ? end - n : start;
  double sum = 0;
  for (long long s = from; s < end; s++) sum += losses[s];
  return end > from ? sum / (double)(end - from) : NAN;
}

/* The --csv file: a resumed run adds its rows, so it is opened to append then, and the header
 * line goes in only where the file is empty. NULL (errno set) when it cannot be opened: the
 * caller says so. */
static inline FILE *train_csv_open(const char *path, int resume, const char *header) {
  FILE *f = fopen(path, resume ? "a" : "w");
  if (f && ftell(f) == 0) fprintf(f, "%s\n", header);
  return f;
}

/* Closes it (when open); 0 after a message when what was written did not reach the file. */
static inline int train_csv_close(FILE *f, const char *prog, const char *path) {
  if (!f || fclose(f) == 0) return 1;
  fprintf(stderr, "%s: writing '%s' failed\n", prog, path);
  return 0;
}

static inline int train_on_path(const char *program) {
  const char *path = getenv("PATH");
  char buf[4096];
  while (path && *path) {
    const char *colon = strchr(path, ':');
    size_t len = colon ? (size_t)(colon - path) : strlen(path);
    snprintf(buf, sizeof buf, "%.*s/%s", (int)len, len ? path : ".", program);
    if (access(buf, X_OK) == 0) return 1;
    path = colon ? colon + 1 : NULL;
  }
  return 0;
}

/* gnuplot writing a PNG to png, or NULL after a note saying why there is no plot. */
static inline FILE *train_gnuplot_open(const char *png) {
  if (!train_on_path("gnuplot")) {
    printf("note: gnuplot is not on PATH, so no plot (--plot %s); install gnuplot-nox "
           "(Debian) or use --csv\n",
           png);
    return NULL;
  }
  FILE *g = popen("gnuplot", "w");
  if (!g) {
    printf("note: could not start gnuplot (%s): no plot\n", strerror(errno));
    return NULL;
  }
  fprintf(g, "set terminal pngcairo noenhanced size 800,480 font ',10'\nset output '%s'\n", png);
  return g;
}

/* One inline data block: losses[start..steps-1] as a running mean of 50 (from the tenth
 * point on, and the last). */
static inline void train_gnuplot_smoothed(FILE *g, const double *losses, long long start,
                                          long long steps) {
  double window = 0;
  int in_window = 0;
  for (long long s = start; s < steps; s++) {
    window += losses[s];
    if (++in_window > 50) window -= losses[s - 50], in_window = 50;
    if (s - start >= 9 || s == steps - 1) fprintf(g, "%lld %.6f\n", s + 1, window / in_window);
  }
  fprintf(g, "e\n");
}

static inline void train_gnuplot_close(FILE *g, const char *png, int quiet) {
  int rc = pclose(g);
  if (rc != 0)
    printf("note: gnuplot failed (status %d): %s may be missing\n", rc, png);
  else if (!quiet)
    printf("plot: %s\n", png);
}

#endif
