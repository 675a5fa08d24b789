/* test_passes.c — CSE, DCE, the verifier, the printers and .npy I/O. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <unistd.h>

#include "ir/ir.h"
#include "passes/passes.h"

static const int64_t k_dims[2] = {2, 3};

static fsl_value *input(fsl_graph *g, const char *name) {
  fsl_value *v = fsl_graph_add_value(g, name);
  assert_non_null(v);
  v->dtype = FSL_DT_F32;
  assert_true(fsl_value_set_shape(v, 2, k_dims));
  assert_int_equal(fsl_graph_add_input(g, v), FSL_OK);
  return v;
}

static fsl_value *constant(fsl_graph *g, float x) {
  fsl_value *v = fsl_graph_add_value(g, NULL);
  assert_non_null(v);
  v->dtype = FSL_DT_F32;
  assert_true(fsl_value_set_shape(v, 2, k_dims));
  float *d = fsl_arena_alloc(&g->arena, 6 * sizeof *d);
  assert_non_null(d);
  for (int i = 0; i < 6; i++) d[i] = x;
  v->data = d;
  return v;
}

/* Appends a primitive node with one output and infers its type. */
static fsl_value *node(fsl_graph *g, fsl_op op, fsl_value *a, fsl_value *b, fsl_attr *attrs, int n_attrs) {
  fsl_value *in[2] = {a, b};
  fsl_value *out = fsl_graph_add_value(g, NULL);
  assert_non_null(out);
  fsl_node *n = fsl_graph_add_node(g, op, NULL, in, b ? 2 : 1, &out, 1, attrs, n_attrs);
  assert_non_null(n);
  assert_int_equal(fsl_prim_infer(n), FSL_OK);
  return out;
}

static fsl_attr *axes_attr(fsl_graph *g, int64_t axis) {
  fsl_attr *a = fsl_arena_alloc(&g->arena, sizeof *a);
  assert_non_null(a);
  *a = fsl_attr_make_ints(g, "axes", &axis, 1);
  return a;
}

/*
 * x1 = add(a, b); x2 = add(a, b)           duplicate
 * y = mul(x1, x2)
 * d1 = exp(a); d2 = neg(d1)                 dead branch
 * z1 = mul(y, c1); z2 = mul(y, c2)          c1 == c2: duplicate after constant CSE
 * w = add(z1, z2)                           output
 * r1 = reduce_sum(a){axes=[1]}; r2 = reduce_sum(a){axes=[0]}   different attrs: kept
 * r3 = reduce_sum(a){axes=[1]}             duplicate of r1
 * s = add(r1, r3)                           output; outputs are w, r2, s
 */
static fsl_graph *build(void) {
  fsl_graph *g = fsl_graph_new();
  assert_non_null(g);
  fsl_value *a = input(g, "a"), *b = input(g, "b");
  fsl_value *x1 = node(g, FSL_OP_add, a, b, NULL, 0);
  fsl_value *x2 = node(g, FSL_OP_add, a, b, NULL, 0);
  fsl_value *y = node(g, FSL_OP_mul, x1, x2, NULL, 0);
  fsl_value *d1 = node(g, FSL_OP_exp, a, NULL, NULL, 0);
  node(g, FSL_OP_neg, d1, NULL, NULL, 0);
  fsl_value *c1 = constant(g, 2.0f), *c2 = constant(g, 2.0f);
  fsl_value *z1 = node(g, FSL_OP_mul, y, c1, NULL, 0);
  fsl_value *z2 = node(g, FSL_OP_mul, y, c2, NULL, 0);
  fsl_value *w = node(g, FSL_OP_add, z1, z2, NULL, 0);
  fsl_value *r1 = node(g, FSL_OP_reduce_sum, a, NULL, axes_attr(g, 1), 1);
  fsl_value *r2 = node(g, FSL_OP_reduce_sum, a, NULL, axes_attr(g, 0), 1);
  fsl_value *r3 = node(g, FSL_OP_reduce_sum, a, NULL, axes_attr(g, 1), 1);
  fsl_value *s = node(g, FSL_OP_add, r1, r3, NULL, 0);
  assert_int_equal(fsl_graph_add_output(g, w), FSL_OK);
  assert_int_equal(fsl_graph_add_output(g, r2), FSL_OK);
  assert_int_equal(fsl_graph_add_output(g, s), FSL_OK);
  return g;
}

static int count_op(const fsl_graph *g, fsl_op op) {
  int k = 0;
  for (int i = 0; i < g->n_nodes; i++) k += g->nodes[i]->op == op;
  return k;
}

static void test_cse_dce(void **state) {
  (void)state;
  fsl_graph *g = build();
  assert_int_equal(g->n_nodes, 12);
  assert_int_equal(fsl_graph_verify(g), FSL_OK);

  assert_int_equal(fsl_pass_cse(g), FSL_OK);
  assert_int_equal(fsl_graph_verify(g), FSL_OK);
  /* removed: the second add(a,b), mul(y,c2), the second reduce_sum axes=[1] */
  assert_int_equal(g->n_nodes, 9);
  assert_int_equal(count_op(g, FSL_OP_reduce_sum), 2);
  const fsl_node *w = g->outputs[0]->producer;
  assert_non_null(w);
  assert_ptr_equal(w->in[0], w->in[1]);           /* add(z1, z1) */
  const fsl_node *y = w->in[0]->producer->in[0]->producer;
  assert_int_equal(y->op, FSL_OP_mul);
  assert_ptr_equal(y->in[0], y->in[1]);           /* mul(x1, x1) */
  const fsl_node *s = g->outputs[2]->producer;
  assert_ptr_equal(s->in[0], s->in[1]);           /* add(r1, r1) */
  assert_string_equal(g->outputs[0]->name, "%11");  /* output values keep their names */

  assert_int_equal(fsl_pass_dce(g), FSL_OK);
  assert_int_equal(fsl_graph_verify(g), FSL_OK);
  assert_int_equal(g->n_nodes, 7);                 /* exp and neg are gone */
  assert_int_equal(count_op(g, FSL_OP_exp), 0);
  assert_int_equal(count_op(g, FSL_OP_neg), 0);

  /* idempotent */
  assert_int_equal(fsl_pass_cse(g), FSL_OK);
  assert_int_equal(fsl_pass_dce(g), FSL_OK);
  assert_int_equal(g->n_nodes, 7);
  fsl_graph_free(g);
}

static void test_cse_keeps_output_nodes(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_value *a = input(g, "a");
  fsl_value *x1 = node(g, FSL_OP_exp, a, NULL, NULL, 0);
  fsl_value *x2 = node(g, FSL_OP_exp, a, NULL, NULL, 0);
  assert_int_equal(fsl_graph_add_output(g, x1), FSL_OK);
  assert_int_equal(fsl_graph_add_output(g, x2), FSL_OK);
  assert_int_equal(fsl_pass_cse(g), FSL_OK);
  assert_int_equal(g->n_nodes, 2);  /* merging would rename an output */
  assert_int_equal(fsl_graph_verify(g), FSL_OK);
  fsl_graph_free(g);
}

static void test_verify_rejects_bad_order(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_value *a = input(g, "a");
  fsl_value *x = fsl_graph_add_value(g, "x"), *y = fsl_graph_add_value(g, "y");
  fsl_value *in1[2] = {x, a}, *in2[2] = {a, a};
  /* the consumer of x comes before its producer */
  assert_non_null(fsl_graph_add_node(g, FSL_OP_add, "late_use", in1, 2, &y, 1, NULL, 0));
  assert_non_null(fsl_graph_add_node(g, FSL_OP_add, "producer", in2, 2, &x, 1, NULL, 0));
  x->dtype = y->dtype = FSL_DT_F32;
  fsl_value_set_shape(x, 2, k_dims);
  fsl_value_set_shape(y, 2, k_dims);
  assert_int_equal(fsl_graph_add_output(g, y), FSL_OK);
  assert_int_equal(fsl_graph_verify(g), FSL_ERR_INVALID);
  assert_non_null(strstr(fsl_last_error(), "late_use"));
  /* toposort repairs it */
  assert_int_equal(fsl_graph_toposort(g), FSL_OK);
  assert_int_equal(fsl_graph_verify(g), FSL_OK);
  fsl_graph_free(g);
}

static void test_verify_rejects_bad_shape(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_value *a = input(g, "a");
  fsl_value *x = node(g, FSL_OP_exp, a, NULL, NULL, 0);
  assert_int_equal(fsl_graph_add_output(g, x), FSL_OK);
  assert_int_equal(fsl_graph_verify(g), FSL_OK);
  x->dims[1] = 4;
  assert_int_equal(fsl_graph_verify(g), FSL_ERR_INVALID);
  assert_int_equal(x->dims[1], 4);  /* the verifier restores what it changed */
  x->dims[1] = 3;
  a->n_cons--;  /* a consumer list that disagrees with the nodes */
  assert_int_equal(fsl_graph_verify(g), FSL_ERR_INVALID);
  a->n_cons++;
  assert_int_equal(fsl_graph_verify(g), FSL_OK);
  fsl_value *undefined = fsl_graph_add_value(g, "undefined");
  assert_int_equal(fsl_graph_add_output(g, undefined), FSL_OK);
  assert_int_equal(fsl_graph_verify(g), FSL_ERR_INVALID);
  fsl_graph_free(g);
}

static void test_print(void **state) {
  (void)state;
  fsl_graph *g = build();
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_non_null(f);
  fsl_graph_print(g, f);
  fsl_graph_print_dot(g, f);
  fclose(f);
  assert_non_null(strstr(buf, " = add(a, b) : float[2x3]"));
  assert_non_null(strstr(buf, "reduce_sum(a) {axes=[1]} : float[2x1]"));
  assert_non_null(strstr(buf, "const float[2x3]"));
  assert_non_null(strstr(buf, "digraph"));
  assert_non_null(strstr(buf, "label=\"reduce_sum\\naxes=[0]\""));
  free(buf);
  fsl_graph_free(g);
}

static void test_npy_roundtrip(void **state) {
  (void)state;
  char path[] = "/tmp/fsl_test_npyXXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  int64_t data[6] = {1, -2, 3, -4, 5, 1LL << 40};
  fsl_tensor t = {.dtype = FSL_DT_I64, .rank = 2, .dims = {3, 2}, .data = data};
  assert_int_equal(fsl_tensor_save_npy(path, &t), FSL_OK);
  fsl_tensor r;
  assert_int_equal(fsl_tensor_load_npy(path, &r), FSL_OK);
  assert_int_equal(r.dtype, FSL_DT_I64);
  assert_int_equal(r.rank, 2);
  assert_int_equal(r.dims[0], 3);
  assert_int_equal(r.dims[1], 2);
  assert_memory_equal(r.data, data, sizeof data);
  assert_string_equal(r.name, path + 5);  /* file stem */
  fsl_tensor_free(&r);

  uint8_t flags[1] = {1};
  fsl_tensor s = {.dtype = FSL_DT_BOOL, .rank = 0, .data = flags};
  assert_int_equal(fsl_tensor_save_npy(path, &s), FSL_OK);
  assert_int_equal(fsl_tensor_load_npy(path, &r), FSL_OK);
  assert_int_equal(r.dtype, FSL_DT_BOOL);
  assert_int_equal(r.rank, 0);
  assert_int_equal(((uint8_t *)r.data)[0], 1);
  fsl_tensor_free(&r);

  uint16_t bf[1] = {0};
  fsl_tensor b = {.dtype = FSL_DT_BF16, .rank = 1, .dims = {1}, .data = bf};
  assert_int_equal(fsl_tensor_save_npy(path, &b), FSL_ERR_UNSUPPORTED);
  unlink(path);
}

/* Writes a version-1.0 .npy file with header `dict` and `n_data` zero bytes. */
static void write_npy(const char *path, const char *dict, size_t n_data) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  size_t hl = strlen(dict);
  unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hl & 0xff),
                           (unsigned char)(hl >> 8)};
  assert_int_equal(fwrite(pre, 1, 10, f), 10);
  assert_int_equal(fwrite(dict, 1, hl, f), hl);
  for (size_t i = 0; i < n_data; i++) fputc(0, f);
  fclose(f);
}

static void test_npy_bad_files(void **state) {
  (void)state;
  const char *path = "/tmp/fsl_test_bad.npy";
  fsl_tensor r;
  write_npy(path, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }\n", 16);
  assert_int_equal(fsl_tensor_load_npy(path, &r), FSL_OK);  /* the well-formed baseline */
  assert_string_equal(r.name, "fsl_test_bad");
  fsl_tensor_free(&r);
  write_npy(path, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }\n", 16);
  assert_int_equal(fsl_tensor_load_npy(path, &r), FSL_ERR_UNSUPPORTED);
  write_npy(path, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }\n", 15);
  assert_int_equal(fsl_tensor_load_npy(path, &r), FSL_ERR_PARSE);
  write_npy(path, "{'descr': '<c16', 'fortran_order': False, 'shape': (2, 2), }\n", 64);
  assert_int_equal(fsl_tensor_load_npy(path, &r), FSL_ERR_UNSUPPORTED);
  write_npy(path, "{'descr': '>f4', 'fortran_order': False, 'shape': (2, 2), }\n", 16);
  assert_int_equal(fsl_tensor_load_npy(path, &r), FSL_ERR_UNSUPPORTED);
  write_npy(path, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999), }\n", 0);
  assert_int_equal(fsl_tensor_load_npy(path, &r), FSL_ERR_PARSE);
  write_npy(path, "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }\n", 0);
  assert_int_equal(fsl_tensor_load_npy(path, &r), FSL_ERR_PARSE);
  write_npy(path, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), ", 16);
  assert_int_equal(fsl_tensor_load_npy(path, &r), FSL_ERR_PARSE);
  write_npy(path, "{'descr': '<f4', 'shape': (2, 2), }\n", 16);
  assert_int_equal(fsl_tensor_load_npy(path, &r), FSL_ERR_PARSE);
  /* version 2.0: a 4-byte header length */
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  static const char v2dict[] = "{'descr': '<u2', 'fortran_order': False, 'shape': (3,), }\n";
  unsigned char pre2[12] = {0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0, sizeof v2dict - 1, 0, 0, 0};
  fwrite(pre2, 1, 12, f);
  fputs(v2dict, f);
  fwrite("\x01\x00\x02\x00\x03\x00", 1, 6, f);
  fclose(f);
  assert_int_equal(fsl_tensor_load_npy(path, &r), FSL_OK);
  assert_int_equal(r.dtype, FSL_DT_U16);
  assert_int_equal(r.rank, 1);
  assert_int_equal(((uint16_t *)r.data)[2], 3);
  fsl_tensor_free(&r);
  pre2[6] = 4;  /* unknown version */
  f = fopen(path, "wb");
  assert_non_null(f);
  fwrite(pre2, 1, 12, f);
  fclose(f);
  assert_int_equal(fsl_tensor_load_npy(path, &r), FSL_ERR_UNSUPPORTED);
  f = fopen(path, "wb");
  assert_non_null(f);
  fputs("\x93NUMPY\x01\x00\xff\xff{", f);  /* header length beyond the file */
  fclose(f);
  assert_int_equal(fsl_tensor_load_npy(path, &r), FSL_ERR_PARSE);
  f = fopen(path, "wb");
  assert_non_null(f);
  fputs("junk", f);
  fclose(f);
  assert_int_equal(fsl_tensor_load_npy(path, &r), FSL_ERR_PARSE);
  assert_int_equal(fsl_tensor_load_npy("/nonexistent/x.npy", &r), FSL_ERR_IO);
  unlink(path);
}

static fsl_attr *shape_attr(fsl_graph *g, int64_t d0, int64_t d1) {
  fsl_attr *a = fsl_arena_alloc(&g->arena, sizeof *a);
  assert_non_null(a);
  int64_t d[2] = {d0, d1};
  *a = fsl_attr_make_ints(g, "shape", d, 2);
  return a;
}

/*
 * e = reshape(reshape(c, [3,2]), [2,3]) over a constant c, read by three
 * nodes (one of them twice): y1 = add(x, e), y2 = mul(x, e), y3 = add(y1,
 * y2), y4 = mul(e, e).  After the pass each consumer reads its own copy of
 * the whole chain, copies carry their consumer's origin, and the graph is
 * still valid and in order.
 */
static void test_unshare_views(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  assert_non_null(g);
  fsl_value *x = input(g, "x"), *c = constant(g, 3.0f);
  fsl_value *r = node(g, FSL_OP_reshape, c, NULL, shape_attr(g, 3, 2), 1);
  fsl_value *e = node(g, FSL_OP_reshape, r, NULL, shape_attr(g, 2, 3), 1);
  fsl_value *y1 = node(g, FSL_OP_add, x, e, NULL, 0);
  fsl_value *y2 = node(g, FSL_OP_mul, x, e, NULL, 0);
  fsl_value *y3 = node(g, FSL_OP_add, y1, y2, NULL, 0);
  fsl_value *y4 = node(g, FSL_OP_mul, e, e, NULL, 0);
  y1->producer->origin = 1;
  y2->producer->origin = 2;
  y4->producer->origin = 4;
  assert_int_equal(fsl_graph_add_output(g, y3), FSL_OK);
  assert_int_equal(fsl_graph_add_output(g, y4), FSL_OK);
  assert_int_equal(fsl_pass_unshare_views(g), FSL_OK);
  assert_int_equal(fsl_graph_verify(g), FSL_OK);
  assert_int_equal(count_op(g, FSL_OP_reshape), 6);
  const fsl_node *users[3] = {y1->producer, y2->producer, y4->producer};
  const fsl_value *seen[3] = {NULL, NULL, NULL};
  for (int u = 0; u < 3; u++) {
    const fsl_value *ev = users[u]->in[users[u]->op == FSL_OP_mul && u == 2 ? 0 : 1];
    if (u == 2) assert_ptr_equal(users[u]->in[0], users[u]->in[1]);  /* both uses: one copy */
    assert_non_null(ev->producer);
    assert_int_equal(ev->producer->op, FSL_OP_reshape);
    assert_int_equal(ev->n_cons, u == 2 ? 2 : 1);
    assert_int_equal(ev->producer->origin, users[u]->origin);
    const fsl_value *rv = ev->producer->in[0];
    assert_int_equal(rv->n_cons, 1);
    assert_ptr_equal(rv->producer->in[0], c);
    for (int w = 0; w < u; w++) assert_ptr_not_equal(seen[w], ev);
    seen[u] = ev;
  }
  assert_int_equal(c->n_cons, 3);
  /* each copy sits right before its consumer (orchestration cuts regions
   * by position) */
  for (int i = 0; i < g->n_nodes; i++) {
    const fsl_node *nd = g->nodes[i];
    if (nd->op != FSL_OP_reshape || nd == r->producer || nd == e->producer) continue;
    assert_true(i + 1 < g->n_nodes);
    assert_ptr_equal(nd->out[0]->cons[0], g->nodes[i + 1]);
  }
  /* idempotent: nothing is shared any more */
  assert_int_equal(fsl_pass_unshare_views(g), FSL_OK);
  assert_int_equal(count_op(g, FSL_OP_reshape), 6);
  fsl_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cse_dce),
      cmocka_unit_test(test_unshare_views),
      cmocka_unit_test(test_cse_keeps_output_nodes),
      cmocka_unit_test(test_verify_rejects_bad_order),
      cmocka_unit_test(test_verify_rejects_bad_shape),
      cmocka_unit_test(test_print),
      cmocka_unit_test(test_npy_roundtrip),
      cmocka_unit_test(test_npy_bad_files),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
