/* tg_dist_check_module and tg_dist_broadcast_module.
 *
 * A module is described as text, one line per parameter then per buffer
 * ("parameter\tname\tdtype\t[sizes]"). The ranks compare a hash of it (one all-reduce); only
 * when they differ does rank 0 send its text, so the first rank that differs can name the
 * first entry that does, and every rank reports the same error. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "tg/autograd.h"
#include "tensor/host_memory.h"

#define LINE_MAX_BYTES 512

typedef struct text {
  char *data;
  size_t len, cap;
} text;

static bool append(text *t, const char *s) {
  const size_t n = strlen(s);
  if (t->len + n + 1 > t->cap) {
    size_t cap = t->cap ? 2 * t->cap : 1024;
    while (cap < t->len + n + 1) cap *= 2;
    char *p = tg__host_realloc(t->data, cap);
    if (!p) return false;
    t->data = p, t->cap = cap;
  }
  memcpy(t->data + t->len, s, n + 1);
  t->len += n;
  return true;
}

static bool append_entry(text *t, const char *kind, const char *name, const tg_tensor *v) {
  char sizes[256], line[LINE_MAX_BYTES];
  tg_format_sizes(sizes, sizeof sizes, tg_ndim(v), tg_sizes(v));
  snprintf(line, sizeof line, "%s\t%s\t%s\t%s\n", kind, name, tg_dtype_name(tg_tensor_dtype(v)),
           sizes);
  return append(t, line);
}

/* The module's description; NULL data with TG_ERR_MEMORY when it cannot be built. */
static tg_status describe(const char *fn, const tg_module *m, text *out) {
  text t = {0};
  bool ok = append(&t, "");
  for (int i = 0; ok && i < tg_module_num_parameters(m); i++) {
    const char *name = NULL;
    tg_tensor *p = tg_module_parameter(m, i, &name);
    ok = append_entry(&t, "parameter", name, p);
  }
  for (int i = 0; ok && i < tg_module_num_buffers(m); i++) {
    const char *name = NULL;
    tg_tensor *b = tg_module_buffer(m, i, &name);
    ok = append_entry(&t, "buffer", name, b);
  }
  if (!ok) {
    tg__host_free(t.data);
    return tg_set_error(TG_ERR_MEMORY, "%s: out of memory describing the module", fn);
  }
  *out = t;
  return TG_OK;
}

static uint64_t fnv1a(const char *s, size_t n) {
  uint64_t h = 1469598103934665603u;
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211u;
  return h;
}

/* Line i of s (without its newline) into out; false when s has fewer lines. */
static bool line_at(const char *s, int64_t i, char *out, size_t n) {
  for (; i > 0 && s; i--) {
    s = strchr(s, '\n');
    if (s) s++;
  }
  if (!s || !*s) return false;
  const char *end = strchr(s, '\n');
  const size_t len = end ? (size_t)(end - s) : strlen(s);
  snprintf(out, n, "%.*s", (int)(len < n ? len : n - 1), s);
  return true;
}

/* The index of the first line where a and b differ; -1 when they are equal. */
static int64_t first_difference(const char *a, const char *b) {
  int64_t line = 0;
  for (;; a++, b++) {
    if (*a != *b) return line;
    if (!*a) return -1;
    if (*a == '\n') line++;
  }
}

/* "parameter fc.weight F32 [4, 3]" from a description line, or "no such entry". */
static void show(const char *line, bool present, char *out, size_t n) {
  if (!present) {
    snprintf(out, n, "no entry there");
    return;
  }
  char kind[32] = "", name[LINE_MAX_BYTES] = "", dtype[16] = "", sizes[256] = "";
  sscanf(line, "%31[^\t]\t%511[^\t]\t%15[^\t]\t%255[^\n]", kind, name, dtype, sizes);
  snprintf(out, n, "%s '%s' %s %s", kind, name, dtype, sizes);
}

/* The error for two description lines, the same on every rank. */
static tg_status report(const char *fn, int64_t index, const char *a, bool has_a, int64_t rank_b,
                        const char *b, bool has_b) {
  char ka[32] = "", na[LINE_MAX_BYTES] = "", da[16] = "", kb[32] = "", nb[LINE_MAX_BYTES] = "",
       db[16] = "";
  if (has_a) sscanf(a, "%31[^\t]\t%511[^\t]\t%15[^\t]", ka, na, da);
  if (has_b) sscanf(b, "%31[^\t]\t%511[^\t]\t%15[^\t]", kb, nb, db);
  tg_status code = TG_ERR_SHAPE;
  if (!has_a || !has_b || strcmp(ka, kb) != 0 || strcmp(na, nb) != 0)
    code = TG_ERR_ARGUMENT;
  else if (strcmp(da, db) != 0)
    code = TG_ERR_DTYPE;
  char sa[LINE_MAX_BYTES + 64], sb[LINE_MAX_BYTES + 64];
  show(a, has_a, sa, sizeof sa);
  show(b, has_b, sb, sizeof sb);
  return tg_set_error(code,
                      "%s: the ranks' modules differ at entry %" PRId64
                      ": rank 0 has %s, rank %" PRId64
                      " has %s (every rank must build the same module)",
                      fn, index, sa, rank_b, sb);
}

/* After the hashes differed: rank 0's text to all, the first rank that differs, its line. */
static tg_status name_difference(const char *fn, const text *mine) {
  static int64_t len0, differ;
  static struct {
    int64_t index;
    int64_t present;
    char line[LINE_MAX_BYTES];
  } theirs;
  const bool root = tg_dist_rank() == 0;
  len0 = (int64_t)mine->len;
  tg_status st = tg__dist_broadcast_host(fn, &len0, (int64_t)sizeof len0, 0);
  if (st != TG_OK) return st;
  char *text0 = root ? mine->data : tg__host_malloc((size_t)len0 + 1);
  st = tg__dist_agree(fn, text0 ? TG_OK
                                : tg_set_error(TG_ERR_MEMORY,
                                               "%s: out of memory (%" PRId64
                                               " bytes for rank 0's module)",
                                               fn, len0));
  if (st == TG_OK) st = tg__dist_broadcast_host(fn, text0, len0, 0);
  if (st != TG_OK) {
    if (!root && !tg__dist_failed()) tg__host_free(text0); /* else MPI may still write it */
    return st;
  }
  text0[len0] = '\0';
  const int64_t index = first_difference(text0, mine->data);
  differ = index >= 0 ? tg_dist_rank() : INT64_MAX;
  st = tg__dist_allreduce_host(fn, &differ, 1, TG_I64, TG_REDUCE_MIN);
  if (st == TG_OK && differ == INT64_MAX)
    st = tg_set_error(TG_ERR_DIST, "%s: the module hashes differ but no rank sees it", fn);
  if (st == TG_OK) {
    if (tg_dist_rank() == differ) {
      theirs.index = index;
      theirs.present = line_at(mine->data, index, theirs.line, sizeof theirs.line);
    }
    st = tg__dist_broadcast_host(fn, &theirs, (int64_t)sizeof theirs, (int)differ);
  }
  if (st == TG_OK) {
    char line0[LINE_MAX_BYTES];
    const bool has0 = line_at(text0, theirs.index, line0, sizeof line0);
    st = report(fn, theirs.index, line0, has0, differ, theirs.line, theirs.present != 0);
  }
  if (!root && !tg__dist_failed()) tg__host_free(text0);
  return st;
}

/* Every rank's module alike, and every rank's local status fine (local's error pending). */
static tg_status check_module(const char *fn, const tg_module *m, tg_status local) {
  text mine = {0};
  if (local == TG_OK && !m) local = tg_set_error(TG_ERR_ARGUMENT, "%s: m is NULL", fn);
  if (local == TG_OK) local = describe(fn, m, &mine);
  tg_status st = tg__dist_agree(fn, local);
  if (st == TG_OK) {
    /* (h, -h) under MIN: min and max of the ranks' hashes (62 bits: -h cannot overflow) */
    static int64_t h[2];
    h[0] = (int64_t)(fnv1a(mine.data, mine.len) >> 2);
    h[1] = -h[0];
    st = tg__dist_allreduce_host(fn, h, 2, TG_I64, TG_REDUCE_MIN);
    if (st == TG_OK && h[0] != -h[1]) st = name_difference(fn, &mine);
  }
  tg__host_free(mine.data);
  return st;
}

tg_status tg_dist_check_module(const tg_module *m) {
  const char *fn = "tg_dist_check_module";
  if (!tg__dist_ready(fn)) return tg_last_error();
  return check_module(fn, m, TG_OK);
}

tg_status tg_dist_broadcast_module(tg_module *m, int root) {
  const char *fn = "tg_dist_broadcast_module";
  if (!tg__dist_ready(fn)) return tg_last_error();
  tg_status local = TG_OK;
  if (root < 0 || root >= tg_dist_world_size())
    local = tg_set_error(TG_ERR_ARGUMENT, "%s: root %d is not a rank (world size %d)", fn, root,
                         tg_dist_world_size());
  tg_status st = check_module(fn, m, local);
  if (st != TG_OK) return st;
  /* Every rank has the same entries in the same order: broadcast them one by one. */
  tg_no_grad_begin();
  for (int i = 0; st == TG_OK && i < tg_module_num_parameters(m); i++)
    st = tg_dist_broadcast(tg_module_parameter(m, i, NULL), root);
  for (int i = 0; st == TG_OK && i < tg_module_num_buffers(m); i++)
    st = tg_dist_broadcast(tg_module_buffer(m, i, NULL), root);
  tg_no_grad_end();
  return st;
}
