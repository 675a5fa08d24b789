/* test_opencl.c — the OpenCL C dialect and the OpenCL backend
 * (src/backend/opencl): the same kernel rendered in C and OpenCL C differs
 * only where the dialect table says; plans run on the device (PoCL in CI)
 * match the reference interpreter for odd thread counts (1, 7, 1023, 1025
 * elements) and for reductions over rows shorter than, as long as and
 * longer than a work-group (64); a program the device's compiler rejects
 * is a clear error with the build log and leaves nothing in the cache.
 * The tests that need a device are skipped, with a message, when no
 * OpenCL platform is found. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <math.h>
#include <dirent.h>
#include <unistd.h>
#include <cmocka.h>

#include "backend/backend.h"
#include "backend/cpu/dialect_c.h"
#include "backend/opencl/dialect_opencl.h"
#include "backend/opencl/opencl.h"
#include "eval/eval.h"
#include "fission/builder.h"
#include "test_graph.h"

#define B_INIT(g) {.g = (g), .st = FSL_OK, .fold = false}

/* Whether a device is there; prints why not once. */
static bool have_device(void) {
  const fsl_ocl_device *d = NULL;
  if (fsl_ocl_device_get(&d) == FSL_OK) return true;
  fprintf(stderr, "test_opencl: skipped, no usable OpenCL device: %s\n", fsl_last_error());
  fsl_error_clear();
  return false;
}

/* Removes every occurrence of pat from s (in place). */
static void strip(char *s, const char *pat) {
  size_t n = strlen(pat);
  char *p;
  while ((p = strstr(s, pat)) != NULL) memmove(p, p + n, strlen(p + n) + 1);
}

/* Removes whole lines that start (after spaces) with prefix. */
static void strip_lines(char *s, const char *prefix) {
  char *line = s;
  while (*line) {
    char *end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line + 1) : strlen(line);
    const char *q = line;
    while (*q == ' ') q++;
    if (!strncmp(q, prefix, strlen(prefix))) memmove(line, line + len, strlen(line + len) + 1);
    else line += len;
  }
}

/* The kernel text after its opening line (the signature). */
static char *body_of(const char *src) {
  const char *nl = strchr(src, '\n');
  assert_non_null(nl);
  char *s = strdup(nl + 1);
  assert_non_null(s);
  return s;
}

/* Renders all nodes of g as one kernel in dialect d. */
static char *render(const fsl_dialect *d, fsl_graph *g) {
  fsl_node *nodes[16];
  for (int i = 0; i < g->n_nodes; i++) nodes[i] = g->nodes[i];
  fsl_cg_spec spec = {.g = g, .id = 7, .n_nodes = g->n_nodes, .nodes = nodes, .n_in = g->n_inputs, .in = g->inputs,
                      .n_out = g->n_outputs, .out = g->outputs};
  fsl_sbuf b = {0};
  assert_int_equal(fsl_codegen_kernel(d, &spec, &b), FSL_OK);
  char *s = body_of(b.p);
  fsl_sbuf_free(&b);
  return s;
}

/* The same LOOP and REDUCE kernels in C and OpenCL C: after removing what
 * the table gives each dialect (signature, the in/out arrays OpenCL
 * builds, buf_space, OpenMP pragmas, the grid-stride form of PARALLEL
 * loops, the error report) the texts are equal.  par_min, which decides
 * the loop structure, is set to OpenCL's in the C dialect. */
static void test_dialect_table(void **state) {
  (void)state;
  for (int t = 0; t < 2; t++) {
    fsl_graph *g = fsl_graph_new();
    fsl_builder b = B_INIT(g);
    int64_t dims[] = {3, 5}, axis = 1;
    fsl_value *x = input(g, "x", 2, dims);
    fsl_value *y = fsl_b_binary_scalar(&b, FSL_OP_mul, fsl_b_unary(&b, FSL_OP_tanh, x), 2.0);
    if (t == 1) y = fsl_b_reduce(&b, FSL_OP_reduce_sum, y, &axis, 1, true);
    assert_int_equal(b.st, FSL_OK);
    fsl_graph_add_output(g, y);
    /* the C dialect with OpenCL's par_min (0: every thread runs the kernel,
     * PARALLEL loops over elements / rows divide the work) */
    fsl_dialect c0 = fsl_dialect_c;
    c0.par_min = fsl_dialect_opencl.par_min;
    char *c = render(&c0, g), *cl = render(&fsl_dialect_opencl, g);
    /* OpenCL only: the arrays of buffers and the address space */
    assert_non_null(strstr(cl, "__global const void *in[1] = {p0 + o0};"));
    assert_non_null(strstr(cl, "get_global_id(0)"));
    strip_lines(cl, "__global const void *in[");
    strip_lines(cl, "__global void *out[");
    strip(cl, "__global ");
    /* the PARALLEL loop: an OpenMP pragma in C, a grid-stride loop in OpenCL */
    strip(cl, " + (int64_t)get_global_id(0)");
    strip_lines(c, "#pragma omp");
    char *p;
    while ((p = strstr(cl, " += (int64_t)get_global_size(0)")) != NULL) {
      memcpy(p, "++", 2);
      memmove(p + 2, p + strlen(" += (int64_t)get_global_size(0)"), strlen(p + strlen(" += (int64_t)get_global_size(0)")) + 1);
    }
    /* the last statement: the error report */
    strip_lines(c, "return err_;");
    strip_lines(cl, "if (err_) atomic_or(err_buf + err_i, err_);");
    if (strcmp(c, cl)) fprintf(stderr, "C:\n%s\nOpenCL:\n%s\n", c, cl);
    assert_string_equal(c, cl);
    free(c);
    free(cl);
    fsl_graph_free(g);
  }
}

/* Runs g's plan (strategy s) on the OpenCL backend and compares every
 * output with the reference; every kernel must run on the device. */
static void check_plan_on_device(fsl_graph *g, fsl_plan p, void **inputs, double tol, const char *what) {
  void *want[4] = {0}, *got[4] = {0};
  assert_int_equal(fsl_ref_run(g, (const void *const *)inputs, want), FSL_OK);
  void *exe = NULL;
  fsl_status st = fsl_backend_opencl.compile(&p, &exe);
  if (st != FSL_OK) fprintf(stderr, "%s: compile: %s\n", what, fsl_last_error());
  assert_int_equal(st, FSL_OK);
  for (int i = 0; i < p.kernels.n; i++) assert_true(fsl_backend_opencl.supports(g, p.kernels.k[i]));
  fsl_backend_exe_info ei;
  fsl_backend_opencl.exe_info(exe, &ei);
  if (ei.n_fallback) fprintf(stderr, "%s: fallback: %s\n", what, ei.fallback_why);
  assert_int_equal(ei.n_fallback + ei.n_opaque, 0);
  assert_int_equal(ei.n_native, p.kernels.n);
  st = fsl_backend_opencl.run(exe, (const void *const *)inputs, got);
  if (st != FSL_OK) fprintf(stderr, "%s: run: %s\n", what, fsl_last_error());
  assert_int_equal(st, FSL_OK);
  for (int o = 0; o < g->n_outputs; o++) {
    const fsl_value *v = g->outputs[o];
    int bad = 0;
    for (int64_t i = 0; i < fsl_value_numel(v); i++) {
      double a = fsl_load_f64(v->dtype, got[o], i), b = fsl_load_f64(v->dtype, want[o], i);
      bool ok = fabs(a - b) <= tol * fmax(1.0, fabs(b));
      if (!ok && bad++ < 5) fprintf(stderr, "%s: output %d [%lld] got %.9g want %.9g\n", what, o, (long long)i, a, b);
    }
    assert_int_equal(bad, 0);
    free(got[o]);
    free(want[o]);
  }
  fsl_backend_opencl.free_exe(exe);
  fsl_plan_free(&p);
}

static void check_on_device(fsl_graph *g, void **inputs, fsl_strategy s, double tol, const char *what) {
  fsl_plan p;
  assert_int_equal(fsl_plan_build(g, s, NULL, &p), FSL_OK);
  check_plan_on_device(g, p, inputs, tol, what);
}

/* One work-item per output row, any global size: 1, 7, 1023 and 1025
 * elements, as a flat vector and as a column (rows of one element), with
 * two outputs written by the same work-item (one fused kernel). */
static void test_odd_sizes(void **state) {
  (void)state;
  if (!have_device()) skip();
  int64_t sizes[] = {1, 7, 1023, 1025};
  for (int t = 0; t < 4; t++)
    for (int col = 0; col < 2; col++) {
      fsl_graph *g = fsl_graph_new();
      fsl_builder b = B_INIT(g);
      int64_t dims[] = {sizes[t], 1};
      fsl_value *x = input(g, "x", col ? 2 : 1, dims);
      fsl_value *y = fsl_b_binary_scalar(&b, FSL_OP_add, fsl_b_binary(&b, FSL_OP_mul, x, x), 1.0);
      fsl_value *z = fsl_b_unary(&b, FSL_OP_neg, y);
      assert_int_equal(b.st, FSL_OK);
      fsl_graph_add_output(g, y);
      fsl_graph_add_output(g, z);
      void *in[] = {random_data(x, -3, 3)};
      char what[64];
      snprintf(what, sizeof what, "odd size %lld%s", (long long)sizes[t], col ? " x 1" : "");
      check_on_device(g, in, FSL_STRATEGY_GREEDY, 1e-6, what);
      free(in[0]);
      fsl_graph_free(g);
    }
}

/* Sums, maxima and softmax over rows of 1, 63, 64, 65 and 1000 elements
 * (shorter than, as long as and longer than a 64-item work-group), with
 * 3 and 130 rows. */
static void test_reduce_rows(void **state) {
  (void)state;
  if (!have_device()) skip();
  int64_t lens[] = {1, 63, 64, 65, 1000}, rows[] = {3, 130};
  for (int t = 0; t < 5; t++)
    for (int r = 0; r < 2; r++) {
      fsl_graph *g = fsl_graph_new();
      fsl_builder b = B_INIT(g);
      int64_t dims[] = {rows[r], lens[t]}, axis = 1;
      fsl_value *x = input(g, "x", 2, dims);
      fsl_value *s = fsl_b_reduce(&b, FSL_OP_reduce_sum, x, &axis, 1, true);
      fsl_value *m = fsl_b_reduce(&b, FSL_OP_reduce_max, x, &axis, 1, true);
      fsl_value *e = fsl_b_unary(&b, FSL_OP_exp, fsl_b_binary(&b, FSL_OP_sub, x, m));
      fsl_value *sm = fsl_b_binary(&b, FSL_OP_div, e, fsl_b_reduce(&b, FSL_OP_reduce_sum, e, &axis, 1, true));
      assert_int_equal(b.st, FSL_OK);
      fsl_graph_add_output(g, s);
      fsl_graph_add_output(g, sm);
      void *in[] = {random_data(x, -4, 4)};
      char what[64];
      snprintf(what, sizeof what, "reduce %lld rows of %lld", (long long)rows[r], (long long)lens[t]);
      check_on_device(g, in, FSL_STRATEGY_GREEDY, 1e-4, what); /* f32 block sums (docs/primitives.md) */
      check_on_device(g, in, FSL_STRATEGY_UNFUSED, 1e-4, what);
      free(in[0]);
      fsl_graph_free(g);
    }
}

/* A kernel the dialect cannot take in one piece (a reduction read outside
 * its row: several passes, no barrier between work-groups) runs as one
 * generated kernel per node, on the device, not as a fallback. */
static void test_split_kernel(void **state) {
  (void)state;
  if (!have_device()) skip();
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  /* layer-norm style through reshapes (as ONNX's expanded LayerNormalization
   * tests): the row sum is read back through a reshape */
  int64_t dims[] = {2, 3, 4}, flat[] = {2, 12}, back[] = {2, 1, 1}, ax1 = 1;
  fsl_value *x = input(g, "x", 3, dims);
  fsl_value *m = fsl_b_reduce(&b, FSL_OP_reduce_sum, fsl_b_reshape(&b, x, 2, flat), &ax1, 1, true); /* 2x1 */
  fsl_value *y = fsl_b_binary(&b, FSL_OP_sub, x, fsl_b_reshape(&b, m, 3, back));                   /* 2x3x4 */
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, y);
  /* the whole graph as one kernel, which the dialect refuses in one piece */
  fsl_plan p;
  memset(&p, 0, sizeof p);
  p.g = g;
  p.kernels.g = g;
  int *topo = fsl_graph_topo_index(g);
  assert_non_null(topo);
  fsl_kernel *k = NULL;
  const char *why = NULL;
  assert_int_equal(fsl_kernel_make(g, topo, g->nodes, g->n_nodes, &k, &why), FSL_OK);
  free(topo);
  if (!k) fprintf(stderr, "split kernel: not one legal kernel: %s\n", why ? why : "?");
  assert_non_null(k);
  p.kernels.k = malloc(sizeof(fsl_kernel *));
  assert_non_null(p.kernels.k);
  p.kernels.k[0] = k;
  p.kernels.n = p.kernels.cap = 1;
  assert_int_equal(fsl_plan_verify(&p), FSL_OK);
  fsl_cg_spec spec = {.g = g, .id = 0, .n_nodes = k->n_nodes, .nodes = k->nodes, .n_in = k->n_in, .in = k->in,
                      .n_out = k->n_out, .out = k->out};
  fsl_sbuf sb = {0};
  assert_int_equal(fsl_codegen_kernel(&fsl_dialect_opencl, &spec, &sb), FSL_ERR_UNSUPPORTED);
  fsl_error_clear();
  fsl_sbuf_free(&sb);
  void *in[] = {random_data(x, -3, 3)};
  check_plan_on_device(g, p, in, 1e-5, "split kernel");
  free(in[0]);
  fsl_graph_free(g);
}

/* supports() says which kernels would fall back: an f16 kernel does (no
 * half type in the dialect yet), the same kernel in f32 does not. */
static void test_supports(void **state) {
  (void)state;
  for (int f16 = 0; f16 < 2; f16++) {
    fsl_graph *g = fsl_graph_new();
    fsl_builder b = B_INIT(g);
    int64_t dims[] = {4, 5};
    fsl_value *y = fsl_b_unary(&b, FSL_OP_tanh, input_named(g, "x", f16 ? FSL_DT_F16 : FSL_DT_F32, 2, dims));
    assert_int_equal(b.st, FSL_OK);
    fsl_graph_add_output(g, y);
    fsl_plan p;
    assert_int_equal(fsl_plan_build(g, FSL_STRATEGY_GREEDY, NULL, &p), FSL_OK);
    assert_int_equal(p.kernels.n, 1);
    assert_int_equal(fsl_backend_opencl.supports(g, p.kernels.k[0]), !f16);
    fsl_plan_free(&p);
    fsl_graph_free(g);
  }
}

/* A program the compiler rejects: FSL_ERR_RUNTIME with the build log, and
 * no file in the (fresh) cache folder. */
static void test_build_failure(void **state) {
  (void)state;
  if (!have_device()) skip();
  char dir[] = "/tmp/fsl-ocl-test-XXXXXX";
  assert_non_null(mkdtemp(dir));
  setenv("FSL_CACHE_DIR", dir, 1);
  const fsl_ocl_device *d = NULL;
  assert_int_equal(fsl_ocl_device_get(&d), FSL_OK);
  const char *bad = "__kernel void fsl_k0(__global float *p) { p[0] = no_such_function(1.0f); }\n";
  cl_program prog = NULL;
  bool hit = true;
  assert_int_equal(fsl_ocl_build(d, bad, strlen(bad), &prog, &hit), FSL_ERR_RUNTIME);
  assert_null(prog);
  const char *msg = fsl_last_error();
  assert_non_null(strstr(msg, "build log"));
  assert_non_null(strstr(msg, "no_such_function"));
  fsl_error_clear();
  int files = 0;
  DIR *dd = opendir(dir);
  assert_non_null(dd);
  for (struct dirent *de; (de = readdir(dd)) != NULL;)
    if (de->d_name[0] != '.') files++;
  closedir(dd);
  assert_int_equal(files, 0);
  /* a good program is cached, and found there the second time */
  const char *good = "__kernel void fsl_k0(__global float *p) { p[0] = 1.0f; }\n";
  assert_int_equal(fsl_ocl_build(d, good, strlen(good), &prog, &hit), FSL_OK);
  assert_false(hit);
  clReleaseProgram(prog);
  assert_int_equal(fsl_ocl_build(d, good, strlen(good), &prog, &hit), FSL_OK);
  assert_true(hit);
  clReleaseProgram(prog);
  unsetenv("FSL_CACHE_DIR");
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dialect_table),
      cmocka_unit_test(test_odd_sizes),
      cmocka_unit_test(test_reduce_rows),
      cmocka_unit_test(test_split_kernel),
      cmocka_unit_test(test_supports),
      cmocka_unit_test(test_build_failure),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
