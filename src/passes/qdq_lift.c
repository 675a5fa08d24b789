/*
 * qdq_lift.c — QuantizeLinear of what only moves, pools or clamps
 * DequantizeLinear values, computed on the 8-bit integers themselves.
 *
 * QDQ models (onnxruntime.quantization.quantize_static) wrap every op in
 * DequantizeLinear ... QuantizeLinear, also the ops that compute nothing:
 * MaxPool, Reshape, Transpose, Slice, Concat, Relu.  After fission such a
 * stretch is y = Q(f(DQ(q1), DQ(q2), ...)) with f made of movement
 * primitives, max/min and their reductions: some twenty float primitives
 * per element (cast, subtract, scale, the op, divide, round, add, clamp,
 * cast), four bytes per element where one would do.
 *
 * Q, the saturating quantizer x -> clamp(round(x / s) + z, lo, hi), is
 * non-decreasing in x and acts element by element, so
 *   Q(movement(v)) = movement(Q(v))     (reshape, permute, expand, slice,
 *                                        pad, concat, window: values only
 *                                        move; a pad value p becomes Q(p))
 *   Q(max(a, b)) = max(Q(a), Q(b))      (min, reduce_max, reduce_min alike;
 *                                        a constant operand c becomes Q(c))
 * and at the leaves, when DQ has Q's scale s and zero point z (per tensor,
 * the same 8-bit type),
 *   Q(DQ(q)) = q                        exactly: DQ(q) = (q - z) * s is
 *                                        rounded once in float32, and
 *                                        dividing by s (or multiplying by
 *                                        float32(1/s)) leaves q - z within
 *                                        |q - z| * 2^-21 < 1e-3 of the
 *                                        integer, so round() returns it and
 *                                        the clamp is the identity.
 * So y = f(q1, q2, ...) on the integers, bit for bit what the float graph
 * computes (MaxPool's -inf padding quantizes to the type's minimum, which
 * a window's maximum never picks over a real element).  The pass rewrites
 * the QuantizeLinear's output as that integer graph: the same primitives
 * and attributes on uint8/int8, constants quantized.  The float stretch is
 * left to DCE when nothing else reads it; every value inside it (not the
 * leaves) must have the one reader, so no work is computed twice.
 *
 * Not lifted: per-axis parameters (a movement would carry the axis
 * elsewhere), ops that are not monotone element by element (add, average
 * pooling, resize with interpolation), graph outputs (passes never rename
 * those), scales outside [2^-60, 2^60] (where float32 products could
 * leave the normal range and the argument above fails).
 */
#include "passes/passes.h"
#include "passes/quant_match.h"

#include <math.h>

#define MAX_DEPTH 64

typedef struct lift_ctx {
  fsl_graph *g;
  fsl_quant q;          /* the QuantizeLinear being lifted */
  const fsl_node *like; /* its cast: the origin of the new nodes */
  fsl_value **memo;     /* value id -> its lifted value (built) */
  int nv0;
} lift_ctx;

/* Whether DQ parameters d make Q(DQ(q)) = q for the quantizer c->q. */
static bool same_params(const lift_ctx *c, const fsl_dequant *d) {
  if (d->q->dtype != c->q.dtype || d->zero != c->q.zero) return false;
  if (d->scale < 0x1p-60 || d->scale > 0x1p60) return false;
  /* x / s_q or x * r_q: the factor applied to (q - z) * s_dq is within 2^-22 of 1 */
  double f = c->q.by_recip ? d->scale * c->q.scale : d->scale / c->q.scale;
  return fabs(f - 1) <= 0x1p-22;
}

static bool single_reader(const fsl_value *v) { return v->n_cons == 1 && !v->is_output; }

/* The 8-bit value q when v = DQ(q) with the quantizer's parameters and v's shape (a leaf: Q(v) = q), else NULL. */
static fsl_value *leaf(const lift_ctx *c, const fsl_value *v) {
  fsl_dequant d;
  return fsl_match_dequant(v, &d) && same_params(c, &d) && fsl_value_same_shape(d.q, v) ? d.q : NULL;
}

/* Whether float32 value v can be lifted: Q(v) computed by integer primitives. */
static bool can_lift(const lift_ctx *c, const fsl_value *v, int depth) {
  if (depth > MAX_DEPTH || !v || v->id >= c->nv0 || v->dtype != FSL_DT_F32 || !fsl_value_has_shape(v)) return false;
  if (leaf(c, v)) return true;
  const fsl_node *n = v->producer;
  if (!n || n->n_out != 1 || !single_reader(v)) return false;
  double k;
  int w;
  switch (n->op) {
  case FSL_OP_reshape: case FSL_OP_permute: case FSL_OP_expand: case FSL_OP_slice: case FSL_OP_window:
  case FSL_OP_reduce_max: case FSL_OP_reduce_min:
    return n->n_in == 1 && can_lift(c, n->in[0], depth + 1);
  case FSL_OP_pad:
    return n->n_in == 1 && !isnan(fsl_attr_float(n, "value", 0)) && can_lift(c, n->in[0], depth + 1);
  case FSL_OP_concat:
    for (int i = 0; i < n->n_in; i++)
      if (!can_lift(c, n->in[i], depth + 1)) return false;
    return n->n_in > 0;
  case FSL_OP_max: case FSL_OP_min:
    if (n->n_in != 2) return false;
    if (fsl_const_operand(n, &k, &w)) return !isnan(k) && can_lift(c, n->in[1 - w], depth + 1);
    return can_lift(c, n->in[0], depth + 1) && can_lift(c, n->in[1], depth + 1);
  default:
    return false;
  }
}

/* The quantized constant Q(k), shaped like v (a one-element constant expanded). */
static fsl_value *quantized_const(lift_ctx *c, const fsl_value *v, double k) {
  double qk;
  if (!fsl_quant_scalar(&c->q, k, &qk)) return NULL;
  int64_t ones[FSL_MAX_RANK];
  for (int i = 0; i < v->rank; i++) ones[i] = 1;
  uint8_t b = c->q.dtype == FSL_DT_U8 ? (uint8_t)qk : (uint8_t)(int8_t)qk;
  fsl_value *kc = fsl_graph_new_const(c->g, c->q.dtype, v->rank, ones, &b, 1);
  return kc ? fsl_graph_add_expand(c->g, kc, v->rank, v->dims, c->like) : NULL;
}

/* Builds Q(v) on the integers (can_lift(v) holds); NULL on OOM. */
static fsl_value *lift(lift_ctx *c, const fsl_value *v) {
  if (c->memo[v->id]) return c->memo[v->id];
  fsl_value *q = leaf(c, v);
  if (q) return c->memo[v->id] = q;
  const fsl_node *n = v->producer;
  fsl_value *in[8], **ins = in;
  fsl_value *out = fsl_graph_new_value(c->g, c->q.dtype, v->rank, v->dims);
  if (!out) return NULL;
  fsl_attr *attrs = n->attrs;
  if (n->n_in > 8 && !(ins = fsl_arena_alloc(&c->g->arena, sizeof *ins * (size_t)n->n_in))) return NULL;
  double k;
  int kept = -1; /* max/min: the operand that is a constant */
  if ((n->op == FSL_OP_max || n->op == FSL_OP_min) && !fsl_const_operand(n, &k, &kept)) kept = -1;
  for (int i = 0; i < n->n_in; i++) {
    ins[i] = i == kept ? quantized_const(c, v, k) : lift(c, n->in[i]);
    if (!ins[i]) return NULL;
  }
  if (n->op == FSL_OP_pad) {
    /* the pad value quantized (MaxPool's -inf: the type's minimum) */
    double pq;
    attrs = fsl_arena_alloc(&c->g->arena, sizeof *attrs * (size_t)n->n_attrs);
    if (!attrs || !fsl_quant_scalar(&c->q, fsl_attr_float(n, "value", 0), &pq)) return NULL;
    for (int i = 0; i < n->n_attrs; i++)
      attrs[i] = strcmp(n->attrs[i].name, "value") ? n->attrs[i] : fsl_attr_make_float("value", pq);
  }
  if (!fsl_graph_add_node_as(c->g, n->op, ins, n->n_in, out, attrs, n->n_attrs, c->like)) return NULL;
  return c->memo[v->id] = out;
}

fsl_status fsl_pass_qdq_lift(fsl_graph *g, int *n_lifted) {
  if (n_lifted) *n_lifted = 0;
  lift_ctx c = {.g = g, .nv0 = g->n_values};
  c.memo = calloc((size_t)c.nv0 + 1, sizeof *c.memo);
  if (!c.memo) return fsl_errorf(FSL_ERR_NOMEM, "qdq_lift: out of memory");
  fsl_status st = FSL_OK;
  for (int i = 0; i < g->n_nodes && st == FSL_OK; i++) {
    fsl_node *n = g->nodes[i];
    if (n->op != FSL_OP_cast || n->n_out != 1 || !n->out[0] || n->out[0]->id >= c.nv0 || n->out[0]->is_output ||
        !fsl_match_quant(n->out[0], &c.q))
      continue;
    c.like = n;
    if (!can_lift(&c, c.q.x, 0)) continue;
    memset(c.memo, 0, sizeof *c.memo * (size_t)c.nv0); /* lifted values are per quantizer */
    int n0 = g->n_nodes;
    fsl_value *y = lift(&c, c.q.x);
    if (!y) {
      st = fsl_errorf(FSL_ERR_NOMEM, "qdq_lift: out of memory");
      break;
    }
    fsl_graph_move_tail_after(g, n0, i);
    i += g->n_nodes - n0;
    fsl_graph_replace_uses(g, n->out[0], y);
    if (n_lifted) (*n_lifted)++;
  }
  free(c.memo);
  return st;
}
