/* Checkpoints (tg/nn.h): round trip, resume == uninterrupted run bit for bit, a writer
 * killed mid-write, mismatches refused with nothing changed, allocation failures. */
#define _GNU_SOURCE /* mkdtemp */
#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "alloc_sweep.h"
#include "io/file_io.h"

/* A tiny character model: embedding -> LLTM over SEQ steps -> linear -> cross_entropy. */
enum { VOCAB = 11, EMBED = 6, HIDDEN = 6, SEQ = 5, BATCH = 4, N_TOKENS = 120 };

typedef struct lm {
  tg_module *model; /* owns the three layers */
  tg_embedding_layer *emb;
  tg_lltm_seq *rnn;
  tg_linear *head;
  tg_optimizer *opt;
  tg_generator *sampler; /* picks the batches */
  int64_t hidden;
} lm;

static void lm_free(lm *l) {
  tg_optimizer_free(l->opt);
  tg_module_free(l->model);
  tg_generator_free(l->sampler);
  memset(l, 0, sizeof *l);
}

/* Adds child to the model, freeing it (through free_child) when that fails. */
#define ADD_CHILD(st, l, name, handle, module_of, free_fn)                                         \
  do {                                                                                             \
    if ((st) == TG_OK && !(handle)) (st) = tg_last_error();                                        \
    if ((st) == TG_OK) (st) = tg_module_add_child((l)->model, name, module_of(handle));            \
    if ((st) != TG_OK) {                                                                           \
      free_fn(handle);                                                                             \
      (handle) = NULL;                                                                             \
    }                                                                                              \
  } while (0)

/* Builds a model with Adam; no assertion, so allocation sweeps can run it. */
static tg_status lm_new(lm *l, uint64_t init_seed, uint64_t sampler_seed, int64_t hidden) {
  memset(l, 0, sizeof *l);
  l->hidden = hidden;
  tg_generator *init = tg_generator_new(init_seed);
  l->sampler = tg_generator_new(sampler_seed);
  l->model = tg_module_new("charlm");
  tg_status st = init && l->sampler && l->model ? TG_OK : tg_last_error();
  if (st == TG_OK) l->emb = tg_embedding_layer_new(VOCAB, EMBED, TG_OPTS_DEFAULT, init);
  ADD_CHILD(st, l, "embed", l->emb, tg_embedding_layer_module, tg_embedding_layer_free);
  if (st == TG_OK) l->rnn = tg_lltm_seq_new(EMBED, hidden, TG_LLTM_FUSED, TG_OPTS_DEFAULT, init);
  ADD_CHILD(st, l, "rnn", l->rnn, tg_lltm_seq_module, tg_lltm_seq_free);
  if (st == TG_OK) l->head = tg_linear_new(hidden, VOCAB, true, TG_OPTS_DEFAULT, init);
  ADD_CHILD(st, l, "head", l->head, tg_linear_module, tg_linear_free);
  if (st == TG_OK && !(l->opt = tg_adam_for(l->model, (tg_adam_options){.lr = 2e-2})))
    st = tg_last_error();
  tg_generator_free(init);
  if (st != TG_OK) lm_free(l);
  return st;
}

static int64_t tokens[N_TOKENS];

static void make_tokens(void) {
  for (int i = 0; i < N_TOKENS; i++) tokens[i] = (i * 7 + i / 3 + (i * i) % 5) % VOCAB;
}

/* One step: a batch drawn with the sampler, forward, backward, Adam. */
static tg_status lm_step(lm *l, double *loss_out) {
  tg_scope sc = tg_scope_begin();
  float u[BATCH];
  int64_t x[SEQ * BATCH], y[SEQ * BATCH];
  tg_tensor *draw = tg_rand(TG_SHAPE(BATCH), TG_OPTS_DEFAULT, l->sampler);
  tg_status st = draw ? tg_to_host_array(draw, u, sizeof u) : tg_last_error();
  for (int b = 0; b < BATCH && st == TG_OK; b++) {
    int64_t start = (int64_t)(u[b] * (float)(N_TOKENS - SEQ - 1));
    for (int t = 0; t < SEQ; t++) {
      x[t * BATCH + b] = tokens[start + t];
      y[t * BATCH + b] = tokens[start + t + 1];
    }
  }
  tg_options i64 = {.dtype = TG_I64};
  tg_tensor *out = NULL, *loss = NULL;
  if (st == TG_OK) {
    tg_tensor *xs = tg_embedding_layer_forward(l->emb, tg_from_data(TG_SHAPE(SEQ, BATCH), x, i64));
    st = tg_lltm_seq_forward(l->rnn, xs, NULL, NULL, &out, NULL, NULL);
  }
  if (st == TG_OK) {
    tg_tensor *h = tg_reshape(out, TG_SHAPE(SEQ * BATCH, l->hidden));
    loss = tg_cross_entropy(tg_linear_forward(l->head, h),
                            tg_from_data(TG_SHAPE(SEQ * BATCH), y, i64));
    st = loss ? tg_item(loss, loss_out) : tg_last_error();
  }
  if (st == TG_OK) st = tg_optimizer_zero_grad(l->opt);
  if (st == TG_OK) st = tg_backward(loss, NULL);
  if (st == TG_OK) st = tg_optimizer_step(l->opt);
  tg_scope_end(sc);
  return st;
}

static void lm_make(lm *l, uint64_t init_seed, uint64_t sampler_seed, int64_t hidden) {
  cr_assert_eq(lm_new(l, init_seed, sampler_seed, hidden), TG_OK, "lm_new: %s",
               tg_last_error_message());
}

static void lm_train(lm *l, int steps, double *losses) {
  for (int i = 0; i < steps; i++) {
    double loss;
    cr_assert_eq(lm_step(l, &loss), TG_OK, "step %d: %s", i, tg_last_error_message());
    if (losses) losses[i] = loss;
  }
}

/* ---- a temporary directory per test ---- */

static char dir[64];
static char path[128];

static void make_dir(void) {
  snprintf(dir, sizeof dir, "/tmp/tg_checkpoint_XXXXXX");
  cr_assert(mkdtemp(dir), "mkdtemp failed");
  snprintf(path, sizeof path, "%s/model.ckpt", dir);
  make_tokens();
}

static void remove_dir(void) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  char file[512];
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    snprintf(file, sizeof file, "%s/%s", dir, e->d_name);
    unlink(file);
  }
  closedir(d);
  rmdir(dir);
}

/* Files in the directory (the checkpoint, leftover temporary files). */
static int files_in_dir(void) {
  DIR *d = opendir(dir);
  cr_assert(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
  closedir(d);
  return n;
}

/* ---- comparing state ---- */

/* Every entry of a equals b's entry of the same name, bit for bit, and nothing else. */
static void assert_dicts_equal(const tg_tensor_dict *a, const tg_tensor_dict *b, const char *what) {
  cr_assert_eq(tg_tensor_dict_size(a), tg_tensor_dict_size(b), "%s: %d entries vs %d", what,
               tg_tensor_dict_size(a), tg_tensor_dict_size(b));
  for (int i = 0; i < tg_tensor_dict_size(a); i++) {
    const char *name = tg_tensor_dict_name(a, i);
    tg_tensor *other = tg_tensor_dict_get(b, name);
    cr_assert(other, "%s: %s missing", what, name);
    cr_assert_eq(tg_tensor_dtype(tg_tensor_dict_at(a, i)), tg_tensor_dtype(other), "%s: %s dtype",
                 what, name);
    cr_assert_eq(tg_max_abs_diff(tg_tensor_dict_at(a, i), other), 0.0, "%s: %s differs", what,
                 name);
  }
}

/* A copy of the model's and optimizer's state and the sampler's, to compare with later. */
typedef struct snapshot {
  tg_tensor_dict *model, *optim;
  tg_generator_state sampler, fallback;
} snapshot;

static tg_tensor_dict *cloned(tg_tensor_dict *shared) {
  cr_assert(shared, "%s", tg_last_error_message());
  tg_tensor_dict *copy = tg_tensor_dict_new();
  tg_no_grad_begin();
  for (int i = 0; i < tg_tensor_dict_size(shared); i++)
    cr_assert_eq(tg_tensor_dict_set(copy, tg_tensor_dict_name(shared, i),
                                    tg_clone(tg_tensor_dict_at(shared, i))),
                 TG_OK);
  tg_no_grad_end();
  tg_tensor_dict_free(shared);
  return copy;
}

static snapshot take_snapshot(const lm *l) {
  return (snapshot){cloned(tg_module_state_dict(l->model)), cloned(tg_optimizer_state_dict(l->opt)),
                    tg_generator_get_state(l->sampler), tg_generator_get_state(NULL)};
}

static void assert_unchanged(const lm *l, snapshot *s) {
  tg_tensor_dict *now = tg_module_state_dict(l->model);
  assert_dicts_equal(now, s->model, "model");
  tg_tensor_dict_free(now);
  now = tg_optimizer_state_dict(l->opt);
  assert_dicts_equal(now, s->optim, "optimizer");
  tg_tensor_dict_free(now);
  tg_generator_state g = tg_generator_get_state(l->sampler);
  cr_assert(g.seed == s->sampler.seed && g.offset == s->sampler.offset, "sampler changed");
  g = tg_generator_get_state(NULL);
  cr_assert(g.seed == s->fallback.seed && g.offset == s->fallback.offset,
            "default generator changed");
  tg_tensor_dict_free(s->model);
  tg_tensor_dict_free(s->optim);
}

/* ---- round trip and resume ---- */

TG_TEST(checkpoint, round_trip) {
  make_dir();
  lm a, b;
  lm_make(&a, 1, 5, HIDDEN);
  lm_train(&a, 3, NULL);
  tg_manual_seed(1234);
  tg_tensor *burn = tg_rand(TG_SHAPE(7), TG_OPTS_DEFAULT, NULL); /* moves the default's offset */
  cr_assert(burn);
  tg_generator_state fallback = tg_generator_get_state(NULL);
  char fallback_text[64];
  snprintf(fallback_text, sizeof fallback_text, "1234:%llu", (unsigned long long)fallback.offset);
  cr_assert_neq(fallback.offset, 0);
  tg_generator *gens[2] = {a.sampler, NULL};
  cr_assert_eq(tg_checkpoint_save(path, a.model, a.opt, 3, 2, gens), TG_OK, "%s",
               tg_last_error_message());
  snapshot saved = take_snapshot(&a);

  lm_make(&b, 2, 99, HIDDEN);
  tg_manual_seed(77);
  int64_t step = -1;
  gens[0] = b.sampler;
  cr_assert_eq(tg_checkpoint_load(path, b.model, b.opt, &step, 2, gens), TG_OK, "%s",
               tg_last_error_message());
  cr_assert_eq(step, 3);
  assert_unchanged(&b, &saved); /* b now holds exactly what a saved */

  /* The file itself: model.* and optim.* entries, the metadata. */
  tg_tensor_dict *file = tg_safetensors_load(path);
  cr_assert(file, "%s", tg_last_error_message());
  cr_assert(tg_tensor_dict_get(file, "model.embed.weight"));
  cr_assert(tg_tensor_dict_get(file, "model.rnn.cell.weights"));
  cr_assert(tg_tensor_dict_get(file, "model.head.bias"));
  cr_assert(tg_tensor_dict_get(file, "optim.head.weight.exp_avg_sq"));
  cr_assert_str_eq(tg_tensor_dict_get_meta(file, "tg.checkpoint"), "1");
  cr_assert_str_eq(tg_tensor_dict_get_meta(file, "tg.step"), "3");
  cr_assert_str_eq(tg_tensor_dict_get_meta(file, "tg.generator.1"), fallback_text);
  tg_tensor_dict_free(file);
  lm_free(&a);
  lm_free(&b);
  remove_dir();
}

TG_TEST(checkpoint, resume_equals_uninterrupted_run_bit_for_bit) {
  enum { N = 6 };
  make_dir();
  /* One thread: on contended cores tg may switch a 2-thread run to one thread for a while
   * (src/ops/cpu/cpu_contention.c), which rounds differently. */
  tg_set_num_threads(1);
  double straight[2 * N], resumed[2 * N];
  lm a;
  lm_make(&a, 1, 5, HIDDEN);
  lm_train(&a, 2 * N, straight);
  lm_free(&a);

  lm_make(&a, 1, 5, HIDDEN);
  lm_train(&a, N, resumed);
  cr_assert_eq(tg_checkpoint_save(path, a.model, a.opt, N, 1, &a.sampler), TG_OK, "%s",
               tg_last_error_message());
  lm_free(&a);

  /* New objects, other seeds: everything that matters comes from the file. */
  lm b;
  lm_make(&b, 42, 43, HIDDEN);
  int64_t step = 0;
  cr_assert_eq(tg_checkpoint_load(path, b.model, b.opt, &step, 1, &b.sampler), TG_OK, "%s",
               tg_last_error_message());
  cr_assert_eq(step, N);
  lm_train(&b, N, resumed + N);
  for (int i = 0; i < 2 * N; i++)
    cr_assert(straight[i] == resumed[i], "step %d: loss %.17g resumed, %.17g uninterrupted", i,
              resumed[i], straight[i]);
  cr_assert(straight[2 * N - 1] < straight[0], "the loss falls (%.6g -> %.6g)", straight[0],
            straight[2 * N - 1]);
  lm_free(&b);
  remove_dir();
}

TG_TEST(checkpoint, without_optimizer_and_generators) {
  make_dir();
  lm a, b;
  lm_make(&a, 1, 5, HIDDEN);
  lm_make(&b, 2, 5, HIDDEN);
  cr_assert_eq(tg_checkpoint_save(path, a.model, NULL, 0, 0, NULL), TG_OK, "%s",
               tg_last_error_message());
  cr_assert_eq(tg_checkpoint_load(path, b.model, NULL, NULL, 0, NULL), TG_OK, "%s",
               tg_last_error_message());
  tg_tensor_dict *sa = tg_module_state_dict(a.model), *sb = tg_module_state_dict(b.model);
  assert_dicts_equal(sa, sb, "model");
  tg_tensor_dict_free(sa);
  tg_tensor_dict_free(sb);

  /* An optimizer wants its state: a file saved without one is refused. */
  snapshot before = take_snapshot(&b);
  cr_assert_eq(tg_checkpoint_load(path, b.model, b.opt, NULL, 0, NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, path, "no optimizer state");
  assert_unchanged(&b, &before);

  /* A checkpoint with an optimizer loads into a model alone (for sampling, say). */
  lm_train(&a, 2, NULL);
  cr_assert_eq(tg_checkpoint_save(path, a.model, a.opt, 2, 0, NULL), TG_OK);
  int64_t step = 0;
  cr_assert_eq(tg_checkpoint_load(path, b.model, NULL, &step, 0, NULL), TG_OK, "%s",
               tg_last_error_message());
  cr_assert_eq(step, 2);
  lm_free(&a);
  lm_free(&b);
  remove_dir();
}

/* A model-only load (opt NULL, no generators), as a user sampling from a trained model
 * writes it: the file's generator states are not demanded and no generator changes (it
 * failed with "holds the state of 2 generator(s), 0 given"). */
TG_TEST(checkpoint, model_only_load_takes_the_model_alone) {
  make_dir();
  lm a, b;
  lm_make(&a, 1, 5, HIDDEN);
  lm_train(&a, 2, NULL);
  tg_generator *gens[2] = {a.sampler, NULL};
  cr_assert_eq(tg_checkpoint_save(path, a.model, a.opt, 2, 2, gens), TG_OK, "%s",
               tg_last_error_message());
  lm_make(&b, 2, 99, HIDDEN);
  tg_manual_seed(77);
  tg_generator_state sampler = tg_generator_get_state(b.sampler);
  tg_generator_state fallback = tg_generator_get_state(NULL);
  int64_t step = 0;
  cr_assert_eq(tg_checkpoint_load(path, b.model, NULL, &step, 0, NULL), TG_OK, "%s",
               tg_last_error_message());
  cr_assert_eq(step, 2);
  tg_tensor_dict *sa = tg_module_state_dict(a.model), *sb = tg_module_state_dict(b.model);
  assert_dicts_equal(sa, sb, "model");
  tg_tensor_dict_free(sa);
  tg_tensor_dict_free(sb);
  tg_generator_state now = tg_generator_get_state(b.sampler);
  cr_assert(now.seed == sampler.seed && now.offset == sampler.offset, "the sampler changed");
  now = tg_generator_get_state(NULL);
  cr_assert(now.seed == fallback.seed && now.offset == fallback.offset,
            "the default generator changed");
  /* Generators asked for are still restored, all of them: a count that differs is refused. */
  gens[0] = b.sampler;
  cr_assert_eq(tg_checkpoint_load(path, b.model, NULL, NULL, 2, gens), TG_OK, "%s",
               tg_last_error_message());
  now = tg_generator_get_state(b.sampler);
  cr_assert_eq(now.offset, tg_generator_get_state(a.sampler).offset);
  cr_assert_eq(tg_checkpoint_load(path, b.model, NULL, NULL, 1, gens), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "holds the state of 2 generator(s), 1 given");
  /* With the optimizer (a resume), the generators are required. */
  cr_assert_eq(tg_checkpoint_load(path, b.model, b.opt, NULL, 0, NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "holds the state of 2 generator(s), 0 given");
  lm_free(&a);
  lm_free(&b);
  remove_dir();
}

/* ---- crashes and failed writes ---- */

static bool kill_after_first_chunk(size_t written, void *user) {
  (void)user;
  if (written >= TG__WRITE_CHUNK) kill(getpid(), SIGKILL);
  return true;
}

static bool refuse_writes(size_t written, void *user) {
  (void)written;
  (void)user;
  return false;
}

/* A model whose state is more than a few write chunks (1 MiB each). */
static tg_module *big_model(uint64_t seed, tg_embedding_layer **emb) {
  tg_generator *g = tg_generator_new(seed);
  tg_module *m = tg_module_new("big");
  *emb = tg_embedding_layer_new(4096, 200, TG_OPTS_DEFAULT, g); /* 3.2 MB of F32 */
  cr_assert(m && *emb, "%s", tg_last_error_message());
  cr_assert_eq(tg_module_add_child(m, "embed", tg_embedding_layer_module(*emb)), TG_OK);
  tg_generator_free(g);
  return m;
}

TG_TEST(checkpoint, killed_mid_write_leaves_the_previous_checkpoint) {
  make_dir();
  tg_embedding_layer *emb;
  tg_module *m = big_model(1, &emb);
  cr_assert_eq(tg_checkpoint_save(path, m, NULL, 10, 0, NULL), TG_OK, "%s",
               tg_last_error_message());
  tg_tensor_dict *before = cloned(tg_module_state_dict(m));

  /* The parent changes the model (the child must not start OpenMP's threads after a fork)
   * and a child dies while saving it. */
  tg_no_grad_begin();
  cr_assert_eq(tg_fill_(tg_embedding_layer_weight(emb), 7.0), TG_OK);
  tg_no_grad_end();
  pid_t pid = fork();
  cr_assert(pid >= 0, "fork failed");
  if (pid == 0) {
    alarm(20); /* a hung child fails the test instead of hanging it */
    tg_set_num_threads(1);
    tg__set_write_hook(kill_after_first_chunk, NULL);
    tg_checkpoint_save(path, m, NULL, 20, 0, NULL);
    _exit(3); /* not reached when the hook fires */
  }
  int status = 0;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
            "the child was not killed mid-write (status %d)", status);
  cr_assert_eq(files_in_dir(), 2, "the checkpoint and the dead writer's temporary file");

  tg_embedding_layer *emb2;
  tg_module *m2 = big_model(2, &emb2);
  int64_t step = 0;
  cr_assert_eq(tg_checkpoint_load(path, m2, NULL, &step, 0, NULL), TG_OK, "%s",
               tg_last_error_message());
  cr_assert_eq(step, 10);
  tg_tensor_dict *after = tg_module_state_dict(m2);
  assert_dicts_equal(after, before, "model");
  tg_tensor_dict_free(after);

  /* A write that fails (as a full disk would) is an I/O error and changes nothing either. */
  tg__set_write_hook(refuse_writes, NULL);
  cr_assert_eq(tg_checkpoint_save(path, m, NULL, 30, 0, NULL), TG_ERR_IO);
  tg__set_write_hook(NULL, NULL);
  tg_expect_error(TG_ERR_IO, "tg_checkpoint_save", path);
  cr_assert_eq(tg_checkpoint_load(path, m2, NULL, &step, 0, NULL), TG_OK);
  cr_assert_eq(step, 10);
  after = tg_module_state_dict(m2);
  assert_dicts_equal(after, before, "model");
  tg_tensor_dict_free(after);
  cr_assert_eq(files_in_dir(), 2, "a failed save removes nothing of another writer's");

  /* The next save that succeeds removes the dead writer's temporary file. */
  cr_assert_eq(tg_checkpoint_save(path, m, NULL, 40, 0, NULL), TG_OK, "%s",
               tg_last_error_message());
  cr_assert_eq(files_in_dir(), 1, "the killed save's temporary file is still there");

  tg_tensor_dict_free(before);
  tg_module_free(m);
  tg_module_free(m2);
  remove_dir();
}

/* ---- mismatches: clear errors, nothing changed ---- */

/* Rewrites path into bad_path without entry drop (may be NULL), with metadata key set to
 * value (value NULL: removed; key NULL: nothing changed) and an extra entry when extra is
 * not NULL. */
static char bad_path[160];

static void rewrite(const char *drop, const char *key, const char *value, const char *extra) {
  snprintf(bad_path, sizeof bad_path, "%s/bad.ckpt", dir);
  tg_tensor_dict *in = tg_safetensors_load(path);
  tg_tensor_dict *out = tg_tensor_dict_new();
  cr_assert(in && out, "%s", tg_last_error_message());
  for (int i = 0; i < tg_tensor_dict_size(in); i++)
    if (!drop || strcmp(tg_tensor_dict_name(in, i), drop))
      cr_assert_eq(tg_tensor_dict_set(out, tg_tensor_dict_name(in, i), tg_tensor_dict_at(in, i)),
                   TG_OK);
  if (extra) cr_assert_eq(tg_tensor_dict_set(out, extra, tg_tensor_dict_at(in, 0)), TG_OK);
  for (int i = 0; i < tg_tensor_dict_meta_size(in); i++) {
    const char *k = tg_tensor_dict_meta_key(in, i);
    if (key && !strcmp(k, key)) continue;
    cr_assert_eq(tg_tensor_dict_set_meta(out, k, tg_tensor_dict_meta_value(in, i)), TG_OK);
  }
  if (key && value) cr_assert_eq(tg_tensor_dict_set_meta(out, key, value), TG_OK);
  cr_assert_eq(tg_safetensors_save(bad_path, out), TG_OK, "%s", tg_last_error_message());
  tg_tensor_dict_free(in);
  tg_tensor_dict_free(out);
}

/* Loading bad_path into b fails with code and the fragments, and b is as it was. */
#define EXPECT_REFUSED(b, n_gens, code, ...)                                                       \
  do {                                                                                             \
    snapshot before_ = take_snapshot(b);                                                           \
    tg_generator *gens_[2] = {(b)->sampler, NULL};                                                 \
    int64_t step_ = -5;                                                                            \
    cr_assert_eq(tg_checkpoint_load(bad_path, (b)->model, (b)->opt, &step_, n_gens, gens_), code,  \
                 "%s", tg_last_error_message());                                                   \
    tg_expect_error(code, "tg_checkpoint_load", bad_path, __VA_ARGS__);                            \
    cr_assert_eq(step_, -5);                                                                       \
    assert_unchanged(b, &before_);                                                                 \
  } while (0)

/* A saved, trained model and a second one (trained a little too, so its optimizer has
 * state to keep) to load into. */
static void saved_pair(lm *a, lm *b) {
  make_dir();
  lm_make(a, 1, 5, HIDDEN);
  lm_train(a, 2, NULL);
  tg_generator *gens[2] = {a->sampler, NULL};
  cr_assert_eq(tg_checkpoint_save(path, a->model, a->opt, 2, 2, gens), TG_OK, "%s",
               tg_last_error_message());
  lm_make(b, 3, 9, HIDDEN);
  lm_train(b, 1, NULL);
}

TG_TEST(checkpoint, wrong_model_shape) {
  lm a, b;
  saved_pair(&a, &b);
  lm c;
  lm_make(&c, 3, 9, HIDDEN + 1);
  snprintf(bad_path, sizeof bad_path, "%s", path);
  EXPECT_REFUSED(&c, 2, TG_ERR_SHAPE, "model", "rnn.cell.weights");
  lm_free(&a);
  lm_free(&b);
  lm_free(&c);
  remove_dir();
}

TG_TEST(checkpoint, optimizer_refusing_restores_the_model) {
  lm a, b;
  saved_pair(&a, &b);
  /* Same model shapes, but an optimizer that names its parameters "0", "1", ...: the model
   * loads, the optimizer's part does not, and the model gets its old values back. */
  tg_tensor *params[8];
  int n = tg_module_parameters(b.model, params, 8);
  tg_optimizer_free(b.opt);
  b.opt = tg_adam_new(n, params, (tg_adam_options){.lr = 2e-2});
  cr_assert(b.opt);
  snprintf(bad_path, sizeof bad_path, "%s", path);
  EXPECT_REFUSED(&b, 2, TG_ERR_ARGUMENT, "optimizer", "exp_avg");
  lm_free(&a);
  lm_free(&b);
  remove_dir();
}

/* optim.* entries in the checkpoint at path. */
static int optim_entries(void) {
  tg_tensor_dict *in = tg_safetensors_load(path);
  cr_assert(in, "%s", tg_last_error_message());
  int n = 0;
  for (int i = 0; i < tg_tensor_dict_size(in); i++)
    n += !strncmp(tg_tensor_dict_name(in, i), "optim.", 6);
  tg_tensor_dict_free(in);
  return n;
}

TG_TEST(checkpoint, missing_and_unexpected_entries) {
  lm a, b;
  saved_pair(&a, &b);
  rewrite("optim.rnn.cell.bias.exp_avg", NULL, NULL, NULL);
  EXPECT_REFUSED(&b, 2, TG_ERR_FORMAT, "optim.* entries", "tg.optim says");
  /* With the count fixed up, the optimizer itself refuses a partial state. */
  char count[16];
  snprintf(count, sizeof count, "%d", optim_entries() - 1);
  rewrite("optim.rnn.cell.bias.exp_avg", "tg.optim", count, NULL);
  EXPECT_REFUSED(&b, 2, TG_ERR_ARGUMENT, "optimizer", "rnn.cell.bias");
  rewrite("model.head.bias", NULL, NULL, NULL);
  EXPECT_REFUSED(&b, 2, TG_ERR_ARGUMENT, "model", "missing", "head.bias");
  rewrite(NULL, NULL, NULL, "model.head.extra");
  EXPECT_REFUSED(&b, 2, TG_ERR_ARGUMENT, "model", "unexpected", "head.extra");
  rewrite(NULL, NULL, NULL, "stray");
  EXPECT_REFUSED(&b, 2, TG_ERR_FORMAT, "'stray' is neither model.* nor optim.*");
  lm_free(&a);
  lm_free(&b);
  remove_dir();
}

TG_TEST(checkpoint, bad_metadata) {
  lm a, b;
  saved_pair(&a, &b);
  rewrite(NULL, "tg.checkpoint", NULL, NULL);
  EXPECT_REFUSED(&b, 2, TG_ERR_FORMAT, "no metadata tg.checkpoint");
  rewrite(NULL, "tg.checkpoint", "2", NULL);
  EXPECT_REFUSED(&b, 2, TG_ERR_FORMAT, "format version tg.checkpoint = '2'");
  rewrite(NULL, "tg.step", NULL, NULL);
  EXPECT_REFUSED(&b, 2, TG_ERR_FORMAT, "no metadata tg.step");
  const char *bad_steps[] = {"", "-1", "+3", "12x", " 4", "007", "9223372036854775808"};
  for (size_t i = 0; i < sizeof bad_steps / sizeof *bad_steps; i++) {
    rewrite(NULL, "tg.step", bad_steps[i], NULL);
    EXPECT_REFUSED(&b, 2, TG_ERR_FORMAT, "bad step", "tg.step");
  }
  rewrite(NULL, "tg.step", "9223372036854775807", NULL); /* INT64_MAX is a step */
  tg_generator *gens[2] = {b.sampler, NULL};
  int64_t step = 0;
  cr_assert_eq(tg_checkpoint_load(bad_path, b.model, b.opt, &step, 2, gens), TG_OK, "%s",
               tg_last_error_message());
  cr_assert_eq(step, INT64_MAX);
  const char *bad_states[] = {"", "5", "1:2:3", ":4", "4:", "a:1", "1:18446744073709551616"};
  for (size_t i = 0; i < sizeof bad_states / sizeof *bad_states; i++) {
    rewrite(NULL, "tg.generator.1", bad_states[i], NULL);
    EXPECT_REFUSED(&b, 2, TG_ERR_FORMAT, "bad generator state", "tg.generator.1");
  }
  rewrite(NULL, "tg.optim", "x", NULL);
  EXPECT_REFUSED(&b, 2, TG_ERR_FORMAT, "tg.optim");
  rewrite(NULL, "tg.future", "1", NULL);
  EXPECT_REFUSED(&b, 2, TG_ERR_FORMAT, "unknown metadata key tg.future");
  rewrite(NULL, "tg.generator.01", "1:2", NULL);
  EXPECT_REFUSED(&b, 2, TG_ERR_FORMAT, "bad generator key tg.generator.01");
  rewrite(NULL, "format", "pt", NULL); /* a key outside tg.* is someone else's: fine */
  cr_assert_eq(tg_checkpoint_load(bad_path, b.model, b.opt, &step, 2, gens), TG_OK, "%s",
               tg_last_error_message());
  lm_free(&a);
  lm_free(&b);
  remove_dir();
}

TG_TEST(checkpoint, generator_count) {
  lm a, b;
  saved_pair(&a, &b); /* saved with 2 generators */
  snprintf(bad_path, sizeof bad_path, "%s", path);
  EXPECT_REFUSED(&b, 1, TG_ERR_ARGUMENT, "2 generator(s), 1 given");
  EXPECT_REFUSED(&b, 0, TG_ERR_ARGUMENT, "2 generator(s), 0 given");
  rewrite(NULL, "tg.generator.5", "1:2", NULL); /* a third, out of order */
  EXPECT_REFUSED(&b, 2, TG_ERR_ARGUMENT, "3 generator(s), 2 given");
  lm_free(&a);
  lm_free(&b);
  remove_dir();
}

TG_TEST(checkpoint, bad_arguments_and_files) {
  lm a;
  make_dir();
  lm_make(&a, 1, 5, HIDDEN);
  cr_assert_eq(tg_checkpoint_save(NULL, a.model, a.opt, 0, 0, NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_checkpoint_save", "path");
  cr_assert_eq(tg_checkpoint_save(path, NULL, a.opt, 0, 0, NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_checkpoint_save", "module is NULL");
  cr_assert_eq(tg_checkpoint_save(path, a.model, a.opt, -1, 0, NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_checkpoint_save", "step is -1");
  cr_assert_eq(tg_checkpoint_save(path, a.model, a.opt, 0, 2, NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_checkpoint_save", "2 generators at NULL");
  cr_assert_eq(tg_checkpoint_save(path, a.model, a.opt, 0, -1, &a.sampler), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_checkpoint_save", "-1 generators");
  cr_assert_eq(tg_checkpoint_load(path, NULL, a.opt, NULL, 0, NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_checkpoint_load", "module is NULL");
  cr_assert_eq(tg_checkpoint_load("", a.model, a.opt, NULL, 0, NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_checkpoint_load", "path");

  cr_assert_eq(tg_checkpoint_load(path, a.model, a.opt, NULL, 0, NULL), TG_ERR_IO);
  tg_expect_error(TG_ERR_IO, "tg_checkpoint_load", path);
  char missing_dir[200];
  snprintf(missing_dir, sizeof missing_dir, "%s/no/such/dir.ckpt", dir);
  cr_assert_eq(tg_checkpoint_save(missing_dir, a.model, a.opt, 0, 0, NULL), TG_ERR_IO);
  tg_expect_error(TG_ERR_IO, "tg_checkpoint_save", missing_dir);
  /* A module file is not a checkpoint. */
  cr_assert_eq(tg_module_save(a.model, path), TG_OK, "%s", tg_last_error_message());
  snprintf(bad_path, sizeof bad_path, "%s", path);
  EXPECT_REFUSED(&a, 0, TG_ERR_FORMAT, "no metadata tg.checkpoint", "not a tg checkpoint");
  /* Nor is garbage. */
  FILE *f = fopen(path, "wb");
  cr_assert(f);
  fputs("not a safetensors file at all", f);
  fclose(f);
  cr_assert_eq(tg_checkpoint_load(path, a.model, a.opt, NULL, 0, NULL), TG_ERR_FORMAT);
  tg_expect_error(TG_ERR_FORMAT, "tg_checkpoint_load", path);
  lm_free(&a);
  remove_dir();
}

/* ---- allocation failures ---- */

typedef struct sweep_case {
  lm *trained;     /* saved by the save sweep */
  float *fresh[8]; /* a fresh model's parameters, to see a failed load changed nothing */
  int n_fresh;
} sweep_case;

static tg_status save_step(void *user, double *out, int *n_out) {
  (void)out;
  (void)n_out;
  sweep_case *c = user;
  tg_generator *gens[2] = {c->trained->sampler, NULL};
  return tg_checkpoint_save(path, c->trained->model, c->trained->opt, 7, 2, gens);
}

/* A fresh model loads the checkpoint; when that fails, its parameters (read straight from
 * memory: nothing may allocate here) and generators must be as they were made. */
static tg_status load_step(void *user, double *out, int *n_out) {
  sweep_case *c = user;
  lm b;
  tg_status st = lm_new(&b, 2, 99, HIDDEN);
  if (st != TG_OK) return st;
  tg_generator_state fallback = tg_generator_get_state(NULL);
  tg_generator *gens[2] = {b.sampler, NULL};
  int64_t step = -1;
  st = tg_checkpoint_load(path, b.model, b.opt, &step, 2, gens);
  if (st != TG_OK) {
    cr_assert_eq(step, -1);
    for (int i = 0; i < c->n_fresh; i++) {
      tg_tensor *p = tg_module_parameter(b.model, i, NULL);
      cr_assert(!memcmp(tg_data_ptr(p), c->fresh[i], sizeof(float) * (size_t)tg_numel(p)),
                "k=%lld: parameter %d changed by a failed load", (long long)current_k, i);
    }
    tg_generator_state g = tg_generator_get_state(b.sampler);
    cr_assert(g.seed == 99 && g.offset == 0, "k=%lld: the sampler changed", (long long)current_k);
    g = tg_generator_get_state(NULL);
    cr_assert(g.seed == fallback.seed && g.offset == fallback.offset);
  } else {
    out[(*n_out)++] = (double)step;
    for (int i = 0; i < tg_module_num_parameters(b.model) && st == TG_OK; i++)
      st = append(tg_module_parameter(b.model, i, NULL), out, n_out);
  }
  lm_free(&b);
  return st;
}

TG_TEST(checkpoint, allocation_failures) {
  make_dir();
  lm a, fresh;
  lm_make(&a, 1, 5, HIDDEN);
  lm_train(&a, 2, NULL);
  tg_manual_seed(5);
  sweep_case c = {.trained = &a};
  lm_make(&fresh, 2, 99, HIDDEN);
  c.n_fresh = tg_module_num_parameters(fresh.model);
  cr_assert(c.n_fresh <= 8);
  for (int i = 0; i < c.n_fresh; i++) {
    tg_tensor *p = tg_module_parameter(fresh.model, i, NULL);
    c.fresh[i] = malloc(sizeof(float) * (size_t)tg_numel(p));
    cr_assert_eq(tg_to_host_array(p, c.fresh[i], sizeof(float) * (size_t)tg_numel(p)), TG_OK);
  }
  lm_free(&fresh);

  sweep("tg_checkpoint_save", save_step, &c);
  sweep("tg_checkpoint_load", load_step, &c);
  for (int i = 0; i < c.n_fresh; i++) free(c.fresh[i]);
  lm_free(&a);
  remove_dir();
}
