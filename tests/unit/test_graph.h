/*
 * test_graph.h — helpers shared by the unit tests that build primitive
 * graphs by hand.  Include after <cmocka.h>.
 */
#ifndef FSL_TEST_GRAPH_H
#define FSL_TEST_GRAPH_H

#include "fission/builder.h"

/* A float32 graph input of the given shape. */
static inline fsl_value *input(fsl_graph *g, const char *name, int rank, const int64_t *dims) {
  fsl_value *v = fsl_graph_add_value(g, name);
  assert_non_null(v);
  v->dtype = FSL_DT_F32;
  assert_true(fsl_value_set_shape(v, rank, dims));
  assert_int_equal(fsl_graph_add_input(g, v), FSL_OK);
  return v;
}

/* Stamps the next primitives the builder makes as coming from ONNX node
 * `id` (name, op_type), as fission does. */
static inline void set_origin(fsl_builder *b, int id, const char *name, const char *op_type) {
  b->origin = id;
  b->origin_name = name;
  b->origin_op = op_type;
}

#endif
