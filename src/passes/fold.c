/*
 * fold.c — the weights of matmuls and convolutions that are computed from
 * constants only become constants, computed once here.
 *
 * Fission folds a primitive over constants only while its result does not
 * grow past FOLD_GROW_LIMIT (builder.c): a broadcast of a small constant
 * stays a view.  So the DequantizeLinear of a large 8-bit initializer
 * (int8 weights of a weight-only or QDQ model: a float32 result four times
 * the bytes, times a per-channel scale broadcast as a view) stayed a chain
 * of primitives that every run recomputed before its matmul, and the
 * linear op's library could not pack the weights once (oneDNN packs
 * constant weights at compile time).  This pass evaluates such a chain with
 * the reference interpreter (src/eval) and gives the linear op the
 * constant; the chain is left for DCE.  The weights' values are exactly
 * those the run would compute (the same interpreter semantics the
 * backends match).  Bounded like fission's constants: the folded bytes may
 * take the graph's constants to FSL_CONST_LIMIT_FACTOR times their size
 * (at least FSL_CONST_LIMIT_MIN); past that a weight stays computed.
 */
#include "passes/passes.h"

#include "eval/eval.h"
#include "fission/builder.h"

typedef struct fold_ctx {
  fsl_graph *g;
  bool *cderiv;  /* value id -> computed from constants only */
  void **buf;    /* value id -> its data, evaluated here (malloc'd), or NULL */
  bool nomem;
} fold_ctx;

/* The data of constant-derived value v (evaluated, memoised); NULL on an
 * error (set) or too deep a chain. */
static const void *eval_value(fold_ctx *c, const fsl_value *v, int depth) {
  if (v->data) return v->data;
  if (c->buf[v->id]) return c->buf[v->id];
  const fsl_node *p = v->producer;
  if (!p || depth > 64) return NULL;
  const void *ins[FSL_MAX_RANK * 4];
  void *outs[8] = {0};
  if (p->n_in > (int)FSL_ARRAY_LEN(ins) || p->n_out > (int)FSL_ARRAY_LEN(outs)) return NULL;
  for (int i = 0; i < p->n_in; i++) {
    ins[i] = p->in[i] ? eval_value(c, p->in[i], depth + 1) : NULL;
    if (p->in[i] && !ins[i]) return NULL;
  }
  for (int o = 0; o < p->n_out; o++) {
    if (!p->out[o]) continue;
    int64_t nb = fsl_value_nbytes(p->out[o]);
    if (nb < 0 || !(outs[o] = malloc((size_t)(nb > 0 ? nb : 1)))) {
      for (int k = 0; k < o; k++) free(outs[k]);
      c->nomem = true;
      return NULL;
    }
  }
  if (fsl_ref_eval(p, ins, outs) != FSL_OK) {
    for (int o = 0; o < p->n_out; o++) free(outs[o]);
    return NULL;
  }
  for (int o = 0; o < p->n_out; o++)
    if (p->out[o]) c->buf[p->out[o]->id] = outs[o];
  return c->buf[v->id];
}

fsl_status fsl_pass_fold_weights(fsl_graph *g, int *n_folded) {
  if (n_folded) *n_folded = 0;
  int nv = g->n_values;
  fold_ctx c = {.g = g, .cderiv = calloc((size_t)nv + 1, sizeof(bool)), .buf = calloc((size_t)nv + 1, sizeof(void *))};
  if (!c.cderiv || !c.buf) {
    free(c.cderiv), free(c.buf);
    return fsl_errorf(FSL_ERR_NOMEM, "fold: out of memory");
  }
  int64_t const_bytes = 0;
  for (int i = 0; i < nv; i++)
    if (g->values[i] && g->values[i]->data) const_bytes += fsl_value_nbytes(g->values[i]);
  int64_t limit = const_bytes * FSL_CONST_LIMIT_FACTOR;
  if (limit < FSL_CONST_LIMIT_MIN) limit = FSL_CONST_LIMIT_MIN;
  int64_t budget = limit - const_bytes;
  int n0 = g->n_nodes;
  for (int i = 0; i < n0; i++) {
    const fsl_node *n = g->nodes[i];
    const fsl_op_info *oi = fsl_op_get(n->op);
    bool k = oi->primitive && n->n_in > 0;
    for (int j = 0; j < n->n_in && k; j++) k = !n->in[j] || n->in[j]->data || (n->in[j]->id < nv && c.cderiv[n->in[j]->id]);
    for (int o = 0; o < n->n_out; o++)
      if (n->out[o] && n->out[o]->id < nv) c.cderiv[n->out[o]->id] = k;
  }
  fsl_status st = FSL_OK;
  for (int i = 0; i < n0 && st == FSL_OK; i++) {
    fsl_node *n = g->nodes[i];
    if (fsl_op_get(n->op)->kind != FSL_KIND_LINEAR || n->n_in < 2 || !n->in[1]) continue;
    fsl_value *w = n->in[1];
    int64_t nb = fsl_value_nbytes(w);
    if (w->data || w->id >= nv || !c.cderiv[w->id] || nb <= 0 || nb > budget) continue;
    const void *d = eval_value(&c, w, 0);
    if (!d) { /* an op the interpreter refuses here stays computed at run time */
      fsl_error_clear();
      if (c.nomem) st = fsl_errorf(FSL_ERR_NOMEM, "fold: out of memory");
      continue;
    }
    fsl_value *cv = fsl_graph_add_value(g, NULL);
    void *data = cv ? fsl_arena_alloc(&g->arena, (size_t)nb) : NULL;
    if (!data || !fsl_value_set_shape(cv, w->rank, w->dims)) {
      st = fsl_errorf(FSL_ERR_NOMEM, "fold: out of memory");
      break;
    }
    cv->dtype = w->dtype;
    memcpy(data, d, (size_t)nb);
    cv->data = data;
    if (!fsl_node_replace_input(g, n, w, cv)) {
      st = fsl_errorf(FSL_ERR_NOMEM, "fold: out of memory");
      break;
    }
    budget -= nb;
    if (n_folded) (*n_folded)++;
  }
  for (int i = 0; i < nv; i++) free(c.buf[i]);
  free(c.buf);
  free(c.cderiv);
  return st;
}
