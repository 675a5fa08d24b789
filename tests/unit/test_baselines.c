/* test_baselines.c — the rule-based strategies (unfused, opfuse, greedy) on
 * small graphs built with the builder: kernel counts, coverage, legality
 * and executable order. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>

#include "fission/builder.h"
#include "test_graph.h"
#include "orchestrate/baselines.h"

static const fsl_strategy k_strategies[3] = {FSL_STRATEGY_UNFUSED, FSL_STRATEGY_OPFUSE, FSL_STRATEGY_GREEDY};


/* A float constant of the given shape filled with 0.01 * i. */
static fsl_value *weight(fsl_builder *b, int rank, const int64_t *dims) {
  int64_t n = fsl_numel(rank, dims);
  float *d = calloc((size_t)n, sizeof *d);
  assert_non_null(d);
  for (int64_t i = 0; i < n; i++) d[i] = 0.01f * (float)i;
  fsl_value *v = fsl_b_const(b, FSL_DT_F32, rank, dims, d);
  free(d);
  assert_non_null(v);
  return v;
}


static void output(fsl_graph *g, fsl_value *v) {
  assert_non_null(v);
  assert_int_equal(fsl_graph_add_output(g, v), FSL_OK);
}

/* Softmax over the last axis, as the Softmax decomposition builds it. */
static fsl_value *softmax(fsl_builder *b, fsl_value *x) {
  int64_t ax = x->rank - 1;
  fsl_value *m = fsl_b_reduce(b, FSL_OP_reduce_max, x, &ax, 1, true);
  fsl_value *e = fsl_b_unary(b, FSL_OP_exp, fsl_b_binary(b, FSL_OP_sub, x, m));
  fsl_value *s = fsl_b_reduce(b, FSL_OP_reduce_sum, e, &ax, 1, true);
  return fsl_b_binary(b, FSL_OP_div, e, s);
}

/* Number of distinct origins among g's nodes. */
static int count_origins(const fsl_graph *g) {
  int n = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    bool seen = false;
    for (int j = 0; j < i && !seen; j++) seen = g->nodes[j]->origin == g->nodes[i]->origin;
    n += !seen;
  }
  return n;
}

/*
 * Runs strategy s and checks the plan: every node in exactly one kernel,
 * every kernel legal (fsl_kernel_make accepts its node set again, with the
 * same kind), every kernel input a graph input, a constant or an output of
 * an earlier kernel, every graph output written.  Returns the kernel count.
 */
static int plan(const fsl_graph *g, fsl_strategy s) {
  fsl_kernel_set ks = {.g = g};
  assert_int_equal(fsl_baseline(g, s, 0, &ks), FSL_OK);
  int *topo = fsl_graph_topo_index(g);
  assert_non_null(topo);
  if (getenv("FSL_TEST_VERBOSE")) {  /* the plan, one kernel a line */
    printf("%s: %d kernels\n", fsl_strategy_name(s), ks.n);
    for (int i = 0; i < ks.n; i++) {
      printf("  k%d kind %d:", i, (int)ks.k[i]->kind);
      for (int j = 0; j < ks.k[i]->n_nodes; j++)
        printf(" %s#%d(%s)", fsl_op_name(ks.k[i]->nodes[j]->op), topo[ks.k[i]->nodes[j]->id],
               ks.k[i]->nodes[j]->origin_name ? ks.k[i]->nodes[j]->origin_name : "-");
      printf("\n");
    }
  }
  int *count = calloc((size_t)g->next_node_id + 1, sizeof *count);
  bool *written = calloc((size_t)g->n_values + 1, sizeof *written);
  assert_non_null(count);
  assert_non_null(written);
  for (int i = 0; i < ks.n; i++) {
    fsl_kernel *k = ks.k[i];
    assert_true(k->n_nodes > 0);
    for (int j = 0; j < k->n_nodes; j++) count[k->nodes[j]->id]++;
    fsl_kernel *again = NULL;
    const char *why = NULL;
    assert_int_equal(fsl_kernel_make(g, topo, k->nodes, k->n_nodes, &again, &why), FSL_OK);
    if (!again) fail_msg("strategy %d, kernel %d is not legal: %s", (int)s, i, why ? why : "?");
    assert_int_equal(again->kind, k->kind);
    fsl_kernel_free(again);
    for (int j = 0; j < k->n_in; j++) {
      const fsl_value *v = k->in[j];
      if (!(v->is_input || v->data || written[v->id]))
        fail_msg("strategy %d, kernel %d reads '%s' before it is written", (int)s, i, v->name ? v->name : "?");
    }
    for (int j = 0; j < k->n_out; j++) written[k->out[j]->id] = true;
  }
  for (int i = 0; i < g->n_nodes; i++) assert_int_equal(count[g->nodes[i]->id], 1);
  for (int i = 0; i < g->n_outputs; i++) {
    const fsl_value *v = g->outputs[i];
    assert_true(v->is_input || v->data || written[v->id]);
  }
  int n = ks.n;
  free(count);
  free(written);
  free(topo);
  fsl_kernel_set_free(&ks);
  return n;
}

/* MLP: MatMul -> Add(bias) -> Relu -> MatMul, x [4,8]. */
static fsl_graph *build_mlp(void) {
  fsl_graph *g = fsl_graph_new();
  assert_non_null(g);
  fsl_builder b = {.g = g, .fold = true};
  int64_t xd[2] = {4, 8}, w1d[2] = {8, 16}, b1d[1] = {16}, w2d[2] = {16, 4};
  fsl_value *x = input(g, "x", 2, xd);
  set_origin(&b, 1, "mm1", "MatMul");
  fsl_value *h = fsl_b_matmul(&b, x, weight(&b, 2, w1d));
  set_origin(&b, 2, "bias1", "Add");
  h = fsl_b_binary(&b, FSL_OP_add, h, weight(&b, 1, b1d));
  set_origin(&b, 3, "relu1", "Relu");
  h = fsl_b_binary_scalar(&b, FSL_OP_max, h, 0.0);
  set_origin(&b, 4, "mm2", "MatMul");
  h = fsl_b_matmul(&b, h, weight(&b, 2, w2d));
  assert_int_equal(b.st, FSL_OK);
  output(g, h);
  return g;
}

static void test_mlp(void **state) {
  (void)state;
  fsl_graph *g = build_mlp();
  assert_int_equal(fsl_graph_verify(g), FSL_OK);
  int unfused = plan(g, FSL_STRATEGY_UNFUSED);
  int opfuse = plan(g, FSL_STRATEGY_OPFUSE);
  int greedy = plan(g, FSL_STRATEGY_GREEDY);
  assert_int_equal(unfused, count_origins(g));
  assert_int_equal(unfused, 4);
  assert_int_equal(opfuse, 2);   /* matmul+bias+relu, matmul */
  assert_true(greedy <= opfuse);

  /* opfuse: the first kernel is the linear op with its epilogue */
  fsl_kernel_set ks = {.g = g};
  assert_int_equal(fsl_baseline(g, FSL_STRATEGY_OPFUSE, 0, &ks), FSL_OK);
  assert_int_equal(ks.n, 2);
  assert_int_equal(ks.k[0]->kind, FSL_KERNEL_LINEAR);
  assert_int_equal(ks.k[0]->n_nodes, 3);
  assert_int_equal(ks.k[1]->kind, FSL_KERNEL_LINEAR);
  fsl_kernel_set_free(&ks);
  fsl_graph_free(g);
}

/* MLP over a batched input [2,3,8]: MatMul lowers to reshape -> matmul ->
 * reshape, which no LINEAR kernel holds whole (no prologue). */
static void test_mlp_batched(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  assert_non_null(g);
  fsl_builder b = {.g = g, .fold = true};
  int64_t xd[3] = {2, 3, 8}, w1d[2] = {8, 16}, b1d[1] = {16}, w2d[2] = {16, 8};
  fsl_value *x = input(g, "x", 3, xd);
  set_origin(&b, 1, "mm1", "MatMul");
  fsl_value *h = fsl_b_matmul(&b, x, weight(&b, 2, w1d));
  set_origin(&b, 2, "bias1", "Add");
  h = fsl_b_binary(&b, FSL_OP_add, h, weight(&b, 1, b1d));
  set_origin(&b, 3, "gelu", "Tanh");
  h = fsl_b_unary(&b, FSL_OP_tanh, h);
  set_origin(&b, 4, "mm2", "MatMul");
  h = fsl_b_matmul(&b, h, weight(&b, 2, w2d));
  set_origin(&b, 5, "res", "Add");
  h = fsl_b_binary(&b, FSL_OP_add, h, x);
  assert_int_equal(b.st, FSL_OK);
  output(g, h);
  assert_int_equal(fsl_graph_verify(g), FSL_OK);
  int unfused = plan(g, FSL_STRATEGY_UNFUSED);
  int opfuse = plan(g, FSL_STRATEGY_OPFUSE);
  int greedy = plan(g, FSL_STRATEGY_GREEDY);
  assert_true(unfused >= count_origins(g));
  assert_true(opfuse < unfused);
  assert_true(greedy <= opfuse);
  fsl_graph_free(g);
}

static void test_softmax(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  assert_non_null(g);
  fsl_builder b = {.g = g, .fold = true};
  int64_t xd[2] = {4, 8};
  fsl_value *x = input(g, "x", 2, xd);
  set_origin(&b, 1, "sm", "Softmax");
  fsl_value *y = softmax(&b, x);
  assert_int_equal(b.st, FSL_OK);
  output(g, y);
  assert_true(g->n_nodes >= 5);
  for (int i = 0; i < 3; i++) assert_int_equal(plan(g, k_strategies[i]), 1);
  fsl_graph_free(g);
}

/*
 * A small transformer block: Attention (one ONNX op: matmuls, scale,
 * softmax, matmul), residual Add, LayerNormalization, and an MLP.  The
 * Attention op is no legal kernel: unfused and opfuse split it.
 */
static fsl_graph *build_block(void) {
  fsl_graph *g = fsl_graph_new();
  assert_non_null(g);
  fsl_builder b = {.g = g, .fold = true};
  int64_t xd[2] = {6, 8}, wd[2] = {8, 8}, bd[1] = {8};
  fsl_value *x = input(g, "x", 2, xd);
  set_origin(&b, 1, "attn", "Attention");
  fsl_value *q = fsl_b_matmul(&b, x, weight(&b, 2, wd));
  fsl_value *k = fsl_b_matmul(&b, x, weight(&b, 2, wd));
  fsl_value *v = fsl_b_matmul(&b, x, weight(&b, 2, wd));
  int64_t perm[2] = {1, 0};
  fsl_value *s = fsl_b_matmul(&b, q, fsl_b_permute(&b, k, perm));
  s = fsl_b_binary_scalar(&b, FSL_OP_mul, s, 0.35);
  fsl_value *a = fsl_b_matmul(&b, softmax(&b, s), v);
  set_origin(&b, 2, "res1", "Add");
  fsl_value *r = fsl_b_binary(&b, FSL_OP_add, a, x);
  set_origin(&b, 3, "ln", "LayerNormalization");
  int64_t ax = 1;
  fsl_value *mean = fsl_b_binary_scalar(&b, FSL_OP_mul, fsl_b_reduce(&b, FSL_OP_reduce_sum, r, &ax, 1, true), 0.125);
  fsl_value *d = fsl_b_binary(&b, FSL_OP_sub, r, mean);
  fsl_value *var =
      fsl_b_binary_scalar(&b, FSL_OP_mul, fsl_b_reduce(&b, FSL_OP_reduce_sum, fsl_b_binary(&b, FSL_OP_mul, d, d), &ax, 1, true), 0.125);
  fsl_value *inv = fsl_b_unary(&b, FSL_OP_rsqrt, fsl_b_binary_scalar(&b, FSL_OP_add, var, 1e-5));
  fsl_value *ln = fsl_b_binary(&b, FSL_OP_add, fsl_b_binary(&b, FSL_OP_mul, fsl_b_binary(&b, FSL_OP_mul, d, inv),
                                                           weight(&b, 1, bd)),
                               weight(&b, 1, bd));
  set_origin(&b, 4, "fc1", "MatMul");
  fsl_value *h = fsl_b_matmul(&b, ln, weight(&b, 2, wd));
  set_origin(&b, 5, "fc1_bias", "Add");
  h = fsl_b_binary(&b, FSL_OP_add, h, weight(&b, 1, bd));
  set_origin(&b, 6, "fc1_act", "Relu");
  h = fsl_b_binary_scalar(&b, FSL_OP_max, h, 0.0);
  set_origin(&b, 7, "fc2", "MatMul");
  h = fsl_b_matmul(&b, h, weight(&b, 2, wd));
  set_origin(&b, 8, "res2", "Add");
  h = fsl_b_binary(&b, FSL_OP_add, h, ln);
  assert_int_equal(b.st, FSL_OK);
  output(g, h);
  output(g, s); /* a second output in the middle of Attention */
  assert_int_equal(fsl_graph_verify(g), FSL_OK);
  return g;
}

static void test_block(void **state) {
  (void)state;
  fsl_graph *g = build_block();
  int unfused = plan(g, FSL_STRATEGY_UNFUSED);
  int opfuse = plan(g, FSL_STRATEGY_OPFUSE);
  int greedy = plan(g, FSL_STRATEGY_GREEDY);
  /* Attention alone needs >= 5 kernels (4 matmuls... and its softmax) */
  assert_true(unfused >= count_origins(g) + 4);
  assert_true(opfuse < unfused);
  assert_true(greedy <= opfuse);
  fsl_graph_free(g);
}

/* Nodes without an origin (hand-made graphs): each is its own op. */
static void test_no_origin(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  assert_non_null(g);
  int64_t xd[2] = {2, 3};
  fsl_value *x = input(g, "x", 2, xd);
  fsl_value *y = fsl_graph_add_value(g, "y"), *z = fsl_graph_add_value(g, "z");
  fsl_node *n1 = fsl_graph_add_node(g, FSL_OP_exp, "e", &x, 1, &y, 1, NULL, 0);
  fsl_node *n2 = fsl_graph_add_node(g, FSL_OP_neg, "n", &y, 1, &z, 1, NULL, 0);
  assert_non_null(n1);
  assert_non_null(n2);
  assert_int_equal(fsl_prim_infer(n1), FSL_OK);
  assert_int_equal(fsl_prim_infer(n2), FSL_OK);
  output(g, z);
  assert_int_equal(n1->origin, -1);
  assert_int_equal(plan(g, FSL_STRATEGY_UNFUSED), 2);
  assert_int_equal(plan(g, FSL_STRATEGY_OPFUSE), 1);
  assert_int_equal(plan(g, FSL_STRATEGY_GREEDY), 1);
  fsl_graph_free(g);
}

static void test_bad_strategy(void **state) {
  (void)state;
  fsl_graph *g = build_mlp();
  fsl_kernel_set ks = {.g = g};
  assert_int_equal(fsl_baseline(g, FSL_STRATEGY_OPTIMAL, 0, &ks), FSL_ERR_ARG);
  assert_int_equal(ks.n, 0);
  assert_int_equal(fsl_baseline(NULL, FSL_STRATEGY_UNFUSED, 0, &ks), FSL_ERR_ARG);
  fsl_graph_free(g);
}

static void test_empty(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  assert_non_null(g);
  for (int i = 0; i < 3; i++) assert_int_equal(plan(g, k_strategies[i]), 0);
  fsl_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mlp),        cmocka_unit_test(test_mlp_batched), cmocka_unit_test(test_softmax),
      cmocka_unit_test(test_block),      cmocka_unit_test(test_no_origin),   cmocka_unit_test(test_bad_strategy),
      cmocka_unit_test(test_empty),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
