/* test_ref.c — shape rules (fsl_prim_infer) and reference interpreter
 * (fsl_ref_eval, fsl_ref_run) on small hand-built graphs, with expected
 * values computed by hand. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <math.h>
#include <cmocka.h>

#include "eval/eval.h"

/* ---- helpers ---- */

static fsl_value *val(fsl_graph *g, fsl_dtype dt, int rank, const int64_t *dims) {
  fsl_value *v = fsl_graph_add_value(g, NULL);
  assert_non_null(v);
  v->dtype = dt;
  assert_true(fsl_value_set_shape(v, rank, dims));
  return v;
}

/* Adds primitive op over inputs with attrs (copied into the arena); runs the
 * shape rule; returns the node, or NULL with *st set when the rule fails. */
static fsl_node *prim(fsl_graph *g, fsl_op op, fsl_value **in, int n_in, const fsl_attr *attrs, int na,
                      fsl_status *st) {
  fsl_value *out = fsl_graph_add_value(g, NULL);
  fsl_attr *a = na ? fsl_arena_memdup(&g->arena, attrs, sizeof(fsl_attr) * (size_t)na) : NULL;
  fsl_node *n = fsl_graph_add_node(g, op, "t", in, n_in, &out, 1, a, na);
  assert_non_null(n);
  *st = fsl_prim_infer(n);
  return *st == FSL_OK ? n : NULL;
}

/* Infers and evaluates a node; checks the status is OK. */
static fsl_node *eval(fsl_graph *g, fsl_op op, fsl_value **in, int n_in, const fsl_attr *attrs, int na,
                      const void *const *data, void *out) {
  fsl_status st;
  fsl_node *n = prim(g, op, in, n_in, attrs, na, &st);
  if (st != FSL_OK) fprintf(stderr, "infer: %s\n", fsl_last_error());
  assert_int_equal(st, FSL_OK);
  void *outs[1] = {out};
  st = fsl_ref_eval(n, data, outs);
  if (st != FSL_OK) fprintf(stderr, "eval: %s\n", fsl_last_error());
  assert_int_equal(st, FSL_OK);
  return n;
}

static void check_shape(const fsl_value *v, int rank, const int64_t *dims) {
  assert_int_equal(v->rank, rank);
  for (int i = 0; i < rank; i++) assert_int_equal(v->dims[i], dims[i]);
}

static void check_f32(const float *got, const float *want, int n) {
  for (int i = 0; i < n; i++) {
    if (fabsf(got[i] - want[i]) > 1e-5f) fprintf(stderr, "element %d: got %g want %g\n", i, got[i], want[i]);
    assert_true(fabsf(got[i] - want[i]) <= 1e-5f);
  }
}

static void check_i64(const int64_t *got, const int64_t *want, int n) {
  for (int i = 0; i < n; i++) assert_int_equal(got[i], want[i]);
}

/* ---- linear ---- */

static void test_matmul(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  int64_t da[] = {2, 3}, db[] = {3, 2};
  fsl_value *in[] = {val(g, FSL_DT_F32, 2, da), val(g, FSL_DT_F32, 2, db)};
  float a[] = {1, 2, 3, 4, 5, 6}, b[] = {7, 8, 9, 10, 11, 12}, y[4];
  const void *data[] = {a, b};
  fsl_node *n = eval(g, FSL_OP_matmul, in, 2, NULL, 0, data, y);
  int64_t want_shape[] = {2, 2};
  check_shape(n->out[0], 2, want_shape);
  float want[] = {58, 64, 139, 154};
  check_f32(y, want, 4);

  /* batched int64, full precision */
  int64_t ba[] = {2, 1, 2}, bb[] = {2, 2, 1};
  fsl_value *in2[] = {val(g, FSL_DT_I64, 3, ba), val(g, FSL_DT_I64, 3, bb)};
  int64_t ia[] = {1, 2, 3, 4}, ib[] = {(int64_t)1 << 53, 1, 5, 6}, iy[2];
  const void *data2[] = {ia, ib};
  eval(g, FSL_OP_matmul, in2, 2, NULL, 0, data2, iy);
  int64_t iwant[] = {((int64_t)1 << 53) + 2, 39};
  check_i64(iy, iwant, 2);
  fsl_graph_free(g);
}

static void test_conv_stride_pad(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  int64_t dx[] = {1, 1, 3, 3}, dw[] = {1, 1, 2, 2};
  fsl_value *in[] = {val(g, FSL_DT_F32, 4, dx), val(g, FSL_DT_F32, 4, dw)};
  float x[] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, w[] = {1, 1, 1, 1}, y[4];
  int64_t strides[] = {2, 2}, pads[] = {1, 1, 1, 1};
  fsl_attr at[] = {fsl_attr_make_ints(g, "strides", strides, 2), fsl_attr_make_ints(g, "pads", pads, 4)};
  const void *data[] = {x, w};
  fsl_node *n = eval(g, FSL_OP_conv, in, 2, at, 2, data, y);
  int64_t ws[] = {1, 1, 2, 2};
  check_shape(n->out[0], 4, ws);
  float want[] = {1, 5, 11, 28};
  check_f32(y, want, 4);
  fsl_graph_free(g);
}

static void test_conv_group_dilation(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  /* group 2, 1-D: each channel scaled by its own 1-tap filter */
  int64_t dx[] = {1, 2, 2}, dw[] = {2, 1, 1};
  fsl_value *in[] = {val(g, FSL_DT_F32, 3, dx), val(g, FSL_DT_F32, 3, dw)};
  float x[] = {1, 2, 3, 4}, w[] = {10, 100}, y[4];
  fsl_attr at[] = {fsl_attr_make_int("group", 2)};
  const void *data[] = {x, w};
  eval(g, FSL_OP_conv, in, 2, at, 1, data, y);
  float want[] = {10, 20, 300, 400};
  check_f32(y, want, 4);

  /* kernel dilation 2 */
  int64_t dx2[] = {1, 1, 5}, dw2[] = {1, 1, 2}, dil[] = {2};
  fsl_value *in2[] = {val(g, FSL_DT_F64, 3, dx2), val(g, FSL_DT_F64, 3, dw2)};
  double x2[] = {1, 2, 3, 4, 5}, w2[] = {1, 1}, y2[3];
  fsl_attr at2[] = {fsl_attr_make_ints(g, "dilations", dil, 1)};
  const void *data2[] = {x2, w2};
  eval(g, FSL_OP_conv, in2, 2, at2, 1, data2, y2);
  assert_true(y2[0] == 4 && y2[1] == 6 && y2[2] == 8);
  fsl_graph_free(g);
}

static void test_conv_lhs_dilation(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  /* x [1,2,3] upsampled to [1,0,2,0,3], padded by 1: [0,1,0,2,0,3,0] */
  int64_t dx[] = {1, 1, 3}, dw[] = {1, 1, 2}, lhs[] = {2}, pads[] = {1, 1};
  fsl_value *in[] = {val(g, FSL_DT_F32, 3, dx), val(g, FSL_DT_F32, 3, dw)};
  float x[] = {1, 2, 3}, w[] = {1, 1}, y[6];
  fsl_attr at[] = {fsl_attr_make_ints(g, "lhs_dilation", lhs, 1), fsl_attr_make_ints(g, "pads", pads, 2)};
  const void *data[] = {x, w};
  fsl_node *n = eval(g, FSL_OP_conv, in, 2, at, 2, data, y);
  int64_t ws[] = {1, 1, 6};
  check_shape(n->out[0], 3, ws);
  float want[] = {1, 1, 2, 2, 3, 3};
  check_f32(y, want, 6);
  fsl_graph_free(g);
}

/* ---- movement ---- */

static void test_window(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  int64_t dx[] = {1, 4}, k[] = {2}, s2[] = {2}, d2[] = {2};
  fsl_value *in[] = {val(g, FSL_DT_F32, 2, dx)};
  float x[] = {1, 2, 3, 4}, y[4];
  const void *data[] = {x};
  fsl_attr at[] = {fsl_attr_make_ints(g, "kernel_shape", k, 1), fsl_attr_make_ints(g, "strides", s2, 1)};
  fsl_node *n = eval(g, FSL_OP_window, in, 1, at, 2, data, y);
  int64_t ws[] = {1, 2, 2};
  check_shape(n->out[0], 3, ws);
  float want[] = {1, 2, 3, 4};
  check_f32(y, want, 4);
  fsl_attr at2[] = {fsl_attr_make_ints(g, "kernel_shape", k, 1), fsl_attr_make_ints(g, "dilations", d2, 1)};
  n = eval(g, FSL_OP_window, in, 1, at2, 2, data, y);
  check_shape(n->out[0], 3, ws);
  float want2[] = {1, 3, 2, 4};
  check_f32(y, want2, 4);
  fsl_graph_free(g);
}

static void test_slice_negative_step(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  int64_t dx[] = {2, 6}, st[] = {1, 4}, sp[] = {-1, -2}, sz[] = {2, 3};
  fsl_value *in[] = {val(g, FSL_DT_I32, 2, dx)};
  int32_t x[] = {0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 15}, y[6];
  const void *data[] = {x};
  fsl_attr at[] = {fsl_attr_make_ints(g, "starts", st, 2), fsl_attr_make_ints(g, "steps", sp, 2),
                   fsl_attr_make_ints(g, "sizes", sz, 2)};
  fsl_node *n = eval(g, FSL_OP_slice, in, 1, at, 3, data, y);
  check_shape(n->out[0], 2, sz);
  int32_t want[] = {14, 12, 10, 4, 2, 0};
  for (int i = 0; i < 6; i++) assert_int_equal(y[i], want[i]);
  /* reading past the start is a shape error */
  int64_t sz_bad[] = {2, 4};
  fsl_attr bad[] = {fsl_attr_make_ints(g, "starts", st, 2), fsl_attr_make_ints(g, "steps", sp, 2),
                    fsl_attr_make_ints(g, "sizes", sz_bad, 2)};
  fsl_status s;
  assert_null(prim(g, FSL_OP_slice, in, 1, bad, 3, &s));
  assert_int_equal(s, FSL_ERR_SHAPE);
  fsl_graph_free(g);
}

static void pad_case(fsl_graph *g, fsl_value **in, const float *x, int mode, double value, const float *want) {
  int64_t pads[] = {2, 2};
  fsl_attr at[] = {fsl_attr_make_ints(g, "pads", pads, 2), fsl_attr_make_int("mode", mode),
                   fsl_attr_make_float("value", value)};
  const void *data[] = {x};
  float y[7];
  fsl_node *n = eval(g, FSL_OP_pad, in, 1, at, 3, data, y);
  int64_t ws[] = {7};
  check_shape(n->out[0], 1, ws);
  check_f32(y, want, 7);
}

static void test_pad_modes(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  int64_t dx[] = {3};
  fsl_value *in[] = {val(g, FSL_DT_F32, 1, dx)};
  float x[] = {1, 2, 3};
  float constant[] = {9.5f, 9.5f, 1, 2, 3, 9.5f, 9.5f}, reflect[] = {3, 2, 1, 2, 3, 2, 1};
  float edge[] = {1, 1, 1, 2, 3, 3, 3}, wrap[] = {2, 3, 1, 2, 3, 1, 2};
  pad_case(g, in, x, 0, 9.5, constant);
  pad_case(g, in, x, 1, 0, reflect);
  pad_case(g, in, x, 2, 0, edge);
  pad_case(g, in, x, 3, 0, wrap);
  /* 2-D reflect: pad rows by 1 on both sides */
  int64_t d2[] = {2, 2}, pads2[] = {1, 0, 1, 0};
  fsl_value *in2[] = {val(g, FSL_DT_F32, 2, d2)};
  float x2[] = {1, 2, 3, 4}, y2[8];
  fsl_attr at[] = {fsl_attr_make_ints(g, "pads", pads2, 4), fsl_attr_make_int("mode", 1)};
  const void *data2[] = {x2};
  eval(g, FSL_OP_pad, in2, 1, at, 2, data2, y2);
  float want2[] = {3, 4, 1, 2, 3, 4, 1, 2};
  check_f32(y2, want2, 8);
  fsl_graph_free(g);
}

static void test_permute_expand_concat(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  int64_t dx[] = {2, 3}, perm[] = {1, 0};
  fsl_value *in[] = {val(g, FSL_DT_U8, 2, dx)};
  uint8_t x[] = {1, 2, 3, 4, 5, 6}, y[12];
  const void *data[] = {x};
  fsl_attr at[] = {fsl_attr_make_ints(g, "perm", perm, 2)};
  eval(g, FSL_OP_permute, in, 1, at, 1, data, y);
  uint8_t wp[] = {1, 4, 2, 5, 3, 6};
  assert_memory_equal(y, wp, 6);

  int64_t d1[] = {1, 3}, shape[] = {2, 3};
  fsl_value *in1[] = {val(g, FSL_DT_U8, 2, d1)};
  fsl_attr ae[] = {fsl_attr_make_ints(g, "shape", shape, 2)};
  eval(g, FSL_OP_expand, in1, 1, ae, 1, data, y);
  uint8_t we[] = {1, 2, 3, 1, 2, 3};
  assert_memory_equal(y, we, 6);

  fsl_value *inc[] = {in[0], in1[0]};
  const void *datac[] = {x, x};
  fsl_attr ac[] = {fsl_attr_make_int("axis", 0)};
  fsl_node *n = eval(g, FSL_OP_concat, inc, 2, ac, 1, datac, y);
  int64_t wsc[] = {3, 3};
  check_shape(n->out[0], 2, wsc);
  uint8_t wc[] = {1, 2, 3, 4, 5, 6, 1, 2, 3};
  assert_memory_equal(y, wc, 9);
  fsl_graph_free(g);
}

/* ---- gather ---- */

static void test_gather_negative(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  int64_t dd[] = {3, 2}, di[] = {2};
  fsl_value *in[] = {val(g, FSL_DT_F32, 2, dd), val(g, FSL_DT_I64, 1, di)};
  float d[] = {1, 2, 3, 4, 5, 6}, y[4];
  int64_t idx[] = {-1, 0};
  const void *data[] = {d, idx};
  fsl_attr at[] = {fsl_attr_make_int("axis", 0)};
  fsl_node *n = eval(g, FSL_OP_gather, in, 2, at, 1, data, y);
  int64_t ws[] = {2, 2};
  check_shape(n->out[0], 2, ws);
  float want[] = {5, 6, 1, 2};
  check_f32(y, want, 4);
  /* out of range at eval time */
  int64_t bad[] = {3, 0};
  const void *data2[] = {d, bad};
  void *outs[] = {y};
  assert_int_equal(fsl_ref_eval(n, data2, outs), FSL_ERR_RUNTIME);
  fsl_graph_free(g);
}

static void test_gather_nd_scatter(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  /* GatherND: data 2x2, indices [[0,1],[1,0]] -> [2,3] */
  int64_t dd[] = {2, 2}, di[] = {2, 2};
  fsl_value *in[] = {val(g, FSL_DT_I32, 2, dd), val(g, FSL_DT_I64, 2, di)};
  int32_t d[] = {1, 2, 3, 4}, y[4];
  int64_t idx[] = {0, 1, 1, 0};
  const void *data[] = {d, idx};
  eval(g, FSL_OP_gather_nd, in, 2, NULL, 0, data, y);
  assert_int_equal(y[0], 2);
  assert_int_equal(y[1], 3);
  /* ScatterElements add along axis 1: indices [[1,1],[0,0]] */
  fsl_value *u = val(g, FSL_DT_I32, 2, dd);
  fsl_value *in2[] = {in[0], in[1], u};
  int64_t idx2[] = {1, 1, 0, 0};
  int32_t upd[] = {10, 20, 30, 40};
  const void *data2[] = {d, idx2, upd};
  fsl_attr at[] = {fsl_attr_make_int("axis", 1), fsl_attr_make_int("reduction", 1)};
  eval(g, FSL_OP_scatter_elements, in2, 3, at, 2, data2, y);
  int32_t want[] = {1, 32, 73, 4};
  for (int i = 0; i < 4; i++) assert_int_equal(y[i], want[i]);
  fsl_graph_free(g);
}

/* ---- reduce ---- */

static void test_reduce_axes(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  int64_t dx[] = {2, 3, 2}, axes[] = {0, 2};
  fsl_value *in[] = {val(g, FSL_DT_F32, 3, dx)};
  float x[12], y[3];
  for (int i = 0; i < 12; i++) x[i] = (float)i;
  const void *data[] = {x};
  fsl_attr at[] = {fsl_attr_make_ints(g, "axes", axes, 2)};
  fsl_node *n = eval(g, FSL_OP_reduce_sum, in, 1, at, 1, data, y);
  int64_t ws[] = {1, 3, 1};
  check_shape(n->out[0], 3, ws);
  float want[] = {14, 22, 30};
  check_f32(y, want, 3);
  eval(g, FSL_OP_reduce_max, in, 1, at, 1, data, y);
  float wmax[] = {7, 9, 11};
  check_f32(y, wmax, 3);
  /* int32 prod over everything */
  int64_t all[] = {0, 1, 2};
  fsl_value *ini[] = {val(g, FSL_DT_I32, 3, dx)};
  int32_t xi[12], yi[1];
  for (int i = 0; i < 12; i++) xi[i] = i % 3 + 1;
  const void *datai[] = {xi};
  fsl_attr ati[] = {fsl_attr_make_ints(g, "axes", all, 3)};
  eval(g, FSL_OP_reduce_prod, ini, 1, ati, 1, datai, yi);
  assert_int_equal(yi[0], 1 * 2 * 3 * 1 * 2 * 3 * 1 * 2 * 3 * 1 * 2 * 3);
  /* unsorted axes are rejected */
  int64_t unsorted[] = {2, 0};
  fsl_attr atb[] = {fsl_attr_make_ints(g, "axes", unsorted, 2)};
  fsl_status s;
  assert_null(prim(g, FSL_OP_reduce_sum, in, 1, atb, 1, &s));
  assert_int_equal(s, FSL_ERR_SHAPE);
  fsl_graph_free(g);
}

static void test_argmax_last(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  int64_t dx[] = {2, 4};
  fsl_value *in[] = {val(g, FSL_DT_F32, 2, dx)};
  float x[] = {1, 3, 3, 2, 5, 0, 5, 0};
  int64_t y[2];
  const void *data[] = {x};
  fsl_attr at[] = {fsl_attr_make_int("axis", 1), fsl_attr_make_int("select_last_index", 1)};
  fsl_node *n = eval(g, FSL_OP_argmax, in, 1, at, 2, data, y);
  assert_int_equal(n->out[0]->dtype, FSL_DT_I64);
  int64_t ws[] = {2, 1};
  check_shape(n->out[0], 2, ws);
  int64_t want[] = {2, 2};
  check_i64(y, want, 2);
  fsl_attr at0[] = {fsl_attr_make_int("axis", 1)};
  eval(g, FSL_OP_argmax, in, 1, at0, 1, data, y);
  int64_t want0[] = {1, 0};
  check_i64(y, want0, 2);
  eval(g, FSL_OP_argmin, in, 1, at, 2, data, y);
  int64_t wmin[] = {0, 3};
  check_i64(y, wmin, 2);
  fsl_graph_free(g);
}

/* ---- elementwise ---- */

static void test_where_cast(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  int64_t d[] = {3};
  fsl_value *c = val(g, FSL_DT_BOOL, 1, d), *a = val(g, FSL_DT_F32, 1, d), *b = val(g, FSL_DT_F32, 1, d);
  uint8_t cv[] = {1, 0, 1};
  float av[] = {-1.7f, 2.9f, 0.5f}, bv[] = {10, 20, 30}, y[3];
  fsl_value *in[] = {c, a, b};
  const void *data[] = {cv, av, bv};
  eval(g, FSL_OP_where, in, 3, NULL, 0, data, y);
  float want[] = {-1.7f, 20, 0.5f};
  check_f32(y, want, 3);

  fsl_value *inc[] = {a};
  const void *datac[] = {av};
  int32_t yi[3];
  fsl_attr at[] = {fsl_attr_make_int("to", FSL_DT_I32)};
  fsl_node *n = eval(g, FSL_OP_cast, inc, 1, at, 1, datac, yi);
  assert_int_equal(n->out[0]->dtype, FSL_DT_I32);
  assert_int_equal(yi[0], -1);
  assert_int_equal(yi[1], 2);
  assert_int_equal(yi[2], 0);
  uint8_t yb[3];
  fsl_attr atb[] = {fsl_attr_make_int("to", FSL_DT_BOOL)};
  eval(g, FSL_OP_cast, inc, 1, atb, 1, datac, yb);
  assert_true(yb[0] == 1 && yb[1] == 1 && yb[2] == 1);
  fsl_graph_free(g);
}

static void test_int_arith(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  int64_t d[] = {4};
  fsl_value *in[] = {val(g, FSL_DT_I32, 1, d), val(g, FSL_DT_I32, 1, d)};
  int32_t a[] = {7, -7, 7, -7}, b[] = {2, 2, -2, -2}, y[4];
  const void *data[] = {a, b};
  eval(g, FSL_OP_div, in, 2, NULL, 0, data, y);
  int32_t wdiv[] = {3, -3, -3, 3};
  for (int i = 0; i < 4; i++) assert_int_equal(y[i], wdiv[i]);
  eval(g, FSL_OP_mod, in, 2, NULL, 0, data, y);
  int32_t wmod[] = {1, 1, -1, -1};
  for (int i = 0; i < 4; i++) assert_int_equal(y[i], wmod[i]);
  fsl_attr at[] = {fsl_attr_make_int("fmod", 1)};
  eval(g, FSL_OP_mod, in, 2, at, 1, data, y);
  int32_t wfmod[] = {1, -1, 1, -1};
  for (int i = 0; i < 4; i++) assert_int_equal(y[i], wfmod[i]);
  /* division by zero */
  int32_t z[] = {1, 0, 1, 1};
  const void *dz[] = {a, z};
  fsl_status s;
  fsl_node *n = prim(g, FSL_OP_div, in, 2, NULL, 0, &s);
  void *outs[] = {y};
  assert_int_equal(fsl_ref_eval(n, dz, outs), FSL_ERR_RUNTIME);
  fsl_graph_free(g);
}

static void test_float_unary(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  int64_t d[] = {4};
  fsl_value *in[] = {val(g, FSL_DT_F64, 1, d)};
  double x[] = {0.5, 1.5, 2.5, -2.5}, y[4];
  const void *data[] = {x};
  eval(g, FSL_OP_round, in, 1, NULL, 0, data, y);
  assert_true(y[0] == 0 && y[1] == 2 && y[2] == 2 && y[3] == -2);
  double big[] = {-1000, 0, 1000, NAN};
  const void *db[] = {big};
  eval(g, FSL_OP_sigmoid, in, 1, NULL, 0, db, y);
  assert_true(y[0] == 0 && y[1] == 0.5 && y[2] == 1 && isnan(y[3]));
  fsl_value *in2[] = {in[0], in[0]};
  double m[] = {1, NAN, 3, 4};
  const void *dm[] = {m, x};
  eval(g, FSL_OP_max, in2, 2, NULL, 0, dm, y);
  assert_true(y[0] == 1 && isnan(y[1]) && y[2] == 3 && y[3] == 4);
  fsl_graph_free(g);
}

/* ---- shape errors ---- */

static void test_shape_errors(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  int64_t d1[] = {2, 3}, d2[] = {3, 2}, perm[] = {0, 0};
  fsl_value *in[] = {val(g, FSL_DT_F32, 2, d1), val(g, FSL_DT_F32, 2, d2)};
  fsl_status s;
  assert_null(prim(g, FSL_OP_add, in, 2, NULL, 0, &s));
  assert_int_equal(s, FSL_ERR_SHAPE);
  assert_non_null(strstr(fsl_last_error(), "2x3 and 3x2"));
  fsl_attr at[] = {fsl_attr_make_ints(g, "perm", perm, 2)};
  assert_null(prim(g, FSL_OP_permute, in, 1, at, 1, &s));
  assert_int_equal(s, FSL_ERR_SHAPE);
  /* unknown attribute */
  fsl_attr unk[] = {fsl_attr_make_int("alpha", 1)};
  assert_null(prim(g, FSL_OP_neg, in, 1, unk, 1, &s));
  assert_int_equal(s, FSL_ERR_SHAPE);
  /* dtype mismatch in matmul, bad inner dims */
  fsl_value *mi[] = {in[0], in[0]};
  assert_null(prim(g, FSL_OP_matmul, mi, 2, NULL, 0, &s));
  assert_int_equal(s, FSL_ERR_SHAPE);
  /* conv whose kernel does not fit */
  int64_t dx[] = {1, 1, 2}, dw[] = {1, 1, 3};
  fsl_value *ci[] = {val(g, FSL_DT_F32, 3, dx), val(g, FSL_DT_F32, 3, dw)};
  assert_null(prim(g, FSL_OP_conv, ci, 2, NULL, 0, &s));
  assert_int_equal(s, FSL_ERR_SHAPE);
  /* reshape changing the element count; missing attribute */
  int64_t sh[] = {4};
  fsl_attr ar[] = {fsl_attr_make_ints(g, "shape", sh, 1)};
  assert_null(prim(g, FSL_OP_reshape, in, 1, ar, 1, &s));
  assert_int_equal(s, FSL_ERR_SHAPE);
  assert_null(prim(g, FSL_OP_reshape, in, 1, NULL, 0, &s));
  assert_int_equal(s, FSL_ERR_SHAPE);
  /* ONNX ops are left alone */
  fsl_value *out = fsl_graph_add_value(g, NULL);
  fsl_node *n = fsl_graph_add_node(g, FSL_OP_Relu, "r", in, 1, &out, 1, NULL, 0);
  assert_int_equal(fsl_prim_infer(n), FSL_OK);
  assert_int_equal(out->rank, -1);
  fsl_graph_free(g);
}

/* ---- whole graphs ---- */

static void test_run_graph(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  int64_t d[] = {2, 2};
  fsl_value *x = val(g, FSL_DT_F32, 2, d), *c = val(g, FSL_DT_F32, 2, d);
  static float cdata[] = {1, 1, 1, 1};
  c->data = cdata;
  assert_int_equal(fsl_graph_add_input(g, x), FSL_OK);
  fsl_status s;
  fsl_value *in1[] = {x, c};
  fsl_node *add = prim(g, FSL_OP_add, in1, 2, NULL, 0, &s);
  assert_non_null(add);
  fsl_value *in2[] = {add->out[0], x};
  fsl_node *mm = prim(g, FSL_OP_matmul, in2, 2, NULL, 0, &s);
  assert_non_null(mm);
  assert_int_equal(fsl_graph_add_output(g, mm->out[0]), FSL_OK);
  assert_int_equal(fsl_graph_add_output(g, x), FSL_OK);
  assert_int_equal(fsl_graph_add_output(g, c), FSL_OK);
  float xv[] = {1, 2, 3, 4};
  const void *inputs[] = {xv};
  void *outputs[3];
  s = fsl_ref_run(g, inputs, outputs);
  if (s != FSL_OK) fprintf(stderr, "run: %s\n", fsl_last_error());
  assert_int_equal(s, FSL_OK);
  /* (x+1) @ x = [[2,3],[4,5]] @ [[1,2],[3,4]] */
  float want[] = {11, 16, 19, 28};
  check_f32(outputs[0], want, 4);
  check_f32(outputs[1], xv, 4);
  check_f32(outputs[2], cdata, 4);
  for (int i = 0; i < 3; i++) free(outputs[i]);
  fsl_graph_free(g);
}


/* ---- robustness: random nodes never crash ---- */

static uint32_t lcg(uint32_t *s) {
  *s = *s * 1103515245u + 12345u;
  return *s >> 8;
}

/* A random attribute: INT, FLOAT or INTS with small (possibly bad) values. */
static fsl_attr random_attr(fsl_graph *g, const char *name, uint32_t *s) {
  int64_t v[6];
  int n = (int)(lcg(s) % 6);
  for (int i = 0; i < n; i++) v[i] = (int64_t)(lcg(s) % 8) - 2;
  switch (lcg(s) % 4) {
  case 0: return fsl_attr_make_int(name, (int64_t)(lcg(s) % 6) - 1);
  case 1: return fsl_attr_make_float(name, 1.5);
  default: return fsl_attr_make_ints(g, name, v, n);
  }
}

static void test_random_nodes(void **state) {
  (void)state;
  static const char *const names[] = {
    "to", "detect_positive", "fmod", "axes", "axis", "select_last_index", "shape", "perm",
    "starts", "steps", "sizes", "pads", "mode", "value", "kernel_shape", "strides",
    "dilations", "batch_dims", "reduction", "group", "lhs_dilation"};
  static const fsl_dtype dts[] = {FSL_DT_F32, FSL_DT_I64, FSL_DT_I32, FSL_DT_BOOL, FSL_DT_U8, FSL_DT_F16};
  uint32_t s = 42;
  int ok = 0;
  for (int iter = 0; iter < 4000; iter++) {
    fsl_graph *g = fsl_graph_new();
    fsl_op op = (fsl_op)(1 + lcg(&s) % (FSL_OP_COUNT - 1));
    while (!fsl_op_is_primitive(op)) op = (fsl_op)(1 + lcg(&s) % (FSL_OP_COUNT - 1));
    int n_in = lcg(&s) % 4 ? fsl_op_get(op)->min_in : 1 + (int)(lcg(&s) % 3);
    if (n_in > 3) n_in = 3;
    fsl_value *in[3];
    void *data[3];
    fsl_dtype dt0 = dts[lcg(&s) % 6];
    int r0 = (int)(lcg(&s) % 4);
    int64_t d0[4];
    for (int i = 0; i < 4; i++) d0[i] = lcg(&s) % 4;
    for (int k = 0; k < n_in; k++) {
      bool same = lcg(&s) % 3 != 0; /* usually same shape/dtype as input 0 */
      int64_t d[4];
      int r = same ? r0 : (int)(lcg(&s) % 4);
      for (int i = 0; i < 4; i++) d[i] = same ? d0[i] : lcg(&s) % 4;
      in[k] = val(g, same ? dt0 : dts[lcg(&s) % 6], r, d);
      data[k] = calloc(1, (size_t)fsl_value_nbytes(in[k]) + 1);
    }
    fsl_attr attrs[4];
    int na = lcg(&s) % 2 ? 0 : (int)(lcg(&s) % 4);
    for (int i = 0; i < na; i++) attrs[i] = random_attr(g, names[lcg(&s) % FSL_ARRAY_LEN(names)], &s);
    fsl_status st;
    fsl_node *n = prim(g, op, in, n_in, attrs, na, &st);
    if (n) {
      ok++;
      void *out = calloc(1, (size_t)fsl_value_nbytes(n->out[0]) + 1);
      void *outs[] = {out};
      st = fsl_ref_eval(n, (const void *const *)data, outs);
      assert_true(st == FSL_OK || st == FSL_ERR_RUNTIME);
      free(out);
    } else {
      assert_int_equal(st, FSL_ERR_SHAPE);
      assert_true(fsl_last_error()[0] != 0);
    }
    for (int k = 0; k < n_in; k++) free(data[k]);
    fsl_graph_free(g);
  }
  assert_true(ok > 200); /* a fair number of random nodes are valid */
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_matmul),
    cmocka_unit_test(test_conv_stride_pad),
    cmocka_unit_test(test_conv_group_dilation),
    cmocka_unit_test(test_conv_lhs_dilation),
    cmocka_unit_test(test_window),
    cmocka_unit_test(test_slice_negative_step),
    cmocka_unit_test(test_pad_modes),
    cmocka_unit_test(test_permute_expand_concat),
    cmocka_unit_test(test_gather_negative),
    cmocka_unit_test(test_gather_nd_scatter),
    cmocka_unit_test(test_reduce_axes),
    cmocka_unit_test(test_argmax_last),
    cmocka_unit_test(test_where_cast),
    cmocka_unit_test(test_int_arith),
    cmocka_unit_test(test_float_unary),
    cmocka_unit_test(test_shape_errors),
    cmocka_unit_test(test_run_graph),
    cmocka_unit_test(test_random_nodes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
