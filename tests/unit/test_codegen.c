/*
 * test_codegen.c — the code generator (src/codegen) on its own: small
 * graphs (a broadcast add, a softmax row, a strided slice, concats,
 * pooling windows, transposes, a column sum, a gather) lowered as one kernel each and rendered in the C dialect, the
 * source compiled here with the system compiler (`cc`, or $FSL_CC) into a
 * shared object and called directly — none of the CPU backend's runtime
 * (lowering, kernel cache, buffers) is involved — and every output checked
 * against the reference interpreter (src/eval) on random inputs.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <math.h>
#include <cmocka.h>
#include <dlfcn.h>
#include <unistd.h>

#include "backend/cpu/dialect_c.h"
#include "eval/eval.h"
#include "fission/builder.h"
#include "test_graph.h"

#define B_INIT(g) {.g = (g), .st = FSL_OK, .fold = false}

/* Compiles `src` with the system compiler into a shared object in a fresh
 * temporary folder and returns its fsl_k0. */
static void *compile_k0(const char *src, void **handle) {
  char dir[] = "/tmp/fsl_test_codegen_XXXXXX";
  assert_non_null(mkdtemp(dir));
  char c[128], so[128], cmd[512];
  snprintf(c, sizeof c, "%s/k.c", dir);
  snprintf(so, sizeof so, "%s/k.so", dir);
  FILE *f = fopen(c, "w");
  assert_non_null(f);
  fputs(src, f);
  fclose(f);
  const char *cc = getenv("FSL_CC") && *getenv("FSL_CC") ? getenv("FSL_CC") : "cc";
  /* the vector paths of the prelude's helpers too, where the CPU has them */
  const char *isa = "";
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) isa = " -mavx2 -mfma";
#endif
  snprintf(cmd, sizeof cmd, "%s -O2%s -fopenmp -fPIC -shared -o %s %s -lm", cc, isa, so, c);
  int rc = system(cmd);
  if (rc != 0) fprintf(stderr, "compile failed (%d): %s\n%s\n", rc, cmd, src);
  assert_int_equal(rc, 0);
  *handle = dlopen(so, RTLD_NOW | RTLD_LOCAL);
  assert_non_null(*handle);
  void *fn = dlsym(*handle, "fsl_k0");
  assert_non_null(fn);
  unlink(c);
  unlink(so);
  rmdir(dir);
  return fn;
}

/*
 * One kernel made of every node of g, its inputs the graph inputs and its
 * outputs the graph outputs: generated, compiled, run on random inputs and
 * compared with the reference interpreter.  `must` is a fragment the
 * generated source must contain (what the lowering is expected to do).
 */
/* The C source (prelude + fsl_k0) of one kernel made of every node of g,
 * its inputs the graph inputs, then the constants consts[n_consts] (as the
 * CPU backend passes a kernel the constants it reads). */
static void kernel_source(fsl_graph *g, fsl_value *const *consts, int n_consts, fsl_sbuf *src, const char *what) {
  assert_int_equal(fsl_graph_verify(g), FSL_OK);
  fsl_value *ins[8];
  assert_true(g->n_inputs + n_consts <= 8);
  for (int i = 0; i < g->n_inputs; i++) ins[i] = g->inputs[i];
  for (int i = 0; i < n_consts; i++) ins[g->n_inputs + i] = consts[i];
  fsl_cg_spec spec = {.g = g, .id = 0, .n_nodes = g->n_nodes, .nodes = g->nodes, .n_in = g->n_inputs + n_consts,
                      .in = ins, .n_out = g->n_outputs, .out = g->outputs};
  *src = (fsl_sbuf){0};
  fsl_codegen_prelude(&fsl_dialect_c, src);
  fsl_status st = fsl_codegen_kernel(&fsl_dialect_c, &spec, src, NULL);
  if (st != FSL_OK) fprintf(stderr, "%s: %s\n", what, fsl_last_error());
  assert_int_equal(st, FSL_OK);
  assert_false(src->oom);
}

static void check_kernel_consts(fsl_graph *g, fsl_value *const *consts, int n_consts, double lo, double hi,
                                const char *must, const char *what) {
  fsl_sbuf src;
  kernel_source(g, consts, n_consts, &src, what);
  if (must && !strstr(src.p, must)) fail_msg("%s: the generated source lacks '%s':\n%s", what, must, src.p);
  void *h = NULL;
  void *sym = compile_k0(src.p, &h);
  int (*k0)(const void *const *, void *const *);
  memcpy(&k0, &sym, sizeof k0);

  void *in[8] = {0}, *got[8] = {0}, *want[8] = {0};
  for (int i = 0; i < g->n_inputs; i++) in[i] = random_data(g->inputs[i], lo, hi);
  void *kin[8] = {0};
  for (int i = 0; i < g->n_inputs; i++) kin[i] = in[i];
  for (int i = 0; i < n_consts; i++) kin[g->n_inputs + i] = consts[i]->data;
  for (int i = 0; i < g->n_outputs; i++) {
    got[i] = malloc((size_t)fsl_value_nbytes(g->outputs[i]) + 1);
    assert_non_null(got[i]);
  }
  assert_int_equal(k0((const void *const *)kin, got), 0);
  assert_int_equal(fsl_ref_run(g, (const void *const *)in, want), FSL_OK);
  for (int i = 0; i < g->n_outputs; i++) {
    const fsl_value *v = g->outputs[i];
    int bad = 0;
    for (int64_t j = 0; j < fsl_value_numel(v); j++) {
      double a = fsl_load_f64(v->dtype, got[i], j), b = fsl_load_f64(v->dtype, want[i], j);
      bool ok = fsl_dtype_is_float(v->dtype) ? fabs(a - b) <= 1e-5 * fmax(1.0, fabs(b)) : a == b;
      if (!ok && bad++ < 5) fprintf(stderr, "%s: output %d [%lld]: got %.9g want %.9g\n", what, i, (long long)j, a, b);
    }
    assert_int_equal(bad, 0);
  }
  for (int i = 0; i < 8; i++) {
    free(in[i]);
    free(got[i]);
    free(want[i]);
  }
  dlclose(h);
  fsl_sbuf_free(&src);
}

static void check_kernel(fsl_graph *g, double lo, double hi, const char *must, const char *what) {
  check_kernel_consts(g, NULL, 0, lo, hi, must, what);
}

/* [4, 1, 33] + [5, 1] -> [4, 5, 33]: broadcast views become index
 * expressions (the [5, 1] operand is one load per row, hoisted). */
static void test_broadcast_add(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t da[] = {4, 1, 33}, db[] = {5, 1};
  fsl_value *y = fsl_b_binary(&b, FSL_OP_add, input_dt(g, FSL_DT_F32, 3, da), input_dt(g, FSL_DT_F32, 2, db));
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, y);
  check_kernel(g, -2, 2, "for (int64_t c2 = 0; c2 < 33; c2++) {", "broadcast add");
  fsl_graph_free(g);
}

/* Softmax's primitives over axis of x (ONNX Softmax's fission): max,
 * exp(x - max), their sum, the quotient. */
static fsl_value *softmax(fsl_builder *b, fsl_value *x, int64_t axis) {
  fsl_value *m = fsl_b_reduce(b, FSL_OP_reduce_max, x, &axis, 1, true);
  fsl_value *e = fsl_b_unary(b, FSL_OP_exp, fsl_b_binary(b, FSL_OP_sub, x, m));
  return fsl_b_binary(b, FSL_OP_div, e, fsl_b_reduce(b, FSL_OP_reduce_sum, e, &axis, 1, true));
}

/* Occurrences of `needle` in the kernel body (after the prelude, which
 * defines fsl_expf_le0 and the like). */
static int body_count(fsl_graph *g, const char *needle, const char *what) {
  fsl_sbuf src;
  kernel_source(g, NULL, 0, &src, what);
  const char *p = strstr(src.p, "fsl_k0(");
  assert_non_null(p);
  int n = 0;
  for (p = strstr(p, needle); p; p = strstr(p + 1, needle)) n++;
  fsl_sbuf_free(&src);
  return n;
}

/* exp of x - max(x) over a row (a softmax's) is <= 0 or NaN, so its exp
 * drops the overflow select (fsl_expf_le0, expr.c below_its_max); the near
 * misses keep fsl_expf: the max of another tensor, the operands the other
 * way round (>= 0: exp overflows there) and a min.  Each kernel also runs
 * against the reference. */
static void test_exp_below_max(void **state) {
  (void)state;
  int64_t d[] = {6, 50}, axis = 1;
  for (int k = 0; k < 4; k++) {
    fsl_graph *g = fsl_graph_new();
    fsl_builder b = B_INIT(g);
    fsl_value *x = input_dt(g, FSL_DT_F32, 2, d), *y = k == 1 ? input_dt(g, FSL_DT_F32, 2, d) : x;
    fsl_value *m = fsl_b_reduce(&b, k == 3 ? FSL_OP_reduce_min : FSL_OP_reduce_max, y, &axis, 1, true);
    fsl_value *e = fsl_b_unary(&b, FSL_OP_exp, k == 2 ? fsl_b_binary(&b, FSL_OP_sub, m, x)
                                                      : fsl_b_binary(&b, FSL_OP_sub, x, m));
    assert_int_equal(b.st, FSL_OK);
    fsl_graph_add_output(g, e);
    const char *what[] = {"exp(x - max x)", "exp(x - max y)", "exp(max x - x)", "exp(x - min x)"};
    assert_int_equal(body_count(g, "fsl_expf_le0(", what[k]) > 0, k == 0);
    check_kernel(g, -40, 40, NULL, what[k]);
    fsl_graph_free(g);
  }
}

/* Whether the kernel body declares the NaN flag of its first reduction
 * (n0: a row's int, a column row's array). */
static bool body_has_nan_flag(fsl_graph *g, const char *what) {
  return body_count(g, "int n0 = 0;", what) + body_count(g, "int n0[", what) > 0;
}

/* A softmax's max needs no NaN flag (nanflag.c): a NaN of the row reaches
 * every quotient through the sum.  Rows ([6, 50] over axis 1) and columns
 * ([3, 16, 200] over axis 1); the sum may be an output too.  Near misses
 * keep the flag: exp(x - max) or x - max an output as well (its other
 * elements would not be NaN), a log-softmax (x - max read twice), the
 * quotient by another row's sum, the max itself an output. */
static void test_softmax_nan_flag(void **state) {
  (void)state;
  const char *what[] = {"softmax rows", "softmax columns", "softmax + its sum", "softmax + exp(x - max)",
                        "softmax + x - max", "log-softmax", "e / sum of another tensor", "softmax + max"};
  for (int k = 0; k < 8; k++) {
    fsl_graph *g = fsl_graph_new();
    fsl_builder b = B_INIT(g);
    int64_t d2[] = {6, 50}, d3[] = {3, 16, 200}, axis = 1;
    fsl_value *x = k == 1 ? input_dt(g, FSL_DT_F32, 3, d3) : input_dt(g, FSL_DT_F32, 2, d2);
    fsl_value *m = fsl_b_reduce(&b, FSL_OP_reduce_max, x, &axis, 1, true);
    fsl_value *c = fsl_b_binary(&b, FSL_OP_sub, x, m);
    fsl_value *e = fsl_b_unary(&b, FSL_OP_exp, c);
    fsl_value *den = k == 6 ? fsl_b_unary(&b, FSL_OP_exp, input_dt(g, FSL_DT_F32, 2, d2)) : e;
    fsl_value *s = fsl_b_reduce(&b, FSL_OP_reduce_sum, den, &axis, 1, true);
    fsl_value *y = k == 5 ? fsl_b_binary(&b, FSL_OP_sub, c, fsl_b_unary(&b, FSL_OP_log, s))
                          : fsl_b_binary(&b, FSL_OP_div, e, s);
    assert_int_equal(b.st, FSL_OK);
    fsl_graph_add_output(g, y);
    if (k == 2) fsl_graph_add_output(g, s);
    if (k == 3) fsl_graph_add_output(g, e);
    if (k == 4) fsl_graph_add_output(g, c);
    if (k == 7) fsl_graph_add_output(g, m);
    if (body_has_nan_flag(g, what[k]) != (k >= 3)) fail_msg("%s: NaN flag %s", what[k], k >= 3 ? "dropped" : "kept");
    check_kernel(g, -4, 4, NULL, what[k]);
    fsl_graph_free(g);
  }
}

/* A row's exp(x - max) and its sum as the kernel's outputs (the quotient
 * in another kernel, as in a plan of SegFormer's attention): the sum loop stores
 * each exp into its output, and no later loop copies it onto itself. */
static void test_cached_output_not_copied(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t d[] = {6, 49}, axis = 1;
  fsl_value *x = input_dt(g, FSL_DT_F32, 2, d);
  fsl_value *m = fsl_b_reduce(&b, FSL_OP_reduce_max, x, &axis, 1, true);
  fsl_value *e = fsl_b_unary(&b, FSL_OP_exp, fsl_b_binary(&b, FSL_OP_sub, x, m));
  fsl_value *s = fsl_b_reduce(&b, FSL_OP_reduce_sum, e, &axis, 1, true);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, e);
  fsl_graph_add_output(g, s);
  assert_int_equal(body_count(g, "out0[", "exp and sum"), 1);
  check_kernel(g, -4, 4, NULL, "exp and sum");
  fsl_graph_free(g);
}

/* softmax over the last axis of [6, 50]: one fused REDUCE row per output
 * row (max, then the sum of exp, then the quotient). */
static void test_softmax_row(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t d[] = {6, 50};
  fsl_value *y = softmax(&b, input_dt(g, FSL_DT_F32, 2, d), 1);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, y);
  check_kernel(g, -4, 4, "for (int64_t o_ = 0; o_ < 6; o_++) {", "softmax row");
  fsl_graph_free(g);
}

/* x[7:0:-2, 1::3] of [9, 11] then * 2: a negative and a positive step. */
static void test_strided_slice(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t d[] = {9, 11}, st[] = {7, 1}, sp[] = {-2, 3}, sz[] = {4, 4};
  fsl_value *s = fsl_b_slice(&b, input_dt(g, FSL_DT_F32, 2, d), st, sp, sz);
  fsl_value *y = fsl_b_binary_scalar(&b, FSL_OP_mul, s, 2.0);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, y);
  check_kernel(g, -1, 1, "7 + -2*", "strided slice");
  fsl_graph_free(g);
}

/* concat of [2, 3], [2, 1] and [2, 4] (int32) on axis 1, and a second
 * output: both written by the same loop nest. */
static void test_concat(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t d0[] = {2, 3}, d1[] = {2, 1}, d2[] = {2, 4};
  fsl_value *parts[] = {input_dt(g, FSL_DT_I32, 2, d0), input_dt(g, FSL_DT_I32, 2, d1), input_dt(g, FSL_DT_I32, 2, d2)};
  fsl_value *c = fsl_b_concat(&b, parts, 3, 1);
  fsl_value *y = fsl_b_binary(&b, FSL_OP_sub, c, fsl_b_unary(&b, FSL_OP_neg, c));
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, c);
  fsl_graph_add_output(g, y);
  check_kernel(g, -50, 50, "if (c1 < 3) {", "concat");
  fsl_graph_free(g);
}

/* concat of [2, 3, 5], [2, 1, 5] and [2, 4, 5] (f32) on axis 1 as the
 * kernel's only output: one loop nest per input (the middle one a single
 * row), each reading its input with no branch. */
static void test_concat_rows(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t d0[] = {2, 3, 5}, d1[] = {2, 1, 5}, d2[] = {2, 4, 5};
  fsl_value *parts[] = {fsl_b_unary(&b, FSL_OP_neg, input_dt(g, FSL_DT_F32, 3, d0)), input_dt(g, FSL_DT_F32, 3, d1),
                        input_dt(g, FSL_DT_F32, 3, d2)};
  fsl_value *c = fsl_b_concat(&b, parts, 3, 1);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, c);
  check_kernel(g, -5, 5, "const int64_t g1 = 0 + 3;", "concat rows");
  fsl_graph_free(g);
}

/* The same as the kernel's output through a reshape that keeps the concat
 * axis ([2, 8, 5] -> [2, 8, 1, 5], YOLOX's head output [1, 85, 40, 40] ->
 * [1, 85, 1600]): still one nest per input, no branch on the row, and not
 * for a reshape that merges the concat axis into its neighbour. */
static void test_concat_rows_reshaped(void **state) {
  (void)state;
  for (int merge = 0; merge < 2; merge++) {
    fsl_graph *g = fsl_graph_new();
    fsl_builder b = B_INIT(g);
    int64_t d0[] = {2, 3, 5}, d1[] = {2, 1, 5}, d2[] = {2, 4, 5}, keep[] = {2, 8, 1, 5}, merged[] = {2, 40};
    fsl_value *parts[] = {fsl_b_unary(&b, FSL_OP_sigmoid, input_dt(g, FSL_DT_F32, 3, d0)),
                          input_dt(g, FSL_DT_F32, 3, d1), input_dt(g, FSL_DT_F32, 3, d2)};
    fsl_value *c = fsl_b_concat(&b, parts, 3, 1);
    fsl_value *y = merge ? fsl_b_reshape(&b, c, 2, merged) : fsl_b_reshape(&b, c, 4, keep);
    assert_int_equal(b.st, FSL_OK);
    fsl_graph_add_output(g, y);
    check_kernel(g, -5, 5, merge ? "if (" : "const int64_t g1 = 0 + 3;", "concat rows reshaped");
    fsl_graph_free(g);
  }
}

/* x [N, C, HW] row-major (NCHW) into xn stored NHWC. */
static void to_nhwc(const float *x, float *xn, int64_t N, int64_t C, int64_t HW) {
  for (int64_t n = 0; n < N; n++)
    for (int64_t c = 0; c < C; c++)
      for (int64_t i = 0; i < HW; i++) xn[(n * HW + i) * C + c] = x[(n * C + c) * HW + i];
}

/* Inputs and outputs stored in another axis order (fsl_cg_layout;
 * oneDNN's nhwc): x [2, 5, 3, 4] held NHWC and a per-channel scale, into
 * y = relu(x * s) (row-major, then NHWC too) and a channel sum; the kernel
 * reads x, and writes y, where they lie.  A kernel with a reduction takes
 * no output layout. */
static void test_input_layout(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t dx[] = {2, 5, 3, 4}, ds[] = {1, 5, 1, 1}, axes[] = {2, 3};
  fsl_value *x = input_dt(g, FSL_DT_F32, 4, dx), *sc = input_dt(g, FSL_DT_F32, 4, ds);
  fsl_value *y = fsl_b_binary_scalar(&b, FSL_OP_max, fsl_b_binary(&b, FSL_OP_mul, x, sc), 0.0);
  fsl_value *r = fsl_b_reduce(&b, FSL_OP_reduce_sum, x, axes, 2, true);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, y);
  fsl_graph_add_output(g, r);
  assert_int_equal(fsl_graph_verify(g), FSL_OK);
  fsl_cg_layout lay[2] = {{4, {0, 2, 3, 1}}, {0, {0}}};
  for (int out = 0; out < 3; out++) {
    fsl_value *o = g->outputs[out % 2];
    bool nhwc_out = out == 2;
    fsl_cg_spec spec = {.g = g, .id = 0, .n_nodes = g->n_nodes, .nodes = g->nodes, .n_in = 2, .in = g->inputs,
                        .in_layout = lay, .n_out = 1, .out = &o, .out_layout = nhwc_out ? lay : NULL};
    fsl_sbuf src = {0};
    fsl_codegen_prelude(&fsl_dialect_c, &src);
    if (nhwc_out) { /* only the elementwise nodes: y */
      spec.n_nodes = 0;
      fsl_node *ew[8];
      for (int i = 0; i < g->n_nodes && spec.n_nodes < 8; i++)
        if (fsl_op_get(g->nodes[i]->op)->kind != FSL_KIND_REDUCE) ew[spec.n_nodes++] = g->nodes[i];
      spec.nodes = ew;
      fsl_value *r_out = g->outputs[1];
      fsl_cg_spec bad = spec;
      bad.nodes = g->nodes, bad.n_nodes = g->n_nodes, bad.out = &r_out;
      fsl_sbuf junk = {0};
      assert_int_equal(fsl_codegen_kernel(&fsl_dialect_c, &bad, &junk, NULL), FSL_ERR_UNSUPPORTED);
      fsl_error_clear();
      fsl_sbuf_free(&junk);
      assert_int_equal(fsl_codegen_kernel(&fsl_dialect_c, &spec, &src, NULL), FSL_OK);
    } else {
      assert_int_equal(fsl_codegen_kernel(&fsl_dialect_c, &spec, &src, NULL), FSL_OK);
    }
    void *h = NULL;
    void *sym = compile_k0(src.p, &h);
    int (*k0)(const void *const *, void *const *);
    memcpy(&k0, &sym, sizeof k0);
    float *xr = random_data(x, -1, 1), *s = random_data(sc, -1, 1), xn[120];
    to_nhwc(xr, xn, 2, 5, 12);
    void *in[2] = {xn, s}, *in_rm[2] = {xr, s}, *want[2] = {0};
    float got[120];
    void *outp[1] = {got};
    assert_int_equal(k0((const void *const *)in, outp), 0);
    assert_int_equal(fsl_ref_run(g, (const void *const *)in_rm, want), FSL_OK);
    const float *w = want[out % 2];
    for (int64_t j = 0; j < fsl_value_numel(o); j++) {
      /* element j of y in NHWC order is row-major element (n, c, i) */
      int64_t rm = nhwc_out ? ((j / 60) * 5 + j % 5) * 12 + (j % 60) / 5 : j;
      assert_true(fabsf(got[j] - w[rm]) <= 1e-5f * (1 + fabsf(w[rm])));
    }
    free(want[0]), free(want[1]), free(xr), free(s);
    dlclose(h);
    fsl_sbuf_free(&src);
  }
  fsl_graph_free(g);
}

/* A global pooling (sum and max over H and W) of an input stored NHWC:
 * [1, 40, 5, 6] (one row of the kept space: its 40 channels are split in
 * slots across the parallel loop) and [3, 24, 4, 4].  Both run as columns
 * (an accumulator per channel, the SIMD loop along the channels the
 * input stores innermost) in two streams along W (a<k> over its first
 * half, b<k> over its second: columns.c, direct) and match the reference
 * on the row-major data, a NaN in the second half of one channel's rows
 * included (its sum and max NaN, the other channels' not). */
static void test_layout_columns(void **state) {
  (void)state;
  int64_t shapes[2][4] = {{1, 40, 5, 6}, {3, 24, 4, 4}}, axes[] = {2, 3};
  for (int t = 0; t < 2; t++) {
    const int64_t *dx = shapes[t];
    int64_t N = dx[0], C = dx[1], HW = dx[2] * dx[3];
    fsl_graph *g = fsl_graph_new();
    fsl_builder b = B_INIT(g);
    fsl_value *x = input_dt(g, FSL_DT_F32, 4, dx);
    fsl_value *sum = fsl_b_reduce(&b, FSL_OP_reduce_sum, fsl_b_unary(&b, FSL_OP_neg, x), axes, 2, true);
    fsl_value *mx = fsl_b_reduce(&b, FSL_OP_reduce_max, x, axes, 2, true);
    assert_int_equal(b.st, FSL_OK);
    fsl_graph_add_output(g, sum);
    fsl_graph_add_output(g, mx);
    assert_int_equal(fsl_graph_verify(g), FSL_OK);
    fsl_cg_layout lay[1] = {{4, {0, 2, 3, 1}}};
    fsl_cg_spec spec = {.g = g, .id = 0, .n_nodes = g->n_nodes, .nodes = g->nodes, .n_in = 1, .in = g->inputs,
                        .in_layout = lay, .n_out = 2, .out = g->outputs};
    fsl_sbuf src = {0};
    fsl_codegen_prelude(&fsl_dialect_c, &src);
    assert_int_equal(fsl_codegen_kernel(&fsl_dialect_c, &spec, &src, NULL), FSL_OK);
    assert_non_null(strstr(src.p, "a0[o1] += (float)")); /* 30 and 16 elements per sum */
    assert_non_null(strstr(src.p, "b0[o1] += (float)"));
    assert_non_null(strstr(src.p, "const int64_t jh_ = j3 + "));
    void *h = NULL;
    void *sym = compile_k0(src.p, &h);
    int (*k0)(const void *const *, void *const *);
    memcpy(&k0, &sym, sizeof k0);
    float *xr = random_data(x, -1, 1), *xn = malloc(sizeof(float) * (size_t)(N * C * HW));
    assert_non_null(xn);
    xr[(N - 1) * C * HW + 3 * HW + dx[3] - 1] = NAN; /* channel 3, the last W of row 0 */
    to_nhwc(xr, xn, N, C, HW);
    float got_s[120], got_m[120];
    void *in[1] = {xn}, *in_rm[1] = {xr}, *want[2] = {0}, *outp[2] = {got_s, got_m};
    assert_int_equal(k0((const void *const *)in, outp), 0);
    assert_int_equal(fsl_ref_run(g, (const void *const *)in_rm, want), FSL_OK);
    for (int64_t j = 0; j < N * C; j++) {
      float ws = ((float *)want[0])[j], wm = ((float *)want[1])[j];
      assert_true(isnan(ws) == (j == (N - 1) * C + 3) && isnan(wm) == isnan(ws));
      assert_true(isnan(got_s[j]) == isnan(ws) && isnan(got_m[j]) == isnan(wm));
      if (isnan(ws)) continue;
      assert_true(fabsf(got_s[j] - ws) <= 1e-5f * (1 + fabsf(ws)));
      assert_true(got_m[j] == wm);
    }
    free(want[0]), free(want[1]), free(xr), free(xn);
    dlclose(h);
    fsl_sbuf_free(&src);
    fsl_graph_free(g);
  }
}

/* A row-major input into an NHWC output ([2, 20, 3, 17]: the write
 * transposes): the nest runs along the output's memory order, channels
 * innermost (contiguous writes). */
static void test_output_layout_transpose(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t dx[] = {2, 20, 3, 17};
  fsl_value *x = input_dt(g, FSL_DT_F32, 4, dx);
  fsl_value *y = fsl_b_binary_scalar(&b, FSL_OP_add, fsl_b_unary(&b, FSL_OP_tanh, x), 1.0);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, y);
  fsl_cg_layout nhwc = {4, {0, 2, 3, 1}};
  fsl_cg_spec spec = {.g = g, .id = 0, .n_nodes = g->n_nodes, .nodes = g->nodes, .n_in = 1, .in = g->inputs,
                      .n_out = 1, .out = g->outputs, .out_layout = &nhwc};
  fsl_sbuf src = {0};
  fsl_codegen_prelude(&fsl_dialect_c, &src);
  assert_int_equal(fsl_codegen_kernel(&fsl_dialect_c, &spec, &src, NULL), FSL_OK);
  if (!strstr(src.p, "c1 < 20; c1++")) fail_msg("channels are not the innermost loop:\n%s", src.p);
  void *h = NULL;
  void *sym = compile_k0(src.p, &h);
  int (*k0)(const void *const *, void *const *);
  memcpy(&k0, &sym, sizeof k0);
  float *xr = random_data(x, -2, 2), got[2040];
  void *in[1] = {xr}, *outp[1] = {got}, *want[1] = {0};
  assert_int_equal(k0((const void *const *)in, outp), 0);
  assert_int_equal(fsl_ref_run(g, (const void *const *)in, want), FSL_OK);
  for (int64_t n = 0; n < 2; n++)
    for (int64_t c = 0; c < 20; c++)
      for (int64_t i = 0; i < 51; i++) {
        float w = ((float *)want[0])[(n * 20 + c) * 51 + i], v = got[(n * 51 + i) * 20 + c];
        assert_true(fabsf(v - w) <= 1e-5f * (1 + fabsf(w)));
      }
  free(want[0]), free(xr);
  dlclose(h);
  fsl_sbuf_free(&src);
  fsl_graph_free(g);
}

/* ReLU over a pad of [2, 3, 20, 20] by 2 | 3 columns before | after (and
 * 1 | 2 rows, except in constant mode, whose row test is loop-invariant),
 * in each mode (constant 0.5, reflect, edge, wrap): each row runs as three
 * loops, and the middle one (columns 2 .. 21, which read x's columns 0 ..
 * 19) has neither the mode's index function nor the fill test
 * (pad_breaks in loops.c); the result matches the reference. */
static void test_pad_interior(void **state) {
  (void)state;
  for (int mode = 0; mode < 4; mode++) {
    fsl_graph *g = fsl_graph_new();
    fsl_builder b = B_INIT(g);
    int64_t dx[] = {2, 3, 20, 20}, pads[] = {0, 0, mode ? 1 : 0, 2, 0, 0, mode ? 2 : 0, 3};
    fsl_value *x = input_dt(g, FSL_DT_F32, 4, dx);
    fsl_value *y = fsl_b_binary_scalar(&b, FSL_OP_max, fsl_b_pad(&b, x, pads, mode, 0.5), 0.0);
    assert_int_equal(b.st, FSL_OK);
    fsl_graph_add_output(g, y);
    fsl_sbuf src;
    kernel_source(g, NULL, 0, &src, "pad-interior");
    const char *head = "for (int64_t c3 = 2; c3 < 22; c3++)", *mid = strstr(src.p, head);
    if (!mid) fail_msg("mode %d: no interior loop '%s':\n%s", mode, head, src.p);
    const char *end = strstr(mid + strlen(head), "for (");
    size_t len = end ? (size_t)(end - mid) : strlen(mid);
    char body[4096];
    snprintf(body, sizeof body, "%.*s", (int)(len < sizeof body - 1 ? len : sizeof body - 1), mid);
    /* the column coordinate: "const int64_t iN = c3 - 2;", used as is */
    const char *col = strstr(body, " = c3 - 2;"), *name = col;
    while (name && name > body && name[-1] != ' ') name--;
    char wrapped[64] = "", tested[64] = "";
    if (col) {
      snprintf(wrapped, sizeof wrapped, "(%.*s, ", (int)(col - name), name);
      snprintf(tested, sizeof tested, "(uint64_t)%.*s <", (int)(col - name), name);
    }
    if (!col || strstr(body, wrapped) || strstr(body, tested))
      fail_msg("mode %d: the interior loop tests the column border:\n%s", mode, body);
    fsl_sbuf_free(&src);
    check_kernel(g, -1, 1, head, "pad-interior");
    fsl_graph_free(g);
  }
}

/* A concat along the innermost axis of the output's memory order, as the
 * kernel's only output: each row runs one loop per concat input over its
 * part of the row, with no branch on the concat coordinate.  Row-major:
 * [2, 3, 5] ++ [2, 3, 1] ++ [2, 3, 7] on axis 2.  NHWC (out_layout
 * {0, 2, 3, 1}): [2, 3, 4, 5] ++ [2, 6, 4, 5] on the channel axis 1, the
 * way a channel concat feeding a convolution is written (docs/cpu-backend.md). */
static void test_concat_innermost(void **state) {
  (void)state;
  for (int nhwc = 0; nhwc < 2; nhwc++) {
    fsl_graph *g = fsl_graph_new();
    fsl_builder b = B_INIT(g);
    int64_t r0[] = {2, 3, 5}, r1[] = {2, 3, 1}, r2[] = {2, 3, 7}, n0[] = {2, 3, 4, 5}, n1[] = {2, 6, 4, 5};
    fsl_value *parts[3];
    int np = nhwc ? 2 : 3;
    parts[0] = fsl_b_unary(&b, FSL_OP_neg, input_dt(g, FSL_DT_F32, nhwc ? 4 : 3, nhwc ? n0 : r0));
    parts[1] = input_dt(g, FSL_DT_F32, nhwc ? 4 : 3, nhwc ? n1 : r1);
    if (!nhwc) parts[2] = fsl_b_unary(&b, FSL_OP_sigmoid, input_dt(g, FSL_DT_F32, 3, r2));
    fsl_value *c = fsl_b_concat(&b, parts, np, nhwc ? 1 : 2);
    assert_int_equal(b.st, FSL_OK);
    fsl_graph_add_output(g, c);
    fsl_cg_layout lay = {4, {0, 2, 3, 1}};
    fsl_cg_spec spec = {.g = g, .id = 0, .n_nodes = g->n_nodes, .nodes = g->nodes, .n_in = g->n_inputs,
                        .in = g->inputs, .n_out = 1, .out = g->outputs, .out_layout = nhwc ? &lay : NULL};
    fsl_sbuf src = {0};
    fsl_codegen_prelude(&fsl_dialect_c, &src);
    assert_int_equal(fsl_codegen_kernel(&fsl_dialect_c, &spec, &src, NULL), FSL_OK);
    const char *must = nhwc ? "for (int64_t c1 = 3; c1 < 9; c1++)" : "for (int64_t c2 = 5; c2 < 6; c2++)";
    const char *branch = nhwc ? "if (c1 < 3)" : "if (c2 < 5)";
    if (!strstr(src.p, must) || strstr(src.p, branch))
      fail_msg("the row is not split per concat input ('%s'):\n%s", must, src.p);
    void *h = NULL;
    void *sym = compile_k0(src.p, &h);
    int (*k0)(const void *const *, void *const *);
    memcpy(&k0, &sym, sizeof k0);
    void *in[3] = {0}, *want[1] = {0};
    for (int i = 0; i < g->n_inputs; i++) in[i] = random_data(g->inputs[i], -3, 3);
    int64_t N = fsl_value_numel(c);
    float *got = malloc(sizeof(float) * (size_t)N);
    assert_non_null(got);
    void *outp[1] = {got};
    assert_int_equal(k0((const void *const *)in, outp), 0);
    assert_int_equal(fsl_ref_run(g, (const void *const *)in, want), FSL_OK);
    for (int64_t j = 0; j < N; j++) {
      /* j: the row-major index; in NHWC the element sits at ((n*H + h)*W + w)*C + ch */
      int64_t k = j;
      if (nhwc) {
        int64_t C = 9, HW = 20, n = j / (C * HW), ch = j / HW % C, hw = j % HW;
        k = (n * HW + hw) * C + ch;
      }
      float w = ((float *)want[0])[j], v = got[k];
      if (!(fabsf(v - w) <= 1e-5f * (1 + fabsf(w)))) fail_msg("[%lld]: got %g want %g", (long long)j, v, w);
    }
    for (int i = 0; i < 3; i++) free(in[i]);
    free(want[0]), free(got);
    dlclose(h);
    fsl_sbuf_free(&src);
    fsl_graph_free(g);
  }
}

/* Pooling as pad + window + reduce: a 3x3 max pool (pad 1 with -inf) over
 * [1, 3, 12, 12] runs as window columns (an accumulator per output
 * column), its window loops and SIMD loop clamped to the input, as do
 * strided and dilated ones with 11 and 18 output columns (max and min:
 * separable, each input row's columns first); a 3x3 sum pool
 * with stride 2 (pad 1 with 0) over [2, 2, 9, 9], 5 output columns, as
 * window rows clamped to the input. */
static void pool_window(fsl_op op, const int64_t *dims, const int64_t *pads, const int64_t *k, const int64_t *st,
                        const int64_t *dl, double fill, const char *must, const char *what) {
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t axes[2] = {4, 5};
  fsl_value *x = fsl_b_pad(&b, input_dt(g, FSL_DT_F32, 4, dims), pads, 0, fill);
  fsl_value *y = fsl_b_reduce(&b, op, fsl_b_window(&b, x, 2, k, st, dl), axes, 2, false);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, y);
  check_kernel(g, -5, 5, must, what);
  fsl_graph_free(g);
}

static void pool_graph(fsl_op op, const int64_t *dims, int64_t stride, int64_t dil, double fill, const char *must,
                       const char *what) {
  int64_t pads[8] = {0, 0, 1, 1, 0, 0, 1, 1}, k[2] = {3, 3}, st[2] = {stride, stride}, dl[2] = {dil, dil};
  pool_window(op, dims, pads, k, st, dl, fill, must, what);
}

/* Two reductions of one window row where the second reads the first
 * (the softmax denominator over each 3x3 window, sum of exp(x - max)):
 * one after the other, as rows. */
static void test_window_chain(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t d[] = {1, 2, 10, 10}, pads[8] = {0, 0, 1, 1, 0, 0, 1, 1}, k[2] = {3, 3}, one[2] = {1, 1}, axes[2] = {4, 5};
  fsl_value *w = fsl_b_window(&b, fsl_b_pad(&b, input_dt(g, FSL_DT_F32, 4, d), pads, 0, -INFINITY), 2, k, one, one);
  fsl_value *m = w ? fsl_b_expand(&b, fsl_b_reduce(&b, FSL_OP_reduce_max, w, axes, 2, true), w->dims) : NULL;
  fsl_value *y = fsl_b_reduce(&b, FSL_OP_reduce_sum, fsl_b_unary(&b, FSL_OP_exp, fsl_b_binary(&b, FSL_OP_sub, w, m)), axes,
                              2, false);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, y);
  check_kernel(g, -5, 5, "for (int64_t j4 = jl4_; j4 < jh4_; j4++)", "window reductions in a chain");
  fsl_graph_free(g);
}

/* A max pool over H only (5x1, pads 2 on H), as the fission leaves a
 * pool split per axis: the window loop is clamped to the input (its
 * bounds do not depend on the SIMD loop over W) and X is read with no
 * bounds test; with stride 2 on H as well. */
static void test_window_axis_pool(void **state) {
  (void)state;
  int64_t d[] = {1, 2, 12, 10}, ph[8] = {0, 0, 2, 0, 0, 0, 2, 0}, k[2] = {5, 1}, one[2] = {1, 1}, st[2] = {2, 1};
  const char *clamped = "for (int64_t j4 = jl4_; j4 < jh4_; j4++)";
  pool_window(FSL_OP_reduce_max, d, ph, k, one, one, -INFINITY, clamped, "H-only max pool (clamped window loop)");
  pool_window(FSL_OP_reduce_max, d, ph, k, st, one, -INFINITY, clamped,
              "strided H-only max pool (clamped window loop)");
}

static void test_window_pool(void **state) {
  (void)state;
  int64_t d0[] = {1, 3, 12, 12}, d1[] = {2, 2, 9, 9}, d2[] = {1, 2, 21, 21}, d3[] = {1, 2, 20, 20};
  const char *cols = "for (int64_t o3 = ol3_; o3 < oh3_; o3++)", *sep = "t0[jc_] = (float)";
  pool_graph(FSL_OP_reduce_max, d0, 1, 1, -INFINITY, cols, "max pool (clamped columns)");
  pool_graph(FSL_OP_reduce_max, d2, 2, 1, -INFINITY, cols, "strided max pool (clamped columns)");
  pool_graph(FSL_OP_reduce_max, d3, 1, 2, -INFINITY, cols, "dilated max pool (clamped columns)");
  pool_graph(FSL_OP_reduce_max, d0, 1, 1, -INFINITY, sep, "max pool (separable columns)");
  pool_graph(FSL_OP_reduce_min, d2, 2, 1, INFINITY, sep, "strided min pool (separable columns)");
  pool_graph(FSL_OP_reduce_max, d3, 1, 2, -INFINITY, sep, "dilated max pool (separable columns)");
  pool_graph(FSL_OP_reduce_sum, d1, 2, 1, 0.0, "for (int64_t j4 = jl4_; j4 < jh4_; j4++)", "sum pool (clamped rows)");
}

/* exp of a transposed [3, 40, 20] -> [3, 20, 40]: the read is
 * contiguous along output axis 1 and strided along axis 2, so the nest
 * runs over 16 x 16 tiles of those axes (whole tiles, 8 x 8 blocks of
 * partial ones and single elements), whose f32 buffers go out through
 * fsl_tile16_store; the same values cast to int32 as a second output,
 * element by element. */
static void test_transpose_tiles(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t d[] = {3, 40, 20}, perm[] = {0, 2, 1};
  fsl_value *y = fsl_b_unary(&b, FSL_OP_exp, fsl_b_permute(&b, input_dt(g, FSL_DT_F32, 3, d), perm));
  fsl_value *z = fsl_b_cast(&b, fsl_b_binary_scalar(&b, FSL_OP_mul, y, 100.0), FSL_DT_I32);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, y);
  check_kernel(g, -3, 3, "fsl_tile16_store(out0 + ", "transpose tiles");
  fsl_graph_add_output(g, z);
  check_kernel(g, -3, 3, "out1[", "transpose tiles, f32 and int32");
  fsl_graph_free(g);
}

/* exp of an NHWC [2, 10, 6, 40] read as NCHW [2, 40, 10, 6] (a channels-
 * last buffer's consumer), and twice that as a second output: the rows
 * (6) are shorter than a tile, so the tiles run over the channels and the
 * 60 positions of both spatial axes as one (cq_, whose coordinates are
 * taken once per row), both outputs through fsl_tile16_store. */
static void test_transpose_tiles_merged(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t d[] = {2, 10, 6, 40}, perm[] = {0, 3, 1, 2};
  fsl_value *y = fsl_b_unary(&b, FSL_OP_exp, fsl_b_permute(&b, input_dt(g, FSL_DT_F32, 4, d), perm));
  fsl_value *z = fsl_b_binary_scalar(&b, FSL_OP_mul, y, 2.0);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, y);
  fsl_graph_add_output(g, z);
  check_kernel(g, -3, 3, "for (int64_t cq_ = tl1_; cq_ < th1_; cq_++)", "transpose tiles over merged axes");
  check_kernel(g, -3, 3, "fsl_tile16_store(out1 + ", "transpose tiles over merged axes, second output");
  fsl_graph_free(g);
}

/* An upsampling's taps over a transposed input: [3, 40, 20] permuted to
 * [3, 20, 40], gathered along axis 2 by the constant indices j / 2 (the
 * nearest taps of a 2x upsampling, 80 columns) and weighted.  The read
 * stays put between columns 0 and 1 and strides every second column, so
 * the probe looks at pairs in the middle of the row and the nest runs
 * over tiles along axis 1, where the read is contiguous. */
static void test_transpose_tiles_gather(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t d[] = {3, 40, 20}, perm[] = {0, 2, 1}, di[] = {80}, idx[80];
  for (int j = 0; j < 80; j++) idx[j] = j / 2;
  fsl_value *ix = fsl_b_const(&b, FSL_DT_I64, 1, di, idx);
  fsl_value *t = fsl_b_gather(&b, fsl_b_permute(&b, input_dt(g, FSL_DT_F32, 3, d), perm), ix, 2);
  fsl_value *y = fsl_b_binary_scalar(&b, FSL_OP_mul, t, 0.75);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, y);
  check_kernel_consts(g, &ix, 1, -3, 3, "fsl_tile16_store(out0 + ", "transpose tiles through a gather");
  fsl_graph_free(g);
}

/* A concat of [3, 20, 32] and [3, 20, 16] along axis 2, transposed to
 * [3, 48, 20]: the tiles run along the concat's axis, whose boundary 32 is
 * a multiple of the tile, so each tile reads one input, with no test
 * (one version of the tile loop per part). */
static void test_transpose_tiles_concat(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t d0[] = {3, 20, 32}, d1[] = {3, 20, 16}, perm[] = {0, 2, 1};
  fsl_value *parts[] = {fsl_b_unary(&b, FSL_OP_exp, input_dt(g, FSL_DT_F32, 3, d0)), input_dt(g, FSL_DT_F32, 3, d1)};
  fsl_value *y = fsl_b_permute(&b, fsl_b_concat(&b, parts, 2, 2), perm);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, y);
  check_kernel(g, -3, 3, "if (th0_ <= 32) {", "transpose tiles of a concat");
  fsl_graph_free(g);
}

/* Two NHWC buffers, [2, 6, 5, 32] and [2, 6, 5, 7], read as NCHW, each
 * with its own arithmetic, concatenated along the channels into
 * [2, 39, 6, 5] (a detector's box and class heads into one output): the
 * read is contiguous along the concat's axis and its boundary 32 is a
 * multiple of the tile, so the nest runs over tiles of the channels and
 * of both spatial axes as one, a version per input, instead of a nest per
 * input strided every element. */
static void test_transpose_tiles_concat_outer(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t d0[] = {2, 6, 5, 32}, d1[] = {2, 6, 5, 7}, perm[] = {0, 3, 1, 2};
  fsl_value *parts[] = {fsl_b_unary(&b, FSL_OP_exp, fsl_b_permute(&b, input_dt(g, FSL_DT_F32, 4, d0), perm)),
                        fsl_b_binary_scalar(&b, FSL_OP_mul, fsl_b_permute(&b, input_dt(g, FSL_DT_F32, 4, d1), perm),
                                            0.5)};
  fsl_value *y = fsl_b_concat(&b, parts, 2, 1);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, y);
  check_kernel(g, -3, 3, "if (th0_ <= 32) {", "transpose tiles of an outer concat");
  check_kernel(g, -3, 3, "for (int64_t cq_ = tl1_; cq_ < th1_; cq_++)", "transpose tiles of an outer concat, merged");
  fsl_graph_free(g);
}

/* A concat of [3, 2, 40], [3, 3, 40] and [3, 17, 40] along axis 1,
 * transposed to [3, 40, 22] (YOLOX's decode: xy, wh and scores along the
 * last axis): the tiles run along axis 1, and their rows along axis 2 go in
 * one loop per concat input, clipped to the tile, each reading its input
 * with no test; the first tile of axis 2 crosses both boundaries. */
static void test_transpose_tiles_concat_rows(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t d0[] = {3, 2, 40}, d1[] = {3, 3, 40}, d2[] = {3, 17, 40}, perm[] = {0, 2, 1};
  fsl_value *parts[] = {fsl_b_binary_scalar(&b, FSL_OP_mul, input_dt(g, FSL_DT_F32, 3, d0), 3.0),
                        fsl_b_unary(&b, FSL_OP_exp, input_dt(g, FSL_DT_F32, 3, d1)), input_dt(g, FSL_DT_F32, 3, d2)};
  fsl_value *y = fsl_b_permute(&b, fsl_b_concat(&b, parts, 3, 1), perm);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, y);
  check_kernel(g, -3, 3, "c2 < (th1_ < 2 ? th1_ : 2)", "transpose tiles, rows of a concat");
  fsl_graph_free(g);
}

/* A separable 5x5 max pool of [2, 6, 10, 10] (pad, window and reduce
 * along W, then along H, as pool.c's separable_max): two passes; the
 * second writes its result straight into the output buffer (the output
 * is that result without its kernel axes), with no copy after it. */
static void test_separable_maxpool(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t d[] = {2, 6, 10, 10}, pw[] = {0, 0, 0, 2, 0, 0, 0, 2}, ph[] = {0, 0, 2, 0, 0, 0, 2, 0};
  int64_t kw[] = {1, 5}, kh[] = {5, 1}, one[] = {1, 1}, ax[] = {4, 5};
  fsl_value *y = input_dt(g, FSL_DT_F32, 4, d);
  y = fsl_b_reduce(&b, FSL_OP_reduce_max, fsl_b_window(&b, fsl_b_pad(&b, y, pw, 0, -INFINITY), 2, kw, one, one), ax, 2,
                   false);
  y = fsl_b_reduce(&b, FSL_OP_reduce_max, fsl_b_window(&b, fsl_b_pad(&b, y, ph, 0, -INFINITY), 2, kh, one, one), ax, 2,
                   false);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, y);
  check_kernel(g, -3, 3, "*s1 = out0;", "separable max pool");
  fsl_graph_free(g);
}

/* A concat along axis 1 of [2, 8, 5] and [2, 4, 5] reshaped to
 * [2, 3, 4, 5]: the concat coordinate is c1*4 + c2 and its boundary 8 a
 * multiple of 4, so the test is on c1, which the inner loop does not
 * change. */
static void test_concat_split_by_reshape(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t d0[] = {2, 8, 5}, d1[] = {2, 4, 5}, shape[] = {2, 3, 4, 5};
  fsl_value *parts[] = {fsl_b_unary(&b, FSL_OP_neg, input_dt(g, FSL_DT_F32, 3, d0)), input_dt(g, FSL_DT_F32, 3, d1)};
  fsl_value *y = fsl_b_reshape(&b, fsl_b_concat(&b, parts, 2, 1), 4, shape);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, y);
  check_kernel(g, -5, 5, "if (c1 < 2) {", "concat split by a reshape");
  fsl_graph_free(g);
}

/* A column sum: [7, 300, 24] summed over axis 1, 24 columns per row of
 * the kept space, an accumulator each. */
static void test_column_sum(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t d[] = {7, 300, 24}, axes[] = {1};
  fsl_value *y = fsl_b_reduce(&b, FSL_OP_reduce_sum, fsl_b_unary(&b, FSL_OP_neg, input_dt(g, FSL_DT_F32, 3, d)), axes, 1,
                              true);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, y);
  check_kernel(g, -3, 3, "a0[o2] += (double)", "column sum");
  fsl_graph_free(g);
}

/* softmax over axis 1 of [3, 16, 200] (YOLOv8's distribution focal loss
 * head: 16 bins, each a plane): columns along the contiguous axis 2, a
 * sweep for the max, one for the sum of exp(x - max) reading the max per
 * column, then the quotients, bin by bin; three rows, so the columns are
 * split in slots.  Sums of at most 32 elements add in float.  The max
 * carries no NaN flag (test_softmax_nan_flag). */
static void test_column_softmax(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t d[] = {3, 16, 200};
  fsl_value *y = softmax(&b, input_dt(g, FSL_DT_F32, 3, d), 1);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, y);
  check_kernel(g, -3, 3, "const float r0 = (float)a0[o2];", "column softmax (its max needs no NaN flag)");
  check_kernel(g, -3, 3, "a1[o2] += (float)", "column softmax, its sum (16 elements: in float)");
  fsl_graph_free(g);
}

/* LayerNorm over the channels of an NCHW [2, 48, 5, 30] (ConvNeXt's
 * channels-first LayerNorm): the mean, then the mean square of x - mean
 * (a second sweep reading the first per column), then the normalized
 * output as columns along W; sums of 48 add in double. */
static void test_column_layernorm(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t d[] = {2, 48, 5, 30}, axis = 1;
  fsl_value *x = input_dt(g, FSL_DT_F32, 4, d);
  fsl_value *mu = fsl_b_binary_scalar(&b, FSL_OP_div, fsl_b_reduce(&b, FSL_OP_reduce_sum, x, &axis, 1, true), 48.0);
  fsl_value *xc = fsl_b_binary(&b, FSL_OP_sub, x, mu);
  fsl_value *var = fsl_b_binary_scalar(&b, FSL_OP_div,
                                       fsl_b_reduce(&b, FSL_OP_reduce_sum, fsl_b_binary(&b, FSL_OP_mul, xc, xc), &axis,
                                                    1, true),
                                       48.0);
  fsl_value *y =
      fsl_b_binary(&b, FSL_OP_mul, xc, fsl_b_unary(&b, FSL_OP_rsqrt, fsl_b_binary_scalar(&b, FSL_OP_add, var, 1e-5)));
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, y);
  check_kernel(g, -3, 3, "a1[o3] += (double)", "column LayerNorm");
  fsl_graph_free(g);
}

/* The same softmax over the channels of an input stored NHWC: a row of
 * the 24 channels is contiguous there while W strides, so it keeps the
 * rows form (no per-column results). */
static void test_channel_softmax_nhwc_rows(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t d[] = {2, 24, 5, 30};
  fsl_value *y = softmax(&b, input_dt(g, FSL_DT_F32, 4, d), 1);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, y);
  assert_int_equal(fsl_graph_verify(g), FSL_OK);
  fsl_cg_layout lay[1] = {{4, {0, 2, 3, 1}}};
  fsl_cg_spec spec = {.g = g, .id = 0, .n_nodes = g->n_nodes, .nodes = g->nodes, .n_in = 1, .in = g->inputs,
                      .in_layout = lay, .n_out = 1, .out = g->outputs};
  fsl_sbuf src = {0};
  assert_int_equal(fsl_codegen_kernel(&fsl_dialect_c, &spec, &src, NULL), FSL_OK);
  assert_null(strstr(src.p, "r0 = n0["));
  assert_non_null(strstr(src.p, "ps1 += "));
  fsl_sbuf_free(&src);
  fsl_graph_free(g);
}

/* gather rows of a [10, 6] table with int64 indices [3, 4] (negative ones
 * wrap): the index is checked and wrapped in the generated code. */
static void test_gather(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t dt[] = {10, 6}, di[] = {3, 4};
  fsl_value *t = input_dt(g, FSL_DT_F32, 2, dt), *ix = input_dt(g, FSL_DT_I64, 2, di);
  fsl_value *y = fsl_b_gather(&b, t, ix, 0);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, y);
  check_kernel(g, -10, 10, "e_ |= (uint64_t)", "gather");
  fsl_graph_free(g);
}

/* gather rows of a [10, 6] table with constant indices: checked when the
 * code is generated, so indices all in [0, 10) need neither the wrap nor
 * the run-time check, indices in [-10, 10) only the wrap, and one out of
 * range keeps both (the run then reports FSL_KERR_INDEX, as before). */
static void test_gather_const_index(void **state) {
  (void)state;
  static const int64_t in_range[12] = {0, 9, 3, 3, 1, 2, 8, 7, 6, 5, 4, 0};
  static const int64_t negative[12] = {0, -1, 3, -10, 1, 2, 8, 7, -6, 5, 4, 9};
  static const int64_t outside[12] = {0, 1, 3, 10, 1, 2, 8, 7, 6, 5, 4, 9};
  const int64_t *sets[3] = {in_range, negative, outside};
  for (int k = 0; k < 3; k++) {
    fsl_graph *g = fsl_graph_new();
    fsl_builder b = B_INIT(g);
    int64_t dt[] = {10, 6}, di[] = {3, 4};
    fsl_value *t = input_dt(g, FSL_DT_F32, 2, dt);
    fsl_value *ix = fsl_b_const(&b, FSL_DT_I64, 2, di, sets[k]);
    fsl_value *y = fsl_b_gather(&b, t, ix, 0);
    assert_int_equal(b.st, FSL_OK);
    fsl_graph_add_output(g, y);
    fsl_sbuf src;
    kernel_source(g, &ix, 1, &src, "gather (constant indices)");
    bool checked = strstr(src.p, "e_ |= (uint64_t)") != NULL, wrapped = strstr(src.p, " + 10 : ") != NULL;
    if (checked != (k == 2) || wrapped != (k > 0)) fail_msg("set %d: checked %d, wrapped %d:\n%s", k, checked, wrapped, src.p);
    fsl_sbuf_free(&src);
    if (k < 2) check_kernel_consts(g, &ix, 1, -10, 10, NULL, "gather (constant indices)");
    fsl_graph_free(g);
  }
}

/* A dtype the dialect has no type for is refused, naming it (the C
 * dialect without its half storage); with it, float16 is loaded into float
 * and stored back rounded (fsl_h2f, fsl_f2h, uint16_t buffers). */
static void test_unsupported_dtype(void **state) {
  (void)state;
  fsl_dialect no_half = fsl_dialect_c;
  no_half.storage_name = NULL;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t d[] = {4};
  fsl_value *y = fsl_b_unary(&b, FSL_OP_neg, input_dt(g, FSL_DT_F16, 1, d));
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, y);
  fsl_cg_spec spec = {.g = g, .n_nodes = g->n_nodes, .nodes = g->nodes, .n_in = g->n_inputs, .in = g->inputs,
                      .n_out = g->n_outputs, .out = g->outputs};
  fsl_sbuf src = {0};
  assert_int_equal(fsl_codegen_kernel(&no_half, &spec, &src, NULL), FSL_ERR_UNSUPPORTED);
  assert_non_null(strstr(fsl_last_error(), "float16"));
  assert_null(src.p); /* nothing appended */
  fsl_error_clear();
  assert_int_equal(fsl_codegen_kernel(&fsl_dialect_c, &spec, &src, NULL), FSL_OK);
  assert_non_null(strstr(src.p, "const uint16_t *in0"));
  assert_non_null(strstr(src.p, "fsl_h2f(in0["));
  assert_non_null(strstr(src.p, "fsl_f2h("));
  fsl_sbuf_free(&src);
  fsl_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_broadcast_add), cmocka_unit_test(test_softmax_row), cmocka_unit_test(test_exp_below_max), cmocka_unit_test(test_softmax_nan_flag),
      cmocka_unit_test(test_cached_output_not_copied), cmocka_unit_test(test_strided_slice),
      cmocka_unit_test(test_concat),        cmocka_unit_test(test_concat_rows), cmocka_unit_test(test_concat_rows_reshaped), cmocka_unit_test(test_input_layout), cmocka_unit_test(test_output_layout_transpose), cmocka_unit_test(test_window_pool), cmocka_unit_test(test_window_axis_pool), cmocka_unit_test(test_concat_innermost), cmocka_unit_test(test_pad_interior), cmocka_unit_test(test_window_chain),
      cmocka_unit_test(test_transpose_tiles), cmocka_unit_test(test_transpose_tiles_merged), cmocka_unit_test(test_transpose_tiles_gather), cmocka_unit_test(test_concat_split_by_reshape), cmocka_unit_test(test_transpose_tiles_concat), cmocka_unit_test(test_transpose_tiles_concat_outer), cmocka_unit_test(test_transpose_tiles_concat_rows), cmocka_unit_test(test_separable_maxpool), cmocka_unit_test(test_column_sum), cmocka_unit_test(test_column_softmax), cmocka_unit_test(test_column_layernorm), cmocka_unit_test(test_channel_softmax_nhwc_rows), cmocka_unit_test(test_layout_columns),
      cmocka_unit_test(test_gather),      cmocka_unit_test(test_gather_const_index),      cmocka_unit_test(test_unsupported_dtype),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
