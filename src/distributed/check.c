/* The cross-rank checks (check.h). Values are compared with one all-reduce of MIN over
 * (v, -v) pairs: min and max of every field at once; equal everywhere when they agree. The
 * error path then names two ranks: rank 0 broadcasts its description, the first rank that
 * differs from it is found by a MIN all-reduce, and it broadcasts its own. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "check.h"

#define DESC_N ((int)(sizeof(tg__dist_desc) / sizeof(int64_t)))

/* The key of a failing rank: its rank and status, ordered by rank. */
#define KEY_NONE INT64_MAX
static int64_t fail_key(tg_status st) {
  return st == TG_OK ? KEY_NONE : ((int64_t)tg_dist_rank() << 8 | (int64_t)st);
}

/* The other ranks' failure, from the smallest key. */
static tg_status peer_failed(const char *name, int64_t key) {
  const tg_status st = (tg_status)(key & 0xff);
  return tg_set_error(st,
                      "%s: rank %" PRId64 " failed its own checks (%s; its message says why): "
                      "no data was exchanged",
                      name, key >> 8, tg_status_name(st));
}

tg_status tg__dist_agree(const char *name, tg_status local) {
  static int64_t key;
  key = fail_key(local);
  const tg_status st = tg__dist_allreduce_host(name, &key, 1, TG_I64, TG_REDUCE_MIN);
  if (st != TG_OK) return st;
  if (local != TG_OK) return local;
  return key == KEY_NONE ? TG_OK : peer_failed(name, key);
}

tg__dist_desc tg__dist_describe(const tg_tensor *t, int64_t arg) {
  tg__dist_desc d;
  memset(&d, 0, sizeof d);
  d.arg = arg;
  if (!t) return d;
  d.device = tg_tensor_device(t).type;
  d.dtype = tg_tensor_dtype(t);
  d.ndim = tg_ndim(t);
  d.numel = tg_numel(t);
  for (int i = 0; i < tg_ndim(t); i++) d.sizes[i] = tg_sizes(t)[i];
  return d;
}

/* "float32 [2, 3] on cpu", and the op or root when show_arg. */
static void desc_text(char *buf, size_t n, const tg__dist_desc *d, const char *arg_name,
                      bool show_arg) {
  static const char *const ops[] = {"sum", "mean", "max", "min"};
  char sizes[256], arg[64] = "";
  tg_format_sizes(sizes, sizeof sizes, (int)d->ndim, d->sizes);
  const char *dtype =
      d->dtype >= 0 && d->dtype < TG_NUM_DTYPES ? tg_dtype_name((tg_dtype)d->dtype) : "?";
  const char *device = d->device >= 0 && d->device < TG_NUM_DEVICE_TYPES
                           ? tg_device_type_name((tg_device_type)d->device)
                           : "?";
  if (show_arg && strcmp(arg_name, "op") == 0 && d->arg >= 0 && d->arg < 4)
    snprintf(arg, sizeof arg, ", op %s", ops[d->arg]);
  else if (show_arg)
    snprintf(arg, sizeof arg, ", %s %" PRId64, arg_name, d->arg);
  snprintf(buf, n, "%s %s on %s%s", dtype, sizes, device, arg);
}

/* The same error on every rank: rank 0's description against the first that differs. */
static tg_status name_mismatch(const char *name, const tg__dist_desc *mine, const char *arg_name) {
  static tg__dist_desc first, other;
  static int64_t differ;
  first = *mine;
  tg_status st = tg__dist_broadcast_host(name, &first, (int64_t)sizeof first, 0);
  if (st != TG_OK) return st;
  differ = memcmp(&first, mine, sizeof first) != 0 ? tg_dist_rank() : INT64_MAX;
  st = tg__dist_allreduce_host(name, &differ, 1, TG_I64, TG_REDUCE_MIN);
  if (st != TG_OK) return st;
  if (differ == INT64_MAX) /* cannot be: min and max differed */
    return tg_set_error(TG_ERR_DIST, "%s: the ranks' arguments differ, but no rank sees it", name);
  other = *mine;
  st = tg__dist_broadcast_host(name, &other, (int64_t)sizeof other, (int)differ);
  if (st != TG_OK) return st;
  tg_status code = TG_ERR_SHAPE;
  const char *what = "shape";
  if (first.device != other.device)
    code = TG_ERR_DEVICE, what = "device";
  else if (first.dtype != other.dtype)
    code = TG_ERR_DTYPE, what = "dtype";
  else if (first.arg != other.arg)
    code = TG_ERR_ARGUMENT, what = arg_name;
  char a[320], b[320];
  const bool show_arg = first.arg != other.arg;
  desc_text(a, sizeof a, &first, arg_name, show_arg);
  desc_text(b, sizeof b, &other, arg_name, show_arg);
  return tg_set_error(code,
                      "%s: the ranks' tensors differ in %s: rank 0 has %s, rank %" PRId64
                      " has %s (every rank must pass the same)",
                      name, what, a, differ, b);
}

tg_status tg__dist_check_peers(const char *name, tg_status local, const tg__dist_desc *mine,
                               const char *arg_name) {
  /* (key, -key) and (field, -field) pairs: one MIN gives each one's min and max */
  static int64_t v[2 * (DESC_N + 1)];
  const int64_t *fields = (const int64_t *)mine;
  v[0] = fail_key(local);
  v[1] = -v[0];
  for (int i = 0; i < DESC_N; i++) {
    v[2 + 2 * i] = fields[i];
    v[3 + 2 * i] = -fields[i];
  }
  const tg_status st = tg__dist_allreduce_host(name, v, 2 * (DESC_N + 1), TG_I64, TG_REDUCE_MIN);
  if (st != TG_OK) return st;
  if (local != TG_OK) return local;
  if (v[0] != KEY_NONE) return peer_failed(name, v[0]);
  for (int i = 0; i < DESC_N; i++)
    if (v[2 + 2 * i] != -v[3 + 2 * i]) return name_mismatch(name, mine, arg_name);
  return TG_OK;
}
