/* The row-major cblas call of a tg_gemm_problem (cblas_call.h). */
#include "ops/cpu/cblas_call.h"

#include <limits.h>

static bool fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

/* A row-major operand (unit column stride) or a transposed one (unit row stride). */
static bool blas_layout(int64_t rs, int64_t cs, int64_t cols, int64_t rows, int *trans,
                        int64_t *ld) {
  if (cs == 1 && rs >= cols) {
    *trans = TG_CBLAS_NO_TRANS;
    *ld = rs > 1 ? rs : (cols > 1 ? cols : 1);
  } else if (rs == 1 && cs >= rows) {
    *trans = TG_CBLAS_TRANS;
    *ld = cs > 1 ? cs : (rows > 1 ? rows : 1);
  } else {
    return false;
  }
  return fits_int(*ld);
}

bool tg__cblas_call_of(const tg_gemm_problem *p, tg_cblas_call *call) {
  tg_gemm_problem q = *p;
  if (q.c_cs != 1) { /* a column-major out: out^T = b^T @ a^T, row-major */
    if (p->c_rs != 1) return false;
    q.m = p->n, q.n = p->m;
    q.c_rs = p->c_cs, q.c_cs = 1;
    q.a = p->b, q.a_rs = p->b_cs, q.a_cs = p->b_rs;
    q.b = p->a, q.b_rs = p->a_cs, q.b_cs = p->a_rs;
  }
  int64_t lda, ldb;
  if (!fits_int(q.m) || !fits_int(q.n) || !fits_int(q.k) || !fits_int(q.c_rs) ||
      !blas_layout(q.a_rs, q.a_cs, q.k, q.m, &call->trans_a, &lda) ||
      !blas_layout(q.b_rs, q.b_cs, q.n, q.k, &call->trans_b, &ldb))
    return false;
  call->m = (int)q.m, call->n = (int)q.n, call->k = (int)q.k;
  call->lda = (int)lda, call->ldb = (int)ldb;
  call->ldc = (int)(q.c_rs >= q.n ? q.c_rs : (q.n > 1 ? q.n : 1));
  call->a = q.a, call->b = q.b, call->c = q.c;
  return true;
}

void tg__cblas_run(const tg_gemm_problem *p, const tg_cblas_call *c, tg_cblas_sgemm_fn sgemm,
                   tg_cblas_dgemm_fn dgemm) {
  if (p->dtype == TG_F32)
    sgemm(TG_CBLAS_ROW_MAJOR, c->trans_a, c->trans_b, c->m, c->n, c->k, (float)p->alpha,
          (const float *)c->a, c->lda, (const float *)c->b, c->ldb, (float)p->beta, (float *)c->c,
          c->ldc);
  else
    dgemm(TG_CBLAS_ROW_MAJOR, c->trans_a, c->trans_b, c->m, c->n, c->k, p->alpha,
          (const double *)c->a, c->lda, (const double *)c->b, c->ldb, p->beta, (double *)c->c,
          c->ldc);
}
