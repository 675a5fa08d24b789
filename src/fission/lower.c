/* lower.c — the fission driver: ONNX graph -> primitive graph. */
#include "fission/fission.h"

/* One decomposition per ONNX op, indexed by fsl_op (NULL for primitives). */
static const fsl_fission_fn k_fission[FSL_OP_COUNT] = {
#define PRIM(name, n_in, kind, dtypes, cost, cfn)
#define ONNX(name, min_in, max_in, kind, since, until) [FSL_OP_##name] = fsl_fission_##name,
#include "ir/ops.def"
#undef PRIM
#undef ONNX
};

fsl_status fsl_fx_fail(fsl_fctx *fx, fsl_status s, const char *fmt, ...) {
  if (fx->b->st != FSL_OK) return fx->b->st;
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fx->b->st = fsl_errorf(s, "node '%s' (%s, opset %lld): %s", fx->node->name, fx->node->op_type,
                         (long long)fx->opset, msg);
  return s;
}

fsl_value *fsl_fx_req(fsl_fctx *fx, int i) {
  if (i < fx->n_in && fx->in[i]) return fx->in[i];
  fsl_fx_fail(fx, FSL_ERR_INVALID, "input %d is required but missing", i);
  return NULL;
}

fsl_status fsl_fx_done(fsl_fctx *fx) { return fx->b->st; }

fsl_status fsl_fx_opaque(fsl_fctx *fx, const fsl_dtype *dts, const int *ranks,
                         const int64_t (*dims)[FSL_MAX_RANK]) {
  if (fx->b->st) return fx->b->st;
  fsl_graph *g = fx->b->g;
  fsl_value **outs = fsl_arena_alloc(&g->arena, sizeof(fsl_value *) * (size_t)(fx->n_out + 1));
  if (!outs) return fsl_fx_fail(fx, FSL_ERR_NOMEM, "out of memory");
  for (int i = 0; i < fx->n_out; i++) {
    outs[i] = fsl_graph_add_value(g, NULL);
    if (!outs[i]) return fsl_fx_fail(fx, FSL_ERR_NOMEM, "out of memory");
    outs[i]->dtype = dts[i];
    if (!fsl_value_set_shape(outs[i], ranks[i], dims[i]))
      return fsl_fx_fail(fx, FSL_ERR_UNSUPPORTED, "output %d rank %d too large", i, ranks[i]);
  }
  fsl_node *n = fsl_graph_add_node(g, fx->node->op, fx->node->name, fx->in, fx->n_in, outs, fx->n_out,
                                   fx->node->attrs, fx->node->n_attrs);
  if (!n) return fsl_fx_fail(fx, FSL_ERR_NOMEM, "out of memory");
  n->op_type = fx->node->op_type;
  n->domain = fx->node->domain;
  n->origin = fx->node->id;
  n->origin_name = fx->node->name;
  n->origin_op = fx->node->op_type;
  for (int i = 0; i < fx->n_out; i++) fx->out[i] = outs[i];
  return FSL_OK;
}

/* A list of offending nodes for one error message: "  <line>" per node,
 * as many as fit. */
typedef struct node_list {
  char buf[3000];
  size_t len;
  int count;
} node_list;

static void list_add(node_list *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void list_add(node_list *l, const char *fmt, ...) {
  if (l->count++ && l->len < sizeof l->buf - 200) l->buf[l->len++] = '\n';
  if (l->len >= sizeof l->buf - 200) return;
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(l->buf + l->len, sizeof l->buf - l->len, fmt, ap);
  va_end(ap);
  if (w > 0) l->len += (size_t)w < sizeof l->buf - l->len ? (size_t)w : sizeof l->buf - l->len - 1;
}

/* Lists every node fission cannot handle: an unknown op or foreign domain,
 * or else an op whose model opset is outside the op's [since, until] in
 * ops.def (a definition it does not implement, or one from before the op
 * existed). */
static fsl_status check_supported(const fsl_graph *src) {
  node_list unknown = {.len = 0}, opsets = {.len = 0};
  for (int i = 0; i < src->n_nodes; i++) {
    const fsl_node *n = src->nodes[i];
    int64_t opset = fsl_graph_opset(src, n->domain);
    if (n->op == FSL_OP_NONE || !k_fission[n->op]) {
      const char *dom = n->domain && *n->domain ? n->domain : "ai.onnx";
      list_add(&unknown, "  %s (domain %s, opset %lld) at node '%s'", n->op_type, dom, (long long)opset, n->name);
    } else if (!fsl_op_opset_ok(n->op, opset)) {
      const fsl_op_info *info = fsl_op_get(n->op);
      char range[48];
      if (info->until) snprintf(range, sizeof range, "%d to %d", info->since, info->until);
      else snprintf(range, sizeof range, "%d and later", info->since);
      list_add(&opsets, "  node '%s' (%s, opset %lld): fissile implements %s for opsets %s", n->name, n->op_type,
               (long long)opset, info->name, range);
    }
  }
  if (unknown.count)
    return fsl_errorf(FSL_ERR_UNSUPPORTED, "%d node(s) use ops fissile does not support:\n%s", unknown.count,
                      unknown.buf);
  if (opsets.count)
    return fsl_errorf(FSL_ERR_UNSUPPORTED, "%d node(s) use an op in an opset whose definition fissile does not "
                      "implement:\n%s", opsets.count, opsets.buf);
  return FSL_OK;
}

typedef struct lower_state {
  const fsl_graph *src;
  fsl_graph *dst;
  fsl_value **map;  /* src value id -> dst value */
  int64_t const_left; /* bytes of constants fission may still add (builder.h) */
} lower_state;

/* The dst value for a src value; constants are shared on first use. */
static fsl_value *lookup(lower_state *ls, const fsl_value *v) {
  fsl_value *m = ls->map[v->id];
  if (m || !v->data) return m;
  m = fsl_graph_add_value(ls->dst, v->name);
  if (!m) return NULL;
  m->dtype = v->dtype;
  fsl_value_set_shape(m, v->rank, v->dims);
  m->data = v->data; /* shared with src (the model keeps src alive) */
  ls->map[v->id] = m;
  return m;
}

static fsl_status lower_inputs(lower_state *ls) {
  for (int i = 0; i < ls->src->n_inputs; i++) {
    const fsl_value *v = ls->src->inputs[i];
    for (int d = 0; d < v->rank; d++)
      if (v->dims[d] < 0) {
        const char *p = v->dim_param ? v->dim_param[d] : NULL;
        if (p)
          return fsl_errorf(FSL_ERR_SHAPE, "input '%s': dimension %d is the symbol '%s', which is unbound; "
                            "bind it with --dim %s=N or --shape %s=...", v->name, d, p, p, v->name);
        return fsl_errorf(FSL_ERR_SHAPE, "input '%s': dimension %d has no size; bind it with --shape %s=...",
                          v->name, d, v->name);
      }
    if (v->rank < 0)
      return fsl_errorf(FSL_ERR_SHAPE, "input '%s' has no shape in the model; bind it with --shape %s=...",
                        v->name, v->name);
    if (!fsl_dtype_valid(v->dtype))
      return fsl_errorf(FSL_ERR_UNSUPPORTED, "input '%s' has dtype %s, which fissile does not support",
                        v->name, fsl_dtype_name(v->dtype));
    fsl_value *m = fsl_graph_add_value(ls->dst, v->name);
    if (!m) return fsl_errorf(FSL_ERR_NOMEM, "out of memory");
    m->dtype = v->dtype;
    fsl_value_set_shape(m, v->rank, v->dims);
    FSL_TRY(fsl_graph_add_input(ls->dst, m));
    ls->map[v->id] = m;
  }
  return FSL_OK;
}

static fsl_status lower_node(lower_state *ls, const fsl_node *n) {
  fsl_builder b = {.g = ls->dst, .fold = true, .const_left = &ls->const_left, .origin = n->id, .origin_name = n->name, .origin_op = n->op_type};
  const fsl_op_info *info = fsl_op_get(n->op);
  int64_t opset = fsl_graph_opset(ls->src, n->domain);
  int n_present = n->n_in;
  while (n_present > 0 && !n->in[n_present - 1]) n_present--;
  if (n_present < info->min_in || (info->max_in >= 0 && n->n_in > info->max_in))
    return fsl_errorf(FSL_ERR_INVALID, "node '%s' (%s, opset %lld): has %d inputs, expected %d to %d", n->name,
                      n->op_type, (long long)opset, n->n_in, info->min_in, info->max_in);
  fsl_value **in = calloc((size_t)n->n_in + 1, sizeof *in);
  fsl_value **out = calloc((size_t)n->n_out + 1, sizeof *out);
  fsl_status st = FSL_OK;
  if (!in || !out) { st = fsl_errorf(FSL_ERR_NOMEM, "out of memory"); goto done; }
  for (int i = 0; i < n->n_in; i++) {
    if (!n->in[i]) continue;
    in[i] = lookup(ls, n->in[i]);
    if (!in[i]) {
      st = fsl_errorf(FSL_ERR_INVALID, "node '%s' (%s): input '%s' is not computed (the node producing it "
                      "does not define that output)", n->name, n->op_type, n->in[i]->name);
      goto done;
    }
  }
  fsl_fctx fx = {.b = &b, .node = n, .opset = opset, .n_in = n->n_in, .n_out = n->n_out, .in = in, .out = out};
  st = k_fission[n->op](&fx);
  if (st == FSL_OK && b.st != FSL_OK) st = b.st;
  if (st != FSL_OK) goto done;
  for (int i = 0; i < n->n_out; i++) {
    const fsl_value *v = n->out[i];
    if (!v) continue;
    if (!out[i] && (v->n_cons > 0 || v->is_output)) {
      st = fsl_errorf(FSL_ERR_UNSUPPORTED, "node '%s' (%s, opset %lld): output %d ('%s') is used but fissile "
                      "does not compute it", n->name, n->op_type, (long long)opset, i, v->name);
      goto done;
    }
    ls->map[v->id] = out[i];
  }
done:
  free(in);
  free(out);
  return st;
}

static fsl_status lower_outputs(lower_state *ls) {
  for (int i = 0; i < ls->src->n_outputs; i++) {
    const fsl_value *v = ls->src->outputs[i];
    fsl_value *m = lookup(ls, v);
    if (!m) return fsl_errorf(FSL_ERR_INVALID, "graph output '%s' is not computed", v->name);
    if (!m->is_input && !m->data && !m->is_output && m->name[0] == '%')
      m->name = fsl_arena_strdup(&ls->dst->arena, v->name);
    FSL_TRY(fsl_graph_add_output(ls->dst, m));
  }
  return FSL_OK;
}

fsl_status fsl_fission(const fsl_graph *src, fsl_graph **out) {
  *out = NULL;
  FSL_TRY(check_supported(src));
  lower_state ls = {.src = src, .dst = fsl_graph_new()};
  ls.map = calloc((size_t)src->n_values + 1, sizeof *ls.map);
  fsl_status st = FSL_OK;
  if (!ls.dst || !ls.map) { st = fsl_errorf(FSL_ERR_NOMEM, "out of memory"); goto err; }
  int64_t own = 0; /* the model's constants (each fits: the importer allocated it) */
  for (int i = 0; i < src->n_values; i++)
    if (src->values[i]->data) own += fsl_value_nbytes(src->values[i]);
  ls.const_left = own > (INT64_MAX / FSL_CONST_LIMIT_FACTOR) ? INT64_MAX : own * FSL_CONST_LIMIT_FACTOR;
  if (ls.const_left < FSL_CONST_LIMIT_MIN) ls.const_left = FSL_CONST_LIMIT_MIN;
  ls.dst->name = src->name;
  ls.dst->opsets = src->opsets;
  ls.dst->n_opsets = src->n_opsets;
  if ((st = lower_inputs(&ls)) != FSL_OK) goto err;
  for (int i = 0; i < src->n_nodes; i++)
    if ((st = lower_node(&ls, src->nodes[i])) != FSL_OK) goto err;
  if ((st = lower_outputs(&ls)) != FSL_OK) goto err;
  free(ls.map);
  *out = ls.dst;
  return FSL_OK;
err:
  free(ls.map);
  fsl_graph_free(ls.dst);
  return st;
}
