/*
 * linsplit.c — the prologue / linear / epilogue split of a LINEAR kernel
 * (linsplit.h), shared by the CPU and OpenCL backends and the CPU kernel
 * profiler.
 */
#include "codegen/linsplit.h"

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

static bool is_ew(const fsl_node *n) {
  return fsl_op_is_primitive(n->op) && fsl_op_get(n->op)->kind == FSL_KIND_ELEMENTWISE;
}

/* Follows in-kernel reshapes back from a linear operand. */
static fsl_value *through_reshapes(fsl_value *v, const fsl_vlist *knodes) {
  while (v->producer && v->producer->op == FSL_OP_reshape && fsl_vl_has(knodes, v->producer)) v = v->producer->in[0];
  return v;
}

fsl_status fsl_linear_split_make(const fsl_kernel *k, fsl_linear_split *s) {
  memset(s, 0, sizeof *s);
  int nl = 0, li = 0;
  for (int i = 0; i < k->n_nodes; i++)
    if (fsl_op_is_primitive(k->nodes[i]->op) && fsl_op_get(k->nodes[i]->op)->kind == FSL_KIND_LINEAR) {
      s->lin = k->nodes[i];
      li = i;
      nl++;
    }
  if (nl != 1) return fsl_errorf(FSL_ERR_UNSUPPORTED, "%d linear ops in one kernel (expected 1)", nl);
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
  /* epilogue chain: the kernel's elementwise (or reshape) nodes after lin,
   * in topological order, that read lin's output or an earlier chain node's,
   * up to the first node that reads one and is neither (onednn.h: a reshape
   * that keeps the last dim is absorbed).  Nodes reading none of them are
   * passed over.  A chain value may have several consumers (x * sigmoid(x)
   * reads x twice): a backend absorbs only a prefix whose values, the last
   * one excepted, are read inside the prefix (fsl_linear_chain_closed). */
  fsl_vlist cv = {0};
  if (!fsl_vl_add(&cv, lin->out[0])) return oom();
  for (int i = li + 1; i < k->n_nodes && s->n_chain < FSL_LINEAR_CHAIN_MAX; i++) {
    fsl_node *c = k->nodes[i];
    bool reads = false;
    for (int j = 0; j < c->n_in && !reads; j++) reads = c->in[j] && fsl_vl_has(&cv, c->in[j]);
    if (!reads) continue;
    if (!(is_ew(c) || c->op == FSL_OP_reshape) || c->n_out != 1 || !fsl_vl_add(&cv, c->out[0])) break;
    s->chain[s->n_chain++] = c;
  }
  free(cv.p);
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

bool fsl_linear_chain_closed(const fsl_node *lin, fsl_node *const *chain, int n) {
  if (n <= 0) return true;
  for (int j = -1; j < n - 1; j++) {
    const fsl_value *v = j < 0 ? lin->out[0] : chain[j]->out[0];
    if (v->is_output) return false;
    for (int c = 0; c < v->n_cons; c++) {
      bool inside = false;
      for (int t = j + 1; t < n && !inside; t++) inside = chain[t] == v->cons[c];
      if (!inside) return false;
    }
  }
  return true;
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
