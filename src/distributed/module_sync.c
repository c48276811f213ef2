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
#include "tensor/fnv1a.h"
#include "tensor/check.h"
#include "tg/autograd.h"
#include "tensor/host_memory.h"

/* An entry as the error message shows it (entry_at). */
#define LINE_MAX_BYTES 640

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

/* Piece by piece: a nested name can be longer than any fixed line (each segment up to 255
 * bytes), and a line cut short would hide a difference past the cut from the hash. */
static bool append_entry(text *t, const char *kind, const char *name, const tg_tensor *v) {
  char sizes[256];
  tg_format_sizes(sizes, sizeof sizes, tg_ndim(v), tg_sizes(v));
  return append(t, kind) && append(t, "\t") && append(t, name) && append(t, "\t") &&
         append(t, tg_dtype_name(tg_tensor_dtype(v))) && append(t, "\t") && append(t, sizes) &&
         append(t, "\n");
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

/* Entry i of the description s as "parameter 'fc.weight' float32 [4, 3]" into out (a name
 * over NAME_SHOWN bytes shown by its head and tail), or "no entry there"; false when s has
 * fewer lines. For the message only: the error's code comes from the full text. */
#define NAME_SHOWN 120
static bool entry_at(const char *s, int64_t i, char *out, size_t n) {
  for (; i > 0 && s; i--) {
    s = strchr(s, '\n');
    if (s) s++;
  }
  if (!s || !*s) {
    snprintf(out, n, "no entry there");
    return false;
  }
  /* kind \t name \t dtype \t sizes \n */
  const char *f[4] = {s, "", "", ""};
  int len[4] = {0, 0, 0, 0};
  for (int k = 0; k < 4; k++) {
    if (k > 0) {
      if (*s != '\t') break;
      f[k] = ++s;
    }
    while (*s && *s != '\t' && *s != '\n') s++;
    len[k] = (int)(s - f[k]);
  }
  if (len[1] <= NAME_SHOWN)
    snprintf(out, n, "%.*s '%.*s' %.*s %.*s", len[0], f[0], len[1], f[1], len[2], f[2], len[3],
             f[3]);
  else
    snprintf(out, n, "%.*s '%.*s...%.*s' %.*s %.*s", len[0], f[0], NAME_SHOWN / 3, f[1],
             NAME_SHOWN / 2, f[1] + len[1] - NAME_SHOWN / 2, len[2], f[2], len[3], f[3]);
  return true;
}

/* The index of the first line where a and b differ, -1 when they are equal; *field: the
 * field of that line where they do (0 kind, 1 name, 2 dtype, 3 sizes). */
static int64_t first_difference(const char *a, const char *b, int64_t *field) {
  int64_t line = 0;
  *field = 0;
  for (;; a++, b++) {
    if (*a != *b) return line;
    if (!*a) return -1;
    if (*a == '\t') ++*field;
    if (*a == '\n') line++, *field = 0;
  }
}

/* The error for two entries (entry_at) that differ in field (first_difference), the same on
 * every rank. */
static tg_status report(const char *fn, int64_t index, int64_t field, const char *a, bool has_a,
                        int64_t rank_b, const char *b, bool has_b) {
  tg_status code = TG_ERR_SHAPE;
  if (!has_a || !has_b || field <= 1)
    code = TG_ERR_ARGUMENT;
  else if (field == 2)
    code = TG_ERR_DTYPE;
  return tg_set_error(code,
                      "%s: the ranks' modules differ at entry %" PRId64
                      ": rank 0 has %s, rank %" PRId64
                      " has %s (every rank must build the same module)",
                      fn, index, a, rank_b, b);
}

/* After the hashes differed: rank 0's text to all, the first rank that differs, its line. */
static tg_status name_difference(const char *fn, const text *mine) {
  static int64_t len0, differ;
  static struct {
    int64_t index;
    int64_t field;
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
  int64_t field = 0;
  const int64_t index = first_difference(text0, mine->data, &field);
  differ = index >= 0 ? tg_dist_rank() : INT64_MAX;
  st = tg__dist_allreduce_host(fn, &differ, 1, TG_I64, TG_REDUCE_MIN);
  if (st == TG_OK && differ == INT64_MAX)
    st = tg_set_error(TG_ERR_DIST, "%s: the module hashes differ but no rank sees it", fn);
  if (st == TG_OK) {
    if (tg_dist_rank() == differ) {
      theirs.index = index;
      theirs.field = field;
      theirs.present = entry_at(mine->data, index, theirs.line, sizeof theirs.line);
    }
    st = tg__dist_broadcast_host(fn, &theirs, (int64_t)sizeof theirs, (int)differ);
  }
  if (st == TG_OK) {
    char line0[LINE_MAX_BYTES];
    const bool has0 = entry_at(text0, theirs.index, line0, sizeof line0);
    st = report(fn, theirs.index, theirs.field, line0, has0, differ, theirs.line,
                theirs.present != 0);
  }
  if (!root && !tg__dist_failed()) tg__host_free(text0);
  return st;
}

/* Every rank's module alike, and every rank's local status fine (local's error pending). */
static tg_status check_module(const char *fn, const tg_module *m, tg_status local) {
  text mine = {0};
  if (local == TG_OK) local = tg__check_not_null(fn, "m", m) ? TG_OK : TG_ERR_ARGUMENT;
  if (local == TG_OK) local = describe(fn, m, &mine);
  tg_status st = tg__dist_agree(fn, local);
  if (st == TG_OK) {
    /* (h, -h) under MIN: min and max of the ranks' hashes (62 bits: -h cannot overflow) */
    static int64_t h[2];
    h[0] = (int64_t)(tg__fnv1a(TG_FNV1A_START, mine.data, mine.len) >> 2);
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
  tg_status local =
      tg__check_status(root >= 0 && root < tg_dist_world_size(), TG_ERR_ARGUMENT, fn,
                       "root %d is not a rank (world size %d)", root, tg_dist_world_size());
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
