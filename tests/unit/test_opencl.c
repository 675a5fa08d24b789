/* test_opencl.c — the OpenCL C dialect and the OpenCL backend
 * (src/backend/opencl): the same kernel rendered in C and OpenCL C differs
 * only where the dialect table says (with and without work-groups); plans
 * run on the device (PoCL in CI) match the reference interpreter for odd
 * thread counts (1, 7, 1023, 1025 elements), for reductions over rows
 * shorter than, as long as and longer than a work-group (64), and for
 * matmuls and convolutions through local tiles at odd sizes, with their
 * epilogues computed before the tile's store; work-group
 * code falls back to one work-item per row / element when local memory
 * is short; a program the device's compiler rejects
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
#include "backend/gpusteps.h"
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

/* Replaces every occurrence of pat in s by rep, no longer than pat (in place). */
static void replace(char *s, const char *pat, const char *rep) {
  size_t n = strlen(pat), m = strlen(rep);
  char *p = s;
  while ((p = strstr(p, pat)) != NULL) {
    memcpy(p, rep, m);
    memmove(p + m, p + n, strlen(p + n) + 1);
    p += m;
  }
}

/* Removes every occurrence of pat from s (in place). */
static void strip(char *s, const char *pat) { replace(s, pat, ""); }

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

/* Renders all nodes of g as one kernel in dialect d (a matmul or conv node
 * alone through fsl_codegen_matmul / fsl_codegen_conv when there is one);
 * *launch as reported. */
static char *render(const fsl_dialect *d, fsl_graph *g, fsl_cg_launch *launch) {
  fsl_node *nodes[16];
  const fsl_node *lin = NULL;
  for (int i = 0; i < g->n_nodes; i++) {
    nodes[i] = g->nodes[i];
    if (nodes[i]->op == FSL_OP_matmul || nodes[i]->op == FSL_OP_conv) lin = nodes[i];
  }
  fsl_cg_spec spec = {.g = g, .id = 7, .n_nodes = g->n_nodes, .nodes = nodes, .n_in = g->n_inputs, .in = g->inputs,
                      .n_out = g->n_outputs, .out = g->outputs};
  fsl_sbuf b = {0};
  fsl_status st = !lin                         ? fsl_codegen_kernel(d, &spec, &b, launch)
                  : lin->op == FSL_OP_matmul ? fsl_codegen_matmul(d, 7, lin, NULL, &b, launch)
                                               : fsl_codegen_conv(d, 7, lin, NULL, &b, launch);
  assert_int_equal(st, FSL_OK);
  char *s = body_of(b.p);
  fsl_sbuf_free(&b);
  return s;
}

/* What the OpenCL table gives its kernels, removed or turned into the C
 * dialect's text: the arrays of buffers and the address space, the
 * grid-stride forms of PARALLEL, GROUPS and LANES loops, the error report,
 * and the work-group strings (local_kw, local_id, barrier) into the
 * markers of test_dialect_table's group table. */
static void opencl_as_c(char *cl) {
  strip_lines(cl, "__global const void *in[");
  strip_lines(cl, "__global void *out[");
  strip(cl, "__global ");
  strip(cl, "__local ");
  strip(cl, " + (int64_t)get_global_id(0)");
  replace(cl, " += (int64_t)get_global_size(0)", "++");
  strip(cl, " + (int64_t)get_group_id(0)");
  replace(cl, " += (int64_t)get_num_groups(0)", "++");
  replace(cl, " + l_;", ";"); /* a LANES loop starts at the work-item's index in its row */
  replace(cl, "(int64_t)get_local_id(0)", "LID");
  replace(cl, "barrier(CLK_LOCAL_MEM_FENCE);", "BARRIER;");
  strip_lines(cl, "if (err_) atomic_or(err_buf + err_i, err_);");
}

/* The test graphs: 0 a LOOP kernel, 1 a row sum, 2 softmax (max, sum of
 * exp, a row-space output) beside the row sum (a kept-space output), 3 a
 * batched matmul of odd sizes, 4 a padded 3x3 convolution of 3 to 4
 * channels over 5x5. */
static fsl_graph *table_graph(int t) {
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  if (t == 4) {
    int64_t xd[] = {1, 3, 5, 5}, wd[] = {4, 3, 3, 3}, one[] = {1, 1}, pads[] = {1, 1, 1, 1};
    fsl_value *z = fsl_b_conv(&b, input(g, "x", 4, xd), input(g, "w", 4, wd), one, one, pads, 1, NULL);
    assert_int_equal(b.st, FSL_OK);
    fsl_graph_add_output(g, z);
    return g;
  }
  if (t == 3) {
    int64_t ad[] = {2, 7, 13}, bd[] = {2, 13, 5};
    fsl_value *z = fsl_b_matmul(&b, input(g, "a", 3, ad), input(g, "b", 3, bd));
    assert_int_equal(b.st, FSL_OK);
    fsl_graph_add_output(g, z);
    return g;
  }
  int64_t dims[] = {3, 5}, axis = 1;
  fsl_value *x = input(g, "x", 2, dims);
  fsl_value *y = fsl_b_binary_scalar(&b, FSL_OP_mul, fsl_b_unary(&b, FSL_OP_tanh, x), 2.0);
  if (t >= 1) {
    fsl_value *sum = fsl_b_reduce(&b, FSL_OP_reduce_sum, y, &axis, 1, true);
    if (t == 2) {
      fsl_value *m = fsl_b_reduce(&b, FSL_OP_reduce_max, x, &axis, 1, true);
      fsl_value *e = fsl_b_unary(&b, FSL_OP_exp, fsl_b_binary(&b, FSL_OP_sub, x, m));
      fsl_graph_add_output(g, fsl_b_binary(&b, FSL_OP_div, e, fsl_b_reduce(&b, FSL_OP_reduce_sum, e, &axis, 1, true)));
    }
    y = sum;
  }
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, y);
  return g;
}

/* The same kernels (LOOP, REDUCE, matmul, conv) in C and OpenCL C differ
 * only where the dialect table says.  Without work-groups (the OpenCL dialect with group NULL, one
 * thread per element or row): after opencl_as_c the texts are equal to
 * C's with OpenCL's par_min (0: every thread runs the kernel, PARALLEL
 * loops divide the work), OpenMP pragmas and the error report removed.
 * With work-groups (REDUCE rows, the tiled matmul): the same holds against
 * the C dialect given a group table of markers (C prints GROUPS and LANES
 * loops as plain loops): the tree, the tiles and the loop structure are
 * the shared generator's.  The launch is reported for group kernels only. */
static void test_dialect_table(void **state) {
  (void)state;
  static const fsl_cg_group markers = {.size = 64, .tile = 16, .local_bytes = 32768, .local_kw = "", .local_id = "LID",
                                       .barrier = "BARRIER;"};
  fsl_dialect c0 = fsl_dialect_c, o0 = fsl_dialect_opencl;
  c0.par_min = fsl_dialect_opencl.par_min;
  o0.group = NULL;
  fsl_dialect c1 = c0;
  c1.group = &markers;
  for (int t = 0; t < 5; t++)
    for (int grp = 0; grp < 2; grp++) {
      fsl_graph *g = table_graph(t);
      fsl_cg_launch lc = {.group_size = -1}, lo = {.group_size = -1};
      char *c = render(grp ? &c1 : &c0, g, &lc), *cl = render(grp ? &fsl_dialect_opencl : &o0, g, &lo);
      if (t == 0) assert_non_null(strstr(cl, "__global const void *in[1] = {p0 + o0};"));
      assert_non_null(strstr(cl, grp && t ? "get_group_id(0)" : "get_global_id(0)"));
      assert_int_equal(lc.group_size, lo.group_size);
      assert_int_equal(lc.groups, lo.groups);
      /* rows of 5 elements with 8 work-items each, the 3 rows in one group of 4 rows; the matmul's 7 x 5 in
       * one 16 x 16 tile per batch; the conv's 4 channels x 25 positions in two */
      int want_size[] = {0, 32, 32, 256, 256}, want_groups[] = {0, 1, 1, 2, 2};
      assert_int_equal(lo.group_size, grp ? want_size[t] : 0);
      assert_int_equal(lo.groups, grp ? want_groups[t] : 0);
      if (grp && t == 2) {
        assert_non_null(strstr(cl, "__local float lr1[32];")); /* the row max, 8 partials per row */
        assert_non_null(strstr(cl, "fsl_maxf(lr1[q_ * 8 + l_], lr1[q_ * 8 + l_ + s_])"));
      }
      opencl_as_c(cl);
      strip_lines(c, "#pragma omp");
      strip_lines(c, "return err_;");
      strip_lines(c, "return 0;");
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
  void *want[8] = {0}, *got[8] = {0};
  assert_int_equal(fsl_ref_run(g, (const void *const *)inputs, want), FSL_OK);
  void *exe = NULL;
  fsl_status st = fsl_backend_opencl.compile(&p, NULL, &exe);
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

/* Sums, maxima, minima, an integer maximum, softmax and argmax/argmin
 * over rows of 1, 2, 5, 17, 63, 64, 65 and 1000 elements (shorter than,
 * as long as and longer than a 64-item work-group), with 3 and 130 rows:
 * rows of more than one element run with a power of two of work-items
 * each (8 for rows of 5), rows shorter than a group several to a group
 * (R rows: up to 64 work-items, no more rows than there are, 130 rows of
 * 5 in 17 groups of 8 rows, the last with 2), in one kernel (greedy) and
 * one kernel per node (unfused). */
static void test_reduce_rows(void **state) {
  (void)state;
  if (!have_device()) skip();
  int64_t lens[] = {1, 2, 5, 17, 63, 64, 65, 1000}, rows[] = {3, 130};
  int lanes[] = {0, 2, 8, 32, 64, 64, 64, 64}; /* work-items per row: none (one work-item per row), a power of two up to 64 */
  for (int t = 0; t < 8; t++)
    for (int r = 0; r < 2; r++) {
      fsl_graph *g = fsl_graph_new();
      fsl_value *x = reduce_rows_graph(g, rows[r], lens[t]);
      int R = 1;
      while (lanes[t] && R * 2 * lanes[t] <= 64 && R < rows[r]) R *= 2;
      fsl_cg_launch l = {.group_size = -1};
      free(render(&fsl_dialect_opencl, g, &l));
      assert_int_equal(l.group_size, lanes[t] * R);
      if (lanes[t]) assert_int_equal(l.groups, (rows[r] + R - 1) / R);
      void *in[] = {random_data(x, -4, 4)};
      char what[64];
      snprintf(what, sizeof what, "reduce %lld rows of %lld", (long long)rows[r], (long long)lens[t]);
      check_on_device(g, in, FSL_STRATEGY_GREEDY, 1e-4, what); /* f32 block sums (docs/primitives.md) */
      check_on_device(g, in, FSL_STRATEGY_UNFUSED, 1e-4, what);
      free(in[0]);
      fsl_graph_free(g);
    }
}

/* The tiled matmul (16 x 16 work-items per tile of the result, the K axis
 * through local tiles) at odd sizes: 1x1x1, 7x13x5, 65x33x17 and a batch
 * of 3 of 20x30x40 (M x K x N), alone (unfused) and with a bias + ReLU
 * epilogue (greedy: one LINEAR kernel, the epilogue computed before the
 * tile's store). */
static void test_matmul_sizes(void **state) {
  (void)state;
  if (!have_device()) skip();
  int64_t sz[][4] = {{1, 1, 1, 1}, {1, 7, 13, 5}, {1, 65, 33, 17}, {3, 20, 30, 40}};
  for (int t = 0; t < 4; t++) {
    fsl_graph *g = fsl_graph_new();
    fsl_builder b = B_INIT(g);
    int64_t ad[] = {sz[t][0], sz[t][1], sz[t][2]}, bd[] = {sz[t][0], sz[t][2], sz[t][3]}, cd[] = {sz[t][3]};
    fsl_value *a = input(g, "a", 3, ad), *w = input(g, "b", 3, bd), *c = input(g, "c", 1, cd);
    fsl_value *z = fsl_b_matmul(&b, a, w);
    fsl_value *y = fsl_b_binary_scalar(&b, FSL_OP_max, fsl_b_binary(&b, FSL_OP_add, z, c), 0.0);
    assert_int_equal(b.st, FSL_OK);
    fsl_graph_add_output(g, y);
    void *in[] = {random_data(a, -1, 1), random_data(w, -1, 1), random_data(c, -1, 1)};
    char what[64];
    snprintf(what, sizeof what, "matmul %lld x %lldx%lldx%lld", (long long)sz[t][0], (long long)sz[t][1],
             (long long)sz[t][2], (long long)sz[t][3]);
    check_on_device(g, in, FSL_STRATEGY_GREEDY, 1e-5, what);
    check_on_device(g, in, FSL_STRATEGY_UNFUSED, 1e-5, what);
    for (int i = 0; i < 3; i++) free(in[i]);
    fsl_graph_free(g);
  }
}

/* The convolution as an implicit matmul through local tiles: 2-D with
 * pads and a 1x1 image, strides, dilations, groups (depthwise too),
 * lhs dilation (ConvTranspose's form) and a 1-D case, with a bias + ReLU
 * epilogue (greedy) and alone (unfused). */
static void test_conv_tiles(void **state) {
  (void)state;
  if (!have_device()) skip();
  /* N, C, M, group, spatial rank, input size, kernel size, stride, dilation, pad, lhs dilation */
  int64_t cs[][11] = {{1, 3, 5, 1, 2, 7, 3, 1, 1, 1, 1},  {2, 4, 6, 2, 2, 9, 3, 2, 1, 0, 1}, {1, 8, 8, 8, 2, 5, 3, 1, 2, 2, 1},
                      {1, 2, 3, 1, 2, 4, 3, 1, 1, 2, 2},  {1, 17, 33, 1, 2, 1, 1, 1, 1, 0, 1}, {3, 5, 7, 1, 1, 20, 4, 3, 1, 1, 1}};
  for (int t = 0; t < 6; t++) {
    const int64_t *c = cs[t];
    int k = (int)c[4];
    fsl_graph *g = fsl_graph_new();
    fsl_builder b = B_INIT(g);
    int64_t xd[4] = {c[0], c[1], c[5], c[5]}, wd[4] = {c[2], c[1] / c[3], c[6], c[6]}, bd[3] = {c[2], 1, 1};
    int64_t st[2] = {c[7], c[7]}, dl[2] = {c[8], c[8]}, pads[4] = {c[9], c[9], c[9], c[9]}, ld[2] = {c[10], c[10]};
    fsl_value *x = input(g, "x", 2 + k, xd), *w = input(g, "w", 2 + k, wd), *bias = input(g, "b", 1 + k, bd);
    fsl_value *y = fsl_b_conv(&b, x, w, st, dl, pads, c[3], ld);
    y = fsl_b_binary_scalar(&b, FSL_OP_max, fsl_b_binary(&b, FSL_OP_add, y, bias), 0.0);
    assert_int_equal(b.st, FSL_OK);
    fsl_graph_add_output(g, y);
    void *in[] = {random_data(x, -1, 1), random_data(w, -1, 1), random_data(bias, -1, 1)};
    char what[64];
    snprintf(what, sizeof what, "conv case %d", t);
    check_on_device(g, in, FSL_STRATEGY_GREEDY, 1e-5, what);
    check_on_device(g, in, FSL_STRATEGY_UNFUSED, 1e-5, what);
    for (int i = 0; i < 3; i++) free(in[i]);
    fsl_graph_free(g);
  }
}

/* The plan running all of g as one kernel (verified). */
static fsl_plan one_kernel_plan(fsl_graph *g, const char *what) {
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
  if (!k) fprintf(stderr, "%s: not one legal kernel: %s\n", what, why ? why : "?");
  assert_non_null(k);
  p.kernels.k = malloc(sizeof(fsl_kernel *));
  assert_non_null(p.kernels.k);
  p.kernels.k[0] = k;
  p.kernels.n = p.kernels.cap = 1;
  assert_int_equal(fsl_plan_verify(&p), FSL_OK);
  return p;
}

/* The GEN steps of plan p lowered in the OpenCL dialect (no device
 * needed), and how many of them are standalone epilogues. */
static int gen_steps(const fsl_plan *p, int *n_epilogue) {
  fsl_lowering low;
  assert_int_equal(fsl_lowering_init(&low, p->g, &fsl_dialect_opencl, &fsl_gpu_generated, NULL, 0), FSL_OK);
  assert_int_equal(fsl_lower_plan(&low, p), FSL_OK);
  int n = 0;
  *n_epilogue = 0;
  for (int i = 0; i < low.n_steps; i++) {
    assert_int_equal(low.steps[i].kind, FSL_STEP_GEN);
    n++;
    *n_epilogue += strcmp(low.steps[i].part, "epilogue") == 0;
  }
  fsl_lowering_free(&low);
  return n;
}

/* Graph g (case t of `what`) as one LINEAR kernel: its GEN steps and how
 * many of them are standalone epilogues, then, with a device, the plan on
 * random inputs (every graph input, in order) against the reference. */
static void check_one_linear_kernel(fsl_graph *g, const char *what, int t, int want_steps, int want_epilogues) {
  fsl_plan p = one_kernel_plan(g, what);
  int n_epi = 0, n = gen_steps(&p, &n_epi);
  assert_int_equal(n, want_steps);
  assert_int_equal(n_epi, want_epilogues);
  void *in[4];
  assert_true(g->n_inputs <= 4);
  for (int i = 0; i < g->n_inputs; i++) in[i] = random_data(g->inputs[i], -1, 1);
  char buf[64];
  snprintf(buf, sizeof buf, "%s case %d", what, t);
  if (have_device()) check_plan_on_device(g, p, in, 1e-5, buf);
  else fsl_plan_free(&p);
  for (int i = 0; i < g->n_inputs; i++) free(in[i]);
}

/* A LINEAR kernel's epilogue runs inside the generated matmul / conv,
 * before the store, when it is a closed chain of elementwise nodes and
 * reshapes over the linear output (fsl_linear_split_fused): bias + ReLU
 * through a reshape after a batch-folded matmul; conv + bias + SiLU
 * (x * sigmoid(x) reads x twice) + a residual add of the conv's input;
 * a chain whose middle value is a graph output, of which only the
 * closed prefix (bias) is fused and the rest stays a launch of its own;
 * a projection + bias split into heads (reshape + permute: the store
 * writes each element at its transposed place); and heads merged back
 * (permute + reshape) before a bias, which a tail of moves cannot take, so
 * the bias stays a launch of its own.  Each plan is the graph as one
 * LINEAR kernel, checked against the reference on the device. */
static void test_linear_epilogue_fused(void **state) {
  (void)state;
  for (int t = 0; t < 5; t++) {
    fsl_graph *g = fsl_graph_new();
    fsl_builder b = B_INIT(g);
    fsl_value *x, *w, *c, *y, *mid = NULL;
    if (t == 3) {
      /* a projection + bias split into heads: [18, 12] -> [2, 9, 3, 4] -> [2, 3, 9, 4] */
      int64_t xd[] = {18, 6}, wd[] = {6, 12}, cd[] = {12}, heads[] = {2, 9, 3, 4}, perm[] = {0, 2, 1, 3};
      x = input(g, "x", 2, xd);
      w = input(g, "w", 2, wd);
      c = input(g, "c", 1, cd);
      y = fsl_b_binary(&b, FSL_OP_add, fsl_b_matmul(&b, x, w), c);
      y = fsl_b_permute(&b, fsl_b_reshape(&b, y, 4, heads), perm);
    } else if (t == 4) {
      /* attention's heads merged back, then a bias the tail cannot take: [2, 3, 9, 4] -> [2, 9, 3, 4] -> [2, 9, 12] */
      int64_t xd[] = {2, 3, 9, 5}, wd[] = {2, 3, 5, 4}, cd[] = {12}, merged[] = {2, 9, 12}, perm[] = {0, 2, 1, 3};
      x = input(g, "p", 4, xd);
      w = input(g, "v", 4, wd);
      c = input(g, "c", 1, cd);
      y = fsl_b_reshape(&b, fsl_b_permute(&b, fsl_b_matmul(&b, x, w), perm), 3, merged);
      y = fsl_b_binary(&b, FSL_OP_add, y, c);
    } else if (t == 0) {
      int64_t xd[] = {2, 9, 6}, wd[] = {6, 7}, cd[] = {7}, flat[] = {18, 6}, back[] = {2, 9, 7};
      x = input(g, "x", 3, xd);
      w = input(g, "w", 2, wd);
      c = input(g, "c", 1, cd);
      y = fsl_b_reshape(&b, fsl_b_matmul(&b, fsl_b_reshape(&b, x, 2, flat), w), 3, back);
      y = fsl_b_binary_scalar(&b, FSL_OP_max, fsl_b_binary(&b, FSL_OP_add, y, c), 0.0);
    } else {
      int64_t xd[] = {2, 4, 7, 7}, wd[] = {4, 4, 3, 3}, cd[] = {4, 1, 1}, one[] = {1, 1}, pads[] = {1, 1, 1, 1};
      x = input(g, "x", 4, xd);
      w = input(g, "w", 4, wd);
      c = input(g, "c", 3, cd);
      y = fsl_b_binary(&b, FSL_OP_add, fsl_b_conv(&b, x, w, one, one, pads, 1, one), c);
      if (t == 2) mid = y;
      y = fsl_b_binary(&b, FSL_OP_mul, y, fsl_b_unary(&b, FSL_OP_sigmoid, y));
      y = fsl_b_binary(&b, FSL_OP_add, y, x);
    }
    assert_int_equal(b.st, FSL_OK);
    fsl_graph_add_output(g, y);
    if (mid) fsl_graph_add_output(g, mid);
    check_one_linear_kernel(g, "fused epilogue", t, t == 2 || t == 4 ? 2 : 1, t == 2 || t == 4 ? 1 : 0);
    fsl_graph_free(g);
  }
}

/* A tiled matmul reads a prologue of movement views in place
 * (fsl_linear_split_views): attention's Q @ K^T with Q and K taken from
 * [batch, seq, heads, dim] by permutes, plus a scale and a mask add fused
 * after it (1 step); a weight broadcast to the batch by expand and sliced
 * (1 step); and q @ q^T, where q is read twice (by the matmul and by the
 * permute making q^T), which keeps its prologue function (2 steps).  Odd
 * sizes make every tile partial.  Checked against the reference on the device. */
static void test_linear_operand_views(void **state) {
  (void)state;
  for (int t = 0; t < 3; t++) {
    fsl_graph *g = fsl_graph_new();
    fsl_builder b = B_INIT(g);
    fsl_value *x, *w = NULL, *c, *y;
    int64_t pq[] = {0, 2, 1, 3};
    if (t == 0) {
      int64_t qd[] = {2, 9, 3, 5}, kd[] = {2, 11, 3, 5}, cd[] = {2, 3, 9, 11}, pk[] = {0, 2, 3, 1};
      x = input(g, "q", 4, qd);
      w = input(g, "k", 4, kd);
      c = input(g, "mask", 4, cd);
      y = fsl_b_matmul(&b, fsl_b_permute(&b, x, pq), fsl_b_permute(&b, w, pk));
      y = fsl_b_binary(&b, FSL_OP_add, fsl_b_binary_scalar(&b, FSL_OP_mul, y, 0.5), c);
    } else if (t == 1) {
      int64_t xd[] = {3, 10, 17}, wd[] = {1, 20, 6}, cd[] = {6}, big[] = {3, 20, 6}, st[] = {0, 2, 0}, one[] = {1, 1, 1},
              sz[] = {3, 17, 6};
      x = input(g, "x", 3, xd);
      w = input(g, "w", 3, wd);
      c = input(g, "c", 1, cd);
      fsl_value *wv = fsl_b_slice(&b, fsl_b_expand(&b, w, big), st, one, sz);
      y = fsl_b_binary(&b, FSL_OP_add, fsl_b_matmul(&b, x, wv), c);
    } else {
      /* q @ q^T: q feeds the matmul and the permute making q^T */
      int64_t qd[] = {2, 9, 3, 5}, cd[] = {2, 3, 9, 9}, swap[] = {0, 1, 3, 2};
      x = input(g, "q", 4, qd);
      c = input(g, "mask", 4, cd);
      fsl_value *q = fsl_b_permute(&b, x, pq);
      y = fsl_b_binary(&b, FSL_OP_add, fsl_b_matmul(&b, q, fsl_b_permute(&b, q, swap)), c);
    }
    assert_int_equal(b.st, FSL_OK);
    fsl_graph_add_output(g, y);
    check_one_linear_kernel(g, "operand views", t, t == 2 ? 2 : 1, 0);
    fsl_graph_free(g);
  }
}

/* Work-group code only within the local memory the table allows: with
 * less than a row's accumulators or two matmul / conv tiles need, the
 * generator falls back to one work-item per row / per output element (no
 * launch geometry, no __local array). */
static void test_local_memory_fallback(void **state) {
  (void)state;
  fsl_cg_group small = *fsl_dialect_opencl.group;
  fsl_dialect d = fsl_dialect_opencl;
  d.group = &small;
  for (int t = 2; t < 5; t++) {
    fsl_graph *g = table_graph(t);
    for (int fits = 0; fits < 2; fits++) {
      /* softmax + row sum: 8 work-items of two double and one float accumulators; matmul, conv: two 16 x 16 float tiles */
      small.local_bytes = t == 2 ? (fits ? 20 * 8 : 20 * 8 - 1) : (fits ? 2048 : 2047);
      fsl_cg_launch l = {.group_size = -1};
      char *cl = render(&d, g, &l);
      assert_int_equal(l.group_size, fits ? (t == 2 ? 8 : 256) : 0);
      assert_int_equal(strstr(cl, "__local ") != NULL, fits);
      assert_int_equal(strstr(cl, "barrier(") != NULL, fits);
      free(cl);
    }
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
  fsl_plan p = one_kernel_plan(g, "split kernel");
  const fsl_kernel *k = p.kernels.k[0];
  fsl_cg_spec spec = {.g = g, .id = 0, .n_nodes = k->n_nodes, .nodes = k->nodes, .n_in = k->n_in, .in = k->in,
                      .n_out = k->n_out, .out = k->out};
  fsl_sbuf sb = {0};
  assert_int_equal(fsl_codegen_kernel(&fsl_dialect_opencl, &spec, &sb, NULL), FSL_ERR_UNSUPPORTED);
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
      cmocka_unit_test(test_matmul_sizes),
      cmocka_unit_test(test_conv_tiles),
      cmocka_unit_test(test_linear_epilogue_fused),
      cmocka_unit_test(test_linear_operand_views),
      cmocka_unit_test(test_local_memory_fallback),
      cmocka_unit_test(test_split_kernel),
      cmocka_unit_test(test_supports),
      cmocka_unit_test(test_build_failure),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
