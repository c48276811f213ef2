/* The attention CPU kernels' tile loops for one dtype (attention_cpu.c includes this once per
 * dtype with T, SFX(name), EXP(x), LOG(x), LANE_UNIFORM(block, lane) and PER_BLOCK defined).
 * The products of tiles run through tile_gemm, a register-blocked ATTN_MR x ATTN_NR kernel
 * over zero-padded tiles (rows to ATTN_BR / ATTN_BC, feature columns to a multiple of
 * ATTN_NR), so no loop has a remainder; the row passes (softmax, masks, dropout) run along
 * contiguous rows. The unit functions are compiled for AVX-512, AVX2 and baseline x86-64
 * (TG_VF_CLONES). */

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

/* C[m][n] = (accumulate ? C[m][n] : 0) + sum_k A[m][k] B[k][n] for m < M, n < N, with M a
 * multiple of ATTN_MR and N of ATTN_NR (the callers pad with zeros). Written with GCC's
 * vector extension: ATTN_MR rows x two 32-byte vectors of accumulators stay in registers
 * (the compiler's own vectorisation of the plain loop shuffled and spilled them). */
#if defined(__GNUC__)
typedef T SFX(vec) __attribute__((vector_size(32)));
#define VL ((int64_t)(32 / sizeof(T)))
ATTN_INLINE void SFX(tile_gemm_portable)(T *restrict C, int64_t ldc, const T *restrict A,
                                         int64_t a_rs, int64_t a_cs, const T *restrict B,
                                         int64_t ldb, int64_t M, int64_t N, int64_t K,
                                         bool accumulate) {
  for (int64_t m0 = 0; m0 < M; m0 += ATTN_MR)
    for (int64_t n0 = 0; n0 < N; n0 += 2 * VL) {
      SFX(vec) acc[ATTN_MR][2];
      for (int r = 0; r < ATTN_MR; r++)
        for (int h = 0; h < 2; h++)
          if (accumulate)
            memcpy(&acc[r][h], C + (m0 + r) * ldc + n0 + h * VL, sizeof acc[r][h]);
          else
            acc[r][h] = (SFX(vec)){0};
      const T *a = A + m0 * a_rs;
      for (int64_t k = 0; k < K; k++) {
        SFX(vec) b0, b1;
        memcpy(&b0, B + k * ldb + n0, sizeof b0);
        memcpy(&b1, B + k * ldb + n0 + VL, sizeof b1);
        for (int r = 0; r < ATTN_MR; r++) {
          const T ar = a[r * a_rs + k * a_cs];
          acc[r][0] += ar * b0;
          acc[r][1] += ar * b1;
        }
      }
      for (int r = 0; r < ATTN_MR; r++)
        for (int h = 0; h < 2; h++) memcpy(C + (m0 + r) * ldc + n0 + h * VL, &acc[r][h], 32);
    }
}
#undef VL
#else
ATTN_INLINE void SFX(tile_gemm_portable)(T *restrict C, int64_t ldc, const T *restrict A,
                                         int64_t a_rs, int64_t a_cs, const T *restrict B,
                                         int64_t ldb, int64_t M, int64_t N, int64_t K,
                                         bool accumulate) {
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      T acc = accumulate ? C[m * ldc + n] : 0;
      for (int64_t k = 0; k < K; k++) acc += A[m * a_rs + k * a_cs] * B[k * ldb + n];
      C[m * ldc + n] = acc;
    }
}
#endif

/* The tile product: the AVX2 + FMA one for F32 where the CPU has it (attention_fma_cpu.c). */
ATTN_INLINE void SFX(tile_gemm)(const attn_job *j, T *restrict C, int64_t ldc, const T *restrict A,
                                int64_t a_rs, int64_t a_cs, const T *restrict B, int64_t ldb,
                                int64_t M, int64_t N, int64_t K, bool accumulate) {
  if (ATTN_FMA(j))
    tg__attention_tile_gemm_f32_fma((float *)C, ldc, (const float *)A, a_rs, a_cs, (const float *)B,
                                    ldb, M, N, K, accumulate);
  else
    SFX(tile_gemm_portable)(C, ldc, A, a_rs, a_cs, B, ldb, M, N, K, accumulate);
}

/* dst[r][x] = src[r][x] for r < rows, x < cols; zeros to [to_rows][ld]. */
static void SFX(pad_rows)(T *dst, int64_t ld, int64_t to_rows, const T *src, int64_t rows,
                          int64_t cols) {
  for (int64_t r = 0; r < to_rows; r++)
    for (int64_t x = 0; x < ld; x++) dst[r * ld + x] = r < rows && x < cols ? src[r * cols + x] : 0;
}

/* dst[x][r] = src[r][x] (ATTN_BC columns): a block of rows transposed, zeros to [to_x][BC]. */
static void SFX(pad_transposed)(T *dst, int64_t to_x, const T *src, int64_t rows, int64_t cols) {
  for (int64_t x = 0; x < to_x; x++)
    for (int64_t r = 0; r < ATTN_BC; r++)
      dst[x * ATTN_BC + r] = r < rows && x < cols ? src[r * cols + x] : 0;
}

/* Keys of row i (of a block starting at key k0 with cols keys) that the mask leaves. */
static inline int64_t SFX(live_keys)(const attn_job *j, int64_t i, int64_t k0, int64_t cols) {
  if (!j->a.causal) return cols;
  const int64_t live = i - k0 + 1;
  return live < 0 ? 0 : live < cols ? live : cols;
}

/* Head n's keys transposed and zero-padded, kt [dp][tkp], and its values padded, vp [tkp][dvp],
 * once per head for every query block of the forward. */
static void SFX(pack_head)(const attn_job *j, int64_t n) {
  const int64_t tk = j->tk, d = j->d, dv = j->dv, dp = j->dp, dvp = j->dvp, tkp = j->tkp;
  const T *k = (const T *)j->k + n * tk * d, *v = (const T *)j->v + n * tk * dv;
  T *kt = (T *)j->kt + n * dp * tkp;
  for (int64_t x = 0; x < dp; x++)
    for (int64_t c = 0; c < tkp; c++) kt[x * tkp + c] = c < tk && x < d ? k[c * d + x] : 0;
  SFX(pad_rows)((T *)j->vp + n * tkp * dvp, dvp, tkp, v, tk, dv);
}

/* Forward of query block qb of head n: the online softmax over key blocks. */
TG_VF_CLONES static void SFX(forward_unit)(const attn_job *j, int64_t n, int64_t qb, char *work) {
  const int64_t tq = j->tq, tk = j->tk, d = j->d, dv = j->dv, dp = j->dp, dvp = j->dvp;
  const int64_t q0 = qb * ATTN_BR, rows = tq - q0 < ATTN_BR ? tq - q0 : ATTN_BR;
  T *qs = (T *)work, *s = qs + ATTN_BR * dp, *acc = s + ATTN_BR * ATTN_BC;
  T *m = acc + ATTN_BR * dvp, *l = m + ATTN_BR, *z = l + ATTN_BR;
  const int64_t tkp = j->tkp;
  const T *kt_head = (const T *)j->kt + n * dp * tkp, *v_head = (const T *)j->vp + n * tkp * dvp;
  const T scale = (T)j->a.scale, below = (T)(1 - j->a.dropout_p),
          keep = (T)(1 / (1 - j->a.dropout_p));
  const bool dropout = j->a.dropout_p > 0;
  SFX(pad_rows)(qs, dp, ATTN_BR, (const T *)j->q + (n * tq + q0) * d, rows, d);
  for (int64_t r = 0; r < ATTN_BR; r++) m[r] = -(T)INFINITY, l[r] = 0;
  for (int64_t x = 0; x < ATTN_BR * dvp; x++) acc[x] = 0;
  const int64_t kend = j->a.causal && q0 + rows < tk ? q0 + rows : tk;
  for (int64_t k0 = 0; k0 < kend; k0 += ATTN_BC) {
    const int64_t cols = kend - k0 < ATTN_BC ? kend - k0 : ATTN_BC;
    SFX(tile_gemm)(j, s, ATTN_BC, qs, dp, 1, kt_head + k0, tkp, ATTN_BR, ATTN_BC, dp, false);
    for (int64_t r = 0; r < rows; r++) {
      const int64_t i = q0 + r, live = SFX(live_keys)(j, i, k0, cols);
      T *sr = s + r * ATTN_BC;
      /* Whole rows of ATTN_BC with masked keys at -inf (exp gives 0), reduced in ATTN_LANES
       * independent lanes: loops the compiler vectorises. A NaN score needs no care in the
       * max: exp(NaN - max) makes the sum, and so the row, NaN. */
      T lanes[ATTN_LANES], mx = -(T)INFINITY, sum = 0;
      for (int64_t c = 0; c < ATTN_BC; c++) sr[c] = c < live ? sr[c] * scale : -(T)INFINITY;
      for (int x = 0; x < ATTN_LANES; x++) lanes[x] = -(T)INFINITY;
      for (int64_t c = 0; c < ATTN_BC; c += ATTN_LANES)
        for (int x = 0; x < ATTN_LANES; x++) lanes[x] = sr[c + x] > lanes[x] ? sr[c + x] : lanes[x];
      for (int x = 0; x < ATTN_LANES; x++) mx = lanes[x] > mx ? lanes[x] : mx;
      const T m_new = mx > m[r] ? mx : m[r];
      const T base = m_new == -(T)INFINITY ? 0 : m_new; /* no -inf - -inf */
      const T alpha = EXP(m[r] - base);
      exp_row(sr, 1, base);
      for (int x = 0; x < ATTN_LANES; x++) lanes[x] = 0;
      for (int64_t c = 0; c < ATTN_BC; c += ATTN_LANES)
        for (int x = 0; x < ATTN_LANES; x++) lanes[x] += sr[c + x];
      for (int x = 0; x < ATTN_LANES; x++) sum += lanes[x];
      l[r] = l[r] * alpha + sum;
      m[r] = m_new;
      if (dropout && live > 0) {
        SFX(drop_row)
        (z, j->a.seed, j->a.offset + (uint64_t)((n * tq + i) * tk + k0), live, below, keep);
        for (int64_t c = 0; c < live; c++) sr[c] *= z[c];
      }
      if (alpha != 1)
        for (int64_t x = 0; x < dvp; x++) acc[r * dvp + x] *= alpha;
    }
    SFX(tile_gemm)(j, acc, dvp, s, ATTN_BC, 1, v_head + k0 * dvp, dvp, ATTN_BR, dvp, ATTN_BC, true);
  }
  T *out = (T *)j->out + (n * tq + q0) * dv, *lse = (T *)j->lse + n * tq + q0;
  for (int64_t r = 0; r < rows; r++) {
    const bool any = l[r] > 0 || l[r] != l[r]; /* no keys: a zero row, lse -inf */
    const T inv = any ? 1 / l[r] : 0;
    for (int64_t x = 0; x < dv; x++) out[r * dv + x] = acc[r * dvp + x] * inv;
    lse[r] = any ? m[r] + LOG(l[r]) : -(T)INFINITY;
  }
}

/* Backward of head n, key block by key block, query block by query block: with the tiles
 * S = Q K^T, P = exp(S scale - lse), dP = Z (G V^T), dS = P (dP - Delta) scale, it forms
 * dV += (P Z)^T G, dQ += dS K and dK += dS^T Q. dq of the head's rows belongs to this call
 * alone, so it accumulates in place. */
TG_VF_CLONES static void SFX(backward_head)(const attn_job *j, int64_t n, char *work) {
  const int64_t tq = j->tq, tk = j->tk, d = j->d, dv = j->dv, dp = j->dp, dvp = j->dvp;
  T *qs = (T *)work, *gs = qs + ATTN_BR * dp, *kt = gs + ATTN_BR * dvp, *kb = kt + dp * ATTN_BC;
  T *vt = kb + ATTN_BC * dp, *p = vt + dvp * ATTN_BC, *dpt = p + ATTN_BR * ATTN_BC;
  T *pz = dpt + ATTN_BR * ATTN_BC, *dk_acc = pz + ATTN_BC * ATTN_BR,
    *dv_acc = dk_acc + ATTN_BC * dp;
  T *dq_acc = dv_acc + ATTN_BC * dvp, *z = dq_acc + tq_pad(tq) * dp, *delta = z + ATTN_BC;
  const T *q = (const T *)j->q + n * tq * d, *k = (const T *)j->k + n * tk * d;
  const T *v = (const T *)j->v + n * tk * dv, *o = (const T *)j->o + n * tq * dv;
  const T *g = (const T *)j->grad + n * tq * dv, *lse = (const T *)j->lse + n * tq;
  T *dq = (T *)j->dq + n * tq * d, *dk = (T *)j->dk + n * tk * d,
    *dvo = (T *)j->dv_out + n * tk * dv;
  const T scale = (T)j->a.scale, below = (T)(1 - j->a.dropout_p),
          keep = (T)(1 / (1 - j->a.dropout_p));
  const bool dropout = j->a.dropout_p > 0;
  for (int64_t x = 0; x < tq_pad(tq) * dp; x++) dq_acc[x] = 0;
  for (int64_t i = 0; i < tq; i++) {
    T sum = 0;
    for (int64_t x = 0; x < dv; x++) sum += g[i * dv + x] * o[i * dv + x];
    delta[i] = sum;
  }
  for (int64_t k0 = 0; k0 < tk; k0 += ATTN_BC) {
    const int64_t cols = tk - k0 < ATTN_BC ? tk - k0 : ATTN_BC;
    SFX(pad_transposed)(kt, dp, k + k0 * d, cols, d);
    SFX(pad_rows)(kb, dp, ATTN_BC, k + k0 * d, cols, d);
    SFX(pad_transposed)(vt, dvp, v + k0 * dv, cols, dv);
    for (int64_t x = 0; x < ATTN_BC * dp; x++) dk_acc[x] = 0;
    for (int64_t x = 0; x < ATTN_BC * dvp; x++) dv_acc[x] = 0;
    for (int64_t q0 = j->a.causal ? k0 / ATTN_BR * ATTN_BR : 0; q0 < tq; q0 += ATTN_BR) {
      const int64_t rows = tq - q0 < ATTN_BR ? tq - q0 : ATTN_BR;
      SFX(pad_rows)(qs, dp, ATTN_BR, q + q0 * d, rows, d);
      SFX(pad_rows)(gs, dvp, ATTN_BR, g + q0 * dv, rows, dv);
      SFX(tile_gemm)(j, p, ATTN_BC, qs, dp, 1, kt, ATTN_BC, ATTN_BR, ATTN_BC, dp, false);
      SFX(tile_gemm)(j, dpt, ATTN_BC, gs, dvp, 1, vt, ATTN_BC, ATTN_BR, ATTN_BC, dvp, false);
      /* P (zeros where masked or past the rows), then dV += (P Z)^T G */
      for (int64_t r = 0; r < ATTN_BR; r++) {
        const int64_t i = q0 + r, live = r < rows ? SFX(live_keys)(j, i, k0, cols) : 0;
        T *pr = p + r * ATTN_BC, *zr = pz + r * ATTN_BC;
        for (int64_t c = live; c < ATTN_BC; c++) pr[c] = -(T)INFINITY;
        exp_row(pr, scale, live > 0 ? lse[i] : 0);
        if (!dropout) continue;
        for (int64_t c = 0; c < ATTN_BC; c++) zr[c] = 0;
        if (live > 0) SFX(drop_row)
        (zr, j->a.seed, j->a.offset + (uint64_t)((n * tq + i) * tk + k0), live, below, keep);
        for (int64_t c = 0; c < ATTN_BC; c++) { /* dP = Z (G V^T), zr = P Z */
          dpt[r * ATTN_BC + c] *= zr[c];
          zr[c] *= pr[c];
        }
      }
      SFX(tile_gemm)
      (j, dv_acc, dvp, dropout ? pz : p, 1, ATTN_BC, gs, dvp, ATTN_BC, dvp, ATTN_BR, true);
      /* dS = P (dP - Delta) scale over p, then dQ += dS K and dK += dS^T Q */
      for (int64_t r = 0; r < rows; r++) {
        const T di = delta[q0 + r];
        T *pr = p + r * ATTN_BC;
        const T *dr = dpt + r * ATTN_BC;
        for (int64_t c = 0; c < ATTN_BC; c++) pr[c] = pr[c] * (dr[c] - di) * scale;
      }
      SFX(tile_gemm)(j, dq_acc + q0 * dp, dp, p, ATTN_BC, 1, kb, dp, ATTN_BR, dp, ATTN_BC, true);
      SFX(tile_gemm)(j, dk_acc, dp, p, 1, ATTN_BC, qs, dp, ATTN_BC, dp, ATTN_BR, true);
    }
    for (int64_t c = 0; c < cols; c++) {
      for (int64_t x = 0; x < d; x++) dk[(k0 + c) * d + x] = dk_acc[c * dp + x];
      for (int64_t x = 0; x < dv; x++) dvo[(k0 + c) * dv + x] = dv_acc[c * dvp + x];
    }
  }
  for (int64_t i = 0; i < tq; i++)
    for (int64_t x = 0; x < d; x++) dq[i * d + x] = dq_acc[i * dp + x];
}
