/*
 * match.c — finding a rule's source pattern in a primitive graph.
 *
 * A depth-first search over goals (pattern, value) with backtracking:
 * commutative operands are tried in both orders, later source roots among
 * the consumers of values already bound, and the rule's conditions are
 * checked once everything is bound; a failure anywhere undoes the
 * bindings made since the last choice and tries the next one.
 */
#include "rewrite/rewrite.h"

#define MAX_GOALS 64

typedef struct goal {
  const fsl_rw_expr *e;
  fsl_value *v;
} goal;

bool fsl_rw_commutative(fsl_op op) {
  switch (op) {
  case FSL_OP_add: case FSL_OP_mul: case FSL_OP_max: case FSL_OP_min: case FSL_OP_and: case FSL_OP_or:
  case FSL_OP_xor: case FSL_OP_eq:
    return true;
  default: return false;
  }
}

const fsl_rw_bind *fsl_rw_lookup(const fsl_rw_match *m, const char *name) {
  for (int i = m->n_bind - 1; i >= 0; i--)
    if (!strcmp(m->bind[i].name, name)) return &m->bind[i];
  return NULL;
}

static bool in_match(const fsl_rw_match *m, const fsl_node *n) {
  for (int i = 0; i < m->n_nodes; i++)
    if (m->nodes[i] == n) return true;
  return false;
}

bool fsl_rw_node_ints(const fsl_node *n, const char *name, fsl_rw_ints *out) {
  memset(out, 0, sizeof *out);
  const fsl_attr *a = fsl_attr_find(n, name);
  if (a && a->type == FSL_ATTR_INT) {
    out->n = 1;
    out->v[0] = a->i;
    return true;
  }
  if (a && a->type == FSL_ATTR_INTS) {
    if (a->n > FSL_RW_MAX_INTS) return false;
    out->list = true;
    out->n = a->n;
    if (a->n) memcpy(out->v, a->ints, sizeof(int64_t) * (size_t)a->n);
    return true;
  }
  if (a || n->op != FSL_OP_conv || n->n_in < 1 || !n->in[0] || n->in[0]->rank < 3) return false;
  /* conv's optional attributes (src/ir/infer.c) */
  int k = n->in[0]->rank - 2;
  if (!strcmp(name, "group")) {
    out->n = 1;
    out->v[0] = 1;
    return true;
  }
  bool pads = !strcmp(name, "pads");
  if (!pads && strcmp(name, "strides") && strcmp(name, "dilations") && strcmp(name, "lhs_dilation")) return false;
  out->list = true;
  out->n = pads ? 2 * k : k;
  for (int i = 0; i < out->n; i++) out->v[i] = pads ? 0 : 1;
  return true;
}

bool fsl_rw_ints_equal(const fsl_rw_ints *a, const fsl_rw_ints *b) {
  return a->list == b->list && a->n == b->n && !memcmp(a->v, b->v, sizeof(int64_t) * (size_t)a->n);
}

static bool bind(fsl_rw_match *m, const fsl_rw_bind *b) {
  if (m->n_bind == FSL_RW_MAX_BIND) return false;
  m->bind[m->n_bind++] = *b;
  return true;
}

static bool solve(fsl_rw_match *m, goal *gs, int n, int root);

/* The next source root, among the consumers of the values bound so far. */
static bool next_root(fsl_rw_match *m, int root) {
  const fsl_rule *r = m->rule;
  if (root == r->n_from) {
    for (int i = 0; i < r->n_when; i++)
      if (!fsl_rw_eval_cond(m, r->when[i])) return false;
    return true;
  }
  const fsl_rw_expr *e = r->from[root];
  int nb = m->n_bind;
  for (int i = 0; i < nb; i++) {
    fsl_value *v = m->bind[i].v;
    if (!v) continue;
    for (int c = 0; c < v->n_cons; c++) {
      fsl_node *cand = v->cons[c];
      if (e->kind == FSL_RW_NODE && cand->op != e->op) continue;
      if (in_match(m, cand) || cand->n_out != 1) continue;
      int save_b = m->n_bind, save_n = m->n_nodes;
      goal g = {e, cand->out[0]};
      m->roots[root] = cand->out[0];
      if (solve(m, &g, 1, root + 1)) return true;
      m->n_bind = save_b;
      m->n_nodes = save_n;
    }
  }
  return false;
}

static bool match_attrs(fsl_rw_match *m, const fsl_rw_expr *e, const fsl_node *nd) {
  for (int i = 0; i < e->n_attrs; i++) {
    fsl_rw_ints have, want;
    if (!fsl_rw_node_ints(nd, e->attrs[i].name, &have)) return false;
    const fsl_rw_expr *val = e->attrs[i].val;
    if (val->kind == FSL_RW_VAR) {
      const fsl_rw_bind *b = fsl_rw_lookup(m, val->name);
      if (b) {
        if (!b->is_attr || !fsl_rw_ints_equal(&b->ints, &have)) return false;
        continue;
      }
      fsl_rw_bind nb = {.name = val->name, .is_attr = true, .ints = have};
      if (!bind(m, &nb)) return false;
      continue;
    }
    if (!fsl_rw_eval_ints(m, val, &want)) return false;
    /* a literal 1 matches the list [1] too only when the node holds one integer */
    if (!fsl_rw_ints_equal(&want, &have)) return false;
  }
  return true;
}

static bool solve(fsl_rw_match *m, goal *gs, int n, int root) {
  if (n == 0) return next_root(m, root);
  goal g = gs[n - 1];
  goal rest[MAX_GOALS];
  memcpy(rest, gs, sizeof *gs * (size_t)(n - 1));
  n--;
  int save_b = m->n_bind, save_n = m->n_nodes;
  if (g.e->kind == FSL_RW_VAR) {
    const fsl_rw_bind *b = fsl_rw_lookup(m, g.e->name);
    if (b) return !b->is_attr && b->v == g.v && solve(m, rest, n, root);
    fsl_rw_bind nb = {.name = g.e->name, .v = g.v};
    if (bind(m, &nb) && solve(m, rest, n, root)) return true;
    m->n_bind = save_b;
    return false;
  }
  if (g.e->kind != FSL_RW_NODE) return false;
  fsl_node *nd = g.v->producer;
  if (!nd || nd->op != g.e->op || nd->n_out != 1 || nd->n_in != g.e->n_args || in_match(m, nd)) return false;
  if (m->n_nodes == FSL_RW_MAX_NODES || n + g.e->n_args > MAX_GOALS) return false;
  for (int i = 0; i < nd->n_in; i++)
    if (!nd->in[i]) return false;
  m->nodes[m->n_nodes++] = nd;
  if (g.e->label) {
    fsl_rw_bind nb = {.name = g.e->label, .v = g.v, .n = nd};
    if (!bind(m, &nb)) goto fail;
  }
  if (!match_attrs(m, g.e, nd)) goto fail;
  int orders = fsl_rw_commutative(nd->op) && nd->n_in == 2 ? 2 : 1;
  int save_b2 = m->n_bind, save_n2 = m->n_nodes;
  for (int o = 0; o < orders; o++) {
    int k = n;
    for (int i = 0; i < nd->n_in; i++) {
      int src = o ? nd->n_in - 1 - i : i;
      rest[k++] = (goal){g.e->args[i], nd->in[src]};
    }
    if (solve(m, rest, k, root)) return true;
    m->n_bind = save_b2;
    m->n_nodes = save_n2;
  }
fail:
  m->n_bind = save_b;
  m->n_nodes = save_n;
  return false;
}

bool fsl_rw_match_at(const fsl_rule *r, fsl_node *n, fsl_rw_match *m) {
  memset(m, 0, sizeof *m);
  m->rule = r;
  if (r->from[0]->kind != FSL_RW_NODE || n->op != r->from[0]->op || n->n_out != 1) return false;
  goal g = {r->from[0], n->out[0]};
  m->roots[0] = n->out[0];
  return solve(m, &g, 1, 1);
}

bool fsl_rw_match_is_closed(const fsl_rw_match *m) {
  for (int i = 0; i < m->n_nodes; i++) {
    const fsl_value *v = m->nodes[i]->out[0];
    bool is_root = false;
    for (int r = 0; r < m->rule->n_from; r++) is_root = is_root || m->roots[r] == v;
    /* a shared view (movement) costs nothing to keep beside the rewrite */
    if (is_root || fsl_op_get(m->nodes[i]->op)->kind == FSL_KIND_MOVEMENT) continue;
    if (v->is_output) return false;
    for (int c = 0; c < v->n_cons; c++)
      if (!in_match(m, v->cons[c])) return false;
  }
  return true;
}
