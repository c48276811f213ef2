/* gemm through BLIS's typed API, which takes a row and a column stride for every matrix:
 * transposed and sliced views are passed in place. An operand is copied to a contiguous
 * buffer only when BLIS cannot take its strides (a zero or negative stride, or
 * overlapping rows/columns), would run its slow general-stride path (no unit stride in
 * either dim), or could read past the memory tg owns.
 *
 * That last case is BLIS 0.9's: its haswell/zen small-matrix (sup) kernels read past an
 * operand, by up to a 16-byte vector (flame/blis#635) or by one whole leading-dimension
 * stride (the k-edge loop of sgemmsup_rd_haswell_asm_1x16n loads the row after A's last,
 * flame/blis#821). Every CPU storage ends in an owned pad (tg__cpu_tail_pad) that covers
 * both for rows up to 16 KiB; an operand with less room than that behind it is copied
 * into a buffer that has it. tests/ops/test_blis_guard.c ends every storage at a guard page
 * and runs GEMMs and the LLTM on each kernel set the CPU executes. */
#include <blis.h>
#include <string.h>

#include "ops/cpu/cpu_internal.h"
#include "ops/cpu/gemm_engine.h"
#include "ops/cpu/thread_pool.h"
#include "tensor/checked.h"
#include "tensor/host_memory.h"

typedef struct matrix {
  char *data;
  int64_t rows, cols;
  int64_t rs, cs; /* in elements */
  size_t slack;   /* owned bytes after the last element */
} matrix;

/* What a BLIS sup kernel may read past a matrix: a vector, plus its leading dimension. */
#define TG_BLIS_OVERREAD_VECTOR 64

/* Owned bytes behind t's highest element. */
static size_t slack_after(const tg_tensor *t) {
  const size_t elsize = tg_dtype_size(t->dtype);
  const int64_t capacity = (int64_t)(t->storage->capacity / elsize);
  int64_t lo, hi;
  if (tg__span_check(t->ndim, t->sizes, t->strides, t->offset, capacity, &lo, &hi) != TG__SPAN_OK)
    return 0;
  return t->storage->capacity - (size_t)(hi + 1) * elsize;
}

static matrix matrix_of(const tg_tensor *t) {
  matrix m = {tg_cpu_data(t), t->sizes[0],   t->sizes[1],
              t->strides[0],  t->strides[1], slack_after(t)};
  return m;
}

/* Bytes a kernel may read past m: a vector, and past A or B also one leading dimension.
 * Called only for matrices BLIS takes, whose strides lie inside their storage. */
static size_t overread(const matrix *m, bool with_leading_dim, size_t elsize) {
  const int64_t ld = m->rs > m->cs ? m->rs : m->cs;
  return TG_BLIS_OVERREAD_VECTOR + (with_leading_dim ? (size_t)ld * elsize : 0);
}

/* The stride of a size-1 dim is never used to address anything; pick the value BLIS's
 * stride checks want (row-major when the other dim is unit-stride, else column-major). */
static void normalize_unit_dims(matrix *m) {
  if (m->rows == 1 && m->cols == 1) {
    m->rs = 1;
    m->cs = 1;
  } else if (m->rows == 1) {
    m->rs = m->cs == 1 ? m->cols : 1;
  } else if (m->cols == 1) {
    m->cs = m->rs == 1 ? m->rows : 1;
  }
}

/* Whether BLIS can use m's strides directly on its fast (row- or column-major) path:
 * positive strides, one of them unit, and rows/columns that do not overlap (the rules of
 * bli_check_matrix_strides, minus general stride). */
static bool blis_takes(const matrix *m) {
  if (m->rows == 1 && m->cols == 1) return true;
  if (m->rs <= 0 || m->cs <= 0) return false;
  if (m->rs == 1 && m->cs == 1) return m->rows == 1 || m->cols == 1;
  if (m->cs == 1) return m->rs >= m->cols;
  if (m->rs == 1) return m->cs >= m->rows;
  return false;
}

/* Copies between a strided matrix and a row-major contiguous one of the same sizes. */
/* Tiles of 32 x 32 elements, so that a transposing copy reads and writes whole cache lines. */
#define TG_GEMM_COPY_TILE 32

#define TG_GEMM_COPY_TILES(T)                                                                      \
  for (int64_t i0 = 0; i0 < src->rows; i0 += TG_GEMM_COPY_TILE)                                    \
    for (int64_t j0 = 0; j0 < src->cols; j0 += TG_GEMM_COPY_TILE) {                                \
      const int64_t i1 = i0 + TG_GEMM_COPY_TILE < src->rows ? i0 + TG_GEMM_COPY_TILE : src->rows;  \
      const int64_t j1 = j0 + TG_GEMM_COPY_TILE < src->cols ? j0 + TG_GEMM_COPY_TILE : src->cols;  \
      for (int64_t j = j0; j < j1; j++)                                                            \
        for (int64_t i = i0; i < i1; i++)                                                          \
          ((T *)dst->data)[i * dst->rs + j * dst->cs] =                                            \
              ((const T *)src->data)[i * src->rs + j * src->cs];                                   \
    }

static void copy_matrix(const matrix *dst, const matrix *src, size_t elsize) {
  if (elsize == sizeof(float)) {
    TG_GEMM_COPY_TILES(float)
  } else {
    TG_GEMM_COPY_TILES(double)
  }
}

/* A row-major buffer shaped like m (64-byte aligned, NULL on failure), with the room behind
 * it that BLIS may read: one more row or column, and a vector. NULL too when that does not
 * fit int64 bytes, as for an operand expanded (stride 0) past any storage's size. */
static matrix contiguous_like(const matrix *m, size_t elsize) {
  const int64_t longer = m->rows > m->cols ? m->rows : m->cols;
  matrix c = {NULL, m->rows, m->cols, m->cols, 1, 0};
  int64_t elems, bytes;
  if (!tg__mul_ovf(m->rows, m->cols, &elems) && !tg__add_ovf(elems, longer, &elems) &&
      !tg__mul_ovf(elems, (int64_t)elsize, &bytes) &&
      !tg__add_ovf(bytes, TG_BLIS_OVERREAD_VECTOR, &bytes)) {
    c.data = tg__host_aligned_alloc(64, (size_t)bytes);
    c.slack = (size_t)(longer * (int64_t)elsize) + TG_BLIS_OVERREAD_VECTOR;
  }
  normalize_unit_dims(&c);
  return c;
}

/* out = beta*out for k == 0, where BLIS has nothing to multiply, and for alpha == 0, where
 * BLAS (and PyTorch) skip the product: inf and NaN in a or b must not reach out. beta == 0
 * writes zeros whatever out held (NaN included). */
static tg_status scale_output(tg_tensor *out, double beta) {
  if (beta == 0) return tg_cpu_fill(out, 0);
  if (beta == 1) return TG_OK;
  return tg_cpu_unary(TG_UNARY_MUL_SCALAR, beta, 0, out, out);
}

/* The product on the engine chosen for its class (gemm_choice.c), or where that engine does
 * not take it (a layout, libxsmm on more than one thread) on the engine tg's built-in rules
 * name; BLIS's own set takes everything. Small products run on one thread, as do all when
 * tg's count is 1, inside a pool chunk or while the cores are contended (cpu_contention.c),
 * and those a few times the threshold while the pool's workers sleep (TG_CPU_ASLEEP_FACTOR);
 * the others run as blocks on tg's thread pool (gemm_engines.c). */
static tg_status run_gemm(tg_dtype dtype, const matrix *c, const matrix *a, const matrix *b,
                          int64_t k, double alpha, double beta) {
  int64_t macs;
  if (tg__mul_ovf(c->rows, c->cols, &macs) || tg__mul_ovf(macs, k, &macs)) macs = INT64_MAX;
  const int threads = tg_get_num_threads();
  /* Inside a pool chunk (bmm's batch split across the pool) the other threads are busy. */
  const bool one_thread = macs < TG_CPU_GEMM_PARALLEL_MIN_MACS || threads == 1 ||
                          tg_cpu_pool_busy_here() || tg_cpu_contended() ||
                          tg_cpu_too_small_to_wake(macs, TG_CPU_GEMM_PARALLEL_MIN_MACS);
  tg_gemm_problem p = {
      dtype, c->rows, c->cols, k,     c->data, c->rs, c->cs, a->data,
      a->rs, a->cs,   b->data, b->rs, b->cs,   alpha, beta,  one_thread ? 1 : threads};
  tg_status st;
  const int class_engine = tg__gemm_engine_choice(&p, &st);
  matrix row_major_a = {0};
  if (st == TG_OK) {
    const int64_t t0 = one_thread ? 0 : tg_cpu_now_ns();
    int engine = tg__gemm_shape_engine(&p, class_engine); /* per exact shape */
    /* BLIS's haswell/zen small-matrix kernels run a column-major left operand of many rows
     * and a short inner dimension up to 1.3x slower than a row-major one (the weight gradient
     * [1536, 128] @ [128, 768], 2 threads: 1818 against 1404 us; 1 thread 3664 against 2806):
     * on a BLIS set with that path on, such a product pays for a row-major copy of it (m*k
     * elements against m*n*k multiply-adds, n of 64 or more). With k of 256 or more (BLIS's
     * large-matrix path, which packs anyway) or few rows the copy measured slower than none,
     * and a packed engine packs anyway (the copy cost blis-zen3-packed 4.8 against 4.0 ms at
     * that product). No memory for it: the slower layout. */
    const tg_gemm_engine *e = tg__gemm_engine_at(engine < 0 ? 0 : engine);
    if (e && e->kind == TG_GEMM_ENGINE_BLIS && !e->blis_packed && a->rs == 1 && a->cs > 1 &&
        a->rows >= 256 && k < 256 && c->cols >= 64 && macs >= TG_BLIS_LARGE_MIN_MACS) {
      row_major_a = contiguous_like(a, tg_dtype_size(dtype));
      if (row_major_a.data) {
        copy_matrix(&row_major_a, a, tg_dtype_size(dtype));
        p.a = row_major_a.data, p.a_rs = row_major_a.rs, p.a_cs = row_major_a.cs;
      }
    }
    if (engine < 0 || !tg__gemm_engine_run(engine, &p)) {
      engine = tg__gemm_builtin_engine(&p);
      if (!tg__gemm_engine_run(engine, &p)) tg__gemm_engine_run(0, &p); /* BLIS takes all */
    }
    if (!one_thread) tg_cpu_note_parallel_gemm(macs, tg_cpu_now_ns() - t0);
  }
  tg__host_free(row_major_a.data);
  return st;
}

tg_status tg_cpu_gemm(tg_tensor *out, const tg_tensor *a, const tg_tensor *b, double alpha,
                      double beta) {
  if ((out->dtype != TG_F32 && out->dtype != TG_F64) || a->dtype != out->dtype ||
      b->dtype != out->dtype) {
    tg_dtype bad = a->dtype != out->dtype   ? a->dtype
                   : b->dtype != out->dtype ? b->dtype
                                            : out->dtype;
    return tg_set_error(TG_ERR_DTYPE, "gemm: dtype %s is not supported (F32, F64, all alike)",
                        tg_dtype_name(bad));
  }
  if (out->ndim != 2 || a->ndim != 2 || b->ndim != 2 || a->sizes[1] != b->sizes[0] ||
      out->sizes[0] != a->sizes[0] || out->sizes[1] != b->sizes[1]) {
    return tg_set_error(TG_ERR_SHAPE, "gemm: out %s = a %s @ b %s does not fit", tg__sizes_str(out),
                        tg__sizes_str(a), tg__sizes_str(b));
  }
  const int64_t m = out->sizes[0], n = out->sizes[1], k = a->sizes[1];
  if (m == 0 || n == 0) return TG_OK;
  if (k == 0 || alpha == 0) return scale_output(out, beta);
  if (tg_cpu_blis_ready("gemm") != TG_OK) return tg_last_error();

  const size_t elsize = tg_dtype_size(out->dtype);
  matrix ma = matrix_of(a), mb = matrix_of(b), mc = matrix_of(out);
  normalize_unit_dims(&ma);
  normalize_unit_dims(&mb);
  normalize_unit_dims(&mc);
  /* Operands BLIS cannot take as they are, or that lack the room behind them that BLIS may
   * read, go through contiguous copies. */
  matrix ca = ma, cb = mb, cc = mc;
  bool copy_a = !blis_takes(&ma) || ma.slack < overread(&ma, true, elsize);
  bool copy_b = !blis_takes(&mb) || mb.slack < overread(&mb, true, elsize);
  bool copy_c = !blis_takes(&mc) || mc.slack < overread(&mc, false, elsize);
  if (copy_a) ca = contiguous_like(&ma, elsize);
  if (copy_b) cb = contiguous_like(&mb, elsize);
  if (copy_c) cc = contiguous_like(&mc, elsize);
  tg_status st = TG_OK;
  if ((copy_a && !ca.data) || (copy_b && !cb.data) || (copy_c && !cc.data)) {
    st = tg_set_error(TG_ERR_MEMORY, "gemm: out of memory for a contiguous copy of an operand");
  } else {
    if (copy_a) copy_matrix(&ca, &ma, elsize);
    if (copy_b) copy_matrix(&cb, &mb, elsize);
    if (copy_c && beta != 0) copy_matrix(&cc, &mc, elsize);
    tg_cpu_blis_threads_init();
    st = run_gemm(out->dtype, &cc, &ca, &cb, k, alpha, beta);
    if (copy_c && st == TG_OK) copy_matrix(&mc, &cc, elsize);
  }
  if (copy_a) tg__host_free(ca.data);
  if (copy_b) tg__host_free(cb.data);
  if (copy_c) tg__host_free(cc.data);
  return st;
}

tg_status tg_cpu_gemm_f32_raw(int64_t m, int64_t n, int64_t k, const float *a, int64_t a_rs,
                              int64_t a_cs, const float *b, int64_t b_rs, int64_t b_cs, float *c,
                              int64_t c_rs, double beta) {
  if (m == 0 || n == 0) return TG_OK;
  if (tg_cpu_blis_ready("gemm") != TG_OK) return tg_last_error();
  const matrix ma = {(char *)a, m, k, a_rs, a_cs, 0}, mb = {(char *)b, k, n, b_rs, b_cs, 0},
               mc = {(char *)c, m, n, c_rs, 1, 0};
  if (k == 0) {
    for (int64_t i = 0; i < m && beta == 0; i++) memset(c + i * c_rs, 0, (size_t)n * sizeof(float));
    return TG_OK;
  }
  tg_cpu_blis_threads_init();
  return run_gemm(TG_F32, &mc, &ma, &mb, k, 1.0, beta);
}
