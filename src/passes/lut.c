/*
 * lut.c — elementwise functions of one 8-bit value as 256-entry tables.
 *
 * After fission a quantized model's activations are chains of elementwise
 * primitives between 8-bit tensors: QDQ's SiLU is DequantizeLinear,
 * Sigmoid, QuantizeLinear, DequantizeLinear, Mul with the dequantized
 * input, QuantizeLinear, some twenty primitives per element.  Every value
 * of such a chain is a function of the one 8-bit tensor x it starts from:
 * 256 possible inputs.  So where the chain costs at least LUT_MIN_COST
 * on its heaviest path from x (the sum of the ops.def costs: one
 * transcendental, exp, sigmoid, tanh, erf, ..., costs 16; QDQ's HardSwish,
 * dequantize, x * clip(x / 6 + 0.5, 0, 1), quantize, about 17 primitives
 * of cost 1 to 4), the value the rest of the graph reads becomes a gather from a
 * constant table of 256 entries indexed by x, the table computed here by
 * the reference interpreter on all 256 inputs: the same values, exactly,
 * that the chain would compute (ONNX Runtime's QLinearSigmoid and
 * QLinearLeakyRelu are such tables, matched op by op; here any chain that
 * fission exposes qualifies, however it is written).
 *
 * A region of source x: the elementwise nodes whose operands are x, values
 * of the region of x with x's dims, or constants of one value (one
 * element, its broadcasts, or a constant with all elements equal),
 * computing float32 or 8-bit values.  A widening cast to a
 * wider integer (what an int8 linear op reads) ends the region, so the
 * int8 convolutions keep reading 8-bit data.  The tables replace the
 * region's values that something outside it reads (not graph outputs:
 * passes never rename those); the region's nodes are left for DCE.
 */
#include "passes/passes.h"

#include "eval/eval.h"

/* ops.def cost of one transcendental (exp, sigmoid, tanh, erf), or of a
 * chain of some 16 arithmetic primitives: the summed cost from which a
 * gather is cheaper (bench/results/lut-sum-ab.txt: hardswish chains) */
#define LUT_MIN_COST 16
#define LUT_N 256

typedef struct lut_ctx {
  fsl_graph *g;
  const fsl_value **src; /* value id -> the 8-bit value it is a function of, or NULL */
  int *cost;             /* value id -> the summed op cost of its heaviest path from src */
  int nv0;               /* values before the pass (the tables' ids) */
} lut_ctx;

static bool is8(fsl_dtype dt) { return dt == FSL_DT_U8 || dt == FSL_DT_I8; }

/* Whether v is one value wherever it is read: a constant whose elements
 * are all equal (one element, or a broadcast fission folded), or a
 * reshape/expand of one; returns the constant (its element 0 is the
 * value). */
static const fsl_value *scalar_const(const fsl_value *v) {
  double one;
  if (v->data && fsl_value_uniform_const(v, &one)) return v;
  const fsl_node *p = v->producer;
  if (p && (p->op == FSL_OP_expand || p->op == FSL_OP_reshape) && p->n_in >= 1 && p->in[0] && p->in[0]->data &&
      fsl_value_uniform_const(p->in[0], &one))
    return p->in[0];
  return NULL;
}

/* The region's source for node n's output (NULL: n is not in a region). */
static const fsl_value *node_source(const lut_ctx *c, const fsl_node *n, int *cost) {
  if (!fsl_op_is_elementwise(n->op) || n->n_out != 1 || !n->out[0]) return NULL;
  const fsl_value *y = n->out[0];
  if (y->dtype != FSL_DT_F32 && !is8(y->dtype)) return NULL;
  const fsl_value *x = NULL;
  int k = 0;
  for (int i = 0; i < n->n_in; i++) {
    const fsl_value *a = n->in[i];
    if (!a) return NULL;
    if (scalar_const(a)) continue;
    const fsl_value *s = c->src[a->id];
    if (!s || (x && s != x) || !fsl_value_same_shape(a, s)) return NULL;
    x = s;
    if (c->cost[a->id] > k) k = c->cost[a->id];
  }
  if (!x || !fsl_value_same_shape(y, x)) return NULL;
  *cost = k + fsl_op_get(n->op)->cost;
  return x;
}

/* Evaluates value v of x's region on the 256 values of x (in index order:
 * 0..255 for uint8, 0..127 then -128..-1 for int8, as Gather reads a
 * negative index) into tab[v->id] (malloc'd, memoised).  false on an error
 * (an op the interpreter refuses: the table is not made). */
static bool eval_lut(lut_ctx *c, const fsl_value *v, const fsl_value *x, void **tab, int depth) {
  if (v->id >= c->nv0) return false;
  if (tab[v->id]) return true;
  if (depth > 256) return false;
  if (v == x) {
    unsigned char *b = malloc(LUT_N);
    if (!b) return false;
    for (int k = 0; k < LUT_N; k++) b[k] = (unsigned char)k; /* int8: k >= 128 is k - 256 */
    tab[v->id] = b;
    return true;
  }
  const fsl_node *n = v->producer;
  fsl_value tin[4], tout;
  fsl_value *pin[4], *pout = &tout;
  const void *ins[4];
  void *own[4] = {0};
  if (!n || n->n_in > 4) return false;
  bool ok = true;
  for (int i = 0; i < n->n_in && ok; i++) {
    const fsl_value *a = n->in[i], *s = scalar_const(a);
    tin[i] = (fsl_value){.id = -1, .dtype = a->dtype, .rank = 1, .dims = {LUT_N}};
    pin[i] = &tin[i];
    if (s) { /* the element repeated */
      size_t es = fsl_dtype_size(a->dtype);
      unsigned char *b = es ? malloc(es * LUT_N) : NULL;
      ok = b && s->dtype == a->dtype;
      for (int k = 0; ok && k < LUT_N; k++) memcpy(b + es * (size_t)k, s->data, es);
      own[i] = b;
      ins[i] = b;
    } else {
      ok = eval_lut(c, a, x, tab, depth + 1);
      ins[i] = ok ? tab[a->id] : NULL;
    }
  }
  tout = (fsl_value){.id = -1, .dtype = v->dtype, .rank = 1, .dims = {LUT_N}};
  void *out = ok ? malloc(fsl_dtype_size(v->dtype) * LUT_N) : NULL;
  if (out) {
    fsl_node t = *n;
    t.in = pin;
    t.out = &pout;
    t.n_out = 1;
    ok = fsl_ref_eval(&t, ins, &out) == FSL_OK;
  }
  for (int i = 0; i < n->n_in; i++) free(own[i]);
  if (!ok || !out) {
    free(out);
    fsl_error_clear();
    return false;
  }
  tab[v->id] = out;
  return true;
}

/* Whether node u is outside the region of source x. */
static bool outside(const lut_ctx *c, const fsl_node *u, const fsl_value *x) {
  return u->n_out < 1 || !u->out[0] || u->out[0]->id >= c->nv0 || c->src[u->out[0]->id] != x;
}

/* Whether some reader of region value v (of source x) is outside the
 * region (v is a graph output: not replaced). */
static bool read_outside(const lut_ctx *c, const fsl_value *v, const fsl_value *x) {
  for (int k = 0; k < v->n_cons; k++)
    if (outside(c, v->cons[k], x)) return true;
  return false;
}

/* Replaces v (of source x, at node position pos) by gather(table, int32(x)). */
static fsl_status replace(const lut_ctx *c, fsl_graph *g, fsl_value *v, const fsl_value *x, const void *table,
                          int pos) {
  int n0 = g->n_nodes;
  size_t bytes = fsl_dtype_size(v->dtype) * LUT_N;
  fsl_value *t = fsl_graph_add_value(g, NULL), *xi = fsl_graph_add_value(g, NULL), *y = fsl_graph_add_value(g, NULL);
  void *d = t ? fsl_arena_alloc(&g->arena, bytes) : NULL;
  fsl_attr *ca = fsl_arena_alloc(&g->arena, sizeof *ca), *ga = fsl_arena_alloc(&g->arena, sizeof *ga);
  int64_t n = LUT_N;
  if (!t || !xi || !y || !d || !ca || !ga || !fsl_value_set_shape(t, 1, &n) || !fsl_value_set_shape(xi, x->rank, x->dims) ||
      !fsl_value_set_shape(y, v->rank, v->dims))
    return fsl_errorf(FSL_ERR_NOMEM, "lut: out of memory");
  memcpy(d, table, bytes);
  t->dtype = v->dtype, t->data = d;
  xi->dtype = FSL_DT_I32, y->dtype = v->dtype;
  *ca = fsl_attr_make_int("to", FSL_DT_I32);
  *ga = fsl_attr_make_int("axis", 0);
  const fsl_node *p = v->producer;
  fsl_node *cn = fsl_graph_add_node_as(g, FSL_OP_cast, (fsl_value *[]){(fsl_value *)x}, 1, xi, ca, 1, p);
  fsl_node *gn = cn ? fsl_graph_add_node_as(g, FSL_OP_gather, (fsl_value *[]){t, xi}, 2, y, ga, 1, p) : NULL;
  if (!gn) return fsl_errorf(FSL_ERR_NOMEM, "lut: out of memory");
  /* the two nodes (appended) go right after v's producer */
  fsl_graph_move_tail_after(g, n0, pos);
  /* the readers outside the region read the table; the region's own keep v */
  for (int k = v->n_cons - 1; k >= 0; k--) {
    fsl_node *u = v->cons[k];
    if (u == gn || !outside(c, u, x)) continue;
    if (!fsl_node_replace_input(g, u, v, y)) return fsl_errorf(FSL_ERR_NOMEM, "lut: out of memory");
    k = v->n_cons; /* the list changed: scan it again */
  }
  return FSL_OK;
}

fsl_status fsl_pass_lut8(fsl_graph *g, int *n_tables) {
  if (n_tables) *n_tables = 0;
  int nv0 = g->n_values;
  lut_ctx c = {.g = g, .nv0 = nv0};
  c.src = calloc((size_t)nv0 + 1, sizeof *c.src);
  c.cost = calloc((size_t)nv0 + 1, sizeof *c.cost);
  void **tab = calloc((size_t)nv0 + 1, sizeof *tab);
  fsl_status st = c.src && c.cost && tab ? FSL_OK : fsl_errorf(FSL_ERR_NOMEM, "lut: out of memory");
  /* sources: every run-time 8-bit value outside a region starts one */
  for (int i = 0; i < g->n_inputs && st == FSL_OK; i++)
    if (is8(g->inputs[i]->dtype) && g->inputs[i]->id < nv0) c.src[g->inputs[i]->id] = g->inputs[i];
  for (int i = 0; i < g->n_nodes && st == FSL_OK; i++) {
    const fsl_node *n = g->nodes[i];
    int k = 0;
    const fsl_value *x = node_source(&c, n, &k);
    for (int o = 0; o < n->n_out; o++) {
      const fsl_value *y = n->out[o];
      if (!y || y->id >= nv0) continue;
      if (x) c.src[y->id] = x, c.cost[y->id] = k;
      else if (is8(y->dtype) && !y->data && fsl_value_has_shape(y)) c.src[y->id] = y;
    }
  }
  /* the tables: region values read outside, behind a transcendental */
  for (int i = 0; i < g->n_nodes && st == FSL_OK; i++) {
    fsl_node *n = g->nodes[i];
    if (n->n_out != 1 || !n->out[0] || n->out[0]->id >= nv0) continue;
    fsl_value *v = n->out[0];
    const fsl_value *x = c.src[v->id];
    if (!x || x == v || c.cost[v->id] < LUT_MIN_COST || v->is_output || fsl_value_numel(x) < LUT_N ||
        !read_outside(&c, v, x))
      continue;
    if (!eval_lut(&c, v, x, tab, 0)) continue;
    st = replace(&c, g, v, x, tab[v->id], i);
    if (st == FSL_OK && n_tables) (*n_tables)++;
    i += 2;
  }
  for (int i = 0; tab && i < nv0; i++) free(tab[i]);
  free(tab);
  free(c.src);
  free(c.cost);
  return st;
}
