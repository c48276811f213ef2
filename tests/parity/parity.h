/* The op-by-op comparison with PyTorch (tests/ops/test_parity.c): the cases of
 * tests/parity/refs.txt as parsed, and the adapters that run each op on tg. */
#ifndef TG_PARITY_H
#define TG_PARITY_H

#include "tg/tg.h"

#define PT_MAX_IN 4
#define PT_MAX_OUT 16
#define PT_MAX_P 8
#define PT_MAX_IP 16

/* A tensor of the references: dtype, sizes and values in logical row-major order (floats in
 * f, I64 in i); for an input also its layout (c, t, s, e<dim>) and requires_grad. */
typedef struct pt_tensor {
  tg_dtype dtype;
  char layout[8];
  bool rg;
  bool none; /* a gradient PyTorch gave as None */
  int ndim;
  int64_t sizes[TG_MAX_DIMS];
  int64_t numel;
  double *f;
  int64_t *i;
} pt_tensor;

typedef struct pt_case {
  char *id, *op, *gp;
  int line;
  int tol;     /* ULPs allowed (0: bitwise) */
  double atol; /* absolute slack, scaled to the terms of a sum (0 for elementwise ops) */
  int np, nip, nin, nout, ngrad;
  double p[PT_MAX_P];
  int64_t ip[PT_MAX_IP];
  pt_tensor in[PT_MAX_IN], out[PT_MAX_OUT], grad[PT_MAX_IN];
  char *err;      /* PyTorch raised in the forward: tg must fail too */
  char *grad_err; /* ... in the backward */
} pt_case;

typedef struct pt_refs {
  char *text; /* the file; the strings of the cases point into it */
  char *header;
  pt_tensor edges[TG_NUM_DTYPES]; /* the edge vectors (V lines) that @e stands for */
  pt_case *cases;
  int n;
} pt_refs;

/* Reads and parses a refs file; false with a message on stderr when it is malformed. */
bool pt_refs_load(const char *path, pt_refs *refs);
void pt_refs_free(pt_refs *refs);

/* Runs op on tg: in holds the inputs, built in their layouts; out gets the outputs. Returns
 * TG_OK or the error status (TG_NUM_STATUS for NULL without a pending error). */
typedef tg_status (*pt_fn)(tg_tensor **in, int nin, const double *p, const int64_t *ip, int nip,
                           tg_tensor **out, int *nout);
/* The adapter of an op name; NULL if there is none. */
pt_fn pt_adapter(const char *op);

#endif
