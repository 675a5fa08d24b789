/*
 * test_import.c — the ONNX importer and .pb tensor loading.
 *
 * Real models come from Debian's libonnx-testdata (skipped if absent).
 * Small hand-made models are encoded with a tiny protobuf writer below
 * (field numbers from onnx.proto), which also checks the importer against
 * an encoder independent of protobuf-c.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnx/onnx_import.h"

#define TESTDATA "/usr/share/libonnx-testdata/data"

/* ---- a minimal protobuf writer ---- */
typedef struct pb {
  uint8_t *p;
  size_t n, cap;
} pb;

static void pb_raw(pb *b, const void *d, size_t n) {
  if (b->n + n > b->cap) {
    b->cap = (b->n + n) * 2 + 64;
    b->p = realloc(b->p, b->cap);
    assert_non_null(b->p);
  }
  if (n) memcpy(b->p + b->n, d, n);
  b->n += n;
}
static void pb_varint(pb *b, uint64_t v) {
  uint8_t t[10];
  size_t n = 0;
  do {
    t[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
    v >>= 7;
  } while (v);
  pb_raw(b, t, n);
}
static void pb_int(pb *b, int field, int64_t v) {
  pb_varint(b, (uint64_t)field << 3);
  pb_varint(b, (uint64_t)v);
}
static void pb_bytes(pb *b, int field, const void *d, size_t n) {
  pb_varint(b, (uint64_t)field << 3 | 2);
  pb_varint(b, n);
  pb_raw(b, d, n);
}
static void pb_str(pb *b, int field, const char *s) { pb_bytes(b, field, s, strlen(s)); }
static void pb_float(pb *b, int field, float f) {
  pb_varint(b, (uint64_t)field << 3 | 5);
  pb_raw(b, &f, 4);
}
/* Appends sub as a length-delimited field and frees it. */
static void pb_msg(pb *b, int field, pb *sub) {
  pb_bytes(b, field, sub->p, sub->n);
  free(sub->p);
  memset(sub, 0, sizeof *sub);
}
/* Packed repeated varints (int32_data, int64_data, uint64_data, ints). */
static void pb_packed(pb *b, int field, const int64_t *v, int n) {
  pb s = {0};
  for (int i = 0; i < n; i++) pb_varint(&s, (uint64_t)v[i]);
  pb_msg(b, field, &s);
}

/* ---- onnx.proto builders ---- */
enum { T_DIMS = 1, T_TYPE = 2, T_FLOAT = 4, T_INT32 = 5, T_INT64 = 7, T_NAME = 8, T_RAW = 9,
       T_UINT64 = 11, T_EXT = 13, T_LOC = 14 };

static pb tensor(const char *name, int dt, int rank, const int64_t *dims) {
  pb t = {0};
  if (rank) pb_packed(&t, T_DIMS, dims, rank);
  pb_int(&t, T_TYPE, dt);
  pb_str(&t, T_NAME, name);
  return t;
}
static void ext_entry(pb *t, const char *k, const char *v) {
  pb e = {0};
  pb_str(&e, 1, k);
  pb_str(&e, 2, v);
  pb_msg(t, T_EXT, &e);
}
/* A float tensor whose data lives in an external file. */
static pb ext_tensor(const char *name, int rank, const int64_t *dims, const char *loc,
                     const char *off, const char *len) {
  pb t = tensor(name, FSL_DT_F32, rank, dims);
  ext_entry(&t, "location", loc);
  if (off) ext_entry(&t, "offset", off);
  if (len) ext_entry(&t, "length", len);
  pb_int(&t, T_LOC, 1);
  return t;
}
/* ValueInfoProto of a tensor; params[i] non-NULL makes dim i symbolic. */
static pb value_info(const char *name, int elem, int rank, const int64_t *dims,
                     const char *const *params) {
  pb shape = {0}, tt = {0}, type = {0}, vi = {0};
  for (int i = 0; i < rank; i++) {
    pb d = {0};
    if (params && params[i]) pb_str(&d, 2, params[i]);
    else pb_int(&d, 1, dims[i]);
    pb_msg(&shape, 1, &d);
  }
  pb_int(&tt, 1, elem);
  if (rank >= 0) pb_msg(&tt, 2, &shape);
  free(shape.p);
  pb_msg(&type, 1, &tt);
  pb_str(&vi, 1, name);
  pb_msg(&vi, 2, &type);
  return vi;
}
static pb node(const char *op, const char *name, const char *in0, const char *in1,
               const char *out) {
  pb n = {0};
  if (in0) pb_str(&n, 1, in0);
  if (in1) pb_str(&n, 1, in1);
  if (out) pb_str(&n, 2, out);
  if (name) pb_str(&n, 3, name);
  pb_str(&n, 4, op);
  return n;
}
/* Wraps graph g (consumed) into a ModelProto with opset 17 if `opset`. */
static pb model(pb *g, bool opset) {
  pb m = {0}, os = {0};
  pb_int(&m, 1, 8);
  if (opset) {
    pb_str(&os, 1, "");
    pb_int(&os, 2, 17);
    pb_msg(&m, 8, &os);
  }
  pb_msg(&m, 7, g);
  return m;
}
static const int64_t k_23[2] = {2, 3};

/* A graph "Y = Add(X, W)" with X float[2x3] and initializer tensor w (consumed). */
static pb add_graph(pb *w) {
  pb g = {0}, n = node("Add", "add", "X", "W", "Y"), x = value_info("X", 1, 2, k_23, NULL),
     y = value_info("Y", 1, 2, k_23, NULL);
  pb_msg(&g, 1, &n);
  pb_str(&g, 2, "g");
  pb_msg(&g, 5, w);
  pb_msg(&g, 11, &x);
  pb_msg(&g, 12, &y);
  return g;
}

/* Imports an encoded model (freed), expecting status `want`. */
static fsl_graph *import_pb(pb *m, const char *dir, fsl_status want) {
  fsl_graph *g = NULL;
  fsl_status st = fsl_onnx_import(m->p, m->n, dir, &g);
  if (st != want) print_error("status %s: %s\n", fsl_status_name(st), fsl_last_error());
  assert_int_equal(st, want);
  free(m->p);
  if (want != FSL_OK) assert_null(g);
  else assert_non_null(g);
  return g;
}

static fsl_graph *import_file(const char *path, fsl_status want) {
  void *buf;
  size_t len;
  if (fsl_read_file(path, (size_t)1 << 30, &buf, &len) != FSL_OK) return NULL;
  fsl_graph *g = NULL;
  fsl_status st = fsl_onnx_import(buf, len, NULL, &g);
  free(buf);
  if (st != want) print_error("%s: %s\n", path, fsl_last_error());
  assert_int_equal(st, want);
  return g;
}

static fsl_value *find_value(const fsl_graph *g, const char *name) {
  for (int i = 0; i < g->n_values; i++)
    if (!strcmp(g->values[i]->name, name)) return g->values[i];
  return NULL;
}

/* ---- Debian test models ---- */
static void test_debian_add(void **state) {
  fsl_graph *g = import_file(TESTDATA "/node/test_add/model.onnx", FSL_OK);
  if (!g) skip();
  assert_int_equal(g->n_nodes, 1);
  assert_int_equal(g->nodes[0]->op, FSL_OP_Add);
  assert_string_equal(g->nodes[0]->op_type, "Add");
  assert_string_equal(g->nodes[0]->domain, "");
  assert_int_equal(g->n_inputs, 2);
  assert_int_equal(g->n_outputs, 1);
  assert_int_equal(g->inputs[0]->dtype, FSL_DT_F32);
  assert_int_equal(g->inputs[0]->rank, 3);
  assert_int_equal(g->inputs[0]->dims[0], 3);
  assert_int_equal(g->inputs[0]->dims[2], 5);
  assert_true(fsl_graph_opset(g, "") >= 7);
  assert_ptr_equal(g->outputs[0]->producer, g->nodes[0]);
  fsl_graph_free(g);
}

static void test_debian_conv(void **state) {
  fsl_graph *g = import_file(TESTDATA "/node/test_conv_with_strides_padding/model.onnx", FSL_OK);
  if (!g) skip();
  assert_int_equal(g->n_nodes, 1);
  fsl_node *n = g->nodes[0];
  assert_int_equal(n->op, FSL_OP_Conv);
  const int64_t *v;
  assert_int_equal(fsl_attr_ints(n, "strides", &v), 2);
  assert_int_equal(v[0], 2);
  assert_int_equal(fsl_attr_ints(n, "pads", &v), 4);
  assert_int_equal(v[0], 1);
  assert_int_equal(g->inputs[0]->rank, 4);
  assert_int_equal(g->inputs[0]->dims[2], 7);
  assert_int_equal(g->inputs[0]->dims[3], 5);
  fsl_graph_free(g);
}

static void test_debian_initializers(void **state) {
  fsl_graph *g = import_file(TESTDATA "/pytorch-converted/test_Conv2d/model.onnx", FSL_OK);
  if (!g) skip();
  /* inputs 0, 1, 2 are listed, but 1 and 2 are initializers */
  assert_int_equal(g->n_inputs, 1);
  assert_string_equal(g->inputs[0]->name, "0");
  fsl_value *w = find_value(g, "1");
  assert_non_null(w);
  assert_non_null(w->data);
  assert_false(w->is_input);
  assert_int_equal(w->rank, 4);
  assert_int_equal(fsl_value_numel(w), 72);
  assert_float_equal(((float *)w->data)[0], -0.14294092f, 1e-7);
  assert_float_equal(((float *)w->data)[71], -0.10345209f, 1e-7);
  assert_int_equal(g->nodes[0]->n_in, 3);
  assert_ptr_equal(g->nodes[0]->in[1], w);
  fsl_graph_free(g);
}

static void test_debian_constant(void **state) {
  fsl_graph *g = import_file(TESTDATA "/node/test_constant/model.onnx", FSL_OK);
  if (!g) skip();
  const fsl_attr *a = fsl_attr_find(g->nodes[0], "value");
  assert_non_null(a);
  assert_int_equal(a->type, FSL_ATTR_TENSOR);
  assert_int_equal(a->t->rank, 2);
  assert_int_equal(a->t->dims[0], 5);
  assert_int_equal(a->t->dtype, FSL_DT_F32);
  fsl_graph_free(g);
}

static void test_load_pb(void **state) {
  fsl_tensor t;
  fsl_status st = fsl_tensor_load_pb(TESTDATA "/node/test_add/test_data_set_0/input_0.pb", &t);
  if (st == FSL_ERR_IO) skip();
  assert_int_equal(st, FSL_OK);
  assert_int_equal(t.dtype, FSL_DT_F32);
  assert_int_equal(t.rank, 3);
  assert_int_equal(fsl_tensor_numel(&t), 60);
  assert_non_null(t.data);
  fsl_tensor_free(&t);
  assert_int_equal(fsl_tensor_load_pb("/nonexistent/x.pb", &t), FSL_ERR_IO);
}

/* A TensorProto written with int64_data, read back through a file. */
static void test_load_pb_typed(void **state) {
  char path[] = "/tmp/fsl_test_pb_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  int64_t dims[1] = {3}, vals[3] = {-1, 0, 1LL << 40};
  pb t = tensor("ids", FSL_DT_I64, 1, dims);
  pb_packed(&t, T_INT64, vals, 3);
  assert_int_equal(write(fd, t.p, t.n), (ssize_t)t.n);
  close(fd);
  free(t.p);
  fsl_tensor r;
  assert_int_equal(fsl_tensor_load_pb(path, &r), FSL_OK);
  assert_string_equal(r.name, "ids");
  assert_int_equal(r.dtype, FSL_DT_I64);
  assert_memory_equal(r.data, vals, sizeof vals);
  fsl_tensor_free(&r);
  /* garbage */
  FILE *f = fopen(path, "wb");
  fputs("\xff\xff\xff\xff garbage", f);
  fclose(f);
  assert_int_equal(fsl_tensor_load_pb(path, &r), FSL_ERR_PARSE);
  unlink(path);
}

static void test_garbage_and_truncation(void **state) {
  fsl_graph *g = NULL;
  const char junk[] = "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff this is not a model";
  assert_int_equal(fsl_onnx_import(junk, sizeof junk, NULL, &g), FSL_ERR_PARSE);
  assert_null(g);
  assert_int_equal(fsl_onnx_import("", 0, NULL, &g), FSL_ERR_INVALID); /* no graph */
  void *buf;
  size_t len;
  if (fsl_read_file(TESTDATA "/node/test_conv_with_strides_padding/model.onnx", 1 << 20, &buf,
                    &len) != FSL_OK)
    skip();
  /* every prefix: a clean status, never a crash (some prefixes parse) */
  int errors = 0;
  for (size_t n = 0; n < len; n++) {
    fsl_status st = fsl_onnx_import(buf, n, NULL, &g);
    if (st == FSL_OK) fsl_graph_free(g);
    else errors++;
  }
  assert_true(errors > 0);
  assert_int_equal(fsl_onnx_import(buf, len - 3, NULL, &g), FSL_ERR_PARSE);
  free(buf);
}

/* ---- hand-made models ---- */
static void test_raw_and_typed(void **state) {
  float w[6] = {1, 2, 3, 4, 5, 6};
  pb t = tensor("W", FSL_DT_F32, 2, k_23);
  pb_bytes(&t, T_RAW, w, sizeof w);
  pb g = add_graph(&t);
  /* extra initializers in typed fields (ONNX packing rules) */
  int64_t d4[1] = {4}, h[4] = {0x3c00, 0xc000, 0, 0x7bff}, b[4] = {0, 1, 5, 0},
          i8[4] = {-128, -1, 0, 127}, u32[4] = {0, 1, 0xffffffffLL, 7};
  pb th = tensor("H", FSL_DT_F16, 1, d4), tb = tensor("B", FSL_DT_BOOL, 1, d4),
     ti = tensor("I8", FSL_DT_I8, 1, d4), tu = tensor("U32", FSL_DT_U32, 1, d4),
     tf = tensor("F", FSL_DT_F32, 1, d4);
  pb_packed(&th, T_INT32, h, 4);
  pb_packed(&tb, T_INT32, b, 4);
  pb_packed(&ti, T_INT32, i8, 4);
  pb_packed(&tu, T_UINT64, u32, 4);
  pb fl = {0};
  for (int i = 0; i < 4; i++) pb_raw(&fl, &w[i], 4);
  pb_msg(&tf, T_FLOAT, &fl);
  pb_msg(&g, 5, &th);
  pb_msg(&g, 5, &tb);
  pb_msg(&g, 5, &ti);
  pb_msg(&g, 5, &tu);
  pb_msg(&g, 5, &tf);
  pb m = model(&g, true);
  fsl_graph *gr = import_pb(&m, NULL, FSL_OK);
  assert_string_equal(gr->name, "g");
  assert_int_equal(gr->n_inputs, 1);
  fsl_value *W = find_value(gr, "W");
  assert_memory_equal(W->data, w, sizeof w);
  uint16_t hv[4] = {0x3c00, 0xc000, 0, 0x7bff};
  assert_memory_equal(find_value(gr, "H")->data, hv, sizeof hv);
  uint8_t bv[4] = {0, 1, 1, 0};
  assert_memory_equal(find_value(gr, "B")->data, bv, sizeof bv);
  int8_t iv[4] = {-128, -1, 0, 127};
  assert_memory_equal(find_value(gr, "I8")->data, iv, sizeof iv);
  uint32_t uv[4] = {0, 1, 0xffffffffu, 7};
  assert_memory_equal(find_value(gr, "U32")->data, uv, sizeof uv);
  assert_memory_equal(find_value(gr, "F")->data, w, 4 * sizeof(float));
  assert_int_equal(fsl_graph_opset(gr, ""), 17);
  fsl_graph_free(gr);
}

static void test_bad_tensors(void **state) {
  float w[5] = {0};
  pb t = tensor("W", FSL_DT_F32, 2, k_23);
  pb_bytes(&t, T_RAW, w, sizeof w); /* 20 bytes, needs 24 */
  pb g = add_graph(&t), m = model(&g, true);
  import_pb(&m, NULL, FSL_ERR_INVALID);
  assert_non_null(strstr(fsl_last_error(), "'W'"));

  int64_t huge[2] = {1LL << 40, 1LL << 40};
  t = tensor("W", FSL_DT_F32, 2, huge);
  pb_bytes(&t, T_RAW, w, 4);
  g = add_graph(&t);
  m = model(&g, true);
  import_pb(&m, NULL, FSL_ERR_INVALID);
  assert_non_null(strstr(fsl_last_error(), "overflow"));

  t = tensor("W", FSL_DT_STRING, 2, k_23);
  g = add_graph(&t);
  m = model(&g, true);
  import_pb(&m, NULL, FSL_ERR_UNSUPPORTED);
  assert_non_null(strstr(fsl_last_error(), "string"));

  t = tensor("W", 17 /* float8e4m3fn */, 2, k_23);
  pb_bytes(&t, T_RAW, w, 6);
  g = add_graph(&t);
  m = model(&g, true);
  import_pb(&m, NULL, FSL_ERR_UNSUPPORTED);
}

static void test_structure_errors(void **state) {
  float w[6] = {0};
  /* dangling input name */
  pb g = {0}, n = node("Relu", "r", "nope", NULL, "Y"), x, y, m, t;
  pb_msg(&g, 1, &n);
  y = value_info("Y", 1, 2, k_23, NULL);
  pb_msg(&g, 12, &y);
  m = model(&g, true);
  import_pb(&m, NULL, FSL_ERR_INVALID);
  assert_non_null(strstr(fsl_last_error(), "input 'nope' is not produced"));
  assert_non_null(strstr(fsl_last_error(), "node 'r' (Relu)"));

  /* a cycle: a = Relu(b), b = Relu(a) */
  memset(&g, 0, sizeof g);
  n = node("Relu", "ra", "b", NULL, "a");
  pb_msg(&g, 1, &n);
  n = node("Relu", "rb", "a", NULL, "b");
  pb_msg(&g, 1, &n);
  y = value_info("b", 1, 2, k_23, NULL);
  pb_msg(&g, 12, &y);
  m = model(&g, true);
  import_pb(&m, NULL, FSL_ERR_INVALID);
  assert_non_null(strstr(fsl_last_error(), "cycle"));

  /* duplicate definition: an initializer and a node output named W */
  t = tensor("W", FSL_DT_F32, 2, k_23);
  pb_bytes(&t, T_RAW, w, sizeof w);
  g = add_graph(&t);
  n = node("Relu", NULL, "X", NULL, "W");
  pb_msg(&g, 1, &n);
  m = model(&g, true);
  import_pb(&m, NULL, FSL_ERR_INVALID);
  assert_non_null(strstr(fsl_last_error(), "defined twice"));

  /* undefined graph output */
  memset(&g, 0, sizeof g);
  x = value_info("X", 1, 2, k_23, NULL);
  y = value_info("Z", 1, 2, k_23, NULL);
  pb_msg(&g, 11, &x);
  pb_msg(&g, 12, &y);
  m = model(&g, true);
  import_pb(&m, NULL, FSL_ERR_INVALID);
  assert_non_null(strstr(fsl_last_error(), "'Z'"));

  /* ai.onnx nodes but no default-domain opset */
  t = tensor("W", FSL_DT_F32, 2, k_23);
  pb_bytes(&t, T_RAW, w, sizeof w);
  g = add_graph(&t);
  m = model(&g, false);
  import_pb(&m, NULL, FSL_ERR_INVALID);
  assert_non_null(strstr(fsl_last_error(), "opset"));

  /* a ModelProto with no graph */
  memset(&m, 0, sizeof m);
  pb_int(&m, 1, 8);
  import_pb(&m, NULL, FSL_ERR_INVALID);
}

/* Nodes out of order, a custom-domain op, unnamed nodes, attributes, dim_param. */
static void test_nodes_and_attrs(void **state) {
  pb g = {0}, n1 = node("Relu", NULL, "T", NULL, "Y"), n0 = node("MyOp", "custom", "X", "", "T");
  pb_str(&n0, 7, "com.example");
  pb a = {0};
  pb_str(&a, 1, "alpha");
  pb_float(&a, 2, 0.5f);
  pb_int(&a, 20, 1); /* FLOAT */
  pb_msg(&n0, 5, &a);
  pb_str(&a, 1, "k"); /* no type: an old-style INT */
  pb_int(&a, 3, -7);
  pb_msg(&n0, 5, &a);
  pb_str(&a, 1, "mode");
  pb_bytes(&a, 4, "edge", 4);
  pb_int(&a, 20, 3);
  pb_msg(&n0, 5, &a);
  int64_t ints[3] = {1, -2, 3};
  pb_str(&a, 1, "axes");
  pb_packed(&a, 8, ints, 3);
  pb_int(&a, 20, 7);
  pb_msg(&n0, 5, &a);
  pb_str(&a, 1, "names");
  pb_str(&a, 9, "a");
  pb_str(&a, 9, "bc");
  pb_int(&a, 20, 8);
  pb_msg(&n0, 5, &a);
  pb_str(&a, 1, "body");
  pb sub = {0};
  pb_str(&sub, 2, "subgraph");
  pb_msg(&a, 6, &sub);
  pb_int(&a, 20, 5);
  pb_msg(&n0, 5, &a);
  pb_msg(&g, 1, &n1); /* consumer first */
  pb_msg(&g, 1, &n0);
  int64_t dims[3] = {0, 3, 0};
  const char *params[3] = {"batch", NULL, "seq"};
  pb x = value_info("X", 1, 3, dims, params), y = value_info("Y", 1, 3, dims, params);
  pb_msg(&g, 11, &x);
  pb_msg(&g, 12, &y);
  pb m = model(&g, true);
  fsl_graph *gr = import_pb(&m, NULL, FSL_OK);

  assert_int_equal(gr->n_nodes, 2);
  fsl_node *c = gr->nodes[0], *r = gr->nodes[1];
  assert_int_equal(c->op, FSL_OP_NONE);
  assert_string_equal(c->op_type, "MyOp");
  assert_string_equal(c->domain, "com.example");
  assert_string_equal(c->name, "custom");
  assert_int_equal(c->n_in, 2);
  assert_null(c->in[1]);
  assert_int_equal(r->op, FSL_OP_Relu);
  assert_string_equal(r->name, "Relu_0");
  assert_ptr_equal(r->in[0], c->out[0]);
  assert_float_equal(fsl_attr_float(c, "alpha", 0), 0.5, 0);
  assert_int_equal(fsl_attr_int(c, "k", 0), -7);
  assert_string_equal(fsl_attr_str(c, "mode", ""), "edge");
  const int64_t *v;
  assert_int_equal(fsl_attr_ints(c, "axes", &v), 3);
  assert_int_equal(v[1], -2);
  const fsl_attr *s = fsl_attr_find(c, "names");
  assert_int_equal(s->type, FSL_ATTR_STRINGS);
  assert_int_equal(s->n, 2);
  assert_string_equal(s->strings[1], "bc");
  assert_int_equal(fsl_attr_find(c, "body")->type, FSL_ATTR_GRAPH);

  fsl_value *X = gr->inputs[0];
  assert_int_equal(X->rank, 3);
  assert_int_equal(X->dims[0], -1);
  assert_int_equal(X->dims[1], 3);
  assert_non_null(X->dim_param);
  assert_string_equal(X->dim_param[0], "batch");
  assert_null(X->dim_param[1]);
  assert_string_equal(X->dim_param[2], "seq");
  assert_int_equal(gr->outputs[0]->dtype, FSL_DT_F32); /* from the declared type */
  fsl_graph_free(gr);
}

/* ---- external data ---- */
static char g_dir[64], g_out[64];

static void write_file(const char *dir, const char *name, const void *d, size_t n) {
  char p[256];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  FILE *f = fopen(p, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(d, 1, n, f), n);
  fclose(f);
}

static int ext_setup(void **state) {
  strcpy(g_dir, "/tmp/fsl_ext_XXXXXX");
  strcpy(g_out, "/tmp/fsl_out_XXXXXX");
  if (!mkdtemp(g_dir) || !mkdtemp(g_out)) return -1;
  float d[10] = {-1, -2, -3, -4, 1, 2, 3, 4, 5, 6};
  write_file(g_dir, "w.bin", d, sizeof d);
  write_file(g_out, "secret.bin", d, sizeof d);
  char p[256], q[256];
  snprintf(p, sizeof p, "%s/link.bin", g_dir);
  snprintf(q, sizeof q, "%s/secret.bin", g_out);
  if (symlink(q, p) != 0) return -1;
  snprintf(p, sizeof p, "%s/sub", g_dir);
  mkdir(p, 0700);
  return 0;
}

static int ext_teardown(void **state) {
  char p[256];
  const char *files[] = {"w.bin", "link.bin", "sub"};
  for (size_t i = 0; i < 3; i++) {
    snprintf(p, sizeof p, "%s/%s", g_dir, files[i]);
    remove(p);
  }
  snprintf(p, sizeof p, "%s/secret.bin", g_out);
  remove(p);
  rmdir(g_dir);
  rmdir(g_out);
  return 0;
}

/* Imports Add(X, W) with W external; returns the graph or NULL. */
static fsl_graph *ext_model(const char *loc, const char *off, const char *len, const char *dir,
                            fsl_status want) {
  pb t = ext_tensor("W", 2, k_23, loc, off, len);
  pb g = add_graph(&t), m = model(&g, true);
  return import_pb(&m, dir, want);
}

static void test_external_ok(void **state) {
  fsl_graph *g = ext_model("w.bin", "16", "24", g_dir, FSL_OK);
  float want[6] = {1, 2, 3, 4, 5, 6};
  assert_memory_equal(find_value(g, "W")->data, want, sizeof want);
  fsl_graph_free(g);
  g = ext_model("./w.bin", NULL, NULL, g_dir, FSL_OK); /* offset 0, length implied */
  assert_float_equal(((float *)find_value(g, "W")->data)[0], -1, 0);
  fsl_graph_free(g);
}

static void test_external_rejected(void **state) {
  char abs_path[256];
  snprintf(abs_path, sizeof abs_path, "%s/w.bin", g_dir);
  ext_model("w.bin", NULL, NULL, NULL, FSL_ERR_INVALID); /* no folder */
  ext_model(abs_path, NULL, NULL, g_dir, FSL_ERR_INVALID);
  assert_non_null(strstr(fsl_last_error(), "relative"));
  ext_model("../w.bin", NULL, NULL, g_dir, FSL_ERR_INVALID);
  ext_model("sub/../../w.bin", NULL, NULL, g_dir, FSL_ERR_INVALID);
  ext_model("link.bin", NULL, NULL, g_dir, FSL_ERR_INVALID);
  assert_non_null(strstr(fsl_last_error(), "outside"));
  ext_model("sub", NULL, NULL, g_dir, FSL_ERR_INVALID);          /* a folder */
  ext_model("w.bin", "24", NULL, g_dir, FSL_ERR_INVALID);        /* 40 bytes < 24 + 24 */
  ext_model("w.bin", "0", "20", g_dir, FSL_ERR_INVALID);         /* length != 24 */
  ext_model("w.bin", "-4", NULL, g_dir, FSL_ERR_INVALID);        /* bad offset */
  ext_model("w.bin", "99999999999999999999", NULL, g_dir, FSL_ERR_INVALID);
  ext_model("missing.bin", NULL, NULL, g_dir, FSL_ERR_IO);
}

/* protobuf-c recurses per nesting level: deep nesting must be refused. */
static void test_deep_nesting(void **state) {
  pb inner = {0};
  for (int i = 0; i < 5000; i++) {
    pb attr = {0}, nd = {0}, gr = {0};
    pb_msg(&attr, 6, &inner);
    pb_msg(&nd, 5, &attr);
    pb_msg(&gr, 1, &nd);
    inner = gr;
  }
  pb m = {0};
  pb_msg(&m, 7, &inner);
  import_pb(&m, NULL, FSL_ERR_PARSE);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_debian_add),
      cmocka_unit_test(test_debian_conv),
      cmocka_unit_test(test_debian_initializers),
      cmocka_unit_test(test_debian_constant),
      cmocka_unit_test(test_load_pb),
      cmocka_unit_test(test_load_pb_typed),
      cmocka_unit_test(test_garbage_and_truncation),
      cmocka_unit_test(test_raw_and_typed),
      cmocka_unit_test(test_bad_tensors),
      cmocka_unit_test(test_structure_errors),
      cmocka_unit_test(test_nodes_and_attrs),
      cmocka_unit_test_setup_teardown(test_external_ok, ext_setup, ext_teardown),
      cmocka_unit_test_setup_teardown(test_external_rejected, ext_setup, ext_teardown),
      cmocka_unit_test(test_deep_nesting),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
