/* test_plan.c — plans (src/orchestrate/plan.c) for every strategy on small
 * primitive graphs (softmax, matmul + bias + GELU MLP, conv + folded batch
 * norm + ReLU): each plan is verified, run kernel by kernel with the
 * reference backend (fsl_backend_ref) and compared bit for bit with the
 * reference interpreter over the whole graph; plus the roofline cost, the
 * verifier's rejections and the DOT printer. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <math.h>
#include <cmocka.h>
#include <unistd.h>
#include <dirent.h>

#include "backend/backend.h"
#include "eval/eval.h"
#include "fission/builder.h"
#include "test_graph.h"
#include "orchestrate/orchestrate.h"

/* ---- graph construction ---- */




static void finish(fsl_builder *b, fsl_value *y) {
  if (b->st != FSL_OK) fprintf(stderr, "builder: %s\n", fsl_last_error());
  assert_int_equal(b->st, FSL_OK);
  assert_non_null(y);
  assert_int_equal(fsl_graph_add_output(b->g, y), FSL_OK);
  fsl_status st = fsl_graph_verify(b->g);
  if (st != FSL_OK) fprintf(stderr, "verify: %s\n", fsl_last_error());
  assert_int_equal(st, FSL_OK);
}

/* y = softmax(x, axis 1), x: [4, 8] — one ONNX op. */
static fsl_graph *softmax_graph(void) {
  fsl_graph *g = fsl_graph_new();
  assert_non_null(g);
  fsl_builder b = {.g = g, .fold = true};
  int64_t dims[] = {4, 8}, axis = 1;
  fsl_value *x = input(g, "x", 2, dims);
  set_origin(&b, 1, "softmax", "Softmax");
  fsl_value *m = fsl_b_reduce(&b, FSL_OP_reduce_max, x, &axis, 1, true);
  fsl_value *e = fsl_b_unary(&b, FSL_OP_exp, fsl_b_binary(&b, FSL_OP_sub, x, m));
  fsl_value *s = fsl_b_reduce(&b, FSL_OP_reduce_sum, e, &axis, 1, true);
  finish(&b, fsl_b_binary(&b, FSL_OP_div, e, s));
  return g;
}

/* y = gelu(x @ W1 + b1) @ W2 (erf GELU), x: [4, 16], W1: [16, 32], W2: [32, 8]. */
static fsl_graph *mlp_graph(void) {
  fsl_graph *g = fsl_graph_new();
  assert_non_null(g);
  fsl_builder b = {.g = g, .fold = true};
  int64_t dx[] = {4, 16}, dw1[] = {16, 32}, db1[] = {32}, dw2[] = {32, 8};
  fsl_value *x = input(g, "x", 2, dx);
  fsl_value *w1 = const_f32(&b, 2, dw1, 1), *b1 = const_f32(&b, 1, db1, 2), *w2 = const_f32(&b, 2, dw2, 3);
  set_origin(&b, 1, "mm1", "MatMul");
  fsl_value *h = fsl_b_matmul(&b, x, w1);
  set_origin(&b, 2, "bias", "Add");
  h = fsl_b_binary(&b, FSL_OP_add, h, b1);
  set_origin(&b, 3, "gelu", "Gelu");
  fsl_value *t = fsl_b_unary(&b, FSL_OP_erf, fsl_b_binary_scalar(&b, FSL_OP_mul, h, 1.0 / sqrt(2.0)));
  t = fsl_b_binary_scalar(&b, FSL_OP_add, t, 1.0);
  h = fsl_b_binary(&b, FSL_OP_mul, fsl_b_binary_scalar(&b, FSL_OP_mul, h, 0.5), t);
  set_origin(&b, 4, "mm2", "MatMul");
  finish(&b, fsl_b_matmul(&b, h, w2));
  return g;
}

/* y = relu(conv(x, W) * scale + shift) (batch norm folded into a per-channel
 * affine map), x: [1, 3, 8, 8], W: [4, 3, 3, 3], pads 1. */
static fsl_graph *conv_graph(void) {
  fsl_graph *g = fsl_graph_new();
  assert_non_null(g);
  fsl_builder b = {.g = g, .fold = true};
  int64_t dx[] = {1, 3, 8, 8}, dw[] = {4, 3, 3, 3}, dc[] = {1, 4, 1, 1};
  int64_t ones[] = {1, 1}, pads[] = {1, 1, 1, 1};
  fsl_value *x = input(g, "x", 4, dx);
  fsl_value *w = const_f32(&b, 4, dw, 4), *scale = const_f32(&b, 4, dc, 5), *shift = const_f32(&b, 4, dc, 6);
  set_origin(&b, 1, "conv", "Conv");
  fsl_value *y = fsl_b_conv(&b, x, w, ones, ones, pads, 1, NULL);
  set_origin(&b, 2, "bn", "BatchNormalization");
  y = fsl_b_binary(&b, FSL_OP_add, fsl_b_binary(&b, FSL_OP_mul, y, scale), shift);
  set_origin(&b, 3, "relu", "Relu");
  finish(&b, fsl_b_binary(&b, FSL_OP_max, y, fsl_b_scalar(&b, FSL_DT_F32, 0.0)));
  return g;
}

/* ---- plans ---- */

/* Runs plan p with the reference backend and compares with fsl_ref_run. */
static void check_run(const fsl_plan *p) {
  const fsl_graph *g = p->g;
  void *in[4] = {0};
  assert_true(g->n_inputs <= 4 && g->n_outputs <= 4);
  for (int i = 0; i < g->n_inputs; i++) {
    int64_t n = fsl_value_numel(g->inputs[i]);
    in[i] = malloc(sizeof(float) * (size_t)n);
    assert_non_null(in[i]);
    fill(in[i], n, 100 + (uint32_t)i);
  }
  void *want[4] = {0}, *got[4] = {0}, *exe = NULL;
  fsl_status st = fsl_ref_run(g, (const void *const *)in, want);
  if (st != FSL_OK) fprintf(stderr, "ref run: %s\n", fsl_last_error());
  assert_int_equal(st, FSL_OK);
  st = fsl_backend_ref.compile(p, NULL, &exe);
  if (st != FSL_OK) fprintf(stderr, "compile: %s\n", fsl_last_error());
  assert_int_equal(st, FSL_OK);
  st = fsl_backend_ref.run(exe, (const void *const *)in, got);
  if (st != FSL_OK) fprintf(stderr, "plan run: %s\n", fsl_last_error());
  assert_int_equal(st, FSL_OK);
  for (int i = 0; i < g->n_outputs; i++) {
    assert_non_null(got[i]);
    assert_memory_equal(got[i], want[i], (size_t)fsl_value_nbytes(g->outputs[i]));
  }
  fsl_backend_ref.free_exe(exe);
  for (int i = 0; i < 4; i++) {
    free(in[i]);
    free(want[i]);
    free(got[i]);
  }
}

static void check_dot(const fsl_plan *p) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  assert_non_null(f);
  fsl_plan_print_dot(p, f);
  fclose(f);
  assert_non_null(strstr(text, "digraph"));
  assert_non_null(strstr(text, "cluster_k0"));
  static const char *const kinds[] = {"loop", "reduce", "linear", "opaque"};
  char want[64];
  snprintf(want, sizeof want, "\"k0 %s ", kinds[p->kernels.k[0]->kind]);
  assert_non_null(strstr(text, want));
  assert_non_null(strstr(text, "shape=ellipse"));
  free(text);
}

/* Builds, verifies, runs every strategy's plan of g; optimal must exist and
 * use no more kernels than unfused. */
static void check_strategies(fsl_graph *g) {
  int n_kernels[FSL_STRATEGY_COUNT];
  for (int s = 0; s < FSL_STRATEGY_COUNT; s++) {
    n_kernels[s] = -1;
    fsl_plan p;
    fsl_status st = fsl_plan_build(g, (fsl_strategy)s, NULL, &p);
    if (st == FSL_ERR_UNSUPPORTED && s != FSL_STRATEGY_OPTIMAL) {
      fprintf(stderr, "note: %s plan not available yet: %s\n", fsl_strategy_name((fsl_strategy)s), fsl_last_error());
      continue;
    }
    if (st != FSL_OK) fprintf(stderr, "%s plan: %s\n", fsl_strategy_name((fsl_strategy)s), fsl_last_error());
    assert_int_equal(st, FSL_OK);
    assert_ptr_equal(p.g, g);
    assert_int_equal(p.strategy, s);
    assert_true(p.kernels.n >= 1);
    assert_true(p.orchestrate_s >= 0);
    double sum = 0;
    for (int i = 0; i < p.kernels.n; i++) {
      assert_int_equal(p.kernels.k[i]->id, i);
      assert_true(p.kernels.k[i]->cost_s > 0);
      sum += p.kernels.k[i]->cost_s;
    }
    assert_true(fabs(sum - p.predicted_s) <= 1e-12 + 1e-9 * sum);
    st = fsl_plan_verify(&p);
    if (st != FSL_OK) fprintf(stderr, "verify: %s\n", fsl_last_error());
    assert_int_equal(st, FSL_OK);
    check_run(&p);
    check_dot(&p);
    n_kernels[s] = p.kernels.n;
    fsl_plan_free(&p);
    assert_int_equal(p.kernels.n, 0);
  }
  assert_true(n_kernels[FSL_STRATEGY_OPTIMAL] >= 1);
  if (n_kernels[FSL_STRATEGY_UNFUSED] >= 0)
    assert_true(n_kernels[FSL_STRATEGY_OPTIMAL] <= n_kernels[FSL_STRATEGY_UNFUSED]);
}

static void test_softmax(void **state) {
  (void)state;
  fsl_graph *g = softmax_graph();
  check_strategies(g);
  /* the whole softmax is one reduce kernel */
  fsl_plan p;
  assert_int_equal(fsl_plan_build(g, FSL_STRATEGY_OPTIMAL, NULL, &p), FSL_OK);
  assert_int_equal(p.kernels.n, 1);
  assert_int_equal(p.kernels.k[0]->kind, FSL_KERNEL_REDUCE);
  fsl_plan_free(&p);
  fsl_graph_free(g);
}

static void test_mlp(void **state) {
  (void)state;
  fsl_graph *g = mlp_graph();
  check_strategies(g);
  fsl_graph_free(g);
}

static void test_conv(void **state) {
  (void)state;
  fsl_graph *g = conv_graph();
  check_strategies(g);
  fsl_graph_free(g);
}

/* The verifier rejects kernels out of order and a missing graph output. */
static void test_verify_rejects(void **state) {
  (void)state;
  fsl_graph *g = mlp_graph();
  fsl_plan p;
  assert_int_equal(fsl_plan_build(g, FSL_STRATEGY_OPTIMAL, NULL, &p), FSL_OK);
  int n = p.kernels.n;
  assert_true(n >= 2);  /* two matmuls cannot share a kernel */
  fsl_kernel *first = p.kernels.k[0];
  p.kernels.k[0] = p.kernels.k[n - 1];
  p.kernels.k[n - 1] = first;
  assert_int_equal(fsl_plan_verify(&p), FSL_ERR_INVALID);
  assert_non_null(strstr(fsl_last_error(), "reads"));
  void *exe = NULL;
  assert_int_equal(fsl_backend_ref.compile(&p, NULL, &exe), FSL_ERR_INVALID);
  assert_null(exe);
  p.kernels.k[n - 1] = p.kernels.k[0];
  p.kernels.k[0] = first;
  assert_int_equal(fsl_plan_verify(&p), FSL_OK);
  p.kernels.n = n - 1;  /* drop the kernel that writes the output */
  assert_int_equal(fsl_plan_verify(&p), FSL_ERR_INVALID);
  assert_non_null(strstr(fsl_last_error(), "output"));
  p.kernels.n = n;
  fsl_plan_free(&p);
  fsl_graph_free(g);
}

/* fsl_plan_sink_const_views (constviews.c): y1 = x + x and y2 = exp(x) * e
 * with e = expand(c), c a [1, 8] constant.  With e computed in y1's kernel
 * (layout 0) or in a kernel of its own (layout 1) and written for y2's,
 * y2's kernel takes the expand in: nobody writes or reads e any more, y1's
 * kernel drops the expand and the kernel of its own leaves the plan.
 * Every plan verifies and runs like the reference interpreter. */
static void test_sink_const_views(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  assert_non_null(g);
  fsl_builder b = {.g = g, .fold = false};
  int64_t dx[] = {4, 8}, dc[] = {1, 8};
  fsl_value *x = input(g, "x", 2, dx);
  set_origin(&b, 1, "add", "Add");
  fsl_value *y1 = fsl_b_binary(&b, FSL_OP_add, x, x);
  set_origin(&b, 2, "mul", "Mul");
  fsl_value *e = fsl_b_expand(&b, const_f32(&b, 2, dc, 7), dx);
  fsl_value *y2 = fsl_b_binary(&b, FSL_OP_mul, fsl_b_unary(&b, FSL_OP_exp, x), e);
  assert_int_equal(fsl_graph_add_output(g, y1), FSL_OK);
  finish(&b, y2);
  int *topo = fsl_graph_topo_index(g);
  assert_non_null(topo);
  fsl_node *ne = e->producer, *n1 = y1->producer, *n2 = y2->producer, *nx = y2->producer->in[0]->producer;
  for (int layout = 0; layout < 2; layout++) {
    /* layout 0: {add, expand} {exp, mul}; layout 1: {expand} {add} {exp, mul} */
    fsl_node *sets[3][2] = {{n1, ne}, {nx, n2}, {NULL, NULL}};
    int sizes[3] = {2, 2, 0}, nk = 2;
    if (layout == 1) {
      sets[0][0] = ne, sizes[0] = 1;
      sets[1][0] = n1, sizes[1] = 1;
      sets[2][0] = nx, sets[2][1] = n2, sizes[2] = 2;
      nk = 3;
    }
    fsl_plan p = {.g = g, .strategy = FSL_STRATEGY_GREEDY, .kernels = {.g = g}};
    p.kernels.k = calloc(3, sizeof *p.kernels.k);
    assert_non_null(p.kernels.k);
    p.kernels.cap = 3;
    for (int i = 0; i < nk; i++) {
      assert_int_equal(fsl_kernel_make(g, topo, sets[i], sizes[i], &p.kernels.k[i], NULL), FSL_OK);
      assert_non_null(p.kernels.k[i]);
      p.kernels.k[i]->id = i;
      p.kernels.n++;
    }
    assert_int_equal(fsl_plan_verify(&p), FSL_OK);
    int sunk = -1;
    assert_int_equal(fsl_plan_sink_const_views(g, 0, &p.kernels, &sunk), FSL_OK);
    assert_int_equal(sunk, 1);
    assert_int_equal(p.kernels.n, 2);
    int holders = 0;
    for (int i = 0; i < p.kernels.n; i++) {
      const fsl_kernel *k = p.kernels.k[i];
      for (int o = 0; o < k->n_out; o++) assert_ptr_not_equal(k->out[o], e); /* nobody writes e */
      for (int m = 0; m < k->n_in; m++) assert_ptr_not_equal(k->in[m], e);   /* nor reads it */
      for (int m = 0; m < k->n_nodes; m++) holders += k->nodes[m] == ne;
    }
    assert_int_equal(holders, 1); /* y2's kernel alone computes it */
    assert_int_equal(fsl_plan_verify(&p), FSL_OK);
    check_run(&p);
    fsl_plan_free(&p);
  }
  free(topo);
  fsl_graph_free(g);
}

/* ---- cost ---- */

static void test_cost(void **state) {
  (void)state;
  fsl_device d;
  fsl_device_default(&d);
  assert_true(d.bandwidth == 10e9 && d.peak_flops == 50e9 && d.elem_flops == 8e9 && d.launch_s == 5e-6);
  /* memory bound: 1 MB at 10 GB/s + launch (no nodes: no compute) */
  fsl_kernel k = {0};
  k.bytes = 1e6;
  k.flops = 1e3;
  double t = fsl_kernel_cost(&k, &d);
  assert_true(fabs(t - (1e-4 + 5e-6)) < 1e-12);
  assert_true(k.cost_s == t);
  /* the whole MLP as one kernel: matmuls at the sgemm rate ([4,16] x
   * [16,32] and [4,32] x [32,8]: 2 M N K each), the GELU epilogue as
   * elementwise work over its 4 x 32 elements: the erf weighs 16 units,
   * every other elementwise op 1, the bias broadcast (a view) 0 */
  fsl_graph *g = mlp_graph();
  fsl_node *all[64];
  int n = 0, n_erf = 0, n_cheap = 0;
  for (int i = 0; i < g->n_nodes && n < 64; i++) {
    fsl_node *nd = g->nodes[i];
    all[n++] = nd;
    fsl_kind kd = fsl_op_get(nd->op)->kind;
    if (nd->op == FSL_OP_erf) n_erf++;
    else if (kd == FSL_KIND_ELEMENTWISE) n_cheap++;
    else assert_true(kd == FSL_KIND_LINEAR || kd == FSL_KIND_MOVEMENT);
  }
  assert_int_equal(n_erf, 1);
  assert_int_equal(n_cheap, 5);  /* bias add, x/sqrt(2), +1, x*0.5, product */
  double lin = 2.0 * 4 * 32 * 16 + 2.0 * 4 * 8 * 32, work = 128.0 * (16 + 5);
  fsl_kernel km = {0};
  km.n_nodes = n;
  km.nodes = all;
  km.bytes = 0;
  assert_true(fabs(fsl_kernel_cost(&km, &d) - (lin / 50e9 + work / 8e9 + 5e-6)) < 1e-15);
  /* bytes dominate once they take longer than the compute */
  km.bytes = 1e5;
  assert_true(fabs(fsl_kernel_cost(&km, &d) - (1e5 / 10e9 + 5e-6)) < 1e-15);
  fsl_graph_free(g);
  assert_string_equal(fsl_strategy_name(FSL_STRATEGY_OPTIMAL), "optimal");
  assert_string_equal(fsl_strategy_name(FSL_STRATEGY_UNFUSED), "unfused");
}

/* A conv the device runs as Winograd F(2x2,3x3) (fsl_device.winograd_3x3:
 * dense 3x3, stride and dilation 1, constant weights, C, K >= 64 with
 * C x K >= 8192, 24 MFLOP or more direct) costs its 16 products per 2x2
 * output tile (tiles rounded up, per image); the near misses and a device
 * without Winograd cost the direct convolution. */
static void test_cost_winograd(void **state) {
  (void)state;
  fsl_device d;
  fsl_device_default(&d);
  struct {
    int64_t c, k, stride, dilation;
    bool const_w, wino_dev, wino;
  } cases[] = {
      {96, 96, 1, 1, true, true, true},   {96, 96, 1, 1, true, false, false}, {96, 96, 2, 1, true, true, false},
      {96, 96, 1, 2, true, true, false},  {96, 96, 1, 1, false, true, false}, {64, 64, 1, 1, true, true, false},
      {64, 128, 1, 1, true, true, true},  {32, 256, 1, 1, true, true, false},
  };
  for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
    fsl_graph *g = fsl_graph_new();
    fsl_builder b = {.g = g, .fold = true};
    int64_t dx[] = {2, cases[t].c, 25, 25}, dw[] = {cases[t].k, cases[t].c, 3, 3}, pads[] = {1, 1, 1, 1};
    int64_t st[] = {cases[t].stride, cases[t].stride}, dl[] = {cases[t].dilation, cases[t].dilation};
    fsl_value *x = input(g, "x", 4, dx);
    fsl_value *w = cases[t].const_w ? const_f32(&b, 4, dw, 9) : input(g, "w", 4, dw);
    fsl_value *y = fsl_b_conv(&b, x, w, st, dl, pads, 1, NULL);
    finish(&b, y);
    fsl_node *conv = y->producer;
    fsl_kernel k = {0};
    k.n_nodes = 1;
    k.nodes = &conv;
    d.winograd_3x3 = cases[t].wino_dev;
    double direct = 2.0 * (double)fsl_value_numel(y) * (double)cases[t].c * 9.0;
    double tiles = 2.0 * (double)((y->dims[2] + 1) / 2) * (double)((y->dims[3] + 1) / 2);
    double want = cases[t].wino ? 2.0 * 16 * tiles * (double)cases[t].c * (double)cases[t].k : direct;
    assert_true(direct >= 24e6 || cases[t].stride > 1 || cases[t].dilation > 1);
    assert_true(fabs(fsl_kernel_cost(&k, &d) - (want / d.peak_flops + d.launch_s)) < 1e-12);
    fsl_graph_free(g);
  }
}

/* A pooling window after a sigmoid, in one kernel: the generated code
 * evaluates the sigmoid once per window element (9 times per element for a
 * 3x3 window, stride 1), and the cost says so; likewise once per gathered
 * element; a reduction's result reused
 * through a broadcast (layer norm's mean) is not recomputed. */
static void test_cost_counts_recomputation(void **state) {
  (void)state;
  fsl_device d;
  fsl_device_default(&d);
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = {.g = g};
  int64_t dx[] = {1, 8, 32, 32};
  fsl_value *x = input(g, "x", 4, dx);
  fsl_value *s = fsl_b_unary(&b, FSL_OP_sigmoid, x);
  int64_t pads[8] = {0, 0, 1, 1, 0, 0, 1, 1};
  fsl_value *p = fsl_b_pad(&b, s, pads, 0, -1e30);
  int64_t win[] = {3, 3}, one[] = {1, 1};
  fsl_value *w = fsl_b_window(&b, p, 2, win, one, one);
  int64_t axes[] = {4, 5};
  fsl_value *y = fsl_b_reduce(&b, FSL_OP_reduce_max, w, axes, 2, false);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, y);
  fsl_kernel k = {0};
  k.n_nodes = g->n_nodes;
  k.nodes = g->nodes;
  double elems = 8.0 * 32 * 32, sig = fsl_op_get(FSL_OP_sigmoid)->cost, mx = fsl_op_get(FSL_OP_reduce_max)->cost;
  /* sigmoid: the window reads the padded sigmoid (34x34 per 32x32) 9 times
   * per output element; max over 9 taps per output, each tap also paying
   * the window's load */
  double dup = 9.0 * 32 * 32 / (34.0 * 34);
  double want = (elems * sig * dup + 9 * elems * (mx + FSL_COST_WINDOW_TAP)) / d.elem_flops + d.launch_s;
  assert_true(fabs(fsl_kernel_cost(&k, &d) - want) < 1e-12);
  fsl_graph_free(g);
  /* a gather upsampling a sigmoid 4x along an axis (nearest Resize): the
   * sigmoid is evaluated 4 times per element, the gather once per output */
  g = fsl_graph_new();
  b = (fsl_builder){.g = g};
  int64_t dg[] = {8, 16}, di[] = {64}, idx[64];
  for (int i = 0; i < 64; i++) idx[i] = i / 4;
  x = input(g, "x", 2, dg);
  s = fsl_b_unary(&b, FSL_OP_sigmoid, x);
  y = fsl_b_gather(&b, s, fsl_b_const(&b, FSL_DT_I64, 1, di, idx), 1);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, y);
  fsl_node *pair[] = {s->producer, y->producer};
  k = (fsl_kernel){.n_nodes = 2, .nodes = pair};
  want = (8.0 * 16 * sig * 4 + 8.0 * 64 * fsl_op_get(FSL_OP_gather)->cost) / d.elem_flops + d.launch_s;
  assert_true(fabs(fsl_kernel_cost(&k, &d) - want) < 1e-12);
  fsl_graph_free(g);
  /* layer norm's mean: neither the reduction nor what follows it is
   * multiplied by a broadcast */
  g = fsl_graph_new();
  b = (fsl_builder){.g = g};
  int64_t dl[] = {16, 64};
  x = input(g, "x", 2, dl);
  int64_t ax1[] = {1};
  fsl_value *m = fsl_b_reduce(&b, FSL_OP_reduce_sum, x, ax1, 1, true);
  fsl_value *c = fsl_b_binary(&b, FSL_OP_sub, x, fsl_b_expand(&b, m, dl));
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, c);
  k = (fsl_kernel){.n_nodes = g->n_nodes, .nodes = g->nodes};
  want = (16.0 * 64 * fsl_op_get(FSL_OP_reduce_sum)->cost + 16.0 * 64 * fsl_op_get(FSL_OP_sub)->cost) / d.elem_flops +
         d.launch_s;
  assert_true(fabs(fsl_kernel_cost(&k, &d) - want) < 1e-12);
  fsl_graph_free(g);
}

/* A conv + bias + SiLU (y * sigmoid(y)) that a concat takes.  A LINEAR
 * kernel {conv, bias, sigmoid} writing y and sigmoid(y) runs as the conv
 * writing y, then a generated pass reading y and writing sigmoid(y)
 * (codegen/linsplit.h): it costs two rooflines and two launches.  With
 * the mul, SiLU is a closed chain the conv computes before its store: one
 * roofline.  The optimal plan never writes both y and sigmoid(y) from the
 * conv (it used to, on a tie: yolox_nano's C3 blocks), and every plan
 * runs as the interpreter does. */
static void test_cost_linear_epilogue_pass(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = {.g = g, .fold = true};
  int64_t dx[] = {1, 8, 16, 16}, dw[] = {32, 8, 1, 1}, db[] = {1, 32, 1, 1}, ones[] = {1, 1}, pads[] = {0, 0, 0, 0};
  fsl_value *x = input(g, "x", 4, dx);
  fsl_value *w = const_f32(&b, 4, dw, 7), *bias = const_f32(&b, 4, db, 8);
  fsl_value *c = fsl_b_conv(&b, x, w, ones, ones, pads, 1, NULL);
  fsl_value *y = fsl_b_binary(&b, FSL_OP_add, c, bias);
  fsl_value *s = fsl_b_unary(&b, FSL_OP_sigmoid, y);
  fsl_value *m = fsl_b_binary(&b, FSL_OP_mul, y, s);
  fsl_value *parts[] = {m, x};
  finish(&b, fsl_b_concat(&b, parts, 2, 1));
  fsl_device d;
  fsl_device_default(&d);
  int *topo = fsl_graph_topo_index(g);
  assert_non_null(topo);
  fsl_node *nodes[16];
  int n = 0;
  for (int i = 0; i < g->n_nodes; i++)
    if (g->nodes[i] != m->producer && g->nodes[i]->op != FSL_OP_concat) nodes[n++] = g->nodes[i];
  const char *why = NULL;
  fsl_kernel *two = NULL, *silu = NULL;
  assert_int_equal(fsl_kernel_make(g, topo, nodes, n, &two, &why), FSL_OK);
  assert_non_null(two);
  assert_int_equal(two->n_out, 2); /* y and sigmoid(y) */
  nodes[n++] = m->producer;
  assert_int_equal(fsl_kernel_make(g, topo, nodes, n, &silu, &why), FSL_OK);
  assert_non_null(silu);
  assert_int_equal(silu->n_out, 1);
  double numel = 32.0 * 16 * 16, bytes = 4 * numel, lin = 2.0 * numel * 8;
  double add = fsl_op_get(FSL_OP_add)->cost, sig = fsl_op_get(FSL_OP_sigmoid)->cost, mul = fsl_op_get(FSL_OP_mul)->cost;
  /* the bias (a constant, weight-1 op) runs at the conv's rate (constant_post_ops) */
  double mem = (two->bytes - bytes) / d.bandwidth, compute = (lin + numel * add) / d.peak_flops;
  double first = (mem > compute ? mem : compute) + d.launch_s;
  mem = 2 * bytes / d.bandwidth;  /* reads y, writes sigmoid(y) */
  compute = numel * sig / d.elem_flops;
  double second = (mem > compute ? mem : compute) + d.launch_s;
  assert_true(fabs(fsl_kernel_cost(two, &d) - (first + second)) < 1e-12);
  mem = silu->bytes / d.bandwidth;
  compute = (lin + numel * add) / d.peak_flops + numel * (sig + mul) / d.elem_flops;
  assert_true(fabs(fsl_kernel_cost(silu, &d) - ((mem > compute ? mem : compute) + d.launch_s)) < 1e-12);
  assert_true(silu->cost_s < two->cost_s);
  fsl_kernel_free(two);
  fsl_kernel_free(silu);
  free(topo);
  fsl_plan p;
  assert_int_equal(fsl_plan_build(g, FSL_STRATEGY_OPTIMAL, &d, &p), FSL_OK);
  for (int i = 0; i < p.kernels.n; i++)
    for (int j = 0; j < p.kernels.k[i]->n_out; j++) assert_true(p.kernels.k[i]->out[j] != s);
  fsl_plan_free(&p);
  check_strategies(g);
  fsl_graph_free(g);
}

/* The post-ops a linear op applies to its accumulators: a conv + bias +
 * ReLU kernel costs its elementwise work at the conv's rate (oneDNN's bias
 * and eltwise post-ops run in its vector code before the store: a
 * depthwise conv alone 50 us, with bias + HardSwish 51 us), while a
 * residual Add (a second runtime tensor) and a sigmoid (a polynomial of
 * ~16 vector operations, in oneDNN as in generated code) keep the
 * elementwise rate. */
static void test_cost_constant_post_ops(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = {.g = g, .fold = true};
  int64_t dx[] = {1, 8, 16, 16}, dw[] = {8, 8, 1, 1}, db[] = {1, 8, 1, 1}, ones[] = {1, 1}, pads[] = {0, 0, 0, 0};
  fsl_value *x = input(g, "x", 4, dx);
  fsl_value *w = const_f32(&b, 4, dw, 7), *bias = const_f32(&b, 4, db, 8);
  fsl_value *c = fsl_b_conv(&b, x, w, ones, ones, pads, 1, NULL);
  fsl_value *y = fsl_b_binary(&b, FSL_OP_add, c, bias);
  fsl_value *zero = fsl_b_scalar(&b, FSL_DT_F32, 0);
  fsl_value *r = fsl_b_binary(&b, FSL_OP_max, y, fsl_b_expand(&b, zero, dx));
  fsl_value *res = fsl_b_binary(&b, FSL_OP_add, r, x);
  fsl_value *sg = fsl_b_unary(&b, FSL_OP_sigmoid, res);
  finish(&b, sg);
  fsl_device d;
  fsl_device_default(&d);
  d.bandwidth = 1e30; /* compute only */
  int *topo = fsl_graph_topo_index(g);
  assert_non_null(topo);
  double numel = 8.0 * 16 * 16, lin = 2.0 * numel * 8;
  double add = fsl_op_get(FSL_OP_add)->cost, mx = fsl_op_get(FSL_OP_max)->cost, sig = fsl_op_get(FSL_OP_sigmoid)->cost;
  struct { const fsl_value *last; double peak_work, elem_work; } cases[] = {
    {y, lin + numel * add, 0},                           /* conv + bias */
    {r, lin + numel * (add + mx), 0},                    /* + ReLU */
    {res, lin + numel * (add + mx), numel * add},        /* + residual Add */
    {sg, lin + numel * (add + mx), numel * (add + sig)}, /* + sigmoid */
  };
  for (int t = 0; t < 4; t++) {
    fsl_node *nodes[16];
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) {
      nodes[n++] = g->nodes[i];
      if (g->nodes[i] == cases[t].last->producer) break;
    }
    const char *why = NULL;
    fsl_kernel *k = NULL;
    assert_int_equal(fsl_kernel_make(g, topo, nodes, n, &k, &why), FSL_OK);
    assert_non_null(k);
    double want = cases[t].peak_work / d.peak_flops + cases[t].elem_work / d.elem_flops + d.launch_s;
    assert_true(fabs(fsl_kernel_cost(k, &d) - want) < 1e-12 * want);
    fsl_kernel_free(k);
  }
  free(topo);
  check_strategies(g);
  fsl_graph_free(g);
}

/* A conv + bias + ReLU before a MaxPool 3x3/2 (ResNet's stem), on a device
 * with the numbers of an AVX2 calibration: the optimal plan keeps the bias
 * and the ReLU in the conv (post-ops at its rate), not in the pool, where
 * they run once per window tap (2.1 times per element).  With the taps
 * priced at the max's weight alone the pool looked memory-bound and the
 * work inside it free, and the plan moved them there (0.41 -> 0.9 ms for
 * ResNet-18's pool on AVX2). */
static void test_cost_window_taps(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = {.g = g, .fold = true};
  int64_t dx[] = {1, 8, 56, 56}, dw[] = {16, 8, 3, 3}, db[] = {1, 16, 1, 1}, dy[] = {1, 16, 56, 56};
  int64_t ones[] = {1, 1}, cpads[] = {1, 1, 1, 1};
  fsl_value *x = input(g, "x", 4, dx);
  fsl_value *w = const_f32(&b, 4, dw, 7), *bias = const_f32(&b, 4, db, 8);
  fsl_value *c = fsl_b_conv(&b, x, w, ones, ones, cpads, 1, NULL);
  fsl_value *y = fsl_b_binary(&b, FSL_OP_add, c, bias);
  fsl_value *r = fsl_b_binary(&b, FSL_OP_max, y, fsl_b_expand(&b, fsl_b_scalar(&b, FSL_DT_F32, 0), dy));
  int64_t ppads[8] = {0, 0, 1, 1, 0, 0, 1, 1}, win[] = {3, 3}, two[] = {2, 2}, axes[] = {4, 5};
  fsl_value *p = fsl_b_pad(&b, r, ppads, 0, -INFINITY);
  fsl_value *mp = fsl_b_reduce(&b, FSL_OP_reduce_max, fsl_b_window(&b, p, 2, win, two, ones), axes, 2, false);
  finish(&b, mp);
  fsl_device d = {.bandwidth = 2.59e10, .peak_flops = 1.46e11, .elem_flops = 3.68e10, .launch_s = 8.5e-7};
  fsl_plan pl;
  assert_int_equal(fsl_plan_build(g, FSL_STRATEGY_OPTIMAL, &d, &pl), FSL_OK);
  int kc = -1, kr = -1, kb = -1;
  for (int i = 0; i < pl.kernels.n; i++)
    for (int j = 0; j < pl.kernels.k[i]->n_nodes; j++) {
      const fsl_node *n = pl.kernels.k[i]->nodes[j];
      if (n == c->producer) kc = i;
      if (n == y->producer) kb = i;
      if (n == r->producer) kr = i;
    }
  assert_true(kc >= 0 && kc == kb && kc == kr);
  fsl_plan_free(&pl);
  check_strategies(g);
  fsl_graph_free(g);
}

/* Attention scores q @ k^T (k^T a permute of k) + mask: on a device whose
 * linear kernels read views in place (fsl_device.linear_views) the optimal
 * plan makes the permute the matmul kernel's prologue; elsewhere (the CPU,
 * the default device), and under greedy's FuseOps rules, it is a kernel of
 * its own.  Each
 * plan runs kernel by kernel against the interpreter. */
static void test_linear_views(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  assert_non_null(g);
  fsl_builder b = {.g = g, .fold = true};
  int64_t dq[] = {2, 3, 9, 5}, dk[] = {2, 3, 11, 5}, dm[] = {2, 3, 9, 11}, swap[] = {0, 1, 3, 2};
  fsl_value *q = input(g, "q", 4, dq), *k = input(g, "k", 4, dk), *mask = input(g, "mask", 4, dm);
  fsl_value *s = fsl_b_matmul(&b, q, fsl_b_permute(&b, k, swap));
  finish(&b, fsl_b_binary(&b, FSL_OP_add, s, mask));
  const fsl_strategy strat[] = {FSL_STRATEGY_GREEDY, FSL_STRATEGY_OPTIMAL};
  for (int views = 0; views < 2; views++)
    for (int i = 0; i < 2; i++) {
      fsl_device d;
      fsl_device_default(&d);
      d.linear_views = views;
      fsl_plan p;
      assert_int_equal(fsl_plan_build(g, strat[i], &d, &p), FSL_OK);
      assert_int_equal(fsl_plan_verify(&p), FSL_OK);
      /* greedy's FuseOps rules fuse no producer into a matmul */
      assert_int_equal(p.kernels.n, views && strat[i] == FSL_STRATEGY_OPTIMAL ? 1 : 2);
      check_run(&p);
      fsl_plan_free(&p);
    }
  fsl_graph_free(g);
}

/* A chain of residual blocks h + act(h @ W_i), x: [8, 16], W_i: [16, 16]
 * (distinct random weights): every h is read by a matmul and an add, so
 * the optimal strategy cuts a region per block; `last_act` is the last
 * block's activation (max with 0 or sigmoid). */
static fsl_graph *residual_chain(int blocks, bool last_sigmoid) {
  fsl_graph *g = fsl_graph_new();
  assert_non_null(g);
  fsl_builder b = {.g = g, .fold = true};
  int64_t dx[] = {8, 16}, dw[] = {16, 16};
  fsl_value *h = input(g, "x", 2, dx);
  for (int i = 0; i < blocks; i++) {
    fsl_value *m = fsl_b_matmul(&b, h, const_f32(&b, 2, dw, 40 + (uint32_t)i));
    m = i == blocks - 1 && last_sigmoid ? fsl_b_unary(&b, FSL_OP_sigmoid, m)
                                        : fsl_b_binary(&b, FSL_OP_max, m, fsl_b_scalar(&b, FSL_DT_F32, 0.0));
    h = fsl_b_binary(&b, FSL_OP_add, h, m);
  }
  finish(&b, h);
  return g;
}

/* The rewrite search's cost (fsl_plan_region_cost): the optimal plan's
 * prediction region by region; a second call takes every region from the
 * cache; structurally equal regions hash equal whatever their weights; a
 * graph that differs in one region solves only that one. */
static void test_region_cost(void **state) {
  (void)state;
  fsl_device d;
  fsl_device_default(&d);
  fsl_graph *g = residual_chain(5, false);
  int *topo = fsl_graph_topo_index(g), *reg = NULL, nr = 0;
  assert_non_null(topo);
  assert_int_equal(fsl_regions_cut(g, topo, &reg, &nr), FSL_OK);
  assert_true(nr >= 4);
  uint64_t *hash = calloc((size_t)nr, sizeof *hash);
  assert_non_null(hash);
  assert_int_equal(fsl_region_hashes(g, reg, nr, hash), FSL_OK);
  /* every block reads a value from outside (the graph input or an earlier
   * block's) and must write one (for a later block or as the output):
   * equal regions, whatever their weights */
  for (int r = 1; r < nr; r++) assert_true(hash[r] == hash[0]);

  fsl_region_cache *c = fsl_region_cache_new();
  assert_non_null(c);
  fsl_region_cost_stats rs = {0};
  double cost = 0, again = 0;
  assert_int_equal(fsl_plan_region_cost(g, &d, c, &cost, &rs), FSL_OK);
  assert_int_equal(rs.regions, nr);
  assert_int_equal(rs.solved, nr);
  assert_int_equal(rs.cached, 0);
  fsl_plan p;
  assert_int_equal(fsl_plan_build(g, FSL_STRATEGY_OPTIMAL, &d, &p), FSL_OK);
  /* the plan keeps the cheapest of its regions' optima and the baselines */
  assert_true(p.predicted_s <= cost * (1 + 1e-9));
  if (p.optimal) assert_true(fabs(p.predicted_s - cost) <= 1e-9 * cost);
  fsl_plan_free(&p);

  rs = (fsl_region_cost_stats){0};
  assert_int_equal(fsl_plan_region_cost(g, &d, c, &again, &rs), FSL_OK);
  assert_int_equal(rs.solved, 0);
  assert_int_equal(rs.cached, nr);
  assert_true(again == cost);

  /* the same chain with a sigmoid in its last block: one region differs
   * and is the only one solved */
  fsl_graph *g2 = residual_chain(5, true);
  rs = (fsl_region_cost_stats){0};
  double cost2 = 0;
  assert_int_equal(fsl_plan_region_cost(g2, &d, c, &cost2, &rs), FSL_OK);
  assert_int_equal(rs.solved, 1);
  assert_int_equal(rs.cached, nr - 1);
  assert_true(cost2 != cost);
  fsl_region_cost_stats fresh = {0};
  fsl_region_cache *c2 = fsl_region_cache_new();
  double cost2_fresh = 0;
  assert_int_equal(fsl_plan_region_cost(g2, &d, c2, &cost2_fresh, &fresh), FSL_OK);
  assert_true(fabs(cost2_fresh - cost2) <= 1e-12 * cost2);
  fsl_region_cache_free(c2);

  fsl_region_cache_free(c);
  free(hash);
  free(reg);
  free(topo);
  fsl_graph_free(g2);
  fsl_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cost), cmocka_unit_test(test_cost_winograd),
      cmocka_unit_test(test_linear_views),
      cmocka_unit_test(test_cost_counts_recomputation),
      cmocka_unit_test(test_cost_linear_epilogue_pass),
    cmocka_unit_test(test_cost_constant_post_ops),
    cmocka_unit_test(test_cost_window_taps),
      cmocka_unit_test(test_softmax),
      cmocka_unit_test(test_mlp),
      cmocka_unit_test(test_conv),
      cmocka_unit_test(test_verify_rejects),
      cmocka_unit_test(test_sink_const_views),
      cmocka_unit_test(test_region_cost),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
