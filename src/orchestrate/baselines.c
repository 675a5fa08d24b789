/*
 * baselines.c — the rule-based orchestration strategies the optimal plan is
 * compared with (DESIGN.md section 5; baselines.h).
 *
 *   unfused  one group per ONNX op (node->origin).
 *   opfuse   TVM FuseOps (tvm/src/relay/transforms/fuse_ops.cc) over units
 *            that are whole ONNX ops, each with its op's fusion kind from
 *            ops.def (a MOVEMENT op refined by what it lowered to: a
 *            Reshape/Squeeze/Flatten is a reshape view, a Transpose a
 *            permute): no fission, so fusion never crosses into an op.
 *   greedy   the same rules over units that are single primitives, so
 *            fusions across ONNX-op boundaries become possible.
 *
 * Every strategy ends the same way: the groups are made acyclic (a group on
 * a cycle of the group graph is split into single nodes), ordered
 * topologically, and each group becomes one kernel when fsl_kernel_make
 * accepts it whole, or is split greedily in topological order into maximal
 * legal convex pieces otherwise (split_group).
 *
 * The FuseOps rules, with TVM's pattern levels (OpPatternKind) and the
 * mapping of fissile's kinds onto them:
 *
 *   ELEMENTWISE -> kElemWise      (primitive `reshape` too: a view that is
 *                                  the identity on row-major flat indices)
 *   primitive `expand` -> kBroadcast (the index map of a broadcast operand)
 *   primitive `permute` -> "view", between kBroadcast and kInjective
 *   other MOVEMENT, GATHER -> kInjective
 *   REDUCE -> kCommReduce         LINEAR -> kOutEWiseFusable
 *   OPAQUE (and ops kept whole) -> kOpaque
 *
 * A post-dominator tree over the units gives each unit its immediate
 * post-dominator and the combined (max) pattern of all paths to it; a unit
 * that produces a graph output has none.  Groups are a union-find over
 * units.  In topological order, a unit's group is fused with every node on
 * the paths to its post-dominator (CommitFuse) when:
 *
 *   phase 0, kOutEWiseFusable: the paths are elementwise, broadcast or
 *            permutes, and so is the post-dominator's group (TVM asks
 *            elementwise / broadcast; fissile's LINEAR kernels also take
 *            numel-preserving views in the epilogue, e.g. the permute of an
 *            attention head split);
 *   phase 0, a unit of reshapes only whose only consumer is a linear op:
 *            fused into it (a prologue view of the operand's buffer,
 *            which fissile's LINEAR kernels take and TVM has no rule for);
 *   phase 0, kCommReduce: the paths and the post-dominator's group have at
 *            most reduce kind.  TVM leaves reductions unfused with their
 *            consumers (its softmax is one kOutEWiseFusable op); fissile's
 *            REDUCE kernels carry elementwise work after and between
 *            reductions, so a reduction anchors a group like an
 *            out-elementwise-fusable op does;
 *   both phases, kElemWise/kBroadcast: the post-dominator relation is at
 *            most injective or a reduction, inner nodes at most injective,
 *            the post-dominator's group anything but opaque (TVM);
 *   phase 1, kInjective: the post-dominator relation at most a reduction
 *            (not into a linear op itself), inner nodes at most injective,
 *            the post-dominator's group anything but opaque (TVM asks
 *            injective throughout; fissile's REDUCE kernels read views as
 *            index expressions and LINEAR kernels read views of epilogue
 *            operands, e.g. the slice of an LSTM step's input gates).
 *
 * TVM's phase 2 fuses into tuples, which fissile does not have.  A group
 * never grows beyond FUSE_MAX_NODES primitives (TVM's max_depth).
 */
#include "orchestrate/baselines.h"
#include "orchestrate/kernel_ws.h"

/* TVM's OpPatternKind levels, combined by max, plus PAT_VIEW (between
 * broadcast and injective): a permute, which keeps the numel. */
enum { PAT_ELEMWISE, PAT_BROADCAST, PAT_VIEW, PAT_INJECTIVE, PAT_REDUCE, PAT_LINEAR, PAT_OPAQUE };

/* Largest fused group, in primitives (TVM: relay.FuseOps.max_depth). */
#define FUSE_MAX_NODES 256

#define NOMEM() fsl_errorf(FSL_ERR_NOMEM, "out of memory (baseline plan)")

typedef struct bctx {
  const fsl_graph *g;
  int *topo;            /* node id -> position in g->nodes */
  fsl_kernel_ws *ws;
  int n;                /* g->n_nodes */
} bctx;

static inline int pos_of(const bctx *c, const fsl_node *nd) { return c->topo[nd->id]; }

static inline int pmax(int a, int b) { return a > b ? a : b; }

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* ---- the group graph ---- */

/* Successor lists of groups (CSR), deduplicated, without self-edges. */
typedef struct qgraph {
  int n;
  int *off;             /* n + 1 */
  int *adj;
} qgraph;

static void qgraph_free(qgraph *q) {
  free(q->off);
  free(q->adj);
  memset(q, 0, sizeof *q);
}

/* Group graph of the partition grp (position -> group in [0, G)): an edge
 * a -> b when a node of a produces a value a node of b reads. */
static fsl_status qgraph_build(const bctx *c, const int *grp, int G, qgraph *q) {
  memset(q, 0, sizeof *q);
  q->n = G;
  size_t ne = 0;
  for (int p = 0; p < c->n; p++) {
    const fsl_node *nd = c->g->nodes[p];
    for (int j = 0; j < nd->n_out; j++)
      if (nd->out[j]) ne += (size_t)nd->out[j]->n_cons;
  }
  int64_t *e = malloc(sizeof *e * (ne ? ne : 1));
  q->off = calloc((size_t)G + 1, sizeof *q->off);
  if (!e || !q->off) {
    free(e);
    qgraph_free(q);
    return NOMEM();
  }
  size_t m = 0;
  for (int p = 0; p < c->n; p++) {
    const fsl_node *nd = c->g->nodes[p];
    for (int j = 0; j < nd->n_out; j++) {
      const fsl_value *v = nd->out[j];
      if (!v) continue;
      for (int k = 0; k < v->n_cons; k++) {
        int b = grp[pos_of(c, v->cons[k])];
        if (b != grp[p]) e[m++] = (int64_t)grp[p] << 32 | (int64_t)b;
      }
    }
  }
  qsort(e, m, sizeof *e, cmp_i64);
  size_t u = 0;
  for (size_t i = 0; i < m; i++)
    if (i == 0 || e[i] != e[i - 1]) e[u++] = e[i];
  q->adj = malloc(sizeof *q->adj * (u ? u : 1));
  if (!q->adj) {
    free(e);
    qgraph_free(q);
    return NOMEM();
  }
  for (size_t i = 0; i < u; i++) {
    q->off[(e[i] >> 32) + 1]++;
    q->adj[i] = (int)(e[i] & 0xffffffff);
  }
  for (int i = 0; i < G; i++) q->off[i + 1] += q->off[i];
  free(e);
  return FSL_OK;
}

/* Marks in bad[] every group on a cycle (a strongly connected component of
 * two or more groups; Tarjan, iterative); *n_bad counts them. */
static fsl_status cyclic_groups(const qgraph *q, bool *bad, int *n_bad) {
  int n = q->n;
  *n_bad = 0;
  int *idx = malloc(sizeof *idx * (size_t)(n ? n : 1)), *low = malloc(sizeof *low * (size_t)(n ? n : 1));
  int *stk = malloc(sizeof *stk * (size_t)(n ? n : 1)), *cs = malloc(sizeof *cs * (size_t)(n ? n : 1));
  int *it = malloc(sizeof *it * (size_t)(n ? n : 1));
  bool *on = calloc((size_t)(n ? n : 1), sizeof *on);
  fsl_status st = FSL_OK;
  if (!idx || !low || !stk || !cs || !it || !on) {
    st = NOMEM();
    goto done;
  }
  for (int i = 0; i < n; i++) idx[i] = -1;
  int counter = 0, sp = 0;
  for (int s = 0; s < n; s++) {
    if (idx[s] >= 0) continue;
    int csp = 0;
    cs[csp++] = s;
    idx[s] = low[s] = counter++;
    it[s] = q->off[s];
    stk[sp++] = s;
    on[s] = true;
    while (csp > 0) {
      int v = cs[csp - 1];
      if (it[v] < q->off[v + 1]) {
        int w = q->adj[it[v]++];
        if (idx[w] < 0) {
          idx[w] = low[w] = counter++;
          it[w] = q->off[w];
          stk[sp++] = w;
          on[w] = true;
          cs[csp++] = w;
        } else if (on[w] && idx[w] < low[v]) {
          low[v] = idx[w];
        }
        continue;
      }
      csp--;
      if (csp > 0 && low[v] < low[cs[csp - 1]]) low[cs[csp - 1]] = low[v];
      if (low[v] != idx[v]) continue;
      int top = sp, w;
      do {
        w = stk[--sp];
        on[w] = false;
      } while (w != v);
      if (top - sp > 1)
        for (int k = sp; k < top; k++) {
          bad[stk[k]] = true;
          (*n_bad)++;
        }
    }
  }
done:
  free(idx);
  free(low);
  free(stk);
  free(cs);
  free(it);
  free(on);
  return st;
}

/* Renumbers groups densely in order of their first position. */
static fsl_status renumber(const bctx *c, int *grp, int *G) {
  int *map = malloc(sizeof *map * (size_t)(*G > 0 ? *G : 1));
  if (!map) return NOMEM();
  for (int i = 0; i < *G; i++) map[i] = -1;
  int k = 0;
  for (int p = 0; p < c->n; p++) {
    if (map[grp[p]] < 0) map[grp[p]] = k++;
    grp[p] = map[grp[p]];
  }
  free(map);
  *G = k;
  return FSL_OK;
}

/* Makes the group graph acyclic by splitting every group on a cycle into
 * single nodes (groups that are not convex are on one), then renumbers.
 * One round suffices: a cycle of the new graph would map to a cycle through
 * a group that was not split. */
static fsl_status make_acyclic(const bctx *c, int *grp, int *G) {
  FSL_TRY(renumber(c, grp, G));
  for (int round = 0; round < 3; round++) {
    qgraph q;
    FSL_TRY(qgraph_build(c, grp, *G, &q));
    bool *bad = calloc((size_t)(*G > 0 ? *G : 1), sizeof *bad);
    int n_bad = 0;
    fsl_status st = bad ? cyclic_groups(&q, bad, &n_bad) : NOMEM();
    qgraph_free(&q);
    if (st != FSL_OK || n_bad == 0) {
      free(bad);
      return st;
    }
    int G0 = *G;
    for (int p = 0; p < c->n; p++)
      if (grp[p] < G0 && bad[grp[p]]) grp[p] = (*G)++;
    free(bad);
    FSL_TRY(renumber(c, grp, G));
  }
  return fsl_errorf(FSL_ERR_RUNTIME, "baseline plan: groups still form a cycle after splitting");
}

/* ---- a min-heap of ints (ready groups, lowest id first) ---- */

static void heap_push(int *h, int *n, int x) {
  int i = (*n)++;
  h[i] = x;
  while (i > 0 && h[(i - 1) / 2] > h[i]) {
    int p = (i - 1) / 2, t = h[p];
    h[p] = h[i];
    h[i] = t;
    i = p;
  }
}

static int heap_pop(int *h, int *n) {
  int top = h[0];
  h[0] = h[--*n];
  int i = 0;
  for (;;) {
    int l = 2 * i + 1, r = l + 1, m = i;
    if (l < *n && h[l] < h[m]) m = l;
    if (r < *n && h[r] < h[m]) m = r;
    if (m == i) break;
    int t = h[m];
    h[m] = h[i];
    h[i] = t;
    i = m;
  }
  return top;
}

/* Topological order of an acyclic group graph (Kahn; among ready groups
 * the lowest id, i.e. the earliest first position, goes first). */
static fsl_status qgraph_topo(const qgraph *q, int *order) {
  int n = q->n;
  int *indeg = calloc((size_t)(n ? n : 1), sizeof *indeg), *h = malloc(sizeof *h * (size_t)(n ? n : 1));
  if (!indeg || !h) {
    free(indeg);
    free(h);
    return NOMEM();
  }
  for (int i = 0; i < q->off[n]; i++) indeg[q->adj[i]]++;
  int hn = 0, k = 0;
  for (int i = 0; i < n; i++)
    if (!indeg[i]) heap_push(h, &hn, i);
  while (hn > 0) {
    int v = heap_pop(h, &hn);
    order[k++] = v;
    for (int i = q->off[v]; i < q->off[v + 1]; i++)
      if (--indeg[q->adj[i]] == 0) heap_push(h, &hn, q->adj[i]);
  }
  free(indeg);
  free(h);
  if (k != n) return fsl_errorf(FSL_ERR_RUNTIME, "baseline plan: the group graph has a cycle");
  return FSL_OK;
}

/* ---- kernel sets ---- */

static fsl_status set_push(fsl_kernel_set *s, fsl_kernel *k) {
  if (s->n == s->cap) {
    int nc = s->cap ? 2 * s->cap : 64;
    fsl_kernel **nk = realloc(s->k, sizeof *nk * (size_t)nc);
    if (!nk) {
      fsl_kernel_free(k);
      return NOMEM();
    }
    s->k = nk;
    s->cap = nc;
  }
  k->id = s->n;
  s->k[s->n++] = k;
  return FSL_OK;
}

/* ---- the greedy splitter ---- */

typedef struct ivec {
  int *a;
  int n, cap;
} ivec;

static bool iv_push(ivec *v, int x) {
  if (v->n == v->cap) {
    int nc = v->cap ? 2 * v->cap : 8;
    int *na = realloc(v->a, sizeof *na * (size_t)nc);
    if (!na) return false;
    v->a = na;
    v->cap = nc;
  }
  v->a[v->n++] = x;
  return true;
}

typedef struct splitter {
  bctx *c;
  int *piece;           /* position -> piece of the current group, or -1 */
  ivec *pc;             /* pieces: positions, ascending */
  int n_pc, cap_pc;
  unsigned *seen;       /* piece -> search stamp */
  unsigned gen;
  int *stack;
  fsl_node **buf;       /* node buffer for fsl_kernel_ws_make */
} splitter;

static unsigned next_stamp(splitter *sp) {
  if (++sp->gen == 0) {
    memset(sp->seen, 0, sizeof *sp->seen * (size_t)sp->cap_pc);
    sp->gen = 1;
  }
  return sp->gen;
}

/* Pieces that consume a value of piece a (in the current group). */
static int piece_succs(splitter *sp, int a, int *out, unsigned stamp) {
  int k = 0;
  for (int i = 0; i < sp->pc[a].n; i++) {
    const fsl_node *nd = sp->c->g->nodes[sp->pc[a].a[i]];
    for (int j = 0; j < nd->n_out; j++) {
      const fsl_value *v = nd->out[j];
      if (!v) continue;
      for (int t = 0; t < v->n_cons; t++) {
        int b = sp->piece[pos_of(sp->c, v->cons[t])];
        if (b < 0 || b == a || sp->seen[b] == stamp) continue;
        sp->seen[b] = stamp;
        out[k++] = b;
      }
    }
  }
  return k;
}

/* true when merging pieces S (and a new node read from pieces S and Q)
 * would close a cycle among pieces: from S, through other pieces, back to
 * S or into Q (which will feed the merged piece). */
static bool would_cycle(splitter *sp, const int *S, int ns, const int *Q, int nq) {
  unsigned stamp = next_stamp(sp);
  for (int i = 0; i < ns; i++) sp->seen[S[i]] = stamp;
  int top = 0;
  for (int i = 0; i < ns; i++) top += piece_succs(sp, S[i], sp->stack + top, stamp);
  /* S pieces were stamped: their successors inside S are skipped; an edge
   * between S pieces closes nothing after the merge. */
  while (top > 0) {
    int x = sp->stack[--top];
    for (int i = 0; i < nq; i++)
      if (Q[i] == x) return true;
    /* successors of x that are in S: a path S -> x -> S */
    for (int i = 0; i < sp->pc[x].n; i++) {
      const fsl_node *nd = sp->c->g->nodes[sp->pc[x].a[i]];
      for (int j = 0; j < nd->n_out; j++) {
        const fsl_value *v = nd->out[j];
        if (!v) continue;
        for (int t = 0; t < v->n_cons; t++) {
          int b = sp->piece[pos_of(sp->c, v->cons[t])];
          for (int s = 0; s < ns; s++)
            if (b == S[s]) return true;
        }
      }
    }
    top += piece_succs(sp, x, sp->stack + top, stamp);
  }
  return false;
}

/* Is pieces S plus node p one legal kernel? */
static fsl_status legal_with(splitter *sp, const int *S, int ns, int p, bool *ok) {
  int m = 0;
  for (int i = 0; i < ns; i++)
    for (int j = 0; j < sp->pc[S[i]].n; j++) sp->buf[m++] = sp->c->g->nodes[sp->pc[S[i]].a[j]];
  sp->buf[m++] = sp->c->g->nodes[p];
  int verdict = 1;
  FSL_TRY(fsl_kernel_ws_make(sp->c->ws, sp->buf, m, false, NULL, NULL, &verdict));
  *ok = verdict == KV_LEGAL;
  return FSL_OK;
}

/* Moves piece b's nodes into piece a. */
static fsl_status piece_merge(splitter *sp, int a, int b) {
  for (int i = 0; i < sp->pc[b].n; i++) {
    if (!iv_push(&sp->pc[a], sp->pc[b].a[i])) return NOMEM();
    sp->piece[sp->pc[b].a[i]] = a;
  }
  sp->pc[b].n = 0;
  return FSL_OK;
}

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

static fsl_status emit(splitter *sp, const int *pos, int n, fsl_kernel_set *out) {
  for (int i = 0; i < n; i++) sp->buf[i] = sp->c->g->nodes[pos[i]];
  fsl_kernel *k = NULL;
  const char *why = NULL;
  int verdict = 1;
  FSL_TRY(fsl_kernel_ws_make(sp->c->ws, sp->buf, n, true, &k, &why, &verdict));
  if (!k) {
    const fsl_node *nd = sp->buf[0];
    return fsl_errorf(FSL_ERR_RUNTIME, "baseline plan: %s%s (from node '%s', %s) is not a legal kernel: %s",
                      fsl_op_name(nd->op), n > 1 ? " and the nodes after it" : "",
                      nd->origin_name ? nd->origin_name : "?", nd->origin_op ? nd->origin_op : "?",
                      why ? why : "?");
  }
  return set_push(out, k);
}

/*
 * Splits a group (positions gp[0..n), ascending) into kernels appended
 * to `out` in an executable order: the whole group when it is one legal
 * kernel; otherwise, in topological order, each node joins the pieces of
 * its producers in the group (all of them merged, else one of them, the
 * largest first) when the result is a legal kernel and the pieces stay
 * acyclic, or starts a new piece.
 */
static fsl_status split_group(splitter *sp, const int *gp, int n, fsl_kernel_set *out) {
  for (int i = 0; i < n; i++) sp->buf[i] = sp->c->g->nodes[gp[i]];
  fsl_kernel *k = NULL;
  int verdict = 1;
  FSL_TRY(fsl_kernel_ws_make(sp->c->ws, sp->buf, n, true, &k, NULL, &verdict));
  if (k) return set_push(out, k);

  sp->n_pc = 0;
  fsl_status st = FSL_OK;
  int *PP = NULL, *order = NULL;
  qgraph q = {0};
  PP = malloc(sizeof *PP * (size_t)(n + 1));
  if (!PP) return NOMEM();
  for (int i = 0; i < n && st == FSL_OK; i++) {
    int p = gp[i];
    const fsl_node *nd = sp->c->g->nodes[p];
    int np = 0;
    for (int j = 0; j < nd->n_in; j++) {
      const fsl_value *v = nd->in[j];
      if (!v || !v->producer) continue;
      int b = sp->piece[pos_of(sp->c, v->producer)];
      if (b < 0) continue;
      bool have = false;
      for (int t = 0; t < np; t++) have |= PP[t] == b;
      if (!have) PP[np++] = b;
    }
    /* largest first (ties: the older piece) */
    for (int a = 1; a < np; a++)
      for (int b = a; b > 0 && (sp->pc[PP[b]].n > sp->pc[PP[b - 1]].n ||
                                (sp->pc[PP[b]].n == sp->pc[PP[b - 1]].n && PP[b] < PP[b - 1]));
           b--) {
        int t = PP[b];
        PP[b] = PP[b - 1];
        PP[b - 1] = t;
      }
    int target = -1;
    bool ok = false;
    if (np >= 2) {
      st = legal_with(sp, PP, np, p, &ok);
      if (st == FSL_OK && ok && !would_cycle(sp, PP, np, NULL, 0)) {
        target = PP[0];
        for (int t = 1; t < np && st == FSL_OK; t++) st = piece_merge(sp, target, PP[t]);
      }
    }
    for (int t = 0; t < np && target < 0 && st == FSL_OK; t++) {
      st = legal_with(sp, &PP[t], 1, p, &ok);
      if (st != FSL_OK || !ok) continue;
      /* the other producer pieces will feed the grown piece */
      int Q[64], nq = 0;
      bool overflow = false;
      for (int u = 0; u < np; u++)
        if (u != t) {
          if (nq < (int)FSL_ARRAY_LEN(Q)) Q[nq++] = PP[u];
          else overflow = true;
        }
      if (!overflow && !would_cycle(sp, &PP[t], 1, Q, nq)) target = PP[t];
    }
    if (st != FSL_OK) break;
    if (target < 0) {
      if (sp->n_pc == sp->cap_pc) {
        st = fsl_errorf(FSL_ERR_RUNTIME, "baseline plan: too many pieces");
        break;
      }
      target = sp->n_pc++;
      sp->pc[target].n = 0;
    }
    if (!iv_push(&sp->pc[target], p)) {
      st = NOMEM();
      break;
    }
    sp->piece[p] = target;
  }
  if (st != FSL_OK) goto done;

  /* order the pieces (their graph is acyclic by construction) and emit */
  {
    int np = sp->n_pc;
    ivec adj = {0};
    order = malloc(sizeof *order * (size_t)(np ? np : 1));
    q.n = np;
    q.off = calloc((size_t)np + 1, sizeof *q.off);
    if (!order || !q.off) {
      st = NOMEM();
      goto done;
    }
    for (int a = 0; a < np && st == FSL_OK; a++) {
      unsigned stamp = next_stamp(sp);
      sp->seen[a] = stamp;
      int ns = sp->pc[a].n ? piece_succs(sp, a, sp->stack, stamp) : 0;
      for (int t = 0; t < ns && st == FSL_OK; t++)
        if (!iv_push(&adj, sp->stack[t])) st = NOMEM();
      q.off[a + 1] = adj.n;
    }
    q.adj = adj.a;
    if (st == FSL_OK) st = qgraph_topo(&q, order);
    for (int t = 0; t < np && st == FSL_OK; t++) {
      ivec *v = &sp->pc[order[t]];
      if (v->n == 0) continue;
      qsort(v->a, (size_t)v->n, sizeof *v->a, cmp_int);
      st = emit(sp, v->a, v->n, out);
    }
  }
done:
  for (int i = 0; i < n; i++) sp->piece[gp[i]] = -1;
  qgraph_free(&q);
  free(order);
  free(PP);
  return st;
}

/* Emits the groups of partition grp (G groups, acyclic) as kernels, in a
 * topological order of the groups. */
static fsl_status emit_groups(bctx *c, int *grp, int G, fsl_kernel_set *out) {
  fsl_status st = FSL_OK;
  qgraph q = {0};
  splitter sp = {.c = c};
  int *order = malloc(sizeof *order * (size_t)(G ? G : 1));
  int *start = calloc((size_t)G + 1, sizeof *start), *members = malloc(sizeof *members * (size_t)(c->n ? c->n : 1));
  sp.piece = malloc(sizeof *sp.piece * (size_t)(c->n ? c->n : 1));
  sp.cap_pc = c->n ? c->n : 1;
  sp.pc = calloc((size_t)sp.cap_pc, sizeof *sp.pc);
  sp.seen = calloc((size_t)sp.cap_pc, sizeof *sp.seen);
  sp.stack = malloc(sizeof *sp.stack * (size_t)sp.cap_pc * 2);
  sp.buf = malloc(sizeof *sp.buf * (size_t)(c->n ? c->n : 1));
  if (!order || !start || !members || !sp.piece || !sp.pc || !sp.seen || !sp.stack || !sp.buf) {
    st = NOMEM();
    goto done;
  }
  for (int p = 0; p < c->n; p++) sp.piece[p] = -1;
  for (int p = 0; p < c->n; p++) start[grp[p] + 1]++;
  for (int i = 0; i < G; i++) start[i + 1] += start[i];
  {
    int *fill = malloc(sizeof *fill * (size_t)(G ? G : 1));
    if (!fill) {
      st = NOMEM();
      goto done;
    }
    memcpy(fill, start, sizeof *fill * (size_t)G);
    for (int p = 0; p < c->n; p++) members[fill[grp[p]]++] = p;
    free(fill);
  }
  st = qgraph_build(c, grp, G, &q);
  if (st == FSL_OK) st = qgraph_topo(&q, order);
  for (int i = 0; i < G && st == FSL_OK; i++) {
    int gid = order[i];
    st = split_group(&sp, members + start[gid], start[gid + 1] - start[gid], out);
  }
done:
  qgraph_free(&q);
  if (sp.pc)
    for (int i = 0; i < sp.cap_pc; i++) free(sp.pc[i].a);
  free(sp.pc);
  free(sp.piece);
  free(sp.seen);
  free(sp.stack);
  free(sp.buf);
  free(order);
  free(start);
  free(members);
  return st;
}

/* ---- FuseOps ---- */

static int kind_pattern(fsl_kind k) {
  switch (k) {
  case FSL_KIND_ELEMENTWISE: return PAT_ELEMWISE;
  case FSL_KIND_MOVEMENT:
  case FSL_KIND_GATHER: return PAT_INJECTIVE;
  case FSL_KIND_REDUCE: return PAT_REDUCE;
  case FSL_KIND_LINEAR: return PAT_LINEAR;
  default: return PAT_OPAQUE;
  }
}

/* Pattern of one primitive node (greedy units). */
static int node_pattern(const fsl_node *nd) {
  if (!fsl_op_is_primitive(nd->op)) return PAT_OPAQUE;
  if (nd->op == FSL_OP_reshape) return PAT_ELEMWISE;
  if (nd->op == FSL_OP_expand) return PAT_BROADCAST;
  if (nd->op == FSL_OP_permute) return PAT_VIEW;
  return kind_pattern(fsl_op_get(nd->op)->kind);
}

/* Pattern of a node's ONNX op at op granularity (opfuse units): its kind in
 * ops.def; -1 for MOVEMENT ops (refined by the primitives they lowered to:
 * a Reshape/Squeeze/Flatten is a flat-index view, a Transpose a permute)
 * and when the origin is unknown. */
static int origin_pattern(const fsl_node *nd) {
  fsl_op op = nd->origin_op ? fsl_op_from_onnx(nd->origin_op) : FSL_OP_NONE;
  if (op == FSL_OP_NONE || fsl_op_get(op)->kind == FSL_KIND_MOVEMENT) return -1;
  return kind_pattern(fsl_op_get(op)->kind);
}

typedef struct fuser {
  int U;
  const qgraph *q;      /* unit successors */
  const int *order;     /* units in topological order */
  const int *upat;      /* unit's op pattern (edge pattern of edges into it) */
  int *gpat;            /* pattern of the unit's group object (TVM groups_[i]->pattern) */
  int *uf, *num;
  bool *anchor, *ext;
  const bool *view;     /* unit is one reshape primitive (greedy), or NULL */
  const bool *wide;     /* unit is one int8 operand widening primitive (greedy, FSL_PROLOGUE_INT8:
                           fsl_kernel_int8_widening), or NULL */
  int *dom, *depth, *dpat;
  int *stack;
  unsigned *seen, *seen2;
  unsigned gen;
} fuser;

static int uf_find(fuser *f, int x) {
  while (f->uf[x] != x) {
    f->uf[x] = f->uf[f->uf[x]];
    x = f->uf[x];
  }
  return x;
}

static unsigned fuser_gen(fuser *f) {
  if (++f->gen == 0) {
    memset(f->seen, 0, sizeof *f->seen * (size_t)f->U);
    memset(f->seen2, 0, sizeof *f->seen2 * (size_t)f->U);
    f->gen = 1;
  }
  return f->gen;
}

/* Least common ancestor of a and b in the post-dominator tree, combining
 * the patterns passed on the way (TVM LeastCommonAncestor). */
static int lca(fuser *f, int a, int b, int *ep) {
  while (a != b) {
    if (a < 0 || b < 0) return -1;
    if (f->depth[a] < f->depth[b]) {
      *ep = pmax(*ep, f->dpat[b]);
      b = f->dom[b];
    } else if (f->depth[b] < f->depth[a]) {
      *ep = pmax(*ep, f->dpat[a]);
      a = f->dom[a];
    } else {
      *ep = pmax(*ep, pmax(f->dpat[a], f->dpat[b]));
      a = f->dom[a];
      b = f->dom[b];
    }
  }
  return a;
}

static void post_dominators(fuser *f) {
  for (int i = f->U - 1; i >= 0; i--) {
    int u = f->order[i];
    const qgraph *q = f->q;
    if (f->ext[u] || q->off[u] == q->off[u + 1]) {
      f->dom[u] = -1;
      f->depth[u] = 1;
      f->dpat[u] = f->ext[u] ? PAT_OPAQUE : PAT_ELEMWISE;
      continue;
    }
    int ep = PAT_ELEMWISE, par = q->adj[q->off[u]];
    ep = pmax(ep, f->upat[par]);
    for (int e = q->off[u] + 1; e < q->off[u + 1] && par >= 0; e++) {
      int v = q->adj[e];
      par = lca(f, par, v, &ep);
      ep = pmax(ep, f->upat[v]);
    }
    f->dom[u] = par;
    f->depth[u] = par >= 0 ? f->depth[par] + 1 : 1;
    f->dpat[u] = ep;
  }
}

enum { COND_LINEAR, COND_REDUCE, COND_ELEMWISE, COND_INJECTIVE };

static bool cond_ok(int cond, int pat, bool sink) {
  switch (cond) {
  case COND_LINEAR: return pat <= PAT_VIEW;
  case COND_REDUCE: return pat <= PAT_REDUCE;
  case COND_ELEMWISE: return sink ? pat <= PAT_LINEAR : pat <= PAT_INJECTIVE;
  default: return sink ? pat <= PAT_LINEAR : pat <= PAT_INJECTIVE;
  }
}

/* Do all units on the paths from src to sink (src excluded) satisfy cond,
 * judged by their group's pattern? (TVM CheckPath) */
static bool check_path(fuser *f, int src, int sink, int cond) {
  unsigned g = fuser_gen(f);
  int top = 0;
  for (int e = f->q->off[src]; e < f->q->off[src + 1]; e++) f->stack[top++] = f->q->adj[e];
  while (top > 0) {
    int x = f->stack[--top];
    if (f->seen[x] == g) continue;
    f->seen[x] = g;
    if (!cond_ok(cond, f->gpat[uf_find(f, x)], x == sink)) return false;
    if (x == sink) continue;
    for (int e = f->q->off[x]; e < f->q->off[x + 1]; e++)
      if (f->seen[f->q->adj[e]] != g) f->stack[top++] = f->q->adj[e];
  }
  return true;
}

/* Primitives in sink's group after fusing the paths from child to it
 * (TVM CountFusedNodesWithNewChild). */
static int count_with(fuser *f, int child, int sink) {
  unsigned g = fuser_gen(f);
  int rs = uf_find(f, sink), sum = f->num[rs], top = 0;
  f->stack[top++] = child;
  while (top > 0) {
    int x = f->stack[--top];
    if (x == sink || f->seen[x] == g) continue;
    f->seen[x] = g;
    int r = uf_find(f, x);
    if (r != rs && f->seen2[r] != g) {
      f->seen2[r] = g;
      sum += f->num[r];
    }
    for (int e = f->q->off[x]; e < f->q->off[x + 1]; e++)
      if (f->seen[f->q->adj[e]] != g) f->stack[top++] = f->q->adj[e];
  }
  return sum;
}

static void merge_into(fuser *f, int child, int parent) {
  int a = uf_find(f, child), b = uf_find(f, parent);
  if (a == b) return;
  f->num[b] += f->num[a];
  f->uf[a] = b;
  if (f->anchor[a]) {
    f->anchor[b] = true;
    f->gpat[b] = pmax(f->gpat[a], f->gpat[b]);
  }
}

/* Fuses every unit on the paths from src to sink into sink's group (TVM
 * CommitFuse). */
static void commit(fuser *f, int src, int sink) {
  unsigned g = fuser_gen(f);
  int top = 0;
  f->stack[top++] = src;
  while (top > 0) {
    int x = f->stack[--top];
    if (x == sink || f->seen[x] == g) continue;
    f->seen[x] = g;
    merge_into(f, x, sink);
    for (int e = f->q->off[x]; e < f->q->off[x + 1]; e++)
      if (f->seen[f->q->adj[e]] != g) f->stack[top++] = f->q->adj[e];
  }
}

static void fuse_phase(fuser *f, int phase) {
  for (int r = 0; r < f->U; r++) {
    int u = f->order[r], gp = f->gpat[u], d = f->dom[u];
    if (gp == PAT_OPAQUE || d < 0) continue;
    if (uf_find(f, u) == uf_find(f, d)) continue;
    if (count_with(f, u, d) > FUSE_MAX_NODES) continue;
    int cond;
    if (phase == 0 && f->view && f->view[u] && gp <= PAT_BROADCAST && f->upat[d] == PAT_LINEAR &&
        f->q->off[u + 1] - f->q->off[u] == 1 && f->q->adj[f->q->off[u]] == d) {
      commit(f, u, d);
      continue;
    }
    /* an int8 operand's widening joins the linear op that reads it (through
     * the rest of the widening) as its prologue */
    if (phase == 0 && f->wide && f->wide[u] && (f->upat[d] == PAT_LINEAR || f->wide[d]) &&
        f->q->off[u + 1] - f->q->off[u] == 1 && f->q->adj[f->q->off[u]] == d) {
      commit(f, u, d);
      continue;
    }
    if (gp == PAT_LINEAR) {
      if (phase != 0 || f->dpat[u] > PAT_VIEW) continue;
      cond = COND_LINEAR;
    } else if (gp == PAT_REDUCE) {
      if (phase != 0 || f->dpat[u] > PAT_REDUCE) continue;
      cond = COND_REDUCE;
    } else if (gp <= PAT_BROADCAST) {
      if (!(f->dpat[u] <= PAT_INJECTIVE || f->dpat[u] == PAT_REDUCE)) continue;
      cond = COND_ELEMWISE;
    } else {
      if (phase != 1 || f->dpat[u] > PAT_REDUCE) continue;
      cond = COND_INJECTIVE;
    }
    if (check_path(f, u, d, cond)) commit(f, u, d);
  }
}

/*
 * FuseOps over the units of partition grp (G units, acyclic), unit
 * patterns upat[], view[] (or NULL) marking single-reshape units, wide[]
 * (or NULL) single int8-widening ones; rewrites grp to the fused groups.
 */
static fsl_status fuse_units(bctx *c, int *grp, int G, const int *upat, const bool *view, const bool *wide) {
  fsl_status st = FSL_OK;
  qgraph q = {0};
  fuser f = {.U = G, .upat = upat, .view = view, .wide = wide};
  size_t n = (size_t)(G ? G : 1);
  int *order = malloc(sizeof *order * n);
  f.gpat = malloc(sizeof *f.gpat * n);
  f.uf = malloc(sizeof *f.uf * n);
  f.num = calloc(n, sizeof *f.num);
  f.anchor = calloc(n, sizeof *f.anchor);
  f.ext = calloc(n, sizeof *f.ext);
  f.dom = malloc(sizeof *f.dom * n);
  f.depth = malloc(sizeof *f.depth * n);
  f.dpat = malloc(sizeof *f.dpat * n);
  f.seen = calloc(n, sizeof *f.seen);
  f.seen2 = calloc(n, sizeof *f.seen2);
  if (!order || !f.gpat || !f.uf || !f.num || !f.anchor || !f.ext || !f.dom || !f.depth || !f.dpat || !f.seen ||
      !f.seen2) {
    st = NOMEM();
    goto done;
  }
  st = qgraph_build(c, grp, G, &q);
  if (st != FSL_OK) goto done;
  f.q = &q;
  f.stack = malloc(sizeof *f.stack * ((size_t)q.off[G] + n + 1));
  if (!f.stack) {
    st = NOMEM();
    goto done;
  }
  st = qgraph_topo(&q, order);
  if (st != FSL_OK) goto done;
  f.order = order;
  for (int u = 0; u < G; u++) {
    f.uf[u] = u;
    f.gpat[u] = upat[u];
    f.anchor[u] = upat[u] == PAT_LINEAR || upat[u] == PAT_REDUCE;
  }
  for (int p = 0; p < c->n; p++) {
    const fsl_node *nd = c->g->nodes[p];
    f.num[grp[p]]++;
    for (int j = 0; j < nd->n_out; j++)
      if (nd->out[j] && nd->out[j]->is_output) f.ext[grp[p]] = true;
  }
  post_dominators(&f);
  fuse_phase(&f, 0);
  fuse_phase(&f, 1);
  for (int p = 0; p < c->n; p++) grp[p] = uf_find(&f, grp[p]);
done:
  qgraph_free(&q);
  free(order);
  free(f.gpat);
  free(f.uf);
  free(f.num);
  free(f.anchor);
  free(f.ext);
  free(f.dom);
  free(f.depth);
  free(f.dpat);
  free(f.seen);
  free(f.seen2);
  free(f.stack);
  return st;
}

/* ---- the strategies ---- */

/* One group per origin (ONNX node); nodes without one (origin < 0) alone. */
static fsl_status group_by_origin(const bctx *c, int *grp, int *G) {
  int64_t *key = malloc(sizeof *key * (size_t)(c->n ? c->n : 1));
  if (!key) return NOMEM();
  /* (origin, position) pairs sorted: equal origins become adjacent */
  int m = 0, k = 0;
  for (int p = 0; p < c->n; p++) {
    int o = c->g->nodes[p]->origin;
    if (o >= 0) key[m++] = (int64_t)o << 32 | (int64_t)p;
    else grp[p] = k++;
  }
  qsort(key, (size_t)m, sizeof *key, cmp_i64);
  for (int i = 0; i < m; i++) {
    if (i > 0 && key[i] >> 32 != key[i - 1] >> 32) k++;
    grp[key[i] & 0xffffffff] = k;
  }
  free(key);
  *G = m > 0 ? k + 1 : k;
  return FSL_OK;
}

fsl_status fsl_baseline(const fsl_graph *g, fsl_strategy s, unsigned prologue, fsl_kernel_set *out) {
  if (!g || !out) return fsl_errorf(FSL_ERR_ARG, "fsl_baseline: expected a graph and a kernel set");
  if (s != FSL_STRATEGY_UNFUSED && s != FSL_STRATEGY_OPFUSE && s != FSL_STRATEGY_GREEDY)
    return fsl_errorf(FSL_ERR_ARG, "fsl_baseline: strategy %d is not a baseline (expected unfused, opfuse or greedy)",
                      (int)s);
  out->g = g;
  bctx c = {.g = g, .n = g->n_nodes};
  int *grp = NULL, *upat = NULL;
  bool *view = NULL, *wide = NULL;
  fsl_status st = FSL_OK;
  c.topo = fsl_graph_topo_index(g);
  grp = malloc(sizeof *grp * (size_t)(c.n ? c.n : 1));
  if (!c.topo || !grp) {
    st = NOMEM();
    goto done;
  }
  st = fsl_kernel_ws_new(g, c.topo, &c.ws);
  if (st != FSL_OK) goto done;
  fsl_kernel_ws_set_prologue(c.ws, prologue);
  int G = 0;
  if (s == FSL_STRATEGY_GREEDY) {
    for (int p = 0; p < c.n; p++) grp[p] = p;
    G = c.n;
  } else {
    st = group_by_origin(&c, grp, &G);
    if (st == FSL_OK) st = make_acyclic(&c, grp, &G);
    if (st != FSL_OK) goto done;
  }
  if (s != FSL_STRATEGY_UNFUSED) {
    /* unit pattern: opaque if a node is; else (opfuse) the ONNX op's kind;
     * else the max of its primitives' patterns.  view: only reshapes. */
    upat = malloc(sizeof *upat * (size_t)(G ? G : 1));
    int *prim = malloc(sizeof *prim * (size_t)(G ? G : 1));
    view = malloc(sizeof *view * (size_t)(G ? G : 1));
    wide = malloc(sizeof *wide * (size_t)(G ? G : 1));
    if (!upat || !prim || !view || !wide) {
      free(prim);
      st = NOMEM();
      goto done;
    }
    for (int u = 0; u < G; u++) {
      upat[u] = -1;
      prim[u] = PAT_ELEMWISE;
      view[u] = true;
      wide[u] = prologue & FSL_PROLOGUE_INT8;
    }
    for (int p = 0; p < c.n; p++) {
      const fsl_node *nd = g->nodes[p];
      int u = grp[p];
      prim[u] = pmax(prim[u], node_pattern(nd));
      view[u] &= nd->op == FSL_OP_reshape;
      wide[u] &= fsl_kernel_int8_widening(nd);
      if (s == FSL_STRATEGY_OPFUSE) upat[u] = pmax(upat[u], origin_pattern(nd));
    }
    for (int u = 0; u < G; u++)
      if (upat[u] < 0 || prim[u] == PAT_OPAQUE) upat[u] = prim[u];
    free(prim);
    st = fuse_units(&c, grp, G, upat, view, s == FSL_STRATEGY_GREEDY ? wide : NULL);
    if (st == FSL_OK) st = make_acyclic(&c, grp, &G);
    if (st != FSL_OK) goto done;
  }
  st = emit_groups(&c, grp, G, out);
done:
  if (st != FSL_OK) fsl_kernel_set_free(out);
  fsl_kernel_ws_free(c.ws);
  free(c.topo);
  free(grp);
  free(upat);
  free(view);
  free(wide);
  return st;
}
