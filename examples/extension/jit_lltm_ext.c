/* jit_lltm_ext: the program side of an extension. Compiles lltm_ext.c at run time
 * (tg_extension_jit, the twin of torch.utils.cpp_extension.load; a second run finds it in
 * the cache), calls its op "lltm_ext" by name, checks it against the built-in "lltm",
 * and unloads it. Usage: jit_lltm_ext [path/to/lltm_ext.c]. Exits 0 when they agree. */
#include <stdio.h>
#include <tg/extension.h>
#include <tg/tg.h>

static int run(const char *source) {
  tg_extension *ext = tg_extension_jit("lltm_ext", 1, &source, (tg_jit_options){.verbose = true});
  if (!ext) return fprintf(stderr, "jit_lltm_ext: %s\n", tg_last_error_message()), 1;
  printf("%s %s\n", tg_extension_jit_compiled() ? "compiled" : "cached:", tg_extension_path(ext));

  tg_scope s = tg_scope_begin();
  tg_generator *gen = tg_generator_new(1);
  tg_options f64 = {.dtype = TG_F64};
  const tg_tensor *in[5] = {
      tg_randn(TG_SHAPE(4, 6), f64, gen), tg_randn(TG_SHAPE(9, 9), f64, gen), /* input, W */
      tg_randn(TG_SHAPE(9), f64, gen),                                        /* bias */
      tg_randn(TG_SHAPE(4, 3), f64, gen), tg_randn(TG_SHAPE(4, 3), f64, gen), /* h, cell */
  };
  tg_tensor *ext_out[2], *ref_out[2];
  tg_status st = tg_apply(tg_op_lookup("lltm_ext"), 5, in, 0, NULL, 2, ext_out);
  if (st == TG_OK) st = tg_lltm(in[0], in[1], in[2], in[3], in[4], &ref_out[0], &ref_out[1]);
  double dh = st == TG_OK ? tg_max_abs_diff(ext_out[0], ref_out[0]) : -1;
  double dc = st == TG_OK ? tg_max_abs_diff(ext_out[1], ref_out[1]) : -1;
  if (st == TG_OK)
    printf("lltm_ext vs lltm: max |diff| new_h %.3g, new_cell %.3g\n", dh, dc);
  else
    fprintf(stderr, "jit_lltm_ext: %s\n", tg_last_error_message());
  tg_generator_free(gen);
  tg_scope_end(s); /* the tensors go first: unloading waits for no tape node of its op */

  if (tg_extension_unload(ext) != TG_OK)
    return fprintf(stderr, "jit_lltm_ext: %s\n", tg_last_error_message()), 1;
  return st == TG_OK && dh >= 0 && dh < 1e-12 && dc >= 0 && dc < 1e-12 ? 0 : 1;
}

int main(int argc, char **argv) {
  int code = run(argc > 1 ? argv[1] : "lltm_ext.c");
  if (tg_live_objects() != 0) {
    fprintf(stderr, "jit_lltm_ext: %lld tg objects alive at exit\n", (long long)tg_live_objects());
    code = 1;
  }
  return code;
}
