/* test_kernel.c — kernels (fsl_kernel_make: kinds, legality, convexity,
 * inputs/outputs, canonical hash, flops/bytes) and candidate enumeration
 * (fsl_candidates) on small primitive graphs built with the builder. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "fission/builder.h"
#include "test_graph.h"
#include "orchestrate/orchestrate.h"

/* ---- helpers ---- */


static fsl_node *P(fsl_value *v) {
  assert_non_null(v);
  assert_non_null(v->producer);
  return v->producer;
}

/* Makes a kernel of the given nodes; NULL when not legal. */
static fsl_kernel *make(const fsl_graph *g, const int *topo, fsl_node **nodes, int n, const char **why) {
  fsl_kernel *k = NULL;
  const char *w = NULL;
  assert_int_equal(fsl_kernel_make(g, topo, nodes, n, &k, &w), FSL_OK);
  if (!k) assert_non_null(w);
  if (why) *why = w;
  return k;
}

static bool has_value(fsl_value *const *vs, int n, const fsl_value *v) {
  for (int i = 0; i < n; i++)
    if (vs[i] == v) return true;
  return false;
}

/* Does the candidate set hold exactly this node set? */
static bool has_set(const fsl_kernel_set *s, fsl_node *const *nodes, int n) {
  for (int i = 0; i < s->n; i++) {
    const fsl_kernel *k = s->k[i];
    if (k->n_nodes != n) continue;
    bool all = true;
    for (int j = 0; j < n && all; j++) {
      bool found = false;
      for (int q = 0; q < k->n_nodes && !found; q++) found = k->nodes[q] == nodes[j];
      all = found;
    }
    if (all) return true;
  }
  return false;
}

/* softmax over axis 1 of x [4, 8]: reduce_max, expand, sub, exp,
 * reduce_sum, expand, div. */
static fsl_value *softmax(fsl_builder *b, fsl_value *x) {
  int64_t ax = 1;
  fsl_value *m = fsl_b_reduce(b, FSL_OP_reduce_max, x, &ax, 1, true);
  fsl_value *e = fsl_b_unary(b, FSL_OP_exp, fsl_b_binary(b, FSL_OP_sub, x, m));
  fsl_value *s = fsl_b_reduce(b, FSL_OP_reduce_sum, e, &ax, 1, true);
  return fsl_b_binary(b, FSL_OP_div, e, s);
}

/* layer norm over the last axis of x [4, 16] with scale and bias inputs [16]. */
static fsl_value *layernorm(fsl_builder *b, fsl_value *x, fsl_value *scale, fsl_value *bias) {
  int64_t ax = 1;
  fsl_value *mean = fsl_b_binary_scalar(b, FSL_OP_div, fsl_b_reduce(b, FSL_OP_reduce_sum, x, &ax, 1, true), 16);
  fsl_value *d = fsl_b_binary(b, FSL_OP_sub, x, mean);
  fsl_value *var = fsl_b_binary_scalar(b, FSL_OP_div,
                                       fsl_b_reduce(b, FSL_OP_reduce_sum, fsl_b_binary(b, FSL_OP_mul, d, d), &ax, 1, true), 16);
  fsl_value *istd = fsl_b_unary(b, FSL_OP_rsqrt, fsl_b_binary_scalar(b, FSL_OP_add, var, 1e-5));
  fsl_value *y = fsl_b_binary(b, FSL_OP_mul, fsl_b_binary(b, FSL_OP_mul, d, istd), scale);
  return fsl_b_binary(b, FSL_OP_add, y, bias);
}

/* relu(x @ w + bias) */
static fsl_value *dense_relu(fsl_builder *b, fsl_value *x, fsl_value *w, fsl_value *bias) {
  fsl_value *y = fsl_b_binary(b, FSL_OP_add, fsl_b_matmul(b, x, w), bias);
  return fsl_b_binary_scalar(b, FSL_OP_max, y, 0);
}

/* ---- tests ---- */

static void test_topo_index(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = {.g = g, .fold = true};
  int64_t d[2] = {4, 8};
  fsl_value *x = input(g, "x", 2, d);
  fsl_value *y = fsl_b_unary(&b, FSL_OP_neg, fsl_b_unary(&b, FSL_OP_exp, x));
  assert_int_equal(b.st, FSL_OK);
  int *topo = fsl_graph_topo_index(g);
  assert_non_null(topo);
  for (int i = 0; i < g->n_nodes; i++) assert_int_equal(topo[g->nodes[i]->id], i);
  assert_int_equal(topo[P(y)->id], 1);
  free(topo);
  fsl_graph_free(g);
}

static void test_softmax_kernel(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = {.g = g, .fold = true};
  int64_t d[2] = {4, 8};
  fsl_value *x = input(g, "x", 2, d);
  fsl_value *y = softmax(&b, x);
  assert_int_equal(b.st, FSL_OK);
  assert_int_equal(fsl_graph_add_output(g, y), FSL_OK);
  assert_int_equal(g->n_nodes, 7);
  int *topo = fsl_graph_topo_index(g);

  /* the whole softmax, nodes given in reverse order and with a duplicate */
  fsl_node *all[8];
  for (int i = 0; i < 7; i++) all[i] = g->nodes[6 - i];
  all[7] = g->nodes[3];
  fsl_kernel *k = make(g, topo, all, 8, NULL);
  assert_non_null(k);
  assert_int_equal(k->kind, FSL_KERNEL_REDUCE);
  assert_int_equal(k->n_nodes, 7);
  for (int i = 0; i < 7; i++) assert_ptr_equal(k->nodes[i], g->nodes[i]);
  assert_int_equal(k->n_in, 1);
  assert_ptr_equal(k->in[0], x);
  assert_int_equal(k->n_out, 1);
  assert_ptr_equal(k->out[0], y);
  /* flops: 2 reductions over 32 + sub, exp, div over 32; bytes: x and y */
  assert_true(k->flops == 5 * 32);
  assert_true(k->bytes == 2 * 32 * 4);
  fsl_kernel_free(k);

  /* exp alone: LOOP; sub + exp: inputs in first-use order */
  fsl_node *sub = P(y)->in[0]->producer->in[0]->producer;
  assert_int_equal(sub->op, FSL_OP_sub);
  fsl_node *ex = P(sub->out[0]->cons[0]->out[0]);
  assert_int_equal(ex->op, FSL_OP_exp);
  fsl_node *se[2] = {ex, sub};
  k = make(g, topo, se, 2, NULL);
  assert_non_null(k);
  assert_int_equal(k->kind, FSL_KERNEL_LOOP);
  assert_int_equal(k->n_in, 2);
  assert_ptr_equal(k->in[0], x);
  assert_ptr_equal(k->in[1], sub->in[1]);
  assert_int_equal(k->n_out, 1);
  assert_ptr_equal(k->out[0], ex->out[0]);
  fsl_kernel_free(k);

  /* reduce_max and sub without the expand between them: not convex */
  fsl_node *rmax = sub->in[1]->producer->in[0]->producer;
  assert_int_equal(rmax->op, FSL_OP_reduce_max);
  fsl_node *rs[2] = {rmax, sub};
  const char *why;
  assert_null(make(g, topo, rs, 2, &why));
  assert_non_null(strstr(why, "convex"));

  /* reduce_max + expand + sub: REDUCE, sub's output (row space) out */
  fsl_node *res[3] = {rmax, sub->in[1]->producer, sub};
  k = make(g, topo, res, 3, NULL);
  assert_non_null(k);
  assert_int_equal(k->kind, FSL_KERNEL_REDUCE);
  assert_int_equal(k->n_in, 1);
  assert_int_equal(k->n_out, 1);
  assert_ptr_equal(k->out[0], sub->out[0]);
  fsl_kernel_free(k);

  /* empty set */
  assert_null(make(g, topo, NULL, 0, NULL));
  free(topo);
  fsl_graph_free(g);
}

static void test_layernorm_kernel(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = {.g = g, .fold = true};
  int64_t d[2] = {4, 16}, d1[1] = {16};
  fsl_value *x = input(g, "x", 2, d);
  fsl_value *sc = input(g, "scale", 1, d1), *bi = input(g, "bias", 1, d1);
  fsl_value *y = layernorm(&b, x, sc, bi);
  assert_int_equal(b.st, FSL_OK);
  assert_int_equal(fsl_graph_add_output(g, y), FSL_OK);
  int *topo = fsl_graph_topo_index(g);
  fsl_kernel *k = make(g, topo, g->nodes, g->n_nodes, NULL);
  assert_non_null(k);
  assert_int_equal(k->kind, FSL_KERNEL_REDUCE);
  assert_int_equal(k->n_out, 1);
  assert_ptr_equal(k->out[0], y);
  assert_true(has_value(k->in, k->n_in, x));
  assert_true(has_value(k->in, k->n_in, sc));
  assert_true(has_value(k->in, k->n_in, bi));
  fsl_kernel_free(k);

  /* the reduce_sum of the mean with its input's two reductions' spaces: a
   * reduction over axis 0 next to one over axis 1 does not share kept space */
  int64_t ax0 = 0;
  fsl_value *r0 = fsl_b_reduce(&b, FSL_OP_reduce_sum, x, &ax0, 1, true);
  assert_int_equal(b.st, FSL_OK);
  fsl_node *rsum1 = NULL;
  for (int i = 0; i < g->n_nodes && !rsum1; i++)
    if (g->nodes[i]->op == FSL_OP_reduce_sum) rsum1 = g->nodes[i];
  fsl_node *two[2] = {rsum1, P(r0)};
  free(topo);
  topo = fsl_graph_topo_index(g);
  const char *why;
  assert_null(make(g, topo, two, 2, &why));
  assert_non_null(strstr(why, "kept"));
  free(topo);
  fsl_graph_free(g);
}

static void test_linear_kernel(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = {.g = g, .fold = true};
  int64_t dx[2] = {4, 8}, dw[2] = {8, 16}, db[1] = {16};
  fsl_value *x1 = input(g, "x1", 2, dx), *w1 = input(g, "w1", 2, dw), *b1 = input(g, "b1", 1, db);
  fsl_value *x2 = input(g, "x2", 2, dx), *w2 = input(g, "w2", 2, dw), *b2 = input(g, "b2", 1, db);
  int first = g->n_nodes;
  fsl_value *y1 = dense_relu(&b, x1, w1, b1);
  int mid = g->n_nodes;
  fsl_value *y2 = dense_relu(&b, x2, w2, b2);
  int end = g->n_nodes;
  assert_int_equal(b.st, FSL_OK);
  assert_int_equal(fsl_graph_add_output(g, y1), FSL_OK);
  assert_int_equal(fsl_graph_add_output(g, y2), FSL_OK);
  assert_int_equal(mid - first, end - mid);
  int *topo = fsl_graph_topo_index(g);

  fsl_kernel *k1 = make(g, topo, g->nodes + first, mid - first, NULL);
  fsl_kernel *k2 = make(g, topo, g->nodes + mid, end - mid, NULL);
  assert_non_null(k1);
  assert_non_null(k2);
  assert_int_equal(k1->kind, FSL_KERNEL_LINEAR);
  /* x, w, the broadcast bias and the relu's (folded, broadcast) zero */
  assert_int_equal(k1->n_in, 4);
  assert_ptr_equal(k1->in[0], x1);
  assert_ptr_equal(k1->in[1], w1);
  assert_non_null(k1->in[3]->data);
  assert_int_equal(k1->n_out, 1);
  assert_ptr_equal(k1->out[0], y1);
  /* the same subgraph at two places: one canonical hash */
  assert_true(k1->hash == k2->hash);
  /* flops: matmul 2*4*16*8, add and max 64 each */
  assert_true(k1->flops == 2.0 * 4 * 16 * 8 + 2 * 64);
  assert_true(k1->bytes == (32 + 128 + 16 + 64 + 64) * 4.0);

  /* matmul alone: LINEAR; its hash differs from the fused kernel's */
  fsl_node *mm = NULL;
  for (int i = first; i < mid; i++)
    if (g->nodes[i]->op == FSL_OP_matmul) mm = g->nodes[i];
  assert_non_null(mm);
  fsl_kernel *km = make(g, topo, &mm, 1, NULL);
  assert_non_null(km);
  assert_int_equal(km->kind, FSL_KERNEL_LINEAR);
  assert_true(km->flops == 2.0 * 4 * 16 * 8);
  assert_true(km->bytes == (32 + 128 + 64) * 4.0);
  assert_true(km->hash != k1->hash);
  fsl_kernel_free(km);

  /* matmul + relu without the bias add: not convex */
  fsl_node *mr[2] = {mm, P(y1)};
  const char *why;
  assert_null(make(g, topo, mr, 2, &why));
  assert_non_null(strstr(why, "convex"));

  /* matmul + the bias broadcast (not yet feeding an epilogue): not legal */
  fsl_node *add = P(P(y1)->in[0]);
  assert_int_equal(add->op, FSL_OP_add);
  fsl_node *bias_exp = P(add->in[1]);
  fsl_node *mb[2] = {mm, bias_exp};
  assert_null(make(g, topo, mb, 2, NULL));
  /* matmul + add: legal, the broadcast bias is an input */
  fsl_node *ma[2] = {mm, add};
  fsl_kernel *k = make(g, topo, ma, 2, NULL);
  assert_non_null(k);
  assert_int_equal(k->kind, FSL_KERNEL_LINEAR);
  assert_true(has_value(k->in, k->n_in, add->in[1]));
  fsl_kernel_free(k);

  /* two linear ops */
  fsl_node *mm2 = NULL;
  for (int i = mid; i < end; i++)
    if (g->nodes[i]->op == FSL_OP_matmul) mm2 = g->nodes[i];
  fsl_node *two[2] = {mm, mm2};
  assert_null(make(g, topo, two, 2, &why));

  fsl_kernel_free(k1);
  fsl_kernel_free(k2);
  free(topo);
  fsl_graph_free(g);
}

/* x [2, 4, 8] @ w [8, 16]: reshape (batch into M), matmul, reshape back */
static void test_linear_prologue(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = {.g = g, .fold = true};
  int64_t dx[3] = {2, 4, 8}, dw[2] = {8, 16};
  fsl_value *x = input(g, "x", 3, dx), *w = input(g, "w", 2, dw);
  fsl_value *y = fsl_b_unary(&b, FSL_OP_tanh, fsl_b_matmul(&b, x, w));
  assert_int_equal(b.st, FSL_OK);
  assert_int_equal(fsl_graph_add_output(g, y), FSL_OK);
  assert_int_equal(g->n_nodes, 4);
  assert_int_equal(g->nodes[0]->op, FSL_OP_reshape);
  int *topo = fsl_graph_topo_index(g);
  fsl_kernel *k = make(g, topo, g->nodes, 4, NULL);
  assert_non_null(k);
  assert_int_equal(k->kind, FSL_KERNEL_LINEAR);
  assert_int_equal(k->n_in, 2);
  assert_ptr_equal(k->in[0], x);
  fsl_kernel_free(k);
  /* the prologue reshape also read outside: not legal */
  fsl_value *z = fsl_b_unary(&b, FSL_OP_neg, g->nodes[0]->out[0]);
  assert_int_equal(b.st, FSL_OK);
  assert_int_equal(fsl_graph_add_output(g, z), FSL_OK);
  free(topo);
  topo = fsl_graph_topo_index(g);
  const char *why;
  assert_null(make(g, topo, g->nodes, 4, &why));
  assert_non_null(strstr(why, "prologue"));
  /* an elementwise node feeding the linear op: not legal */
  fsl_graph *g2 = fsl_graph_new();
  fsl_builder b2 = {.g = g2, .fold = true};
  int64_t d2[2] = {4, 8};
  fsl_value *x2 = input(g2, "x", 2, d2), *w2 = input(g2, "w", 2, dw);
  fsl_value *y2 = fsl_b_matmul(&b2, fsl_b_unary(&b2, FSL_OP_exp, x2), w2);
  assert_int_equal(b2.st, FSL_OK);
  assert_int_equal(fsl_graph_add_output(g2, y2), FSL_OK);
  int *topo2 = fsl_graph_topo_index(g2);
  assert_null(make(g2, topo2, g2->nodes, g2->n_nodes, NULL));
  free(topo2);
  fsl_graph_free(g2);
  free(topo);
  fsl_graph_free(g);
}

/* a = exp(x); b = neg(a); c = abs(a); d = add(b, c); e = slice(a) */
static void test_diamond(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = {.g = g, .fold = true};
  int64_t dx[2] = {4, 8};
  fsl_value *x = input(g, "x", 2, dx);
  fsl_value *a = fsl_b_unary(&b, FSL_OP_exp, x);
  fsl_value *bb = fsl_b_unary(&b, FSL_OP_neg, a);
  fsl_value *c = fsl_b_unary(&b, FSL_OP_abs, a);
  fsl_value *d = fsl_b_binary(&b, FSL_OP_add, bb, c);
  fsl_value *e = fsl_b_slice_axis(&b, a, 0, 0, 2);
  assert_int_equal(b.st, FSL_OK);
  assert_int_equal(fsl_graph_add_output(g, d), FSL_OK);
  assert_int_equal(fsl_graph_add_output(g, e), FSL_OK);
  int *topo = fsl_graph_topo_index(g);
  const char *why;

  fsl_node *ad[2] = {P(a), P(d)};
  assert_null(make(g, topo, ad, 2, &why));
  assert_non_null(strstr(why, "convex"));
  fsl_node *abd[3] = {P(a), P(bb), P(d)};
  assert_null(make(g, topo, abd, 3, &why));
  assert_non_null(strstr(why, "convex"));

  fsl_node *abcd[4] = {P(d), P(c), P(bb), P(a)};
  fsl_kernel *k = make(g, topo, abcd, 4, NULL);
  assert_non_null(k);
  assert_int_equal(k->kind, FSL_KERNEL_LOOP);
  assert_int_equal(k->n_in, 1);
  /* a is read by the slice outside: an output too */
  assert_int_equal(k->n_out, 2);
  assert_ptr_equal(k->out[0], a);
  assert_ptr_equal(k->out[1], d);
  fsl_kernel_free(k);

  /* {a, b}: two outputs of one shape */
  fsl_node *ab[2] = {P(a), P(bb)};
  k = make(g, topo, ab, 2, NULL);
  assert_non_null(k);
  assert_int_equal(k->n_out, 2);
  fsl_kernel_free(k);

  /* {a, slice}: outputs of different shapes (a is read by b and c) */
  fsl_node *ae[2] = {P(a), P(e)};
  assert_null(make(g, topo, ae, 2, &why));
  assert_non_null(strstr(why, "shape"));
  free(topo);
  fsl_graph_free(g);
}

static void test_opaque(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = {.g = g, .fold = true};
  int64_t dx[1] = {8};
  fsl_value *x = input(g, "x", 1, dx);
  fsl_value *a = fsl_b_unary(&b, FSL_OP_exp, x);
  assert_int_equal(b.st, FSL_OK);
  fsl_value *axis = fsl_b_scalar(&b, FSL_DT_I64, 0);
  fsl_value *cs = fsl_graph_add_value(g, "cs");
  cs->dtype = FSL_DT_F32;
  assert_true(fsl_value_set_shape(cs, 1, dx));
  fsl_value *in[2] = {a, axis};
  fsl_node *op = fsl_graph_add_node(g, FSL_OP_CumSum, "cumsum", in, 2, &cs, 1, NULL, 0);
  assert_non_null(op);
  fsl_value *y = fsl_b_unary(&b, FSL_OP_neg, cs);
  assert_int_equal(b.st, FSL_OK);
  assert_int_equal(fsl_graph_add_output(g, y), FSL_OK);
  int *topo = fsl_graph_topo_index(g);
  fsl_kernel *k = make(g, topo, &op, 1, NULL);
  assert_non_null(k);
  assert_int_equal(k->kind, FSL_KERNEL_OPAQUE);
  assert_int_equal(k->n_in, 2);
  fsl_kernel_free(k);
  fsl_node *two[2] = {P(a), op};
  assert_null(make(g, topo, two, 2, NULL));

  fsl_kernel_set s;
  assert_int_equal(fsl_candidates(g, NULL, &s), FSL_OK);
  for (int i = 0; i < s.n; i++)
    for (int j = 0; j < s.k[i]->n_nodes; j++)
      if (s.k[i]->nodes[j] == op) assert_int_equal(s.k[i]->n_nodes, 1);
  assert_true(has_set(&s, &op, 1));
  fsl_kernel_set_free(&s);
  assert_int_equal(s.n, 0);
  free(topo);
  fsl_graph_free(g);
}

static void test_conv_flops(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = {.g = g, .fold = true};
  int64_t dx[4] = {1, 2, 5, 5}, dw[4] = {3, 2, 3, 3};
  fsl_value *x = input(g, "x", 4, dx), *w = input(g, "w", 4, dw);
  int64_t one[2] = {1, 1}, pads[4] = {0, 0, 0, 0};
  fsl_value *y = fsl_b_conv(&b, x, w, one, one, pads, 1, NULL);
  assert_int_equal(b.st, FSL_OK);
  assert_int_equal(fsl_graph_add_output(g, y), FSL_OK);
  int *topo = fsl_graph_topo_index(g);
  fsl_node *n = P(y);
  fsl_kernel *k = make(g, topo, &n, 1, NULL);
  assert_non_null(k);
  assert_int_equal(k->kind, FSL_KERNEL_LINEAR);
  /* 2 * N*M*oh*ow * C*kh*kw = 2 * 1*3*3*3 * 2*3*3 */
  assert_true(k->flops == 2.0 * 27 * 18);
  fsl_kernel_free(k);
  free(topo);
  fsl_graph_free(g);
}

/* softmax(relu(x @ w + bias)) followed by a layer norm of another input */
static void test_candidates(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = {.g = g, .fold = true};
  int64_t dx[2] = {4, 8}, dw[2] = {8, 8}, db[1] = {8}, dl[2] = {4, 16}, d16[1] = {16};
  fsl_value *x = input(g, "x", 2, dx), *w = input(g, "w", 2, dw), *bias = input(g, "b", 1, db);
  fsl_value *z = input(g, "z", 2, dl), *sc = input(g, "scale", 1, d16), *bi = input(g, "bias", 1, d16);
  fsl_value *h = dense_relu(&b, x, w, bias);
  int lin_end = g->n_nodes;
  fsl_value *y = softmax(&b, h);
  int smax_end = g->n_nodes;
  fsl_value *ln = layernorm(&b, z, sc, bi);
  assert_int_equal(b.st, FSL_OK);
  assert_int_equal(fsl_graph_add_output(g, y), FSL_OK);
  assert_int_equal(fsl_graph_add_output(g, ln), FSL_OK);

  fsl_candidate_options opt = {.max_nodes = 24, .max_per_seed = 64};
  fsl_kernel_set s;
  assert_int_equal(fsl_candidates(g, &opt, &s), FSL_OK);
  assert_ptr_equal(s.g, g);
  assert_true(s.n > g->n_nodes);
  /* every node alone */
  for (int i = 0; i < g->n_nodes; i++) assert_true(has_set(&s, &g->nodes[i], 1));
  /* the dense + relu, the softmax, the layer norm, each whole */
  assert_true(has_set(&s, g->nodes, lin_end));
  assert_true(has_set(&s, g->nodes + lin_end, smax_end - lin_end));
  assert_true(has_set(&s, g->nodes + smax_end, g->n_nodes - smax_end));
  /* ids, legality, no duplicate node sets */
  for (int i = 0; i < s.n; i++) {
    assert_int_equal(s.k[i]->id, i);
    assert_true(s.k[i]->n_nodes <= 24);
    for (int j = i + 1; j < s.n; j++) {
      if (s.k[i]->n_nodes != s.k[j]->n_nodes) continue;
      assert_false(memcmp(s.k[i]->nodes, s.k[j]->nodes, sizeof(fsl_node *) * (size_t)s.k[i]->n_nodes) == 0);
    }
  }
  fsl_kernel_set_free(&s);

  /* a size cap of 1: singletons only */
  opt.max_nodes = 1;
  assert_int_equal(fsl_candidates(g, &opt, &s), FSL_OK);
  assert_int_equal(s.n, g->n_nodes);
  fsl_kernel_set_free(&s);

  /* a small per-seed budget still covers every node */
  opt.max_nodes = 4;
  opt.max_per_seed = 2;
  assert_int_equal(fsl_candidates(g, &opt, &s), FSL_OK);
  for (int i = 0; i < g->n_nodes; i++) assert_true(has_set(&s, &g->nodes[i], 1));
  fsl_kernel_set_free(&s);
  fsl_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_topo_index),
      cmocka_unit_test(test_softmax_kernel),
      cmocka_unit_test(test_layernorm_kernel),
      cmocka_unit_test(test_linear_kernel),
      cmocka_unit_test(test_linear_prologue),
      cmocka_unit_test(test_diamond),
      cmocka_unit_test(test_opaque),
      cmocka_unit_test(test_conv_flops),
      cmocka_unit_test(test_candidates),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
