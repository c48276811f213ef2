/* tg_ddp at any world size (run at np 1 and 2): DDP training equals one process on the
 * global batch, bucketed equals one bucket bit for bit, buckets leave during backward,
 * unused parameters (a model with a branch some steps skip equals one process too), gradient
 * accumulation with sync off, the error paths, and (np 1) an allocation-failure sweep of new ->
 * backward -> synchronize -> free; (np 2) tg_ddp_new failing on one rank alone fails on every rank.
 */
#include <math.h>
#include <stdlib.h>

#include "distributed/comm.h"
#include "dist_check.h"
#include "tensor/host_memory.h"

static int rank, size;

enum { V = 11, E = 6, H = 8, T = 5, GB = 4, STEPS = 6 };

/* embedding -> LLTM over T steps -> linear -> cross entropy (the char-LM's shape). */
typedef struct model {
  tg_module *m;
  tg_embedding_layer *embed;
  tg_lltm_seq *rnn;
  tg_linear *head;
} model;

static model make_model(tg_dtype dt, uint64_t seed) {
  model md = {0};
  tg_options o = {.dtype = dt};
  tg_generator *gen = tg_generator_new(seed);
  md.m = tg_module_new("charlm");
  md.embed = tg_embedding_layer_new(V, E, o, gen);
  md.rnn = tg_lltm_seq_new(E, H, TG_LLTM_FUSED, o, gen);
  md.head = tg_linear_new(H, V, true, o, gen);
  DIST_CHECK_OK(tg_module_add_child(md.m, "embed", tg_embedding_layer_module(md.embed)));
  DIST_CHECK_OK(tg_module_add_child(md.m, "rnn", tg_lltm_seq_module(md.rnn)));
  DIST_CHECK_OK(tg_module_add_child(md.m, "head", tg_linear_module(md.head)));
  tg_generator_free(gen);
  return md;
}

/* The loss over columns [b0, b1) of step s's global batch (T x GB tokens, the same on every
 * rank): a rank's shard is [rank * GB / size, (rank + 1) * GB / size). *hs_out (may be NULL)
 * gets the LLTM's output, [T, b1 - b0, H]. */
static tg_tensor *model_loss_hs(const model *md, int s, int b0, int b1, tg_tensor **hs_out) {
  int64_t n = b1 - b0, x[T * GB], y[T * GB];
  for (int t = 0; t < T; t++)
    for (int b = b0; b < b1; b++) {
      x[t * n + (b - b0)] = (7 * t + 3 * b + 5 * s + b * b) % V;
      y[t * n + (b - b0)] = (x[t * n + (b - b0)] * 3 + 1 + t + s) % V;
    }
  tg_options i64 = {.dtype = TG_I64};
  tg_tensor *emb = tg_embedding_layer_forward(md->embed, tg_from_data(TG_SHAPE(T, n), x, i64));
  tg_tensor *hs = NULL;
  if (!emb || tg_lltm_seq_forward(md->rnn, emb, NULL, NULL, &hs, NULL, NULL) != TG_OK) return NULL;
  if (hs_out) *hs_out = hs;
  tg_tensor *logits = tg_linear_forward(md->head, tg_reshape(hs, TG_SHAPE(T * n, H)));
  return tg_cross_entropy(logits, tg_from_data(TG_SHAPE(T * n), y, i64));
}

static tg_tensor *model_loss(const model *md, int s, int b0, int b1) {
  return model_loss_hs(md, s, b0, b1, NULL);
}

static int shard_begin(void) { return rank * GB / size; }
static int shard_end(void) { return (rank + 1) * GB / size; }

/* max |a - b| over every parameter of two models of the same layout. */
static double max_param_diff(const tg_module *a, const tg_module *b) {
  double worst = 0;
  for (int i = 0; i < tg_module_num_parameters(a); i++) {
    double d = tg_max_abs_diff(tg_module_parameter(a, i, NULL), tg_module_parameter(b, i, NULL));
    DIST_CHECK(d >= 0);
    if (d > worst || isnan(d)) worst = d;
  }
  return worst;
}

/* The same over their gradients (each must have one). */
static double max_grad_diff(const tg_module *a, const tg_module *b) {
  double worst = 0;
  for (int i = 0; i < tg_module_num_parameters(a); i++) {
    tg_tensor *ga = tg_grad(tg_module_parameter(a, i, NULL));
    tg_tensor *gb = tg_grad(tg_module_parameter(b, i, NULL));
    DIST_CHECK(ga && gb);
    if (!ga || !gb) return INFINITY;
    double d = tg_max_abs_diff(ga, gb);
    if (d > worst || isnan(d)) worst = d;
  }
  return worst;
}

/* docs/distributed.md quotes this function ("Logging the loss"; ctest doc_distributed_code). */
/* The loss over the global batch, for logging: the mean of the ranks' losses (a collective:
 * every rank calls it). The loss requires grad, which a collective refuses, and the
 * collective writes its tensor in place: reduce a detached copy, not the graph's own value. */
static tg_status global_loss(const tg_tensor *loss, double *out) {
  tg_scope sc = tg_scope_begin();
  tg_tensor *copy = tg_clone(tg_detach(loss));
  tg_status st = copy ? tg_dist_all_reduce(copy, TG_REDUCE_MEAN) : tg_last_error();
  if (st == TG_OK) st = tg_item(copy, out);
  tg_scope_end(sc);
  return st;
}

static double mean_loss(const tg_tensor *loss) {
  double v = NAN;
  DIST_CHECK_OK(global_loss(loss, &v));
  /* What the recipe avoids: the loss itself, which requires grad. */
  DIST_CHECK_ERR(tg_dist_all_reduce((tg_tensor *)loss, TG_REDUCE_MEAN), TG_ERR_STATE,
                 "requires grad");
  return v;
}

/* (1) DDP over the ranks' shards equals one process on the whole batch, step by step; and
 * (3) with small buckets, buckets leave while backward runs. Adam, STEPS steps. */
static void test_matches_single_process(tg_dtype dt, double loss_bound, double param_bound) {
  model a = make_model(dt, 42), r = make_model(dt, 42);
  tg_ddp *ddp = tg_ddp_new(a.m, (tg_ddp_options){.bucket_cap_bytes = 256});
  DIST_CHECK(ddp);
  tg_optimizer *oa = tg_adam_for(a.m, (tg_adam_options){.lr = 0.01});
  tg_optimizer * or = tg_adam_for(r.m, (tg_adam_options){.lr = 0.01});
  double loss_diff = 0;
  for (int s = 0; ddp && s < STEPS; s++) {
    tg_scope sc = tg_scope_begin();
    tg_tensor *loss = model_loss(&a, s, shard_begin(), shard_end());
    DIST_CHECK_OK(tg_optimizer_zero_grad(oa));
    DIST_CHECK_OK(tg_ddp_backward(ddp, loss));
    DIST_CHECK_OK(tg_optimizer_step(oa));
    double global = mean_loss(loss);
    tg_tensor *lr = model_loss(&r, s, 0, GB);
    DIST_CHECK_OK(tg_optimizer_zero_grad(or));
    DIST_CHECK_OK(tg_backward(lr, NULL));
    DIST_CHECK_OK(tg_optimizer_step(or));
    double want = NAN;
    DIST_CHECK_OK(tg_item(lr, &want));
    loss_diff = fmax(loss_diff, fabs(global - want));
    tg_scope_end(sc);
  }
  double param_diff = max_param_diff(a.m, r.m);
  tg_ddp_stats st = {0};
  DIST_CHECK_OK(tg_ddp_stats_get(ddp, &st));
  if (rank == 0)
    printf("DDP vs one process, %s, np %d, %d steps: max loss diff %.3g (bound %.3g), max "
           "parameter diff %.3g (bound %.3g); %d buckets, %lld sent during backward\n",
           tg_dtype_name(dt), size, STEPS, loss_diff, loss_bound, param_diff, param_bound,
           st.n_buckets, (long long)st.buckets_during_backward);
  DIST_CHECK(loss_diff <= loss_bound);
  DIST_CHECK(param_diff <= param_bound);
  DIST_CHECK(st.steps == STEPS && st.n_buckets > 2 && st.bucket_bytes_max > 0);
  DIST_CHECK(st.buckets_during_backward > 0);
  DIST_CHECK(st.allreduce_seconds >= 0 && st.exposed_seconds >= 0);
  tg_ddp_stats_reset(ddp);
  DIST_CHECK_OK(tg_ddp_stats_get(ddp, &st));
  DIST_CHECK(st.steps == 0 && st.buckets_during_backward == 0 && st.n_buckets > 2);
  tg_ddp_free(ddp);
  tg_optimizer_free(oa);
  tg_optimizer_free(or);
  tg_module_free(a.m);
  tg_module_free(r.m);
}

/* The char-LM with two branches more: "odd", a linear layer on batch column 0's hidden
 * states used only on odd steps (so by no rank at step 0, and at np 2 by rank 0 alone), and
 * "never", a linear layer no step uses. */
typedef struct branch_model {
  model md;
  tg_linear *odd, *never;
} branch_model;

static branch_model make_branch_model(uint64_t seed) {
  branch_model bm = {.md = make_model(TG_F64, seed)};
  tg_options o = {.dtype = TG_F64};
  tg_generator *gen = tg_generator_new(seed + 1);
  bm.odd = tg_linear_new(H, 3, true, o, gen);
  bm.never = tg_linear_new(H, 2, true, o, gen);
  DIST_CHECK_OK(tg_module_add_child(bm.md.m, "odd", tg_linear_module(bm.odd)));
  DIST_CHECK_OK(tg_module_add_child(bm.md.m, "never", tg_linear_module(bm.never)));
  tg_generator_free(gen);
  return bm;
}

/* model_loss plus, on odd steps and where the shard holds column 0, scale * mean(odd(h)^2)
 * over column 0's hidden states: with scale the world size, the DDP's mean over the ranks
 * has the term once, as the whole batch has it in one process (a power of 2: exact). */
static tg_tensor *branch_loss(const branch_model *bm, int s, int b0, int b1, double scale) {
  tg_tensor *hs = NULL;
  tg_tensor *loss = model_loss_hs(&bm->md, s, b0, b1, &hs);
  if (!loss || s % 2 == 0 || b0 != 0) return loss;
  tg_tensor *e = tg_linear_forward(bm->odd, tg_select(hs, 1, 0));
  return tg_add(loss, tg_mul_scalar(tg_mean(tg_mul(e, e)), 0.5 * scale));
}

/* Whether a and b's parameters have a .grad alike (both none, or both), and the largest
 * difference of those that have one. */
static bool grads_alike(const tg_module *a, const tg_module *b, double *worst) {
  bool alike = true;
  for (int i = 0; i < tg_module_num_parameters(a); i++) {
    tg_tensor *ga = tg_grad(tg_module_parameter(a, i, NULL));
    tg_tensor *gb = tg_grad(tg_module_parameter(b, i, NULL));
    if (!ga || !gb) {
      alike = alike && !ga && !gb;
      continue;
    }
    double d = tg_max_abs_diff(ga, gb);
    if (d > *worst || isnan(d)) *worst = d;
  }
  return alike;
}

/* (4) A parameter that no rank uses in a step keeps its .grad as it was (none before its
 * first use, so the optimizer skips it; zeros after tg_zero_grad), one used by rank 0 alone
 * gets the mean: DDP training equals one process on the global batch, with weight decay
 * (which would move a parameter that got a zero gradient instead of none) and with Adam
 * (which would start its state and step count). */
static void test_unused_branch_matches_single_process(bool adam, double bound) {
  branch_model a = make_branch_model(21), r = make_branch_model(21);
  tg_ddp *ddp = tg_ddp_new(a.md.m, (tg_ddp_options){.bucket_cap_bytes = 256});
  DIST_CHECK(ddp);
  tg_optimizer *oa, * or ;
  if (adam) {
    oa = tg_adam_for(a.md.m, (tg_adam_options){.lr = 0.01, .weight_decay = 0.01});
    or = tg_adam_for(r.md.m, (tg_adam_options){.lr = 0.01, .weight_decay = 0.01});
  } else {
    oa = tg_sgd_for(a.md.m, (tg_sgd_options){.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01});
    or = tg_sgd_for(r.md.m, (tg_sgd_options){.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01});
  }
  tg_tensor *odd_w = tg_linear_weight(a.odd), *never_w = tg_linear_weight(a.never);
  double grad_diff = 0;
  for (int s = 0; ddp && s < STEPS; s++) {
    tg_scope sc = tg_scope_begin();
    DIST_CHECK_OK(tg_optimizer_zero_grad(oa));
    DIST_CHECK_OK(tg_ddp_backward(ddp, branch_loss(&a, s, shard_begin(), shard_end(), size)));
    DIST_CHECK_OK(tg_optimizer_zero_grad(or));
    DIST_CHECK_OK(tg_backward(branch_loss(&r, s, 0, GB, 1), NULL));
    DIST_CHECK(grads_alike(a.md.m, r.md.m, &grad_diff));
    DIST_CHECK(s == 0 ? tg_grad(odd_w) == NULL : tg_grad(odd_w) != NULL);
    DIST_CHECK(tg_grad(never_w) == NULL);
    DIST_CHECK_OK(tg_optimizer_step(oa));
    DIST_CHECK_OK(tg_optimizer_step(or));
    tg_scope_end(sc);
  }
  double param_diff = max_param_diff(a.md.m, r.md.m);
  if (rank == 0)
    printf("DDP vs one process with a branch some steps do not use (%s + weight decay), np %d: "
           "max gradient diff %.3g, parameter diff %.3g (bound %.3g)\n",
           adam ? "Adam" : "SGD", size, grad_diff, param_diff, bound);
  DIST_CHECK(grad_diff <= bound);
  DIST_CHECK(param_diff <= bound);
  tg_ddp_free(ddp);
  tg_optimizer_free(oa);
  tg_optimizer_free(or);
  tg_module_free(a.md.m);
  tg_module_free(r.md.m);
}

/* (2) Many small buckets sent during backward (overlap) give the same gradients, bit for
 * bit, as one bucket reduced after backward on the caller's thread. */
static void test_bucketed_equals_one_bucket(void) {
  model a = make_model(TG_F64, 7), b = make_model(TG_F64, 7);
  tg_ddp *da = tg_ddp_new(a.m, (tg_ddp_options){.bucket_cap_bytes = 64});
  tg_ddp *db = tg_ddp_new(b.m, (tg_ddp_options){.bucket_cap_bytes = SIZE_MAX, .no_overlap = true});
  DIST_CHECK(da && db);
  tg_ddp_stats sa = {0}, sb = {0};
  tg_optimizer *oa = tg_sgd_for(a.m, (tg_sgd_options){.lr = 0.1});
  tg_optimizer *ob = tg_sgd_for(b.m, (tg_sgd_options){.lr = 0.1});
  double worst = 0;
  for (int s = 0; da && db && s < 3; s++) {
    tg_scope sc = tg_scope_begin();
    DIST_CHECK_OK(tg_optimizer_zero_grad(oa));
    DIST_CHECK_OK(tg_ddp_backward(da, model_loss(&a, s, shard_begin(), shard_end())));
    DIST_CHECK_OK(tg_optimizer_zero_grad(ob));
    DIST_CHECK_OK(tg_ddp_backward(db, model_loss(&b, s, shard_begin(), shard_end())));
    worst = fmax(worst, max_grad_diff(a.m, b.m));
    DIST_CHECK_OK(tg_optimizer_step(oa));
    DIST_CHECK_OK(tg_optimizer_step(ob));
    tg_scope_end(sc);
  }
  DIST_CHECK_OK(tg_ddp_stats_get(da, &sa));
  DIST_CHECK_OK(tg_ddp_stats_get(db, &sb));
  if (rank == 0)
    printf("bucketed (%d buckets, %lld during backward) vs one bucket after backward: max "
           "gradient diff %.3g, parameter diff %.3g\n",
           sa.n_buckets, (long long)sa.buckets_during_backward, worst, max_param_diff(a.m, b.m));
  DIST_CHECK(sa.n_buckets > 4 && sb.n_buckets == 1);
  DIST_CHECK(sa.buckets_during_backward > 0 && sb.buckets_during_backward == 0);
  DIST_CHECK(worst == 0);
  DIST_CHECK(max_param_diff(a.m, b.m) == 0);
  tg_ddp_free(da);
  tg_ddp_free(db);
  tg_optimizer_free(oa);
  tg_optimizer_free(ob);
  tg_module_free(a.m);
  tg_module_free(b.m);
}

/* A module of three vectors: "w" used by every rank, "rank0" by rank 0 only, "never" by
 * none. */
static tg_module *small_module(tg_tensor **w, tg_tensor **rank0, tg_tensor **never) {
  tg_module *m = tg_module_new("small");
  tg_scope sc = tg_scope_begin();
  DIST_CHECK_OK(
      tg_module_register_parameter(m, "w", tg_ones(TG_SHAPE(4), TG_OPTS(.dtype = TG_F64))));
  DIST_CHECK_OK(
      tg_module_register_parameter(m, "rank0", tg_ones(TG_SHAPE(3), TG_OPTS(.dtype = TG_F64))));
  DIST_CHECK_OK(
      tg_module_register_parameter(m, "never", tg_ones(TG_SHAPE(2), TG_OPTS(.dtype = TG_F64))));
  tg_scope_end(sc);
  *w = tg_module_find(m, "w");
  *rank0 = tg_module_find(m, "rank0");
  *never = tg_module_find(m, "never");
  return m;
}

/* (4) A parameter no rank uses keeps its .grad as it was: none (NULL, so an optimizer skips
 * it, as in one process), or the values it held, even where they differ between the ranks (not
 * averaged; PyTorch's DDP leaves such a .grad alone too). One that only rank 0 uses gets rank
 * 0's gradient over the world size on every rank, a rank that had no .grad too. Nobody hangs.
 * Both routes. */
static void test_unused_parameters(bool overlap) {
  tg_tensor *w, *r0, *never;
  tg_module *m = small_module(&w, &r0, &never);
  tg_ddp *ddp = tg_ddp_new(m, (tg_ddp_options){.bucket_cap_bytes = 8, .no_overlap = !overlap});
  DIST_CHECK(ddp);
  DIST_CHECK(!tg_grad(w) && !tg_grad(r0) && !tg_grad(never)); /* tg_ddp_new gives none */
  for (int s = 0; ddp && s < 2; s++) {
    tg_scope sc = tg_scope_begin();
    DIST_CHECK_OK(tg_module_zero_grad(m));
    tg_tensor *loss = tg_sum(tg_mul_scalar(w, rank + 1.0));
    if (rank == 0) loss = tg_add(loss, tg_sum(tg_mul_scalar(r0, 2.0)));
    DIST_CHECK_OK(tg_ddp_backward(ddp, loss));
    DIST_CHECK(grad_is(w, (size + 1) / 2.0));
    DIST_CHECK(grad_is(r0, 2.0 / size));
    DIST_CHECK(tg_grad(never) == NULL);
    tg_scope_end(sc);
  }
  tg_scope sc = tg_scope_begin();
  /* Unused by every rank, with a .grad that differs between them: the rank's own values stay,
   * for the DDP's view (r0's) and for a tensor of the user's (never's) alike. */
  tg_tensor *own = tg_full(TG_SHAPE(2), 5.0 + rank, TG_OPTS(.dtype = TG_F64));
  DIST_CHECK_OK(tg_set_grad(never, own));
  tg_no_grad_begin();
  DIST_CHECK_OK(tg_fill_(tg_grad(r0), 3.0 + rank));
  tg_no_grad_end();
  DIST_CHECK_OK(tg_zero_grad(w));
  DIST_CHECK_OK(tg_ddp_backward(ddp, tg_sum(w)));
  DIST_CHECK(grad_is(w, 1.0));
  DIST_CHECK(grad_is(r0, 3.0 + rank));
  DIST_CHECK(tg_grad(never) == own && grad_is(never, 5.0 + rank));
  /* Used only in a pass with sync off: what it accumulated then is averaged, not zeroed. */
  DIST_CHECK_OK(tg_module_zero_grad(m));
  tg_ddp_set_sync(ddp, false);
  DIST_CHECK_OK(tg_ddp_backward(ddp, tg_sum(tg_mul_scalar(never, rank + 1.0))));
  tg_ddp_set_sync(ddp, true);
  DIST_CHECK_OK(tg_ddp_backward(ddp, tg_sum(w)));
  DIST_CHECK(grad_is(never, (size + 1) / 2.0));
  DIST_CHECK(grad_is(w, 1.0) && grad_is(r0, 0.0));
  tg_scope_end(sc);
  tg_ddp_free(ddp);
  tg_module_free(m);
}

/* A tensor registered twice (tied weights) gets one slot and one averaged gradient. */
static void test_tied_parameter(void) {
  tg_module *m = tg_module_new("tied");
  tg_scope sc = tg_scope_begin();
  tg_tensor *t = tg_ones(TG_SHAPE(3), TG_OPTS(.dtype = TG_F64));
  DIST_CHECK_OK(tg_module_register_parameter(m, "a", t));
  DIST_CHECK_OK(tg_module_register_parameter(m, "b", t));
  tg_ddp *ddp = tg_ddp_new(m, (tg_ddp_options){.bucket_cap_bytes = 8});
  DIST_CHECK(ddp);
  tg_ddp_stats st = {0};
  DIST_CHECK_OK(tg_ddp_stats_get(ddp, &st));
  DIST_CHECK(st.n_buckets == 1);
  for (int s = 0; ddp && s < 2; s++) {
    DIST_CHECK_OK(tg_module_zero_grad(m));
    DIST_CHECK_OK(tg_ddp_backward(ddp, tg_sum(tg_mul_scalar(t, rank + 1.0))));
    DIST_CHECK(grad_is(t, (size + 1) / 2.0));
  }
  tg_scope_end(sc);
  tg_ddp_free(ddp);
  tg_module_free(m);
}

/* Parameters of two dtypes, alternating, with buckets that fill up: every bucket holds one
 * dtype, each parameter's .grad keeps its dtype and gets the mean. */
static void test_mixed_dtypes(void) {
  tg_module *m = tg_module_new("mixed");
  tg_scope sc = tg_scope_begin();
  const char *names[] = {"a", "b", "c", "d", "e"};
  for (int i = 0; i < 5; i++)
    DIST_CHECK_OK(tg_module_register_parameter(
        m, names[i], tg_ones(TG_SHAPE(2), TG_OPTS(.dtype = i % 2 ? TG_F64 : TG_F32))));
  tg_ddp *ddp = tg_ddp_new(m, (tg_ddp_options){.bucket_cap_bytes = 8});
  DIST_CHECK(ddp);
  tg_ddp_stats st = {0};
  DIST_CHECK_OK(tg_ddp_stats_get(ddp, &st));
  DIST_CHECK(st.n_buckets == 5); /* 8 bytes: each F32 pair fills one, each F64 pair is over */
  for (int s = 0; ddp && s < 2; s++) {
    DIST_CHECK_OK(tg_module_zero_grad(m));
    tg_tensor *loss = NULL;
    for (int i = 0; i < 5; i++) {
      tg_tensor *p = tg_module_find(m, names[i]);
      tg_tensor *term = tg_to_dtype(tg_sum(tg_mul_scalar(p, (rank + 1.0) * (i + 1))), TG_F64);
      loss = loss ? tg_add(loss, term) : term;
    }
    DIST_CHECK_OK(tg_ddp_backward(ddp, loss));
    for (int i = 0; i < 5; i++) {
      tg_tensor *p = tg_module_find(m, names[i]);
      DIST_CHECK(tg_grad(p) && tg_tensor_dtype(tg_grad(p)) == tg_tensor_dtype(p));
      DIST_CHECK(grad_is(p, (size + 1) / 2.0 * (i + 1)));
    }
  }
  tg_scope_end(sc);
  tg_ddp_free(ddp);
  tg_module_free(m);
}

/* (5) Sync off: backward only accumulates; the next synced backward reduces the sum, which
 * equals the local sum of both passes averaged by tg_dist_all_reduce, bit for bit. */
static void test_no_sync_accumulates(void) {
  model a = make_model(TG_F64, 9), r = make_model(TG_F64, 9);
  tg_ddp *ddp = tg_ddp_new(a.m, (tg_ddp_options){.bucket_cap_bytes = 256});
  DIST_CHECK(ddp);
  tg_scope sc = tg_scope_begin();
  tg_ddp_set_sync(ddp, false);
  DIST_CHECK_OK(tg_ddp_backward(ddp, model_loss(&a, 0, shard_begin(), shard_end())));
  DIST_CHECK_OK(tg_ddp_synchronize(ddp)); /* at once: nothing sent */
  tg_ddp_stats st = {0};
  DIST_CHECK_OK(tg_ddp_stats_get(ddp, &st));
  DIST_CHECK(st.steps == 0 && st.buckets_during_backward == 0);
  tg_ddp_set_sync(ddp, true);
  DIST_CHECK_OK(tg_ddp_backward(ddp, model_loss(&a, 1, shard_begin(), shard_end())));
  DIST_CHECK_OK(tg_backward(model_loss(&r, 0, shard_begin(), shard_end()), NULL));
  DIST_CHECK_OK(tg_backward(model_loss(&r, 1, shard_begin(), shard_end()), NULL));
  for (int i = 0; i < tg_module_num_parameters(r.m); i++)
    DIST_CHECK_OK(tg_dist_all_reduce(tg_grad(tg_module_parameter(r.m, i, NULL)), TG_REDUCE_MEAN));
  double d = max_grad_diff(a.m, r.m);
  if (rank == 0) printf("sync off then on vs local sum all-reduced: max gradient diff %.3g\n", d);
  DIST_CHECK(d == 0);
  DIST_CHECK_OK(tg_ddp_stats_get(ddp, &st));
  DIST_CHECK(st.steps == 1);
  tg_scope_end(sc);
  tg_ddp_free(ddp);
  tg_module_free(a.m);
  tg_module_free(r.m);
}

static tg_status fail_on_rank1(void *user, tg_tensor *leaf) {
  (void)user, (void)leaf;
  return rank == 1 ? tg_set_error(TG_ERR_STATE, "test: a hook fails on rank 1") : TG_OK;
}

/* Rank 1's backward fails half way (a hook of the test's own, with buckets already gone to
 * the communication thread on every rank): rank 1 reports its error, the others TG_ERR_DIST
 * naming it, nobody hangs, and the next step starts a clean round: its gradients equal a
 * reference's all-reduced one by one, bit for bit. */
static void test_backward_fails_half_way_on_one_rank(void) {
  model a = make_model(TG_F64, 13), r = make_model(TG_F64, 13);
  tg_ddp *ddp = tg_ddp_new(a.m, (tg_ddp_options){.bucket_cap_bytes = 64});
  DIST_CHECK(ddp);
  tg_tensor *mid = tg_module_parameter(a.m, 1, NULL); /* the LLTM's: done half way back */
  int handle = -1;
  DIST_CHECK_OK(tg_register_post_accumulate_grad_hook(mid, fail_on_rank1, NULL, &handle));
  tg_scope sc = tg_scope_begin();
  DIST_CHECK_OK(tg_module_zero_grad(a.m));
  tg_status st = tg_ddp_backward(ddp, model_loss(&a, 0, shard_begin(), shard_end()));
  if (rank == 1)
    DIST_CHECK_ERR(st, TG_ERR_STATE, "a hook fails on rank 1");
  else
    DIST_CHECK_ERR(st, TG_ERR_DIST, "rank 1 failed this step (TG_ERR_STATE)");
  tg_ddp_stats stats = {0};
  DIST_CHECK_OK(tg_ddp_stats_get(ddp, &stats));
  DIST_CHECK(stats.steps == 1 && stats.buckets_during_backward > 0);
  DIST_CHECK_OK(tg_remove_post_accumulate_grad_hook(mid, handle));
  DIST_CHECK_OK(tg_module_zero_grad(a.m));
  DIST_CHECK_OK(tg_ddp_backward(ddp, model_loss(&a, 1, shard_begin(), shard_end())));
  DIST_CHECK_OK(tg_backward(model_loss(&r, 1, shard_begin(), shard_end()), NULL));
  for (int i = 0; i < tg_module_num_parameters(r.m); i++)
    DIST_CHECK_OK(tg_dist_all_reduce(tg_grad(tg_module_parameter(r.m, i, NULL)), TG_REDUCE_MEAN));
  DIST_CHECK(max_grad_diff(a.m, r.m) == 0);
  tg_scope_end(sc);
  tg_ddp_free(ddp);
  tg_module_free(a.m);
  tg_module_free(r.m);
}

/* (6) A .grad the user replaced (a tensor of their own, or none) is taken as the gradient so
 * far and the view comes back: the result equals a reference that does the same without
 * DDP, and every .grad is in the one bucket again. */
static void test_replaced_grads(void) {
  model a = make_model(TG_F64, 11), r = make_model(TG_F64, 11);
  tg_ddp *ddp = tg_ddp_new(a.m, (tg_ddp_options){.bucket_cap_bytes = SIZE_MAX});
  DIST_CHECK(ddp);
  tg_scope sc = tg_scope_begin();
  tg_tensor *a0 = tg_module_parameter(a.m, 0, NULL), *a1 = tg_module_parameter(a.m, 1, NULL);
  tg_tensor *r0 = tg_module_parameter(r.m, 0, NULL);
  int last = tg_module_num_parameters(a.m) - 1;
  DIST_CHECK_OK(tg_set_grad(a0, tg_ones_like(a0)));
  DIST_CHECK_OK(tg_set_grad(a1, NULL));
  DIST_CHECK_OK(tg_set_grad(r0, tg_ones_like(r0)));
  DIST_CHECK_OK(tg_ddp_backward(ddp, model_loss(&a, 0, shard_begin(), shard_end())));
  DIST_CHECK_OK(tg_backward(model_loss(&r, 0, shard_begin(), shard_end()), NULL));
  for (int i = 0; i < tg_module_num_parameters(r.m); i++)
    DIST_CHECK_OK(tg_dist_all_reduce(tg_grad(tg_module_parameter(r.m, i, NULL)), TG_REDUCE_MEAN));
  DIST_CHECK(max_grad_diff(a.m, r.m) == 0);
  DIST_CHECK(tg_shares_storage(tg_grad(a0), tg_grad(tg_module_parameter(a.m, last, NULL))));
  DIST_CHECK(tg_shares_storage(tg_grad(a1), tg_grad(a0)));
  tg_scope_end(sc);
  tg_ddp_free(ddp);
  /* The .grad tensors outlive the DDP (the views keep the flat buffer). */
  tg_scope sc2 = tg_scope_begin();
  DIST_CHECK(tg_grad(a0) && max_grad_diff(a.m, r.m) == 0);
  tg_scope_end(sc2);
  tg_module_free(a.m);
  tg_module_free(r.m);
}

/* (6) Misuse and bad arguments, after init. */
static void test_errors(void) {
  tg_ddp_stats st;
  DIST_CHECK(tg_ddp_new(NULL, (tg_ddp_options){0}) == NULL);
  DIST_CHECK_ERR(tg_last_error(), TG_ERR_ARGUMENT, "tg_ddp_new: m is NULL");
  DIST_CHECK_ERR(tg_ddp_backward(NULL, NULL), TG_ERR_ARGUMENT, "tg_ddp_backward: ddp");
  DIST_CHECK_ERR(tg_ddp_synchronize(NULL), TG_ERR_ARGUMENT, "tg_ddp_synchronize: ddp");
  DIST_CHECK_ERR(tg_ddp_stats_get(NULL, &st), TG_ERR_ARGUMENT, "tg_ddp_stats_get: ddp");
  tg_ddp_free(NULL);
  tg_ddp_set_sync(NULL, false);
  tg_ddp_stats_reset(NULL);

  /* No parameter requires grad: an error on every rank. */
  tg_tensor *w, *r0, *never;
  tg_module *m = small_module(&w, &r0, &never);
  for (int i = 0; i < 3; i++)
    DIST_CHECK_OK(tg_set_requires_grad(tg_module_parameter(m, i, NULL), false));
  DIST_CHECK(tg_ddp_new(m, (tg_ddp_options){0}) == NULL);
  DIST_CHECK_ERR(tg_last_error(), TG_ERR_ARGUMENT, "no parameter that requires grad");
  /* Different parameters frozen on different ranks: the layouts differ, on every rank. */
  DIST_CHECK_OK(tg_set_requires_grad(w, true));
  DIST_CHECK_OK(tg_set_requires_grad(r0, rank == 1));
  tg_ddp *bad = tg_ddp_new(m, (tg_ddp_options){.no_broadcast = true});
  if (size > 1) {
    DIST_CHECK(bad == NULL);
    DIST_CHECK_ERR(tg_last_error(), TG_ERR_ARGUMENT, "buckets differ");
  }
  tg_ddp_free(bad);
  tg_clear_error();

  /* stats_get without out; a second backward before synchronize (no_overlap, so the
   * second pass races with no all-reduce): TG_ERR_STATE from both, and the DDP works on. */
  DIST_CHECK_OK(tg_set_requires_grad(r0, true));
  DIST_CHECK_OK(tg_set_requires_grad(never, true));
  tg_ddp *ddp = tg_ddp_new(m, (tg_ddp_options){.no_overlap = true});
  DIST_CHECK(ddp);
  DIST_CHECK_ERR(tg_ddp_stats_get(ddp, NULL), TG_ERR_ARGUMENT, "out is NULL");
  tg_scope sc = tg_scope_begin();
  DIST_CHECK_OK(tg_backward(tg_sum(w), NULL));
  DIST_CHECK_ERR(tg_backward(tg_sum(w), NULL), TG_ERR_STATE, "second backward");
  DIST_CHECK_ERR(tg_ddp_synchronize(ddp), TG_ERR_STATE, "second backward");
  /* A backward that fails still synchronizes (the peers are not left waiting). */
  tg_ddp_stats before = {0}, after = {0};
  DIST_CHECK_OK(tg_ddp_stats_get(ddp, &before));
  DIST_CHECK_ERR(tg_ddp_backward(ddp, NULL), TG_ERR_ARGUMENT, NULL);
  DIST_CHECK_OK(tg_ddp_stats_get(ddp, &after));
  DIST_CHECK(after.steps == before.steps + 1);
  /* Only rank 1's backward fails: rank 1 gets its error, the others TG_ERR_DIST naming it. */
  if (size > 1) {
    tg_tensor *loss = rank == 1 ? NULL : tg_sum(w);
    if (rank == 1)
      DIST_CHECK_ERR(tg_ddp_backward(ddp, loss), TG_ERR_ARGUMENT, NULL);
    else
      DIST_CHECK_ERR(tg_ddp_backward(ddp, loss), TG_ERR_DIST, "rank 1 failed this step");
  }
  DIST_CHECK_OK(tg_module_zero_grad(m));
  DIST_CHECK_OK(tg_ddp_backward(ddp, tg_sum(tg_mul_scalar(w, rank + 1.0))));
  DIST_CHECK(grad_is(w, (size + 1) / 2.0));
  tg_scope_end(sc);
  tg_ddp_free(ddp);
  tg_module_free(m);
}

/* ---- np >= 2: tg_ddp_new fails on rank 1 alone, at each of its host allocations ----
 * Every rank must then return NULL (none keeps a DDP its peers do not have, which would hang
 * at its first synchronize): rank 1 with its own TG_ERR_MEMORY, the others with the same
 * status naming rank 1. Nothing leaks on any rank. */
static void test_new_fails_on_one_rank(void) {
  tg_tensor *w, *r0, *never;
  tg_module *m = small_module(&w, &r0, &never);
  tg_ddp_options opts = {.bucket_cap_bytes = 8, .no_broadcast = true};
  int64_t before = tg__host_allocation_count();
  tg_ddp *ddp = tg_ddp_new(m, opts);
  int64_t n = tg__host_allocation_count() - before;
  DIST_CHECK(ddp);
  tg_ddp_free(ddp);
  int64_t live = tg_live_objects();
  int64_t n_max = n; /* rank 1's count: the sweep runs as long on every rank */
  DIST_CHECK_OK(tg__dist_allreduce_host("test", &n_max, 1, TG_I64, TG_REDUCE_MAX));
  int failed = 0;
  for (int64_t k = 1; k <= n_max + 1; k++) {
    if (rank == 1) tg__host_fail_allocation(k);
    ddp = tg_ddp_new(m, opts);
    tg__host_fail_allocation(0);
    tg_status st = ddp ? TG_OK : tg_last_error();
    char message[512];
    snprintf(message, sizeof message, "%s", tg_last_error_message());
    tg_clear_error();
    int64_t got[2] = {ddp != NULL, -(int64_t)(ddp != NULL)}; /* max and -min over the ranks */
    DIST_CHECK_OK(tg__dist_allreduce_host("test", got, 2, TG_I64, TG_REDUCE_MAX));
    if (got[0] != -got[1])
      fprintf(stderr, "rank %d: k=%lld: tg_ddp_new %s here, not on every rank (%s)\n", rank,
              (long long)k, ddp ? "succeeded" : "failed", message);
    DIST_CHECK(got[0] == -got[1]);
    if (!ddp) {
      failed++;
      DIST_CHECK(st == TG_ERR_MEMORY);
      if (rank != 1) DIST_CHECK(strstr(message, "rank 1 failed (TG_ERR_MEMORY"));
    }
    tg_ddp_free(ddp);
    DIST_CHECK(tg_live_objects() == live);
  }
  if (rank == 0)
    printf("tg_ddp_new failing on rank 1 alone: %lld allocations, %d runs failed on every "
           "rank\n",
           (long long)n_max, failed);
  DIST_CHECK(failed > 0);
  tg_module_free(m);
}

/* ---- np 1: every host allocation of new -> backward -> synchronize (twice, the second with
 * parameters unused) -> free fails once ---- */
enum { SWEEP_MAX = 4096 };

/* Two DDP steps on md; the gradients they averaged go into out. */
static tg_status sweep_step(const model *md, bool overlap, double *out, int *n_out) {
  tg_scope sc = tg_scope_begin();
  tg_ddp *ddp =
      tg_ddp_new(md->m, (tg_ddp_options){.bucket_cap_bytes = 256, .no_overlap = !overlap});
  tg_status st = ddp ? tg_ddp_backward(ddp, model_loss(md, 0, 0, GB)) : tg_last_error();
  /* A second pass that uses the head's weight alone: every other .grad (the slot) is saved,
   * reduced and put back (hold_unused, settle_unused). */
  if (st == TG_OK) st = tg_ddp_backward(ddp, tg_sum(tg_linear_weight(md->head)));
  *n_out = 0;
  for (int i = 0; st == TG_OK && i < tg_module_num_parameters(md->m); i++) {
    tg_tensor *g = tg_grad(tg_module_parameter(md->m, i, NULL));
    int64_t n = tg_numel(g);
    if (*n_out + n > SWEEP_MAX) abort();
    st = tg_to_host_array(g, out + *n_out, sizeof(double) * (size_t)n);
    *n_out += (int)n;
  }
  tg_ddp_free(ddp);
  for (int i = 0; i < tg_module_num_parameters(md->m); i++)
    tg_set_grad(tg_module_parameter(md->m, i, NULL), NULL); /* the next run starts alike */
  tg_scope_end(sc);
  return st;
}

static void test_alloc_sweep(bool overlap) {
  static double ref[SWEEP_MAX], got[SWEEP_MAX];
  model md = make_model(TG_F64, 5);
  int64_t live = tg_live_objects();
  int n_ref = 0, n_got = 0, failed = 0, succeeded = 0;
  int64_t before = tg__host_allocation_count();
  DIST_CHECK_OK(sweep_step(&md, overlap, ref, &n_ref));
  int64_t n = tg__host_allocation_count() - before;
  for (int64_t k = 1; k <= n + 2; k++) {
    int64_t injected = tg__host_injected_failures();
    tg__host_fail_allocation(k);
    tg_status st = sweep_step(&md, overlap, got, &n_got);
    tg__host_fail_allocation(0);
    bool fired = tg__host_injected_failures() > injected;
    if (st == TG_OK) {
      succeeded += fired;
      DIST_CHECK(tg_last_error() == TG_OK);
      DIST_CHECK(n_got == n_ref && memcmp(got, ref, sizeof(double) * (size_t)n_ref) == 0);
    } else {
      failed++;
      DIST_CHECK(st == TG_ERR_MEMORY && fired);
      if (st != TG_ERR_MEMORY)
        fprintf(stderr, "k=%lld: %s: %s\n", (long long)k, tg_status_name(st),
                tg_last_error_message());
      DIST_CHECK(tg_last_error_message()[0] != '\0');
    }
    tg_clear_error();
    DIST_CHECK(tg_live_objects() == live);
  }
  printf("allocation sweep (%s): %lld allocations, %d runs failed cleanly, %d succeeded "
         "although one failed\n",
         overlap ? "overlap" : "no_overlap", (long long)n, failed, succeeded);
  DIST_CHECK(n > 0 && failed > 0);
  tg_module_free(md.m);
}

int main(int argc, char **argv) {
  /* Before tg_dist_init: a clear error, not a crash. */
  model early = make_model(TG_F32, 1);
  DIST_CHECK(tg_ddp_new(early.m, (tg_ddp_options){0}) == NULL);
  DIST_CHECK_ERR(tg_last_error(), TG_ERR_STATE, "tg_ddp_new");
  tg_module_free(early.m);

  DIST_CHECK_OK(tg_dist_init(&argc, &argv, (tg_dist_options){0}));
  rank = tg_dist_rank();
  size = tg_dist_world_size();
  tg_scope sc = tg_scope_begin();
  /* Bounds with a margin over what was measured (see the printed lines). */
  test_matches_single_process(TG_F64, 1e-12, 1e-12);
  test_matches_single_process(TG_F32, 1e-5, 1e-5);
  test_bucketed_equals_one_bucket();
  test_unused_parameters(true);
  test_unused_parameters(false);
  test_unused_branch_matches_single_process(false, 1e-12);
  test_unused_branch_matches_single_process(true, 1e-12);
  test_tied_parameter();
  test_mixed_dtypes();
  test_no_sync_accumulates();
  test_replaced_grads();
  test_errors();
  if (size > 1) test_backward_fails_half_way_on_one_rank();
  if (size > 1) test_new_fails_on_one_rank();
  if (size == 1) {
    test_alloc_sweep(false);
    test_alloc_sweep(true);
  }
  tg_scope_end(sc);
  DIST_CHECK(tg_live_objects() == 0);
  const int failed = dist_check_finish("test_ddp");
  DIST_CHECK_OK(tg_dist_finalize());
  return failed;
}
