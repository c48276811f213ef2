/* libFuzzer target: decodes the input into a sequence of view and shape ops on a small CPU
 * tensor whose element i holds the value i, and checks every result against a reference
 * computed here, independently of tg's strides: each result is a node that maps a logical
 * index to its parent's logical index (permute, slice, select, expand, reshape) or to a
 * storage position (as_strided, copies, cat), all in __int128. For each op the reference
 * also decides whether the call is valid; tg must agree, and a refused call must leave a
 * clean error (a code, a message starting with the function's name) and no leak. Elements
 * are read three ways: through tg's public geometry (bounds-checked against the storage),
 * with tg_get, and with tg_to_host_array. With grad on, sum(last result).backward() must
 * give each base element the number of times it appears.
 *
 * Input: byte 0 picks the base (element count, dtype F64/F32/I64, whether it requires
 * grad); then ops, one opcode byte and a source byte each, followed by their arguments. Integers
 * come from a table of edge values (0, +-1, 2^31, 2^32, 2^53 + 1, 2^61 + 1, INT64_MAX, INT64_MIN,
 * ...) or raw bytes. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tg/tg.h"

typedef __int128 i128;

enum { MAX_NODES = 512, MAX_POOL = 8, MAX_OPS = 24, MAX_STORAGES = MAX_OPS + 1 };
enum { FULL_CHECK = 4096, SAMPLES = 48, ARG_DIMS = 16 };
/* Far beyond any valid extent, far below __int128 overflow: spans are clamped to it. */
static const i128 HUGE_SPAN = (i128)1 << 100;

/* ---- input ---- */

typedef struct reader {
  const uint8_t *p;
  size_t n;
} reader;

static uint8_t rd_u8(reader *r) {
  if (r->n == 0) return 0;
  r->n--;
  return *r->p++;
}

static int64_t rd_i64(reader *r) {
  uint8_t k = rd_u8(r);
  switch (k % 24) {
  case 16:
    return INT64_MAX;
  case 17:
    return INT64_MIN;
  case 18:
    return ((int64_t)1 << 61) + 1;
  case 19:
    return ((int64_t)1 << 53) + 1;
  case 20:
    return (int64_t)1 << (31 + rd_u8(r) % 32); /* 2^31 .. 2^62 */
  case 21:
    return -((int64_t)1 << (rd_u8(r) % 63));
  case 22:
    return INT64_MAX - rd_u8(r) % 4;
  case 23: {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = v << 8 | rd_u8(r);
    return (int64_t)v;
  }
  default:
    return (int64_t)(k % 16) - 4; /* -4 .. 11: mostly small sizes and indices */
  }
}

static int rd_dim(reader *r) { return (int)(rd_u8(r) % 21) - 10; }

/* ---- the reference ---- */

typedef enum kind { R_STRIDED, R_PERMUTE, R_SLICE, R_SELECT, R_EXPAND, R_RESHAPE } kind;

typedef struct node {
  kind kind;
  int parent;
  int ndim;
  int64_t sizes[TG_MAX_DIMS];
  int perm[TG_MAX_DIMS]; /* R_PERMUTE: result dim d is parent dim perm[d] */
  int dim;               /* R_SLICE, R_SELECT */
  int64_t start, step;   /* R_SLICE */
  int64_t index;         /* R_SELECT */
  int storage;           /* R_STRIDED: storage[offset + sum idx * strides] */
  int extra;             /* a cat's second input (its first is parent), else -1 */
  bool sums;             /* values are sums of inputs (not base indices): no grad check */
  bool as_strided;       /* made by tg_as_strided, whose gradient (PyTorch's rule: read back
                            through its input's geometry) this reference does not model: no
                            grad check (tests/ops/test_views_grad.c gradchecks it) */
  int64_t strides[TG_MAX_DIMS], offset;
} node;

typedef struct storage {
  double *vals;
  int64_t len;
} storage;

typedef struct entry {
  tg_tensor *t;
  int node;
  int storage; /* the reference storage t's elements live in */
} entry;

static node nodes[MAX_NODES];
static int n_nodes;
static storage storages[MAX_STORAGES];
static int n_storages;
static entry pool[MAX_POOL];
static int n_pool, next_slot;
static bool grad_on;
static tg_dtype dtype; /* of every tensor in a run: F64, F32 or I64 (values are small ints) */
static bool trace;     /* FUZZ_VIEWS_TRACE=1: print each op's outcome (for reading seeds) */

#define FAIL(...)                                                                                  \
  do {                                                                                             \
    fprintf(stderr, "fuzz_views: ");                                                               \
    fprintf(stderr, __VA_ARGS__);                                                                  \
    fprintf(stderr, "\n");                                                                         \
    abort();                                                                                       \
  } while (0)

/* a * b for 0 <= a <= HUGE_SPAN, b >= 0, clamped to HUGE_SPAN (beyond any valid size). */
static i128 sat_mul(i128 a, int64_t b) {
  if (b != 0 && a > HUGE_SPAN / b) return HUGE_SPAN;
  return a * b;
}

static i128 numel_of(int ndim, const int64_t *sizes) {
  i128 n = 1;
  for (int d = 0; d < ndim; d++) n = sat_mul(n, sizes[d]);
  return n;
}

/* The product with zeros counted as 1 must fit int64 for every tensor tg makes. */
static bool extent_fits(int ndim, const int64_t *sizes) {
  i128 n = 1;
  for (int d = 0; d < ndim; d++) {
    n *= sizes[d] > 1 ? sizes[d] : 1;
    if (n > INT64_MAX) return false;
  }
  return true;
}

static double eval(int id, const int64_t *idx) {
  const node *nd = &nodes[id];
  int64_t p[TG_MAX_DIMS];
  const node *pn = nd->kind == R_STRIDED ? NULL : &nodes[nd->parent];
  switch (nd->kind) {
  case R_STRIDED: {
    i128 a = nd->offset;
    for (int d = 0; d < nd->ndim; d++) a += (i128)idx[d] * nd->strides[d];
    const storage *s = &storages[nd->storage];
    if (a < 0 || a >= s->len) FAIL("reference: as_strided address out of its own storage");
    return s->vals[(int64_t)a];
  }
  case R_PERMUTE:
    for (int d = 0; d < nd->ndim; d++) p[nd->perm[d]] = idx[d];
    break;
  case R_SLICE:
    memcpy(p, idx, sizeof(int64_t) * (size_t)nd->ndim);
    p[nd->dim] = (int64_t)((i128)nd->start + (i128)idx[nd->dim] * nd->step);
    break;
  case R_SELECT:
    for (int d = 0, k = 0; d < pn->ndim; d++) p[d] = d == nd->dim ? nd->index : idx[k++];
    break;
  case R_EXPAND: {
    int lead = nd->ndim - pn->ndim;
    for (int d = 0; d < pn->ndim; d++) p[d] = pn->sizes[d] == 1 ? 0 : idx[d + lead];
    break;
  }
  case R_RESHAPE: {
    i128 flat = 0;
    for (int d = 0; d < nd->ndim; d++) flat = flat * nd->sizes[d] + idx[d];
    for (int d = pn->ndim - 1; d >= 0; d--) {
      p[d] = (int64_t)(flat % pn->sizes[d]);
      flat /= pn->sizes[d];
    }
    break;
  }
  }
  return eval(nd->parent, p);
}

static int new_node(kind k, int parent, int ndim, const int64_t *sizes) {
  if (n_nodes == MAX_NODES) FAIL("reference: out of nodes");
  node *nd = &nodes[n_nodes];
  memset(nd, 0, sizeof *nd);
  nd->kind = k;
  nd->parent = parent;
  nd->extra = -1;
  nd->ndim = ndim;
  if (ndim > 0) memcpy(nd->sizes, sizes, sizeof(int64_t) * (size_t)ndim);
  return n_nodes++;
}

/* Row-major walk: advances idx, false after the last element. */
static bool next_index(int ndim, const int64_t *sizes, int64_t *idx) {
  for (int d = ndim - 1; d >= 0; d--) {
    if (++idx[d] < sizes[d]) return true;
    idx[d] = 0;
  }
  return false;
}

/* A copy's storage: its elements in row-major order. */
static int materialize(int id) {
  const node *nd = &nodes[id];
  int64_t n = (int64_t)numel_of(nd->ndim, nd->sizes);
  if (n_storages == MAX_STORAGES) FAIL("reference: out of storages");
  storage *s = &storages[n_storages];
  s->vals = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
  s->len = n;
  int64_t idx[TG_MAX_DIMS] = {0};
  for (int64_t i = 0; i < n; i++) {
    s->vals[i] = eval(id, idx);
    next_index(nd->ndim, nd->sizes, idx);
  }
  return n_storages++;
}

/* ---- checks ---- */

static double read_at(const void *base, int64_t i) {
  switch (dtype) {
  case TG_F32:
    return ((const float *)base)[i];
  case TG_I64:
    return (double)((const int64_t *)base)[i];
  default:
    return ((const double *)base)[i];
  }
}

static uint64_t rng_state;
static uint64_t rng(void) {
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return rng_state >> 11;
}

static void check_element(const entry *e, const int64_t *idx) {
  const tg_tensor *t = e->t;
  const int64_t *strides = tg_strides(t);
  int ndim = tg_ndim(t);
  i128 rel = 0;
  for (int d = 0; d < ndim; d++) rel += (i128)idx[d] * strides[d];
  i128 addr = rel + tg_offset(t);
  const storage *s = &storages[e->storage];
  if (addr < 0 || addr >= s->len)
    FAIL("element address %lld is outside its storage of %lld elements",
         (long long)(addr < -HUGE_SPAN  ? -HUGE_SPAN
                     : addr > HUGE_SPAN ? HUGE_SPAN
                                        : addr),
         (long long)s->len);
  double want = eval(e->node, idx);
  double got = read_at(tg_data_ptr(t), (int64_t)rel);
  if (got != want) FAIL("element holds %g, the reference says %g", got, want);
  double via_get;
  if (tg_get(t, idx, &via_get) != TG_OK || via_get != want)
    FAIL("tg_get gives %g (%s), the reference says %g", via_get, tg_last_error_message(), want);
}

static void check_entry(const entry *e) {
  const tg_tensor *t = e->t;
  const node *nd = &nodes[e->node];
  if (tg_ndim(t) != nd->ndim) FAIL("ndim %d, the reference says %d", tg_ndim(t), nd->ndim);
  for (int d = 0; d < nd->ndim; d++)
    if (tg_sizes(t)[d] != nd->sizes[d])
      FAIL("size of dim %d is %lld, the reference says %lld", d, (long long)tg_sizes(t)[d],
           (long long)nd->sizes[d]);
  i128 n = numel_of(nd->ndim, nd->sizes);
  if (tg_numel(t) != n) FAIL("tg_numel %lld, the reference says more", (long long)tg_numel(t));
  if (n == 0 && !tg_is_contiguous(t)) FAIL("an empty tensor is not contiguous");
  if (tg_is_contiguous(t)) {
    i128 expected = 1;
    for (int d = nd->ndim - 1; d >= 0 && n > 0; d--) {
      if (nd->sizes[d] == 1) continue;
      if (tg_strides(t)[d] != expected)
        FAIL("tg_is_contiguous but dim %d has stride %lld", d, (long long)tg_strides(t)[d]);
      expected *= nd->sizes[d];
    }
  }
  if (n == 0) return;
  int64_t idx[TG_MAX_DIMS] = {0};
  if (n <= FULL_CHECK) {
    double *host = malloc(sizeof(double) * (size_t)n);
    if (tg_to_host_array(t, host, tg_dtype_size(dtype) * (size_t)n) != TG_OK)
      FAIL("tg_to_host_array: %s", tg_last_error_message());
    int64_t i = 0;
    do {
      check_element(e, idx);
      double want = eval(e->node, idx), got = read_at(host, i);
      if (got != want)
        FAIL("tg_to_host_array[%lld] is %g, the reference says %g", (long long)i, got, want);
      i++;
    } while (next_index(nd->ndim, nd->sizes, idx));
    free(host);
    return;
  }
  check_element(e, idx); /* the first and the last element, then random ones */
  for (int d = 0; d < nd->ndim; d++) idx[d] = nd->sizes[d] - 1;
  check_element(e, idx);
  for (int k = 0; k < SAMPLES; k++) {
    for (int d = 0; d < nd->ndim; d++) idx[d] = (int64_t)(rng() % (uint64_t)nd->sizes[d]);
    check_element(e, idx);
  }
}

/* tg's answer against the reference's verdict. `may_refuse` allows a refusal the reference
 * does not predict (tg_view when the strides forbid a view), with that message. */
static bool agree(bool valid, bool ok, const char *fn, const char *may_refuse) {
  tg_status code = tg_last_error();
  if (trace)
    fprintf(stderr, "%s: %s%s\n", fn, ok ? "ok" : "error: ", ok ? "" : tg_last_error_message());
  if (ok) {
    if (!valid) FAIL("%s accepted a call the reference rejects", fn);
    if (code != TG_OK)
      FAIL("%s succeeded but left error %d: %s", fn, code, tg_last_error_message());
    return true;
  }
  const char *msg = tg_last_error_message();
  size_t len = strlen(fn);
  if (code == TG_OK) FAIL("%s failed without an error code", fn);
  if (!msg || strncmp(msg, fn, len) != 0 || msg[len] != ':')
    FAIL("%s failed with a message that does not start with its name: %s", fn, msg ? msg : "");
  if (valid && !(may_refuse && strstr(msg, may_refuse)))
    FAIL("%s refused a call the reference accepts: %s", fn, msg);
  tg_clear_error();
  return false;
}

static void add_entry(tg_tensor *t, int node_id, int storage_id) {
  entry e = {t, node_id, storage_id};
  if (trace) {
    char buf[256];
    fprintf(stderr, "  -> %s strides %s offset %lld\n",
            tg_format_sizes(buf, sizeof buf, tg_ndim(t), tg_sizes(t)),
            tg_format_sizes(buf + 128, 128, tg_ndim(t), tg_strides(t)), (long long)tg_offset(t));
  }
  check_entry(&e);
  if (n_pool < MAX_POOL) {
    pool[n_pool++] = e;
  } else { /* slot 0 keeps the base */
    pool[1 + next_slot % (MAX_POOL - 1)] = e;
    next_slot++;
  }
}

static bool wrap(int dim, int ndim, int *out) {
  int lo = ndim > 0 ? -ndim : -1, hi = ndim > 0 ? ndim - 1 : 0;
  if (dim < lo || dim > hi) return false;
  *out = dim < 0 ? dim + (ndim > 0 ? ndim : 1) : dim;
  return true;
}

/* ---- ops ---- */

static void op_reshape(reader *r, const entry *src, bool view) {
  const node *pn = &nodes[src->node];
  int n = rd_u8(r) % 10;
  int64_t sizes[ARG_DIMS], out[ARG_DIMS];
  for (int d = 0; d < n; d++) sizes[d] = rd_i64(r);
  i128 in_numel = numel_of(pn->ndim, pn->sizes);
  /* A reshape that must copy a huge tensor would allocate terabytes: view only then. */
  if (!view && in_numel > FULL_CHECK) view = true;
  bool valid = n <= TG_MAX_DIMS;
  int infer = -1;
  i128 known = 1;
  for (int d = 0; valid && d < n; d++) {
    out[d] = sizes[d];
    if (sizes[d] == -1) {
      valid = infer < 0;
      infer = d;
    } else if (sizes[d] < 0) {
      valid = false;
    } else {
      known = sat_mul(known, sizes[d]);
    }
  }
  if (valid && infer >= 0) {
    valid = known != 0 && in_numel % known == 0;
    if (valid) out[infer] = (int64_t)(in_numel / known), known = sat_mul(known, out[infer]);
  }
  valid = valid && known == in_numel && extent_fits(n, out);
  tg_tensor *t = view ? tg_view(src->t, n, sizes) : tg_reshape(src->t, n, sizes);
  if (!agree(valid, t != NULL, view ? "tg_view" : "tg_reshape", view ? "is not possible" : NULL))
    return;
  bool shared = tg_shares_storage(t, src->t);
  if (view && !shared) FAIL("tg_view copied");
  int id = new_node(R_RESHAPE, src->node, n, out);
  if (!shared && (tg_offset(t) != 0 || !tg_is_contiguous(t)))
    FAIL("tg_reshape copied into a non-contiguous tensor");
  add_entry(t, id, shared ? src->storage : materialize(id));
}

static void op_permute(reader *r, const entry *src, bool transpose) {
  const node *pn = &nodes[src->node];
  int perm[ARG_DIMS], n;
  bool valid = true;
  tg_tensor *t;
  if (transpose) {
    int d0 = rd_dim(r), d1 = rd_dim(r), a, b;
    valid = wrap(d0, pn->ndim, &a) && wrap(d1, pn->ndim, &b);
    n = pn->ndim;
    for (int d = 0; valid && d < n; d++) perm[d] = d == a ? b : d == b ? a : d;
    t = tg_transpose(src->t, d0, d1);
    if (!agree(valid, t != NULL, "tg_transpose", NULL)) return;
  } else {
    n = rd_u8(r) % 10;
    int dims[ARG_DIMS];
    bool seen[ARG_DIMS] = {false};
    for (int d = 0; d < n; d++) dims[d] = rd_dim(r);
    valid = n == pn->ndim;
    for (int d = 0; valid && d < n; d++) {
      valid = wrap(dims[d], n, &perm[d]) && !seen[perm[d]];
      if (valid) seen[perm[d]] = true;
    }
    t = tg_permute(src->t, n, dims);
    if (!agree(valid, t != NULL, "tg_permute", NULL)) return;
  }
  int64_t sizes[TG_MAX_DIMS];
  for (int d = 0; d < n; d++) sizes[d] = pn->sizes[perm[d]];
  int id = new_node(R_PERMUTE, src->node, n, sizes);
  memcpy(nodes[id].perm, perm, sizeof(int) * (size_t)n);
  if (!tg_shares_storage(t, src->t)) FAIL("a view copied");
  add_entry(t, id, src->storage);
}

static void add_slice(tg_tensor *t, const entry *src, int dim, int64_t start, int64_t step,
                      int64_t size) {
  const node *pn = &nodes[src->node];
  int64_t sizes[TG_MAX_DIMS];
  memcpy(sizes, pn->sizes, sizeof(int64_t) * (size_t)pn->ndim);
  sizes[dim] = size;
  int id = new_node(R_SLICE, src->node, pn->ndim, sizes);
  nodes[id].dim = dim;
  nodes[id].start = start;
  nodes[id].step = step;
  if (!tg_shares_storage(t, src->t)) FAIL("a view copied");
  add_entry(t, id, src->storage);
}

static void op_narrow(reader *r, const entry *src) {
  const node *pn = &nodes[src->node];
  int dim = rd_dim(r), d = 0;
  int64_t start = rd_i64(r), length = rd_i64(r);
  bool valid = pn->ndim > 0 && wrap(dim, pn->ndim, &d);
  i128 s = start, n = valid ? pn->sizes[d] : 0;
  if (s < 0 && s >= -n) s += n;
  valid = valid && s >= 0 && length >= 0 && s <= n && length <= n - s;
  tg_tensor *t = tg_narrow(src->t, dim, start, length);
  if (agree(valid, t != NULL, "tg_narrow", NULL)) add_slice(t, src, d, (int64_t)s, 1, length);
}

static void op_slice(reader *r, const entry *src) {
  const node *pn = &nodes[src->node];
  int dim = rd_dim(r), d = 0;
  int64_t start = rd_i64(r), end = rd_i64(r), step = rd_i64(r);
  bool valid = pn->ndim > 0 && wrap(dim, pn->ndim, &d) && step > 0;
  i128 n = valid ? pn->sizes[d] : 0, s = start, e = end;
  if (s < 0) s += n;
  if (e < 0) e += n;
  s = s < 0 ? 0 : s > n ? n : s;
  e = e < s ? s : e > n ? n : e;
  i128 size = e > s ? (e - s + step - 1) / step : 0;
  tg_tensor *t = tg_slice(src->t, dim, start, end, step);
  if (agree(valid, t != NULL, "tg_slice", NULL))
    add_slice(t, src, d, (int64_t)s, step, (int64_t)size);
}

static void op_select(reader *r, const entry *src) {
  const node *pn = &nodes[src->node];
  int dim = rd_dim(r), d = 0;
  int64_t index = rd_i64(r);
  bool valid = pn->ndim > 0 && wrap(dim, pn->ndim, &d);
  i128 n = valid ? pn->sizes[d] : 0, i = index;
  valid = valid && i >= -n && i < n;
  if (i < 0) i += n;
  tg_tensor *t = tg_select(src->t, dim, index);
  if (!agree(valid, t != NULL, "tg_select", NULL)) return;
  int64_t sizes[TG_MAX_DIMS];
  for (int k = 0, m = 0; k < pn->ndim; k++)
    if (k != d) sizes[m++] = pn->sizes[k];
  int id = new_node(R_SELECT, src->node, pn->ndim - 1, sizes);
  nodes[id].dim = d;
  nodes[id].index = (int64_t)i;
  if (!tg_shares_storage(t, src->t)) FAIL("a view copied");
  add_entry(t, id, src->storage);
}

static void op_expand(reader *r, const entry *src) {
  const node *pn = &nodes[src->node];
  int n = rd_u8(r) % 10;
  int64_t sizes[ARG_DIMS], out[ARG_DIMS];
  for (int d = 0; d < n; d++) sizes[d] = rd_i64(r);
  bool valid = n >= pn->ndim && n <= TG_MAX_DIMS;
  int lead = n - pn->ndim;
  for (int d = 0; valid && d < n; d++) {
    int64_t want = sizes[d];
    int s = d - lead;
    if (want == -1) {
      valid = s >= 0;
      if (valid) want = pn->sizes[s];
    }
    valid = valid && want >= 0 && (s < 0 || pn->sizes[s] == 1 || pn->sizes[s] == want);
    out[d] = want;
  }
  valid = valid && extent_fits(n, out);
  tg_tensor *t = tg_expand(src->t, n, sizes);
  if (!agree(valid, t != NULL, "tg_expand", NULL)) return;
  int id = new_node(R_EXPAND, src->node, n, out);
  if (!tg_shares_storage(t, src->t)) FAIL("a view copied");
  add_entry(t, id, src->storage);
}

static void op_squeeze(reader *r, const entry *src, int which) {
  const node *pn = &nodes[src->node];
  int64_t sizes[ARG_DIMS];
  int n = 0, dim = which == 2 ? 0 : rd_dim(r), d = -1;
  bool valid = true;
  tg_tensor *t;
  const char *fn;
  if (which == 0) { /* squeeze(dim) */
    valid = wrap(dim, pn->ndim, &d);
    for (int k = 0; valid && k < pn->ndim; k++)
      if (k != d || pn->sizes[k] != 1) sizes[n++] = pn->sizes[k];
    t = tg_squeeze(src->t, dim);
    fn = "tg_squeeze";
  } else if (which == 1) { /* unsqueeze(dim) */
    valid = pn->ndim < TG_MAX_DIMS && wrap(dim, pn->ndim + 1, &d);
    for (int k = 0, m = 0; valid && k <= pn->ndim; k++) sizes[n++] = k == d ? 1 : pn->sizes[m++];
    t = tg_unsqueeze(src->t, dim);
    fn = "tg_unsqueeze";
  } else {
    for (int k = 0; k < pn->ndim; k++)
      if (pn->sizes[k] != 1) sizes[n++] = pn->sizes[k];
    t = tg_squeeze_all(src->t);
    fn = "tg_squeeze_all";
  }
  if (!agree(valid, t != NULL, fn, NULL)) return;
  int id = new_node(R_RESHAPE, src->node, n, sizes);
  if (!tg_shares_storage(t, src->t)) FAIL("a view copied");
  add_entry(t, id, src->storage);
}

static void op_as_strided(reader *r, const entry *src) {
  int n = rd_u8(r) % 10;
  int64_t sizes[ARG_DIMS], strides[ARG_DIMS], offset;
  for (int d = 0; d < n; d++) sizes[d] = rd_i64(r);
  for (int d = 0; d < n; d++) strides[d] = rd_i64(r);
  offset = rd_i64(r);
  const storage *s = &storages[src->storage];
  /* Recorded (grad on), its parameters hold 7 dims at most: more is TG_ERR_UNSUPPORTED. */
  bool valid = n <= (grad_on ? 7 : TG_MAX_DIMS), empty = false;
  for (int d = 0; valid && d < n; d++) {
    valid = sizes[d] >= 0;
    empty |= sizes[d] == 0;
  }
  valid = valid && extent_fits(n, sizes) && offset >= 0 && offset <= s->len;
  if (valid && !empty) {
    i128 lo = offset, hi = offset;
    for (int d = 0; d < n; d++) {
      i128 span = (i128)(sizes[d] - 1) * strides[d];
      if (span < 0)
        lo = lo + span < -HUGE_SPAN ? -HUGE_SPAN : lo + span;
      else
        hi = hi + span > HUGE_SPAN ? HUGE_SPAN : hi + span;
    }
    valid = lo >= 0 && hi < s->len;
  }
  tg_tensor *t = tg_as_strided(src->t, n, sizes, strides, offset);
  if (!agree(valid, t != NULL, "tg_as_strided", NULL)) return;
  int id = new_node(R_STRIDED, -1, n, sizes);
  nodes[id].storage = src->storage;
  nodes[id].as_strided = true;
  memcpy(nodes[id].strides, strides, sizeof(int64_t) * (size_t)n);
  nodes[id].offset = offset;
  if (!tg_shares_storage(t, src->t)) FAIL("tg_as_strided copied");
  add_entry(t, id, src->storage);
}

static void op_copy(const entry *src, bool clone) {
  const node *pn = &nodes[src->node];
  if (numel_of(pn->ndim, pn->sizes) > FULL_CHECK) return; /* would allocate too much */
  tg_tensor *t = clone ? tg_clone(src->t) : tg_contiguous(src->t);
  if (!agree(true, t != NULL, clone ? "tg_clone" : "tg_contiguous", NULL)) return;
  bool shared = tg_shares_storage(t, src->t);
  if (shared && (clone || !tg_is_contiguous(src->t))) FAIL("a copy shares its input's storage");
  if (!tg_is_contiguous(t)) FAIL("a copy is not contiguous");
  if (!shared && tg_offset(t) != 0) FAIL("a copy has offset %lld", (long long)tg_offset(t));
  int id = new_node(R_RESHAPE, src->node, pn->ndim, pn->sizes);
  add_entry(t, id, shared ? src->storage : materialize(id));
}

static void op_flatten(const entry *src) {
  const node *pn = &nodes[src->node];
  i128 n = numel_of(pn->ndim, pn->sizes);
  if (n > FULL_CHECK) return; /* may copy */
  tg_tensor *t = tg_flatten(src->t);
  if (!agree(true, t != NULL, "tg_flatten", NULL)) return;
  int64_t size = (int64_t)n;
  int id = new_node(R_RESHAPE, src->node, 1, &size);
  bool shared = tg_shares_storage(t, src->t);
  add_entry(t, id, shared ? src->storage : materialize(id));
}

static void op_t(const entry *src) {
  const node *pn = &nodes[src->node];
  bool valid = pn->ndim <= 2;
  tg_tensor *t = tg_t(src->t);
  if (!agree(valid, t != NULL, "tg_t", NULL)) return;
  int64_t sizes[TG_MAX_DIMS];
  int perm[TG_MAX_DIMS];
  for (int d = 0; d < pn->ndim; d++) perm[d] = pn->ndim == 2 ? 1 - d : d;
  for (int d = 0; d < pn->ndim; d++) sizes[d] = pn->sizes[perm[d]];
  int id = new_node(R_PERMUTE, src->node, pn->ndim, sizes);
  memcpy(nodes[id].perm, perm, sizeof perm);
  add_entry(t, id, src->storage);
}

static void op_split(reader *r, const entry *src, bool chunk) {
  const node *pn = &nodes[src->node];
  int chunks = (int)(rd_u8(r) % 12) - 1, max_out = rd_u8(r) % 9, dim = rd_dim(r), d = 0;
  int64_t split_size = chunk ? 0 : rd_i64(r);
  tg_tensor *out[16];
  int n_out = -1;
  bool valid = pn->ndim > 0 && wrap(dim, pn->ndim, &d);
  i128 n = valid ? pn->sizes[d] : 0, piece = 0, count = 0;
  /* As torch: split_size 0 splits only an empty dim; an empty dim gives `chunks` empty chunks
   * but one empty split. */
  valid = valid && (chunk ? chunks > 0 : split_size > 0 || (split_size == 0 && n == 0));
  if (valid) {
    piece = chunk ? (n == 0 ? 0 : (n + chunks - 1) / chunks) : split_size;
    count = n == 0 ? (chunk ? chunks : 1) : (n + piece - 1) / piece;
    valid = count <= (chunk ? chunks : max_out);
  }
  tg_status st = chunk ? tg_chunk(src->t, chunks, dim, out, &n_out)
                       : tg_split(src->t, split_size, dim, out, max_out, &n_out);
  if (!agree(valid, st == TG_OK, chunk ? "tg_chunk" : "tg_split", NULL)) {
    if (n_out != 0) FAIL("a failed split reports %d pieces", n_out);
    return;
  }
  if (n_out != count) FAIL("%d pieces, the reference says %lld", n_out, (long long)count);
  for (int k = 0; k < n_out; k++) {
    i128 start = (i128)k * piece, len = n - start < piece ? n - start : piece;
    add_slice(out[k], src, d, (int64_t)start, 1, (int64_t)len);
  }
}

/* Copies a tensor onto itself: every element gets its own value, so the reference holds
 * whatever tg decides (overlapping targets are refused); exercises the overlap check and the
 * copy kernels on any geometry. */
static void op_copy_self(const entry *src) {
  const node *pn = &nodes[src->node];
  /* With grad on, a recorded copy_ (or any in-place write) makes every view taken before it
   * unusable while recording ("take the view again": tg does not rebuild a view's history,
   * docs/conventions.md), which this reference does not model; test_inplace covers it. */
  if (grad_on || numel_of(pn->ndim, pn->sizes) > FULL_CHECK) return;
  tg_status st = tg_copy_(src->t, src->t);
  /* Validity is tg's call (its overlap test is conservative); the error must be clean. */
  agree(st == TG_OK, st == TG_OK, "tg_copy_", NULL);
  check_entry(src);
}

/* cat of two entries: a new contiguous tensor whose values the reference takes from either
 * input by index. */
static void op_cat(reader *r, const entry *a) {
  const entry b = pool[rd_u8(r) % n_pool];
  const node *na = &nodes[a->node], *nb = &nodes[b.node];
  int dim = rd_dim(r), d = 0;
  bool valid = na->ndim > 0 && na->ndim == nb->ndim && wrap(dim, na->ndim, &d);
  int64_t sizes[TG_MAX_DIMS];
  for (int k = 0; valid && k < na->ndim; k++) {
    valid = k == d || na->sizes[k] == nb->sizes[k];
    sizes[k] = na->sizes[k];
  }
  if (valid) {
    i128 joined = (i128)na->sizes[d] + nb->sizes[d];
    valid = joined <= INT64_MAX;
    sizes[d] = valid ? (int64_t)joined : 0;
    valid = valid && extent_fits(na->ndim, sizes);
  }
  if (valid && numel_of(na->ndim, sizes) > FULL_CHECK) return; /* would allocate too much */
  tg_tensor *t = tg_cat(2, (const tg_tensor *[]){a->t, b.t}, dim);
  if (!agree(valid, t != NULL, "tg_cat", NULL)) return;
  if (!tg_is_contiguous(t) || tg_offset(t) != 0) FAIL("tg_cat made a non-contiguous tensor");
  int64_t n = (int64_t)numel_of(na->ndim, sizes);
  if (n_storages == MAX_STORAGES) FAIL("reference: out of storages");
  storage *st = &storages[n_storages];
  st->vals = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
  st->len = n;
  int64_t idx[TG_MAX_DIMS] = {0}, other[TG_MAX_DIMS];
  for (int64_t i = 0; i < n; i++) {
    bool first = idx[d] < na->sizes[d];
    memcpy(other, idx, sizeof idx);
    if (!first) other[d] -= na->sizes[d];
    st->vals[i] = eval(first ? a->node : b.node, other);
    next_index(na->ndim, sizes, idx);
  }
  int id = new_node(R_STRIDED, a->node, na->ndim, sizes);
  nodes[id].extra = b.node;
  nodes[id].storage = n_storages++;
  int64_t stride = 1; /* contiguous strides; the extent of a valid result fits int64 */
  for (int k = na->ndim - 1; k >= 0; k--) {
    nodes[id].strides[k] = stride;
    stride *= sizes[k] > 1 ? sizes[k] : 1;
  }
  add_entry(t, id, nodes[id].storage);
}

static bool has_sums(int id) {
  return id >= 0 && (nodes[id].sums || has_sums(nodes[id].parent) || has_sums(nodes[id].extra));
}

static bool has_as_strided(int id) {
  return id >= 0 && (nodes[id].as_strided || has_as_strided(nodes[id].parent) ||
                     has_as_strided(nodes[id].extra));
}

/* sum_dim: a new tensor; the reference adds the input's values along the dim. Sums of sums
 * are left out: their values could pass 2^24 (F32) where the order of additions matters. */
static void op_sum_dim(reader *r, const entry *src) {
  const node *pn = &nodes[src->node];
  int dim = rd_dim(r), d = 0;
  bool keepdim = rd_u8(r) & 1;
  if (pn->ndim == 0 || has_sums(src->node)) return;
  bool valid = wrap(dim, pn->ndim, &d); /* every dtype: I64 sums to I64 (docs/dtypes.md) */
  int64_t sizes[TG_MAX_DIMS], keep[TG_MAX_DIMS];
  int n = 0;
  for (int k = 0; k < pn->ndim; k++) {
    keep[k] = k == d ? 1 : pn->sizes[k];
    if (k != d || keepdim) sizes[n++] = keep[k];
  }
  if (valid &&
      (numel_of(n, sizes) > FULL_CHECK || numel_of(pn->ndim, pn->sizes) > (i128)64 * FULL_CHECK))
    return; /* too slow or too big */
  tg_tensor *t = tg_sum_dim(src->t, dim, keepdim);
  if (!agree(valid, t != NULL, "tg_sum_dim", NULL)) return;
  if (!tg_is_contiguous(t) || tg_offset(t) != 0) FAIL("tg_sum_dim made a non-contiguous tensor");
  int64_t count = (int64_t)numel_of(n, sizes);
  if (n_storages == MAX_STORAGES) FAIL("reference: out of storages");
  storage *st = &storages[n_storages];
  st->vals = malloc(sizeof(double) * (size_t)(count > 0 ? count : 1));
  st->len = count;
  int64_t idx[TG_MAX_DIMS] = {0};
  for (int64_t i = 0; i < count; i++) {
    double acc = 0;
    for (int64_t k = 0; k < pn->sizes[d]; k++) {
      idx[d] = k;
      acc += eval(src->node, idx);
    }
    idx[d] = 0;
    st->vals[i] = acc;
    next_index(pn->ndim, keep, idx);
  }
  int id = new_node(R_STRIDED, src->node, n, sizes);
  nodes[id].sums = true;
  nodes[id].storage = n_storages++;
  int64_t stride = 1; /* contiguous strides; the extent of a valid result fits int64 */
  for (int k = n - 1; k >= 0; k--) {
    nodes[id].strides[k] = stride;
    stride *= sizes[k] > 1 ? sizes[k] : 1;
  }
  add_entry(t, id, nodes[id].storage);
}

/* The largest tensor on the way from node id back to the base (what backward materializes). */
static i128 largest_on_path(int id) {
  if (id < 0) return 0;
  i128 n = numel_of(nodes[id].ndim, nodes[id].sizes), p = largest_on_path(nodes[id].parent),
       e = largest_on_path(nodes[id].extra);
  return n > p ? (n > e ? n : e) : (p > e ? p : e);
}

/* With grad on: sum(final).backward() gives base element i the number of elements of final
 * that hold i (every value is the base index it came from). */
static void check_grad(const entry *e, const entry *base) {
  const node *nd = &nodes[e->node];
  i128 n = numel_of(nd->ndim, nd->sizes);
  if (n == 0) return;
  /* Backward materializes gradients of every tensor on the way: keep them small. */
  if (largest_on_path(e->node) > FULL_CHECK || has_sums(e->node) || has_as_strided(e->node)) return;
  tg_tensor *s = tg_sum(e->t);
  if (!s || tg_backward(s, NULL) != TG_OK) FAIL("sum/backward: %s", tg_last_error_message());
  int64_t len = storages[0].len;
  double *want = calloc((size_t)len + 1, sizeof(double));
  double *got = calloc((size_t)len + 1, sizeof(double));
  int64_t idx[TG_MAX_DIMS] = {0};
  do want[(int64_t)eval(e->node, idx)] += 1;
  while (next_index(nd->ndim, nd->sizes, idx));
  const tg_tensor *g = tg_grad(base->t);
  double *raw = calloc((size_t)len + 1, sizeof(double));
  if (!g || tg_to_host_array(g, raw, tg_dtype_size(dtype) * (size_t)len) != TG_OK)
    FAIL("no gradient reached the base: %s", tg_last_error_message());
  for (int64_t i = 0; i < len; i++)
    if ((got[i] = read_at(raw, i)) != want[i])
      FAIL("gradient of base element %lld is %g, the reference says %g", (long long)i, got[i],
           want[i]);
  free(want);
  free(got);
  free(raw);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  reader r = {data, size};
  trace = getenv("FUZZ_VIEWS_TRACE") != NULL;
  if (tg_live_objects() != 0)
    FAIL("%lld objects alive before the run", (long long)tg_live_objects());
  tg_clear_error();
  n_nodes = n_storages = n_pool = next_slot = 0;
  rng_state = size;
  for (size_t i = 0; i < size; i++) rng_state = rng_state * 31 + data[i];

  uint8_t head = rd_u8(&r);
  int64_t base_len = head % 49;
  grad_on = head >= 200;
  static const tg_dtype dtypes[3] = {TG_F64, TG_F32, TG_I64};
  dtype = grad_on ? (head < 228 ? TG_F64 : TG_F32) : dtypes[head / 49 % 3];
  tg_scope sc = tg_scope_begin();
  storage *s0 = &storages[n_storages++];
  s0->len = base_len;
  s0->vals = malloc(sizeof(double) * (size_t)(base_len > 0 ? base_len : 1));
  for (int64_t i = 0; i < base_len; i++) s0->vals[i] = (double)i;
  double f64[49];
  float f32[49];
  int64_t i64[49];
  for (int64_t i = 0; i < base_len; i++) f64[i] = (double)(f32[i] = (float)(i64[i] = i));
  const void *init = dtype == TG_F32   ? (const void *)f32
                     : dtype == TG_I64 ? (const void *)i64
                                       : f64;
  tg_tensor *base =
      tg_from_data(1, &base_len, init, (tg_options){.dtype = dtype, .requires_grad = grad_on});
  if (!base) FAIL("tg_from_data: %s", tg_last_error_message());
  int base_node = new_node(R_STRIDED, -1, 1, &base_len);
  nodes[base_node].strides[0] = 1;
  add_entry(base, base_node, 0);

  for (int op = 0; op < MAX_OPS && r.n > 0; op++) {
    uint8_t code = rd_u8(&r);
    const entry src = pool[rd_u8(&r) % n_pool];
    switch (code % 21) {
    case 0:
      op_reshape(&r, &src, true);
      break;
    case 1:
      op_reshape(&r, &src, false);
      break;
    case 2:
      op_permute(&r, &src, true);
      break;
    case 3:
      op_permute(&r, &src, false);
      break;
    case 4:
      op_narrow(&r, &src);
      break;
    case 5:
      op_slice(&r, &src);
      break;
    case 6:
      op_select(&r, &src);
      break;
    case 7:
      op_expand(&r, &src);
      break;
    case 8:
      op_squeeze(&r, &src, 0);
      break;
    case 9:
      op_squeeze(&r, &src, 1);
      break;
    case 10:
      op_squeeze(&r, &src, 2);
      break;
    case 11:
      op_as_strided(&r, &src);
      break;
    case 12:
      op_copy(&src, false);
      break;
    case 13:
      op_copy(&src, true);
      break;
    case 14:
      op_split(&r, &src, true);
      break;
    case 15:
      op_split(&r, &src, false);
      break;
    case 16:
      op_flatten(&src);
      break;
    case 17:
      op_t(&src);
      break;
    case 18:
      op_copy_self(&src);
      break;
    case 19:
      op_cat(&r, &src);
      break;
    case 20:
      op_sum_dim(&r, &src);
      break;
    default:
      op_slice(&r, &src);
      break;
    }
  }
  if (grad_on) check_grad(&pool[n_pool - 1], &pool[0]);
  tg_scope_end(sc);
  if (tg_live_objects() != 0) FAIL("%lld objects leaked", (long long)tg_live_objects());
  if (tg_last_error() != TG_OK) FAIL("an error is pending: %s", tg_last_error_message());
  for (int i = 0; i < n_storages; i++) free(storages[i].vals);
  return 0;
}
