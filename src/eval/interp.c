/*
 * interp.c — the reference interpreter's entry points: fsl_ref_eval checks
 * a node against the shape rules and dispatches to its op family;
 * fsl_ref_run executes a whole graph in node order, freeing each
 * intermediate buffer after its last use.
 */
#include "eval/eval_internal.h"

/* Re-derives the output type of a primitive with the shape rules (on a copy,
 * leaving n untouched) and checks it against n->out[0]. */
static fsl_status check_node(const fsl_node *n) {
  if (n->n_out != 1 || !n->out || !n->out[0]) return fsl_node_errorf(n, FSL_ERR_INVALID, "expected one output");
  fsl_node copy = *n;
  fsl_value o = *n->out[0];
  fsl_value *outs[1] = {&o};
  copy.out = outs;
  FSL_TRY(fsl_prim_infer(&copy));
  const fsl_value *d = n->out[0];
  bool same = o.dtype == d->dtype && o.rank == d->rank;
  for (int i = 0; same && i < o.rank; i++) same = o.dims[i] == d->dims[i];
  if (!same) {
    char a[256], b[256];
    return fsl_node_errorf(n, FSL_ERR_SHAPE, "output '%s' is declared %s but the shape rule gives %s",
                        d->name ? d->name : "?", fsl_value_type_str(d, a, sizeof a),
                        fsl_value_type_str(&o, b, sizeof b));
  }
  return FSL_OK;
}

fsl_status fsl_ref_eval(const fsl_node *n, const void *const *in_data, void *const *out_data) {
  if (!n || !in_data || !out_data) return fsl_errorf(FSL_ERR_ARG, "fsl_ref_eval: NULL argument");
  if ((unsigned)n->op >= FSL_OP_COUNT) return fsl_errorf(FSL_ERR_INVALID, "fsl_ref_eval: invalid op %d", (int)n->op);
  if (!fsl_op_is_primitive(n->op) || fsl_op_get(n->op)->kind == FSL_KIND_OPAQUE)
    return fsl_ref_eval_opaque(n, in_data, out_data);
  FSL_TRY(check_node(n));
  for (int i = 0; i < n->n_in; i++)
    if (!in_data[i] && fsl_value_nbytes(n->in[i]) > 0) return fsl_node_errorf(n, FSL_ERR_ARG, "no data for input %d", i);
  if (!out_data[0] && fsl_value_nbytes(n->out[0]) > 0) return fsl_node_errorf(n, FSL_ERR_ARG, "no output buffer");
  if (fsl_value_numel(n->out[0]) == 0) return FSL_OK;
  switch (fsl_op_get(n->op)->kind) {
  case FSL_KIND_ELEMENTWISE: return fsl_ref_elementwise(n, in_data, out_data[0]);
  case FSL_KIND_REDUCE: return fsl_ref_reduce(n, in_data, out_data[0]);
  case FSL_KIND_MOVEMENT: return fsl_ref_movement(n, in_data, out_data[0]);
  case FSL_KIND_GATHER: return fsl_ref_gather(n, in_data, out_data[0]);
  case FSL_KIND_LINEAR: return fsl_ref_linear(n, in_data, out_data[0]);
  default: return fsl_node_errorf(n, FSL_ERR_UNSUPPORTED, "no reference implementation");
  }
}

/* ---- whole graphs ---- */

typedef struct run_state {
  const fsl_graph *g;
  const void **buf;  /* data of each value (by id), NULL if not yet computed */
  bool *owned;       /* buf[i] was malloc'd here */
  int *last_use;     /* index of the last node reading value i; -1 none */
  bool *keep;        /* graph outputs: never freed early */
} run_state;

static const char k_empty[8];  /* stands in for zero-size buffers */

static bool value_ok(const run_state *rs, const fsl_value *v) {
  return v && v->id >= 0 && v->id < rs->g->n_values && rs->g->values[v->id] == v;
}

static void release(run_state *rs, int id) {
  if (rs->owned[id]) free((void *)rs->buf[id]);
  rs->owned[id] = false;
  rs->buf[id] = NULL;
}

static fsl_status run_setup(run_state *rs, const void *const *inputs) {
  const fsl_graph *g = rs->g;
  for (int i = 0; i < g->n_values; i++) {
    rs->last_use[i] = -1;
    if (g->values[i]->data) rs->buf[i] = g->values[i]->data;
  }
  for (int i = 0; i < g->n_inputs; i++) {
    const fsl_value *v = g->inputs[i];
    if (!value_ok(rs, v)) return fsl_errorf(FSL_ERR_INVALID, "graph input %d is not a value of the graph", i);
    if (!fsl_value_has_shape(v) || fsl_value_nbytes(v) < 0)
      return fsl_errorf(FSL_ERR_SHAPE, "graph input '%s' has no static shape", v->name);
    if (!inputs || (!inputs[i] && fsl_value_nbytes(v) > 0))
      return fsl_errorf(FSL_ERR_ARG, "no data for graph input '%s'", v->name);
    rs->buf[v->id] = inputs[i] ? inputs[i] : k_empty;
  }
  for (int i = 0; i < g->n_nodes; i++) {
    const fsl_node *n = g->nodes[i];
    for (int k = 0; k < n->n_in; k++) {
      if (!n->in[k]) continue;
      if (!value_ok(rs, n->in[k])) return fsl_errorf(FSL_ERR_INVALID, "node '%s': input %d is not a value of the graph", n->name, k);
      rs->last_use[n->in[k]->id] = i;
    }
    for (int k = 0; k < n->n_out; k++)
      if (n->out[k] && !value_ok(rs, n->out[k]))
        return fsl_errorf(FSL_ERR_INVALID, "node '%s': output %d is not a value of the graph", n->name, k);
  }
  for (int i = 0; i < g->n_outputs; i++) {
    if (!value_ok(rs, g->outputs[i])) return fsl_errorf(FSL_ERR_INVALID, "graph output %d is not a value of the graph", i);
    rs->keep[g->outputs[i]->id] = true;
  }
  return FSL_OK;
}

/* Runs node index ni: gathers input buffers, allocates outputs, evaluates. */
static fsl_status run_node(run_state *rs, int ni) {
  const fsl_node *n = rs->g->nodes[ni];
  const void *small_in[8];
  void *small_out[4];
  const void **in = n->n_in <= 8 ? small_in : malloc(sizeof(void *) * (size_t)n->n_in);
  void **out = n->n_out <= 4 ? small_out : malloc(sizeof(void *) * (size_t)n->n_out);
  fsl_status st = FSL_OK;
  if (!in || !out) { st = fsl_errorf(FSL_ERR_NOMEM, "out of memory"); goto done; }
  for (int k = 0; k < n->n_in; k++) {
    const fsl_value *v = n->in[k];
    in[k] = NULL;
    if (!v) continue;
    if (!rs->buf[v->id] && fsl_value_nbytes(v) != 0) {
      st = fsl_errorf(FSL_ERR_INVALID, "node '%s' (%s): input '%s' is used before it is computed", n->name,
                      fsl_op_name(n->op), v->name);
      goto done;
    }
    in[k] = rs->buf[v->id] ? rs->buf[v->id] : k_empty;
  }
  for (int k = 0; k < n->n_out; k++) {
    const fsl_value *v = n->out[k];
    out[k] = NULL;
    if (!v) continue;
    int64_t nb = fsl_value_nbytes(v);
    if (!fsl_value_has_shape(v) || nb < 0) {
      st = fsl_errorf(FSL_ERR_SHAPE, "node '%s' (%s): output '%s' has no static shape", n->name, fsl_op_name(n->op), v->name);
      goto done;
    }
    release(rs, v->id);
    out[k] = malloc((size_t)(nb > 0 ? nb : 1));
    if (!out[k]) { st = fsl_errorf(FSL_ERR_NOMEM, "out of memory (%lld bytes for '%s')", (long long)nb, v->name); goto done; }
    rs->buf[v->id] = out[k];
    rs->owned[v->id] = true;
  }
  st = fsl_ref_eval(n, (const void *const *)in, (void *const *)out);
done:
  if (in != small_in) free(in);
  if (out != small_out) free(out);
  return st;
}

/* Frees buffers whose last reader was node ni, and outputs of ni nobody reads. */
static void run_free_dead(run_state *rs, int ni) {
  const fsl_node *n = rs->g->nodes[ni];
  for (int k = 0; k < n->n_in; k++) {
    const fsl_value *v = n->in[k];
    if (v && rs->last_use[v->id] == ni && !rs->keep[v->id]) release(rs, v->id);
  }
  for (int k = 0; k < n->n_out; k++) {
    const fsl_value *v = n->out[k];
    if (v && rs->last_use[v->id] < ni && !rs->keep[v->id]) release(rs, v->id);
  }
}

fsl_status fsl_ref_copy_outputs(const fsl_graph *g, const void *const *buf, const char *missing, void **outputs) {
  fsl_status st = FSL_OK;
  for (int i = 0; i < g->n_outputs && st == FSL_OK; i++) {
    const fsl_value *v = g->outputs[i];
    const char *name = v->name ? v->name : "?";
    int64_t nb = fsl_value_nbytes(v);
    const void *src = buf[v->id];
    if (nb < 0) st = fsl_errorf(FSL_ERR_SHAPE, "graph output '%s' has no static shape", name);
    else if (!src && nb > 0) st = fsl_errorf(FSL_ERR_INVALID, "graph output '%s' %s", name, missing);
    else if (!(outputs[i] = malloc((size_t)(nb > 0 ? nb : 1)))) st = fsl_errorf(FSL_ERR_NOMEM, "out of memory");
    else if (nb > 0) memcpy(outputs[i], src, (size_t)nb);
  }
  if (st != FSL_OK)
    for (int i = 0; i < g->n_outputs; i++) {
      free(outputs[i]);
      outputs[i] = NULL;
    }
  return st;
}

fsl_status fsl_ref_run(const fsl_graph *g, const void *const *inputs, void **outputs) {
  if (!g || (!outputs && g->n_outputs > 0)) return fsl_errorf(FSL_ERR_ARG, "fsl_ref_run: NULL argument");
  for (int i = 0; i < g->n_outputs; i++) outputs[i] = NULL;
  size_t nv = (size_t)(g->n_values > 0 ? g->n_values : 1);
  run_state rs = {g, calloc(nv, sizeof(void *)), calloc(nv, sizeof(bool)), calloc(nv, sizeof(int)),
                  calloc(nv, sizeof(bool))};
  fsl_status st = FSL_OK;
  if (!rs.buf || !rs.owned || !rs.last_use || !rs.keep) { st = fsl_errorf(FSL_ERR_NOMEM, "out of memory"); goto done; }
  st = run_setup(&rs, inputs);
  for (int i = 0; st == FSL_OK && i < g->n_nodes; i++) {
    st = run_node(&rs, i);
    if (st == FSL_OK) run_free_dead(&rs, i);
  }
  if (st == FSL_OK) st = fsl_ref_copy_outputs(g, rs.buf, "is never computed", outputs);
done:
  if (rs.owned)
    for (int i = 0; i < g->n_values; i++)
      if (rs.owned[i]) free((void *)rs.buf[i]);
  free(rs.buf);
  free(rs.owned);
  free(rs.last_use);
  free(rs.keep);
  return st;
}
