/*
 * qdq.c — float32 convolutions and matmuls between DequantizeLinear
 * nodes (the QDQ format of onnxruntime.quantization.quantize_static) as
 * integer ones, for a backend whose library multiplies 8-bit data
 * (fsl_backend_caps.linear_int8: oneDNN int8 on the CPU).
 *
 * After fission a QDQ convolution reads
 *   x = (float(xq) - zx) * sx          xq uint8/int8 at run time, sx and zx
 *                                      one value each (per tensor);
 *   w = (float(wq) - zw) * sw          the ONNX DequantizeLinear of an 8-bit
 *                                      initializer, folded by fission into a
 *                                      constant (small weights) or computed
 *                                      at run time by its primitives (past
 *                                      fission's folding limit), per tensor
 *                                      or per output channel (conv: axis 0;
 *                                      MatMul [K, N] weights: axis 1;
 *                                      Gemm's transB weights: axis 0 of
 *                                      [N, K], then a permute);
 * and is rewritten to
 *   y = float(conv_int32(int32(xq) - zx, wq - zw)) * (sx * sw)
 * with the int32 operands in the form backend/cpu/onednn_int8.c takes.
 * The weights come from the ONNX DequantizeLinear node that feeds the
 * op's ONNX weights input (the primitive's origin); the rewrite checks
 * that dequantizing them as fission does gives the primitive's constant
 * bit for bit (in its layout, or transposed for Gemm's transB), or that
 * the primitive's run-time weights are that node's own primitives, so a
 * weight that fission changed in any other way is left alone.
 *
 * Numerics: as ONNX Runtime's QDQ fusion into QLinearConv/QLinearMatMul
 * (its CPU provider's default): the products and sums are exact integers,
 * scaled once by sx * sw in float32, where the float graph rounded every
 * product and partial sum.  Results move by float32 rounding (relative
 * 1e-6 before the next QuantizeLinear, which can flip a value's rounding
 * by 1).  tests/python/test_variants.py compares quantize_static models
 * with ONNX Runtime.
 */
#include "passes/passes.h"
#include "passes/quant_match.h"

#include <math.h>

static const fsl_value *through_reshapes(const fsl_value *v) {
  while (v && v->producer && v->producer->op == FSL_OP_reshape && v->producer->n_in >= 1) v = v->producer->in[0];
  return v;
}

/* The activation side: v = (float(xq) - zx) * sx, through reshapes. */
static bool match_act(const fsl_value *v, fsl_dequant *a) {
  return fsl_match_dequant(through_reshapes(v), a);
}

/* The ONNX node with id `id`, or NULL. */
static const fsl_node *onnx_node(const fsl_graph *onnx, int id) {
  for (int i = 0; i < onnx->n_nodes; i++)
    if (onnx->nodes[i]->id == id) return onnx->nodes[i];
  return NULL;
}

/* The weight side: lin's constant weights w (its in[1], [r0, r1, ...]) are
 * DequantizeLinear(wq, sw, zw) of 8-bit initializers, per tensor or per
 * output channel (transposed: the ONNX tensor is w's 2-D transpose), with
 * w - zero point within int8.  Fills wq (w's layout, minus the zero
 * point) and scale (per output channel, or one). */
typedef struct wts {
  int8_t *wq;        /* numel(w), malloc'd */
  float *scale;      /* n_scale, malloc'd */
  int64_t n_scale;
} wts;

static bool match_weights(const fsl_node *lin, const fsl_node *origin, wts *out) {
  const fsl_value *w = lin->in[1];
  if (w->dtype != FSL_DT_F32 || !origin || origin->n_in < 2 || !origin->in[1]) return false;
  const fsl_node *dq = origin->in[1]->producer;
  if (!dq || strcmp(dq->op_type, "DequantizeLinear") || dq->n_in < 2 || !dq->in[0] || !dq->in[1]) return false;
  const fsl_value *q = dq->in[0], *s = dq->in[1], *z = dq->n_in > 2 ? dq->in[2] : NULL;
  if (!q->data || !s->data || (z && !z->data) || (q->dtype != FSL_DT_U8 && q->dtype != FSL_DT_I8) ||
      s->dtype != FSL_DT_F32 || fsl_attr_int(dq, "block_size", 0) != 0 || (z && z->dtype != q->dtype))
    return false;
  int64_t n = fsl_value_numel(w), ns = fsl_value_numel(s);
  if (fsl_value_numel(q) != n || (z && fsl_value_numel(z) != ns) || q->rank < 1) return false;
  int64_t axis = fsl_attr_int(dq, "axis", 1);
  if (axis < 0) axis += q->rank;
  /* the ONNX tensor as w's layout: the same dims, or (2-D) transposed */
  bool same = q->rank == w->rank, tr = q->rank == 2 && w->rank == 2 && q->dims[0] == w->dims[1] &&
                                        q->dims[1] == w->dims[0];
  for (int i = 0; same && i < w->rank; i++) same = q->dims[i] == w->dims[i];
  if (!same && !tr) return false;
  /* w computed at run time (fission folds only up to a size): the
   * DequantizeLinear's own primitives, perhaps transposed (Gemm's transB) */
  bool computed = !w->data;
  if (computed) {
    const fsl_value *v = w;
    if (tr && v->producer && v->producer->op == FSL_OP_permute && v->producer->n_in == 1) v = v->producer->in[0];
    else if (tr && !same) return false;
    else tr = false;
    if (!v || !v->producer || v->producer->origin != dq->id || fsl_value_numel(v) != n) return false;
  }
  if (ns > 1 && (axis >= q->rank || q->dims[axis] != ns)) return false;
  int ch = (int)(tr ? 1 - axis : axis);
  /* the scale must run along the output channels: conv axis 0, matmul axis 1 */
  if (ns > 1 && ch != (lin->op == FSL_OP_conv ? 0 : w->rank - 1)) return false;
  out->wq = malloc((size_t)n);
  out->scale = malloc(sizeof(float) * (size_t)ns);
  out->n_scale = ns;
  if (!out->wq || !out->scale) return false;
  for (int64_t k = 0; k < ns; k++) out->scale[k] = (float)fsl_load_f64(s->dtype, s->data, k);
  /* element i of w (row-major over w's dims) is element j of q */
  int64_t inner = 1; /* q's elements per step of `axis` */
  for (int d = (int)axis + 1; d < q->rank; d++) inner *= q->dims[d];
  for (int64_t i = 0; i < n; i++) {
    int64_t j = tr ? (i % w->dims[1]) * w->dims[0] + i / w->dims[1] : i;
    int64_t c = ns > 1 ? (j / inner) % ns : 0;
    int64_t qi = fsl_load_i64(q->dtype, q->data, j), zi = z ? fsl_load_i64(z->dtype, z->data, c) : 0;
    int64_t d = qi - zi;
    if (d < -128 || d > 127) return false;
    /* a folded w: dequantized as fission does, (float(q) - float(z)) * scale in float32 */
    float f = ((float)qi - (float)zi) * out->scale[c];
    if (!computed && f != ((const float *)w->data)[i]) return false;
    out->wq[i] = (int8_t)d;
  }
  return true;
}

static fsl_attr *cast_attr(fsl_graph *g, fsl_dtype to) {
  fsl_attr *a = fsl_arena_alloc(&g->arena, sizeof *a);
  if (a) *a = fsl_attr_make_int("to", to);
  return a;
}

/* Rewrites lin (at position pos) as above; false (nothing changed) when it
 * does not match; FSL_ERR_NOMEM through *st. */
static bool rewrite(fsl_graph *g, const fsl_graph *onnx, int pos, fsl_status *st) {
  fsl_node *lin = g->nodes[pos];
  if ((lin->op != FSL_OP_conv && lin->op != FSL_OP_matmul) || lin->n_in != 2 || lin->n_out != 1 || !lin->in[0] ||
      !lin->in[1] || !lin->out[0] || lin->out[0]->dtype != FSL_DT_F32 || lin->out[0]->is_output ||
      !fsl_value_has_shape(lin->out[0]))
    return false;
  const int64_t *ld = NULL;
  for (int i = 0, n = fsl_attr_ints(lin, "lhs_dilation", &ld); i < n; i++)
    if (ld[i] != 1) return false; /* a ConvTranspose */
  fsl_dequant a;
  if (!match_act(lin->in[0], &a)) return false;
  const fsl_value *w = lin->in[1];
  if (lin->op == FSL_OP_matmul && (w->rank != 2 || lin->in[0]->rank != 2)) return false;
  wts ws = {0};
  bool ok = match_weights(lin, onnx_node(onnx, lin->origin), &ws);
  if (!ok) {
    free(ws.wq);
    free(ws.scale);
    return false;
  }
  const fsl_value *x = lin->in[0], *y = lin->out[0];
  int n0 = g->n_nodes;
  /* xi = int32(xq) [- zx], with x's dims */
  fsl_value *xc = fsl_graph_new_value(g, FSL_DT_I32, a.q->rank, a.q->dims);
  fsl_value *xi = xc;
  bool fine = xc && fsl_graph_add_node_as(g, FSL_OP_cast, &a.q, 1, xc, cast_attr(g, FSL_DT_I32), 1, lin);
  if (fine && a.zero != 0) {
    int32_t zv = (int32_t)a.zero;
    int64_t ones[FSL_MAX_RANK];
    for (int i = 0; i < a.q->rank; i++) ones[i] = 1;
    fsl_value *zc = fsl_graph_new_const(g, FSL_DT_I32, a.q->rank, ones, &zv, sizeof zv);
    zc = fsl_graph_add_expand(g, zc, a.q->rank, a.q->dims, lin);
    fsl_value *d = fsl_graph_new_value(g, FSL_DT_I32, a.q->rank, a.q->dims);
    fine = zc && d && fsl_graph_add_node_as(g, FSL_OP_sub, (fsl_value *[]){xc, zc}, 2, d, NULL, 0, lin);
    xi = d;
  }
  bool reshape = fine && (a.q->rank != x->rank || memcmp(a.q->dims, x->dims, sizeof(int64_t) * (size_t)x->rank));
  if (reshape) {
    fsl_attr *at = fsl_arena_alloc(&g->arena, sizeof *at);
    fsl_value *r = fsl_graph_new_value(g, FSL_DT_I32, x->rank, x->dims);
    fine = at && r;
    if (fine) {
      *at = fsl_attr_make_ints(g, "shape", x->dims, x->rank);
      fine = fsl_graph_add_node_as(g, FSL_OP_reshape, &xi, 1, r, at, 1, lin) != NULL;
      xi = r;
    }
  }
  /* wi = int32(wq - zw), the int8 constant widened */
  fsl_value *wq = fine ? fsl_graph_new_const(g, FSL_DT_I8, w->rank, w->dims, ws.wq, (size_t)fsl_value_numel(w)) : NULL;
  fsl_value *wi = wq ? fsl_graph_new_value(g, FSL_DT_I32, w->rank, w->dims) : NULL;
  fine = wi && fsl_graph_add_node_as(g, FSL_OP_cast, &wq, 1, wi, cast_attr(g, FSL_DT_I32), 1, lin);
  /* acc = the same op on the integers; y' = float(acc) * (sx * sw) */
  fsl_value *acc = fine ? fsl_graph_new_value(g, FSL_DT_I32, y->rank, y->dims) : NULL;
  fine = acc && fsl_graph_add_node_as(g, lin->op, (fsl_value *[]){xi, wi}, 2, acc, lin->attrs, lin->n_attrs, lin);
  fsl_value *af = fine ? fsl_graph_new_value(g, FSL_DT_F32, y->rank, y->dims) : NULL;
  fine = af && fsl_graph_add_node_as(g, FSL_OP_cast, &acc, 1, af, cast_attr(g, FSL_DT_F32), 1, lin);
  int64_t sdims[FSL_MAX_RANK];
  for (int i = 0; i < y->rank; i++) sdims[i] = 1;
  if (ws.n_scale > 1) sdims[lin->op == FSL_OP_conv ? 1 : y->rank - 1] = ws.n_scale;
  float *sc = fine ? malloc(sizeof(float) * (size_t)ws.n_scale) : NULL;
  for (int64_t k = 0; sc && k < ws.n_scale; k++) sc[k] = (float)a.scale * ws.scale[k];
  fsl_value *scv = sc ? fsl_graph_new_const(g, FSL_DT_F32, y->rank, sdims, sc, sizeof(float) * (size_t)ws.n_scale)
                      : NULL;
  scv = scv ? fsl_graph_add_expand(g, scv, y->rank, y->dims, lin) : NULL;
  fsl_value *ny = scv ? fsl_graph_new_value(g, FSL_DT_F32, y->rank, y->dims) : NULL;
  fine = ny && fsl_graph_add_node_as(g, FSL_OP_mul, (fsl_value *[]){af, scv}, 2, ny, NULL, 0, lin);
  free(sc);
  free(ws.wq);
  free(ws.scale);
  if (!fine) {
    *st = fsl_errorf(FSL_ERR_NOMEM, "qdq: out of memory");
    return false;
  }
  /* the new nodes (appended) go right after lin, in order; lin's readers read ny */
  fsl_graph_move_tail_after(g, n0, pos);
  fsl_graph_replace_uses(g, lin->out[0], ny);
  return true;
}

fsl_status fsl_pass_qdq_linear(fsl_graph *g, const fsl_graph *onnx, bool linear_int8, int *n_rewritten) {
  if (n_rewritten) *n_rewritten = 0;
  if (!g || !onnx || !linear_int8) return FSL_OK;
  fsl_status st = FSL_OK;
  for (int i = 0; i < g->n_nodes && st == FSL_OK; i++)
    if (rewrite(g, onnx, i, &st) && n_rewritten) (*n_rewritten)++;
  return st;
}
