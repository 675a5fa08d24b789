/* test_cpu_layout.c — layouts between the CPU backend's steps (lower.c,
 * "Layout chaining" in docs/cpu-backend.md): values passed between oneDNN
 * primitives and generated code in oneDNN's layouts (conv chains,
 * concats, residuals, reductions and pools of a conv output), residual
 * adds absorbed as post-ops and run in place, and fissile's Winograd
 * convolution, on plans of kernels picked by hand against the reference
 * interpreter (cpu_test_util.h). */
#include "cpu_test_util.h"

/* conv -> conv chains (fsl_cpu_chain_layouts): a SiLU and a HardSwish
 * absorbed as post-ops, a value read by two convs and by nothing else, and
 * one also read by generated code (kept row-major).  Every plan matches the
 * reference (the per-node plan also has generated code reading conv
 * outputs in oneDNN's layout where that is nhwc), and a plan of one kernel
 * per conv passes the values that feed only convs between oneDNN
 * primitives in their layout. */
static void test_conv_chain(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t dx[] = {1, 16, 12, 12}, dw[] = {16, 16, 3, 3}, db[] = {16}, rb[] = {1, 16, 1, 1};
  int64_t st[] = {1, 1}, dl[] = {1, 1}, pads[] = {1, 1, 1, 1};
  fsl_value *x = input_dt(g, FSL_DT_F32, 4, dx), *w = input_dt(g, FSL_DT_F32, 4, dw);
  fsl_value *bias = input_dt(g, FSL_DT_F32, 1, db);
  /* the bias reshape first, then the conv: one statement each, since the
   * order in which a call's arguments are evaluated is unspecified (gcc and
   * clang differ) and the kernels below are picked by node order */
  fsl_value *rbias = fsl_b_reshape(&b, bias, 4, rb);
  fsl_value *h = fsl_b_binary(&b, FSL_OP_add, fsl_b_conv(&b, x, w, st, dl, pads, 1, NULL), rbias);
  fsl_value *a = fsl_b_binary(&b, FSL_OP_mul, h, fsl_b_unary(&b, FSL_OP_sigmoid, h)); /* SiLU */
  fsl_value *c = fsl_b_conv(&b, a, w, st, dl, pads, 1, NULL);
  fsl_value *hs = fsl_b_binary_scalar(&b, FSL_OP_max, fsl_b_binary_scalar(&b, FSL_OP_min,
                  fsl_b_binary_scalar(&b, FSL_OP_add, fsl_b_binary_scalar(&b, FSL_OP_mul, c, 1.0 / 6.0), 0.5), 1.0), 0.0);
  fsl_value *d = fsl_b_binary(&b, FSL_OP_mul, c, hs); /* HardSwish */
  fsl_value *e1 = fsl_b_conv(&b, d, w, st, dl, pads, 1, NULL), *e2 = fsl_b_conv(&b, d, w, st, dl, pads, 1, NULL);
  fsl_value *f = fsl_b_conv(&b, e2, w, st, dl, pads, 1, NULL);
  fsl_value *z = fsl_b_binary(&b, FSL_OP_add, fsl_b_binary(&b, FSL_OP_add, e1, f), e2);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, z);
  void *in[] = {random_data(x, -1, 1), random_data(w, -0.3, 0.3), random_data(bias, -1, 1)};
  check_graph(g, in, 1e-4, "conv-chain");
  /* one kernel per conv with the nodes after it (the first also with the
   * bias reshape before it): the SiLU and HardSwish outputs feed only
   * convs; the value of the second conv over d also feeds the final adds */
  fsl_node **sets[8];
  int sizes[8], n = 0, n_conv = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    bool conv = g->nodes[i]->op == FSL_OP_conv;
    if (n == 0 || (conv && n_conv++ > 0)) {
      assert_true(n < 8);
      sets[n] = &g->nodes[i], sizes[n++] = 0;
    }
    sizes[n - 1]++;
  }
  int chained = run_hand_plan(g, sets, sizes, n, in, z, "conv-chain/per-conv");
  if (getenv("FSL_TEST_VERBOSE")) fprintf(stderr, "conv-chain/per-conv: %d values chained\n", chained);
  /* at least the SiLU and HardSwish outputs; the others too where oneDNN's
   * layout is a permutation that generated code reads (nhwc, not nChw8c) */
  assert_true(chained >= 2);
  free_inputs(in, 3);
  fsl_graph_free(g);
}

/* A channel concat between 1x1 convolutions (YOLOX's CSP blocks), one
 * kernel per node: the concat's generated kernel reads the conv outputs and
 * writes its result in the layouts the convs use, wherever an elementwise
 * kernel in its place would (a dense permutation such as nhwc; generated
 * code reads none of oneDNN's blocked layouts; an add in its place is the
 * yardstick), and the results match the reference.  Returns the values
 * chained. */
static int concat_chain_run(bool cat) {
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t dx[] = {1, 8, 10, 10}, dw[] = {8, 8, 1, 1}, dw3[] = {8, cat ? 16 : 8, 1, 1};
  int64_t st[] = {1, 1}, dl[] = {1, 1}, pads[] = {0, 0, 0, 0};
  fsl_value *x = input_dt(g, FSL_DT_F32, 4, dx), *w1 = input_dt(g, FSL_DT_F32, 4, dw);
  fsl_value *w2 = input_dt(g, FSL_DT_F32, 4, dw), *w3 = input_dt(g, FSL_DT_F32, 4, dw3);
  fsl_value *w4 = input_dt(g, FSL_DT_F32, 4, dw3);
  fsl_value *c1 = fsl_b_conv(&b, x, w1, st, dl, pads, 1, NULL), *c2 = fsl_b_conv(&b, x, w2, st, dl, pads, 1, NULL);
  fsl_value *parts[] = {c1, c2};
  fsl_value *m = cat ? fsl_b_concat(&b, parts, 2, 1) : fsl_b_binary(&b, FSL_OP_add, c1, c2);
  fsl_value *z = fsl_b_binary(&b, FSL_OP_add, fsl_b_conv(&b, m, w3, st, dl, pads, 1, NULL),
                              fsl_b_conv(&b, m, w4, st, dl, pads, 1, NULL));
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, z);
  void *in[] = {random_data(x, -1, 1), random_data(w1, -0.3, 0.3), random_data(w2, -0.3, 0.3),
                random_data(w3, -0.3, 0.3), random_data(w4, -0.3, 0.3)};
  fsl_node **sets[16];
  int sizes[16];
  assert_true(g->n_nodes <= 16);
  for (int i = 0; i < g->n_nodes; i++) sets[i] = &g->nodes[i], sizes[i] = 1;
  int chained = run_hand_plan(g, sets, sizes, g->n_nodes, in, z, cat ? "concat-chain" : "add-chain");
  free_inputs(in, 5);
  fsl_graph_free(g);
  return chained;
}

static void test_concat_chain(void **state) {
  (void)state;
  int with_cat = concat_chain_run(true), with_add = concat_chain_run(false);
  if (getenv("FSL_TEST_VERBOSE")) fprintf(stderr, "concat-chain: %d values chained (add: %d)\n", with_cat, with_add);
  /* where the add chains (its output into the convs, the conv outputs into
   * the final add), the concat chains those and also the two conv outputs
   * it reads (the add runs in place over one of them, which keeps them
   * row-major); where the add chains nothing, neither does the concat */
  if (with_add == 0) assert_int_equal(with_cat, 0);
  else assert_true(with_cat >= with_add + 2);
}

/* A residual block: h = SiLU(x) (a generated kernel) feeds a 1x1 conv and,
 * when `residual`, also the final add (z = conv(h) + h; otherwise
 * z = conv(h) + x).  A generated reader next to the conv does not keep h
 * row-major: h is written in the conv's layout and the add reads it there,
 * so as many values are chained either way.  Returns the values chained. */
static int residual_chain_run(bool residual) {
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t dx[] = {1, 16, 10, 10}, dw[] = {16, 16, 1, 1}, st[] = {1, 1}, dl[] = {1, 1}, pads[] = {0, 0, 0, 0};
  fsl_value *x = input_dt(g, FSL_DT_F32, 4, dx), *w = input_dt(g, FSL_DT_F32, 4, dw);
  fsl_value *h = fsl_b_binary(&b, FSL_OP_mul, x, fsl_b_unary(&b, FSL_OP_sigmoid, x));
  fsl_value *z = fsl_b_binary(&b, FSL_OP_add, fsl_b_conv(&b, h, w, st, dl, pads, 1, NULL), residual ? h : x);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, z);
  void *in[] = {random_data(x, -1, 1), random_data(w, -0.3, 0.3)};
  /* kernels: SiLU (sigmoid + mul), conv, add */
  assert_int_equal(g->n_nodes, 4);
  fsl_node **sets[3] = {&g->nodes[0], &g->nodes[2], &g->nodes[3]};
  int sizes[3] = {2, 1, 1};
  int chained = run_hand_plan(g, sets, sizes, 3, in, z, residual ? "residual-chain" : "plain-chain");
  free_inputs(in, 2);
  fsl_graph_free(g);
  return chained;
}

static void test_residual_chain(void **state) {
  (void)state;
  int with_res = residual_chain_run(true), without = residual_chain_run(false);
  if (getenv("FSL_TEST_VERBOSE")) fprintf(stderr, "residual-chain: %d values chained (without: %d)\n", with_res, without);
  assert_int_equal(with_res, without);
}

/* Residual adds absorbed by the convolution that computes the other
 * operand (a binary post-op over the full tensor, given in the conv's
 * destination layout; fsl_onednn_linear_post_chainable): ResNet's basic
 * blocks, y2 = relu(conv(y1) + b + y0), and one conv whose residual is its
 * own source, z = relu(conv(y2) + b + y2).  One kernel per conv with the
 * nodes after it.  y0 (read by a conv as its source and by another as its
 * residual), y1 and y2 (source and residual of the same conv) stay in
 * oneDNN's layout whatever it is (nChw8c with AVX2, which generated code
 * does not read; with AVX-512, where the residual is not absorbed,
 * generated epilogues add it in nhwc), and the result matches the
 * reference; so does a plan of one kernel per node. */
static void test_residual_post_chain(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t dx[] = {1, 16, 12, 12}, dw[] = {16, 16, 3, 3}, db[] = {16}, rb[] = {1, 16, 1, 1};
  int64_t st[] = {1, 1}, dl[] = {1, 1}, pads[] = {1, 1, 1, 1};
  fsl_value *x = input_dt(g, FSL_DT_F32, 4, dx), *bias = input_dt(g, FSL_DT_F32, 1, db), *w[4], *y[4];
  for (int i = 0; i < 4; i++) w[i] = input_dt(g, FSL_DT_F32, 4, dw);
  for (int i = 0; i < 4; i++) {
    fsl_value *rbias = fsl_b_reshape(&b, bias, 4, rb); /* each kernel: the bias reshape, conv, add, ... */
    fsl_value *c = fsl_b_conv(&b, i ? y[i - 1] : x, w[i], st, dl, pads, 1, NULL);
    c = fsl_b_binary(&b, FSL_OP_add, c, rbias);
    if (i >= 2) c = fsl_b_binary(&b, FSL_OP_add, c, i == 2 ? y[0] : y[2]);
    y[i] = fsl_b_binary_scalar(&b, FSL_OP_max, c, 0.0);
  }
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, y[3]);
  void *in[] = {random_data(x, -1, 1),        random_data(bias, -1, 1),     random_data(w[0], -0.2, 0.2),
                random_data(w[1], -0.2, 0.2), random_data(w[2], -0.2, 0.2), random_data(w[3], -0.2, 0.2)};
  fsl_node **sets[40];
  int sizes[40], n = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    if (g->nodes[i]->op == FSL_OP_reshape && g->nodes[i]->in[0] == bias) sets[n] = &g->nodes[i], sizes[n++] = 0;
    sizes[n - 1]++;
  }
  assert_int_equal(n, 4);
  int chained = run_hand_plan(g, sets, sizes, n, in, y[3], "residual-post-chain");
  if (getenv("FSL_TEST_VERBOSE")) fprintf(stderr, "residual-post-chain: %d values chained\n", chained);
  assert_true(chained >= 3);
  assert_true(g->n_nodes <= 40);
  for (int i = 0; i < g->n_nodes; i++) sets[i] = &g->nodes[i], sizes[i] = 1;
  run_hand_plan(g, sets, sizes, g->n_nodes, in, y[3], "residual-post-chain/per-node");
  free_inputs(in, 6);
  fsl_graph_free(g);
}

/* Dense 3x3 stride-1 convolutions with constant weights that oneDNN runs
 * as its direct kernel over nChw8c (no AVX-512, FSL_CPU_ISA=avx2: oneDNN
 * has no Winograd there) run as fissile's F(2x2,3x3) Winograd
 * (backend/cpu/winograd.c) with the epilogue steps it takes: bias, the
 * residual as oneDNN's sum, ReLU (y1); a per-channel scale and a clip to
 * [0, 6] as ReLU plus a scalar min, asymmetric pads, odd sizes (y2);
 * HardSwish (y3); SiLU (y4, no pads); a tanh it does not take keeps
 * oneDNN's direct kernel (y5).  96 channels (FSL_WINOGRAD_MIN_CHANNELS),
 * two images, so tiles cross image borders.
 * Every plan matches the reference; one kernel per convolution and its
 * epilogue runs four of the five convolutions as Winograd where oneDNN's
 * ISA is AVX2, none where oneDNN has Winograd of its own (AVX-512). */
static void test_winograd_conv(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t dx[] = {2, 96, 17, 17}, dw[] = {96, 96, 3, 3}, dc[] = {1, 96, 1, 1}, st[] = {1, 1}, dl[] = {1, 1};
  int64_t pads1[] = {1, 1, 1, 1}, pads2[] = {1, 0, 0, 1}, pads4[] = {0, 0, 0, 0};
  fsl_value *x = input_dt(g, FSL_DT_F32, 4, dx), *w[5];
  for (int i = 0; i < 5; i++) w[i] = random_const_in(&b, 4, dw, 0.06); /* outputs of order 1 */
  fsl_value *bias = random_const(&b, 4, dc), *scale = random_const(&b, 4, dc);
  fsl_value *c1 = fsl_b_binary(&b, FSL_OP_add, fsl_b_conv(&b, x, w[0], st, dl, pads1, 1, NULL), bias);
  fsl_value *y1 = fsl_b_binary_scalar(&b, FSL_OP_max, fsl_b_binary(&b, FSL_OP_add, c1, x), 0.0);
  fsl_value *c2 = fsl_b_binary(&b, FSL_OP_mul, fsl_b_conv(&b, y1, w[1], st, dl, pads2, 1, NULL), scale);
  fsl_value *y2 = fsl_b_binary_scalar(&b, FSL_OP_min, fsl_b_binary_scalar(&b, FSL_OP_max, c2, 0.0), 6.0);
  fsl_value *c3 = fsl_b_binary(&b, FSL_OP_add, fsl_b_conv(&b, y2, w[2], st, dl, pads1, 1, NULL), bias);
  fsl_value *hs = fsl_b_binary_scalar(&b, FSL_OP_max, fsl_b_binary_scalar(&b, FSL_OP_min,
                  fsl_b_binary_scalar(&b, FSL_OP_add, fsl_b_binary_scalar(&b, FSL_OP_mul, c3, 1.0 / 6.0), 0.5), 1.0), 0.0);
  fsl_value *y3 = fsl_b_binary(&b, FSL_OP_mul, c3, hs);
  fsl_value *c4 = fsl_b_conv(&b, y3, w[3], st, dl, pads4, 1, NULL);
  fsl_value *y4 = fsl_b_binary(&b, FSL_OP_mul, c4, fsl_b_unary(&b, FSL_OP_sigmoid, c4));
  fsl_value *y5 = fsl_b_unary(&b, FSL_OP_tanh, fsl_b_conv(&b, y4, w[4], st, dl, pads1, 1, NULL));
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, y5);
  void *in[] = {random_data(x, -1, 1)};
  check_graph(g, in, 1e-4, "winograd");
  fsl_node **sets[5];
  int sizes[5], n = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    if (g->nodes[i]->op == FSL_OP_conv) sets[n] = &g->nodes[i], sizes[n++] = 0;
    assert_true(n > 0 && n <= 5);
    sizes[n - 1]++;
  }
  fsl_cpu_stats stats = run_hand_plan_stats(g, sets, sizes, n, in, y5, "winograd/per-conv");
  bool avx2_only = onednn_avx2_only();
  if (getenv("FSL_TEST_VERBOSE")) fprintf(stderr, "winograd: %d of %d oneDNN steps (avx2 only: %d)\n", stats.n_winograd, stats.n_onednn, avx2_only);
  assert_int_equal(stats.n_onednn, 5);
  assert_int_equal(stats.n_winograd, avx2_only ? 4 : 0);
  free_inputs(in, 1);
  fsl_graph_free(g);
}

/* A residual add that a convolution runs as oneDNN's sum post-op (AVX2;
 * none with AVX-512) writes over the residual where the residual dies
 * there (sum_in_place in cpu.c): a block of 1x1 convolutions (channels-last
 * on AVX2 under 128 pixels, so every value stays in the layout the next
 * step reads)
 * a = relu(conv1(x)), b = relu(conv2(a)), y = relu(conv3(b) + a), then
 * z = 2 y, one kernel per conv with the nodes after it and one for the
 * scale.  Once with y the
 * output of the block (a dies at conv3: in place where the sum post-op
 * runs) and once with a also read by the scale, z = 2 y + a (a lives on:
 * never in place); the results match the reference either way
 * (run_hand_plan_stats, which also bounds the arena). */
static void test_residual_sum_in_place(void **state) {
  (void)state;
  bool avx2_only = onednn_avx2_only();
  for (int keep = 0; keep < 2; keep++) {
    fsl_graph *g = fsl_graph_new();
    fsl_builder b = B_INIT(g);
    int64_t dx[] = {1, 16, 10, 10}, dw[] = {16, 16, 1, 1}, st[] = {1, 1}, dl[] = {1, 1}, pads[] = {0, 0, 0, 0};
    fsl_value *x = input_dt(g, FSL_DT_F32, 4, dx);
    fsl_value *w1 = random_const_in(&b, 4, dw, 0.1), *w2 = random_const_in(&b, 4, dw, 0.1), *w3 = random_const_in(&b, 4, dw, 0.1);
    fsl_value *a = fsl_b_binary_scalar(&b, FSL_OP_max, fsl_b_conv(&b, x, w1, st, dl, pads, 1, NULL), 0.0);
    fsl_value *bb = fsl_b_binary_scalar(&b, FSL_OP_max, fsl_b_conv(&b, a, w2, st, dl, pads, 1, NULL), 0.0);
    fsl_value *y = fsl_b_binary_scalar(&b, FSL_OP_max, fsl_b_binary(&b, FSL_OP_add, fsl_b_conv(&b, bb, w3, st, dl, pads, 1, NULL), a), 0.0);
    fsl_value *z = fsl_b_binary_scalar(&b, FSL_OP_mul, y, 2.0);
    if (keep) z = fsl_b_binary(&b, FSL_OP_add, z, a);
    assert_int_equal(b.st, FSL_OK);
    fsl_graph_add_output(g, z);
    void *in[] = {random_data(x, -1, 1)};
    fsl_node **sets[4];
    int sizes[4] = {0}, n = 0;
    bool after_y = false; /* the nodes after y's (the scale, its scalar's views) make the last kernel */
    for (int i = 0; i < g->n_nodes; i++) {
      if ((g->nodes[i]->op == FSL_OP_conv && n < 3) || (after_y && n == 3)) sets[n] = &g->nodes[i], n++;
      assert_true(n > 0 && n <= 4);
      sizes[n - 1]++;
      after_y = after_y || g->nodes[i] == y->producer;
    }
    assert_int_equal(n, 4);
    fsl_cpu_stats stats = run_hand_plan_stats(g, sets, sizes, n, in, z, keep ? "sum in place/kept" : "sum in place");
    if (getenv("FSL_TEST_VERBOSE"))
      fprintf(stderr, "sum in place (keep %d): %d (avx2 only: %d), %d chained\n", keep, stats.n_sum_in_place, avx2_only,
              stats.n_chained);
    assert_int_equal(stats.n_sum_in_place, avx2_only && !keep ? 1 : 0);
    free_inputs(in, 1);
    fsl_graph_free(g);
  }
}

/* A residual from a channels-last 1x1 convolution (read by another 1x1
 * convolution as its source) into a 3x3 one: z = relu(conv3(conv2(v)) + v),
 * v = conv1(x), one kernel per conv with the nodes after it.  Where the 3x3
 * convolution wants v in the same layout it absorbs it and v is chained
 * there; where it wants another (blocked nChw8c with AVX2), it leaves the
 * add to the generated epilogue (keep_residual in lower.c), which reads v
 * where it lies: v stays chained either way, and the result matches. */
static void test_residual_kept_for_epilogue(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t dx[] = {1, 16, 12, 12}, d1[] = {16, 16, 1, 1}, d3[] = {16, 16, 3, 3};
  int64_t st[] = {1, 1}, dl[] = {1, 1}, p0[] = {0, 0, 0, 0}, p1[] = {1, 1, 1, 1};
  fsl_value *x = input_dt(g, FSL_DT_F32, 4, dx), *w1 = input_dt(g, FSL_DT_F32, 4, d1);
  fsl_value *w2 = input_dt(g, FSL_DT_F32, 4, d1), *w3 = input_dt(g, FSL_DT_F32, 4, d3);
  fsl_value *v = fsl_b_conv(&b, x, w1, st, dl, p0, 1, NULL), *h = fsl_b_conv(&b, v, w2, st, dl, p0, 1, NULL);
  fsl_value *c = fsl_b_conv(&b, h, w3, st, dl, p1, 1, NULL);
  fsl_value *z = fsl_b_binary_scalar(&b, FSL_OP_max, fsl_b_binary(&b, FSL_OP_add, c, v), 0.0);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, z);
  void *in[] = {random_data(x, -1, 1), random_data(w1, -0.3, 0.3), random_data(w2, -0.3, 0.3),
                random_data(w3, -0.2, 0.2)};
  fsl_node **sets[3];
  int sizes[3], n = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    if (g->nodes[i]->op == FSL_OP_conv && n < 3) sets[n] = &g->nodes[i], sizes[n++] = 0;
    sizes[n - 1]++;
  }
  assert_int_equal(n, 3);
  int chained = run_hand_plan(g, sets, sizes, n, in, z, "residual-kept");
  if (getenv("FSL_TEST_VERBOSE")) fprintf(stderr, "residual-kept: %d values chained\n", chained);
  assert_true(chained >= 1);
  free_inputs(in, 4);
  fsl_graph_free(g);
}

/* A 3 -> 16 channel convolution (channels-last: channels_last_pays, and
 * oneDNN's own choice on AVX-512) and then, in a generated kernel, a
 * reduction over `axes`: with `rows` y = h - sum(h over axes), else the
 * sum alone.  Over H and W with rows (InstanceNormalization's shape) the
 * kernel writes y row-major and its loops would read h a cache line per
 * element in nhwc, so the code generator refuses the layout and the conv
 * output is reordered to plain (kernel.c: rows_read_layout); the sum alone
 * (a global pooling, mobilenet's squeeze-excitation) reads nhwc in place as
 * columns; over C (LayerNorm over channels) the rows are contiguous in
 * nhwc and the kernel reads the layout.  Returns the values chained. */
static int reduce_chain_run(const int64_t *axes, int n_axes, bool rows) {
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t dx[] = {1, 3, 20, 20}, dw[] = {16, 3, 3, 3}, st[] = {1, 1}, dl[] = {1, 1}, pads[] = {1, 1, 1, 1};
  fsl_value *x = input_dt(g, FSL_DT_F32, 4, dx), *w = input_dt(g, FSL_DT_F32, 4, dw);
  fsl_value *h = fsl_b_conv(&b, x, w, st, dl, pads, 1, NULL);
  fsl_value *m = fsl_b_reduce(&b, FSL_OP_reduce_sum, h, axes, n_axes, true);
  fsl_value *z = rows ? fsl_b_binary(&b, FSL_OP_sub, h, m) : m;
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, z);
  void *in[] = {random_data(x, -1, 1), random_data(w, -0.3, 0.3)};
  assert_int_equal(g->nodes[0]->op, FSL_OP_conv);
  fsl_node **sets[2] = {&g->nodes[0], &g->nodes[1]};
  int sizes[2] = {1, g->n_nodes - 1};
  const char *what = n_axes == 2 ? (rows ? "reduce-hw-chain" : "reduce-hw-only-chain") : "reduce-c-chain";
  int chained = run_hand_plan(g, sets, sizes, 2, in, z, what);
  free_inputs(in, 2);
  fsl_graph_free(g);
  return chained;
}

static void test_reduce_chain(void **state) {
  (void)state;
  int64_t hw[] = {2, 3}, c[] = {1};
  int across = reduce_chain_run(hw, 2, true), pooled = reduce_chain_run(hw, 2, false), along = reduce_chain_run(c, 1, true);
  if (getenv("FSL_TEST_VERBOSE"))
    fprintf(stderr, "reduce-chain: H,W %d, H,W alone %d, C %d values chained\n", across, pooled, along);
  assert_int_equal(along, 1);  /* the layout is channels-last ... */
  assert_int_equal(pooled, 1); /* ... which a sum over H,W alone reads as columns ... */
  assert_int_equal(across, 0); /* ... and one with rows of H,W to write does not read */
}

/* A 3 -> 16 channel convolution (channels-last, as in reduce_chain_run)
 * and then, in a generated kernel, a pool of its output (pads, k, st, fill,
 * reduce op): the kernel reads the conv's layout as columns along the
 * channels (fsl_cg_layout_window_axis), the taps contiguous and clamped, and
 * writes row-major.  A NaN in x reaches every channel of the conv output
 * at the pixels it touches, so the pool's NaN flags run along the
 * channels.  POOL_ABS pools the conv output's absolute value: the window's
 * source is elementwise work over the input, computed per tap on the
 * contiguous row of channels, so it reads the layout too.  Two kernels
 * cannot, so the code generator refuses the layout rather than stride
 * along the channels, and the conv output is reordered to plain:
 * POOL_TWICE sums each window minus its max (a reduction reading another,
 * which the columns form does not take).  POOL_DEEP chains six pools in the kernel (an SPP
 * block's, deeper than 16 nodes): only the first could read the layout, so
 * the conv output is reordered, and the kernel is still generated, not run
 * by the reference interpreter (run_hand_plan asserts no fallback).
 * Returns the values chained. */
enum { POOL_ONCE, POOL_TWICE, POOL_ABS, POOL_DEEP };
static int pool_chain_run(fsl_op op, const int64_t *pads, const int64_t *k, const int64_t *st, double fill, int form,
                          const char *what) {
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t dx[] = {1, 3, 20, 17}, dw[] = {16, 3, 3, 3}, s1[] = {1, 1}, dl[] = {1, 1}, cp[] = {1, 1, 1, 1};
  fsl_value *x = input_dt(g, FSL_DT_F32, 4, dx), *w = input_dt(g, FSL_DT_F32, 4, dw);
  fsl_value *h = fsl_b_conv(&b, x, w, s1, dl, cp, 1, NULL);
  fsl_value *z = NULL;
  if (form == POOL_ABS) h = fsl_b_unary(&b, FSL_OP_abs, h);
  if (form == POOL_TWICE) {
    int64_t wa[] = {4, 5};
    fsl_value *win = fsl_b_window(&b, fsl_b_pad(&b, h, pads, 0, fill), 2, k, st, dl);
    fsl_value *m = fsl_b_reduce(&b, op, win, wa, 2, true);
    z = fsl_b_reduce(&b, FSL_OP_reduce_sum, fsl_b_binary(&b, FSL_OP_sub, win, m), wa, 2, false);
  } else {
    z = pool_of(&b, h, op, pads, k, st, dl, fill);
    for (int i = 1; i < (form == POOL_DEEP ? 6 : 1); i++) z = pool_of(&b, z, op, pads, k, st, dl, fill);
  }
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, z);
  void *in[] = {random_data(x, -1, 1), random_data(w, -0.3, 0.3)};
  ((float *)in[0])[7 * 17 + 5] = NAN;
  assert_int_equal(g->nodes[0]->op, FSL_OP_conv);
  fsl_node **sets[2] = {&g->nodes[0], &g->nodes[1]};
  int sizes[2] = {1, g->n_nodes - 1};
  int chained = run_hand_plan(g, sets, sizes, 2, in, z, what);
  free_inputs(in, 2);
  fsl_graph_free(g);
  return chained;
}

/* Pools of a channels-last convolution output read it in place: ResNet's
 * stem pool (3x3 stride 2, pad 1), an SPP pool (5x5 stride 1, pad 2), a
 * min pool and a sum (AveragePool counting the pads) with asymmetric
 * pads and strides, and a pool of elementwise work over the conv output
 * (its absolute value: ResNet's stem pool after the bias and the ReLU,
 * computed per tap on the row of channels); not a kernel that reduces its
 * windows twice or chains six pools. */
static void test_pool_chain(void **state) {
  (void)state;
  int64_t p1[] = {0, 0, 1, 1, 0, 0, 1, 1}, p2[] = {0, 0, 2, 2, 0, 0, 2, 2}, pa[] = {0, 0, 0, 1, 0, 0, 2, 0};
  int64_t k3[] = {3, 3}, k5[] = {5, 5}, k32[] = {3, 2}, s1[] = {1, 1}, s2[] = {2, 2}, s12[] = {1, 2};
  int stem = pool_chain_run(FSL_OP_reduce_max, p1, k3, s2, -INFINITY, POOL_ONCE, "pool-chain stem");
  int spp = pool_chain_run(FSL_OP_reduce_max, p2, k5, s1, -INFINITY, POOL_ONCE, "pool-chain spp");
  int mn = pool_chain_run(FSL_OP_reduce_min, pa, k32, s12, INFINITY, POOL_ONCE, "pool-chain min");
  int sum = pool_chain_run(FSL_OP_reduce_sum, pa, k32, s12, 0.0, POOL_ONCE, "pool-chain sum");
  int twice = pool_chain_run(FSL_OP_reduce_max, p1, k3, s2, -INFINITY, POOL_TWICE, "pool-chain twice");
  int absv = pool_chain_run(FSL_OP_reduce_max, p1, k3, s2, -INFINITY, POOL_ABS, "pool-chain abs");
  int deep = pool_chain_run(FSL_OP_reduce_max, p1, k3, s1, -INFINITY, POOL_DEEP, "pool-chain deep");
  if (getenv("FSL_TEST_VERBOSE"))
    fprintf(stderr, "pool-chain: %d %d %d %d values chained, %d reducing twice, %d over an abs, %d six pools deep\n",
            stem, spp, mn, sum, twice, absv, deep);
  assert_int_equal(stem, 1);
  assert_int_equal(spp, 1);
  assert_int_equal(mn, 1);
  assert_int_equal(sum, 1);
  assert_int_equal(twice, 0);
  assert_int_equal(absv, 1);
  assert_int_equal(deep, 0);
}

/* EfficientViT's attention (LiteMLA): qkv = 1x1 conv, a depthwise 3x3 and
 * a grouped 1x1 conv aggregate it, and q (the first half of each head) is
 * split out of concat(qkv, agg) along channels through a reshape, then
 * ReLU.  The convolutions run on channels-last activations, grouped ones
 * too (channels_last_pays), and the generated kernel of the concat, which
 * writes a row-major graph output, reads both conv outputs in that layout
 * (its nest tiles the transposed read): qkv, the depthwise output and agg
 * all pass without a reorder, and the result matches the reference. */
static void test_attention_concat_chain(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t dx[] = {1, 16, 12, 12}, dq[] = {32, 16, 1, 1}, dd[] = {32, 1, 3, 3}, dg[] = {32, 8, 1, 1};
  int64_t st[] = {1, 1}, dl[] = {1, 1}, p0[] = {0, 0, 0, 0}, p1[] = {1, 1, 1, 1}, rs[] = {1, 4, 16, 144};
  fsl_value *x = input_dt(g, FSL_DT_F32, 4, dx), *wq = input_dt(g, FSL_DT_F32, 4, dq);
  fsl_value *wd = input_dt(g, FSL_DT_F32, 4, dd), *wg = input_dt(g, FSL_DT_F32, 4, dg);
  fsl_value *qkv = fsl_b_conv(&b, x, wq, st, dl, p0, 1, NULL);
  fsl_value *agg = fsl_b_conv(&b, fsl_b_conv(&b, qkv, wd, st, dl, p1, 32, NULL), wg, st, dl, p0, 4, NULL);
  fsl_value *parts[] = {qkv, agg};
  fsl_value *heads = fsl_b_reshape(&b, fsl_b_concat(&b, parts, 2, 1), 4, rs);
  fsl_value *z = fsl_b_binary_scalar(&b, FSL_OP_max, fsl_b_slice_axis(&b, heads, 2, 0, 8), 0.0);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, z);
  void *in[] = {random_data(x, -1, 1), random_data(wq, -0.3, 0.3), random_data(wd, -0.3, 0.3),
                random_data(wg, -0.3, 0.3)};
  /* kernels: each conv, then everything after them in one */
  assert_true(g->n_nodes > 3);
  for (int i = 0; i < 3; i++) assert_int_equal(g->nodes[i]->op, FSL_OP_conv);
  fsl_node **sets[4] = {&g->nodes[0], &g->nodes[1], &g->nodes[2], &g->nodes[3]};
  int sizes[4] = {1, 1, 1, g->n_nodes - 3};
  int chained = run_hand_plan(g, sets, sizes, 4, in, z, "attention-concat-chain");
  if (getenv("FSL_TEST_VERBOSE")) fprintf(stderr, "attention-concat-chain: %d values chained\n", chained);
  assert_int_equal(chained, 3);
  free_inputs(in, 4);
  fsl_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_conv_chain),
      cmocka_unit_test(test_concat_chain),
      cmocka_unit_test(test_residual_chain),
      cmocka_unit_test(test_residual_post_chain),
      cmocka_unit_test(test_winograd_conv),
      cmocka_unit_test(test_residual_sum_in_place),
      cmocka_unit_test(test_residual_kept_for_epilogue),
      cmocka_unit_test(test_attention_concat_chain),
      cmocka_unit_test(test_reduce_chain),
      cmocka_unit_test(test_pool_chain),
  };
  return cmocka_run_group_tests(tests, cpu_test_setup, cpu_test_teardown);
}
