/*
 * verify.c — structural checks of a graph (any stage).
 *
 * Checks, in order: value ids unique and in range; node ids unique; every
 * node input defined before use (graph input, constant, or output of an
 * earlier node), every value produced at most once; producer and consumer
 * lists agree with the node list; every graph output defined; for
 * primitive nodes, output dtype/shape equal to what fsl_prim_infer gives.
 */
#include "ir/ir.h"

typedef struct vctx {
  const fsl_graph *g;
  bool *defined;          /* by value id */
  const fsl_node **byid;  /* node by node id, NULL if not in the graph */
  int *uses;              /* by value id: uses counted over the node list */
} vctx;

static const char *nname(const fsl_node *n) {
  return n->name && *n->name ? n->name : "(unnamed)";
}

static const char *nop(const fsl_node *n) {
  return n->op_type ? n->op_type : fsl_op_name(n->op);
}

static const char *vname(const fsl_value *v) { return v->name ? v->name : "?"; }

static bool value_ok(const vctx *c, const fsl_value *v) {
  return v && v->id >= 0 && v->id < c->g->n_values && c->g->values[v->id] == v;
}

static fsl_status check_ids(vctx *c) {
  const fsl_graph *g = c->g;
  for (int i = 0; i < g->n_values; i++) {
    const fsl_value *v = g->values[i];
    if (!v || v->id != i)
      return fsl_errorf(FSL_ERR_INVALID, "verify: value #%d has id %d, expected %d",
                        i, v ? v->id : -1, i);
  }
  for (int i = 0; i < g->n_nodes; i++) {
    const fsl_node *n = g->nodes[i];
    if (n->id < 0 || n->id >= g->next_node_id)
      return fsl_errorf(FSL_ERR_INVALID, "verify: node '%s' (%s) has id %d outside [0, %d)",
                        nname(n), nop(n), n->id, g->next_node_id);
    if (c->byid[n->id])
      return fsl_errorf(FSL_ERR_INVALID, "verify: node '%s' (%s) shares id %d with node '%s'",
                        nname(n), nop(n), n->id, nname(c->byid[n->id]));
    c->byid[n->id] = n;
  }
  return FSL_OK;
}

static bool in_graph(const vctx *c, const fsl_node *n) {
  return n && n->id >= 0 && n->id < c->g->next_node_id && c->byid[n->id] == n;
}

static int count_in(const fsl_node *n, const fsl_value *v) {
  int k = 0;
  for (int i = 0; i < n->n_in; i++) k += n->in[i] == v;
  return k;
}

static fsl_status check_inputs(vctx *c, const fsl_node *n) {
  for (int k = 0; k < n->n_in; k++) {
    const fsl_value *v = n->in[k];
    if (!v) continue;
    if (!value_ok(c, v))
      return fsl_errorf(FSL_ERR_INVALID, "verify: node '%s' (%s): input %d is not a value of the graph",
                        nname(n), nop(n), k);
    if (!c->defined[v->id])
      return fsl_errorf(FSL_ERR_INVALID,
                        "verify: node '%s' (%s): input %d ('%s') is used before it is defined "
                        "(expected a graph input, a constant or an earlier node's output)",
                        nname(n), nop(n), k, vname(v));
    c->uses[v->id]++;
  }
  return FSL_OK;
}

static fsl_status check_outputs(vctx *c, const fsl_node *n) {
  for (int k = 0; k < n->n_out; k++) {
    const fsl_value *v = n->out[k];
    if (!v) continue;
    if (!value_ok(c, v))
      return fsl_errorf(FSL_ERR_INVALID, "verify: node '%s' (%s): output %d is not a value of the graph",
                        nname(n), nop(n), k);
    if (v->producer != n)
      return fsl_errorf(FSL_ERR_INVALID, "verify: node '%s' (%s): output %d ('%s') names another producer",
                        nname(n), nop(n), k, vname(v));
    if (c->defined[v->id])
      return fsl_errorf(FSL_ERR_INVALID, "verify: node '%s' (%s): output %d ('%s') is defined twice",
                        nname(n), nop(n), k, vname(v));
    c->defined[v->id] = true;
  }
  return FSL_OK;
}

/* Re-runs the shape rule of a primitive node and compares the result. */
static fsl_status check_prim_shape(const fsl_node *n) {
  if (!fsl_op_is_primitive(n->op) || n->n_out != 1 || !n->out[0]) return FSL_OK;
  fsl_value *v = n->out[0];
  if (!fsl_value_has_shape(v))
    return fsl_errorf(FSL_ERR_INVALID, "verify: node '%s' (%s): output '%s' has no static shape",
                      nname(n), nop(n), vname(v));
  fsl_dtype dt = v->dtype;
  int rank = v->rank;
  int64_t dims[FSL_MAX_RANK];
  memcpy(dims, v->dims, sizeof dims);
  fsl_status st = fsl_prim_infer((fsl_node *)n);
  bool same = st == FSL_OK && v->dtype == dt && v->rank == rank &&
              !memcmp(v->dims, dims, sizeof(int64_t) * (size_t)rank);
  char got[300] = "", want[300];
  if (st == FSL_OK && !same) fsl_value_type_str(v, want, sizeof want);
  v->dtype = dt;
  v->rank = rank;
  memcpy(v->dims, dims, sizeof dims);
  if (st != FSL_OK)
    return fsl_error_context(FSL_ERR_INVALID, "verify: node '%s' (%s)", nname(n), nop(n));
  if (!same) {
    fsl_value_type_str(v, got, sizeof got);
    return fsl_errorf(FSL_ERR_INVALID,
                      "verify: node '%s' (%s): output '%s' is %s, the shape rule gives %s",
                      nname(n), nop(n), vname(v), got, want);
  }
  return FSL_OK;
}

/* Every consumer and producer a value names must be a node of the graph
 * that really uses / produces it. */
static fsl_status check_links(const vctx *c) {
  const fsl_graph *g = c->g;
  for (int i = 0; i < g->n_values; i++) {
    const fsl_value *v = g->values[i];
    if (v->producer && !in_graph(c, v->producer))
      return fsl_errorf(FSL_ERR_INVALID, "verify: value '%s' names a producer that is not in the graph",
                        vname(v));
    if (v->n_cons != c->uses[i])
      return fsl_errorf(FSL_ERR_INVALID, "verify: value '%s' lists %d consumers, the nodes use it %d times",
                        vname(v), v->n_cons, c->uses[i]);
    for (int j = 0; j < v->n_cons; j++) {
      const fsl_node *n = v->cons[j];
      if (!in_graph(c, n) || !count_in(n, v))
        return fsl_errorf(FSL_ERR_INVALID,
                          "verify: value '%s' names a consumer that is not in the graph or does not use it",
                          vname(v));
    }
  }
  return FSL_OK;
}

static fsl_status check_io(vctx *c) {
  const fsl_graph *g = c->g;
  for (int i = 0; i < g->n_inputs; i++) {
    const fsl_value *v = g->inputs[i];
    if (!value_ok(c, v))
      return fsl_errorf(FSL_ERR_INVALID, "verify: graph input %d is not a value of the graph", i);
    if (v->producer)
      return fsl_errorf(FSL_ERR_INVALID, "verify: graph input '%s' is produced by node '%s'",
                        vname(v), nname(v->producer));
    c->defined[v->id] = true;
  }
  for (int i = 0; i < g->n_values; i++) {
    const fsl_value *v = g->values[i];
    if (v->data && !v->producer) c->defined[v->id] = true;
  }
  return FSL_OK;
}

static fsl_status check_graph_outputs(const vctx *c) {
  const fsl_graph *g = c->g;
  for (int i = 0; i < g->n_outputs; i++) {
    const fsl_value *v = g->outputs[i];
    if (!value_ok(c, v))
      return fsl_errorf(FSL_ERR_INVALID, "verify: graph output %d is not a value of the graph", i);
    if (!c->defined[v->id])
      return fsl_errorf(FSL_ERR_INVALID,
                        "verify: graph output '%s' is never defined (expected a node output, "
                        "a graph input or a constant)", vname(v));
  }
  return FSL_OK;
}

static fsl_status verify_all(vctx *c) {
  FSL_TRY(check_ids(c));
  FSL_TRY(check_io(c));
  for (int i = 0; i < c->g->n_nodes; i++) {
    const fsl_node *n = c->g->nodes[i];
    if (n->n_in < 0 || n->n_out < 0 || (n->n_in && !n->in) || (n->n_out && !n->out))
      return fsl_errorf(FSL_ERR_INVALID, "verify: node '%s' (%s) has malformed input/output lists",
                        nname(n), nop(n));
    FSL_TRY(check_inputs(c, n));
    FSL_TRY(check_outputs(c, n));
  }
  FSL_TRY(check_links(c));
  FSL_TRY(check_graph_outputs(c));
  for (int i = 0; i < c->g->n_nodes; i++) FSL_TRY(check_prim_shape(c->g->nodes[i]));
  return FSL_OK;
}

fsl_status fsl_graph_verify(const fsl_graph *g) {
  if (!g) return fsl_errorf(FSL_ERR_ARG, "verify: graph is NULL");
  vctx c = {g, NULL, NULL, NULL};
  c.defined = calloc((size_t)g->n_values + 1, sizeof *c.defined);
  c.byid = calloc((size_t)g->next_node_id + 1, sizeof *c.byid);
  c.uses = calloc((size_t)g->n_values + 1, sizeof *c.uses);
  fsl_status st = (c.defined && c.byid && c.uses) ? verify_all(&c)
                                                  : fsl_errorf(FSL_ERR_NOMEM, "verify: out of memory");
  free(c.defined);
  free(c.uses);
  free((void *)c.byid);
  return st;
}
