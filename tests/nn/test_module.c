/* Modules (tg/module.h): names, nesting, dotted names, iteration, ownership, train/eval,
 * zero_grad, find, parameter counts, state dicts (strict and not, every mismatch), freeing
 * nested typed modules, and allocation-failure sweeps over building, state_dict and load. */
#define _GNU_SOURCE /* mkdtemp */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#include "alloc_sweep.h"

/* net: own parameter "scale" and buffer "count", children "rnn" (an LLTM sequence model
 * over 3 inputs, state 4), "head" (Linear 4 -> 2) and "sub" (a plain module with a buffer). */
static tg_module *build_net(tg_generator *gen) {
  tg_module *net = tg_module_new("net");
  tg_lltm_seq *rnn =
      net ? tg_lltm_seq_new(3, 4, TG_LLTM_FUSED, TG_OPTS(.dtype = TG_F64), gen) : NULL;
  tg_linear *head = rnn ? tg_linear_new(4, 2, true, TG_OPTS(.dtype = TG_F64), gen) : NULL;
  tg_module *sub = head ? tg_module_new("sub") : NULL;
  tg_status st = sub ? TG_OK : tg_last_error();
  if (st == TG_OK) {
    tg_scope s = tg_scope_begin();
    tg_tensor *running = tg_ones(TG_SHAPE(2), TG_OPTS(.dtype = TG_F64));
    tg_tensor *scale = tg_full(TG_SHAPE(1), 2.0, TG_OPTS(.dtype = TG_F64));
    tg_tensor *count = tg_zeros(TG_SHAPE(1), TG_OPTS(.dtype = TG_I64));
    st = running && scale && count ? TG_OK : tg_last_error();
    if (st == TG_OK) st = tg_module_register_buffer(sub, "running", running);
    if (st == TG_OK) st = tg_module_add_child(net, "rnn", tg_lltm_seq_module(rnn));
    if (st == TG_OK) rnn = NULL; /* net owns it now */
    if (st == TG_OK) st = tg_module_add_child(net, "head", tg_linear_module(head));
    if (st == TG_OK) head = NULL;
    if (st == TG_OK) st = tg_module_add_child(net, "sub", sub);
    if (st == TG_OK) sub = NULL;
    /* registered after the children, listed before them: own entries come first */
    if (st == TG_OK) st = tg_module_register_parameter(net, "scale", scale);
    if (st == TG_OK) st = tg_module_register_buffer(net, "count", count);
    tg_scope_end(s);
  }
  tg_lltm_seq_free(rnn);
  tg_linear_free(head);
  tg_module_free(sub);
  if (st != TG_OK) {
    tg_module_free(net);
    return NULL;
  }
  return net;
}

static tg_module *net_new(void) {
  tg_generator *gen = tg_generator_new(5);
  tg_module *net = build_net(gen);
  tg_generator_free(gen);
  cr_assert_not_null(net, "%s", tg_last_error_message());
  return net;
}

static const char *const param_names[] = {"scale", "rnn.cell.weights", "rnn.cell.bias",
                                          "head.weight", "head.bias"};
static const char *const buffer_names[] = {"count", "sub.running"};

TG_TEST(module, dotted_names_in_order) {
  tg_module *net = net_new();
  cr_assert_str_eq(tg_module_type(net), "net");
  cr_assert_eq(tg_module_num_parameters(net), 5);
  cr_assert_eq(tg_module_num_buffers(net), 2);
  /* iteration without knowing the count: stop at the first TG_ERR_INDEX */
  int i = 0;
  const char *name;
  for (tg_tensor *p; (p = tg_module_parameter(net, i, &name)); i++) {
    cr_assert_str_eq(name, param_names[i]);
    cr_assert(tg_requires_grad(p) && tg_is_leaf(p));
    cr_assert_eq(tg_module_find(net, name), p);
  }
  tg_expect_error(TG_ERR_INDEX, "tg_module_parameter", "index 5", "5 parameters");
  cr_assert_eq(i, 5);
  cr_assert_null(name);
  for (i = 0; i < 2; i++) {
    tg_tensor *b = tg_module_buffer(net, i, &name);
    cr_assert_str_eq(name, buffer_names[i]);
    cr_assert_eq(tg_module_find(net, name), b);
  }
  cr_assert_null(tg_module_buffer(net, -1, NULL));
  tg_expect_error(TG_ERR_INDEX, "tg_module_buffer", "index -1");
  cr_assert_eq(tg_tensor_dtype(tg_module_find(net, "count")), TG_I64);
  cr_assert(!tg_requires_grad(tg_module_find(net, "count")));

  /* typed children: their types, their own names, their handles' tensors */
  tg_module *rnn = tg_module_child(net, "rnn");
  cr_assert_str_eq(tg_module_type(rnn), "lltm_seq");
  tg_module *cell = tg_module_child(rnn, "cell");
  cr_assert_str_eq(tg_module_type(cell), "lltm_cell");
  cr_assert_str_eq(tg_module_type(tg_module_child(net, "head")), "linear");
  cr_assert_eq(tg_module_find(cell, "weights"), tg_module_find(net, "rnn.cell.weights"));
  cr_assert_eq(tg_module_num_children(net), 3);
  cr_assert_eq(tg_module_child_at(net, 1, &name), tg_module_child(net, "head"));
  cr_assert_str_eq(name, "head");
  cr_assert_null(tg_module_child_at(net, 3, &name));
  tg_expect_error(TG_ERR_INDEX, "tg_module_child_at", "index 3");
  cr_assert_null(tg_module_child(net, "nope"));
  cr_assert_null(tg_module_find(net, "rnn.cell"));
  cr_assert_null(tg_module_find(net, "rnn.cell.weights.x"));
  tg_expect_ok();

  tg_tensor *out[8] = {NULL};
  cr_assert_eq(tg_module_parameters(net, out, 2), 5);
  cr_assert(out[0] == tg_module_find(net, "scale") && out[2] == NULL);
  cr_assert_eq(tg_module_parameters(net, NULL, 0), 5);
  /* 1 + 12 * 7 + 12 + 2 * 4 + 2 */
  cr_assert_eq(tg_module_parameter_count(net), 107);
  tg_module_free(net);
}

TG_TEST(module, typed_handles_are_modules) {
  tg_linear *lin = tg_linear_new(3, 2, false, TG_OPTS_DEFAULT, NULL);
  tg_module *m = tg_linear_module(lin);
  cr_assert_eq(tg_module_num_parameters(m), 1);
  cr_assert_eq(tg_module_parameter(m, 0, NULL), tg_linear_weight(lin));
  tg_lltm_cell *cell = tg_lltm_cell_new(2, 3, TG_OPTS_DEFAULT, NULL);
  const char *name;
  cr_assert_eq(tg_module_parameter(tg_lltm_cell_module(cell), 0, &name),
               tg_lltm_cell_weights(cell));
  cr_assert_str_eq(name, "weights");
  tg_embedding_layer *emb = tg_embedding_layer_new(10, 4, TG_OPTS(.dtype = TG_F64), NULL);
  cr_assert_not_null(emb, "%s", tg_last_error_message());
  tg_module *em = tg_embedding_layer_module(emb);
  cr_assert_str_eq(tg_module_type(em), "embedding");
  cr_assert_eq(tg_module_parameter(em, 0, &name), tg_embedding_layer_weight(emb));
  cr_assert_str_eq(name, "weight");
  tg_assert_sizes(tg_embedding_layer_weight(emb), 10, 4);
  cr_assert(tg_requires_grad(tg_embedding_layer_weight(emb)));
  tg_linear_free(lin);
  tg_lltm_cell_free(cell);
  tg_embedding_layer_free(emb);
  cr_assert_null(tg_linear_module(NULL));
  cr_assert_null(tg_embedding_layer_new(0, 4, TG_OPTS_DEFAULT, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_embedding_layer_new", "num_embeddings (0)");
  cr_assert_null(tg_embedding_layer_new(3, 4, TG_OPTS(.dtype = TG_I64), NULL));
  tg_expect_error(TG_ERR_DTYPE, "tg_embedding_layer_new", "int64");
  cr_assert_null(tg_embedding_layer_forward(NULL, NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_embedding_layer_forward", "e is NULL");
}

TG_TEST(module, embedding_init_is_standard_normal) {
  tg_embedding_layer *emb = tg_embedding_layer_new(100, 50, TG_OPTS(.dtype = TG_F64), NULL);
  tg_tensor *w = tg_embedding_layer_weight(emb);
  double mean, var;
  cr_assert_eq(tg_item(tg_mean(w), &mean), TG_OK);
  cr_assert_eq(tg_item(tg_mean(tg_mul(w, w)), &var), TG_OK);
  cr_assert(fabs(mean) < 0.05 && fabs(var - 1) < 0.1, "mean %g, E[x^2] %g", mean, var);
  tg_embedding_layer_free(emb);
}

TG_TEST(module, bad_names_refused) {
  tg_module *m = tg_module_new("m");
  tg_tensor *t = tg_zeros(TG_SHAPE(2), TG_OPTS_DEFAULT);
  static const struct {
    const char *name, *fragment;
  } bad[] = {{"", "is empty"}, {"a.b", "'.'"}, {"a b", "' '"}, {"é", "byte 0"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    cr_assert_eq(tg_module_register_parameter(m, bad[i].name, t), TG_ERR_ARGUMENT);
    tg_expect_error(TG_ERR_ARGUMENT, "tg_module_register_parameter", bad[i].fragment);
  }
  cr_assert_eq(tg_module_register_buffer(m, NULL, t), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_module_register_buffer", "name is NULL");
  char long_name[300];
  memset(long_name, 'a', 256);
  long_name[256] = '\0';
  cr_assert_eq(tg_module_register_buffer(m, long_name, t), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "longer than 255 bytes");
  long_name[255] = '\0';
  cr_assert_eq(tg_module_register_buffer(m, long_name, t), TG_OK);

  /* unique among parameters, buffers and children */
  cr_assert_eq(tg_module_register_parameter(m, "w", t), TG_OK);
  cr_assert_eq(tg_module_register_buffer(m, "w", t), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "already has a parameter named \"w\"");
  tg_module *c = tg_module_new("c");
  cr_assert_eq(tg_module_add_child(m, "w", c), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_module_add_child", "already has a parameter named");
  cr_assert_eq(tg_module_add_child(m, "c", c), TG_OK);
  cr_assert_eq(tg_module_register_parameter(m, "c", t), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "already has a child module named \"c\"");
  cr_assert_eq(tg_module_register_parameter(m, long_name, t), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "already has a buffer named");

  /* parameters: floating leaves only */
  tg_tensor *i64 = tg_zeros(TG_SHAPE(2), TG_OPTS(.dtype = TG_I64));
  cr_assert_eq(tg_module_register_parameter(m, "i", i64), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "floating leaf", "int64");
  tg_tensor *made = tg_mul_scalar(tg_module_find(m, "w"), 2.0);
  cr_assert_eq(tg_module_register_parameter(m, "made", made), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "made by an op");
  cr_assert_eq(tg_module_register_parameter(m, "null", NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "param is NULL");
  cr_assert_eq(tg_module_register_parameter(NULL, "x", t), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "m is NULL");
  cr_assert_null(tg_module_new("bad type"));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_module_new", "type");
  cr_assert_eq(tg_module_num_parameters(m), 1);
  tg_module_free(m);
}

TG_TEST(module, add_child_ownership_and_cycles) {
  tg_module *a = tg_module_new("a"), *b = tg_module_new("b"), *c = tg_module_new("c");
  cr_assert_eq(tg_module_add_child(a, "b", b), TG_OK);
  cr_assert_eq(tg_module_add_child(b, "c", c), TG_OK);
  cr_assert_eq(tg_module_add_child(c, "a", a), TG_ERR_ARGUMENT); /* a is c's grandparent */
  tg_expect_error(TG_ERR_ARGUMENT, "tg_module_add_child", "cycle");
  cr_assert_eq(tg_module_add_child(c, "self", c), TG_ERR_STATE); /* c has a parent already */
  tg_expect_error(TG_ERR_STATE, "already belongs to a b module");
  tg_module *d = tg_module_new("d");
  cr_assert_eq(tg_module_add_child(d, "d", d), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "cycle");
  cr_assert_eq(tg_module_add_child(d, "b", b), TG_ERR_STATE);
  tg_expect_error(TG_ERR_STATE, "already belongs");
  cr_assert_eq(tg_module_add_child(d, "x", NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "child \"x\" is NULL");

  /* a child's own free is refused: the parent frees it */
  tg_module_free(b);
  tg_expect_error(TG_ERR_STATE, "tg_module_free", "free the root");
  tg_linear *lin = tg_linear_new(2, 2, true, TG_OPTS_DEFAULT, NULL);
  cr_assert_eq(tg_module_add_child(c, "lin", tg_linear_module(lin)), TG_OK);
  tg_linear_free(lin);
  tg_expect_error(TG_ERR_STATE, "tg_linear_free", "belongs to a c module");
  tg_lltm_seq *seq = tg_lltm_seq_new(2, 2, TG_LLTM_FUSED, TG_OPTS_DEFAULT, NULL);
  tg_lltm_cell_free(tg_lltm_seq_cell(seq));
  tg_expect_error(TG_ERR_STATE, "tg_lltm_cell_free", "belongs to a lltm_seq module");
  cr_assert_eq(tg_module_add_child(d, "seq", tg_lltm_seq_module(seq)), TG_OK);
  tg_lltm_seq_free(seq);
  tg_expect_error(TG_ERR_STATE, "tg_lltm_seq_free");
  tg_embedding_layer *emb = tg_embedding_layer_new(4, 2, TG_OPTS_DEFAULT, NULL);
  cr_assert_eq(tg_module_add_child(d, "emb", tg_embedding_layer_module(emb)), TG_OK);
  tg_embedding_layer_free(emb);
  tg_expect_error(TG_ERR_STATE, "tg_embedding_layer_free");
  cr_assert_eq(tg_module_num_parameters(a), 2);
  cr_assert_not_null(tg_module_find(a, "b.c.lin.bias"));
  cr_assert_not_null(tg_module_find(d, "seq.cell.weights"));
  tg_module_free(a); /* frees b, c and the linear: the teardown checks nothing is left */
  tg_module_free(d);
  tg_module_free(NULL);
}

TG_TEST(module, train_eval_and_zero_grad) {
  tg_module *net = net_new();
  tg_module *cell = tg_module_child(tg_module_child(net, "rnn"), "cell");
  cr_assert(tg_module_is_training(net) && tg_module_is_training(cell));
  tg_module_train(net, false);
  cr_assert(!tg_module_is_training(net) && !tg_module_is_training(cell));
  tg_module_train(cell, true); /* only the cell */
  cr_assert(!tg_module_is_training(net) && tg_module_is_training(cell));
  tg_module_train(net, true);
  cr_assert(tg_module_is_training(tg_module_child(net, "sub")));

  tg_tensor *loss = tg_zeros(0, NULL, TG_OPTS(.dtype = TG_F64));
  for (int i = 0; i < tg_module_num_parameters(net); i++)
    loss = tg_add(loss, tg_sum(tg_module_parameter(net, i, NULL)));
  cr_assert_eq(tg_backward(loss, NULL), TG_OK);
  tg_tensor *g = tg_grad(tg_module_find(net, "head.weight"));
  cr_assert_not_null(g);
  cr_assert_eq(tg_module_zero_grad(net), TG_OK);
  cr_assert_eq(tg_grad(tg_module_find(net, "head.weight")), g); /* kept, zeroed */
  cr_assert_eq(tg_test_max_abs_diff(g, tg_zeros_like(g)), 0.0);
  cr_assert_eq(tg_module_zero_grad(NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_module_zero_grad");
  tg_module_free(net);
}

/* ---- state ---- */

static const char *const state_names[] = {"scale",         "count",       "rnn.cell.weights",
                                          "rnn.cell.bias", "head.weight", "head.bias",
                                          "sub.running"};

TG_TEST(module, state_dict_shares_detached_tensors) {
  tg_module *net = net_new();
  tg_tensor_dict *d = tg_module_state_dict(net);
  cr_assert_not_null(d);
  cr_assert_eq(tg_tensor_dict_size(d), 7);
  for (int i = 0; i < 7; i++) {
    cr_assert_str_eq(tg_tensor_dict_name(d, i), state_names[i]);
    tg_tensor *t = tg_tensor_dict_at(d, i);
    cr_assert(tg_shares_storage(t, tg_module_find(net, state_names[i])));
    cr_assert(!tg_requires_grad(t));
  }
  tg_tensor_dict_free(d);
  cr_assert_null(tg_module_state_dict(NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_module_state_dict", "m is NULL");
  tg_module_free(net);
}

/* A state with every entry of a second net (another seed), to load into the first. */
static tg_tensor_dict *other_state(tg_module **other) {
  tg_generator *gen = tg_generator_new(99);
  *other = build_net(gen);
  tg_generator_free(gen);
  tg_tensor_dict *d = tg_module_state_dict(*other);
  cr_assert_not_null(d);
  return d;
}

TG_TEST(module, load_state_dict_copies_in_place) {
  tg_module *net = net_new(), *other;
  tg_tensor_dict *d = other_state(&other);
  tg_tensor *w = tg_module_find(net, "head.weight");
  uint64_t version = tg_version(w);
  /* a graph that saved w before the load refuses to backward through it afterwards */
  tg_tensor *y = tg_sum(tg_mul(w, w));
  tg_load_report r;
  cr_assert_eq(tg_module_load_state_dict(net, d, true, &r), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(r.n_loaded, 7);
  cr_assert(r.n_missing == 0 && r.n_unexpected == 0 && r.names[0] == '\0');
  cr_assert_eq(tg_module_find(net, "head.weight"), w); /* same tensor, new values */
  cr_assert_gt(tg_version(w), version);
  cr_assert(tg_requires_grad(w) && tg_is_leaf(w));
  for (int i = 0; i < 7; i++)
    cr_assert_eq(tg_test_max_abs_diff(tg_module_find(net, state_names[i]),
                                      tg_module_find(other, state_names[i])),
                 0.0);
  cr_assert(!tg_shares_storage(w, tg_module_find(other, "head.weight")));
  cr_assert_neq(tg_backward(y, NULL), TG_OK);
  tg_clear_error();
  tg_tensor_dict_free(d);
  tg_module_free(other);
  tg_module_free(net);
}

/* Asserts that net still holds its original values (nothing was half-loaded). */
static void assert_unchanged(tg_module *net) {
  tg_module *fresh = net_new();
  for (int i = 0; i < 7; i++)
    cr_assert_eq(tg_test_max_abs_diff(tg_module_find(net, state_names[i]),
                                      tg_module_find(fresh, state_names[i])),
                 0.0, "%s changed", state_names[i]);
  tg_module_free(fresh);
}

TG_TEST(module, load_missing_and_unexpected) {
  tg_module *net = net_new(), *other;
  tg_tensor_dict *full = other_state(&other);
  tg_tensor_dict *d = tg_tensor_dict_new();
  /* everything but scale and head.bias, and two names the net does not have */
  for (int i = 0; i < 7; i++) {
    const char *name = tg_tensor_dict_name(full, i);
    if (strcmp(name, "scale") && strcmp(name, "head.bias"))
      tg_tensor_dict_set(d, name, tg_tensor_dict_at(full, i));
  }
  tg_tensor_dict_set(d, "head.extra", tg_tensor_dict_at(full, 0));
  tg_tensor_dict_set(d, "zz", tg_tensor_dict_at(full, 0));
  tg_load_report r;
  cr_assert_eq(tg_module_load_state_dict(net, d, true, &r), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_module_load_state_dict", "net module",
                  "2 missing, 2 unexpected",
                  "missing: scale, head.bias; unexpected: head.extra, zz");
  cr_assert_eq(r.n_loaded, 0);
  cr_assert_str_eq(r.names, "missing: scale, head.bias; unexpected: head.extra, zz");
  assert_unchanged(net);

  cr_assert_eq(tg_module_load_state_dict(net, d, false, &r), TG_OK);
  cr_assert(r.n_loaded == 5 && r.n_missing == 2 && r.n_unexpected == 2);
  cr_assert_str_eq(r.names, "missing: scale, head.bias; unexpected: head.extra, zz");
  cr_assert_eq(tg_test_max_abs_diff(tg_module_find(net, "head.weight"),
                                    tg_module_find(other, "head.weight")),
               0.0);
  cr_assert_neq(
      tg_test_max_abs_diff(tg_module_find(net, "head.bias"), tg_module_find(other, "head.bias")),
      0.0);

  /* only unexpected, and a report that is cut */
  tg_tensor_dict *many = tg_module_state_dict(net);
  for (int i = 0; i < 100; i++) {
    char name[64];
    snprintf(name, sizeof name, "unexpected_entry_number_%d", i);
    tg_tensor_dict_set(many, name, tg_tensor_dict_at(full, 0));
  }
  cr_assert_eq(tg_module_load_state_dict(net, many, false, &r), TG_OK);
  cr_assert(r.n_loaded == 7 && r.n_missing == 0 && r.n_unexpected == 100);
  cr_assert(strncmp(r.names, "unexpected: unexpected_entry_number_0, ", 39) == 0, "%s", r.names);
  size_t len = strlen(r.names);
  cr_assert(len < sizeof r.names && strcmp(r.names + len - 3, "...") == 0, "%s", r.names);
  cr_assert_eq(tg_module_load_state_dict(net, many, true, NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "0 missing, 100 unexpected", "unexpected: unexpected_entry");

  tg_tensor_dict_free(many);
  tg_tensor_dict_free(d);
  tg_tensor_dict_free(full);
  tg_module_free(other);
  tg_module_free(net);
}

TG_TEST(module, load_shape_and_dtype_mismatches) {
  tg_module *net = net_new(), *other;
  tg_tensor_dict *d = other_state(&other);
  /* the last entry wrong: the others, checked before it, must not have been copied */
  tg_tensor_dict_set(d, "sub.running", tg_zeros(TG_SHAPE(3), TG_OPTS(.dtype = TG_F64)));
  for (int strict = 0; strict < 2; strict++) {
    cr_assert_eq(tg_module_load_state_dict(net, d, strict, NULL), TG_ERR_SHAPE);
    tg_expect_error(TG_ERR_SHAPE, "tg_module_load_state_dict", "\"sub.running\"",
                    "[2] in the module but [3] in the state");
    assert_unchanged(net);
  }
  tg_tensor_dict_set(d, "sub.running", tg_zeros(TG_SHAPE(2), TG_OPTS(.dtype = TG_F32)));
  cr_assert_eq(tg_module_load_state_dict(net, d, false, NULL), TG_ERR_DTYPE);
  tg_expect_error(TG_ERR_DTYPE, "\"sub.running\"", "float64 in the module but float32");
  tg_tensor_dict_set(d, "sub.running", tg_zeros(TG_SHAPE(2), TG_OPTS(.dtype = TG_F64)));
  tg_tensor_dict_set(d, "count", tg_zeros(TG_SHAPE(1), TG_OPTS(.dtype = TG_F64)));
  cr_assert_eq(tg_module_load_state_dict(net, d, true, NULL), TG_ERR_DTYPE);
  tg_expect_error(TG_ERR_DTYPE, "\"count\"", "int64 in the module but float64");
  assert_unchanged(net);
  cr_assert_eq(tg_module_load_state_dict(NULL, d, true, NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "m is NULL");
  cr_assert_eq(tg_module_load_state_dict(net, NULL, true, NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "state is NULL");
  /* a state from strided views (transposed twice) loads too */
  tg_tensor_dict_set(d, "count", tg_zeros(TG_SHAPE(1), TG_OPTS(.dtype = TG_I64)));
  tg_tensor_dict_set(d, "head.weight",
                     tg_t(tg_contiguous(tg_t(tg_module_find(other, "head.weight")))));
  cr_assert_eq(tg_module_load_state_dict(net, d, true, NULL), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(tg_test_max_abs_diff(tg_module_find(net, "head.weight"),
                                    tg_module_find(other, "head.weight")),
               0.0);
  tg_tensor_dict_free(d);
  tg_module_free(other);
  tg_module_free(net);
}

/* ---- allocation failures ---- */

static tg_status build_step(void *user, double *out, int *n_out) {
  (void)user;
  tg_generator *gen = tg_generator_new(5);
  tg_module *net = gen ? build_net(gen) : NULL;
  tg_status st = status_of(net);
  const char *name;
  for (int i = 0; st == TG_OK && i < tg_module_num_parameters(net); i++) {
    tg_tensor *p = tg_module_parameter(net, i, &name);
    cr_assert_str_eq(name, param_names[i]);
    st = append(p, out, n_out);
  }
  tg_module_free(net);
  tg_generator_free(gen);
  return st;
}

TG_TEST(module, alloc_failure_building) {
  sweep_result r = sweep("building a nested module", build_step, NULL);
  cr_assert_gt(r.failed, 0);
}

static tg_status state_step(void *user, double *out, int *n_out) {
  bool strict = *(const bool *)user;
  tg_generator *gen = tg_generator_new(5);
  tg_module *net = gen ? build_net(gen) : NULL;
  tg_generator *gen2 = net ? tg_generator_new(6) : NULL;
  tg_module *other = gen2 ? build_net(gen2) : NULL;
  tg_tensor_dict *d = other ? tg_module_state_dict(other) : NULL;
  tg_status st = status_of(d);
  if (st == TG_OK && !strict) st = tg_tensor_dict_set(d, "extra", tg_module_find(other, "scale"));
  tg_load_report r;
  if (st == TG_OK) st = clean(tg_module_load_state_dict(net, d, strict, &r));
  bool loaded = st == TG_OK;
  if (st == TG_OK) out[(*n_out)++] = r.n_loaded + 10 * r.n_unexpected;
  for (int i = 0; st == TG_OK && i < tg_module_num_parameters(net); i++)
    st = append(tg_module_parameter(net, i, NULL), out, n_out);
  if (st != TG_OK && d && !loaded) {
    /* a failed load changed nothing (the injected failure has fired: these allocate freely) */
    tg_status failed = tg_last_error();
    char message[1024];
    snprintf(message, sizeof message, "%s", tg_last_error_message());
    tg_generator *g = tg_generator_new(5);
    tg_module *fresh = build_net(g);
    cr_assert_not_null(fresh);
    for (int i = 0; i < tg_module_num_parameters(net); i++) {
      tg_scope s = tg_scope_begin();
      cr_assert_eq(tg_test_max_abs_diff(tg_module_parameter(net, i, NULL),
                                        tg_module_parameter(fresh, i, NULL)),
                   0.0, "k=%lld: a failed load changed %s", (long long)current_k, param_names[i]);
      tg_scope_end(s);
    }
    tg_module_free(fresh);
    tg_generator_free(g);
    tg_set_error(failed, "%s", message);
  }
  tg_tensor_dict_free(d);
  tg_module_free(other);
  tg_module_free(net);
  tg_generator_free(gen);
  tg_generator_free(gen2);
  return st;
}

TG_TEST(module, alloc_failure_state_dict_and_load) {
  bool strict = true;
  sweep("state_dict and strict load", state_step, &strict);
  strict = false;
  sweep("state_dict and non-strict load", state_step, &strict);
}

TG_TEST(module, embedding_forward_and_backward) {
  tg_embedding_layer *emb = tg_embedding_layer_new(5, 3, TG_OPTS(.dtype = TG_F64), NULL);
  tg_tensor *w = tg_embedding_layer_weight(emb);
  const int64_t idx[6] = {4, 0, 4, 2, 2, 4};
  tg_tensor *indices = tg_from_data(TG_SHAPE(2, 3), idx, TG_OPTS(.dtype = TG_I64));
  tg_tensor *y = tg_embedding_layer_forward(emb, indices);
  cr_assert_not_null(y, "%s", tg_last_error_message());
  tg_assert_sizes(y, 2, 3, 3);
  for (int i = 0; i < 6; i++)
    cr_assert_eq(tg_test_max_abs_diff(tg_select(tg_reshape(y, TG_SHAPE(6, 3)), 0, i),
                                      tg_select(w, 0, idx[i])),
                 0.0);
  cr_assert_eq(tg_backward(tg_sum(y), NULL), TG_OK);
  const double counts[5] = {1, 0, 2, 0, 3};
  for (int r = 0; r < 5; r++)
    for (int c = 0; c < 3; c++) cr_assert_eq(tg_test_at(tg_grad(w), r * 3 + c), counts[r]);
  const int64_t bad[1] = {5};
  cr_assert_null(
      tg_embedding_layer_forward(emb, tg_from_data(TG_SHAPE(1), bad, TG_OPTS(.dtype = TG_I64))));
  tg_expect_error(TG_ERR_INDEX, "tg_embedding_layer_forward");
  tg_embedding_layer_free(emb);
}

/* ---- files (safetensors) ---- */

static char file_dir[64];

static const char *temp_path(const char *name) {
  static char path[160];
  if (!file_dir[0]) {
    snprintf(file_dir, sizeof file_dir, "/tmp/tg-test-module-XXXXXX");
    cr_assert(mkdtemp(file_dir), "mkdtemp: %s", strerror(errno));
  }
  snprintf(path, sizeof path, "%s/%s", file_dir, name);
  return path;
}

static void remove_temp(const char *name) {
  unlink(temp_path(name));
  /* fails when a writer left a temporary file behind */
  cr_assert_eq(rmdir(file_dir), 0, "rmdir %s: %s", file_dir, strerror(errno));
  file_dir[0] = '\0';
}

TG_TEST(module, save_and_load_file) {
  tg_module *net = net_new(), *other;
  tg_tensor_dict *d = other_state(&other);
  tg_tensor_dict_free(d);
  const char *path = temp_path("net.safetensors");
  cr_assert_eq(tg_module_save(other, path), TG_OK, "%s", tg_last_error_message());
  tg_load_report r;
  cr_assert_eq(tg_module_load(net, path, true, &r), TG_OK, "%s", tg_last_error_message());
  cr_assert_eq(r.n_loaded, 7);
  for (int i = 0; i < 7; i++)
    cr_assert_eq(tg_test_max_abs_diff(tg_module_find(net, state_names[i]),
                                      tg_module_find(other, state_names[i])),
                 0.0, "%s", state_names[i]);
  /* a file of a smaller model: strict refuses, non-strict loads what matches */
  tg_linear *head = tg_linear_new(4, 2, true, TG_OPTS(.dtype = TG_F64), NULL);
  cr_assert_eq(tg_module_save(tg_linear_module(head), path), TG_OK);
  cr_assert_eq(tg_module_load(net, path, true, &r), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_module_load", "7 missing, 2 unexpected",
                  "missing: scale, rnn.cell.weights",
                  "count, sub.running; unexpected: weight, bias");
  cr_assert_eq(tg_module_load(net, path, false, &r), TG_OK);
  cr_assert(r.n_loaded == 0 && r.n_missing == 7 && r.n_unexpected == 2);
  cr_assert_eq(tg_module_load(tg_linear_module(head), path, true, &r), TG_OK);
  cr_assert_eq(r.n_loaded, 2);
  tg_linear_free(head);
  remove_temp("net.safetensors");

  cr_assert_eq(tg_module_load(net, "/nonexistent/dir/x.safetensors", true, &r), TG_ERR_IO);
  tg_expect_error(TG_ERR_IO, "tg_module_load", "/nonexistent/dir/x.safetensors");
  cr_assert_eq(tg_module_save(net, "/nonexistent/dir/x.safetensors"), TG_ERR_IO);
  tg_expect_error(TG_ERR_IO, "tg_module_save", "/nonexistent/dir/x.safetensors");
  cr_assert_eq(tg_module_save(NULL, "x"), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_module_save", "m is NULL");
  cr_assert_eq(tg_module_load(NULL, "x", true, NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_module_load", "m is NULL");
  tg_module_free(other);
  tg_module_free(net);
}

static tg_status file_step(void *user, double *out, int *n_out) {
  const char *path = user;
  tg_generator *gen = tg_generator_new(5);
  tg_module *net = gen ? build_net(gen) : NULL;
  tg_generator *gen2 = net ? tg_generator_new(6) : NULL;
  tg_module *other = gen2 ? build_net(gen2) : NULL;
  tg_status st = status_of(other);
  unlink(path);
  if (st == TG_OK) st = clean(tg_module_save(other, path));
  if (st == TG_OK) st = clean(tg_module_load(net, path, true, NULL));
  for (int i = 0; st == TG_OK && i < tg_module_num_parameters(net); i++)
    st = append(tg_module_parameter(net, i, NULL), out, n_out);
  tg_module_free(other);
  tg_module_free(net);
  tg_generator_free(gen);
  tg_generator_free(gen2);
  return st;
}

TG_TEST(module, alloc_failure_save_and_load) {
  char path[160];
  snprintf(path, sizeof path, "%s", temp_path("sweep.safetensors"));
  cr_assert_gt(sweep("module save and load", file_step, path).failed, 0);
  remove_temp("sweep.safetensors");
}

/* Dotted names have no limit of their own, but a state name is at most TG_TENSOR_NAME_MAX
 * bytes: 4 levels of 255-byte names and a parameter make 1024 + 3 dots + 1. */
TG_TEST(module, state_names_too_long) {
  char name[256];
  memset(name, 'n', 255);
  name[255] = '\0';
  tg_module *root = tg_module_new("root"), *m = root;
  for (int level = 0; level < 4; level++) {
    tg_module *child = tg_module_new("level");
    cr_assert_eq(tg_module_add_child(m, name, child), TG_OK);
    m = child;
  }
  cr_assert_eq(tg_module_register_parameter(m, "p", tg_zeros(TG_SHAPE(1), TG_OPTS_DEFAULT)), TG_OK);
  const char *dotted;
  cr_assert_not_null(tg_module_parameter(root, 0, &dotted));
  cr_assert_eq(strlen(dotted), 4 * 256 + 1);
  cr_assert_eq(tg_module_find(root, dotted), tg_module_find(m, "p"));
  cr_assert_null(tg_module_state_dict(root));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_module_state_dict", "longer than 1024 bytes");
  /* at the limit exactly: the module's state fits, the optimizer's longer names do not */
  tg_module *top = tg_module_new("top");
  cr_assert_eq(tg_module_add_child(top, name, tg_module_new("a")), TG_OK);
  m = tg_module_child(top, name);
  cr_assert_eq(tg_module_add_child(m, name, tg_module_new("b")), TG_OK);
  m = tg_module_child(m, name);
  cr_assert_eq(tg_module_add_child(m, name, tg_module_new("c")), TG_OK);
  m = tg_module_child(m, name);
  char last[256];
  memset(last, 'p', 256 - 4);
  last[252] = '\0'; /* 3 * 256 + 252 = 1020 */
  cr_assert_eq(tg_module_register_parameter(m, last, tg_zeros(TG_SHAPE(1), TG_OPTS_DEFAULT)),
               TG_OK);
  tg_tensor_dict *d = tg_module_state_dict(top);
  cr_assert_not_null(d, "%s", tg_last_error_message());
  cr_assert_eq(strlen(tg_tensor_dict_name(d, 0)), 1020);
  tg_tensor_dict_free(d);
  tg_optimizer *opt = tg_adam_for(top, (tg_adam_options){0});
  tg_set_grad(tg_module_parameter(top, 0, NULL), tg_ones(TG_SHAPE(1), TG_OPTS_DEFAULT));
  cr_assert_eq(tg_optimizer_step(opt), TG_OK);
  cr_assert_null(tg_optimizer_state_dict(opt));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_optimizer_state_dict", "longer than 1024 bytes");
  tg_optimizer_free(opt);
  tg_module_free(top);
  tg_module_free(root);
}

TG_TEST(module, null_module_arguments) {
  cr_assert_eq(tg_module_num_parameters(NULL), 0);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_module_num_parameters", "m is NULL");
  cr_assert_eq(tg_module_num_buffers(NULL), 0);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_module_num_buffers", "m is NULL");
  cr_assert_eq(tg_module_num_children(NULL), 0);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_module_num_children", "m is NULL");
  const char *name = "x";
  cr_assert_null(tg_module_parameter(NULL, 0, &name));
  cr_assert_null(name);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_module_parameter", "m is NULL");
  cr_assert_null(tg_module_type(NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_module_type");
  cr_assert_null(tg_module_find(NULL, "a"));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_module_find");
  cr_assert_eq(tg_module_parameters(NULL, NULL, 0), 0);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_module_parameters");
  cr_assert_eq(tg_module_parameter_count(NULL), 0);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_module_parameter_count");
  tg_module_train(NULL, false);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_module_train");
  cr_assert(!tg_module_is_training(NULL));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_module_is_training");
  cr_assert_null(tg_module_child(NULL, "a"));
  tg_expect_error(TG_ERR_ARGUMENT, "tg_module_child");
  tg_module *m = tg_module_new("m");
  cr_assert_eq(tg_module_num_parameters(m), 0);
  cr_assert_null(tg_module_parameter(m, 0, NULL));
  tg_expect_error(TG_ERR_INDEX, "tg_module_parameter: index 0, but the m module has no parameters");
  cr_assert_eq(tg_module_parameter_count(m), 0);
  cr_assert_null(tg_module_child(m, NULL));
  tg_tensor_dict *d = tg_module_state_dict(m);
  cr_assert_eq(tg_tensor_dict_size(d), 0);
  cr_assert_eq(tg_module_load_state_dict(m, d, true, NULL), TG_OK);
  tg_tensor_dict_free(d);
  tg_module_free(m);
}
