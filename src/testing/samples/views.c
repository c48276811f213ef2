/* Sample inputs of the view ops (ops/def/views.def) and of the backwards of slice and
 * select. Their ints are what the front ends pass: dims already wrapped, slice bounds
 * already clamped. */
#include "testing/samples/samples_internal.h"

/* One sample: x (requires grad) in layout, then the ints. */
static void add(tg__samples *b, const char *label, tg__layout layout, int ndim,
                const int64_t *sizes, int n_ints, const int64_t *ints) {
  tg_sample *s = tg__sample_new(b, label);
  tg__sample_input(b, s, tg__sample_tensor(b->req, layout, TG__ANY, true, ndim, sizes));
  for (int k = 0; k < n_ints; k++) tg__sample_int(s, ints[k]);
}
#define ADD(b, label, layout, shape, ints) add(b, label, layout, TG_SHAPE shape, TG__INTS ints)
#define ADD0(b, label, layout, shape) add(b, label, layout, TG_SHAPE shape, 0, NULL)

#define BENCH(b, ints)                                                                             \
  if ((b)->req->bench) {                                                                           \
    ADD(b, "bench", TG__CONTIGUOUS, (1024, TG__BENCH_NUMEL / 1024), ints);                         \
    return tg__samples_end(b);                                                                     \
  }

int tg__samples_view(const tg_sample_request *r, tg_sample *out) {
  tg__samples b = tg__samples_begin(r, out);
  BENCH(&b, (TG__BENCH_NUMEL / 512, 512))
  ADD(&b, "split a dim", TG__CONTIGUOUS, (2, 6), (2, 3, 2));
  ADD(&b, "merge dims", TG__CONTIGUOUS, (2, 3, 4), (6, 4));
  ADD(&b, "0-dim to [1]", TG__CONTIGUOUS, (), (1));
  ADD0(&b, "[1, 1] to 0-dim", TG__CONTIGUOUS, (1, 1));
  ADD(&b, "transposed, split its last dim", TG__TRANSPOSED, (3, 4), (3, 2, 2));
  ADD(&b, "stepped, add a size-1 dim", TG__STEPPED, (2, 3), (2, 3, 1));
  return tg__samples_end(&b);
}

int tg__samples_permute(const tg_sample_request *r, tg_sample *out) {
  tg__samples b = tg__samples_begin(r, out);
  BENCH(&b, (1, 0))
  ADD(&b, "3-D", TG__CONTIGUOUS, (2, 3, 4), (2, 0, 1));
  ADD(&b, "transposed back", TG__TRANSPOSED, (3, 4), (1, 0));
  ADD(&b, "identity", TG__STEPPED, (2, 3), (0, 1));
  ADD0(&b, "0-dim", TG__CONTIGUOUS, ());
  return tg__samples_end(&b);
}

/* ints: dim, start, end, step */
int tg__samples_slice(const tg_sample_request *r, tg_sample *out) {
  tg__samples b = tg__samples_begin(r, out);
  BENCH(&b, (1, 0, TG__BENCH_NUMEL / 1024, 2))
  ADD(&b, "rows", TG__CONTIGUOUS, (5, 4), (0, 1, 4, 1));
  ADD(&b, "every other column", TG__CONTIGUOUS, (3, 4), (1, 0, 4, 2));
  ADD(&b, "step 3, ragged end", TG__CONTIGUOUS, (7), (0, 1, 7, 3));
  ADD(&b, "transposed", TG__TRANSPOSED, (3, 4), (1, 1, 3, 1));
  ADD(&b, "stepped", TG__STEPPED, (2, 5), (1, 2, 5, 2));
  ADD(&b, "size-1 dim", TG__CONTIGUOUS, (1, 3), (0, 0, 1, 1));
  return tg__samples_end(&b);
}

/* ints: dim, index */
int tg__samples_select(const tg_sample_request *r, tg_sample *out) {
  tg__samples b = tg__samples_begin(r, out);
  BENCH(&b, (1, 7))
  ADD(&b, "row", TG__CONTIGUOUS, (3, 4), (0, 1));
  ADD(&b, "last column", TG__CONTIGUOUS, (3, 4), (1, 3));
  ADD(&b, "1-D to 0-dim", TG__CONTIGUOUS, (4), (0, 2));
  ADD(&b, "transposed", TG__TRANSPOSED, (3, 4), (1, 0));
  ADD(&b, "stepped, middle dim", TG__STEPPED, (2, 3, 2), (1, 2));
  return tg__samples_end(&b);
}

/* ints: the new sizes (no -1) */
int tg__samples_expand(const tg_sample_request *r, tg_sample *out) {
  tg__samples b = tg__samples_begin(r, out);
  if (r->bench) {
    ADD(&b, "bench", TG__CONTIGUOUS, (1, 1024), (TG__BENCH_NUMEL / 1024, 1024));
    return tg__samples_end(&b);
  }
  ADD(&b, "column", TG__CONTIGUOUS, (3, 1), (3, 4));
  ADD(&b, "new leading dim", TG__CONTIGUOUS, (4), (2, 4));
  ADD(&b, "0-dim", TG__CONTIGUOUS, (), (2, 3));
  ADD(&b, "size-1 dims, new dim", TG__CONTIGUOUS, (1, 1), (2, 1, 5));
  ADD(&b, "transposed", TG__TRANSPOSED, (1, 3), (2, 4, 3));
  ADD(&b, "nothing to grow", TG__STEPPED, (2, 3), (2, 3));
  return tg__samples_end(&b);
}

/* ints: dim, start, end, step, then the sizes of the sliced tensor; input: the gradient of
 * the slice. */
int tg__samples_slice_backward(const tg_sample_request *r, tg_sample *out) {
  tg__samples b = tg__samples_begin(r, out);
  if (r->bench) {
    ADD(&b, "bench", TG__CONTIGUOUS, (1024, TG__BENCH_NUMEL / 2048),
        (1, 0, TG__BENCH_NUMEL / 1024, 2, 1024, TG__BENCH_NUMEL / 1024));
    return tg__samples_end(&b);
  }
  ADD(&b, "rows", TG__CONTIGUOUS, (3, 4), (0, 1, 4, 1, 5, 4));
  ADD(&b, "every other column", TG__CONTIGUOUS, (3, 2), (1, 0, 4, 2, 3, 4));
  ADD(&b, "step 3", TG__TRANSPOSED, (2, 2), (1, 1, 7, 3, 2, 7));
  ADD(&b, "1-D", TG__CONTIGUOUS, (2), (0, 2, 4, 1, 6));
  return tg__samples_end(&b);
}

/* ints: dim, index, then the sizes of the tensor selected from; input: the gradient of the
 * selection. */
int tg__samples_select_backward(const tg_sample_request *r, tg_sample *out) {
  tg__samples b = tg__samples_begin(r, out);
  if (r->bench) {
    ADD(&b, "bench", TG__CONTIGUOUS, (1024), (1, 7, 1024, TG__BENCH_NUMEL / 1024));
    return tg__samples_end(&b);
  }
  ADD(&b, "row", TG__CONTIGUOUS, (4), (0, 1, 3, 4));
  ADD(&b, "column", TG__STEPPED, (3), (1, 3, 3, 4));
  ADD(&b, "0-dim into 1-D", TG__CONTIGUOUS, (), (0, 2, 5));
  ADD(&b, "transposed, 3-D", TG__TRANSPOSED, (2, 3), (1, 1, 2, 2, 3));
  return tg__samples_end(&b);
}

/* ints: ndim, sizes, strides, offset (from the storage's start). A stepped [2, 3] input is
 * every other element, from the second, of a [2, 6] storage: offset 1, strides [6, 2]. */
int tg__samples_as_strided(const tg_sample_request *r, tg_sample *out) {
  tg__samples b = tg__samples_begin(r, out);
  if (r->bench) {
    ADD(&b, "bench", TG__CONTIGUOUS, (1024, TG__BENCH_NUMEL / 1024),
        (2, TG__BENCH_NUMEL / 1024, 1024, 1, TG__BENCH_NUMEL / 1024, 0));
    return tg__samples_end(&b);
  }
  ADD(&b, "2x2 window at an offset", TG__CONTIGUOUS, (3, 4), (2, 2, 2, 4, 1, 5));
  ADD(&b, "overlapping 3x3 patches (im2col)", TG__CONTIGUOUS, (4, 4),
      (4, 2, 2, 3, 3, 4, 1, 4, 1, 0));
  ADD(&b, "stride 0 (broadcast)", TG__CONTIGUOUS, (3), (2, 2, 3, 0, 1, 0));
  ADD(&b, "transposed input read in storage order", TG__TRANSPOSED, (3, 4), (2, 2, 3, 3, 1, 0));
  ADD(&b, "stepped input, its own elements", TG__STEPPED, (2, 3), (1, 3, 4, 1));
  ADD(&b, "stepped input, storage it does not cover", TG__STEPPED, (2, 3), (1, 3, 4, 0));
  ADD(&b, "0-dim", TG__CONTIGUOUS, (2, 2), (0, 3));
  return tg__samples_end(&b);
}
