/* The DDP's buckets: which parameters share a flat buffer, the buffers and the views into
 * them, and the check that every rank laid them out alike. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "distributed/comm.h"
#include "distributed/ddp_internal.h"
#include "tensor/fnv1a.h"
#include "tensor/host_memory.h"

/* Whether parameter p may join bucket b (same dtype and device). */
static bool same_kind(const ddp_bucket *b, const tg_tensor *p) {
  return b->dtype == tg_tensor_dtype(p) && tg_device_equal(b->device, tg_tensor_device(p));
}

/* Assigns the parameters, taken in reverse module order, to buckets: each (dtype, device)
 * has one open bucket, closed when the next parameter would take it past cap (a parameter
 * larger than cap gets a bucket of its own). Buckets are numbered as they open, so bucket
 * order follows the order backward tends to finish the parameters. rev[i] gets the i-th
 * parameter of that order, bucket_of[i] its bucket. */
static void assign(tg_ddp *ddp, tg_tensor **rev, int n, size_t cap, int *bucket_of, int *open) {
  int n_open = 0;
  for (int i = 0; i < n; i++) {
    tg_tensor *p = rev[i];
    size_t bytes = (size_t)tg_numel(p) * tg_dtype_size(tg_tensor_dtype(p));
    int k = 0;
    while (k < n_open && !same_kind(&ddp->buckets[open[k]], p)) k++;
    size_t used = k < n_open ? ddp->buckets[open[k]].bytes : 0;
    if (k < n_open && used > 0 && (used >= cap || bytes > cap - used)) {
      open[k] = open[--n_open]; /* full: closed (the last open bucket takes its slot) */
      k = n_open;               /* and p opens a new one */
    }
    if (k == n_open) {
      ddp_bucket *b = &ddp->buckets[ddp->n_buckets];
      b->dtype = tg_tensor_dtype(p);
      b->device = tg_tensor_device(p);
      open[n_open++] = ddp->n_buckets++;
      k = n_open - 1;
    }
    ddp_bucket *b = &ddp->buckets[open[k]];
    b->bytes += bytes;
    b->numel += tg_numel(p);
    b->count++;
    bucket_of[i] = open[k];
  }
}

/* The flat buffer of bucket b and a view into it per parameter (references of ours). */
static tg_status make_buffers(tg_ddp *ddp, int b) {
  ddp_bucket *bk = &ddp->buckets[b];
  tg_options opts = {.dtype = bk->dtype, .device = bk->device};
  tg_scope s = tg_scope_begin();
  tg_tensor *flat = tg_zeros(TG_SHAPE(bk->numel), opts);
  bk->flat = flat ? tg_retain(flat) : NULL;
  int64_t offset = 0;
  for (int i = bk->first; bk->flat && i < bk->first + bk->count; i++) {
    ddp_param *dp = &ddp->params[i];
    int ndim = tg_ndim(dp->param);
    int64_t strides[TG_MAX_DIMS];
    int64_t step = 1;
    for (int d = ndim - 1; d >= 0; d--) {
      strides[d] = step;
      step *= tg_size(dp->param, d);
    }
    tg_tensor *view = tg_as_strided(bk->flat, ndim, tg_sizes(dp->param), strides, offset);
    if (!view) break;
    dp->view = tg_retain(view);
    offset += tg_numel(dp->param);
  }
  tg_scope_end(s);
  for (int i = bk->first; i < bk->first + bk->count; i++)
    if (!ddp->params[i].view) return tg_last_error() ? tg_last_error() : TG_ERR_MEMORY;
  return TG_OK;
}

tg_status tg__ddp_layout(tg_ddp *ddp, tg_module *m, size_t cap) {
  int n_all = tg_module_num_parameters(m);
  tg_tensor **rev = tg__host_calloc((size_t)n_all, sizeof *rev);
  int *bucket_of = tg__host_calloc((size_t)n_all, sizeof *bucket_of);
  int *open = tg__host_calloc((size_t)n_all, sizeof *open);
  int *fill = tg__host_calloc((size_t)n_all, sizeof *fill);
  ddp->buckets = tg__host_calloc((size_t)n_all, sizeof *ddp->buckets);
  ddp->params = tg__host_calloc((size_t)n_all, sizeof *ddp->params);
  tg_status st = TG_OK;
  if (!rev || !bucket_of || !open || !fill || !ddp->buckets || !ddp->params) {
    st = tg_set_error(TG_ERR_MEMORY, "tg_ddp_new: out of memory laying out %d parameters", n_all);
    goto done;
  }
  int n = 0;
  for (int i = n_all - 1; i >= 0; i--) {
    tg_tensor *p = tg_module_parameter(m, i, NULL);
    if (!p || !tg_requires_grad(p)) continue; /* frozen parameters get no gradient */
    int seen = 0;
    while (seen < n && rev[seen] != p) seen++;
    if (seen == n) rev[n++] = p; /* a tensor registered twice (tied weights) has one slot */
  }
  assign(ddp, rev, n, cap, bucket_of, open);
  for (int b = 1; b < ddp->n_buckets; b++)
    ddp->buckets[b].first = ddp->buckets[b - 1].first + ddp->buckets[b - 1].count;
  for (int i = 0; i < n; i++) {
    ddp_param *dp = &ddp->params[ddp->buckets[bucket_of[i]].first + fill[bucket_of[i]]++];
    dp->ddp = ddp;
    dp->param = tg_retain(rev[i]);
    dp->bucket = bucket_of[i];
    dp->hook = -1;
  }
  ddp->n_params = n;
  for (int b = 0; b < ddp->n_buckets && st == TG_OK; b++) {
    st = make_buffers(ddp, b);
    if (ddp->buckets[b].bytes > ddp->stats.bucket_bytes_max)
      ddp->stats.bucket_bytes_max = ddp->buckets[b].bytes;
  }
  ddp->stats.n_buckets = ddp->n_buckets;
done:
  tg__host_free(rev);
  tg__host_free(bucket_of);
  tg__host_free(open);
  tg__host_free(fill);
  return st;
}

/* FNV-1a over the layout: each bucket's dtype, device, count and its parameters' sizes. */
static uint64_t layout_hash(const tg_ddp *ddp) {
  uint64_t h = TG_FNV1A_START;
  for (int b = 0; b < ddp->n_buckets; b++) {
    const ddp_bucket *bk = &ddp->buckets[b];
    const int64_t head[3] = {bk->dtype, bk->device.type, bk->count};
    h = tg__fnv1a(h, head, sizeof head);
    for (int i = bk->first; i < bk->first + bk->count; i++) {
      const int64_t numel = tg_numel(ddp->params[i].param);
      h = tg__fnv1a(h, &numel, sizeof numel);
    }
  }
  return h >> 2; /* fits an int64 whose negation does too */
}

enum {
  AGREE_FAILED, /* tg__ddp_failure_key */
  AGREE_PARAMS,
  AGREE_BUCKETS,
  AGREE_NUMEL,
  AGREE_HASH,
  AGREE_N
};

tg_status tg__ddp_agree(const tg_ddp *ddp, tg_status local) {
  int64_t mine[AGREE_N] = {0};
  mine[AGREE_FAILED] = tg__ddp_failure_key(local);
  if (local == TG_OK) {
    int64_t numel = 0;
    for (int b = 0; b < ddp->n_buckets; b++) numel += ddp->buckets[b].numel;
    mine[AGREE_PARAMS] = ddp->n_params;
    mine[AGREE_BUCKETS] = ddp->n_buckets;
    mine[AGREE_NUMEL] = numel;
    mine[AGREE_HASH] = (int64_t)layout_hash(ddp);
  }
  /* max(v) and -max(-v) in one all-reduce: the largest and smallest value over the ranks.
   * Static, not on the stack: a collective that times out may still write its buffer after
   * we return (comm.h). One thread calls tg_dist (tg/dist.h). */
  static int64_t both[2 * AGREE_N];
  for (int k = 0; k < AGREE_N; k++) {
    both[k] = mine[k];
    both[AGREE_N + k] = -mine[k];
  }
  tg_status st = tg__dist_allreduce_host("tg_ddp_new", both, 2 * AGREE_N, TG_I64, TG_REDUCE_MAX);
  if (st != TG_OK) return st;
  if (local != TG_OK) return local; /* its message is still the one pending */
  if (both[AGREE_FAILED] > 0) {
    tg_status theirs = tg__ddp_failed_status(both[AGREE_FAILED]);
    return tg_set_error(theirs, "tg_ddp_new: rank %d failed (%s; its own error says why)",
                        tg__ddp_failed_rank(both[AGREE_FAILED]), tg_status_name(theirs));
  }
  for (int k = AGREE_PARAMS; k < AGREE_N; k++)
    if (both[k] != -both[AGREE_N + k])
      return tg_set_error(
          TG_ERR_ARGUMENT,
          "tg_ddp_new: the ranks' gradient buckets differ (which parameters require grad, or "
          "their sizes): here %d parameters, %d buckets, %" PRId64 " elements; across ranks "
          "%" PRId64 "..%" PRId64 " parameters, %" PRId64 "..%" PRId64 " buckets, %" PRId64
          "..%" PRId64 " elements",
          ddp->n_params, ddp->n_buckets, mine[AGREE_NUMEL], -both[AGREE_N + AGREE_PARAMS],
          both[AGREE_PARAMS], -both[AGREE_N + AGREE_BUCKETS], both[AGREE_BUCKETS],
          -both[AGREE_N + AGREE_NUMEL], both[AGREE_NUMEL]);
  return TG_OK;
}

void tg__ddp_release_layout(tg_ddp *ddp) {
  /* After a failed collective MPI may still write a flat buffer: it stays allocated. */
  bool keep = tg__dist_failed();
  for (int i = 0; i < ddp->n_params; i++) {
    tg_release(ddp->params[i].param);
    tg_release(ddp->params[i].view);
  }
  for (int b = 0; b < ddp->n_buckets; b++)
    if (!keep) tg_release(ddp->buckets[b].flat);
  tg__host_free(ddp->params);
  tg__host_free(ddp->buckets);
  ddp->params = NULL;
  ddp->buckets = NULL;
  ddp->n_params = ddp->n_buckets = 0;
}
