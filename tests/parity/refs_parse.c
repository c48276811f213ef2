/* Parses tests/parity/refs.txt (format: tests/parity/README.md). One case is a `C` line
 * followed by P, I, X, E, Y, EG and D lines up to the next `C`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parity.h"

static bool parse_dtype(const char *s, tg_dtype *out) {
  if (!s) return false;
  if (!strcmp(s, "f32"))
    *out = TG_F32;
  else if (!strcmp(s, "f64"))
    *out = TG_F64;
  else if (!strcmp(s, "i64"))
    *out = TG_I64;
  else
    return false;
  return true;
}

/* "<ndim> <sizes...> : <values...>" after the dtype (and layout) tokens. */
static bool parse_shape_values(char **save, pt_tensor *t, const pt_refs *refs) {
  char *tok = strtok_r(NULL, " ", save);
  if (!tok) return false;
  t->ndim = atoi(tok);
  if (t->ndim < 0 || t->ndim > TG_MAX_DIMS) return false;
  t->numel = 1;
  for (int d = 0; d < t->ndim; d++) {
    tok = strtok_r(NULL, " ", save);
    if (!tok) return false;
    t->sizes[d] = strtoll(tok, NULL, 10);
    t->numel *= t->sizes[d];
  }
  tok = strtok_r(NULL, " ", save);
  if (!tok || strcmp(tok, ":")) return false;
  size_t n = t->numel > 0 ? (size_t)t->numel : 1;
  if (t->dtype == TG_I64)
    t->i = calloc(n, sizeof(int64_t));
  else
    t->f = calloc(n, sizeof(double));
  if (!t->i && !t->f) return false;
  for (int64_t k = 0; k < t->numel;) {
    tok = strtok_r(NULL, " ", save);
    if (!tok) return false;
    if (!strcmp(tok, "@e")) { /* the edge vector of the dtype (a V line) */
      const pt_tensor *e = &refs->edges[t->dtype];
      if (t->dtype == TG_I64 || k != 0 || e->numel != t->numel) return false;
      memcpy(t->f, e->f, sizeof(double) * (size_t)e->numel);
      break;
    }
    char *star = strchr(tok, '*'); /* value*count: a run of equal values */
    int64_t count = star ? strtoll(star + 1, NULL, 10) : 1;
    if (count < 1 || count > t->numel - k) return false;
    for (int64_t r = 0; r < count; r++, k++) {
      if (t->dtype == TG_I64)
        t->i[k] = strtoll(tok, NULL, 10);
      else
        t->f[k] = strtod(tok, NULL);
    }
  }
  return strtok_r(NULL, " ", save) == NULL;
}

static bool parse_line(char *line, pt_refs *refs) {
  char *save = NULL;
  char *kind = strtok_r(line, " ", &save);
  if (!kind || kind[0] == '#') return true;
  if (!strcmp(kind, "H")) {
    refs->header = save;
    return true;
  }
  if (!strcmp(kind, "V")) { /* "V <dtype> <n> <values>": the edge vector that @e names */
    pt_tensor *e = NULL;
    tg_dtype dtype;
    if (!parse_dtype(strtok_r(NULL, " ", &save), &dtype) || dtype == TG_I64) return false;
    e = &refs->edges[dtype];
    e->dtype = dtype;
    e->ndim = 1;
    char *n = strtok_r(NULL, " ", &save);
    if (!n || e->f) return false;
    e->sizes[0] = strtoll(n, NULL, 10);
    e->numel = e->sizes[0];
    e->f = calloc(e->numel > 0 ? (size_t)e->numel : 1, sizeof(double));
    if (!e->f) return false;
    for (int64_t k = 0; k < e->numel; k++) {
      char *tok = strtok_r(NULL, " ", &save);
      if (!tok) return false;
      e->f[k] = strtod(tok, NULL);
    }
    return true;
  }
  if (!strcmp(kind, "C")) {
    pt_case *c = &refs->cases[refs->n++];
    memset(c, 0, sizeof *c);
    c->id = strtok_r(NULL, " ", &save);
    c->op = strtok_r(NULL, " ", &save);
    char *tol = strtok_r(NULL, " ", &save), *atol = strtok_r(NULL, " ", &save);
    c->gp = strtok_r(NULL, " ", &save);
    if (!c->gp) return false;
    c->tol = atoi(tol);
    c->atol = strtod(atol, NULL);
    return true;
  }
  if (refs->n == 0) return false;
  pt_case *c = &refs->cases[refs->n - 1];
  if (!strcmp(kind, "P") || !strcmp(kind, "I")) {
    for (char *tok; (tok = strtok_r(NULL, " ", &save));) {
      if (kind[0] == 'P' && c->np < PT_MAX_P)
        c->p[c->np++] = strtod(tok, NULL);
      else if (kind[0] == 'I' && c->nip < PT_MAX_IP)
        c->ip[c->nip++] = strtoll(tok, NULL, 10);
      else
        return false;
    }
    return true;
  }
  if (!strcmp(kind, "E") || !strcmp(kind, "EG")) {
    *(kind[1] ? &c->grad_err : &c->err) = save && *save ? save : "error";
    return true;
  }
  pt_tensor *t;
  if (!strcmp(kind, "X") && c->nin < PT_MAX_IN)
    t = &c->in[c->nin++];
  else if (!strcmp(kind, "Y") && c->nout < PT_MAX_OUT)
    t = &c->out[c->nout++];
  else if (!strcmp(kind, "D") && c->ngrad < PT_MAX_IN)
    t = &c->grad[c->ngrad++];
  else
    return false;
  char *tok = strtok_r(NULL, " ", &save);
  if (kind[0] == 'D' && tok && !strcmp(tok, "none")) {
    t->none = true;
    return true;
  }
  if (!parse_dtype(tok, &t->dtype)) return false;
  if (kind[0] == 'X') {
    char *layout = strtok_r(NULL, " ", &save), *rg = strtok_r(NULL, " ", &save);
    if (!rg || strlen(layout) >= sizeof t->layout) return false;
    strcpy(t->layout, layout);
    t->rg = rg[0] == '1';
  }
  return parse_shape_values(&save, t, refs);
}

bool pt_refs_load(const char *path, pt_refs *refs) {
  memset(refs, 0, sizeof *refs);
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "parity: cannot open %s\n", path);
    return false;
  }
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  refs->text = malloc((size_t)size + 1);
  bool ok = refs->text && fread(refs->text, 1, (size_t)size, f) == (size_t)size;
  fclose(f);
  if (!ok) return false;
  refs->text[size] = '\0';
  int lines = 1;
  for (char *s = refs->text; *s; s++) lines += *s == '\n';
  refs->cases = calloc((size_t)lines, sizeof(pt_case));
  if (!refs->cases) return false;
  int number = 0;
  for (char *line = refs->text, *next; line; line = next) {
    next = strchr(line, '\n');
    if (next) *next++ = '\0';
    number++;
    if (!parse_line(line, refs)) {
      fprintf(stderr, "parity: %s:%d: malformed line\n", path, number);
      return false;
    }
    if (refs->n && !refs->cases[refs->n - 1].line) refs->cases[refs->n - 1].line = number;
  }
  return refs->header != NULL;
}

void pt_refs_free(pt_refs *refs) {
  for (int k = 0; k < refs->n; k++) {
    pt_case *c = &refs->cases[k];
    pt_tensor *all[] = {c->in, c->out, c->grad};
    int counts[] = {c->nin, c->nout, c->ngrad};
    for (int g = 0; g < 3; g++)
      for (int j = 0; j < counts[g]; j++) {
        free(all[g][j].f);
        free(all[g][j].i);
      }
  }
  for (int d = 0; d < TG_NUM_DTYPES; d++) free(refs->edges[d].f);
  free(refs->cases);
  free(refs->text);
  memset(refs, 0, sizeof *refs);
}
