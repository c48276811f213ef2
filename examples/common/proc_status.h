/* Fields of /proc/self/status (Linux), e.g. VmHWM, the peak resident memory, for the
 * examples and benchmarks that report memory. Header-only; -1 where there is no such file. */
#ifndef TG_PROC_STATUS_H
#define TG_PROC_STATUS_H

#include <stdio.h>
#include <string.h>

/* A "Name:   123 kB" field of /proc/self/status in kB, or -1. */
static inline long long proc_status_kb(const char *name) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long long kb = -1;
  const size_t n = strlen(name);
  while (fgets(line, sizeof line, f))
    if (strncmp(line, name, n) == 0 && line[n] == ':') {
      if (sscanf(line + n + 1, "%lld", &kb) != 1) kb = -1;
      break;
    }
  fclose(f);
  return kb;
}

#endif
