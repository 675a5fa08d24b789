/*
 * apply.c — attribute functions, conditions, and building a rule's target.
 *
 * Attribute functions compute integers and integer lists from what the
 * source bound (docs/rewrite.md lists them); conditions are predicates
 * over the same.  The target is built with the fission builder, so a
 * target subexpression whose operands are all constants folds into one
 * constant (scaled weights, concatenated weights) instead of running at
 * every inference.
 */
#include "rewrite/rewrite.h"
#include "fission/builder.h"

static fsl_value *value_of(const fsl_rw_match *m, const fsl_rw_expr *e) {
  if (e->kind != FSL_RW_VAR) return NULL;
  const fsl_rw_bind *b = fsl_rw_lookup(m, e->name);
  return b && !b->is_attr ? b->v : NULL;
}

static bool scalar(int64_t v, fsl_rw_ints *out) {
  memset(out, 0, sizeof *out);
  out->n = 1;
  out->v[0] = v;
  return true;
}

static bool arg_int(const fsl_rw_match *m, const fsl_rw_expr *e, int64_t *v) {
  fsl_rw_ints t;
  if (!fsl_rw_eval_ints(m, e, &t) || t.list || t.n != 1) return false;
  *v = t.v[0];
  return true;
}

/* axis (may be negative) into [0, rank) */
static bool norm_axis(int64_t *ax, int64_t rank) {
  if (*ax < 0) *ax += rank;
  return *ax >= 0 && *ax < rank;
}

static bool call_ints(const fsl_rw_match *m, const fsl_rw_expr *e, fsl_rw_ints *out) {
  const char *f = e->name;
  fsl_rw_ints a, b;
  int64_t x, y, z;
  const fsl_value *v = e->n_args ? value_of(m, e->args[0]) : NULL;
  memset(out, 0, sizeof *out);
  if (!strcmp(f, "compose") || !strcmp(f, "inverse")) {
    /* permute(permute(x, p), q) = permute(x, compose(p, q)), compose[i] = p[q[i]] */
    bool inv = f[0] == 'i';
    if (e->n_args != (inv ? 1 : 2) || !fsl_rw_eval_ints(m, e->args[0], &a) || !a.list) return false;
    if (!inv && (!fsl_rw_eval_ints(m, e->args[1], &b) || !b.list || b.n != a.n)) return false;
    out->list = true;
    out->n = a.n;
    for (int i = 0; i < a.n; i++) {
      int64_t k = inv ? a.v[i] : b.v[i];
      if (k < 0 || k >= a.n) return false;
      if (inv) out->v[k] = i;
      else out->v[i] = a.v[k];
    }
    return true;
  }
  if (!strcmp(f, "dims")) {
    if (e->n_args != 1 || !v || v->rank < 0 || v->rank > FSL_RW_MAX_INTS) return false;
    out->list = true;
    out->n = v->rank;
    for (int i = 0; i < v->rank; i++) out->v[i] = v->dims[i];
    return true;
  }
  if (!strcmp(f, "rank")) return e->n_args == 1 && v && scalar(v->rank, out);
  if (!strcmp(f, "dim")) {
    if (e->n_args != 2 || !v || !arg_int(m, e->args[1], &x) || !norm_axis(&x, v->rank)) return false;
    return scalar(v->dims[x], out);
  }
  if (!strcmp(f, "axis-of")) {
    /* the one axis of v whose size is not 1 */
    if (e->n_args != 1 || !v) return false;
    int found = -1;
    for (int i = 0; i < v->rank; i++)
      if (v->dims[i] != 1) {
        if (found >= 0) return false;
        found = i;
      }
    return found >= 0 && scalar(found, out);
  }
  if (!strcmp(f, "vector-at")) {
    /* (vector-at RANK AXIS N FILL): RANK entries of FILL, N at AXIS */
    int64_t fill;
    if (e->n_args != 4 || !arg_int(m, e->args[0], &x) || !arg_int(m, e->args[1], &y) ||
        !arg_int(m, e->args[2], &z) || !arg_int(m, e->args[3], &fill) || x < 0 || x > FSL_RW_MAX_INTS ||
        !norm_axis(&y, x))
      return false;
    out->list = true;
    out->n = (int)x;
    for (int i = 0; i < out->n; i++) out->v[i] = i == y ? z : fill;
    return true;
  }
  if (!strcmp(f, "set-dim")) {
    /* (set-dim LIST AXIS N) */
    if (e->n_args != 3 || !fsl_rw_eval_ints(m, e->args[0], out) || !out->list || !arg_int(m, e->args[1], &x) ||
        !arg_int(m, e->args[2], &y) || !norm_axis(&x, out->n))
      return false;
    out->v[x] = y;
    return true;
  }
  if (!strcmp(f, "attr")) {
    /* (attr LABEL NAME): the matched node's attribute (or its default) */
    const fsl_rw_bind *bd = e->n_args == 2 && e->args[0]->kind == FSL_RW_VAR ? fsl_rw_lookup(m, e->args[0]->name) : NULL;
    if (!bd || !bd->n || e->args[1]->kind != FSL_RW_VAR) return false;
    return fsl_rw_node_ints(bd->n, e->args[1]->name, out);
  }
  if (!strcmp(f, "at")) {
    /* (at LIST I): entry I (may be negative) of a list */
    if (e->n_args != 2 || !fsl_rw_eval_ints(m, e->args[0], &a) || !a.list || !arg_int(m, e->args[1], &x) ||
        !norm_axis(&x, a.n))
      return false;
    return scalar(a.v[x], out);
  }
  if (!strcmp(f, "+") || !strcmp(f, "-") || !strcmp(f, "*")) {
    /* integers, or lists of one length entry by entry */
    if (e->n_args < 1 || !fsl_rw_eval_ints(m, e->args[0], out)) return false;
    for (int i = 1; i < e->n_args; i++) {
      if (!fsl_rw_eval_ints(m, e->args[i], &b) || b.list != out->list || b.n != out->n) return false;
      for (int k = 0; k < out->n; k++) {
        bool ovf = f[0] == '+' ? __builtin_add_overflow(out->v[k], b.v[k], &out->v[k])
                   : f[0] == '-' ? __builtin_sub_overflow(out->v[k], b.v[k], &out->v[k])
                                 : __builtin_mul_overflow(out->v[k], b.v[k], &out->v[k]);
        if (ovf) return false;
      }
    }
    return true;
  }
  return false;
}

bool fsl_rw_eval_ints(const fsl_rw_match *m, const fsl_rw_expr *e, fsl_rw_ints *out) {
  memset(out, 0, sizeof *out);
  switch (e->kind) {
  case FSL_RW_NUM: return e->is_int && scalar((int64_t)e->num, out);
  case FSL_RW_LIST:
    if (e->n_args > FSL_RW_MAX_INTS) return false;
    out->list = true;
    out->n = e->n_args;
    for (int i = 0; i < e->n_args; i++)
      if (!arg_int(m, e->args[i], &out->v[i])) return false;
    return true;
  case FSL_RW_VAR: {
    const fsl_rw_bind *b = fsl_rw_lookup(m, e->name);
    if (!b || !b->is_attr) return false;
    *out = b->ints;
    return true;
  }
  case FSL_RW_CALL: return call_ints(m, e, out);
  default: return false;
  }
}

/* every element of constant v equals x */
static bool all_equal(const fsl_value *v, double x) {
  if (!v || !v->data) return false;
  int64_t n = fsl_value_numel(v);
  for (int64_t i = 0; i < n; i++)
    if (fsl_load_f64(v->dtype, v->data, i) != x) return false;
  return n > 0;
}

bool fsl_rw_varies_only(const fsl_value *v, int64_t ax) {
  if (!v || !v->data || ax < 0 || ax >= v->rank) return false;
  int64_t n = fsl_value_numel(v), inner = 1;
  for (int i = (int)ax + 1; i < v->rank; i++) inner *= v->dims[i];
  int64_t len = v->dims[ax];
  for (int64_t i = 0; i < n; i++) {
    int64_t c = (i / inner) % len; /* coordinate on ax; element c * inner has it and 0 elsewhere */
    if (fsl_load_f64(v->dtype, v->data, i) != fsl_load_f64(v->dtype, v->data, c * inner)) return false;
  }
  return n > 0;
}

/* (windows-hit PAD WINDOW): every window of WINDOW, which reads PAD's
 * output, holds at least one element of PAD's input, and PAD pads no axis
 * the windows do not slide along (ONNX MaxPool with pads below the
 * kernel's extent).  A pad that is not constant (edge, reflect) copies the
 * input, which always qualifies.  Where it holds, a reduction over the
 * windows that is monotone in each element (reduce_max) commutes with an
 * elementwise max against one number: the pad's value meets the same
 * number of real elements on both sides. */
static bool windows_hit(const fsl_node *pad, const fsl_node *win) {
  if (!pad || !win || pad->op != FSL_OP_pad || win->op != FSL_OP_window || win->in[0] != pad->out[0]) return false;
  if (fsl_attr_int(pad, "mode", 0) != 0) return true;
  const fsl_value *x = pad->in[0], *p = pad->out[0], *w = win->out[0];
  const int64_t *pads = NULL, *ks = NULL, *st = NULL, *dl = NULL;
  int r = x->rank, np = fsl_attr_ints(pad, "pads", &pads), k = fsl_attr_ints(win, "kernel_shape", &ks);
  int ns = fsl_attr_ints(win, "strides", &st), nd = fsl_attr_ints(win, "dilations", &dl);
  if (np != 2 * r || k < 1 || k > r || p->rank != r || w->rank != r + k) return false;
  for (int a = 0; a < r; a++) {
    int j = a - (r - k); /* the window axis of a, or < 0 */
    if (j < 0) {
      if (pads[a] > 0 || pads[a + r] > 0) return false;
      continue;
    }
    int64_t s = ns == k ? st[j] : 1, d = nd == k ? dl[j] : 1, lo = pads[a] > 0 ? pads[a] : 0;
    int64_t hi = pads[a] + x->dims[a] - 1; /* the input's last element on the padded axis */
    if (s < 1 || d < 1 || ks[j] < 1) return false;
    if (hi >= p->dims[a]) hi = p->dims[a] - 1;
    for (int64_t o = 0; o < w->dims[a]; o++) {
      bool hit = false;
      for (int64_t t = 0; t < ks[j] && !hit; t++) hit = o * s + t * d >= lo && o * s + t * d <= hi;
      if (!hit) return false;
    }
  }
  return true;
}

/* The node a label names (LABEL=(op ...)), or NULL. */
static const fsl_node *label_node(const fsl_rw_match *m, const fsl_rw_expr *e) {
  const fsl_rw_bind *b = e->kind == FSL_RW_VAR ? fsl_rw_lookup(m, e->name) : NULL;
  return b ? b->n : NULL;
}

bool fsl_rw_eval_cond(const fsl_rw_match *m, const fsl_rw_expr *e) {
  if (e->kind != FSL_RW_CALL) return false;
  const char *f = e->name;
  fsl_rw_ints a, b;
  int64_t x;
  const fsl_value *v = e->n_args ? value_of(m, e->args[0]) : NULL;
  if (!strcmp(f, "const") || !strcmp(f, "runtime")) {
    /* (const v...): constants; (runtime v...): computed when the model runs */
    bool want = f[0] == 'c';
    for (int i = 0; i < e->n_args; i++) {
      const fsl_value *c = value_of(m, e->args[i]);
      if (!c || (c->data != NULL) != want) return false;
    }
    return e->n_args > 0;
  }
  if (!strcmp(f, "float")) return v && fsl_dtype_is_float(v->dtype);
  if (!strcmp(f, "identity")) {
    if (e->n_args != 1 || !fsl_rw_eval_ints(m, e->args[0], &a) || !a.list) return false;
    for (int i = 0; i < a.n; i++)
      if (a.v[i] != i) return false;
    return true;
  }
  if (!strcmp(f, "eq") || !strcmp(f, "ne")) {
    if (e->n_args != 2 || !fsl_rw_eval_ints(m, e->args[0], &a) || !fsl_rw_eval_ints(m, e->args[1], &b)) return false;
    bool eq = a.n == b.n && !memcmp(a.v, b.v, sizeof(int64_t) * (size_t)a.n);
    return f[0] == 'e' ? eq : !eq;
  }
  if (!strcmp(f, "le")) {
    /* (le A B): integers A <= B */
    int64_t y;
    return e->n_args == 2 && arg_int(m, e->args[0], &x) && arg_int(m, e->args[1], &y) && x <= y;
  }
  if (!strcmp(f, "ints-all")) {
    if (e->n_args != 2 || !fsl_rw_eval_ints(m, e->args[0], &a) || !arg_int(m, e->args[1], &x)) return false;
    for (int i = 0; i < a.n; i++)
      if (a.v[i] != x) return false;
    return true;
  }
  if (!strcmp(f, "same-attrs")) {
    if (e->n_args != 2) return false;
    const fsl_node *p = label_node(m, e->args[0]), *q = label_node(m, e->args[1]);
    return p && q && fsl_attrs_equal(p, q);
  }
  if (!strcmp(f, "all")) {
    /* (all CONST NUMBER): every element of the constant equals the number */
    return e->n_args == 2 && e->args[1]->kind == FSL_RW_NUM && all_equal(v, e->args[1]->num);
  }
  if (!strcmp(f, "square")) {
    /* (square v...): square matrices, all of one size */
    for (int i = 0; i < e->n_args; i++) {
      const fsl_value *q = value_of(m, e->args[i]);
      if (!q || q->rank != 2 || q->dims[0] != q->dims[1] || q->dims[0] != v->dims[0]) return false;
    }
    return e->n_args > 0;
  }
  if (!strcmp(f, "varies-only")) {
    /* (varies-only CONST AXIS) */
    if (e->n_args != 2 || !v || !arg_int(m, e->args[1], &x) || !norm_axis(&x, v->rank)) return false;
    return fsl_rw_varies_only(v, x);
  }
  if (!strcmp(f, "windows-hit")) {
    /* (windows-hit PAD WINDOW): labels */
    return e->n_args == 2 && windows_hit(label_node(m, e->args[0]), label_node(m, e->args[1]));
  }
  if (!strcmp(f, "channel")) {
    /* (channel V AXIS): every dim of V but AXIS is 1 */
    if (e->n_args != 2 || !v || !arg_int(m, e->args[1], &x) || !norm_axis(&x, v->rank)) return false;
    for (int i = 0; i < v->rank; i++)
      if (i != x && v->dims[i] != 1) return false;
    return true;
  }
  return false;
}

/* ---- building the target ---- */
typedef struct built {
  const char *label;
  fsl_value *v;
} built;

typedef struct tctx {
  const fsl_rw_match *m;
  fsl_builder b;
  built made[FSL_RW_MAX_NODES];
  int n_made;
} tctx;

static fsl_value *build(tctx *c, const fsl_rw_expr *e) {
  if (c->b.st) return NULL;
  if (e->kind == FSL_RW_VAR) {
    for (int i = 0; i < c->n_made; i++)
      if (!strcmp(c->made[i].label, e->name)) return c->made[i].v;
    fsl_value *v = value_of(c->m, e);
    if (!v) return fsl_b_fail(&c->b, FSL_ERR_INVALID, "rule %s: %s is not a value", c->m->rule->name, e->name);
    return v;
  }
  if (e->kind != FSL_RW_NODE)
    return fsl_b_fail(&c->b, FSL_ERR_INVALID, "rule %s: a target operand must be a value or a primitive", c->m->rule->name);
  fsl_value *in[FSL_RW_MAX_NODES];
  if (e->n_args > (int)FSL_ARRAY_LEN(in))
    return fsl_b_fail(&c->b, FSL_ERR_INVALID, "rule %s: too many operands", c->m->rule->name);
  for (int i = 0; i < e->n_args; i++)
    if (!(in[i] = build(c, e->args[i]))) return NULL;
  fsl_attr attrs[16];
  int n_attrs = 0;
  if (e->like) {
    const fsl_rw_bind *bd = fsl_rw_lookup(c->m, e->like);
    if (!bd || !bd->n || bd->n->n_attrs > (int)FSL_ARRAY_LEN(attrs))
      return fsl_b_fail(&c->b, FSL_ERR_INVALID, "rule %s: :like %s names no matched node", c->m->rule->name, e->like);
    n_attrs = bd->n->n_attrs;
    if (n_attrs) memcpy(attrs, bd->n->attrs, sizeof *attrs * (size_t)n_attrs);
  }
  for (int i = 0; i < e->n_attrs; i++) {
    fsl_rw_ints val;
    if (!fsl_rw_eval_ints(c->m, e->attrs[i].val, &val))
      return fsl_b_fail(&c->b, FSL_ERR_INVALID, "rule %s: attribute %s of (%s) does not evaluate", c->m->rule->name,
                        e->attrs[i].name, e->name);
    const char *name = fsl_arena_strdup(&c->b.g->arena, e->attrs[i].name);
    if (!name) return fsl_b_fail(&c->b, FSL_ERR_NOMEM, "out of memory");
    fsl_attr a = val.list ? fsl_attr_make_ints(c->b.g, name, val.v, val.n) : fsl_attr_make_int(name, val.v[0]);
    int k = 0;
    while (k < n_attrs && strcmp(attrs[k].name, name)) k++;
    if (k == n_attrs) {
      if (n_attrs == (int)FSL_ARRAY_LEN(attrs)) return fsl_b_fail(&c->b, FSL_ERR_INVALID, "too many attributes");
      n_attrs++;
    }
    attrs[k] = a;
  }
  fsl_value *v = fsl_b_prim(&c->b, e->op, in, e->n_args, attrs, n_attrs);
  if (v && e->label && c->n_made < FSL_RW_MAX_NODES) c->made[c->n_made++] = (built){e->label, v};
  return v;
}

fsl_status fsl_rw_apply(fsl_graph *g, const fsl_rw_match *m) {
  const fsl_rule *r = m->rule;
  const fsl_node *origin = m->roots[0]->producer;
  tctx c = {.m = m};
  c.b.g = g;
  c.b.fold = true;
  /* constant subexpressions of the target may grow up to a multiple of
   * the largest constant the source matched (weights scaled through a
   * broadcast, padded to a larger kernel) */
  int64_t big = 0;
  for (int i = 0; i < m->n_bind; i++)
    if (m->bind[i].v && m->bind[i].v->data && fsl_value_nbytes(m->bind[i].v) > big) big = fsl_value_nbytes(m->bind[i].v);
  c.b.fold_limit = big > INT64_MAX / 16 ? big : 16 * big; /* padded (enlarged) weights included */
  c.b.origin = origin->origin;
  c.b.origin_name = origin->origin_name;
  c.b.origin_op = origin->origin_op;
  int n_before = g->n_values;
  fsl_value *to[FSL_RW_MAX_ROOTS];
  for (int i = 0; i < r->n_to; i++) {
    to[i] = build(&c, r->to[i]);
    /* a target that does not type-check at these shapes: the rule does not
     * apply here (its conditions are too weak; the checker proves it where
     * its test instance says) */
    if (!to[i] && c.b.st == FSL_ERR_SHAPE) {
      fsl_error_clear();
      return FSL_ERR_UNSUPPORTED;
    }
    if (!to[i]) return c.b.st ? c.b.st : fsl_errorf(FSL_ERR_INVALID, "rule %s: empty target", r->name);
    const fsl_value *old = m->roots[i];
    if (to[i]->dtype != old->dtype || to[i]->rank != old->rank ||
        memcmp(to[i]->dims, old->dims, sizeof(int64_t) * (size_t)old->rank)) {
      char s1[64], s2[64];
      return fsl_errorf(FSL_ERR_INVALID, "rule %s (%s:%d): target root %d is %s but the source's is %s", r->name, r->file,
                        r->line, i, fsl_value_type_str(to[i], s1, sizeof s1), fsl_value_type_str(old, s2, sizeof s2));
    }
    /* a graph output keeps its name: it must move to a value made here */
    if (old->is_output && (to[i]->id < n_before || !to[i]->producer)) return FSL_ERR_UNSUPPORTED;
  }
  for (int i = 0; i < r->n_to; i++)
    if (to[i] != m->roots[i]) fsl_rw_replace_root(g, m->roots[i], to[i]);
  return FSL_OK;
}

void fsl_rw_replace_root(fsl_graph *g, fsl_value *old, fsl_value *to) {
  bool was_output = old->is_output; /* fsl_graph_replace_uses moves the flag */
  fsl_graph_replace_uses(g, old, to);
  if (!was_output) return;
  const char *name = old->name;
  char tmp[256];
  snprintf(tmp, sizeof tmp, "%s~replaced", name ? name : "");
  old->name = fsl_arena_strdup(&g->arena, tmp);
  old->is_output = false;
  to->name = name;
  to->is_output = true;
}
