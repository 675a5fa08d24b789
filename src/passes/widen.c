/*
 * widen.c — f16 and bf16 graphs computed in f32 between their inputs and
 * outputs (passes.h, fsl_pass_widen_half).
 *
 * CPUs without half-precision arithmetic (all but AVX512-FP16/AMX ones)
 * compute half types in f32 anyway; ONNX Runtime's CPU provider does it
 * through the casts its InsertCastTransformer puts around every node
 * without a half kernel, then removes the casts that meet.  Keeping the
 * values in f32 between nodes lets every f16 model take the f32 graph's
 * rewrites, fusions and oneDNN primitives, where a cast around each node
 * would cut kernels apart (mobilenet_v3_small as converted by
 * onnxconverter-common: 564 primitives and 88 kernels against the f32
 * model's 367 and 73).  Values are rounded to half precision where the
 * graph's outputs are (by the cast that writes one, or a cast added after
 * its producer), and widened exactly where its inputs are; constants
 * are widened once, here.  The results are closer to the exact ones than
 * per-node rounding, within the rounding of the outputs.
 */
#include "passes/passes.h"

static bool half(fsl_dtype dt) { return dt == FSL_DT_F16 || dt == FSL_DT_BF16; }

/* Whether node n computes the same over f32 as over a half type: a
 * primitive whose dtype comes from its operands (or a cast, whose `to` is
 * rewritten). */
static bool widenable(const fsl_node *n) {
  const fsl_op_info *oi = fsl_op_get(n->op);
  if (!oi->primitive) return false;
  switch (oi->kind) {
  case FSL_KIND_ELEMENTWISE: case FSL_KIND_MOVEMENT: case FSL_KIND_REDUCE: case FSL_KIND_LINEAR:
  case FSL_KIND_GATHER: return true;
  default: return false;
  }
}

static bool touches_half(const fsl_node *n) {
  for (int k = 0; k < n->n_in; k++)
    if (n->in[k] && half(n->in[k]->dtype)) return true;
  for (int k = 0; k < n->n_out; k++)
    if (n->out[k] && half(n->out[k]->dtype)) return true;
  return false;
}

static fsl_status oom(void) { return fsl_errorf(FSL_ERR_NOMEM, "widen: out of memory"); }

/* A new f32 value of v's shape. */
static fsl_value *f32_like(fsl_graph *g, const fsl_value *v) {
  fsl_value *w = fsl_graph_add_value(g, NULL);
  if (!w) return NULL;
  w->dtype = FSL_DT_F32;
  fsl_value_set_shape(w, v->rank, v->dims);
  return w;
}

/* Moves the node appended last to position `at` of the node list. */
static void move_last_to(fsl_graph *g, int at) {
  fsl_node *n = g->nodes[g->n_nodes - 1];
  memmove(g->nodes + at + 1, g->nodes + at, (size_t)(g->n_nodes - 1 - at) * sizeof *g->nodes);
  g->nodes[at] = n;
}

/* A cast node from -> to (to's dtype), appended; its origin is `like`'s. */
static fsl_node *add_cast(fsl_graph *g, fsl_value *from, fsl_value *to, const fsl_node *like) {
  fsl_attr *a = fsl_arena_alloc(&g->arena, sizeof *a);
  if (!a) return NULL;
  *a = fsl_attr_make_int("to", to->dtype);
  fsl_node *c = fsl_graph_add_node(g, FSL_OP_cast, NULL, &from, 1, &to, 1, a, 1);
  if (c && like) {
    c->origin = like->origin;
    c->origin_name = like->origin_name;
    c->origin_op = like->origin_op;
  }
  return c;
}

static int node_pos(const fsl_graph *g, const fsl_node *n) {
  for (int i = 0; i < g->n_nodes; i++)
    if (g->nodes[i] == n) return i;
  return -1;
}

fsl_status fsl_pass_widen_half(fsl_graph *g) {
  bool any = false;
  for (int i = 0; i < g->n_nodes; i++) {
    if (!touches_half(g->nodes[i])) continue;
    if (!widenable(g->nodes[i])) return FSL_OK; /* an op whose meaning may depend on the dtype: as it is */
    any = true;
  }
  for (int i = 0; i < g->n_inputs; i++)
    for (int j = 0; j < g->n_outputs; j++)
      if (g->inputs[i] == g->outputs[j] && half(g->inputs[i]->dtype)) return FSL_OK;
  if (!any) return FSL_OK;
  int nv0 = g->n_values;
  bool *boundary = calloc((size_t)nv0 + 1, sizeof *boundary);
  if (!boundary) return oom();
  /* 1. every value but the graph's half inputs and outputs to f32 (constants converted) */
  for (int i = 0; i < g->n_inputs; i++) boundary[g->inputs[i]->id] = true;
  for (int i = 0; i < g->n_outputs; i++) boundary[g->outputs[i]->id] = true;
  for (int id = 0; id < nv0; id++) {
    fsl_value *v = g->values[id];
    if (!half(v->dtype) || boundary[id]) continue;
    if (v->data) {
      int64_t n = fsl_value_numel(v);
      float *d = fsl_arena_alloc(&g->arena, sizeof(float) * (size_t)(n > 0 ? n : 1));
      if (!d) {
        free(boundary);
        return oom();
      }
      for (int64_t k = 0; k < n; k++) d[k] = (float)fsl_load_f64(v->dtype, v->data, k);
      v->data = d;
    }
    v->dtype = FSL_DT_F32;
  }
  /* 2. casts to a half type that now write f32 cast to f32 */
  for (int i = 0; i < g->n_nodes; i++) {
    fsl_node *n = g->nodes[i];
    if (n->op != FSL_OP_cast || n->out[0]->dtype != FSL_DT_F32) continue;
    for (int k = 0; k < n->n_attrs; k++)
      if (!strcmp(n->attrs[k].name, "to") && half((fsl_dtype)n->attrs[k].i)) n->attrs[k].i = FSL_DT_F32;
  }
  fsl_status st = FSL_OK;
  /* 3. a half graph input is widened once, before everything */
  for (int i = 0; i < g->n_inputs && st == FSL_OK; i++) {
    fsl_value *x = g->inputs[i];
    if (!half(x->dtype) || x->n_cons == 0) continue;
    fsl_value *w = f32_like(g, x);
    int n_cons = x->n_cons;
    fsl_node **cons = w ? malloc(sizeof *cons * (size_t)n_cons) : NULL;
    if (cons) memcpy(cons, x->cons, sizeof *cons * (size_t)n_cons);
    fsl_node *c = cons ? add_cast(g, x, w, cons[0]) : NULL;
    if (!c) st = oom();
    for (int k = 0; k < n_cons && st == FSL_OK; k++)
      if (!fsl_node_replace_input(g, cons[k], x, w)) st = oom();
    free(cons);
    if (st == FSL_OK) move_last_to(g, 0);
  }
  /* 4. a half graph output is computed in f32 and rounded once, right after its producer */
  for (int i = 0; i < g->n_outputs && st == FSL_OK; i++) {
    fsl_value *y = g->outputs[i];
    fsl_node *p = y->producer;
    /* a cast writing the output rounds it once already, from whatever it reads */
    if (!half(y->dtype) || !p || p->op == FSL_OP_cast) continue;
    fsl_value *w = f32_like(g, y);
    if (!w) {
      st = oom();
      break;
    }
    for (int k = 0; k < p->n_out; k++)
      if (p->out[k] == y) p->out[k] = w;
    w->producer = p;
    y->producer = NULL;
    /* the other readers of y inside the graph read the f32 value */
    while (y->n_cons > 0 && st == FSL_OK)
      if (!fsl_node_replace_input(g, y->cons[y->n_cons - 1], y, w)) st = oom();
    fsl_node *c = st == FSL_OK ? add_cast(g, w, y, p) : NULL;
    if (!c) {
      st = oom();
      break;
    }
    y->producer = c;
    int at = node_pos(g, p);
    if (at >= 0) move_last_to(g, at + 1);
  }
  /* 5. casts that became f32 -> f32 pass their input on (DCE drops them) */
  for (int i = 0; i < g->n_nodes && st == FSL_OK; i++) {
    fsl_node *n = g->nodes[i];
    fsl_value *x = n->in[0], *y = n->out[0];
    if (n->op != FSL_OP_cast || x->dtype != y->dtype || y->is_output) continue;
    while (y->n_cons > 0 && st == FSL_OK)
      if (!fsl_node_replace_input(g, y->cons[y->n_cons - 1], y, x)) st = oom();
  }
  free(boundary);
  if (st == FSL_OK) st = fsl_pass_dce(g);
  return st;
}
