/* test_cpu_numerics.c — numerics of the CPU backend's generated code: the
 * prelude's fast exp/tanh/erf against libm, long softmax rows and layer
 * norm over a large offset, NaN and infinity through reductions and
 * softmaxes, and exact quotients (cpu_test_util.h). */
#include "cpu_test_util.h"

#include "backend/cpu/dialect_c.h"

typedef int (*kernel_fn)(const void *const *, void *const *);

/* Compiles src (freed) as a shared object into *so and returns its fsl_k0. */
static kernel_fn load_k0(fsl_sbuf *src, fsl_cpu_so *so) {
  assert_false(src->oom);
  assert_int_equal(fsl_cpu_so_load(src->p, NULL, so), FSL_OK);
  fsl_sbuf_free(src);
  void *p = fsl_cpu_so_kernel(so, 0);
  assert_non_null(p);
  kernel_fn fn;
  memcpy(&fn, &p, sizeof p);
  return fn;
}

/* The prologue's inline expf / tanhf / erff (fsl_codegen_prelude), compiled
 * as generated code is (a vectorized loop), against libm in double: rel.
 * error <= 1e-6 where the result is a normal float, exact special values
 * (+-inf, NaN, signed zero, overflow to inf, underflow to 0), exp's
 * subnormal results flushed to zero, tanh's and erf's exact; fsl_expf_le0
 * equal to fsl_expf bit for bit where its argument is <= 0 or NaN. */
static void test_fast_math(void **state) {
  (void)state;
  fsl_sbuf src = {0};
  fsl_codegen_prelude(&fsl_dialect_c, &src);
  fsl_sbuf_puts(&src, "int fsl_k0(const void *const *in, void *const *out) {\n"
                      "  const float *x = (const float *)in[0]; const int64_t n = *(const int64_t *)in[1];\n"
                      "  float *e = (float *)out[0], *t = (float *)out[1], *f = (float *)out[2], *l = (float *)out[3];\n"
                      "  for (int64_t i = 0; i < n; i++) { e[i] = fsl_expf(x[i]); t[i] = fsl_tanhf(x[i]); f[i] = fsl_erff(x[i]);\n"
                      "    l[i] = fsl_expf_le0(x[i] > 0.0f ? -x[i] : x[i]); }\n"
                      "  return 0; }\n");
  fsl_cpu_so so;
  kernel_fn fn = load_k0(&src, &so);
  const float special[] = {INFINITY, -INFINITY, NAN, -NAN, 0.0f, -0.0f, 1e-40f, -1e-40f, 1e-30f, 88.72f, 88.73f,
                           89.5f, 100.0f, 1e30f, -87.0f, -100.0f, -103.9f, -104.5f, -1e30f, 7.9f, -7.9f, 4.0f, 9.0f};
  int64_t ns = (int64_t)(sizeof special / sizeof special[0]), n = ns + 400000;
  float *x = malloc(sizeof(float) * (size_t)n * 5);
  assert_non_null(x);
  float *e = x + n, *t = e + n, *f = t + n, *l = f + n;
  memcpy(x, special, sizeof special);
  for (int64_t i = ns; i < n; i++) {
    double u = (double)(i - ns) / 400000.0;  /* a dense sweep of [-110, 110] plus tiny values */
    x[i] = (i & 1) ? (float)(-110.0 + 220.0 * u) : (float)((u - 0.5) * 1e-3);
  }
  const void *in[] = {x, &n};
  void *out[] = {e, t, f, l};
  assert_int_equal(fn(in, out), 0);
  /* fsl_expf_le0 (a softmax's exp of x - max x) is fsl_expf bit for bit
   * where its argument is <= 0 or NaN */
  for (int64_t i = 0; i < n; i++)
    if (!(x[i] > 0)) assert_true(isnan(x[i]) ? isnan(l[i]) : memcmp(&l[i], &e[i], sizeof(float)) == 0);
  double worst[3] = {0, 0, 0};
  for (int64_t i = 0; i < n; i++) {
    double xi = x[i], want[3] = {exp(xi), tanh(xi), erf(xi)}, got[3] = {e[i], t[i], f[i]};
    for (int k = 0; k < 3; k++) {
      double w = want[k], g = got[k];
      if (isnan(xi)) {
        assert_true(isnan(g));
        continue;
      }
      if (w > 3.4028234663852886e38) { /* overflows float */
        assert_true(isinf(g) && g > 0);
        continue;
      }
      if (fabs(w) < 1.1754943508222875e-38) { /* subnormal or zero result: exp flushes it to zero */
        bool ok = k == 0 ? g == 0 : fabs(g - w) <= 3e-45;
        if (!ok) fprintf(stderr, "fast math %d: x=%g got %g want %g\n", k, xi, g, w);
        assert_true(ok);
        if (w == 0) assert_true(signbit(g) == signbit(w));
        continue;
      }
      double rel = fabs(g - w) / fabs(w);
      if (rel > 1e-6) fprintf(stderr, "fast math %d: x=%.9g got %.9g want %.9g\n", k, xi, g, w);
      worst[k] = fmax(worst[k], rel);
    }
  }
  if (getenv("FSL_TEST_VERBOSE"))
    fprintf(stderr, "fast math max rel. error: exp %.3g tanh %.3g erf %.3g\n", worst[0], worst[1], worst[2]);
  for (int k = 0; k < 3; k++) assert_true(worst[k] <= 1e-6);
  /* exact special values */
  assert_true(isinf(e[0]) && e[0] > 0 && e[1] == 0 && t[0] == 1 && t[1] == -1 && f[0] == 1 && f[1] == -1);
  assert_true(e[4] == 1 && e[5] == 1 && t[5] == 0 && signbit(t[5]) && f[5] == 0 && signbit(f[5]));
  assert_true(isinf(e[12]) && isinf(e[13]) && e[17] == 0 && e[18] == 0);
  free(x);
  fsl_cpu_so_close(&so);
}

/* rel. L2 distance of two f32 buffers */
static double rel_l2(const float *a, const float *b, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; i++) {
    num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    den += (double)b[i] * b[i];
  }
  return sqrt(num / (den > 0 ? den : 1));
}

/* The prelude's f16/bf16 conversions (the C dialect's storage of half
 * types), with F16C where the machine has it and in software (F16C's macro
 * undefined before the prelude), against the reference's (src/core/dtype.c)
 * bit for bit: every half and bfloat16 pattern to float, and floats to both
 * (specials, ties, half subnormals, overflow, and 2^20 patterns spread over
 * all of float's); NaN stays NaN (F16C keeps a NaN's payload). */
static void test_half_conversions(void **state) {
  (void)state;
  for (int soft = 0; soft < 2; soft++) {
    fsl_sbuf src = {0};
    if (soft) fsl_sbuf_puts(&src, "#undef __F16C__\n");
    fsl_codegen_prelude(&fsl_dialect_c, &src);
    fsl_sbuf_puts(&src, "int fsl_k0(const void *const *in, void *const *out) {\n"
                        "  const uint16_t *h = (const uint16_t *)in[0]; const float *x = (const float *)in[1];\n"
                        "  const int64_t n = *(const int64_t *)in[2];\n"
                        "  float *hf = (float *)out[0], *bf = (float *)out[1];\n"
                        "  uint16_t *fh = (uint16_t *)out[2], *fb = (uint16_t *)out[3];\n"
                        "  for (int64_t i = 0; i < 65536; i++) { hf[i] = fsl_h2f(h[i]); bf[i] = fsl_bf2f(h[i]); }\n"
                        "  for (int64_t i = 0; i < n; i++) { fh[i] = fsl_f2h(x[i]); fb[i] = fsl_f2bf(x[i]); }\n"
                        "  return 0; }\n");
    fsl_cpu_so so;
    kernel_fn fn = load_k0(&src, &so);
    const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 65504.0f, 65519.99f, 65520.0f, -65520.0f, 1e9f,
                             0x1p-14f, 0x1p-24f, 0x1p-25f, 0x1.8p-25f, 0x1p-26f, 1e-40f, -1e-40f, 1.0f + 0x1p-11f,
                             1.0f + 0x1p-11f + 0x1p-23f, 1.0f + 0x3p-11f, 1.0f + 0x1p-8f, 1.0f + 0x3p-8f, 3.0e38f};
    int64_t ns = (int64_t)(sizeof special / sizeof special[0]), n = ns + (1 << 20);
    uint16_t *h = malloc(sizeof *h * 65536), *fh = malloc(sizeof *fh * (size_t)n), *fb = malloc(sizeof *fb * (size_t)n);
    float *x = malloc(sizeof *x * (size_t)n), *hf = malloc(sizeof *hf * 65536), *bf = malloc(sizeof *bf * 65536);
    assert_true(h && fh && fb && x && hf && bf);
    for (int i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    memcpy(x, special, sizeof special);
    for (int64_t i = ns; i < n; i++) {
      uint32_t u = (uint32_t)((uint64_t)(i - ns) * 4093u * 1048573u) ^ (uint32_t)(i << 12); /* spread over all patterns */
      memcpy(&x[i], &u, 4);
    }
    const void *in[] = {h, x, &n};
    void *out[] = {hf, bf, fh, fb};
    assert_int_equal(fn(in, out), 0);
    for (int i = 0; i < 65536; i++) {
      float a = fsl_f16_to_f32((uint16_t)i), b = fsl_bf16_to_f32((uint16_t)i);
      assert_true(isnan(a) ? isnan(hf[i]) : memcmp(&a, &hf[i], 4) == 0);
      assert_true(isnan(b) ? isnan(bf[i]) : memcmp(&b, &bf[i], 4) == 0);
    }
    for (int64_t i = 0; i < n; i++) {
      if (isnan(x[i])) {
        assert_true(isnan(fsl_f16_to_f32(fh[i])) && isnan(fsl_bf16_to_f32(fb[i])));
        continue;
      }
      if (fh[i] != fsl_f32_to_f16(x[i])) fail_msg("%s f2h(%a) = %04x, want %04x", soft ? "software" : "native", (double)x[i], fh[i], fsl_f32_to_f16(x[i]));
      assert_int_equal(fb[i], fsl_f32_to_bf16(x[i]));
    }
    free(h), free(fh), free(fb), free(x), free(hf), free(bf);
    fsl_cpu_so_close(&so);
  }
}

/* Softmax over long rows (8 x 32000, float partial sums in blocks) and
 * layer norm over a large offset (cancellation in the variance): softmax
 * within 1e-5 relative of the reference per element, the normalized
 * values (about N(0, 1)) within 1e-4 absolute, rel. L2 within 1e-5. */
static void test_long_rows(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t dx[] = {8, 32000}, axis = 1;
  fsl_value *x = input_dt(g, FSL_DT_F32, 2, dx);
  fsl_value *y = softmax(&b, x, 1);
  fsl_value *mean = fsl_b_binary_scalar(&b, FSL_OP_div, fsl_b_reduce(&b, FSL_OP_reduce_sum, x, &axis, 1, true), 32000.0);
  fsl_value *d = fsl_b_binary(&b, FSL_OP_sub, x, mean);
  fsl_value *var = fsl_b_binary_scalar(
      &b, FSL_OP_div, fsl_b_reduce(&b, FSL_OP_reduce_sum, fsl_b_binary(&b, FSL_OP_mul, d, d), &axis, 1, true), 32000.0);
  fsl_value *ln = fsl_b_binary(&b, FSL_OP_mul, d, fsl_b_unary(&b, FSL_OP_rsqrt, fsl_b_binary_scalar(&b, FSL_OP_add, var, 1e-5)));
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, y);
  fsl_graph_add_output(g, ln);
  float *xin = random_data(x, -8, 8);
  for (int64_t i = 0; i < 32000; i++) xin[i] += 1000.0f; /* row 0: large offset */
  void *in[] = {xin};
  void *want[2] = {0};
  assert_int_equal(fsl_ref_run(g, (const void *const *)in, want), FSL_OK);
  fsl_plan p;
  assert_int_equal(fsl_plan_build(g, FSL_STRATEGY_GREEDY, NULL, &p), FSL_OK);
  void *exe = NULL;
  assert_int_equal(fsl_backend_cpu.compile(&p, NULL, &exe), FSL_OK);
  void *got[2] = {0};
  assert_int_equal(fsl_backend_cpu.run(exe, (const void *const *)in, got), FSL_OK);
  int64_t n = 8 * 32000;
  for (int k = 0; k < 2; k++) {
    const float *a = got[k], *w = want[k];
    double worst = 0;
    for (int64_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)a[i] - w[i]) / (k ? 1.0 : fabs((double)w[i])));
    double l2 = rel_l2(a, w, n);
    if (getenv("FSL_TEST_VERBOSE")) fprintf(stderr, "long rows %d: max err %.3g, rel L2 %.3g\n", k, worst, l2);
    assert_true(worst <= (k ? 1e-4 : 1e-5));
    assert_true(l2 <= 1e-5);
    free(got[k]);
    free(want[k]);
  }
  fsl_backend_cpu.free_exe(exe);
  fsl_plan_free(&p);
  free_inputs(in, 1);
  fsl_graph_free(g);
}

/* Max/min reductions over vectorized rows propagate a NaN wherever it is
 * in the row; a row of -inf gives the reference's NaN softmax. */
static void test_reduce_nan(void **state) {
  (void)state;
  /* rows of 1000 and 130: the row max/min in 4 and in 2 streams (reduce.c) */
  const int64_t row_lengths[] = {1000, 130};
  for (int t = 0; t < 2; t++) {
    const int64_t L = row_lengths[t];
    fsl_graph *g = fsl_graph_new();
    fsl_builder b = B_INIT(g);
    int64_t dx[] = {7, L}, axis = 1;
    fsl_value *x = input_dt(g, FSL_DT_F32, 2, dx);
    fsl_value *mx = fsl_b_reduce(&b, FSL_OP_reduce_max, x, &axis, 1, false);
    fsl_value *mn = fsl_b_reduce(&b, FSL_OP_reduce_min, x, &axis, 1, false);
    fsl_value *sm = softmax(&b, x, 1);
    assert_int_equal(b.st, FSL_OK);
    fsl_graph_add_output(g, mx);
    fsl_graph_add_output(g, mn);
    fsl_graph_add_output(g, sm);
    float *xin = random_data(x, -3, 3);
    xin[0 * L + 0] = NAN;       /* first lane */
    xin[1 * L + L / 2 + 17] = NAN; /* middle */
    xin[2 * L + L - 1] = NAN;   /* tail */
    for (int i = 0; i < L; i++) xin[3 * L + i] = -INFINITY;
    xin[4 * L + 3] = INFINITY;
    xin[5 * L + L / 2] = 100;   /* the first element of the second half's stream */
    xin[6 * L + L - 1] = -100;  /* the last element of the last stream */
    void *in[] = {xin};
    check_graph(g, in, 1e-5, L == 1000 ? "reduce-nan" : "reduce-nan-130");
    free_inputs(in, 1);
    fsl_graph_free(g);
  }
}

/* A softmax's max runs without its NaN flag (nanflag.c) where only the
 * quotients and the sum leave the kernel; with exp(x - max) an output too
 * it keeps the flag.  Either way NaN, a row of -inf and +inf give the
 * reference's answers, in rows (softmax over the last axis of [6, 1000])
 * and in columns (over axis 1 of [3, 16, 200]), under every plan. */
static void test_softmax_nan_outputs(void **state) {
  (void)state;
  for (int t = 0; t < 6; t++) {
    bool cols = t >= 3;
    int extra = t % 3; /* 0: y only, 1: y and the sum, 2: y and exp(x - max) */
    fsl_graph *g = fsl_graph_new();
    fsl_builder b = B_INIT(g);
    int64_t d2[] = {6, 1000}, d3[] = {3, 16, 200}, axis = 1;
    fsl_value *x = cols ? input_dt(g, FSL_DT_F32, 3, d3) : input_dt(g, FSL_DT_F32, 2, d2);
    fsl_value *m = fsl_b_reduce(&b, FSL_OP_reduce_max, x, &axis, 1, true);
    fsl_value *e = fsl_b_unary(&b, FSL_OP_exp, fsl_b_binary(&b, FSL_OP_sub, x, m));
    fsl_value *sum = fsl_b_reduce(&b, FSL_OP_reduce_sum, e, &axis, 1, true);
    fsl_value *y = fsl_b_binary(&b, FSL_OP_div, e, sum);
    assert_int_equal(b.st, FSL_OK);
    fsl_graph_add_output(g, y);
    if (extra == 1) fsl_graph_add_output(g, sum);
    if (extra == 2) fsl_graph_add_output(g, e);
    float *xin = random_data(x, -3, 3);
    int64_t L = cols ? 16 * 200 : 1000, st = cols ? 200 : 1; /* a row's elements and their stride */
    xin[0 * L + 0] = NAN;
    xin[1 * L + 7 * st] = NAN;
    xin[1 * L + 9 * st] = NAN;
    for (int64_t i = 0; i < (cols ? 16 : L); i++) xin[2 * L + i * st] = -INFINITY;
    if (!cols) {
      xin[3 * L + L - 1] = NAN;
      xin[4 * L + 3] = INFINITY;
    }
    void *in[] = {xin};
    char what[48];
    snprintf(what, sizeof what, "softmax-nan %s %d", cols ? "columns" : "rows", extra);
    check_graph(g, in, 1e-5, what);
    free_inputs(in, 1);
    fsl_graph_free(g);
  }
}

/* Softmax over an outer axis (columns.c: a sweep per reduction, the
 * quotients column by column), with the max over that axis as a second,
 * kept-space output: NaN, -inf and +inf in single columns give the
 * reference's answers, in columns of 200 (a row flag, then a second sweep
 * for the per-column flags) and of 40 (per-column flags at once). */
static void test_column_softmax_nan(void **state) {
  (void)state;
  int64_t shapes[][3] = {{3, 16, 200}, {4, 10, 40}};
  for (int t = 0; t < 2; t++) {
    fsl_graph *g = fsl_graph_new();
    fsl_builder b = B_INIT(g);
    int64_t axis = 1, C = shapes[t][1], W = shapes[t][2];
    fsl_value *x = input_dt(g, FSL_DT_F32, 3, shapes[t]);
    fsl_value *sm = softmax(&b, x, 1);
    fsl_value *mx = fsl_b_reduce(&b, FSL_OP_reduce_max, x, &axis, 1, false);
    assert_int_equal(b.st, FSL_OK);
    fsl_graph_add_output(g, sm);
    fsl_graph_add_output(g, mx);
    float *xin = random_data(x, -3, 3);
    xin[0 * C * W + 3 * W + 7] = NAN;                        /* column 7 of row 0 */
    xin[1 * C * W + (C - 1) * W + W - 1] = NAN;              /* the last column's last element */
    for (int64_t c = 0; c < C; c++) xin[2 * C * W + c * W + 5] = -INFINITY; /* a column of -inf */
    xin[2 * C * W + 4 * W + 9] = INFINITY;
    void *in[] = {xin};
    check_graph(g, in, 1e-5, t ? "column-softmax-nan-40" : "column-softmax-nan-200");
    free_inputs(in, 1);
    fsl_graph_free(g);
  }
}

/* Instance norm (reduced axes 2,3 of NCHW: one flat index, no div/mod)
 * with a per-channel scale, and a quantizing round(x / max(y)) that must
 * see the exact quotient, not a reciprocal product: 45.5 / 7 = 6.5 rounds
 * to 6, while 45.5 * (1/7) = 6.5000005 in float rounds to 7. */
static void test_norm_quantize(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t dx[] = {2, 3, 8, 16}, dsc[] = {1, 3, 1, 1}, ax[] = {2, 3}, dq[] = {6, 16}, last = 1;
  fsl_value *x = input_dt(g, FSL_DT_F32, 4, dx), *sc = input_dt(g, FSL_DT_F32, 4, dsc);
  fsl_value *xq = input_dt(g, FSL_DT_F32, 2, dq), *yq = input_dt(g, FSL_DT_F32, 2, dq);
  fsl_value *mean = fsl_b_binary_scalar(&b, FSL_OP_div, fsl_b_reduce(&b, FSL_OP_reduce_sum, x, ax, 2, true), 128.0);
  fsl_value *d = fsl_b_binary(&b, FSL_OP_sub, x, mean);
  fsl_value *var = fsl_b_binary_scalar(&b, FSL_OP_div,
                                       fsl_b_reduce(&b, FSL_OP_reduce_sum, fsl_b_binary(&b, FSL_OP_mul, d, d), ax, 2, true),
                                       128.0);
  fsl_value *y = fsl_b_binary(&b, FSL_OP_mul,
                              fsl_b_binary(&b, FSL_OP_mul, d, fsl_b_unary(&b, FSL_OP_rsqrt, fsl_b_binary_scalar(&b, FSL_OP_add, var, 1e-5))),
                              sc);
  fsl_value *m = fsl_b_reduce(&b, FSL_OP_reduce_max, yq, &last, 1, true);
  fsl_value *q = fsl_b_unary(&b, FSL_OP_round, fsl_b_binary(&b, FSL_OP_div, xq, m));
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, y);
  fsl_graph_add_output(g, q);
  float *xqin = random_data(xq, -50, 50), *yqin = random_data(yq, 0, 6.9);
  for (int r = 0; r < 6; r++) {
    yqin[r * 16 + 5] = 7.0f;
    xqin[r * 16 + 9] = 45.5f;
    xqin[r * 16 + 12] = -45.5f;
  }
  void *in[] = {random_data(x, -3, 3), random_data(sc, 0.5, 1.5), xqin, yqin};
  check_graph(g, in, 1e-5, "norm-quantize");
  free_inputs(in, 4);
  fsl_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fast_math),
      cmocka_unit_test(test_half_conversions),
      cmocka_unit_test(test_long_rows),
      cmocka_unit_test(test_reduce_nan),
      cmocka_unit_test(test_column_softmax_nan),
      cmocka_unit_test(test_softmax_nan_outputs),
      cmocka_unit_test(test_norm_quantize),
  };
  return cmocka_run_group_tests(tests, cpu_test_setup, cpu_test_teardown);
}
