/*
 * linsplit.c — the prologue / linear / epilogue split of a LINEAR kernel
 * (linsplit.h), shared by the CPU and OpenCL backends and the CPU kernel
 * profiler.
 */
#include "codegen/linsplit.h"

#include "codegen/cg.h"

bool fsl_vl_has(const fsl_vlist *l, const void *x) {
  for (int i = 0; i < l->n; i++)
    if (l->p[i] == x) return true;
  return false;
}

bool fsl_vl_add(fsl_vlist *l, void *x) {
  if (fsl_vl_has(l, x)) return true;
  if (!fsl_grow((void **)&l->p, &l->cap, l->n + 1, sizeof *l->p)) return false;
  l->p[l->n++] = x;
  return true;
}

bool fsl_vl_add_inputs(fsl_vlist *ins, fsl_node *const *nodes, int n) {
  for (int i = 0; i < n; i++)
    for (int k = 0; k < nodes[i]->n_in; k++) {
      fsl_value *v = nodes[i]->in[k];
      if (!v) continue;
      bool inside = false;
      for (int j = 0; j < n && !inside; j++)
        for (int o = 0; o < nodes[j]->n_out; o++) inside = inside || nodes[j]->out[o] == v;
      if (!inside && !fsl_vl_add(ins, v)) return false;
    }
  return true;
}

static fsl_status oom(void) { return fsl_errorf(FSL_ERR_NOMEM, "out of memory (linear kernel split)"); }

/* Follows in-kernel reshapes back from a linear operand. */
static fsl_value *through_reshapes(fsl_value *v, const fsl_vlist *knodes) {
  while (v->producer && v->producer->op == FSL_OP_reshape && fsl_vl_has(knodes, v->producer)) v = v->producer->in[0];
  return v;
}

fsl_status fsl_linear_split_make(const fsl_kernel *k, fsl_linear_split *s) {
  memset(s, 0, sizeof *s);
  int li = fsl_linear_node_index(k);
  if (li < 0) return fsl_errorf(FSL_ERR_UNSUPPORTED, "a kernel with no or several linear ops (expected 1)");
  s->lin = k->nodes[li];
  fsl_node *lin = s->lin;
  for (int i = 0; i < k->n_nodes; i++)
    if (!fsl_vl_add(&s->knodes, k->nodes[i])) return oom();
  /* ancestors of lin inside the kernel (walking back in topological order) */
  for (int i = li - 1; i >= 0; i--) {
    fsl_node *n = k->nodes[i];
    bool feeds = false;
    for (int o = 0; o < n->n_out && !feeds; o++)
      for (int c = 0; c < n->out[o]->n_cons && !feeds; c++) {
        fsl_node *r = n->out[o]->cons[c];
        feeds = r == lin || fsl_vl_has(&s->anc, r);
      }
    if (feeds && !fsl_vl_add(&s->anc, n)) return oom();
  }
  /* reverse anc into topological order */
  for (int i = 0, j = s->anc.n - 1; i < j; i++, j--) {
    void *t = s->anc.p[i];
    s->anc.p[i] = s->anc.p[j];
    s->anc.p[j] = t;
  }
  s->lin_in[0] = lin->in[0];
  s->lin_in[1] = lin->in[1];
  for (int i = 0; i < s->anc.n; i++) s->gen_prologue = s->gen_prologue || ((fsl_node *)s->anc.p[i])->op != FSL_OP_reshape;
  if (s->anc.n > 0 && !s->gen_prologue) {
    for (int i = 0; i < 2; i++) s->lin_in[i] = through_reshapes(lin->in[i], &s->knodes);
  } else {
    /* prologue outputs: every anc value read outside anc (by lin or later nodes), and graph outputs */
    for (int i = 0; i < s->anc.n; i++) {
      fsl_node *n = s->anc.p[i];
      for (int o = 0; o < n->n_out; o++) {
        fsl_value *v = n->out[o];
        bool need = v->is_output;
        for (int c = 0; c < v->n_cons && !need; c++) need = !fsl_vl_has(&s->anc, v->cons[c]);
        if (need && !fsl_vl_add(&s->pre_out, v)) return oom();
      }
    }
  }
  /* epilogue chain (orchestrate.h, fsl_linear_chain; onednn.h: a reshape
   * that keeps the last dim is absorbed, a permute ends what oneDNN takes;
   * the GPU dialects store through a tail of permutes) */
  s->n_chain = fsl_linear_chain(k, li, s->chain, FSL_LINEAR_CHAIN_MAX);
  return FSL_OK;
}

fsl_status fsl_linear_split_epilogue(const fsl_kernel *k, const fsl_linear_split *s, int n_abs, const fsl_value *z,
                                     bool (*written)(const void *ctx, const fsl_value *v), const void *ctx,
                                     fsl_vlist *post, fsl_vlist *post_out) {
  for (int i = 0; i < k->n_nodes; i++) {
    fsl_node *n = k->nodes[i];
    bool absorbed = false;
    for (int c = 0; c < n_abs; c++) absorbed = absorbed || s->chain[c] == n;
    if (n == s->lin || absorbed || fsl_vl_has(&s->anc, n)) continue;
    if (!fsl_vl_add(post, n)) return oom();
  }
  for (int j = 0; j < k->n_out; j++) {
    fsl_value *v = k->out[j];
    if (written(ctx, v) && (v == z || fsl_vl_has(&s->pre_out, v))) continue;
    if (v->producer && fsl_vl_has(post, v->producer) && !fsl_vl_add(post_out, v)) return oom();
  }
  return FSL_OK;
}

/* Adds to side the kernel nodes that compute value v for an epilogue over
 * chain[0 .. upto) (fsl_linear_split_fused): nothing for lin's output, a
 * chain value, a kernel input or a prologue output; false when a node on
 * the way is one a generated loop cannot take or reads lin's output, or
 * on OOM (*oom set). */
static bool side_nodes(const fsl_linear_split *s, int upto, fsl_value *v, fsl_vlist *side, bool *oom) {
  if (v == s->lin->out[0]) return true;
  for (int j = 0; j < upto; j++)
    if (s->chain[j]->out[0] == v) return true;
  fsl_node *p = v->producer;
  if (!p || !fsl_vl_has(&s->knodes, p) || (s->gen_prologue && fsl_vl_has(&s->anc, p)) || fsl_vl_has(side, p)) return true;
  fsl_kind kind = fsl_op_get(p->op)->kind;
  if (p == s->lin || !fsl_op_is_primitive(p->op) ||
      (kind != FSL_KIND_ELEMENTWISE && kind != FSL_KIND_MOVEMENT && kind != FSL_KIND_GATHER))
    return false;
  for (int i = 0; i < p->n_in; i++) {
    if (!p->in[i]) continue;
    if (p->in[i] == s->lin->out[0]) return false;
    for (int j = 0; j < s->n_chain; j++)
      if (s->chain[j]->out[0] == p->in[i]) return false;
    if (!side_nodes(s, upto, p->in[i], side, oom)) return false;
  }
  if (!fsl_vl_add(side, p)) return !(*oom = true);
  return true;
}

fsl_status fsl_linear_split_fused(const fsl_kernel *k, const fsl_linear_split *s, int *n_abs, fsl_vlist *nodes,
                                  fsl_vlist *ins) {
  *n_abs = 0;
  const fsl_value *y = s->lin->out[0];
  fsl_vlist side = {0};
  bool oom_ = false;
  /* n_side[j]: the side nodes chain[0 .. j] need are side.p[0 .. n_side[j]) (side only grows) */
  int valid = 0, n_side[FSL_LINEAR_CHAIN_MAX];
  bool tail = false; /* a permute was taken: only a path of movement nodes may follow */
  for (int j = 0; j < s->n_chain; j++) {
    fsl_node *c = s->chain[j];
    const fsl_value *prev = j > 0 ? s->chain[j - 1]->out[0] : y;
    bool moves = (c->op == FSL_OP_permute || c->op == FSL_OP_reshape) && c->n_in == 1 && c->in[0] == prev;
    tail = tail || (c->op == FSL_OP_permute && moves);
    bool ok = c->n_out == 1 && (tail ? moves : fsl_op_is_elementwise(c->op) || c->op == FSL_OP_reshape);
    for (int i = 0; ok && i < c->n_in; i++) ok = !c->in[i] || side_nodes(s, j, c->in[i], &side, &oom_);
    if (oom_) {
      free(side.p);
      return oom();
    }
    if (!ok) break;
    n_side[j] = side.n;
    valid = j + 1;
  }
  int n = valid;
  while (n > 0 && !fsl_linear_chain_closed(s->lin, s->chain, n)) n--;
  /* the side nodes of the prefix only, with it, in the kernel's order */
  fsl_vlist need = {.n = n > 0 ? n_side[n - 1] : 0, .p = side.p};
  for (int i = 0; i < k->n_nodes && !oom_ && n > 0; i++) {
    fsl_node *m = k->nodes[i];
    bool take = fsl_vl_has(&need, m);
    for (int j = 0; j < n && !take; j++) take = s->chain[j] == m;
    if (take && !fsl_vl_add(nodes, m)) oom_ = true;
  }
  fsl_vlist all = {0};
  if (!oom_ && n > 0 && !fsl_vl_add_inputs(&all, (fsl_node *const *)nodes->p, nodes->n)) oom_ = true;
  for (int i = 0; i < all.n && !oom_; i++)
    if (all.p[i] != y && !fsl_vl_add(ins, all.p[i])) oom_ = true;
  free(side.p);
  free(all.p);
  if (oom_) return oom();
  *n_abs = nodes->n > 0 ? n : 0;
  return FSL_OK;
}

/* The source of operand v's path of one-input movement nodes in anc
 * (v itself when no anc node produces it), *len the path's node count;
 * NULL when a node on the way is anything else or one of its values has
 * another reader (or is a graph output), or the path does not end outside
 * anc. */
static fsl_value *view_source(const fsl_linear_split *s, fsl_value *v, int *len) {
  const fsl_node *reader = s->lin;
  for (*len = 0; *len <= s->anc.n; ++*len) {
    fsl_node *p = v->producer;
    if (!p || !fsl_vl_has(&s->anc, p)) return v;
    if (!fsl_op_is_primitive(p->op) || fsl_op_get(p->op)->kind != FSL_KIND_MOVEMENT || p->n_in != 1 || p->n_out != 1 ||
        v->is_output)
      return NULL;
    for (int c = 0; c < v->n_cons; c++)
      if (v->cons[c] != reader) return NULL;
    reader = p;
    v = p->in[0];
  }
  return NULL;
}

bool fsl_linear_split_views(fsl_linear_split *s, const fsl_dialect *d) {
  fsl_node *lin = s->lin;
  if (!s->gen_prologue || s->views || lin->op != FSL_OP_matmul || !fsl_cg_tiles_fit(d, lin->in[0]->dtype)) return false;
  fsl_value *src[2];
  int on_paths = 0;
  for (int i = 0; i < 2; i++) {
    int len;
    if (!(src[i] = view_source(s, lin->in[i], &len))) return false;
    if (len > FSL_MAX_RANK) return false; /* fsl_linear_ref_nodes' bound, for a host fallback */
    on_paths += len;
  }
  /* every prologue node on one of the two paths (a node on both, as in
   * x @ x^T, has another reader and failed above) */
  if (on_paths != s->anc.n) return false;
  s->lin_in[0] = src[0];
  s->lin_in[1] = src[1];
  s->views = true;
  s->gen_prologue = false;
  s->pre_out.n = 0;
  return true;
}

fsl_value *fsl_linear_split_out(const fsl_linear_split *s, int n_abs) {
  return n_abs > 0 ? s->chain[n_abs - 1]->out[0] : s->lin->out[0];
}

fsl_status fsl_codegen_linear(const fsl_dialect *d, int id, const fsl_graph *g, const fsl_kernel *k,
                              const fsl_linear_split *s, int *n_abs, fsl_vlist *nodes, fsl_vlist *ins, fsl_sbuf *b,
                              fsl_cg_launch *launch) {
  *n_abs = 0;
  fsl_node *lin = s->lin;
  if (lin->op != FSL_OP_matmul && lin->op != FSL_OP_conv)
    return fsl_errorf(FSL_ERR_UNSUPPORTED, "no generated code for %s", fsl_op_get(lin->op)->name);
  int na = 0;
  fsl_status st = fsl_linear_split_fused(k, s, &na, nodes, ins);
  if (st != FSL_OK) return st;
  fsl_cg_epilogue epi = {.g = g, .n_views = s->views ? s->anc.n : 0, .views = (fsl_node *const *)s->anc.p};
  if (s->views) {
    epi.src[0] = s->lin_in[0];
    epi.src[1] = s->lin_in[1];
  }
  if (na > 0) {
    epi.n_nodes = nodes->n;
    epi.nodes = (fsl_node *const *)nodes->p;
    epi.n_in = ins->n;
    epi.in = (fsl_value *const *)ins->p;
    epi.out = fsl_linear_split_out(s, na);
    st = lin->op == FSL_OP_matmul ? fsl_codegen_matmul(d, id, lin, &epi, b, launch)
                                  : fsl_codegen_conv(d, id, lin, &epi, b, launch);
    if (st == FSL_OK) {
      *n_abs = na;
      return FSL_OK;
    }
    if (st == FSL_ERR_NOMEM) return st;
    fsl_error_clear(); /* the epilogue stays a function of its own */
  }
  nodes->n = ins->n = 0;
  /* without an epilogue: only the views, if any */
  epi.n_nodes = epi.n_in = 0;
  epi.out = lin->out[0];
  const fsl_cg_epilogue *e = s->views ? &epi : NULL;
  return lin->op == FSL_OP_matmul ? fsl_codegen_matmul(d, id, lin, e, b, launch)
                                  : fsl_codegen_conv(d, id, lin, e, b, launch);
}

void fsl_linear_split_free(fsl_linear_split *s) {
  free(s->knodes.p);
  free(s->anc.p);
  free(s->pre_out.p);
  memset(s, 0, sizeof *s);
}

int fsl_linear_ref_nodes(fsl_node *lin, fsl_value *const *lin_in, fsl_node **nodes) {
  int n = 0;
  for (int i = 0; i < 2; i++)
    for (fsl_value *v = lin->in[i]; v != lin_in[i] && n < 2 * FSL_MAX_RANK; v = v->producer->in[0]) nodes[n++] = v->producer;
  /* reverse into topological order (each chain is already a path) */
  for (int i = 0, j = n - 1; i < j; i++, j--) {
    fsl_node *t = nodes[i];
    nodes[i] = nodes[j];
    nodes[j] = t;
  }
  nodes[n++] = lin;
  return n;
}

bool fsl_ptrs_dup(void ***dst, int *n, void *const *src, int count) {
  *dst = malloc(sizeof(void *) * (size_t)(count > 0 ? count : 1));
  if (!*dst) return false;
  if (count > 0) memcpy(*dst, src, sizeof(void *) * (size_t)count);
  *n = count;
  return true;
}

void fsl_kernel_classes(const fsl_kernel *k, bool *opaque, bool *linear) {
  *opaque = *linear = false;
  for (int i = 0; i < k->n_nodes; i++) {
    const fsl_op_info *oi = fsl_op_get(k->nodes[i]->op);
    if (!oi->primitive || oi->kind == FSL_KIND_OPAQUE) *opaque = true;
    else if (oi->kind == FSL_KIND_LINEAR) *linear = true;
  }
}
