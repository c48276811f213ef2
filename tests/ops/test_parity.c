/* The op-by-op comparison with PyTorch: replays tests/parity/refs.txt (PyTorch's outputs and
 * gradients, written by tests/parity/gen_refs.py) against tg, without torch. Exact ops must
 * agree bitwise, the others within the case's ULPs (and, for sums, a slack scaled to their
 * terms); NaN matches NaN, and the sign of zeros and infinities must match (gradients:
 * see values_agree). A case where
 * PyTorch raised must fail in tg too. Disagreements listed in
 * tests/parity/known_differences.txt are reported but pass; an entry that no longer matches
 * any disagreement fails the test, so the list stays honest. tests/parity/README.md says
 * more. TG_PARITY_VERBOSE=1 prints the known differences as well, TG_PARITY_ALL_ELEMENTS=1
 * every disagreeing element; TG_PARITY_ONLY=<glob> runs the matching cases alone (and skips
 * the stale-entry check). */
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parity/parity.h"
#include "testutil.h"

#ifndef TG_PARITY_DIR
#error "TG_PARITY_DIR must name tests/parity"
#endif

#define MAX_KNOWN 256
#define MAX_OPS 256

typedef struct known_entry {
  char pattern[160], cls[64], reason[256];
  int hits;
} known_entry;

typedef struct op_stats {
  const char *op;
  int passed, known, failed;
} op_stats;

static known_entry known[MAX_KNOWN];
static int n_known;

static bool load_known(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return false;
  char line[600];
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '#' || line[0] == '\n') continue;
    known_entry *k = &known[n_known];
    int used = 0;
    if (n_known == MAX_KNOWN || sscanf(line, "%159s %63s %n", k->pattern, k->cls, &used) < 2 ||
        (strcmp(k->cls, "convention") && strncmp(k->cls, "bug:", 4))) {
      fprintf(stderr,
              "parity: known_differences.txt: want '<glob> convention|bug:<item> "
              "<reason>' (at most %d entries): %s",
              MAX_KNOWN, line);
      fclose(f);
      return false;
    }
    snprintf(k->reason, sizeof k->reason, "%s", line + used);
    k->reason[strcspn(k->reason, "\n")] = '\0';
    k->hits = 0;
    n_known++;
  }
  fclose(f);
  return true;
}

static known_entry *known_for(const char *id) {
  for (int k = 0; k < n_known; k++)
    if (fnmatch(known[k].pattern, id, 0) == 0) return &known[k];
  return NULL;
}

/* ---- building inputs in their layouts ---- */

static tg_tensor *contiguous_of(const pt_tensor *x) {
  size_t n = x->numel > 0 ? (size_t)x->numel : 1;
  void *data = x->dtype == TG_I64 ? (void *)x->i : (void *)x->f;
  float *f32 = NULL;
  if (x->dtype == TG_F32) {
    f32 = calloc(n, sizeof(float));
    if (!f32) return NULL;
    for (int64_t k = 0; k < x->numel; k++) f32[k] = (float)x->f[k];
    data = f32;
  }
  tg_tensor *t = tg_from_data(x->ndim, x->sizes, data, TG_OPTS(.dtype = x->dtype));
  free(f32);
  return t;
}

static tg_tensor *build_input(const pt_tensor *x) {
  tg_tensor *full = contiguous_of(x), *t = NULL;
  const char *lay = x->layout;
  if (!full) return NULL;
  if (!strcmp(lay, "c")) {
    t = full;
  } else if (!strcmp(lay, "t")) {
    t = tg_transpose(tg_contiguous(tg_transpose(full, -2, -1)), -2, -1);
  } else if (!strcmp(lay, "s")) {
    int64_t sizes[TG_MAX_DIMS];
    memcpy(sizes, x->sizes, sizeof sizes);
    sizes[x->ndim - 1] *= 2;
    tg_tensor *base = tg_full(x->ndim, sizes, 777.0, TG_OPTS(.dtype = x->dtype));
    t = tg_slice(base, -1, 0, sizes[x->ndim - 1], 2);
    if (t && tg_copy_(t, full) != TG_OK) t = NULL;
  } else if (lay[0] == 'e') {
    int d = atoi(lay + 1);
    t = tg_expand(tg_contiguous(tg_narrow(full, d, 0, 1)), x->ndim, x->sizes);
  }
  if (t && x->rg && tg_set_requires_grad(t, true) != TG_OK) return NULL;
  return t;
}

/* An upstream gradient: the values 1, -2, 0.5 (cyc), or 1, -2, 0.5, 0, NaN (cycz), cycling. */
static tg_tensor *upstream(const char *pattern, const tg_tensor *like) {
  static const double cyc[] = {1.0, -2.0, 0.5, 0.0, NAN};
  int period = strcmp(pattern, "cycz") ? 3 : 5;
  pt_tensor g = {.dtype = tg_tensor_dtype(like), .ndim = tg_ndim(like), .numel = tg_numel(like)};
  memcpy(g.sizes, tg_sizes(like), sizeof(int64_t) * (size_t)g.ndim);
  g.f = calloc(g.numel > 0 ? (size_t)g.numel : 1, sizeof(double));
  if (!g.f) return NULL;
  for (int64_t k = 0; k < g.numel; k++) g.f[k] = cyc[k % period];
  tg_tensor *t = contiguous_of(&g);
  free(g.f);
  return t;
}

/* ---- comparing ---- */

static int64_t ordered(double v, bool f32) {
  if (f32) {
    float x = (float)v;
    int32_t i;
    memcpy(&i, &x, sizeof i);
    return i < 0 ? (int64_t)INT32_MIN - i : i;
  }
  int64_t i;
  memcpy(&i, &v, sizeof i);
  return i < 0 ? INT64_MIN - i : i;
}

/* Gradients whose zeros differ only in sign: PyTorch's formulas give either sign (g * 0 or
 * where(..., 0)), so they are counted, not failed, unless TG_PARITY_STRICT_ZERO_GRAD is set. */
static int zero_sign_grads;
static bool strict_zero_grads;
static bool all_elements; /* TG_PARITY_ALL_ELEMENTS: print every disagreeing element */

static bool values_agree(double want, double got, int tol, double atol, bool f32, bool grad) {
  if (isnan(want) || isnan(got)) return isnan(want) && isnan(got);
  if (want == got && signbit(want) != signbit(got) && grad && !strict_zero_grads) {
    zero_sign_grads++;
    return true;
  }
  if (want == got) return signbit(want) == signbit(got);
  if (isinf(want) || isinf(got) || tol == 0) return false;
  if (fabs(want - got) <= atol) return true;
  int64_t a = ordered(want, f32), b = ordered(got, f32);
  return (a > b ? (uint64_t)a - (uint64_t)b : (uint64_t)b - (uint64_t)a) <= (uint64_t)tol;
}

static bool all_zero(const tg_tensor *t) {
  double d = tg_max_abs_diff(t, tg_zeros_like(t));
  return d == 0.0;
}

/* Compares a tg tensor with PyTorch's; false with the first disagreement in why. */
static bool tensors_agree(const pt_tensor *want, const tg_tensor *got, const pt_case *c, bool grad,
                          char *why, size_t len) {
  /* A gradient is a product of several roundings whatever the op: a few ULPs, and a slack of
   * 32 epsilons of the dtype for the cancellation in formulas like 1 - tanh(x)^2. */
  double eps = want->dtype == TG_F32 ? 0x1p-23 : 0x1p-52;
  int tol = grad && c->tol < 4 ? 4 : c->tol;
  double atol = grad && c->atol < 32 * eps ? 32 * eps : c->atol;
  char ws[64], gs[64];
  if (!got) return snprintf(why, len, "no tensor"), false;
  if (tg_tensor_dtype(got) != want->dtype)
    return snprintf(why, len, "dtype %s, PyTorch %s", tg_dtype_name(tg_tensor_dtype(got)),
                    tg_dtype_name(want->dtype)),
           false;
  if (tg_ndim(got) != want->ndim ||
      memcmp(tg_sizes(got), want->sizes, sizeof(int64_t) * (size_t)want->ndim))
    return snprintf(why, len, "sizes %s, PyTorch %s",
                    tg_format_sizes(gs, sizeof gs, tg_ndim(got), tg_sizes(got)),
                    tg_format_sizes(ws, sizeof ws, want->ndim, want->sizes)),
           false;
  size_t n = want->numel > 0 ? (size_t)want->numel : 1, es = tg_dtype_size(want->dtype);
  void *buf = calloc(n, es);
  bool ok = buf && tg_to_host_array(got, buf, n * es) == TG_OK;
  if (!ok) snprintf(why, len, "cannot read the values: %s", tg_last_error_message());
  for (int64_t k = 0; (ok || all_elements) && k < want->numel; k++) {
    if (want->dtype == TG_I64) {
      int64_t g = ((int64_t *)buf)[k];
      if (g != want->i[k])
        ok = false, snprintf(why, len, "element %lld: %lld, PyTorch %lld", (long long)k,
                             (long long)g, (long long)want->i[k]);
      continue;
    }
    bool f32 = want->dtype == TG_F32;
    double g = f32 ? (double)((float *)buf)[k] : ((double *)buf)[k];
    if (!values_agree(want->f[k], g, tol, atol, f32, grad)) {
      if (all_elements)
        printf("  %s %s element %lld: %.17g (%a), PyTorch %.17g (%a)\n", c->id,
               grad ? "grad" : "output", (long long)k, g, g, want->f[k], want->f[k]);
      if (ok)
        snprintf(why, len, "element %lld: %.17g (%a), PyTorch %.17g (%a)", (long long)k, g, g,
                 want->f[k], want->f[k]);
      ok = false;
    }
  }
  free(buf);
  return ok;
}

static bool grads_agree(const pt_case *c, tg_tensor **in, tg_tensor **out, int nout, char *why,
                        size_t len) {
  const tg_tensor *gouts[PT_MAX_OUT], *gups[PT_MAX_OUT], *gins[PT_MAX_IN];
  tg_tensor *grads[PT_MAX_IN] = {0};
  int ng = 0, ni = 0;
  for (int k = 0; k < nout; k++)
    if (out[k] && tg_requires_grad(out[k])) {
      gouts[ng] = out[k];
      gups[ng++] = upstream(c->gp, out[k]);
    }
  for (int k = 0; k < c->nin; k++)
    if (c->in[k].rg) gins[ni++] = in[k];
  if (ng == 0) return snprintf(why, len, "the result does not require grad"), false;
  tg_status s = tg_autograd_grad(ng, gouts, gups, ni, gins, grads, (tg_backward_options){0}, true);
  if (c->grad_err) {
    if (s != TG_OK) return true;
    return snprintf(why, len, "backward succeeded; PyTorch: %s", c->grad_err), false;
  }
  if (s != TG_OK)
    return snprintf(why, len, "backward failed: %s: %s", tg_status_name(s),
                    tg_last_error_message()),
           false;
  char sub[400];
  for (int k = 0; k < c->ngrad && k < ni; k++) {
    const pt_tensor *want = &c->grad[k];
    bool ok;
    if (want->none)
      ok = !grads[k] || all_zero(grads[k]);
    else if (!grads[k])
      ok = false;
    else
      ok = tensors_agree(want, grads[k], c, true, sub, sizeof sub);
    if (!ok) {
      if (want->none)
        snprintf(sub, sizeof sub, "a gradient where PyTorch has none");
      else if (!grads[k])
        snprintf(sub, sizeof sub, "no gradient");
      return snprintf(why, len, "grad of input %d: %s", k, sub), false;
    }
  }
  return true;
}

/* Runs one case; false with the disagreement in why. */
static bool run_case(const pt_case *c, char *why, size_t len) {
  pt_fn fn = pt_adapter(c->op);
  if (!fn) return snprintf(why, len, "no adapter for op %s", c->op), false;
  tg_tensor *in[PT_MAX_IN] = {0}, *out[PT_MAX_OUT] = {0};
  for (int k = 0; k < c->nin; k++)
    if (!(in[k] = build_input(&c->in[k])))
      return snprintf(why, len, "cannot build input %d: %s", k, tg_last_error_message()), false;
  int nout = 0;
  tg_status s = fn(in, c->nin, c->p, c->ip, c->nip, out, &nout);
  if (s == TG_NUM_STATUS) return snprintf(why, len, "failed without an error code"), false;
  if (c->err) {
    if (s != TG_OK) return true;
    return snprintf(why, len, "succeeded; PyTorch raised %s", c->err), false;
  }
  if (s != TG_OK)
    return snprintf(why, len, "%s: %s", tg_status_name(s), tg_last_error_message()), false;
  if (nout != c->nout) return snprintf(why, len, "%d outputs, PyTorch %d", nout, c->nout), false;
  char sub[400];
  for (int k = 0; k < nout; k++)
    if (!tensors_agree(&c->out[k], out[k], c, false, sub, sizeof sub))
      return snprintf(why, len, "output %d: %s", k, sub), false;
  if (c->ngrad == 0 && !c->grad_err) return true;
  return grads_agree(c, in, out, nout, why, len);
}

static op_stats *stats_of(op_stats *stats, int *n, const char *op) {
  for (int k = 0; k < *n; k++)
    if (!strcmp(stats[k].op, op)) return &stats[k];
  if (*n == MAX_OPS) return &stats[MAX_OPS - 1];
  stats[*n] = (op_stats){.op = op};
  return &stats[(*n)++];
}

TG_TEST(parity, against_pytorch, .timeout = 600) {
  pt_refs refs;
  cr_assert(pt_refs_load(TG_PARITY_DIR "/refs.txt", &refs), "cannot load the references");
  cr_assert(load_known(TG_PARITY_DIR "/known_differences.txt"),
            "cannot load known_differences.txt");
  const char *only = getenv("TG_PARITY_ONLY");
  bool verbose = getenv("TG_PARITY_VERBOSE") != NULL;
  strict_zero_grads = getenv("TG_PARITY_STRICT_ZERO_GRAD") != NULL;
  all_elements = getenv("TG_PARITY_ALL_ELEMENTS") != NULL;
  static op_stats stats[MAX_OPS];
  int n_ops = 0, passed = 0, n_known_hit = 0, failed = 0, run = 0;
  printf("parity: references %s\n", refs.header);
  for (int k = 0; k < refs.n; k++) {
    const pt_case *c = &refs.cases[k];
    if (only && fnmatch(only, c->id, 0) != 0) continue;
    run++;
    char why[600] = "";
    tg_scope scope = tg_scope_begin();
    bool ok = run_case(c, why, sizeof why);
    tg_scope_end(scope);
    tg_clear_error();
    op_stats *st = stats_of(stats, &n_ops, c->op);
    known_entry *kn = ok ? NULL : known_for(c->id);
    if (ok) {
      passed++, st->passed++;
    } else if (kn) {
      kn->hits++, n_known_hit++, st->known++;
      if (verbose) printf("KNOWN %s: %s [%s]\n", c->id, why, kn->cls);
    } else {
      failed++, st->failed++;
      printf("DIFF %s (refs.txt:%d): %s\n", c->id, c->line, why);
    }
  }
  printf("parity: per op (passed/known/failed):");
  for (int k = 0; k < n_ops; k++)
    printf("%s %s %d/%d/%d", k % 6 ? "," : "\n ", stats[k].op, stats[k].passed, stats[k].known,
           stats[k].failed);
  printf("\n");
  int stale = 0;
  for (int k = 0; k < n_known && !only; k++)
    if (known[k].hits == 0) {
      stale++;
      printf("STALE known difference %s (%s): no case differs any more; remove the entry\n",
             known[k].pattern, known[k].cls);
    }
  printf("parity: %d cases over %d ops: %d passed, %d known differences (%d entries), %d failed, "
         "%d stale entries\n",
         run, n_ops, passed, n_known_hit, n_known, failed, stale);
  printf("parity: %d gradient elements are zeros of the other sign than PyTorch's (not failed)\n",
         zero_sign_grads);
  pt_refs_free(&refs);
  cr_expect_eq(failed, 0, "%d cases disagree with PyTorch (DIFF lines above)", failed);
  cr_expect_eq(stale, 0, "%d stale entries in known_differences.txt", stale);
}
