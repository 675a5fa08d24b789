/* test_cpu_linear.c — linear kernels of the CPU backend: matmuls and
 * convolutions with their epilogues through oneDNN, and the ones generated
 * instead (depthwise convolutions row by row, GEMVs), under plans of every
 * shape against the reference interpreter (cpu_test_util.h). */
#include "cpu_test_util.h"

static void test_matmul_bias_relu(void **state) {
  (void)state;
  for (int dt = 0; dt < 2; dt++) {
    fsl_dtype T = dt ? FSL_DT_F64 : FSL_DT_F32;
    fsl_graph *g = fsl_graph_new();
    fsl_builder b = B_INIT(g);
    int64_t da[] = {2, 32, 64}, dw[] = {64, 48}, db[] = {48};
    fsl_value *a = input_dt(g, T, 3, da), *w = input_dt(g, T, 2, dw), *bias = input_dt(g, T, 1, db);
    fsl_value *mm = fsl_b_matmul(&b, a, w);
    fsl_value *y = fsl_b_binary(&b, FSL_OP_max, fsl_b_binary(&b, FSL_OP_add, mm, bias), fsl_b_scalar(&b, T, 0.0));
    fsl_value *z = fsl_b_binary(&b, FSL_OP_add, y, a == NULL ? y : fsl_b_unary(&b, FSL_OP_tanh, y));
    assert_int_equal(b.st, FSL_OK);
    fsl_graph_add_output(g, z);
    void *in[] = {random_data(a, -1, 1), random_data(w, -1, 1), random_data(bias, -1, 1)};
    check_graph(g, in, 1e-4, dt ? "matmul-f64" : "matmul");
    free_inputs(in, 3);
    fsl_graph_free(g);
  }
}

static void test_conv_bias(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t dx[] = {1, 3, 9, 9}, dw[] = {4, 3, 3, 3}, db[] = {4}, rb[] = {1, 4, 1, 1};
  int64_t st[] = {1, 1}, dl[] = {1, 1}, pads[] = {1, 1, 1, 1};
  fsl_value *x = input_dt(g, FSL_DT_F32, 4, dx), *w = input_dt(g, FSL_DT_F32, 4, dw), *bias = input_dt(g, FSL_DT_F32, 1, db);
  fsl_value *c = fsl_b_conv(&b, x, w, st, dl, pads, 1, NULL);
  fsl_value *y = fsl_b_binary(&b, FSL_OP_add, c, fsl_b_reshape(&b, bias, 4, rb));
  fsl_value *z = fsl_b_unary(&b, FSL_OP_sigmoid, y);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, z);
  void *in[] = {random_data(x, -1, 1), random_data(w, -1, 1), random_data(bias, -1, 1)};
  check_graph(g, in, 1e-4, "conv");
  free_inputs(in, 3);
  fsl_graph_free(g);
}

/* Depthwise convolutions that oneDNN would run between two reorders are
 * generated row by row (fsl_cpu_lower_generated, fsl_codegen_conv_rows):
 * the flat pass over "same"-padded rows (3x3, 5x5, dilated, a channel
 * multiplier), the per-row pass (stride 2, stride 2 along the rows only
 * with as many output columns as input ones, asymmetric and no padding,
 * rows too short for any interior row) and the per-tap passes (a 9x9
 * window), each with a bias and HardSwish epilogue, against the reference
 * under every plan, with inputs of odd sizes; the one-kernel plan of one
 * channel per group runs no oneDNN primitive. */
static void test_depthwise_rows(void **state) {
  (void)state;
  static const struct {
    int64_t c, mult, h, w, k, sh, sw, d, pads[4];
  } cases[] = {
      {8, 1, 13, 13, 3, 1, 1, 1, {1, 1, 1, 1}}, {3, 2, 9, 11, 5, 1, 1, 1, {2, 2, 2, 2}},
      {4, 1, 9, 9, 3, 1, 1, 2, {2, 2, 2, 2}},   {8, 1, 12, 10, 3, 2, 2, 1, {1, 1, 1, 1}},
      {4, 1, 10, 9, 3, 2, 1, 1, {1, 1, 1, 1}},  {5, 1, 7, 9, 3, 1, 1, 1, {0, 1, 1, 0}},
      {6, 1, 8, 8, 3, 1, 1, 1, {0, 0, 0, 0}},   {4, 1, 2, 5, 3, 1, 1, 1, {1, 1, 1, 1}},
      {4, 1, 11, 12, 9, 1, 1, 1, {4, 4, 4, 4}},
  };
  for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
    fsl_graph *g = fsl_graph_new();
    fsl_builder b = B_INIT(g);
    int64_t m = cases[t].c * cases[t].mult;
    int64_t dx[] = {2, cases[t].c, cases[t].h, cases[t].w}, dw[] = {m, 1, cases[t].k, cases[t].k}, db[] = {m},
            rb[] = {1, m, 1, 1};
    int64_t st[] = {cases[t].sh, cases[t].sw}, dl[] = {cases[t].d, cases[t].d};
    fsl_value *x = input_dt(g, FSL_DT_F32, 4, dx), *w = input_dt(g, FSL_DT_F32, 4, dw);
    fsl_value *bias = input_dt(g, FSL_DT_F32, 1, db);
    fsl_value *c = fsl_b_binary(&b, FSL_OP_add, fsl_b_conv(&b, x, w, st, dl, cases[t].pads, cases[t].c, NULL),
                                fsl_b_reshape(&b, bias, 4, rb));
    fsl_value *hs = fsl_b_binary_scalar(&b, FSL_OP_max, fsl_b_binary_scalar(&b, FSL_OP_min,
                    fsl_b_binary_scalar(&b, FSL_OP_add, fsl_b_binary_scalar(&b, FSL_OP_mul, c, 1.0 / 6.0), 0.5), 1.0), 0.0);
    fsl_value *z = fsl_b_binary(&b, FSL_OP_mul, c, hs);
    assert_int_equal(b.st, FSL_OK);
    fsl_graph_add_output(g, z);
    void *in[] = {random_data(x, -1, 1), random_data(w, -1, 1), random_data(bias, -1, 1)};
    char what[64];
    snprintf(what, sizeof what, "depthwise-%zu", t);
    check_graph(g, in, 1e-4, what);
    fsl_cpu_stats stats = one_kernel_stats(g);
    /* oneDNN may run a channel multiplier's convolution on the plain data
     * (its gemm), with no reorder to save */
    assert_int_equal(stats.n_fallback, 0);
    if (cases[t].mult == 1) {
      assert_int_equal(stats.n_onednn, 0);
      assert_int_equal(stats.n_generated, 1);
    }
    free_inputs(in, 3);
    fsl_graph_free(g);
  }
}

/* y = HardSigmoid(lin + bias) for lin a matmul of x [rows, K] by w [K, N]
 * (conv false) or a pointwise convolution of x [rows, K, 1, 1] by w
 * [N, K, 1, 1] at its single position (conv true), w and bias constants;
 * returns x, the graph's input. */
static fsl_value *gemv_graph(fsl_graph *g, bool conv, int64_t rows, int64_t K, int64_t N) {
  fsl_builder b = B_INIT(g);
  int64_t dxm[] = {rows, K}, dwm[] = {K, N}, dxc[] = {rows, K, 1, 1}, dwc[] = {N, K, 1, 1}, db[] = {N},
          rb[] = {1, N, 1, 1};
  int64_t st[] = {1, 1}, dl[] = {1, 1}, pads[] = {0, 0, 0, 0};
  fsl_value *x = input_dt(g, FSL_DT_F32, conv ? 4 : 2, conv ? dxc : dxm);
  fsl_value *w = random_const(&b, conv ? 4 : 2, conv ? dwc : dwm), *bias = random_const(&b, 1, db);
  fsl_value *lin = conv ? fsl_b_binary(&b, FSL_OP_add, fsl_b_conv(&b, x, w, st, dl, pads, 1, NULL),
                                       fsl_b_reshape(&b, bias, 4, rb))
                        : fsl_b_binary(&b, FSL_OP_add, fsl_b_matmul(&b, x, w), bias);
  fsl_value *y = fsl_b_binary_scalar(&b, FSL_OP_max, fsl_b_binary_scalar(&b, FSL_OP_min,
                 fsl_b_binary_scalar(&b, FSL_OP_add, fsl_b_binary_scalar(&b, FSL_OP_mul, lin, 0.2), 0.5), 1.0), 0.0);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, y);
  return x;
}

/* Teardown: a failed assertion inside test_gemv_generated's FSL_NO_ONEDNN
 * part must not leave oneDNN off for the tests after it. */
static int unset_no_onednn(void **state) {
  (void)state;
  unsetenv("FSL_NO_ONEDNN");
  return 0;
}

/* One-row matmuls and pointwise convolutions at one position (GEMVs: the
 * fully connected layers of squeeze-and-excitation) run as generated code
 * with the epilogue oneDNN would absorb (fsl_cpu_lower_generated): column
 * blocks of a matmul (block widths with a narrower last one, fewer
 * columns than a block) and dot products of a convolution (four output
 * channels at a time and the rest one by one), against the reference
 * under every plan; the one-kernel plan runs no oneDNN primitive.  Near
 * misses keep oneDNN: two rows, and weights over 1 MiB.  With oneDNN
 * kept out (FSL_NO_ONEDNN) the same code runs those as well. */
static void test_gemv_generated(void **state) {
  (void)state;
  static const struct {
    bool conv;
    int64_t rows, K, N;
    int generated; /* 1: the one-kernel plan runs generated code only; 0: oneDNN */
  } cases[] = {
      {false, 1, 37, 144, 1}, {false, 1, 64, 77, 1}, {false, 1, 576, 8, 1}, {false, 1, 5, 3, 1},
      {true, 1, 37, 11, 1},   {true, 1, 96, 24, 1},  {true, 1, 16, 3, 1},   {false, 2, 37, 144, 0},
      {true, 2, 37, 11, 0},   {false, 1, 1024, 300, 0},
  };
  for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
    for (int no_dnn = 0; no_dnn < 2; no_dnn++) {
      if (no_dnn && cases[t].generated) continue;
      if (no_dnn) setenv("FSL_NO_ONEDNN", "1", 1);
      fsl_graph *g = fsl_graph_new();
      fsl_value *x = gemv_graph(g, cases[t].conv, cases[t].rows, cases[t].K, cases[t].N);
      void *in[] = {random_data(x, -1, 1)};
      char what[64];
      snprintf(what, sizeof what, "gemv-%zu%s", t, no_dnn ? "-no-onednn" : "");
      check_graph(g, in, 1e-4, what);
      fsl_cpu_stats stats = one_kernel_stats(g);
      assert_int_equal(stats.n_fallback, 0);
      if (cases[t].generated || no_dnn) {
        assert_int_equal(stats.n_onednn, 0);
        assert_int_equal(stats.n_generated, 1);
      } else if (!getenv("FSL_NO_ONEDNN")) {
        assert_int_equal(stats.n_onednn, 1);
      }
      free_inputs(in, 1);
      fsl_graph_free(g);
      if (no_dnn) unsetenv("FSL_NO_ONEDNN");
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_matmul_bias_relu),
      cmocka_unit_test(test_conv_bias),
      cmocka_unit_test(test_depthwise_rows),
      cmocka_unit_test_teardown(test_gemv_generated, unset_no_onednn),
  };
  return cmocka_run_group_tests(tests, cpu_test_setup, cpu_test_teardown);
}
