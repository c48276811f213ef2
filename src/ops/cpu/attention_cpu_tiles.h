/* The attention CPU kernels' tile loops for one dtype (attention_cpu.c includes this once per
 * dtype with T, SFX(name), EXP(x), LANE_UNIFORM(block, lane) and PER_BLOCK defined). Every
 * inner loop runs along a contiguous row (keys of a score row, or the D or Dv features), so
 * the compiler vectorises it; the unit functions are compiled for AVX-512, AVX2 and baseline
 * x86-64 (TG_VF_CLONES). */

/* Dropout factors z[0..count) of the stream positions pos0.., one Philox block per
 * PER_BLOCK positions: bit for bit tg_philox_uniform_* per element (attention_math.h). */
static void SFX(drop_row)(T *z, uint64_t seed, uint64_t pos0, int64_t count, T below, T keep) {
  int64_t c = 0;
  while (c < count) {
    const uint64_t pos = pos0 + (uint64_t)c;
    const tg_philox4 r = tg_philox_block(seed, pos / PER_BLOCK);
    for (int lane = (int)(pos % PER_BLOCK); lane < PER_BLOCK && c < count; lane++, c++)
      z[c] = LANE_UNIFORM(r, lane) < below ? keep : (T)0;
  }
}

/* kt[d][c] = k[c][d] for c < cols: a key block transposed, rows of ATTN_BC. */
static void SFX(transpose_block)(T *kt, const T *k, int64_t cols, int64_t d) {
  for (int64_t c = 0; c < cols; c++)
    for (int64_t x = 0; x < d; x++) kt[x * ATTN_BC + c] = k[c * d + x];
}

/* s[c] = scale * (q . kt[:, c]) for c < cols. */
static inline void SFX(score_row)(T *s, const T *q, const T *kt, int64_t cols, int64_t d, T scale) {
  for (int64_t c = 0; c < cols; c++) s[c] = 0;
  for (int64_t x = 0; x < d; x++) {
    const T qx = q[x];
    const T *kr = kt + x * ATTN_BC;
    for (int64_t c = 0; c < cols; c++) s[c] += qx * kr[c];
  }
  for (int64_t c = 0; c < cols; c++) s[c] *= scale;
}

/* y[0..n) += a * x[0..n) */
static inline void SFX(axpy)(T *y, T a, const T *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
}

/* Forward of query block qb of head n: the online softmax over key blocks. */
TG_VF_CLONES static void SFX(forward_unit)(const attn_job *j, int64_t n, int64_t qb, char *work) {
  const int64_t tq = j->tq, tk = j->tk, d = j->d, dv = j->dv;
  const int64_t q0 = qb * ATTN_BR, rows = tq - q0 < ATTN_BR ? tq - q0 : ATTN_BR;
  T *kt = (T *)work, *s = kt + d * ATTN_BC, *z = s + ATTN_BC, *acc = z + ATTN_BC;
  T *m = acc + ATTN_BR * dv, *l = m + ATTN_BR;
  const T *q = (const T *)j->q + (n * tq + q0) * d, *k = (const T *)j->k + n * tk * d;
  const T *v = (const T *)j->v + n * tk * dv;
  const T scale = (T)j->a.scale, below = (T)(1 - j->a.dropout_p),
          keep = (T)(1 / (1 - j->a.dropout_p));
  const bool dropout = j->a.dropout_p > 0;
  for (int64_t r = 0; r < rows; r++) m[r] = -(T)INFINITY, l[r] = 0;
  for (int64_t x = 0; x < rows * dv; x++) acc[x] = 0;
  const int64_t kend = j->a.causal && q0 + rows < tk ? q0 + rows : tk;
  for (int64_t k0 = 0; k0 < kend; k0 += ATTN_BC) {
    const int64_t cols = kend - k0 < ATTN_BC ? kend - k0 : ATTN_BC;
    SFX(transpose_block)(kt, k + k0 * d, cols, d);
    for (int64_t r = 0; r < rows; r++) {
      const int64_t i = q0 + r;
      if (j->a.causal && i < k0) continue; /* every key of this block is masked */
      const int64_t live = j->a.causal && i - k0 + 1 < cols ? i - k0 + 1 : cols;
      SFX(score_row)(s, q + r * d, kt, live, d, scale);
      T mx = -(T)INFINITY;
      for (int64_t c = 0; c < live; c++) mx = s[c] > mx || s[c] != s[c] ? s[c] : mx; /* NaN wins */
      const T m_new = mx != mx || m[r] != m[r] ? mx + m[r] : mx > m[r] ? mx : m[r];
      const T base = m_new == -(T)INFINITY ? 0 : m_new; /* no -inf - -inf */
      const T alpha = EXP(m[r] - base);
      T sum = 0;
      for (int64_t c = 0; c < live; c++) {
        s[c] = EXP(s[c] - base);
        sum += s[c];
      }
      l[r] = l[r] * alpha + sum;
      m[r] = m_new;
      if (dropout) {
        SFX(drop_row)
        (z, j->a.seed, j->a.offset + (uint64_t)((n * tq + i) * tk + k0), live, below, keep);
        for (int64_t c = 0; c < live; c++) s[c] *= z[c];
      }
      T *ar = acc + r * dv;
      if (alpha != 1)
        for (int64_t x = 0; x < dv; x++) ar[x] *= alpha;
      for (int64_t c = 0; c < live; c++) SFX(axpy)(ar, s[c], v + (k0 + c) * dv, dv);
    }
  }
  T *out = (T *)j->out + (n * tq + q0) * dv, *lse = (T *)j->lse + n * tq + q0;
  for (int64_t r = 0; r < rows; r++) {
    const T inv = l[r] > 0 || l[r] != l[r] ? 1 / l[r] : 0; /* no keys: a zero row */
    for (int64_t x = 0; x < dv; x++) out[r * dv + x] = acc[r * dv + x] * inv;
    lse[r] = l[r] > 0 || l[r] != l[r] ? m[r] + LOG(l[r]) : -(T)INFINITY;
  }
}

/* Backward of head n, key block by key block: dk and dv of the block in tiles, dq of every
 * row accumulated (the head's rows belong to this call alone). */
TG_VF_CLONES static void SFX(backward_head)(const attn_job *j, int64_t n, char *work) {
  const int64_t tq = j->tq, tk = j->tk, d = j->d, dv = j->dv;
  T *kt = (T *)work, *vt = kt + d * ATTN_BC, *p = vt + dv * ATTN_BC, *dp = p + ATTN_BC;
  T *z = dp + ATTN_BC, *dk_acc = z + ATTN_BC, *dv_acc = dk_acc + ATTN_BC * d;
  T *delta = dv_acc + ATTN_BC * dv;
  const T *q = (const T *)j->q + n * tq * d, *k = (const T *)j->k + n * tk * d;
  const T *v = (const T *)j->v + n * tk * dv, *o = (const T *)j->o + n * tq * dv;
  const T *g = (const T *)j->grad + n * tq * dv, *lse = (const T *)j->lse + n * tq;
  T *dq = (T *)j->dq + n * tq * d, *dk = (T *)j->dk + n * tk * d,
    *dvo = (T *)j->dv_out + n * tk * dv;
  const T scale = (T)j->a.scale, below = (T)(1 - j->a.dropout_p),
          keep = (T)(1 / (1 - j->a.dropout_p));
  const bool dropout = j->a.dropout_p > 0;
  for (int64_t x = 0; x < tq * d; x++) dq[x] = 0;
  for (int64_t i = 0; i < tq; i++) {
    T acc = 0;
    for (int64_t x = 0; x < dv; x++) acc += g[i * dv + x] * o[i * dv + x];
    delta[i] = acc;
  }
  for (int64_t k0 = 0; k0 < tk; k0 += ATTN_BC) {
    const int64_t cols = tk - k0 < ATTN_BC ? tk - k0 : ATTN_BC;
    SFX(transpose_block)(kt, k + k0 * d, cols, d);
    SFX(transpose_block)(vt, v + k0 * dv, cols, dv);
    for (int64_t x = 0; x < cols * d; x++) dk_acc[x] = 0;
    for (int64_t x = 0; x < cols * dv; x++) dv_acc[x] = 0;
    for (int64_t i = j->a.causal ? k0 : 0; i < tq; i++) {
      const int64_t live = j->a.causal && i - k0 + 1 < cols ? i - k0 + 1 : cols;
      const T *gi = g + i * dv, *qi = q + i * d;
      SFX(score_row)(p, qi, kt, live, d, scale);
      for (int64_t c = 0; c < live; c++) p[c] = EXP(p[c] - lse[i]);
      SFX(score_row)(dp, gi, vt, live, dv, 1); /* g_i . v_j */
      if (dropout) {
        SFX(drop_row)
        (z, j->a.seed, j->a.offset + (uint64_t)((n * tq + i) * tk + k0), live, below, keep);
        for (int64_t c = 0; c < live; c++) {
          dp[c] *= z[c];
          z[c] *= p[c]; /* the kept probability, for dv */
        }
      }
      const T *pz = dropout ? z : p;
      for (int64_t c = 0; c < live; c++) SFX(axpy)(dv_acc + c * dv, pz[c], gi, dv);
      for (int64_t c = 0; c < live; c++) p[c] = p[c] * (dp[c] - delta[i]) * scale; /* dS */
      T *dqi = dq + i * d;
      for (int64_t c = 0; c < live; c++) {
        SFX(axpy)(dqi, p[c], k + (k0 + c) * d, d);
        SFX(axpy)(dk_acc + c * d, p[c], qi, d);
      }
    }
    for (int64_t x = 0; x < cols * d; x++) dk[k0 * d + x] = dk_acc[x];
    for (int64_t x = 0; x < cols * dv; x++) dvo[k0 * dv + x] = dv_acc[x];
  }
}
