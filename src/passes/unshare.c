/*
 * unshare.c — one private copy of a shared constant view per consumer.
 *
 * Fission keeps large broadcasts of constants as movement views (an
 * `expand` of a [C] bias or of the scalar 0 of a ReLU, see
 * docs/architecture.md), and CSE merges equal views, so one view node can
 * feed every layer of a network.  Orchestration then sees a value with
 * many consumers: a kernel that contains the view must also write it out
 * (full size) for the other readers, and a kernel that does not must read
 * the materialised tensor — both cost a full-size write and read, where
 * recomputing the view inside each consumer kernel costs only reading the
 * small constant.  So, after CSE, every view computed from constants only
 * (a chain of movement primitives over initializers) gets a private copy
 * per consumer node; each copy (and the original, kept for the last
 * consumer) takes its consumer's origin, so the op-granularity strategies
 * group it with that ONNX op.
 *
 * The same holds for an 8-bit value widened to int32 (a cast, minus a
 * zero point broadcast from one element: what fission makes of the
 * operands of MatMulInteger, ConvInteger and the QLinear ops) that several
 * linear ops read (a ResNet block's input, quantized once for its first
 * convolution and its downsample): each reader gets its own widening, so a
 * backend whose library reads the 8-bit data itself (oneDNN int8,
 * fsl_device.linear_int8) takes it into every linear kernel's prologue
 * instead of a kernel writing the int32 tensor for all of them.
 */
#include "passes/passes.h"

/* A movement primitive whose inputs are all constants or constant views. */
static bool const_view(const fsl_node *n, const bool *cview) {
  const fsl_op_info *oi = fsl_op_get(n->op);
  if (!oi->primitive || oi->kind != FSL_KIND_MOVEMENT || n->n_out != 1 || !n->out[0]) return false;
  bool any = false;
  for (int k = 0; k < n->n_in; k++) {
    const fsl_value *v = n->in[k];
    if (!v) continue;
    if (!v->data && !cview[v->id]) return false;
    any = true;
  }
  return any;
}

/* Consumer nodes of v, counting a node that reads v twice once (0, 1 or 2:
 * only "more than one" matters). */
static int distinct_consumers(const fsl_value *v) {
  for (int i = 1; i < v->n_cons; i++)
    if (v->cons[i] != v->cons[0]) return 2;
  return v->n_cons > 0;
}

/* Whether n is a step of an 8-bit operand's widening (marks in cheap, by
 * value id): a cast of an 8-bit value to int32; an int32 difference of a
 * widened value and a cheap or constant one (the zero point); a cast,
 * reshape or expand of a one-element value or of such a broadcast. */
static bool widening(const fsl_node *n, const bool *cheap) {
  if (n->n_out != 1 || !n->out[0] || n->n_in < 1 || !n->in[0]) return false;
  const fsl_value *a = n->in[0], *y = n->out[0];
  bool one = fsl_value_has_shape(a) && fsl_value_numel(a) == 1;
  switch (n->op) {
  case FSL_OP_cast: return one || (y->dtype == FSL_DT_I32 && (a->dtype == FSL_DT_U8 || a->dtype == FSL_DT_I8));
  case FSL_OP_reshape:
  case FSL_OP_expand: return !a->data && (one || cheap[a->id]);
  case FSL_OP_sub:
    return y->dtype == FSL_DT_I32 && n->n_in == 2 && n->in[1] && cheap[a->id] && (n->in[1]->data || cheap[n->in[1]->id]);
  default: return false;
  }
}

fsl_status fsl_pass_unshare_views(fsl_graph *g) {
  int nv = g->n_values;
  bool *cview = calloc((size_t)nv + 1, sizeof *cview);
  if (!cview) return fsl_errorf(FSL_ERR_NOMEM, "unshare: out of memory");
  int n0 = g->n_nodes;
  fsl_status st = FSL_OK;
  for (int i = 0; i < n0; i++)
    if (const_view(g->nodes[i], cview) || widening(g->nodes[i], cview)) cview[g->nodes[i]->out[0]->id] = true;
  /* last to first: a copy's inputs gain a consumer, and their producers
   * (earlier constant views) are unshared when the walk reaches them */
  for (int i = n0 - 1; i >= 0 && st == FSL_OK; i--) {
    fsl_node *nd = g->nodes[i];
    fsl_value *v = nd->out[0];
    if (!v || v->id >= nv || !cview[v->id] || v->is_output) continue;
    bool shared = false;
    while (distinct_consumers(v) > 1 && st == FSL_OK) {
      shared = true;
      fsl_node *u = v->cons[v->n_cons - 1];
      fsl_value *c = fsl_graph_add_value(g, NULL);
      fsl_node *cp = NULL;
      if (c) {
        c->dtype = v->dtype;
        c->rank = v->rank;
        memcpy(c->dims, v->dims, sizeof c->dims);
        cp = fsl_graph_add_node(g, nd->op, nd->name, nd->in, nd->n_in, &c, 1, nd->attrs, nd->n_attrs);
      }
      if (!cp || !fsl_node_replace_input(g, u, v, c)) {
        st = fsl_errorf(FSL_ERR_NOMEM, "unshare: out of memory");
        break;
      }
      /* fsl_graph_add_node appended the copy: move it to just before its
       * consumer, so it stays next to the work it serves (orchestration
       * cuts regions by position) */
      int at = g->n_nodes - 1;
      while (at > 0 && g->nodes[at - 1] != u) at--;
      if (at > 0) {
        memmove(g->nodes + at, g->nodes + at - 1, (size_t)(g->n_nodes - at) * sizeof *g->nodes);
        g->nodes[at - 1] = cp;
      }
      cp->domain = nd->domain;
      cp->op_type = nd->op_type;
      cp->origin = u->origin;
      cp->origin_name = u->origin_name;
      cp->origin_op = u->origin_op;
    }
    if (shared && v->n_cons >= 1) {  /* the original serves the remaining consumer */
      nd->origin = v->cons[0]->origin;
      nd->origin_name = v->cons[0]->origin_name;
      nd->origin_op = v->cons[0]->origin_op;
    }
  }
  free(cview);
  return st;
}
