/*
 * test_api_plan.c — the public API over a compiled plan's kernels
 * (src/api_plan.c): fsl_model_num_kernels, fsl_model_kernel_info,
 * fsl_model_kernel_origin, fsl_model_time_kernels.
 *
 * The model is Debian's libonnx-testdata Gemm node test (skipped if absent):
 * Y = A B + C, one ONNX node whose primitives (a matmul and a bias add)
 * every strategy puts in one linear kernel or two.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "fissile.h"

#define GEMM "/usr/share/libonnx-testdata/data/node/test_gemm_default_vector_bias/model.onnx"

static fsl_model *load_gemm(void) {
  if (access(GEMM, R_OK) != 0) return NULL;
  fsl_model *m = NULL;
  assert_int_equal(fsl_model_load(GEMM, &m), FSL_OK);
  return m;
}

static void no_plan_is_an_error(void **state) {
  (void)state;
  fsl_model *m = load_gemm();
  if (!m) skip();
  fsl_kernel_info ki;
  double secs[1];
  const char *name, *op;
  assert_int_equal(fsl_model_num_kernels(NULL), 0);
  assert_int_equal(fsl_model_num_kernels(m), 0);
  assert_int_equal(fsl_model_kernel_info(m, 0, &ki), FSL_ERR_ARG);
  assert_non_null(strstr(fsl_last_error(), "no plan"));
  assert_int_equal(fsl_model_kernel_origin(m, 0, 0, &name, &op), FSL_ERR_ARG);
  assert_int_equal(fsl_model_time_kernels(m, secs, 1), FSL_ERR_ARG);
  /* compiled without a strategy: still no plan */
  assert_int_equal(fsl_model_compile(m), FSL_OK);
  assert_int_equal(fsl_model_num_kernels(m), 0);
  assert_int_equal(fsl_model_kernel_info(m, 0, &ki), FSL_ERR_ARG);
  assert_int_equal(fsl_model_kernel_info(NULL, 0, &ki), FSL_ERR_ARG);
  fsl_model_free(m);
}

/* Every strategy: the kernels agree with fsl_plan_info and name the Gemm. */
static void kernels_agree_with_the_plan(void **state) {
  (void)state;
  fsl_model *m = load_gemm();
  if (!m) skip();
  for (int s = 0; s < FSL_STRATEGY_COUNT; s++) {
    assert_int_equal(fsl_model_set_strategy(m, (fsl_strategy)s), FSL_OK);
    assert_int_equal(fsl_model_compile(m), FSL_OK);
    fsl_plan_info pi;
    assert_int_equal(fsl_model_plan_info(m, &pi), FSL_OK);
    int n = fsl_model_num_kernels(m);
    assert_int_equal(n, pi.n_kernels);
    int by_kind[FSL_PLAN_KINDS] = {0};
    double sum = 0;
    int gemm_nodes = 0;
    for (int k = 0; k < n; k++) {
      fsl_kernel_info ki;
      assert_int_equal(fsl_model_kernel_info(m, k, &ki), FSL_OK);
      assert_int_equal(ki.index, k);
      assert_true(ki.kind >= 0 && ki.kind < FSL_PLAN_KINDS);
      by_kind[ki.kind]++;
      static const char *const names[] = {"loop", "reduce", "linear", "opaque"};
      assert_string_equal(ki.kind_name, names[ki.kind]);
      assert_true(ki.n_primitives >= 1);
      assert_true(ki.cost_s > 0 && ki.roofline_s > 0);
      /* not profiled: the plan's cost is the roofline */
      assert_false(ki.cost_measured);
      assert_true(ki.cost_s == ki.roofline_s);
      assert_true(ki.bytes > 0);
      if (ki.kind == 2) assert_true(ki.flops >= 2.0 * 3 * 5 * 4); /* A 3x5, B 5x4 */
      sum += ki.cost_s;
      assert_int_equal(ki.n_onnx_nodes, 1);
      const char *name = NULL, *op = NULL;
      assert_int_equal(fsl_model_kernel_origin(m, k, 0, &name, &op), FSL_OK);
      assert_string_equal(op, "Gemm");
      assert_non_null(name);
      gemm_nodes++;
      assert_int_equal(fsl_model_kernel_origin(m, k, 1, &name, &op), FSL_ERR_ARG);
      assert_int_equal(fsl_model_kernel_origin(m, k, -1, &name, &op), FSL_ERR_ARG);
      assert_int_equal(fsl_model_kernel_origin(m, k, 0, NULL, &op), FSL_ERR_ARG);
    }
    assert_int_equal(gemm_nodes, n);
    for (int k = 0; k < FSL_PLAN_KINDS; k++) assert_int_equal(by_kind[k], pi.n_by_kind[k]);
    assert_true(fabs(sum - pi.predicted_s) <= 1e-9 * pi.predicted_s + 1e-15);
    fsl_kernel_info ki;
    assert_int_equal(fsl_model_kernel_info(m, n, &ki), FSL_ERR_ARG);
    assert_non_null(strstr(fsl_last_error(), "out of range"));
    assert_int_equal(fsl_model_kernel_info(m, -1, &ki), FSL_ERR_ARG);
    assert_int_equal(fsl_model_kernel_info(m, 0, NULL), FSL_ERR_ARG);
  }
  fsl_model_free(m);
}

static void time_kernels(void **state) {
  (void)state;
#ifndef FSL_BACKEND_CPU
  skip();
#endif
  fsl_model *m = load_gemm();
  if (!m) skip();
  assert_int_equal(fsl_model_set_strategy(m, FSL_STRATEGY_UNFUSED), FSL_OK);
  assert_int_equal(fsl_model_set_backend(m, "cpu"), FSL_OK);
  assert_int_equal(fsl_model_compile(m), FSL_OK);
  int n = fsl_model_num_kernels(m);
  assert_true(n >= 1 && n <= 8);
  double secs[8];
  assert_int_equal(fsl_model_time_kernels(m, secs, n + 1), FSL_ERR_ARG);
  assert_int_equal(fsl_model_time_kernels(m, NULL, n), FSL_ERR_ARG);
  assert_int_equal(fsl_model_time_kernels(m, secs, n), FSL_OK);
  for (int k = 0; k < n; k++) {
    /* a matmul and an add: the CPU backend runs both natively */
    assert_true(isfinite(secs[k]) && secs[k] > 0 && secs[k] < 1.0);
  }
  fsl_model_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(no_plan_is_an_error),
      cmocka_unit_test(kernels_agree_with_the_plan),
      cmocka_unit_test(time_kernels),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
