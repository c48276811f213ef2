/* Loads the extension given on the command line (a .so, or a .c compiled by the JIT into the
 * cache directory given second), gradchecks its op "install_cube", unloads it: the program
 * side of an extension, against an installed tg. */
#include <stdio.h>
#include <string.h>
#include <tg/extension.h>
#include <tg/testing.h> /* tg_gradcheck (tg/testing.h since the src/testing move) */

static tg_status cube(void *op, const tg_tensor *const *in, tg_tensor **out) {
  out[0] = tg_apply1(op, 1, in, 0, NULL);
  return out[0] ? TG_OK : tg_last_error();
}

int main(int argc, char **argv) {
  size_t len = argc >= 2 ? strlen(argv[1]) : 0;
  bool jit = len > 2 && strcmp(argv[1] + len - 2, ".c") == 0;
  if (argc != (jit ? 3 : 2)) return 2;
  tg_extension *ext =
      jit ? tg_extension_jit("install_cube", 1, (const char *const *)&argv[1],
                             (tg_jit_options){.cache_dir = argv[2], .verbose = true})
          : tg_extension_load(argv[1]);
  const tg_op_desc *op = ext ? tg_op_lookup("install_cube") : NULL;
  tg_status st = op ? TG_OK : tg_last_error();
  tg_scope s = tg_scope_begin();
  tg_tensor *x = st == TG_OK ? tg_from_data(TG_SHAPE(3), (double[]){0.5, -1.0, 2.0},
                                            TG_OPTS(.dtype = TG_F64, .requires_grad = true))
                             : NULL;
  if (st == TG_OK && !x) st = tg_last_error();
  if (st == TG_OK) st = tg_gradcheck(cube, (void *)op, 1, &x, 1, (tg_gradcheck_options){0});
  tg_scope_end(s);
  if (st == TG_OK) st = tg_extension_unload(ext);
  if (st != TG_OK) {
    fprintf(stderr, "load_ext: %s\n", tg_last_error_message());
    return 1;
  }
  printf("load_ext: %s: install_cube gradchecked, unloaded, %lld objects alive\n", argv[1],
         (long long)tg_live_objects());
  return tg_live_objects() == 0 ? 0 : 1;
}
