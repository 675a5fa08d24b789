/* test_cpu_kernels.c — generated kernels of the CPU backend: elementwise
 * broadcasts, movement, softmax, layer norm, reductions, pools, gathers and
 * a large parallel loop, under plans of every shape against the reference
 * interpreter (cpu_test_util.h). */
#include "cpu_test_util.h"

static void test_elementwise_broadcast(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t dx[] = {4, 1, 5}, dy[] = {3, 1};
  fsl_value *x = input_dt(g, FSL_DT_F32, 3, dx), *y = input_dt(g, FSL_DT_F32, 2, dy);
  fsl_value *s = fsl_b_binary(&b, FSL_OP_add, x, y);           /* 4x3x5 */
  fsl_value *t = fsl_b_unary(&b, FSL_OP_tanh, s);
  fsl_value *u = fsl_b_binary(&b, FSL_OP_mul, t, fsl_b_unary(&b, FSL_OP_exp, y));
  fsl_value *c = fsl_b_binary(&b, FSL_OP_gt, u, fsl_b_scalar(&b, FSL_DT_F32, 0.1));
  fsl_value *w = fsl_b_where(&b, c, fsl_b_unary(&b, FSL_OP_sigmoid, u), fsl_b_binary(&b, FSL_OP_max, s, t));
  fsl_value *q = fsl_b_binary(&b, FSL_OP_div, w, fsl_b_binary_scalar(&b, FSL_OP_add, fsl_b_unary(&b, FSL_OP_abs, x), 1.0));
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, q);
  fsl_graph_add_output(g, t);
  void *in[] = {random_data(x, -2, 2), random_data(y, -2, 2)};
  check_graph(g, in, 1e-5, "elementwise");
  free_inputs(in, 2);
  fsl_graph_free(g);
}

static void test_movement(void **state) {
  (void)state;
  for (int mode = 0; mode < 4; mode++) {
    fsl_graph *g = fsl_graph_new();
    fsl_builder b = B_INIT(g);
    int64_t dx[] = {2, 3, 4}, perm[] = {2, 0, 1};
    fsl_value *x = input_dt(g, FSL_DT_F32, 3, dx);
    fsl_value *p = fsl_b_permute(&b, x, perm);                     /* 4x2x3 */
    int64_t st[] = {3, 0, 0}, sp[] = {-1, 1, 2}, sz[] = {3, 2, 2};
    fsl_value *s = fsl_b_slice(&b, p, st, sp, sz);                 /* 3x2x2 */
    int64_t pads[] = {1, 0, 2, 2, 1, 0};
    fsl_value *pd = fsl_b_pad(&b, s, pads, mode, 0.5);             /* 6x3x4 */
    fsl_value *e = fsl_b_unary(&b, FSL_OP_neg, pd);
    int64_t rs[] = {6, 12};
    fsl_value *r = fsl_b_reshape(&b, e, 2, rs);
    fsl_value *r2 = fsl_b_reshape(&b, pd, 2, rs);
    fsl_value *parts[] = {r, r2, r};
    fsl_value *cc = fsl_b_concat(&b, parts, 3, 1);                 /* 6x36 */
    fsl_value *o = fsl_b_binary(&b, FSL_OP_mul, cc, cc);
    assert_int_equal(b.st, FSL_OK);
    fsl_graph_add_output(g, o);
    void *in[] = {random_data(x, -3, 3)};
    char name[32];
    snprintf(name, sizeof name, "movement-pad%d", mode);
    check_graph(g, in, 1e-6, name);
    free_inputs(in, 1);
    fsl_graph_free(g);
  }
}

static void test_softmax(void **state) {
  (void)state;
  int64_t shapes[][3] = {{3, 4, 5}, {2, 64, 700}};
  int64_t axes[] = {1, 2};
  for (int t = 0; t < 2; t++) {
    fsl_graph *g = fsl_graph_new();
    fsl_builder b = B_INIT(g);
    fsl_value *x = input_dt(g, FSL_DT_F32, 3, shapes[t]);
    fsl_value *y = softmax(&b, x, axes[t]);
    assert_int_equal(b.st, FSL_OK);
    fsl_graph_add_output(g, y);
    void *in[] = {random_data(x, -5, 5)};
    check_graph(g, in, 1e-5, t ? "softmax-big" : "softmax");
    free_inputs(in, 1);
    fsl_graph_free(g);
  }
}

static void test_layernorm(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t dx[] = {2, 3, 40}, dw[] = {40};
  int64_t axis = 2;
  fsl_value *x = input_dt(g, FSL_DT_F32, 3, dx), *w = input_dt(g, FSL_DT_F32, 1, dw), *bb = input_dt(g, FSL_DT_F32, 1, dw);
  fsl_value *mean = fsl_b_binary_scalar(&b, FSL_OP_div, fsl_b_reduce(&b, FSL_OP_reduce_sum, x, &axis, 1, true), 40.0);
  fsl_value *d = fsl_b_binary(&b, FSL_OP_sub, x, mean);
  fsl_value *var = fsl_b_binary_scalar(&b, FSL_OP_div,
                                       fsl_b_reduce(&b, FSL_OP_reduce_sum, fsl_b_binary(&b, FSL_OP_mul, d, d), &axis, 1, true),
                                       40.0);
  fsl_value *inv = fsl_b_unary(&b, FSL_OP_rsqrt, fsl_b_binary_scalar(&b, FSL_OP_add, var, 1e-5));
  fsl_value *y = fsl_b_binary(&b, FSL_OP_add, fsl_b_binary(&b, FSL_OP_mul, fsl_b_binary(&b, FSL_OP_mul, d, inv), w), bb);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, y);
  fsl_graph_add_output(g, mean);
  fsl_graph_add_output(g, inv);
  void *in[] = {random_data(x, -3, 3), random_data(w, 0.5, 1.5), random_data(bb, -1, 1)};
  check_graph(g, in, 1e-5, "layernorm");
  free_inputs(in, 3);
  fsl_graph_free(g);
}

static void test_reductions_misc(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t dx[] = {5, 6, 7};
  fsl_value *x = input_dt(g, FSL_DT_F32, 3, dx);
  int64_t ax02[] = {0, 2}, ax1 = 1;
  fsl_value *s = fsl_b_reduce(&b, FSL_OP_reduce_sum, x, ax02, 2, false);          /* [6] */
  fsl_value *mn = fsl_b_reduce(&b, FSL_OP_reduce_min, x, &ax1, 1, false);         /* [5,7] */
  fsl_value *pr = fsl_b_reduce(&b, FSL_OP_reduce_prod, x, &ax1, 1, true);         /* [5,1,7] */
  fsl_value *am = fsl_b_arg(&b, FSL_OP_argmax, x, 2, false, false);               /* [5,6] */
  fsl_value *an = fsl_b_arg(&b, FSL_OP_argmin, fsl_b_unary(&b, FSL_OP_floor, x), 1, true, true);
  fsl_value *xi = fsl_b_cast(&b, x, FSL_DT_I32);
  fsl_value *si = fsl_b_reduce(&b, FSL_OP_reduce_max, xi, &ax1, 1, true);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, s);
  fsl_graph_add_output(g, mn);
  fsl_graph_add_output(g, pr);
  fsl_graph_add_output(g, am);
  fsl_graph_add_output(g, an);
  fsl_graph_add_output(g, si);
  void *in[] = {random_data(x, -3, 3)};
  check_graph(g, in, 1e-5, "reductions");
  free_inputs(in, 1);
  fsl_graph_free(g);
}

/* Max and min pools whose kernels read each input row once per window
 * row and then take the max along the row's windows (codegen/columns.c,
 * separable): 3x3 stride 2 (ResNet's stem pool), a dilated 3x3 min, a
 * 3x3x3 pool over three axes and an int32 one; a 3x2 pool with asymmetric
 * pads and strides stays direct.  NaNs in the input reach exactly the
 * outputs whose windows hold one: short rows carry NaN flags per column,
 * rows of 64 or more (a 3x3/2 and a 2x2/2 pool over 150 columns, one
 * separable, one direct) note a NaN per row and run that row again for
 * the per-column flags.  A pool over H only (5x1, the H pass of a pool
 * split per axis) clamps its window loop. */
static void test_maxpool_separable(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t d2[] = {1, 3, 21, 23}, d3[] = {1, 2, 5, 6, 20}, p1[] = {0, 0, 1, 1, 0, 0, 1, 1},
          p2[] = {0, 0, 2, 2, 0, 0, 2, 2}, pa[] = {0, 0, 0, 1, 0, 0, 2, 0}, p3[] = {0, 0, 1, 1, 1, 0, 0, 1, 1, 1};
  int64_t k3[] = {3, 3, 3}, k32[] = {3, 2}, s1[] = {1, 1, 1}, s2[] = {2, 2}, s12[] = {1, 2}, dl2[] = {2, 2};
  int64_t k51[] = {5, 1}, ph[] = {0, 0, 2, 0, 0, 0, 2, 0};
  fsl_value *x = input_dt(g, FSL_DT_F32, 4, d2), *x3 = input_dt(g, FSL_DT_F32, 5, d3);
  fsl_value *xi = input_dt(g, FSL_DT_I32, 4, d2);
  int64_t dl[] = {1, 2, 9, 150}, p0[] = {0, 0, 0, 0, 0, 0, 0, 0}, k2[] = {2, 2};
  fsl_value *xl = input_dt(g, FSL_DT_F32, 4, dl);
  fsl_value *outs[] = {
      pool_of(&b, x, FSL_OP_reduce_max, p1, k3, s2, s1, -INFINITY),
      pool_of(&b, x, FSL_OP_reduce_min, p2, k3, s1, dl2, INFINITY),
      pool_of(&b, x, FSL_OP_reduce_max, pa, k32, s12, s1, -INFINITY),
      pool_of(&b, x3, FSL_OP_reduce_max, p3, k3, s1, s1, -INFINITY),
      pool_of(&b, xi, FSL_OP_reduce_max, p1, k3, s2, s1, (double)INT32_MIN),
      pool_of(&b, xl, FSL_OP_reduce_max, p1, k3, s2, s1, -INFINITY),
      pool_of(&b, xl, FSL_OP_reduce_max, p0, k2, s2, s1, -INFINITY),
      pool_of(&b, x, FSL_OP_reduce_max, ph, k51, s1, s1, -INFINITY),
  };
  assert_int_equal(b.st, FSL_OK);
  for (int i = 0; i < 8; i++) fsl_graph_add_output(g, outs[i]);
  void *in[] = {random_data(x, -3, 3), random_data(x3, -3, 3), random_data(xi, -1000, 1000), random_data(xl, -3, 3)};
  float *xf = in[0], *x3f = in[1], *xlf = in[3];
  xf[5 * 23 + 7] = NAN, xf[21 * 23 + 40] = NAN, xf[2 * 21 * 23 + 20 * 23 + 22] = NAN;
  x3f[3 * 6 * 20 + 2 * 20 + 19] = NAN;
  xlf[4 * 150 + 77] = NAN, xlf[9 * 150 + 2 * 150 + 149] = NAN;
  check_graph(g, in, 0, "separable pools");
  free_inputs(in, 4);
  fsl_graph_free(g);
}

static void test_maxpool(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t dx[] = {1, 3, 28, 28};
  fsl_value *x = input_dt(g, FSL_DT_F32, 4, dx);
  int64_t pads[] = {0, 0, 1, 1, 0, 0, 1, 1}, k[] = {3, 3}, st[] = {2, 2}, dl[] = {1, 1}, ax[] = {4, 5};
  fsl_value *p = fsl_b_pad(&b, x, pads, 0, -INFINITY);
  fsl_value *w = fsl_b_window(&b, p, 2, k, st, dl);
  fsl_value *m = fsl_b_reduce(&b, FSL_OP_reduce_max, w, ax, 2, false);
  fsl_value *avg = fsl_b_binary_scalar(&b, FSL_OP_div, fsl_b_reduce(&b, FSL_OP_reduce_sum, w, ax, 2, false), 9.0);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, m);
  fsl_graph_add_output(g, avg);
  void *in[] = {random_data(x, -3, 3)};
  check_graph(g, in, 1e-5, "pool");
  free_inputs(in, 1);
  fsl_graph_free(g);
}

static void test_gather_ints(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t dd[] = {5, 4}, di[] = {3, 2};
  fsl_value *data = input_dt(g, FSL_DT_F32, 2, dd), *idx = input_dt(g, FSL_DT_I64, 2, di);
  fsl_value *y = fsl_b_gather(&b, data, idx, 0);                                  /* 3x2x4 */
  fsl_value *y2 = fsl_b_unary(&b, FSL_OP_exp, fsl_b_gather(&b, data, idx, 1));    /* 5x3x2 */
  fsl_value *ii = fsl_b_cast(&b, fsl_b_binary_scalar(&b, FSL_OP_mul, data, 10.0), FSL_DT_I32);
  fsl_value *q = fsl_b_binary(&b, FSL_OP_div, ii, fsl_b_scalar(&b, FSL_DT_I32, -3));
  fsl_value *r = fsl_b_binary(&b, FSL_OP_mod, ii, fsl_b_scalar(&b, FSL_DT_I32, 7));
  fsl_value *m = fsl_b_binary(&b, FSL_OP_add, fsl_b_binary(&b, FSL_OP_mul, q, r), ii);
  fsl_value *f = fsl_b_cast(&b, m, FSL_DT_F32);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, y);
  fsl_graph_add_output(g, y2);
  fsl_graph_add_output(g, m);
  fsl_graph_add_output(g, f);
  void *in[] = {random_data(data, -2, 2), random_data(idx, -4, 4)};
  check_graph(g, in, 1e-6, "gather");
  free_inputs(in, 2);
  fsl_graph_free(g);
}

static void test_gather_error(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t dd[] = {5, 4}, di[] = {3};
  fsl_value *data = input_dt(g, FSL_DT_F32, 2, dd), *idx = input_dt(g, FSL_DT_I64, 1, di);
  fsl_value *y = fsl_b_gather(&b, data, idx, 0);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, y);
  fsl_plan p;
  fsl_node **all = g->nodes;
  int na = g->n_nodes;
  assert_true(hand_plan(g, &p, &all, &na, 1));
  void *exe = NULL;
  assert_int_equal(fsl_backend_cpu.compile(&p, NULL, &exe), FSL_OK);
  float d[20] = {0};
  int64_t ix[3] = {0, -5, 5};
  const void *in[] = {d, ix};
  void *out[1] = {(void *)1};
  assert_int_equal(fsl_backend_cpu.run(exe, in, out), FSL_ERR_RUNTIME);
  assert_null(out[0]);
  assert_non_null(strstr(fsl_last_error(), "out of range"));
  fsl_backend_cpu.free_exe(exe);
  fsl_plan_free(&p);
  fsl_graph_free(g);
}

static void test_large_parallel(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t dx[] = {300000}, dy[] = {64, 2000};
  fsl_value *x = input_dt(g, FSL_DT_F32, 1, dx), *y = input_dt(g, FSL_DT_F32, 2, dy);
  fsl_value *a = fsl_b_unary(&b, FSL_OP_sqrt, fsl_b_binary(&b, FSL_OP_mul, x, x));
  int64_t perm[] = {1, 0};
  fsl_value *t = fsl_b_binary_scalar(&b, FSL_OP_add, fsl_b_permute(&b, y, perm), 1.0);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, a);
  fsl_graph_add_output(g, t);
  void *in[] = {random_data(x, -3, 3), random_data(y, -3, 3)};
  check_graph(g, in, 1e-6, "large");
  free_inputs(in, 2);
  fsl_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_elementwise_broadcast),
      cmocka_unit_test(test_movement),
      cmocka_unit_test(test_softmax),
      cmocka_unit_test(test_layernorm),
      cmocka_unit_test(test_reductions_misc),
      cmocka_unit_test(test_maxpool),
      cmocka_unit_test(test_maxpool_separable),
      cmocka_unit_test(test_gather_ints),
      cmocka_unit_test(test_gather_error),
      cmocka_unit_test(test_large_parallel),
  };
  return cmocka_run_group_tests(tests, cpu_test_setup, cpu_test_teardown);
}
