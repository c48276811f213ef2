/* Threads: backward from several threads into shared leaves (hogwild-style), independent
 * graphs on several threads, and what must fail cleanly. Asserts run on the main thread
 * only: workers record what they saw.
 *
 * Built twice: as the Criterion test test_threads, and with TG_THREADS_STANDALONE as the
 * plain program threads_standalone, which scripts/test-tsan.sh runs under ThreadSanitizer
 * (Criterion's runner cannot start under TSan: its shared arena wants address space that
 * TSan reserves). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef TG_THREADS_STANDALONE
#include "tg/tg.h"
#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "%s:%d: check failed: %s:", __FILE__, __LINE__, #cond);                      \
      fprintf(stderr, " " __VA_ARGS__);                                                            \
      fputc('\n', stderr);                                                                         \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)
#define THREAD_TEST(name) static void thread_test_##name(void)
#else
#include "testutil.h"
#define CHECK(cond, ...) cr_assert(cond, "" __VA_ARGS__)
#define THREAD_TEST(name) TG_TEST(threads, name)
#endif

/* Element i of t as a double (any dtype and strides). */
static double at(const tg_tensor *t, int64_t i) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *c = tg_contiguous(tg_to_dtype(t, TG_F64));
  CHECK(c != NULL, "%s", tg_last_error_message());
  double v = ((const double *)tg_data_ptr(c))[i];
  tg_scope_end(sc);
  return v;
}

/* The pending error has this code and its message contains every substring; clears it. */
#define EXPECT_ERROR(code, ...)                                                                    \
  do {                                                                                             \
    CHECK(tg_last_error() == (code), "error %d (%s)", (int)tg_last_error(),                        \
          tg_last_error_message());                                                                \
    const char *const want_[] = {__VA_ARGS__};                                                     \
    for (size_t k_ = 0; k_ < sizeof want_ / sizeof want_[0]; k_++)                                 \
      CHECK(strstr(tg_last_error_message(), want_[k_]), "'%s' not in '%s'", want_[k_],             \
            tg_last_error_message());                                                              \
    tg_clear_error();                                                                              \
  } while (0)

enum { N_THREADS = 4, N_ELEMS = 5 };

#ifndef TG_TEST_THREAD_ITERS
#define TG_TEST_THREAD_ITERS 100
#endif

/* Small integers: every partial sum below is exact in float. */
static const float weight_values[N_ELEMS] = {1, -2, 3, 0.5f, -4};

static tg_tensor *shared_leaf(void) {
  tg_tensor *w = tg_from_data(TG_SHAPE(N_ELEMS), weight_values, TG_OPTS(.requires_grad = true));
  CHECK(w != NULL, "%s", tg_last_error_message());
  return w;
}

typedef struct worker {
  pthread_t thread;
  pthread_barrier_t *start;
  tg_tensor *w, *b;  /* shared leaves */
  tg_tensor *shared; /* a shared non-leaf (shared_nonleaf test) */
  int id, iters;
  bool create_graph;
  /* results */
  tg_status status;
  char message[256];
  int done, refused; /* backward calls that succeeded / were refused as concurrent */
  double values[N_ELEMS];
} worker;

static void fail(worker *wk, tg_status st) {
  if (wk->status != TG_OK) return;
  wk->status = st;
  snprintf(wk->message, sizeof wk->message, "thread %d: %s", wk->id, tg_last_error_message());
  tg_clear_error();
}

/* The input of thread id: x[i] = id + 1 + i, so each thread's contribution differs. */
static tg_tensor *thread_input(int id) {
  float x[N_ELEMS];
  for (int i = 0; i < N_ELEMS; i++) x[i] = (float)(id + 1 + i);
  return tg_from_data(TG_SHAPE(N_ELEMS), x, TG_OPTS_DEFAULT);
}

/* loss = sum(w * x + b * 2): d/dw = x, d/db = 2 * N_ELEMS, for every call. With create_graph the
 * loss is sum(w * w * x) / 2 (d/dw = w * x, which carries a graph) and b is left out. */
static void *shared_leaf_worker(void *arg) {
  worker *wk = arg;
  pthread_barrier_wait(wk->start);
  for (int it = 0; it < wk->iters && wk->status == TG_OK; it++) {
    tg_scope sc = tg_scope_begin();
    tg_tensor *x = thread_input(wk->id), *loss;
    if (wk->create_graph)
      loss = tg_mul_scalar(tg_sum(tg_mul(tg_mul(wk->w, wk->w), x)), 0.5);
    else
      loss = tg_sum(tg_add(tg_mul(wk->w, x), tg_mul_scalar(wk->b, 2.0)));
    tg_status st =
        loss ? tg_backward_ex(loss, NULL, (tg_backward_options){.create_graph = wk->create_graph})
             : tg_last_error();
    if (st != TG_OK) fail(wk, st);
    tg_scope_end(sc);
  }
  return NULL;
}

static void run_workers(worker *wk, int n, void *(*fn)(void *)) {
  pthread_barrier_t start;
  CHECK(pthread_barrier_init(&start, NULL, (unsigned)n) == 0);
  for (int t = 0; t < n; t++) {
    wk[t].start = &start;
    wk[t].id = t;
    CHECK(pthread_create(&wk[t].thread, NULL, fn, &wk[t]) == 0);
  }
  for (int t = 0; t < n; t++) pthread_join(wk[t].thread, NULL);
  pthread_barrier_destroy(&start);
  for (int t = 0; t < n; t++) CHECK(wk[t].status == TG_OK, "%s", wk[t].message);
}

THREAD_TEST(backward_into_shared_leaves_sums_exactly) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *w = shared_leaf();
  float zero = 0;
  tg_tensor *b = tg_from_data(TG_SHAPE(1), &zero, TG_OPTS(.requires_grad = true));
  /* Several rounds from no grad at all: the first accumulation (grad still NULL) is the
   * race that lost a thread's gradient. */
  for (int round = 0; round < 8; round++) {
    CHECK(tg_set_grad(w, NULL) == TG_OK);
    CHECK(tg_set_grad(b, NULL) == TG_OK);
    worker wk[N_THREADS] = {0};
    for (int t = 0; t < N_THREADS; t++)
      wk[t] = (worker){.w = w, .b = b, .iters = TG_TEST_THREAD_ITERS};
    run_workers(wk, N_THREADS, shared_leaf_worker);
    for (int i = 0; i < N_ELEMS; i++) {
      double want = 0;
      for (int t = 0; t < N_THREADS; t++) want += (double)TG_TEST_THREAD_ITERS * (t + 1 + i);
      CHECK(at(tg_grad(w), i) == want, "round %d: dw[%d] = %g, want %g", round, i,
            at(tg_grad(w), i), want);
    }
    /* b is broadcast over the N_ELEMS elements of w * x */
    CHECK(at(tg_grad(b), 0) == 2.0 * N_ELEMS * N_THREADS * TG_TEST_THREAD_ITERS);
  }
  tg_scope_end(sc);
}

THREAD_TEST(create_graph_backward_into_shared_leaf_sums_exactly) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *w = shared_leaf();
  worker wk[N_THREADS] = {0};
  for (int t = 0; t < N_THREADS; t++)
    wk[t] = (worker){.w = w, .iters = TG_TEST_THREAD_ITERS / 4 + 1, .create_graph = true};
  run_workers(wk, N_THREADS, shared_leaf_worker);
  tg_tensor *g = tg_grad(w);
  CHECK(g != NULL);
  CHECK(tg_requires_grad(g), "a create_graph gradient carries its graph");
  for (int i = 0; i < N_ELEMS; i++) {
    double want = 0;
    for (int t = 0; t < N_THREADS; t++)
      want += (double)wk[t].iters * weight_values[i] * (t + 1 + i);
    CHECK(at(g, i) == want, "dw[%d] = %g, want %g", i, at(g, i), want);
  }
  /* w.grad's graph holds w (a cycle, as in PyTorch): drop it before releasing w. */
  CHECK(tg_zero_grad(w) == TG_OK);
  CHECK(tg_grad(w) == NULL);
  tg_scope_end(sc);
}

/* The fused LLTM adds d_weights straight into weights.grad when it can take that leaf's
 * grad lock (src/autograd/grad_destination.h), else returns it for the engine to add: with
 * threads contending for the lock both paths run. Thread id's inputs are its own. */
enum { LLTM_B = 3, LLTM_I = 4, LLTM_S = 5 };

static void lltm_inputs(int id, tg_tensor **x, tg_tensor **h, tg_tensor **c) {
  tg_generator *gen = tg_generator_new((uint64_t)id + 11);
  const tg_options o = {.dtype = TG_F64};
  *x = tg_uniform(TG_SHAPE(LLTM_B, LLTM_I), -1, 1, o, gen);
  *h = tg_uniform(TG_SHAPE(LLTM_B, LLTM_S), -1, 1, o, gen);
  *c = tg_uniform(TG_SHAPE(LLTM_B, LLTM_S), -1, 1, o, gen);
  tg_generator_free(gen);
}

static tg_status lltm_step(const worker *wk) {
  tg_tensor *x, *h, *c, *new_h, *new_c;
  lltm_inputs(wk->id, &x, &h, &c);
  tg_status st = tg_lltm(x, wk->w, wk->b, h, c, &new_h, &new_c);
  return st == TG_OK ? tg_backward(tg_add(tg_sum(new_h), tg_sum(new_c)), NULL) : st;
}

static void *lltm_worker(void *arg) {
  worker *wk = arg;
  pthread_barrier_wait(wk->start);
  for (int it = 0; it < wk->iters && wk->status == TG_OK; it++) {
    tg_scope sc = tg_scope_begin();
    tg_status st = lltm_step(wk);
    if (st != TG_OK) fail(wk, st);
    tg_scope_end(sc);
  }
  return NULL;
}

THREAD_TEST(fused_lltm_backward_into_shared_weights_sums_all) {
  tg_scope sc = tg_scope_begin();
  tg_generator *gen = tg_generator_new(5);
  const tg_options p = {.dtype = TG_F64, .requires_grad = true};
  tg_tensor *w = tg_uniform(TG_SHAPE(3 * LLTM_S, LLTM_S + LLTM_I), -0.5, 0.5, p, gen);
  tg_tensor *b = tg_uniform(TG_SHAPE(3 * LLTM_S), -0.5, 0.5, p, gen);
  tg_generator_free(gen);
  /* One step per thread alone, the sum of which every round must reach iters times. */
  tg_tensor *want_w = tg_zeros_like(w), *want_b = tg_zeros_like(b);
  for (int t = 0; t < N_THREADS; t++) {
    CHECK(tg_set_grad(w, NULL) == TG_OK && tg_set_grad(b, NULL) == TG_OK);
    CHECK(lltm_step(&(worker){.w = w, .b = b, .id = t}) == TG_OK, "%s", tg_last_error_message());
    CHECK(tg_add_(want_w, tg_grad(w)) == TG_OK && tg_add_(want_b, tg_grad(b)) == TG_OK);
  }
  const int iters = TG_TEST_THREAD_ITERS / 4 + 1;
  for (int round = 0; round < 4; round++) {
    CHECK(tg_set_grad(w, NULL) == TG_OK && tg_set_grad(b, NULL) == TG_OK);
    worker wk[N_THREADS] = {0};
    for (int t = 0; t < N_THREADS; t++) wk[t] = (worker){.w = w, .b = b, .iters = iters};
    run_workers(wk, N_THREADS, lltm_worker);
    for (int64_t i = 0; i < tg_numel(w); i++) {
      double want = iters * at(want_w, i), got = at(tg_grad(w), i);
      CHECK(fabs(got - want) <= 1e-9 * (1 + fabs(want)), "round %d: dw[%lld] = %.17g, want %.17g",
            round, (long long)i, got, want);
    }
    for (int64_t i = 0; i < tg_numel(b); i++) {
      double want = iters * at(want_b, i), got = at(tg_grad(b), i);
      CHECK(fabs(got - want) <= 1e-9 * (1 + fabs(want)), "round %d: db[%lld] = %.17g, want %.17g",
            round, (long long)i, got, want);
    }
  }
  tg_scope_end(sc);
}

/* zero_grad and set_grad from one thread while others accumulate: the values are a race by
 * design, but nothing may crash, leak or be reported by ThreadSanitizer. */
static void *zeroing_worker(void *arg) {
  worker *wk = arg;
  pthread_barrier_wait(wk->start);
  for (int it = 0; it < wk->iters && wk->status == TG_OK; it++) {
    tg_status st = it % 3 == 2 ? tg_set_grad(wk->w, NULL) : tg_zero_grad(wk->w);
    if (st != TG_OK) fail(wk, st);
    if (tg_grad(wk->w) && tg_numel(tg_grad(wk->w)) != N_ELEMS) fail(wk, TG_ERR_STATE);
  }
  return NULL;
}

static void *mixed_worker(void *arg) {
  worker *wk = arg;
  return (wk->id == 0 ? zeroing_worker : shared_leaf_worker)(arg);
}

THREAD_TEST(zero_grad_while_others_accumulate) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *w = shared_leaf();
  float zero = 0;
  tg_tensor *b = tg_from_data(TG_SHAPE(1), &zero, TG_OPTS(.requires_grad = true));
  worker wk[N_THREADS] = {0};
  for (int t = 0; t < N_THREADS; t++)
    wk[t] = (worker){.w = w, .b = b, .iters = TG_TEST_THREAD_ITERS};
  run_workers(wk, N_THREADS, mixed_worker);
  CHECK(tg_set_grad(w, NULL) == TG_OK);
  tg_scope_end(sc);
}

/* Each thread builds and differentiates its own graph (mm, sigmoid, broadcasting add): the
 * results equal the same computation run alone, bit for bit. */
static tg_status independent_graph(int id, double values[N_ELEMS]) {
  tg_scope sc = tg_scope_begin();
  tg_generator *gen = tg_generator_new(100 + (uint64_t)id);
  if (!gen) return tg_last_error();
  tg_options o = {.dtype = TG_F64, .requires_grad = true};
  tg_tensor *a = tg_randn(TG_SHAPE(3, N_ELEMS), o, gen),
            *m = tg_randn(TG_SHAPE(N_ELEMS, 4), o, gen);
  tg_tensor *bias = tg_randn(TG_SHAPE(4), o, gen);
  tg_generator_free(gen);
  tg_tensor *loss = tg_sum(tg_sigmoid(tg_add(tg_mm(a, m), bias)));
  tg_status st = loss ? tg_backward(loss, NULL) : tg_last_error();
  if (st == TG_OK)
    for (int i = 0; i < N_ELEMS; i++) values[i] = at(tg_grad(a), i);
  tg_scope_end(sc);
  return st;
}

static void *independent_worker(void *arg) {
  worker *wk = arg;
  pthread_barrier_wait(wk->start);
  for (int it = 0; it < wk->iters && wk->status == TG_OK; it++) {
    double v[N_ELEMS];
    tg_status st = independent_graph(wk->id, v);
    if (st != TG_OK)
      fail(wk, st);
    else if (it == 0)
      memcpy(wk->values, v, sizeof v);
    else if (memcmp(wk->values, v, sizeof v) != 0) {
      wk->status = TG_ERR_STATE;
      snprintf(wk->message, sizeof wk->message, "thread %d: iteration %d differs", wk->id, it);
    }
  }
  return NULL;
}

THREAD_TEST(independent_graphs_match_single_threaded) {
  double want[N_THREADS][N_ELEMS];
  for (int t = 0; t < N_THREADS; t++) CHECK(independent_graph(t, want[t]) == TG_OK);
  worker wk[N_THREADS] = {0};
  for (int t = 0; t < N_THREADS; t++) wk[t] = (worker){.iters = TG_TEST_THREAD_ITERS / 2};
  run_workers(wk, N_THREADS, independent_worker);
  for (int t = 0; t < N_THREADS; t++)
    CHECK(memcmp(wk[t].values, want[t], sizeof want[t]) == 0, "thread %d", t);
}

/* A non-leaf shared by several threads' graphs: a backward that reaches it while another
 * thread's backward holds it is refused (TG_ERR_STATE), never a race on the node. Every
 * accepted backward adds exactly 2 * x to w.grad. */
static void *shared_nonleaf_worker(void *arg) {
  worker *wk = arg;
  pthread_barrier_wait(wk->start);
  for (int it = 0; it < wk->iters && wk->status == TG_OK; it++) {
    tg_scope sc = tg_scope_begin();
    tg_tensor *loss = tg_sum(tg_mul(wk->shared, thread_input(wk->id)));
    tg_status st = loss ? tg_backward_ex(loss, NULL, (tg_backward_options){.retain_graph = true})
                        : tg_last_error();
    if (st == TG_OK)
      wk->done++;
    else if (st == TG_ERR_STATE && strstr(tg_last_error_message(), "another backward")) {
      wk->refused++;
      tg_clear_error();
    } else
      fail(wk, st);
    tg_scope_end(sc);
  }
  return NULL;
}

THREAD_TEST(shared_nonleaf_is_refused_not_raced) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *w = shared_leaf();
  tg_tensor *shared = tg_mul_scalar(w, 2.0);
  worker wk[N_THREADS] = {0};
  for (int t = 0; t < N_THREADS; t++)
    wk[t] = (worker){.w = w, .shared = shared, .iters = TG_TEST_THREAD_ITERS};
  run_workers(wk, N_THREADS, shared_nonleaf_worker);
  for (int i = 0; i < N_ELEMS; i++) {
    double want = 0;
    for (int t = 0; t < N_THREADS; t++) want += 2.0 * wk[t].done * (t + 1 + i);
    CHECK((tg_grad(w) ? at(tg_grad(w), i) : 0.0) == want, "dw[%d]", i);
  }
  tg_scope_end(sc);
}

/* ---- a backward started from inside a backward, through the node being run ---- */

static tg_status reenter_forward(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  out[0] = tg_mul_scalar(in[0], 1.0);
  if (!out[0]) return tg_last_error();
  return tg_ctx_save_for_backward(ctx, 1, (const tg_tensor *const *)out);
}

static tg_status reenter_backward(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  tg_tensor *y = tg_ctx_saved(ctx, 0); /* this node's own output */
  if (!y) return tg_last_error();
  tg_status st = tg_backward(y, g[0]);
  if (st != TG_OK) return st;
  gi[0] = tg_clone(g[0]);
  return gi[0] ? TG_OK : tg_last_error();
}

THREAD_TEST(backward_from_backward_through_the_same_node_fails) {
  static const tg_op_desc reenter = {"test_reenter",   1, 1,   {[TG_CPU] = reenter_forward},
                                     reenter_backward, 0, NULL};
  tg_scope sc = tg_scope_begin();
  tg_tensor *x = tg_ones(TG_SHAPE(3), TG_OPTS(.requires_grad = true));
  tg_tensor *h = tg_mul_scalar(x, 1.0);
  tg_tensor *y = tg_apply1(&reenter, 1, (const tg_tensor *const[]){h}, 0, NULL);
  CHECK(y != NULL, "%s", tg_last_error_message());
  CHECK(tg_backward_ex(tg_sum(y), NULL, (tg_backward_options){.retain_graph = true}) ==
        TG_ERR_STATE);
  EXPECT_ERROR(TG_ERR_STATE, "tg_backward: ", "test_reenter", "another backward");
  CHECK(tg_grad(x) == NULL);
  /* The failed pass gave its claims back: h's node can be differentiated again. */
  CHECK(tg_backward(tg_sum(h), NULL) == TG_OK, "%s", tg_last_error_message());
  CHECK(at(tg_grad(x), 0) == 1.0);
  tg_scope_end(sc);
}

/* A registered user op's tape nodes are counted (so that an extension is not unloaded under
 * a graph): nodes made and freed on several threads at once, counted under ThreadSanitizer. */
static tg_status scale2_forward(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  (void)ctx;
  out[0] = tg_mul_scalar(in[0], 2.0);
  return out[0] ? TG_OK : tg_last_error();
}
static tg_status scale2_backward(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gi) {
  (void)ctx;
  gi[0] = tg_mul_scalar(g[0], 2.0);
  return gi[0] ? TG_OK : tg_last_error();
}
static void *registered_op_worker(void *arg) {
  worker *wk = arg;
  const tg_op_desc *op = tg_op_lookup("test_threads_scale2");
  pthread_barrier_wait(wk->start);
  for (int it = 0; it < wk->iters && wk->status == TG_OK; it++) {
    tg_scope sc = tg_scope_begin();
    tg_tensor *y = tg_apply1(op, 1, (const tg_tensor *const[]){wk->w}, 0, NULL);
    tg_status st = y ? tg_backward(tg_sum(y), NULL) : tg_last_error();
    if (st != TG_OK) fail(wk, st);
    tg_scope_end(sc);
  }
  return NULL;
}

THREAD_TEST(registered_op_nodes_from_threads) {
  tg_op_desc scale2 = {.name = "test_threads_scale2",
                       .n_inputs = 1,
                       .n_outputs = 1,
                       .forward = {[TG_CPU] = scale2_forward},
                       .backward = scale2_backward};
  CHECK(tg_op_register(&scale2) == TG_OK, "%s", tg_last_error_message());
  tg_scope sc = tg_scope_begin();
  tg_tensor *w = shared_leaf();
  worker wk[N_THREADS] = {0};
  for (int t = 0; t < N_THREADS; t++) wk[t] = (worker){.w = w, .iters = TG_TEST_THREAD_ITERS};
  run_workers(wk, N_THREADS, registered_op_worker);
  for (int i = 0; i < N_ELEMS; i++)
    CHECK(at(tg_grad(w), i) == 2.0 * N_THREADS * TG_TEST_THREAD_ITERS, "dw[%d] = %g", i,
          at(tg_grad(w), i));
  tg_scope_end(sc);
}

#ifdef TG_THREADS_STANDALONE
/* Each test as TG_TEST checks it: nothing alive, no scope open, no error pending. */
static void run(const char *name, void (*test)(void)) {
  int64_t live = tg_live_objects();
  test();
  CHECK(tg_live_objects() == live, "%s leaked %lld live object(s)", name,
        (long long)(tg_live_objects() - live));
  CHECK(tg_last_error() == TG_OK, "%s left an error pending: %s", name, tg_last_error_message());
  CHECK(tg_scope_depth() == 0, "%s left a scope open", name);
  printf("threads_standalone: %s passed\n", name);
}

int main(void) {
  run("backward_into_shared_leaves_sums_exactly",
      thread_test_backward_into_shared_leaves_sums_exactly);
  run("create_graph_backward_into_shared_leaf_sums_exactly",
      thread_test_create_graph_backward_into_shared_leaf_sums_exactly);
  run("fused_lltm_backward_into_shared_weights_sums_all",
      thread_test_fused_lltm_backward_into_shared_weights_sums_all);
  run("zero_grad_while_others_accumulate", thread_test_zero_grad_while_others_accumulate);
  run("independent_graphs_match_single_threaded",
      thread_test_independent_graphs_match_single_threaded);
  run("shared_nonleaf_is_refused_not_raced", thread_test_shared_nonleaf_is_refused_not_raced);
  run("backward_from_backward_through_the_same_node_fails",
      thread_test_backward_from_backward_through_the_same_node_fails);
  run("registered_op_nodes_from_threads", thread_test_registered_op_nodes_from_threads);
  return 0;
}
#endif
