/* tg_tensor_dict (tg/io.h): insertion order, replacement, metadata, references, errors and
 * allocation failures. */
#include <string.h>

#include "testutil.h"

#include "alloc_sweep.h"

static const tg_options f64 = TG_OPTS(.dtype = TG_F64);

TG_TEST(tensor_dict, keeps_insertion_order_and_replaces_in_place) {
  tg_tensor_dict *d = tg_tensor_dict_new();
  cr_assert_not_null(d);
  tg_tensor *a = tg_full(TG_SHAPE(2), 1, f64), *b = tg_full(TG_SHAPE(3), 2, f64);
  tg_tensor *c = tg_full(TG_SHAPE(1), 3, f64);
  cr_assert_eq(tg_tensor_dict_set(d, "b", b), TG_OK);
  cr_assert_eq(tg_tensor_dict_set(d, "a", a), TG_OK);
  cr_assert_eq(tg_tensor_dict_size(d), 2);
  cr_assert_str_eq(tg_tensor_dict_name(d, 0), "b");
  cr_assert_eq(tg_tensor_dict_at(d, 1), a);
  cr_assert_eq(tg_tensor_dict_get(d, "a"), a);
  cr_assert_null(tg_tensor_dict_get(d, "z"));
  tg_expect_ok();                                     /* absent is not an error */
  cr_assert_eq(tg_tensor_dict_set(d, "b", c), TG_OK); /* replaces, keeps the place */
  cr_assert_eq(tg_tensor_dict_size(d), 2);
  cr_assert_str_eq(tg_tensor_dict_name(d, 0), "b");
  cr_assert_eq(tg_tensor_dict_at(d, 0), c);
  tg_tensor_dict_free(d);
  tg_tensor_dict_free(NULL);
}

TG_TEST(tensor_dict, holds_references_past_the_scope) {
  tg_tensor_dict *d = tg_tensor_dict_new();
  tg_scope s = tg_scope_begin();
  cr_assert_eq(tg_tensor_dict_set(d, "w", tg_arange(0, 4, 1, f64)), TG_OK);
  tg_scope_end(s);
  tg_test_expect_values(tg_tensor_dict_get(d, "w"), 4, (const double[]){0, 1, 2, 3}, 0);
  tg_tensor_dict_free(d); /* tg_test_teardown checks that nothing is left alive */
}

TG_TEST(tensor_dict, metadata) {
  tg_tensor_dict *d = tg_tensor_dict_new();
  cr_assert_eq(tg_tensor_dict_set_meta(d, "format", "pt"), TG_OK);
  cr_assert_eq(tg_tensor_dict_set_meta(d, "step", "1"), TG_OK);
  cr_assert_eq(tg_tensor_dict_set_meta(d, "format", "tg"), TG_OK);
  cr_assert_eq(tg_tensor_dict_meta_size(d), 2);
  cr_assert_str_eq(tg_tensor_dict_meta_key(d, 0), "format");
  cr_assert_str_eq(tg_tensor_dict_meta_value(d, 0), "tg");
  cr_assert_str_eq(tg_tensor_dict_get_meta(d, "step"), "1");
  cr_assert_null(tg_tensor_dict_get_meta(d, "nope"));
  cr_assert_eq(tg_tensor_dict_set_meta(d, "empty", ""), TG_OK);
  cr_assert_str_eq(tg_tensor_dict_get_meta(d, "empty"), "");
  tg_expect_ok();
  tg_tensor_dict_free(d);
}

TG_TEST(tensor_dict, errors) {
  tg_tensor_dict *d = tg_tensor_dict_new();
  tg_tensor *t = tg_zeros(TG_SHAPE(1), f64);
  cr_assert_eq(tg_tensor_dict_set(NULL, "x", t), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_tensor_dict_set: d is NULL");
  cr_assert_eq(tg_tensor_dict_set(d, NULL, t), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_tensor_dict_set: name is NULL");
  cr_assert_eq(tg_tensor_dict_set(d, "", t), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "name is empty");
  char long_name[TG_TENSOR_NAME_MAX + 2];
  memset(long_name, 'n', sizeof long_name - 1);
  long_name[sizeof long_name - 1] = '\0';
  cr_assert_eq(tg_tensor_dict_set(d, long_name, t), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "name is longer than 1024 bytes");
  long_name[TG_TENSOR_NAME_MAX] = '\0'; /* exactly the limit is fine */
  cr_assert_eq(tg_tensor_dict_set(d, long_name, t), TG_OK);
  cr_assert_eq(tg_tensor_dict_set(d, "x", NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tensor \"x\" is NULL");
  /* A NULL from a failed op keeps that op's error. */
  cr_assert_eq(
      tg_tensor_dict_set(d, "x", tg_add(tg_zeros(TG_SHAPE(2), f64), tg_zeros(TG_SHAPE(3), f64))),
      TG_ERR_SHAPE);
  tg_expect_error(TG_ERR_SHAPE, "tg_add");
  cr_assert_null(tg_tensor_dict_at(d, 1));
  tg_expect_error(TG_ERR_INDEX, "tg_tensor_dict_at: index 1 is outside [0, 1)");
  cr_assert_null(tg_tensor_dict_name(d, -1));
  tg_expect_error(TG_ERR_INDEX, "tg_tensor_dict_name");
  cr_assert_null(tg_tensor_dict_meta_key(d, 0));
  tg_expect_error(TG_ERR_INDEX, "tg_tensor_dict_meta_key: index 0 is outside [0, 0)");
  cr_assert_null(tg_tensor_dict_meta_value(d, 0));
  tg_expect_error(TG_ERR_INDEX, "tg_tensor_dict_meta_value");
  cr_assert_eq(tg_tensor_dict_set_meta(d, "k", NULL), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_tensor_dict_set_meta: value of \"k\" is NULL");
  cr_assert_eq(tg_tensor_dict_set_meta(d, NULL, "v"), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_tensor_dict_set_meta: key is NULL");
  cr_assert_eq(tg_tensor_dict_size(NULL), 0);
  cr_assert_null(tg_tensor_dict_get(NULL, "x"));
  tg_expect_ok();
  tg_tensor_dict_free(d);
}

/* Builds a dict past its first growth (8 entries) with metadata, reads it back, frees it. */
static tg_status dict_step(void *user, double *out, int *n_out) {
  (void)user;
  tg_tensor_dict *d = tg_tensor_dict_new();
  if (!d) return tg_last_error();
  tg_status st = TG_OK;
  for (int i = 0; i < 10 && st == TG_OK; i++) {
    char name[16];
    snprintf(name, sizeof name, "t%d", i);
    tg_tensor *t = tg_full(TG_SHAPE(1), i, f64);
    st = t ? tg_tensor_dict_set(d, name, t) : tg_last_error();
  }
  for (int i = 0; i < 10 && st == TG_OK; i++) {
    char key[16];
    snprintf(key, sizeof key, "k%d", i);
    st = tg_tensor_dict_set_meta(d, key, "v");
  }
  if (st == TG_OK) st = tg_tensor_dict_set_meta(d, "k0", "replaced");
  for (int i = 0; i < tg_tensor_dict_size(d) && st == TG_OK; i++)
    st = append(tg_tensor_dict_at(d, i), out, n_out);
  tg_tensor_dict_free(d);
  return st;
}

TG_TEST(tensor_dict, allocation_failures_are_clean) { sweep("tg_tensor_dict", dict_step, NULL); }
