/*
 * cse.c — common-subexpression elimination.
 *
 * One walk over the nodes in topological order.  Each node's inputs are
 * first canonicalized (equal small constants become one value), then the
 * node is looked up in a hash table keyed by (op, inputs, attributes).  A
 * hit means an earlier node computes the same thing: the later node's
 * outputs are replaced by the earlier node's outputs and the later node is
 * dropped.  Because the kept node always comes first, the node list stays
 * topologically ordered.
 */
#include "passes/passes.h"

/* ---- a small open-addressing hash set of pointers ---- */
typedef struct ptab {
  void **slot;
  uint64_t *hash;
  size_t cap;  /* power of two */
} ptab;

static bool ptab_init(ptab *t, size_t n) {
  size_t cap = 16;
  while (cap < 2 * n + 1) cap *= 2;
  t->cap = cap;
  t->slot = calloc(cap, sizeof *t->slot);
  t->hash = calloc(cap, sizeof *t->hash);
  return t->slot && t->hash;
}

static void ptab_free(ptab *t) {
  free(t->slot);
  free(t->hash);
}

/* Returns an equal entry (per eq) or NULL after inserting p. */
static void *ptab_find_or_add(ptab *t, uint64_t h, void *p,
                              bool (*eq)(const void *, const void *)) {
  size_t i = (size_t)h & (t->cap - 1);
  while (t->slot[i]) {
    if (t->hash[i] == h && eq(t->slot[i], p)) return t->slot[i];
    i = (i + 1) & (t->cap - 1);
  }
  t->slot[i] = p;
  t->hash[i] = h;
  return NULL;
}

/* ---- constants ---- */
static bool is_small_const(const fsl_value *v) {
  if (!v || !v->data || v->producer || v->is_input || v->is_output) return false;
  if (v->rank < 0) return false;
  int64_t nb = fsl_value_nbytes(v);
  return nb >= 0 && nb <= FSL_CSE_MAX_CONST_BYTES;
}

static uint64_t const_hash(const fsl_value *v) {
  uint64_t h = FSL_HASH_INIT;
  int dt = (int)v->dtype;
  h = fsl_hash(h, &dt, sizeof dt);
  h = fsl_hash(h, &v->rank, sizeof v->rank);
  h = fsl_hash(h, v->dims, sizeof(int64_t) * (size_t)v->rank);
  return fsl_hash(h, v->data, (size_t)fsl_value_nbytes(v));
}

static bool const_eq(const void *pa, const void *pb) {
  const fsl_value *a = pa, *b = pb;
  if (a->dtype != b->dtype || a->rank != b->rank) return false;
  if (memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->rank)) return false;
  return !memcmp(a->data, b->data, (size_t)fsl_value_nbytes(a));
}

/* ---- attributes ---- */
static uint64_t hash_str(uint64_t h, const char *s) {
  return s ? fsl_hash(h, s, strlen(s) + 1) : fsl_hash(h, "", 1);
}

static uint64_t attr_hash(const fsl_attr *a) {
  uint64_t h = hash_str(FSL_HASH_INIT, a->name);
  int ty = (int)a->type;
  h = fsl_hash(h, &ty, sizeof ty);
  switch (a->type) {
  case FSL_ATTR_INT: return fsl_hash(h, &a->i, sizeof a->i);
  case FSL_ATTR_FLOAT: return fsl_hash(h, &a->f, sizeof a->f);
  case FSL_ATTR_STRING: return hash_str(h, a->s);
  case FSL_ATTR_INTS:
    return a->n > 0 ? fsl_hash(h, a->ints, sizeof(int64_t) * (size_t)a->n) : h;
  case FSL_ATTR_FLOATS:
    return a->n > 0 ? fsl_hash(h, a->floats, sizeof(double) * (size_t)a->n) : h;
  case FSL_ATTR_STRINGS:
    for (int i = 0; i < a->n; i++) h = hash_str(h, a->strings[i]);
    return h;
  case FSL_ATTR_TENSOR:
  case FSL_ATTR_GRAPH:
    return h;
  }
  return h;
}

static bool str_eq(const char *a, const char *b) {
  if (!a || !b) return a == b;
  return !strcmp(a, b);
}

/* ---- nodes ---- */
/* A node may be merged away when it has outputs, no subgraph attribute and
 * none of its outputs is a graph output (that would rename the output). */
static bool node_mergeable(const fsl_node *n) {
  if (n->n_out <= 0) return false;
  for (int i = 0; i < n->n_attrs; i++)
    if (n->attrs[i].type == FSL_ATTR_GRAPH) return false;
  return true;
}

static bool node_has_graph_output(const fsl_node *n) {
  for (int i = 0; i < n->n_out; i++)
    if (n->out[i] && n->out[i]->is_output) return true;
  return false;
}

static uint64_t node_hash(const fsl_node *n) {
  uint64_t h = FSL_HASH_INIT;
  int hdr[3] = {(int)n->op, n->n_in, n->n_out};
  h = fsl_hash(h, hdr, sizeof hdr);
  h = hash_str(h, n->op_type);
  h = hash_str(h, n->domain);
  for (int i = 0; i < n->n_in; i++) {
    int id = n->in[i] ? n->in[i]->id : -1;
    h = fsl_hash(h, &id, sizeof id);
  }
  uint64_t ah = 0;  /* attribute order does not matter */
  for (int i = 0; i < n->n_attrs; i++) ah += attr_hash(&n->attrs[i]);
  return fsl_hash(h, &ah, sizeof ah);
}

static bool node_eq(const void *pa, const void *pb) {
  const fsl_node *a = pa, *b = pb;
  if (a->op != b->op || a->n_in != b->n_in || a->n_out != b->n_out) return false;
  if (!str_eq(a->op_type, b->op_type) || !str_eq(a->domain, b->domain)) return false;
  for (int i = 0; i < a->n_in; i++)
    if (a->in[i] != b->in[i]) return false;
  for (int i = 0; i < a->n_out; i++) {
    const fsl_value *x = a->out[i], *y = b->out[i];
    if (!x || !y) {
      if (x != y) return false;
      continue;
    }
    if (x->dtype != y->dtype || x->rank != y->rank) return false;
  }
  return fsl_attrs_equal(a, b);
}

/* Replaces each small-constant input of n by the first equal constant seen. */
static void canon_const_inputs(fsl_graph *g, ptab *consts, fsl_node *n) {
  for (int k = 0; k < n->n_in; k++) {
    fsl_value *v = n->in[k];
    if (!is_small_const(v)) continue;
    fsl_value *first = ptab_find_or_add(consts, const_hash(v), v, const_eq);
    if (first && first != v) fsl_graph_replace_uses(g, v, first);
  }
}

fsl_status fsl_pass_cse(fsl_graph *g) {
  fsl_status st = FSL_OK;
  ptab nodes = {0}, consts = {0};
  bool *keep = malloc(sizeof *keep * ((size_t)g->next_node_id + 1));
  bool ok = keep && ptab_init(&nodes, (size_t)g->n_nodes) &&
            ptab_init(&consts, (size_t)g->n_values);
  if (!ok) {
    st = fsl_errorf(FSL_ERR_NOMEM, "CSE: out of memory");
    goto done;
  }
  for (int i = 0; i <= g->next_node_id; i++) keep[i] = true;
  int removed = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    fsl_node *n = g->nodes[i];
    canon_const_inputs(g, &consts, n);
    if (!node_mergeable(n)) continue;
    fsl_node *first = ptab_find_or_add(&nodes, node_hash(n), n, node_eq);
    if (!first || first == n || node_has_graph_output(n)) continue;
    for (int k = 0; k < n->n_out; k++)
      if (n->out[k]) fsl_graph_replace_uses(g, n->out[k], first->out[k]);
    keep[n->id] = false;
    removed++;
  }
  if (removed) fsl_graph_remove_nodes(g, keep);
done:
  ptab_free(&nodes);
  ptab_free(&consts);
  free(keep);
  return st;
}
