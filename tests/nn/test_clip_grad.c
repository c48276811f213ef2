/* tg_clip_grad_norm (tg/optim.h) against torch.nn.utils.clip_grad_norm_: the total norm and
 * the clipped gradients for norm types 2, inf, 1, 3 and 0.5, clipping and not, F64 and F32
 * (numbers from tests/nn/python/optim_refs.py, torch 2.15, pasted below); parameters
 * without a gradient, non-finite norms (PyTorch's error_if_nonfinite=False), errors, the
 * allocation-failure sweep. */
#include <math.h>

#include "testutil.h"

#include "alloc_sweep.h"

/* p1 [3,4] with gradient sin(1.1 i), p2 [5] with 0.5 i - 1, p3 [2] without one; each row
 * {norm_type, max_norm, total norm, p1's clipped gradient..., p2's...} */
static const double clip_f64[][20] = {{2,
                                       1,
                                       2.8641402387960442,
                                       0,
                                       0.31116040926670874,
                                       0.28228230956914868,
                                       -0.055076087731468791,
                                       -0.3322469091257268,
                                       -0.24633573093866321,
                                       0.10877304488110251,
                                       0.34501379348609978,
                                       0.20422079224613743,
                                       -0.15974627493148652,
                                       -0.34914137368835002,
                                       -0.1569920709369805,
                                       -0.34914479302017759,
                                       -0.1745723965100888,
                                       0,
                                       0.1745723965100888,
                                       0.34914479302017759},
                                      {2,
                                       100,
                                       2.8641402387960442,
                                       0,
                                       0.89120736006143542,
                                       0.80849640381959009,
                                       -0.15774569414324865,
                                       -0.95160207388951601,
                                       -0.70554032557039192,
                                       0.31154136351337869,
                                       0.98816823387700048,
                                       0.58491719289176169,
                                       -0.45753589377532133,
                                       -0.99999020655070348,
                                       -0.44964746453459986,
                                       -1,
                                       -0.5,
                                       0,
                                       0.5,
                                       1},
                                      {INFINITY,
                                       1,
                                       1,
                                       0,
                                       0.89120646885496657,
                                       0.80849559532399484,
                                       -0.15774553639771227,
                                       -0.95160112228839377,
                                       -0.70553962003077197,
                                       0.31154105197232673,
                                       0.98816724570975478,
                                       0.58491660797515377,
                                       -0.45753543623988513,
                                       -0.99998920656149692,
                                       -0.44964701488758502,
                                       -0.99999900000100006,
                                       -0.49999950000050003,
                                       0,
                                       0.49999950000050003,
                                       0.99999900000100006},
                                      {INFINITY,
                                       100,
                                       1,
                                       0,
                                       0.89120736006143542,
                                       0.80849640381959009,
                                       -0.15774569414324865,
                                       -0.95160207388951601,
                                       -0.70554032557039192,
                                       0.31154136351337869,
                                       0.98816823387700048,
                                       0.58491719289176169,
                                       -0.45753589377532133,
                                       -0.99999020655070348,
                                       -0.44964746453459986,
                                       -1,
                                       -0.5,
                                       0,
                                       0.5,
                                       1},
                                      {1,
                                       1,
                                       10.306392212626948,
                                       0,
                                       0.08647131364729678,
                                       0.07844610496997681,
                                       -0.0153056157366464,
                                       -0.092331240838322989,
                                       -0.068456569724701988,
                                       0.030227971811874175,
                                       0.095879151269557567,
                                       0.056752850471020883,
                                       -0.044393405562555888,
                                       -0.097026203631116914,
                                       -0.043628013724889829,
                                       -0.097027153861628648,
                                       -0.048513576930814324,
                                       0,
                                       0.048513576930814324,
                                       0.097027153861628648},
                                      {1,
                                       100,
                                       10.306392212626948,
                                       0,
                                       0.89120736006143542,
                                       0.80849640381959009,
                                       -0.15774569414324865,
                                       -0.95160207388951601,
                                       -0.70554032557039192,
                                       0.31154136351337869,
                                       0.98816823387700048,
                                       0.58491719289176169,
                                       -0.45753589377532133,
                                       -0.99999020655070348,
                                       -0.44964746453459986,
                                       -1,
                                       -0.5,
                                       0,
                                       0.5,
                                       1},
                                      {3,
                                       1,
                                       1.9206538972824698,
                                       0,
                                       0.46401222901750994,
                                       0.42094829475275841,
                                       -0.082131201376386076,
                                       -0.49545708353746193,
                                       -0.36734362147445609,
                                       0.16220579967498472,
                                       0.51449546468507035,
                                       0.30454049486941132,
                                       -0.23821869010548838,
                                       -0.52065064263527361,
                                       -0.23411153412870006,
                                       -0.52065574165088047,
                                       -0.26032787082544023,
                                       0,
                                       0.26032787082544023,
                                       0.52065574165088047},
                                      {3,
                                       100,
                                       1.9206538972824698,
                                       0,
                                       0.89120736006143542,
                                       0.80849640381959009,
                                       -0.15774569414324865,
                                       -0.95160207388951601,
                                       -0.70554032557039192,
                                       0.31154136351337869,
                                       0.98816823387700048,
                                       0.58491719289176169,
                                       -0.45753589377532133,
                                       -0.99999020655070348,
                                       -0.44964746453459986,
                                       -1,
                                       -0.5,
                                       0,
                                       0.5,
                                       1},
                                      {0.5,
                                       1,
                                       147.23502530180193,
                                       0,
                                       0.0060529575227204514,
                                       0.0054911961109195342,
                                       -0.0010713870069198209,
                                       -0.0064631500926887117,
                                       -0.0047919326215501018,
                                       0.0021159459901530639,
                                       0.0067115024101089653,
                                       0.0039726769341746184,
                                       -0.0031075207120720419,
                                       -0.0067917956186656732,
                                       -0.0030539435882119097,
                                       -0.0067918621344231159,
                                       -0.003395931067211558,
                                       0,
                                       0.003395931067211558,
                                       0.0067918621344231159},
                                      {0.5,
                                       100,
                                       147.23502530180193,
                                       0,
                                       0.60529575227204513,
                                       0.5491196110919534,
                                       -0.10713870069198207,
                                       -0.6463150092688712,
                                       -0.47919326215501018,
                                       0.21159459901530639,
                                       0.67115024101089649,
                                       0.39726769341746176,
                                       -0.31075207120720416,
                                       -0.67917956186656736,
                                       -0.30539435882119098,
                                       -0.67918621344231156,
                                       -0.33959310672115578,
                                       0,
                                       0.33959310672115578,
                                       0.67918621344231156}};
static const double clip_f32[][20] = {{2,
                                       1,
                                       2.8641402721405029,
                                       0,
                                       0.3111603856086731,
                                       0.28228232264518738,
                                       -0.055076085031032562,
                                       -0.33224689960479736,
                                       -0.2463357150554657,
                                       0.10877303779125214,
                                       0.34501379728317261,
                                       0.20422078669071198,
                                       -0.15974627435207367,
                                       -0.34914135932922363,
                                       -0.15699206292629242,
                                       -0.34914478659629822,
                                       -0.17457239329814911,
                                       0,
                                       0.17457239329814911,
                                       0.34914478659629822},
                                      {2,
                                       100,
                                       2.8641402721405029,
                                       0,
                                       0.89120733737945557,
                                       0.80849641561508179,
                                       -0.15774568915367126,
                                       -0.95160210132598877,
                                       -0.70554029941558838,
                                       0.311541348695755,
                                       0.98816823959350586,
                                       0.58491718769073486,
                                       -0.45753589272499084,
                                       -0.99999022483825684,
                                       -0.449647456407547,
                                       -1,
                                       -0.5,
                                       0,
                                       0.5,
                                       1},
                                      {INFINITY,
                                       1,
                                       1,
                                       0,
                                       0.89120650291442871,
                                       0.80849564075469971,
                                       -0.15774554014205933,
                                       -0.95160120725631714,
                                       -0.70553964376449585,
                                       0.31154105067253113,
                                       0.98816728591918945,
                                       0.58491665124893188,
                                       -0.45753544569015503,
                                       -0.99998927116394043,
                                       -0.44964703917503357,
                                       -0.99999904632568359,
                                       -0.4999995231628418,
                                       0,
                                       0.4999995231628418,
                                       0.99999904632568359},
                                      {INFINITY,
                                       100,
                                       1,
                                       0,
                                       0.89120733737945557,
                                       0.80849641561508179,
                                       -0.15774568915367126,
                                       -0.95160210132598877,
                                       -0.70554029941558838,
                                       0.311541348695755,
                                       0.98816823959350586,
                                       0.58491718769073486,
                                       -0.45753589272499084,
                                       -0.99999022483825684,
                                       -0.449647456407547,
                                       -1,
                                       -0.5,
                                       0,
                                       0.5,
                                       1},
                                      {1,
                                       1,
                                       10.306392669677734,
                                       0,
                                       0.086471311748027802,
                                       0.078446105122566223,
                                       -0.015305615030229092,
                                       -0.092331245541572571,
                                       -0.068456567823886871,
                                       0.030227970331907272,
                                       0.095879152417182922,
                                       0.056752849370241165,
                                       -0.044393405318260193,
                                       -0.09702620655298233,
                                       -0.043628010898828506,
                                       -0.09702715277671814,
                                       -0.04851357638835907,
                                       0,
                                       0.04851357638835907,
                                       0.09702715277671814},
                                      {1,
                                       100,
                                       10.306392669677734,
                                       0,
                                       0.89120733737945557,
                                       0.80849641561508179,
                                       -0.15774568915367126,
                                       -0.95160210132598877,
                                       -0.70554029941558838,
                                       0.311541348695755,
                                       0.98816823959350586,
                                       0.58491718769073486,
                                       -0.45753589272499084,
                                       -0.99999022483825684,
                                       -0.449647456407547,
                                       -1,
                                       -0.5,
                                       0,
                                       0.5,
                                       1},
                                      {3,
                                       1,
                                       1.9206539392471313,
                                       0,
                                       0.46401223540306091,
                                       0.42094829678535461,
                                       -0.082131199538707733,
                                       -0.49545711278915405,
                                       -0.36734360456466675,
                                       0.16220580041408539,
                                       0.51449549198150635,
                                       0.3045404851436615,
                                       -0.23821869492530823,
                                       -0.52065068483352661,
                                       -0.23411153256893158,
                                       -0.52065575122833252,
                                       -0.26032787561416626,
                                       0,
                                       0.26032787561416626,
                                       0.52065575122833252},
                                      {3,
                                       100,
                                       1.9206539392471313,
                                       0,
                                       0.89120733737945557,
                                       0.80849641561508179,
                                       -0.15774568915367126,
                                       -0.95160210132598877,
                                       -0.70554029941558838,
                                       0.311541348695755,
                                       0.98816823959350586,
                                       0.58491718769073486,
                                       -0.45753589272499084,
                                       -0.99999022483825684,
                                       -0.449647456407547,
                                       -1,
                                       -0.5,
                                       0,
                                       0.5,
                                       1},
                                      {0.5,
                                       1,
                                       147.23504638671875,
                                       0,
                                       0.0060529564507305622,
                                       0.0054911957122385502,
                                       -0.0010713868541643023,
                                       -0.0064631495624780655,
                                       -0.0047919317148625851,
                                       0.0021159455645829439,
                                       0.0067115016281604767,
                                       0.003972676582634449,
                                       -0.0031075202859938145,
                                       -0.0067917946726083755,
                                       -0.0030539431609213352,
                                       -0.0067918612621724606,
                                       -0.0033959306310862303,
                                       0,
                                       0.0033959306310862303,
                                       0.0067918612621724606},
                                      {0.5,
                                       100,
                                       147.23504638671875,
                                       0,
                                       0.60529565811157227,
                                       0.54911953210830688,
                                       -0.10713867843151093,
                                       -0.64631491899490356,
                                       -0.47919318079948425,
                                       0.21159455180168152,
                                       0.67115014791488647,
                                       0.39726763963699341,
                                       -0.31075203418731689,
                                       -0.67917948961257935,
                                       -0.30539429187774658,
                                       -0.67918610572814941,
                                       -0.33959305286407471,
                                       0,
                                       0.33959305286407471,
                                       0.67918610572814941}};

/* A leaf of n zeros that requires grad, with gradient values[] (NULL: none). */
static tg_tensor *param_with_grad(int ndim, const int64_t *sizes, tg_dtype dtype,
                                  const double *values) {
  tg_scope s = tg_scope_begin();
  tg_tensor *p = tg_retain(tg_zeros(ndim, sizes, (tg_options){.dtype = dtype}));
  tg_set_requires_grad(p, true);
  if (values) {
    tg_tensor *g = tg_to_dtype(tg_test_tensor_of(TG_F64, ndim, sizes, values), dtype);
    cr_assert_eq(tg_backward(tg_sum(tg_mul(p, g)), NULL), TG_OK, "%s", tg_last_error_message());
  }
  tg_scope_end(s);
  return p;
}

typedef struct three {
  tg_tensor *p[3];
} three;

static three make_three(tg_dtype dtype) {
  double g1[12], g2[5];
  for (int i = 0; i < 12; i++) g1[i] = sin(1.1 * i);
  for (int i = 0; i < 5; i++) g2[i] = 0.5 * i - 1;
  return (three){{param_with_grad(TG_SHAPE(3, 4), dtype, g1),
                  param_with_grad(TG_SHAPE(5), dtype, g2),
                  param_with_grad(TG_SHAPE(2), dtype, NULL)}};
}

static void free_three(three *t) {
  for (int i = 0; i < 3; i++) tg_release(t->p[i]);
}

static void check_rows(const double (*rows)[20], int n_rows, tg_dtype dtype, double tol) {
  for (int r = 0; r < n_rows; r++) {
    three t = make_three(dtype);
    double total = -1;
    cr_assert_eq(tg_clip_grad_norm(3, t.p, rows[r][1], rows[r][0], &total), TG_OK, "%s",
                 tg_last_error_message());
    cr_assert(fabs(total - rows[r][2]) <= tol * rows[r][2],
              "norm %g, max %g: total %.17g, torch %.17g", rows[r][0], rows[r][1], total,
              rows[r][2]);
    tg_test_expect_values(tg_grad(t.p[0]), 12, rows[r] + 3, tol);
    tg_test_expect_values(tg_grad(t.p[1]), 5, rows[r] + 15, tol);
    cr_assert_null(tg_grad(t.p[2]));
    free_three(&t);
  }
}

TG_TEST(clip_grad, matches_torch_f64) { check_rows(clip_f64, 10, TG_F64, 1e-14); }
TG_TEST(clip_grad, matches_torch_f32) { check_rows(clip_f32, 10, TG_F32, 1e-6); }

TG_TEST(clip_grad, no_gradients_give_zero) {
  three t = make_three(TG_F64);
  double total = -1;
  cr_assert_eq(tg_clip_grad_norm(1, &t.p[2], 1.0, 2.0, &total), TG_OK);
  cr_assert_eq(total, 0.0);
  cr_assert_eq(tg_clip_grad_norm(0, NULL, 1.0, 2.0, &total), TG_OK);
  cr_assert_eq(total, 0.0);
  cr_assert_eq(tg_clip_grad_norm(3, t.p, 1.0, 2.0, NULL), TG_OK); /* total_norm may be NULL */
  free_three(&t);
}

/* PyTorch: an inf norm gives coefficient 0 (0 where finite, NaN where inf); a NaN norm NaN
 * everywhere. */
TG_TEST(clip_grad, non_finite_norms_follow_torch) {
  double with_inf[3] = {1.0, INFINITY, -2.0}, with_nan[3] = {1.0, NAN, -2.0};
  tg_tensor *a = param_with_grad(TG_SHAPE(3), TG_F64, with_inf);
  tg_tensor *b = param_with_grad(TG_SHAPE(3), TG_F64, with_nan);
  double total;
  cr_assert_eq(tg_clip_grad_norm(1, &a, 1.0, 2.0, &total), TG_OK);
  cr_assert(isinf(total) && total > 0);
  tg_test_expect_ieee(tg_grad(a), 3, (double[]){0.0, NAN, -0.0}, 0);
  cr_assert(signbit(tg_test_at(tg_grad(a), 2)));
  cr_assert_eq(tg_clip_grad_norm(1, &b, 1.0, 2.0, &total), TG_OK);
  cr_assert(isnan(total));
  tg_test_expect_ieee(tg_grad(b), 3, (double[]){NAN, NAN, NAN}, 0);
  tg_release(a);
  tg_release(b);
}

TG_TEST(clip_grad, errors_are_named_and_change_nothing) {
  three t = make_three(TG_F64);
  double total = 7;
  cr_assert_eq(tg_clip_grad_norm(3, t.p, -1.0, 2.0, &total), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "tg_clip_grad_norm", "max_norm (-1)");
  cr_assert_eq(tg_clip_grad_norm(3, t.p, NAN, 2.0, &total), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "max_norm (nan)");
  cr_assert_eq(tg_clip_grad_norm(3, t.p, 1.0, 0.0, &total), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "norm_type (0)");
  cr_assert_eq(tg_clip_grad_norm(3, t.p, 1.0, -INFINITY, &total), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "norm_type (-inf)");
  cr_assert_eq(tg_clip_grad_norm(3, t.p, 1.0, NAN, &total), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "norm_type");
  cr_assert_eq(tg_clip_grad_norm(-1, t.p, 1.0, 2.0, &total), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "n_params is -1");
  cr_assert_eq(tg_clip_grad_norm(2, NULL, 1.0, 2.0, &total), TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "params is NULL");
  cr_assert_eq(tg_clip_grad_norm(2, (tg_tensor *[]){t.p[0], NULL}, 1.0, 2.0, &total),
               TG_ERR_ARGUMENT);
  tg_expect_error(TG_ERR_ARGUMENT, "params[1] is NULL");
  cr_assert_eq(total, 7.0);
  cr_assert_eq(tg_test_at(tg_grad(t.p[1]), 0), -1.0); /* unclipped */
  free_three(&t);
}

static tg_status clip_step(void *user, double *out, int *n_out) {
  const double norm_type = *(const double *)user;
  tg_tensor *p[2] = {NULL, NULL};
  tg_status st = TG_OK;
  for (int i = 0; i < 2 && st == TG_OK; i++) {
    tg_scope s = tg_scope_begin();
    tg_tensor *t = tg_zeros(TG_SHAPE(3, 2), (tg_options){.dtype = TG_F64});
    if (t) p[i] = tg_retain(t);
    st = t ? clean(tg_set_requires_grad(p[i], true)) : status_of(t);
    tg_tensor *g =
        st == TG_OK ? tg_arange(-2.0 - i, 4.0 - i, 1.0, (tg_options){.dtype = TG_F64}) : NULL;
    if (st == TG_OK) st = status_of(g);
    if (st == TG_OK)
      st = clean(tg_backward(tg_sum(tg_mul(p[i], tg_reshape(g, TG_SHAPE(3, 2)))), NULL));
    tg_scope_end(s);
  }
  double total = 0;
  if (st == TG_OK) st = clean(tg_clip_grad_norm(2, p, 1.5, norm_type, &total));
  if (st == TG_OK) out[(*n_out)++] = total;
  for (int i = 0; i < 2 && st == TG_OK; i++) st = append(tg_grad(p[i]), out, n_out);
  for (int i = 0; i < 2; i++) tg_release(p[i]);
  return st;
}

TG_TEST(clip_grad, alloc_sweep) {
  double two = 2.0, inf = INFINITY, three_ = 3.0;
  cr_assert_gt(sweep("clip_grad_norm 2", clip_step, &two).failed, 0);
  cr_assert_gt(sweep("clip_grad_norm inf", clip_step, &inf).failed, 0);
  cr_assert_gt(sweep("clip_grad_norm 3", clip_step, &three_).failed, 0);
}
