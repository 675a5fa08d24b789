/*
 * test_graph.h — helpers shared by the unit tests that build primitive
 * graphs by hand.  Include after <cmocka.h>.
 */
#ifndef FSL_TEST_GRAPH_H
#define FSL_TEST_GRAPH_H

#include "fission/builder.h"

#include <math.h>

/* A graph input named `name` (NULL: unnamed) of dtype dt and the given shape. */
static inline fsl_value *input_named(fsl_graph *g, const char *name, fsl_dtype dt, int rank, const int64_t *dims) {
  fsl_value *v = fsl_graph_add_value(g, name);
  assert_non_null(v);
  v->dtype = dt;
  assert_true(fsl_value_set_shape(v, rank, dims));
  assert_int_equal(fsl_graph_add_input(g, v), FSL_OK);
  return v;
}

/* A float32 graph input of the given shape. */
static inline fsl_value *input(fsl_graph *g, const char *name, int rank, const int64_t *dims) {
  return input_named(g, name, FSL_DT_F32, rank, dims);
}

/* Stamps the next primitives the builder makes as coming from ONNX node
 * `id` (name, op_type), as fission does. */
static inline void set_origin(fsl_builder *b, int id, const char *name, const char *op_type) {
  b->origin = id;
  b->origin_name = name;
  b->origin_op = op_type;
}

/* Deterministic pseudo-random floats in [-2, 2). */
static inline void fill(float *x, int64_t n, uint32_t seed) {
  uint32_t s = seed * 2654435761u + 1;
  for (int64_t i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    x[i] = (float)(s >> 8) / (float)(1u << 24) * 4.0f - 2.0f;
  }
}

/* A float32 constant of the given shape filled by fill(seed). */
static inline fsl_value *const_f32(fsl_builder *b, int rank, const int64_t *dims, uint32_t seed) {
  int64_t n = fsl_numel(rank, dims);
  float *d = malloc(sizeof(float) * (size_t)n);
  assert_non_null(d);
  fill(d, n, seed);
  fsl_value *v = fsl_b_const(b, FSL_DT_F32, rank, dims, d);
  free(d);
  return v;
}

/* A graph input of any dtype (unnamed). */
static inline fsl_value *input_dt(fsl_graph *g, fsl_dtype dt, int rank, const int64_t *dims) {
  return input_named(g, NULL, dt, rank, dims);
}

/* xorshift64 in [0, 1): the same sequence in every run of a test. */
static inline double test_rnd(void) {
  static uint64_t s = 88172645463325252ULL;
  s ^= s << 13;
  s ^= s >> 7;
  s ^= s << 17;
  return (double)(s >> 11) / 9007199254740992.0;
}

/* malloc'd data for v: floats uniform in [lo, hi), integers the floor of that. */
static inline void *random_data(const fsl_value *v, double lo, double hi) {
  int64_t n = fsl_value_numel(v);
  void *p = malloc((size_t)(fsl_value_nbytes(v) > 0 ? fsl_value_nbytes(v) : 1));
  assert_non_null(p);
  for (int64_t i = 0; i < n; i++) {
    double x = lo + (hi - lo) * test_rnd();
    if (fsl_dtype_is_float(v->dtype)) fsl_store_f64(v->dtype, p, i, x);
    else fsl_store_i64(v->dtype, p, i, (int64_t)floor(x));
  }
  return p;
}

/* The reduction rows the GPU dialects' tests share, over x [rows, len]
 * (returned; the graph's only input): a sum (kept-space output), softmax
 * (max, sum of exp, a row-space output), the NaN-propagating min, an
 * int32 max, a float argmax and an int32 argmin (select_last_index: ties
 * resolved across work-items), the six outputs in that order. */
static inline fsl_value *reduce_rows_graph(fsl_graph *g, int64_t rows, int64_t len) {
  fsl_builder b = {.g = g, .st = FSL_OK, .fold = false};
  int64_t dims[] = {rows, len}, axis = 1;
  fsl_value *x = input(g, "x", 2, dims);
  fsl_value *s = fsl_b_reduce(&b, FSL_OP_reduce_sum, x, &axis, 1, true);
  fsl_value *m = fsl_b_reduce(&b, FSL_OP_reduce_max, x, &axis, 1, true);
  fsl_value *e = fsl_b_unary(&b, FSL_OP_exp, fsl_b_binary(&b, FSL_OP_sub, x, m));
  fsl_value *sm = fsl_b_binary(&b, FSL_OP_div, e, fsl_b_reduce(&b, FSL_OP_reduce_sum, e, &axis, 1, true));
  fsl_value *mn = fsl_b_reduce(&b, FSL_OP_reduce_min, x, &axis, 1, true);
  fsl_value *ix = fsl_b_cast(&b, fsl_b_binary_scalar(&b, FSL_OP_mul, x, 100.0), FSL_DT_I32);
  fsl_value *im = fsl_b_reduce(&b, FSL_OP_reduce_max, ix, &axis, 1, true);
  /* argmax (first of equal values) of x, argmin (last of equal values) of the integers, which tie often */
  fsl_value *am = fsl_b_arg(&b, FSL_OP_argmax, x, 1, true, false);
  fsl_value *an = fsl_b_arg(&b, FSL_OP_argmin, ix, 1, true, true);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, s);
  fsl_graph_add_output(g, sm);
  fsl_graph_add_output(g, mn);
  fsl_graph_add_output(g, im);
  fsl_graph_add_output(g, am);
  fsl_graph_add_output(g, an);
  return x;
}

#endif
