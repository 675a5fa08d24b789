/* graph.c — graph, value and node construction; consumer bookkeeping. */
#include "ir/ir.h"

fsl_graph *fsl_graph_new(void) {
  fsl_graph *g = calloc(1, sizeof *g);
  if (g) fsl_arena_init(&g->arena);
  return g;
}

void fsl_graph_free(fsl_graph *g) {
  while (g) {
    fsl_graph *base = g->owns_base ? g->base : NULL;
    fsl_arena_free(&g->arena);
    free(g);
    g = base;
  }
}

/* Grows an arena-held pointer array to hold one more element. */
static bool grow(fsl_graph *g, void ***arr, int n, int *cap) {
  if (n < *cap) return true;
  int nc = *cap ? *cap * 2 : 16;
  void **na = fsl_arena_alloc(&g->arena, sizeof(void *) * (size_t)nc);
  if (!na) return false;
  if (n) memcpy(na, *arr, sizeof(void *) * (size_t)n);
  *arr = na;
  *cap = nc;
  return true;
}
#define GROW(g, arr, n, cap) grow(g, (void ***)&(arr), n, &(cap))

fsl_value *fsl_graph_add_value(fsl_graph *g, const char *name) {
  if (!GROW(g, g->values, g->n_values, g->cap_values)) return NULL;
  fsl_value *v = fsl_arena_alloc(&g->arena, sizeof *v);
  if (!v) return NULL;
  v->id = g->n_values;
  v->rank = -1;
  if (name) v->name = fsl_arena_strdup(&g->arena, name);
  else {
    char buf[32];
    snprintf(buf, sizeof buf, "%%%d", v->id);
    v->name = fsl_arena_strdup(&g->arena, buf);
  }
  if (!v->name) return NULL;
  g->values[g->n_values++] = v;
  return v;
}

static bool add_consumer(fsl_graph *g, fsl_value *v, fsl_node *n) {
  if (!GROW(g, v->cons, v->n_cons, v->cap_cons)) return false;
  v->cons[v->n_cons++] = n;
  return true;
}

static void remove_consumer(fsl_value *v, const fsl_node *n) {
  for (int i = 0; i < v->n_cons; i++)
    if (v->cons[i] == n) {
      v->cons[i] = v->cons[--v->n_cons];
      return;
    }
}

fsl_node *fsl_graph_add_node(fsl_graph *g, fsl_op op, const char *name,
                             fsl_value *const *in, int n_in,
                             fsl_value *const *out, int n_out,
                             fsl_attr *attrs, int n_attrs) {
  if (!GROW(g, g->nodes, g->n_nodes, g->cap_nodes)) return NULL;
  fsl_node *n = fsl_arena_alloc(&g->arena, sizeof *n);
  if (!n) return NULL;
  n->id = g->next_node_id++;
  n->op = op;
  n->name = name ? fsl_arena_strdup(&g->arena, name) : "";
  n->domain = "";
  n->op_type = fsl_op_name(op);
  n->origin = -1;
  n->n_in = n_in;
  n->n_out = n_out;
  n->in = fsl_arena_alloc(&g->arena, sizeof(fsl_value *) * (size_t)(n_in + 1));
  n->out = fsl_arena_alloc(&g->arena, sizeof(fsl_value *) * (size_t)(n_out + 1));
  if (!n->in || !n->out || !n->name) return NULL;
  for (int i = 0; i < n_in; i++) {
    n->in[i] = in[i];
    if (in[i] && !add_consumer(g, in[i], n)) return NULL;
  }
  for (int i = 0; i < n_out; i++) {
    n->out[i] = out[i];
    if (out[i]) out[i]->producer = n;
  }
  n->attrs = attrs;
  n->n_attrs = n_attrs;
  g->nodes[g->n_nodes++] = n;
  return n;
}

fsl_node *fsl_graph_add_node_as(fsl_graph *g, fsl_op op, fsl_value *const *in, int n_in, fsl_value *out,
                                fsl_attr *attrs, int n_attrs, const fsl_node *like) {
  fsl_node *n = fsl_graph_add_node(g, op, NULL, in, n_in, &out, 1, attrs, n_attrs);
  if (n && like) {
    n->origin = like->origin;
    n->origin_name = like->origin_name;
    n->origin_op = like->origin_op;
    n->domain = like->domain;
  }
  return n;
}

fsl_value *fsl_graph_new_value(fsl_graph *g, fsl_dtype dt, int rank, const int64_t *dims) {
  fsl_value *v = fsl_graph_add_value(g, NULL);
  if (!v || !fsl_value_set_shape(v, rank, dims)) return NULL;
  v->dtype = dt;
  return v;
}

fsl_value *fsl_graph_new_const(fsl_graph *g, fsl_dtype dt, int rank, const int64_t *dims, const void *data,
                               size_t bytes) {
  fsl_value *v = fsl_graph_new_value(g, dt, rank, dims);
  void *d = v ? fsl_arena_alloc(&g->arena, bytes ? bytes : 1) : NULL;
  if (!d) return NULL;
  memcpy(d, data, bytes);
  v->data = d;
  return v;
}

fsl_value *fsl_graph_add_expand(fsl_graph *g, fsl_value *c, int rank, const int64_t *dims, const fsl_node *like) {
  fsl_attr *a = c ? fsl_arena_alloc(&g->arena, sizeof *a) : NULL;
  fsl_value *e = a ? fsl_graph_new_value(g, c->dtype, rank, dims) : NULL;
  if (!e) return NULL;
  *a = fsl_attr_make_ints(g, "shape", dims, rank);
  return fsl_graph_add_node_as(g, FSL_OP_expand, &c, 1, e, a, 1, like) ? e : NULL;
}

static void reverse_nodes(fsl_node **a, int lo, int hi) {
  for (; lo < hi; lo++, hi--) {
    fsl_node *t = a[lo];
    a[lo] = a[hi];
    a[hi] = t;
  }
}

void fsl_graph_move_tail_after(fsl_graph *g, int n0, int pos) {
  if (n0 >= g->n_nodes || pos + 1 >= n0) return;
  /* rotate nodes[pos+1 .. n_nodes-1] so that the tail [n0, n_nodes) comes first */
  reverse_nodes(g->nodes, pos + 1, n0 - 1);
  reverse_nodes(g->nodes, n0, g->n_nodes - 1);
  reverse_nodes(g->nodes, pos + 1, g->n_nodes - 1);
}

bool fsl_value_uniform_view(const fsl_value *v, double *out) {
  /* through broadcasts of it (fission keeps large ones as views) */
  while (v && !v->data && v->producer && (v->producer->op == FSL_OP_expand || v->producer->op == FSL_OP_reshape) &&
         v->producer->n_in >= 1)
    v = v->producer->in[0];
  return fsl_value_uniform_const(v, out);
}

static fsl_status add_io(fsl_graph *g, fsl_value ***arr, int *n, int *cap, fsl_value *v) {
  if (!grow(g, (void ***)arr, *n, cap)) return fsl_errorf(FSL_ERR_NOMEM, "out of memory");
  (*arr)[(*n)++] = v;
  return FSL_OK;
}
fsl_graph *fsl_graph_clone(fsl_graph *src) {
  fsl_graph *g = fsl_graph_new();
  fsl_value **map = malloc(sizeof *map * ((size_t)src->n_values + 1));
  fsl_value *in[64], *out[8];
  bool ok = g && map;
  for (int i = 0; ok && i < src->n_values; i++) {
    const fsl_value *s = src->values[i];
    fsl_value *v = map[i] = fsl_graph_add_value(g, "");
    if (!(ok = v != NULL)) break;
    *v = (fsl_value){.id = v->id, .name = s->name, .dtype = s->dtype, .rank = s->rank, .dim_param = s->dim_param,
                     .data = s->data, .is_input = s->is_input, .is_output = s->is_output};
    memcpy(v->dims, s->dims, sizeof v->dims);
  }
  for (int i = 0; ok && i < src->n_nodes; i++) {
    const fsl_node *s = src->nodes[i];
    fsl_value **pi = s->n_in <= (int)FSL_ARRAY_LEN(in) ? in : malloc(sizeof *pi * (size_t)s->n_in);
    ok = pi && s->n_out <= (int)FSL_ARRAY_LEN(out);
    for (int k = 0; ok && k < s->n_in; k++) pi[k] = s->in[k] ? map[s->in[k]->id] : NULL;
    for (int k = 0; ok && k < s->n_out; k++) out[k] = s->out[k] ? map[s->out[k]->id] : NULL;
    fsl_node *n = ok ? fsl_graph_add_node(g, s->op, NULL, pi, s->n_in, out, s->n_out, s->attrs, s->n_attrs) : NULL;
    if (pi != in) free(pi);
    if (!(ok = n != NULL)) break;
    n->id = s->id;
    n->name = s->name;
    n->domain = s->domain;
    n->op_type = s->op_type;
    n->origin = s->origin;
    n->origin_name = s->origin_name;
    n->origin_op = s->origin_op;
  }
  for (int i = 0; ok && i < src->n_inputs; i++) ok = fsl_graph_add_input(g, map[src->inputs[i]->id]) == FSL_OK;
  for (int i = 0; ok && i < src->n_outputs; i++) ok = fsl_graph_add_output(g, map[src->outputs[i]->id]) == FSL_OK;
  free(map);
  if (!ok) {
    fsl_graph_free(g);
    return NULL;
  }
  g->name = src->name;
  g->opsets = src->opsets;
  g->n_opsets = src->n_opsets;
  g->next_node_id = src->next_node_id;
  g->external_data = src->external_data;
  g->base = src;
  return g;
}

fsl_status fsl_graph_add_input(fsl_graph *g, fsl_value *v) {
  v->is_input = true;
  return add_io(g, &g->inputs, &g->n_inputs, &g->cap_inputs, v);
}
fsl_status fsl_graph_add_output(fsl_graph *g, fsl_value *v) {
  v->is_output = true;
  return add_io(g, &g->outputs, &g->n_outputs, &g->cap_outputs, v);
}

void fsl_graph_remove_nodes(fsl_graph *g, const bool *keep) {
  int j = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    fsl_node *n = g->nodes[i];
    if (keep[n->id]) { g->nodes[j++] = n; continue; }
    for (int k = 0; k < n->n_in; k++)
      if (n->in[k]) remove_consumer(n->in[k], n);
    for (int k = 0; k < n->n_out; k++)
      if (n->out[k] && n->out[k]->producer == n) n->out[k]->producer = NULL;
  }
  g->n_nodes = j;
}

bool fsl_node_replace_input(fsl_graph *g, fsl_node *n, fsl_value *from, fsl_value *to) {
  if (from == to) return true;
  for (int k = 0; k < n->n_in; k++) {
    if (n->in[k] != from) continue;
    if (!add_consumer(g, to, n)) return false;
    remove_consumer(from, n);
    n->in[k] = to;
  }
  return true;
}

void fsl_graph_replace_uses(fsl_graph *g, fsl_value *from, fsl_value *to) {
  if (from == to) return;
  for (int c = 0; c < from->n_cons; c++) {
    fsl_node *n = from->cons[c];
    for (int k = 0; k < n->n_in; k++)
      if (n->in[k] == from) n->in[k] = to;
    FSL_ASSERT(add_consumer(g, to, n));
  }
  from->n_cons = 0;
  for (int i = 0; i < g->n_outputs; i++)
    if (g->outputs[i] == from) {
      g->outputs[i] = to;
      to->is_output = true;
      from->is_output = false;
    }
}

bool fsl_value_set_shape(fsl_value *v, int rank, const int64_t *dims) {
  if (rank < 0 || rank > FSL_MAX_RANK) return false;
  v->rank = rank;
  for (int i = 0; i < rank; i++) v->dims[i] = dims[i];
  return true;
}

bool fsl_value_has_shape(const fsl_value *v) {
  if (v->rank < 0) return false;
  for (int i = 0; i < v->rank; i++)
    if (v->dims[i] < 0) return false;
  return true;
}

int64_t fsl_value_numel(const fsl_value *v) { return fsl_numel(v->rank, v->dims); }

bool fsl_value_same_shape(const fsl_value *a, const fsl_value *b) {
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i]) return false;
  return true;
}

bool fsl_node_is_table_lookup(const fsl_node *n) {
  return n && n->op == FSL_OP_gather && n->n_in == 2 && n->n_out == 1 && n->in[0] && n->in[1] && n->out[0] &&
         n->in[0]->data && n->in[0]->rank == 1 && fsl_value_same_shape(n->in[1], n->out[0]);
}

bool fsl_value_uniform_const(const fsl_value *v, double *out) {
  if (!v || !v->data || !fsl_value_has_shape(v)) return false;
  int64_t n = fsl_value_numel(v);
  if (n < 1) return false;
  double v0 = fsl_load_f64(v->dtype, v->data, 0);
  for (int64_t i = 1; i < n; i++)
    if (fsl_load_f64(v->dtype, v->data, i) != v0) return false;
  *out = v0;
  return true;
}
int64_t fsl_value_nbytes(const fsl_value *v) { return fsl_nbytes(v->dtype, v->rank, v->dims); }

char *fsl_value_type_str(const fsl_value *v, char *buf, size_t len) {
  char sh[256];
  if (v->rank < 0) snprintf(sh, sizeof sh, "?");
  else fsl_shape_str(v->rank, v->dims, sh, sizeof sh);
  snprintf(buf, len, "%s[%s]", fsl_dtype_name(v->dtype), sh);
  return buf;
}

int64_t fsl_graph_opset(const fsl_graph *g, const char *domain) {
  bool def = !domain || !*domain || !strcmp(domain, "ai.onnx");
  for (int i = 0; i < g->n_opsets; i++) {
    const char *d = g->opsets[i].domain;
    bool ddef = !d || !*d || !strcmp(d, "ai.onnx");
    if ((def && ddef) || (!def && !ddef && !strcmp(d, domain))) return g->opsets[i].version;
  }
  return 0;
}

/* A depth-first topological sort that keeps the current order wherever it
 * is already valid: each node is emitted right after the producers it
 * still waits for, so a node appended at the end (a rewrite's target)
 * moves to just before its first consumer and nothing else moves. */
fsl_status fsl_graph_toposort(fsl_graph *g) {
  int n = g->n_nodes, maxid = g->next_node_id;
  fsl_status st = FSL_OK;
  unsigned char *state = calloc((size_t)maxid + 1, 1); /* 0 new, 1 on the stack, 2 emitted */
  int *cursor = calloc((size_t)maxid + 1, sizeof *cursor);
  fsl_node **order = malloc(sizeof *order * ((size_t)n + 1));
  fsl_node **stack = malloc(sizeof *stack * ((size_t)n + 1));
  fsl_node **byid = calloc((size_t)maxid + 1, sizeof *byid);
  if (!state || !cursor || !order || !stack || !byid) { st = fsl_errorf(FSL_ERR_NOMEM, "out of memory"); goto done; }
  for (int i = 0; i < n; i++) byid[g->nodes[i]->id] = g->nodes[i];
  int n_order = 0;
  for (int i = 0; i < n && st == FSL_OK; i++) {
    if (state[g->nodes[i]->id]) continue;
    int top = 0;
    stack[top++] = g->nodes[i];
    state[g->nodes[i]->id] = 1;
    while (top > 0) {
      fsl_node *nd = stack[top - 1];
      fsl_node *next = NULL;
      while (cursor[nd->id] < nd->n_in && !next) {
        fsl_value *v = nd->in[cursor[nd->id]++];
        fsl_node *p = v ? v->producer : NULL;
        if (!p || byid[p->id] != p || state[p->id] == 2) continue;
        if (state[p->id] == 1) {
          st = fsl_errorf(FSL_ERR_INVALID, "the graph has a cycle through node '%s' (%s)", p->name ? p->name : "?",
                          p->op_type ? p->op_type : "?");
          goto done;
        }
        next = p;
      }
      if (next) {
        state[next->id] = 1;
        stack[top++] = next;
        continue;
      }
      state[nd->id] = 2;
      order[n_order++] = nd;
      top--;
    }
  }
  if (n) memcpy(g->nodes, order, sizeof *order * (size_t)n);
done:
  free(state);
  free(cursor);
  free(order);
  free(stack);
  free(byid);
  return st;
}

fsl_status fsl_node_errorf(const fsl_node *n, fsl_status s, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (n->name && n->name[0])
    return fsl_errorf(s, "%s (node '%s'): %s", fsl_op_name(n->op), n->name, msg);
  /* a primitive: name the ONNX node it came from */
  if (n->origin_op)
    return fsl_errorf(s, "%s (primitive of %s node '%s'): %s", fsl_op_name(n->op), n->origin_op,
                      n->origin_name ? n->origin_name : "", msg);
  return fsl_errorf(s, "%s: %s", fsl_op_name(n->op), msg);
}
