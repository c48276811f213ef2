/* DLPack export and import (tg/dlpack.h): shared memory both ways, geometry kept, every bad
 * field refused with the managed tensor left to its owner, deleters run exactly once. Built
 * twice: against tg (no CUDA here) and against the emulated CUDA build
 * (test_dlpack_cuda_emu, tests/io/CMakeLists.txt), where the CUDA tests run. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <dlpack/dlpack.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "testutil.h"

#include "alloc_sweep.h"
#include "tg/dlpack.h"

static const tg_dtype all_dtypes[] = {TG_F32, TG_F64, TG_I64};

/* ---- a managed tensor made by hand over a caller's array; its deleter only counts ---- */

static int hand_deletes;
static void count_hand_delete(DLManagedTensor *m) {
  (void)m;
  hand_deletes++;
}

typedef struct hand {
  DLManagedTensor m;
  int64_t shape[TG_MAX_DIMS + 2];
  int64_t strides[TG_MAX_DIMS + 2];
} hand;

/* A compact row-major tensor (NULL strides) of ndim dims over data; fields are then edited. */
static hand *hand_new(hand *h, void *data, DLDataType dtype, int ndim, const int64_t *shape) {
  memset(h, 0, sizeof *h);
  h->m.dl_tensor.data = data;
  h->m.dl_tensor.device = (DLDevice){kDLCPU, 0};
  h->m.dl_tensor.ndim = ndim;
  h->m.dl_tensor.dtype = dtype;
  if (ndim > 0) memcpy(h->shape, shape, sizeof(int64_t) * (size_t)ndim);
  h->m.dl_tensor.shape = h->shape;
  h->m.deleter = count_hand_delete;
  return h;
}
#define DL_F32 ((DLDataType){kDLFloat, 32, 1})
#define DL_F64 ((DLDataType){kDLFloat, 64, 1})
#define DL_I64 ((DLDataType){kDLInt, 64, 1})

/* ---- a managed tensor that wraps another (tg's export) and counts its own deletion: it is
 * not tg's, so tg_from_dlpack takes the foreign path ---- */

static int wrap_deletes;
typedef struct wrapped {
  DLManagedTensor m;
  DLManagedTensor *inner;
} wrapped;
static void count_wrapped_delete(DLManagedTensor *m) {
  wrapped *w = m->manager_ctx;
  wrap_deletes++;
  w->inner->deleter(w->inner);
  free(w);
}
static DLManagedTensor *wrap(DLManagedTensor *inner) {
  wrapped *w = malloc(sizeof *w);
  cr_assert(w);
  w->m.dl_tensor = inner->dl_tensor;
  w->m.manager_ctx = w;
  w->m.deleter = count_wrapped_delete;
  w->inner = inner;
  return &w->m;
}

/* t -> DLPack -> (wrapped) -> tg, asserting success. */
static tg_tensor *through_dlpack(const tg_tensor *t, bool foreign) {
  DLManagedTensor *m = tg_to_dlpack(t);
  cr_assert(m, "tg_to_dlpack: %s", tg_last_error_message());
  tg_tensor *u = tg_from_dlpack(foreign ? wrap(m) : m);
  cr_assert(u, "tg_from_dlpack: %s", tg_last_error_message());
  return u;
}

static void assert_same_geometry(const tg_tensor *u, const tg_tensor *t) {
  cr_assert_eq(tg_ndim(u), tg_ndim(t));
  cr_assert_eq(tg_tensor_dtype(u), tg_tensor_dtype(t));
  cr_assert(tg_device_equal(tg_tensor_device(u), tg_tensor_device(t)));
  for (int d = 0; d < tg_ndim(t); d++) {
    cr_assert_eq(tg_sizes(u)[d], tg_sizes(t)[d], "size %d", d);
    cr_assert_eq(tg_strides(u)[d], tg_strides(t)[d], "stride %d: %lld vs %lld", d,
                 (long long)tg_strides(u)[d], (long long)tg_strides(t)[d]);
  }
  cr_assert_eq(tg_data_ptr(u), tg_data_ptr(t), "element 0 moved");
}

/* ---- export ---- */

TG_TEST(dlpack, export_describes_the_tensor) {
  const DLDataType want[] = {DL_F32, DL_F64, DL_I64};
  for (int k = 0; k < 3; k++) {
    tg_scope sc = tg_scope_begin();
    tg_tensor *t = tg_view(tg_arange(0, 6, 1, TG_OPTS(.dtype = all_dtypes[k])), TG_SHAPE(2, 3));
    tg_tensor *s = tg_narrow(tg_t(t), 0, 1, 2); /* [2, 2] strides [1, 3] offset 1 */
    DLManagedTensor *m = tg_to_dlpack(s);
    cr_assert(m, "%s", tg_last_error_message());
    const DLTensor *dl = &m->dl_tensor;
    cr_assert_eq(dl->ndim, 2);
    cr_assert_eq(dl->shape[0], 2);
    cr_assert_eq(dl->shape[1], 2);
    cr_assert_eq(dl->strides[0], 1);
    cr_assert_eq(dl->strides[1], 3);
    cr_assert_eq(dl->byte_offset, 0);
    cr_assert_eq(dl->data, tg_data_ptr(s), "data is element 0");
    cr_assert_eq(dl->device.device_type, kDLCPU);
    cr_assert_eq(dl->device.device_id, 0);
    cr_assert_eq(dl->dtype.code, want[k].code);
    cr_assert_eq(dl->dtype.bits, want[k].bits);
    cr_assert_eq(dl->dtype.lanes, 1);
    cr_assert_not_null(m->deleter);
    tg_scope_end(sc);
    /* The export keeps the storage alive after every tensor is gone. */
    cr_assert_gt(tg_live_objects(), 0);
    m->deleter(m);
    cr_assert_eq(tg_live_objects(), 0);
  }
}

TG_TEST(dlpack, export_keeps_memory_readable_after_release) {
  tg_scope sc = tg_scope_begin();
  DLManagedTensor *m = tg_to_dlpack(tg_arange(0, 5, 1, TG_OPTS(.dtype = TG_F64)));
  tg_scope_end(sc);
  cr_assert(m);
  const double *v = m->dl_tensor.data;
  for (int i = 0; i < 5; i++) cr_assert_eq(v[i], i);
  m->deleter(m);
  cr_assert_eq(tg_live_objects(), 0);
}

TG_TEST(dlpack, export_null_is_an_error) {
  cr_assert_null(tg_to_dlpack(NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_to_dlpack", "t is NULL");
}

/* ---- round trips ---- */

static void round_trip_shares_memory(bool foreign) {
  for (int k = 0; k < 3; k++) {
    int64_t live = tg_live_objects();
    wrap_deletes = 0;
    tg_scope sc = tg_scope_begin();
    tg_tensor *t = tg_view(tg_arange(0, 12, 1, TG_OPTS(.dtype = all_dtypes[k])), TG_SHAPE(3, 4));
    tg_tensor *u = through_dlpack(t, foreign);
    assert_same_geometry(u, t);
    tg_assert_close(u, t, 0, 0);
    cr_assert_eq(tg_set(u, (int64_t[]){1, 2}, 42), TG_OK);
    double v;
    cr_assert_eq(tg_get(t, (int64_t[]){1, 2}, &v), TG_OK);
    cr_assert_eq(v, 42, "a write through the import shows in the original");
    cr_assert_eq(tg_set(t, (int64_t[]){2, 3}, -7), TG_OK);
    cr_assert_eq(tg_get(u, (int64_t[]){2, 3}, &v), TG_OK);
    cr_assert_eq(v, -7, "and the other way");
    tg_scope_end(sc);
    cr_assert_eq(wrap_deletes, foreign ? 1 : 0);
    cr_assert_eq(tg_live_objects(), live);
  }
}

TG_TEST(dlpack, round_trip_through_a_foreign_owner_shares_memory) {
  round_trip_shares_memory(true);
}
TG_TEST(dlpack, round_trip_of_its_own_export_shares_memory) { round_trip_shares_memory(false); }

TG_TEST(dlpack, own_export_comes_back_on_its_storage) {
  tg_tensor *t = tg_arange(0, 4, 1, TG_OPTS(.dtype = TG_F64));
  tg_tensor *u = through_dlpack(t, false);
  cr_assert(tg_shares_storage(t, u), "same storage: same version counter, no second owner");
  uint64_t before = tg_version(t);
  cr_assert_eq(tg_fill_(u, 1), TG_OK);
  cr_assert_neq(tg_version(t), before);
  tg_tensor *w = through_dlpack(t, true);
  cr_assert(!tg_shares_storage(t, w), "a foreign owner's memory gets a storage of its own");
}

TG_TEST(dlpack, views_keep_strides_and_offset) {
  for (int k = 0; k < 3; k++) {
    for (int foreign = 0; foreign < 2; foreign++) {
      tg_scope sc = tg_scope_begin();
      tg_tensor *base =
          tg_view(tg_arange(0, 60, 1, TG_OPTS(.dtype = all_dtypes[k])), TG_SHAPE(3, 4, 5));
      tg_tensor *views[] = {
          tg_transpose(base, 0, 2),
          tg_slice(base, 2, 1, 5, 2),
          tg_select(tg_permute(base, 3, (int[]){1, 2, 0}), 1, 3),
          tg_expand(tg_slice(base, 0, 1, 2, 1), 3, (int64_t[]){4, 4, 5}),
          tg_narrow(tg_slice(base, 1, 1, 4, 2), 2, 2, 3),
      };
      for (size_t v = 0; v < sizeof views / sizeof *views; v++) {
        cr_assert(views[v], "%s", tg_last_error_message());
        tg_tensor *u = through_dlpack(views[v], foreign);
        assert_same_geometry(u, views[v]);
        if (!foreign) cr_assert_eq(tg_offset(u), tg_offset(views[v]), "on its own storage");
        tg_assert_close(u, views[v], 0, 0);
      }
      tg_scope_end(sc);
    }
  }
}

TG_TEST(dlpack, zero_dim_and_empty_tensors) {
  for (int foreign = 0; foreign < 2; foreign++) {
    tg_scope sc = tg_scope_begin();
    tg_tensor *s = tg_full(0, NULL, 3.5, TG_OPTS(.dtype = TG_F64));
    DLManagedTensor *m = tg_to_dlpack(s);
    cr_assert_eq(m->dl_tensor.ndim, 0);
    tg_tensor *u = tg_from_dlpack(foreign ? wrap(m) : m);
    cr_assert_eq(tg_ndim(u), 0);
    double v;
    cr_assert_eq(tg_item(u, &v), TG_OK);
    cr_assert_eq(v, 3.5);

    tg_tensor *e = tg_zeros(TG_SHAPE(2, 0, 3), TG_OPTS(.dtype = TG_I64));
    m = tg_to_dlpack(e);
    cr_assert_eq(m->dl_tensor.ndim, 3);
    cr_assert_eq(m->dl_tensor.shape[1], 0);
    tg_tensor *f = tg_from_dlpack(foreign ? wrap(m) : m);
    cr_assert(f, "%s", tg_last_error_message());
    tg_assert_sizes(f, 2, 0, 3);
    cr_assert_eq(tg_numel(f), 0);
    tg_tensor *g = tg_add(tg_to_dtype(f, TG_F32), tg_ones(TG_SHAPE(3), TG_OPTS_DEFAULT));
    cr_assert(g, "ops take an empty import: %s", tg_last_error_message());
    tg_scope_end(sc);
  }
}

/* ---- the deleter ---- */

TG_TEST(dlpack, deleter_runs_once_when_the_last_view_goes) {
  int64_t live = tg_live_objects();
  double data[6] = {1, 2, 3, 4, 5, 6};
  hand h;
  hand_new(&h, data, DL_F64, 2, (int64_t[]){2, 3});
  hand_deletes = 0;
  tg_tensor *kept;
  tg_scope sc = tg_scope_begin();
  tg_tensor *t = tg_from_dlpack(&h.m);
  cr_assert(t, "%s", tg_last_error_message());
  cr_assert_eq(tg_stride(t, 0), 3, "NULL strides: compact row-major");
  cr_assert_eq(tg_data_ptr(t), data, "no copy");
  tg_test_expect_values(t, 6, (double[]){1, 2, 3, 4, 5, 6}, 0);
  kept = tg_retain(tg_select(tg_t(t), 0, 2)); /* [3, 6] */
  tg_scope_end(sc);
  cr_assert_eq(hand_deletes, 0, "a view is still alive");
  tg_test_expect_values(kept, 2, (double[]){3, 6}, 0);
  data[5] = 60;
  tg_test_expect_values(kept, 2, (double[]){3, 60}, 0);
  tg_release(kept);
  cr_assert_eq(hand_deletes, 1);
  cr_assert_eq(tg_live_objects(), live);
}

TG_TEST(dlpack, null_deleter_is_allowed) {
  float data[2] = {1, 2};
  hand h;
  hand_new(&h, data, DL_F32, 1, (int64_t[]){2});
  h.m.deleter = NULL;
  tg_scope sc = tg_scope_begin();
  tg_tensor *t = tg_from_dlpack(&h.m);
  tg_test_expect_values(t, 2, (double[]){1, 2}, 0);
  tg_scope_end(sc);
}

/* ---- foreign layouts ---- */

TG_TEST(dlpack, byte_offset_and_negative_strides) {
  int64_t data[12];
  for (int i = 0; i < 12; i++) data[i] = i;
  hand h;
  hand_deletes = 0;
  tg_scope sc = tg_scope_begin();
  /* rows 1..2 of a [3, 4], each reversed: element 0 is data[7], strides [4, -1] */
  hand_new(&h, data, DL_I64, 2, (int64_t[]){2, 4});
  h.m.dl_tensor.byte_offset = 7 * sizeof(int64_t);
  h.strides[0] = 4;
  h.strides[1] = -1;
  h.m.dl_tensor.strides = h.strides;
  tg_tensor *t = tg_from_dlpack(&h.m);
  cr_assert(t, "%s", tg_last_error_message());
  cr_assert_eq(tg_data_ptr(t), &data[7]);
  cr_assert_eq(tg_stride(t, 1), -1);
  tg_test_expect_values(t, 8, (double[]){7, 6, 5, 4, 11, 10, 9, 8}, 0);
  tg_tensor *c = tg_contiguous(t);
  tg_test_expect_values(c, 8, (double[]){7, 6, 5, 4, 11, 10, 9, 8}, 0);
  tg_tensor *f = tg_to_dtype(t, TG_F64);
  tg_test_expect_values(tg_mul(f, f), 8, (double[]){49, 36, 25, 16, 121, 100, 81, 64}, 0);
  tg_scope_end(sc);
  cr_assert_eq(hand_deletes, 1);
}

TG_TEST(dlpack, pinned_host_memory_is_cpu_memory) {
  float data[3] = {1, 2, 3};
  hand h;
  hand_new(&h, data, DL_F32, 1, (int64_t[]){3});
  h.m.dl_tensor.device = (DLDevice){kDLCUDAHost, 0};
  tg_scope sc = tg_scope_begin();
  tg_tensor *t = tg_from_dlpack(&h.m);
  cr_assert(t, "%s", tg_last_error_message());
  cr_assert_eq(tg_tensor_device(t).type, TG_CPU);
  tg_scope_end(sc);
}

/* nbytes that end exactly at a PROT_NONE page: a read past them dies of SIGSEGV. */
typedef struct guarded {
  char *map, *data;
  size_t mapped;
} guarded;
static guarded guarded_new(size_t nbytes) {
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  const size_t body = (nbytes + page - 1) / page * page;
  guarded g = {mmap(NULL, body + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
               NULL, body + page};
  cr_assert_neq(g.map, MAP_FAILED);
  cr_assert_eq(mprotect(g.map + body, page, PROT_NONE), 0);
  g.data = g.map + body - nbytes;
  return g;
}

/* A hand-made [rows, cols] tensor of dtype over guarded memory, values i % 7. */
static guarded guarded_matrix(hand *h, int64_t rows, int64_t cols, bool f64) {
  const int64_t n = rows * cols;
  guarded g = guarded_new((size_t)n * (f64 ? sizeof(double) : sizeof(float)));
  for (int64_t i = 0; i < n; i++) {
    if (f64)
      ((double *)g.data)[i] = (double)(i % 7);
    else
      ((float *)g.data)[i] = (float)(i % 7);
  }
  hand_new(h, g.data, f64 ? DL_F64 : DL_F32, 2, (int64_t[]){rows, cols});
  return g;
}

/* Foreign memory has no tail pad behind it (tg's own CPU storages do, for the BLIS 0.9
 * small-matrix kernels that read past an operand: src/ops/cpu/cpu_gemm.c): GEMM must copy
 * such an operand rather than let BLIS read past it. The matrices end at a guard page; the
 * haswell kernels (pinned, as tests/ops/test_blis_guard.c does) are the ones that overread. */
TG_TEST(dlpack, gemm_on_foreign_memory_stays_inside_it) {
  cr_assert_eq(setenv("BLIS_ARCH_TYPE", "3", 1), 0);
  if (!tg_blis_kernels()) {
    char why[600];
    snprintf(why, sizeof why, "%s", tg_last_error_message());
    tg_clear_error();
    cr_skip_test("this CPU cannot run BLIS's haswell kernels: %s", why);
  }
  /* [1, 2] @ [2, 16]^T faulted (k-edge of sgemmsup_rd_haswell_asm_1x16n) before storages on
   * foreign memory had capacity == nbytes; the others are edge sizes around the blockings. */
  static const int64_t dims[][3] = {{1, 1, 1}, {1, 2, 16},  {1, 3, 16},  {2, 7, 17},
                                    {3, 5, 7}, {7, 33, 17}, {16, 64, 9}, {37, 37, 37}};
  for (int f64 = 0; f64 < 2; f64++) {
    for (size_t c = 0; c < sizeof dims / sizeof *dims; c++) {
      const int64_t m = dims[c][0], k = dims[c][1], n = dims[c][2];
      hand ha, hb, hbt;
      guarded ga = guarded_matrix(&ha, m, k, f64), gb = guarded_matrix(&hb, k, n, f64),
              gbt = guarded_matrix(&hbt, n, k, f64);
      tg_scope sc = tg_scope_begin();
      tg_tensor *a = tg_from_dlpack(&ha.m), *b = tg_from_dlpack(&hb.m),
                *bt = tg_t(tg_from_dlpack(&hbt.m));
      tg_assert_close(tg_mm(a, b), tg_mm(tg_clone(a), tg_clone(b)), 0, 0);
      tg_assert_close(tg_mm(a, bt), tg_mm(tg_clone(a), tg_clone(bt)), 0, 0);
      tg_assert_close(tg_mm(tg_t(bt), tg_t(a)), tg_mm(tg_clone(tg_t(bt)), tg_clone(tg_t(a))), 0, 0);
      tg_scope_end(sc);
      munmap(ga.map, ga.mapped);
      munmap(gb.map, gb.mapped);
      munmap(gbt.map, gbt.mapped);
    }
  }
}

TG_TEST(dlpack, imported_tensors_take_part_in_backward) {
  double data[3] = {1, 2, 3};
  hand h;
  hand_new(&h, data, DL_F64, 1, (int64_t[]){3});
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_from_dlpack(&h.m);
  cr_assert_eq(tg_set_requires_grad(x, true), TG_OK);
  cr_assert_eq(tg_backward(tg_sum(tg_mul(x, x)), NULL), TG_OK);
  tg_test_expect_values(tg_grad(x), 3, (double[]){2, 4, 6}, 0);
  tg_scope_end(sc);
}

/* ---- bad managed tensors: an exact error, and m stays the caller's ---- */

typedef struct bad_case {
  const char *what;
  void (*edit)(hand *h);
  tg_status code;
  const char *fragment;
} bad_case;

static _Alignas(64) double bad_data[64];

static void f16(hand *h) { h->m.dl_tensor.dtype = (DLDataType){kDLFloat, 16, 1}; }
static void bf16(hand *h) { h->m.dl_tensor.dtype = (DLDataType){kDLBfloat, 16, 1}; }
static void u8(hand *h) { h->m.dl_tensor.dtype = (DLDataType){kDLUInt, 8, 1}; }
static void i32(hand *h) { h->m.dl_tensor.dtype = (DLDataType){kDLInt, 32, 1}; }
static void complex64(hand *h) { h->m.dl_tensor.dtype = (DLDataType){kDLComplex, 64, 1}; }
static void lanes2(hand *h) { h->m.dl_tensor.dtype = (DLDataType){kDLFloat, 32, 2}; }
static void lanes0(hand *h) { h->m.dl_tensor.dtype = (DLDataType){kDLFloat, 64, 0}; }
static void opencl(hand *h) { h->m.dl_tensor.device = (DLDevice){kDLOpenCL, 0}; }
static void managed(hand *h) { h->m.dl_tensor.device = (DLDevice){kDLCUDAManaged, 0}; }
static void cuda7(hand *h) { h->m.dl_tensor.device = (DLDevice){kDLCUDA, 7}; }
static void ndim_negative(hand *h) { h->m.dl_tensor.ndim = -1; }
static void ndim_9(hand *h) {
  h->m.dl_tensor.ndim = TG_MAX_DIMS + 1;
  for (int d = 0; d < TG_MAX_DIMS + 1; d++) h->shape[d] = 1;
}
static void shape_null(hand *h) { h->m.dl_tensor.shape = NULL; }
static void shape_negative(hand *h) { h->shape[1] = -3; }
static void shape_huge(hand *h) { h->shape[0] = h->shape[1] = (int64_t)1 << 40; }
static void data_null(hand *h) { h->m.dl_tensor.data = NULL; }
static void data_misaligned(hand *h) { h->m.dl_tensor.data = (char *)bad_data + 4; }
static void offset_misaligned(hand *h) { h->m.dl_tensor.byte_offset = 2; }
static void offset_wraps(hand *h) { h->m.dl_tensor.byte_offset = UINT64_MAX - 7; }
static void strides_huge(hand *h) {
  h->strides[0] = INT64_MAX / 2;
  h->strides[1] = 1;
  h->m.dl_tensor.strides = h->strides;
}
static void strides_below_zero(hand *h) {
  h->m.dl_tensor.data = (void *)(uintptr_t)64; /* never read: refused first */
  h->strides[0] = -1000;
  h->strides[1] = 1;
  h->m.dl_tensor.strides = h->strides;
}
static void strides_past_the_top(hand *h) {
  h->m.dl_tensor.data = (void *)(UINTPTR_MAX - 63);
  h->strides[0] = 1000;
  h->strides[1] = 1;
  h->m.dl_tensor.strides = h->strides;
}

static const bad_case bad_cases[] = {
    {"float16", f16, TG_ERR_DTYPE, "dtype (code 2, bits 16, lanes 1) is not float32"},
    {"bfloat16", bf16, TG_ERR_DTYPE, "code 4, bits 16"},
    {"uint8", u8, TG_ERR_DTYPE, "code 1, bits 8"},
    {"int32", i32, TG_ERR_DTYPE, "code 0, bits 32"},
    {"complex64", complex64, TG_ERR_DTYPE, "code 5, bits 64"},
    {"two lanes", lanes2, TG_ERR_DTYPE, "lanes 2"},
    {"no lanes", lanes0, TG_ERR_DTYPE, "lanes 0"},
    {"OpenCL", opencl, TG_ERR_DEVICE, "device type 4 is not one tg has"},
    {"CUDA managed", managed, TG_ERR_DEVICE, "device type 13"},
    {"cuda:7", cuda7, TG_ERR_DEVICE, "cuda:7"},
    {"ndim -1", ndim_negative, TG_ERR_SHAPE, "ndim -1 is outside 0..8"},
    {"ndim 9", ndim_9, TG_ERR_SHAPE, "ndim 9 is outside 0..8"},
    {"NULL shape", shape_null, TG_ERR_ARGUMENT, "shape is NULL for ndim 2"},
    {"negative size", shape_negative, TG_ERR_SHAPE, "shape [2, -3]: size of dim 1 is negative"},
    {"too many elements", shape_huge, TG_ERR_SHAPE, "too many elements"},
    {"NULL data", data_null, TG_ERR_ARGUMENT, "data is NULL for shape [2, 3]"},
    {"misaligned data", data_misaligned, TG_ERR_ARGUMENT, "is not aligned to the 8 bytes"},
    {"misaligned byte_offset", offset_misaligned, TG_ERR_ARGUMENT, "not aligned"},
    {"byte_offset past the top", offset_wraps, TG_ERR_ARGUMENT, "overflows the address space"},
    {"strides overflow", strides_huge, TG_ERR_SHAPE, "reach beyond the address space"},
    {"strides below address 0", strides_below_zero, TG_ERR_SHAPE, "strides [-1000, 1]"},
    {"strides past the top", strides_past_the_top, TG_ERR_SHAPE, "reach beyond"},
};

TG_TEST(dlpack, bad_fields_are_refused_and_not_deleted) {
  int64_t live = tg_live_objects();
  for (size_t i = 0; i < sizeof bad_cases / sizeof *bad_cases; i++) {
    const bad_case *c = &bad_cases[i];
    hand h;
    hand_new(&h, bad_data, DL_F64, 2, (int64_t[]){2, 3});
    c->edit(&h);
    hand_deletes = 0;
    cr_assert_null(tg_from_dlpack(&h.m), "%s accepted", c->what);
    cr_assert_eq(tg_last_error(), c->code, "%s: %s (%s), expected %s", c->what,
                 tg_status_name(tg_last_error()), tg_last_error_message(), tg_status_name(c->code));
    cr_assert(strstr(tg_last_error_message(), "tg_from_dlpack: "), "%s: %s", c->what,
              tg_last_error_message());
    cr_assert(strstr(tg_last_error_message(), c->fragment), "%s: '%s' lacks '%s'", c->what,
              tg_last_error_message(), c->fragment);
    tg_clear_error();
    cr_assert_eq(hand_deletes, 0, "%s: the deleter ran", c->what);
    cr_assert_eq(tg_live_objects(), live, "%s: something leaked", c->what);
  }
}

TG_TEST(dlpack, import_null_is_an_error) {
  cr_assert_null(tg_from_dlpack(NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_from_dlpack", "m is NULL");
}

TG_TEST(dlpack, empty_tensors_need_no_data) {
  hand h;
  hand_new(&h, NULL, DL_F32, 2, (int64_t[]){4, 0});
  hand_deletes = 0;
  tg_scope sc = tg_scope_begin();
  tg_tensor *t = tg_from_dlpack(&h.m);
  cr_assert(t, "%s", tg_last_error_message());
  cr_assert_eq(tg_numel(t), 0);
  tg_assert_close(tg_sum(t), tg_zeros(0, NULL, TG_OPTS_DEFAULT), 0, 0);
  tg_scope_end(sc);
  cr_assert_eq(hand_deletes, 1);
}

#ifndef TG_CUDA_EMULATION
/* Without CUDA built, or built (nvcc) on a machine without a device or driver. */
TG_TEST(dlpack, cuda_without_a_device_is_a_device_error) {
  if (tg_cuda_is_available()) {
    tg_clear_error();
    cr_skip_test("a CUDA device is present");
  }
  tg_clear_error(); /* asking may record why there is no device */
  hand h;
  hand_new(&h, bad_data, DL_F32, 1, (int64_t[]){2});
  h.m.dl_tensor.device = (DLDevice){kDLCUDA, 0};
  hand_deletes = 0;
  cr_assert_null(tg_from_dlpack(&h.m));
  tg_expect_error(TG_ERR_DEVICE, "tg_from_dlpack", "cuda:0",
                  tg_cuda_is_built() ? "no CUDA device" : "without CUDA");
  cr_assert_eq(hand_deletes, 0);
}
#else
/* ---- CUDA (emulated: device memory is not readable from the host) ---- */

TG_TEST(dlpack, cuda_tensors_go_both_ways) {
  for (int k = 0; k < 3; k++) {
    for (int foreign = 0; foreign < 2; foreign++) {
      wrap_deletes = 0;
      tg_scope sc = tg_scope_begin();
      tg_tensor *t =
          tg_view(tg_arange(0, 12, 1, TG_OPTS(.dtype = all_dtypes[k], .device = TG_DEVICE_CUDA(0))),
                  TG_SHAPE(3, 4));
      tg_tensor *v = tg_t(t);
      DLManagedTensor *m = tg_to_dlpack(v);
      cr_assert(m, "%s", tg_last_error_message());
      cr_assert_eq(m->dl_tensor.device.device_type, kDLCUDA);
      cr_assert_eq(m->dl_tensor.device.device_id, 0);
      cr_assert_eq(m->dl_tensor.data, tg_data_ptr(v));
      tg_tensor *u = tg_from_dlpack(foreign ? wrap(m) : m);
      cr_assert(u, "%s", tg_last_error_message());
      assert_same_geometry(u, v);
      cr_assert_eq(tg_fill_(tg_select(u, 0, 1), 5), TG_OK); /* column 1 of t */
      double got;
      cr_assert_eq(tg_item(tg_select(tg_select(t, 0, 0), 0, 0), &got), TG_OK);
      cr_assert_eq(got, 0, "untouched");
      cr_assert_eq(tg_item(tg_select(tg_select(t, 0, 2), 0, 1), &got), TG_OK);
      cr_assert_eq(got, 5, "a write through the import shows in the original");
      tg_scope_end(sc);
      cr_assert_eq(wrap_deletes, foreign);
    }
  }
}

TG_TEST(dlpack, missing_cuda_device_is_a_device_error) {
  hand h;
  hand_new(&h, bad_data, DL_F32, 1, (int64_t[]){2});
  h.m.dl_tensor.device = (DLDevice){kDLCUDA, 7};
  hand_deletes = 0;
  cr_assert_null(tg_from_dlpack(&h.m));
  tg_expect_error(TG_ERR_DEVICE, "tg_from_dlpack");
  cr_assert_eq(hand_deletes, 0);
}
#endif

/* ---- allocation failures: each is a clean TG_ERR_MEMORY, m stays the caller's ---- */

static tg_status export_step(void *user, double *out, int *n_out) {
  tg_dtype dtype = *(const tg_dtype *)user;
  tg_tensor *t = tg_t(tg_view(tg_arange(0, 6, 1, TG_OPTS(.dtype = dtype)), TG_SHAPE(2, 3)));
  DLManagedTensor *m = t ? tg_to_dlpack(t) : NULL;
  if (!m) return status_of(m);
  const DLTensor *dl = &m->dl_tensor;
  for (int d = 0; d < dl->ndim; d++) {
    out[(*n_out)++] = (double)dl->shape[d];
    out[(*n_out)++] = (double)dl->strides[d];
  }
  out[(*n_out)++] = dl->dtype.bits;
  m->deleter(m);
  return TG_OK;
}

static int64_t sweep_data[6] = {5, 4, 3, 2, 1, 0};

/* Imports a hand-made tensor or tg's own export (directly or wrapped), computes on it and
 * checks its deleter ran once if the import succeeded, never if it failed. */
static tg_status import_step(void *user, double *out, int *n_out) {
  const int how = *(const int *)user; /* 0 hand-made, 1 own export, 2 wrapped export */
  hand h;
  DLManagedTensor *m = NULL;
  hand_deletes = wrap_deletes = 0;
  if (how == 0) {
    m = &hand_new(&h, sweep_data, DL_I64, 2, (int64_t[]){2, 3})->m;
  } else {
    m = tg_to_dlpack(tg_view(tg_arange(0, 6, 1, TG_OPTS(.dtype = TG_F64)), TG_SHAPE(2, 3)));
    if (!m) return status_of(m);
    if (how == 2) m = wrap(m);
  }
  tg_scope sc = tg_scope_begin();
  tg_tensor *t = tg_from_dlpack(m);
  tg_status st = status_of(t);
  if (st != TG_OK) {
    cr_assert_eq(hand_deletes + wrap_deletes, 0, "a failed import ran the deleter");
    if (how > 0) m->deleter(m); /* still the caller's */
  }
  if (st == TG_OK) st = append(t, out, n_out);
  tg_scope_end(sc);
  if (t) cr_assert_eq(hand_deletes + wrap_deletes, how == 1 ? 0 : 1, "deleter not run once");
  return st;
}

TG_TEST(dlpack, allocation_failures_in_export) {
  for (int k = 0; k < 3; k++) sweep("tg_to_dlpack", export_step, (void *)&all_dtypes[k]);
}

TG_TEST(dlpack, allocation_failures_in_import) {
  static const int hows[] = {0, 1, 2};
  const char *names[] = {"tg_from_dlpack (hand-made)", "tg_from_dlpack (own export)",
                         "tg_from_dlpack (wrapped export)"};
  for (int k = 0; k < 3; k++) sweep(names[k], import_step, (void *)&hows[k]);
}
