/* tg_dist_check_module and tg_dist_broadcast_module at any world size (run at np 1 and 2):
 * equal modules pass and get root's values; a module that differs on one rank (a shape, a
 * dtype, a name, an extra entry) is the same error on every rank, naming the entry, the
 * rank and both sides; one rank's own error or failed allocation never leaves the others
 * waiting. */
#include "distributed/comm.h"
#include "dist_check.h"
#include "tensor/host_memory.h"

static int rank, size;

typedef struct variant {
  int64_t out;       /* fc's out_features */
  tg_dtype dtype;    /* the "scale" parameter's dtype */
  const char *scale; /* its name */
  bool extra;        /* one more buffer at the end */
} variant;

static const variant normal = {3, TG_F32, "scale", false};

/* "net": own parameter scale [2], child fc (Linear 4 -> out), buffer steps (I64), with values
 * that depend on the rank (seeded by it). */
static tg_module *build_for(variant v, int r) {
  tg_generator *gen = tg_generator_new(100 + (uint64_t)r);
  tg_module *m = tg_module_new("net");
  tg_scope s = tg_scope_begin();
  tg_module_register_parameter(m, v.scale,
                               tg_rand(TG_SHAPE(2), (tg_options){.dtype = v.dtype}, gen));
  tg_module_add_child(m, "fc",
                      tg_linear_module(tg_linear_new(4, v.out, true, TG_OPTS_DEFAULT, gen)));
  tg_module_register_buffer(m, "steps",
                            tg_full(TG_SHAPE(1), 7.0 + r, (tg_options){.dtype = TG_I64}));
  if (v.extra) tg_module_register_buffer(m, "more", tg_zeros(TG_SHAPE(1), TG_OPTS_DEFAULT));
  tg_scope_end(s);
  tg_generator_free(gen);
  return m;
}

static tg_module *build(variant v) { return build_for(v, rank); }

/* Whether every rank holds the same values in every entry of m. */
static bool all_equal(const tg_module *m) {
  bool ok = true;
  tg_scope s = tg_scope_begin();
  tg_no_grad_begin(); /* copies of the parameters, off the tape */
  for (int i = 0; i < tg_module_num_parameters(m) + tg_module_num_buffers(m); i++) {
    const int np = tg_module_num_parameters(m);
    tg_tensor *t = i < np ? tg_module_parameter(m, i, NULL) : tg_module_buffer(m, i - np, NULL);
    tg_tensor *lo = tg_to_dtype(tg_clone(t), TG_F64), *hi = tg_clone(lo);
    DIST_CHECK_OK(tg_dist_all_reduce(lo, TG_REDUCE_MIN));
    DIST_CHECK_OK(tg_dist_all_reduce(hi, TG_REDUCE_MAX));
    ok = ok && tg_max_abs_diff(lo, hi) == 0 && tg_max_abs_diff(lo, t) == 0;
  }
  tg_no_grad_end();
  tg_scope_end(s);
  return ok;
}

static void test_equal_modules(void) {
  tg_module *m = build(normal);
  DIST_CHECK_OK(tg_dist_check_module(m));
  DIST_CHECK(size == 1 || !all_equal(m)); /* seeded by the rank: different values */
  DIST_CHECK_OK(tg_dist_broadcast_module(m, 0));
  DIST_CHECK(all_equal(m));
  tg_module *n = build(normal);
  DIST_CHECK_OK(tg_dist_broadcast_module(n, size - 1));
  DIST_CHECK(all_equal(n));
  /* ...and they are the root's. */
  tg_module *as_root = build_for(normal, size - 1);
  for (int i = 0; i < tg_module_num_parameters(n); i++)
    DIST_CHECK(tg_max_abs_diff(tg_module_parameter(n, i, NULL),
                               tg_module_parameter(as_root, i, NULL)) == 0);
  DIST_CHECK(tg_max_abs_diff(tg_module_find(n, "steps"), tg_module_find(as_root, "steps")) == 0);
  tg_module_free(as_root);
  /* Parameters stay leaves that require grad. */
  DIST_CHECK(tg_requires_grad(tg_module_find(n, "fc.weight")));
  DIST_CHECK_ERR(tg_dist_broadcast_module(n, size), TG_ERR_ARGUMENT, "root");
  DIST_CHECK_ERR(tg_dist_check_module(NULL), TG_ERR_ARGUMENT, "NULL");
  tg_module_free(m);
  tg_module_free(n);
}

/* A module that differs on the last rank. */
static void expect_mismatch(variant v, tg_status code, const char *needle) {
  tg_module *m = build(rank == size - 1 ? v : normal);
  DIST_CHECK_ERR(tg_dist_check_module(m), code, needle);
  DIST_CHECK_ERR(tg_dist_broadcast_module(m, 0), code, needle);
  tg_module_free(m);
}

static void test_mismatched_modules(void) {
  if (size < 2) return;
  expect_mismatch((variant){5, TG_F32, "scale", false}, TG_ERR_SHAPE,
                  "differ at entry 1: rank 0 has parameter 'fc.weight' float32 [3, 4], rank 1 "
                  "has parameter 'fc.weight' float32 [5, 4]");
  expect_mismatch((variant){3, TG_F64, "scale", false}, TG_ERR_DTYPE,
                  "rank 0 has parameter 'scale' float32 [2], rank 1 has parameter 'scale' "
                  "float64 [2]");
  expect_mismatch((variant){3, TG_F32, "gain", false}, TG_ERR_ARGUMENT,
                  "rank 0 has parameter 'scale' float32 [2], rank 1 has parameter 'gain'");
  expect_mismatch((variant){3, TG_F32, "scale", true}, TG_ERR_ARGUMENT,
                  "entry 4: rank 0 has no entry there, rank 1 has buffer 'more' float32 [1]");
  /* One rank's own error: that error there, "rank 1 failed" on the others. */
  tg_module *m = build(normal);
  DIST_CHECK_ERR(tg_dist_check_module(rank == 1 ? NULL : m), TG_ERR_ARGUMENT,
                 rank == 1 ? "m is NULL" : "rank 1 failed");
  DIST_CHECK_OK(tg_dist_check_module(m)); /* still in step */
  tg_module_free(m);
}

/* Names longer than any fixed line: three nested entries of 250 characters each, the last
 * one's final character different on the last rank (past byte 512 of the entry). */
static tg_module *long_named(char last) {
  char seg[251];
  memset(seg, 'a', 250);
  seg[250] = '\0';
  tg_module *outer = tg_module_new("outer"), *inner = tg_module_new("inner");
  tg_scope s = tg_scope_begin();
  seg[249] = last;
  tg_module_register_parameter(inner, seg, tg_zeros(TG_SHAPE(2), TG_OPTS_DEFAULT));
  seg[249] = 'a';
  tg_module_add_child(outer, seg, inner);
  tg_module *m = tg_module_new("net");
  tg_module_add_child(m, seg, outer);
  tg_scope_end(s);
  return m;
}

static void test_long_names(void) {
  tg_module *same = long_named('x');
  DIST_CHECK(tg_module_num_parameters(same) == 1);
  DIST_CHECK_OK(tg_dist_check_module(same));
  tg_module_free(same);
  if (size < 2) return;
  tg_module *m = long_named(rank == size - 1 ? 'y' : 'x');
  /* The name's head and tail in the message, the rest of the entry after it. */
  DIST_CHECK_ERR(tg_dist_check_module(m), TG_ERR_ARGUMENT,
                 "differ at entry 0: rank 0 has parameter 'aaaa");
  DIST_CHECK_ERR(tg_dist_check_module(m), TG_ERR_ARGUMENT,
                 "aaax' float32 [2], rank 1 has parameter 'aaa");
  DIST_CHECK_ERR(tg_dist_broadcast_module(m, 0), TG_ERR_ARGUMENT, "aaay' float32 [2] (every");
  DIST_CHECK_ERR(tg_dist_check_module(m), TG_ERR_ARGUMENT, "aaaa...aaaa");
  tg_module_free(m);
}

/* Every allocation of a check failing in turn on the last rank, with equal modules and with
 * a mismatch (whose report allocates rank 0's text): every rank reports an error or none,
 * and the next call works. */
static void test_allocation_failures(void) {
  for (int mismatch = 0; mismatch < 2; mismatch++) {
    if (mismatch && size < 2) break;
    tg_module *m =
        build(mismatch && rank == size - 1 ? (variant){5, TG_F32, "scale", false} : normal);
    const tg_status clean = mismatch ? TG_ERR_SHAPE : TG_OK;
    const int64_t before = tg__host_allocation_count();
    tg_status st = tg_dist_check_module(m);
    tg_clear_error();
    DIST_CHECK(st == clean);
    /* The ranks allocate differently (rank 0 keeps its own text): sweep the longest. */
    int64_t n = tg__host_allocation_count() - before;
    DIST_CHECK_OK(tg__dist_allreduce_host("sweep", &n, 1, TG_I64, TG_REDUCE_MAX));
    int failures = 0;
    for (int64_t k = 1; k <= n; k++) {
      if (rank == size - 1) tg__host_fail_allocation(k);
      st = tg_dist_check_module(m);
      tg__host_fail_allocation(0);
      DIST_CHECK(st == clean || st == TG_ERR_MEMORY);
      tg_clear_error();
      int64_t codes[2] = {st, -(int64_t)st};
      DIST_CHECK_OK(tg__dist_allreduce_host("sweep", codes, 2, TG_I64, TG_REDUCE_MIN));
      DIST_CHECK(codes[0] == -codes[1]); /* the same status on every rank */
      failures += st == TG_ERR_MEMORY;
    }
    DIST_CHECK(rank != size - 1 || failures > 0);
    DIST_CHECK(tg_dist_check_module(m) == clean);
    tg_clear_error();
    tg_module_free(m);
  }
}

int main(int argc, char **argv) {
  const int64_t live = tg_live_objects();
  tg_module *early = build(normal);
  DIST_CHECK_ERR(tg_dist_check_module(early), TG_ERR_STATE, "tg_dist_check_module");
  DIST_CHECK_ERR(tg_dist_broadcast_module(early, 0), TG_ERR_STATE, "tg_dist_init");
  tg_module_free(early);
  DIST_CHECK_OK(tg_dist_init(&argc, &argv, (tg_dist_options){0}));
  rank = tg_dist_rank();
  size = tg_dist_world_size();
  test_equal_modules();
  test_mismatched_modules();
  test_long_names();
  test_allocation_failures();
  DIST_CHECK(tg_live_objects() == live);
  const int failed = dist_check_finish("test_dist_module");
  DIST_CHECK_OK(tg_dist_finalize());
  return failed || dist_check_failed;
}
