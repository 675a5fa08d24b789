/*
 * kernel.c — one candidate kernel: a convex, legal set of primitive nodes
 * (orchestrate.h; DESIGN.md section 5).
 *
 * Legality follows XLA's loop/input fusion and TVM's pattern kinds:
 *
 *   LOOP    only elementwise, movement and gather primitives; every kernel
 *           output has the same shape (one output space).
 *   REDUCE  at least one reduce_* / argmax / argmin, no linear or opaque
 *           node; all reductions have outputs of one numel (the kept space,
 *           keepdims being always on); every kernel output has the kept
 *           numel or the input numel of a reduction (a row space); every
 *           elementwise/gather node downstream of a reduction lives in the
 *           kept or a row space.  Movement views are index expressions and
 *           may have any numel; elementwise work on side operands that no
 *           reduction feeds (e.g. a cast of a scale before its expand) may
 *           too.
 *   LINEAR  exactly one matmul/conv, the rest elementwise/movement: nodes
 *           that transitively read the linear output form the epilogue and
 *           keep its numel; the others only prepare epilogue operands (bias
 *           reshape/expand) and are not read outside, except views
 *           (reshape, permute, expand, slice) that feed the linear op alone
 *           (a prologue: a reshape reads the operand's row-major buffer
 *           with other dims, as fsl_b_matmul makes when it folds batch dims
 *           into M; on a device whose generated matmul reads views in place,
 *           fsl_device.linear_views, also a permute such as attention's K^T,
 *           an expand broadcasting an operand over the batch, a slice).
 *   OPAQUE  one non-primitive node, alone.
 *
 * Convexity: no path leaves the set and re-enters it.  A forward search
 * from the outside consumers of set nodes, bounded by the largest
 * topological position in the set, decides it.
 *
 * The functions fsl_kernel_ws_* are a reusable workspace for candidates.c
 * (many sets of one graph checked without O(graph) work per set).
 */
#include "orchestrate/kernel_ws.h"

/* ---- the workspace (shared with candidates.c) ---- */
struct fsl_kernel_ws {
  const fsl_graph *g;
  const int *topo;
  int n_ids, n_vids;        /* node id bound, value id bound */
  unsigned *in_set;         /* node id -> set stamp */
  unsigned *seen;           /* node id -> convexity-search stamp */
  unsigned set_gen, seen_gen;
  int *pos;                 /* node id -> position in the sorted set */
  unsigned *vstamp;         /* value id -> input-list stamp */
  int *vidx;                /* value id -> kernel input ordinal */
  unsigned vgen;
  int *tp;                  /* sorted topo positions of the set */
  fsl_node **nodes;
  fsl_value **ins, **outs;
  bool *flag;               /* per position: epilogue / after-reduce */
  bool *flag2;              /* per position: linear prologue */
  unsigned prologue;        /* FSL_PROLOGUE_* beyond reshapes (fsl_kernel_ws_set_prologue) */
  int cap_set, cap_in, cap_out;
  fsl_node **stack;
  int cap_stack;
};


/** Position of every node in g->nodes, indexed by node id (malloc'd; -1 for
 *  ids not in the graph); NULL on OOM or a NULL graph. */
int *fsl_graph_topo_index(const fsl_graph *g) {
  if (!g) return NULL;
  int maxid = g->next_node_id;
  for (int i = 0; i < g->n_nodes; i++)
    if (g->nodes[i]->id >= maxid) maxid = g->nodes[i]->id + 1;
  int *t = malloc(sizeof *t * (size_t)(maxid > 0 ? maxid : 1));
  if (!t) return NULL;
  for (int i = 0; i < maxid; i++) t[i] = -1;
  for (int i = 0; i < g->n_nodes; i++) t[g->nodes[i]->id] = i;
  return t;
}

/**
 * Workspace for checking many node sets of g (node and value ids index its
 * arrays); `topo` from fsl_graph_topo_index(g) must outlive it.  Internal to
 * src/orchestrate (candidates.c).  Errors: FSL_ERR_NOMEM.
 */
fsl_status fsl_kernel_ws_new(const fsl_graph *g, const int *topo, fsl_kernel_ws **out) {
  *out = NULL;
  fsl_kernel_ws *ws = calloc(1, sizeof *ws);
  if (!ws) return fsl_errorf(FSL_ERR_NOMEM, "out of memory (kernel workspace)");
  ws->g = g;
  ws->topo = topo;
  ws->n_ids = g->next_node_id;
  for (int i = 0; i < g->n_nodes; i++)
    if (g->nodes[i]->id >= ws->n_ids) ws->n_ids = g->nodes[i]->id + 1;
  ws->n_vids = g->n_values;
  for (int i = 0; i < g->n_values; i++)
    if (g->values[i]->id >= ws->n_vids) ws->n_vids = g->values[i]->id + 1;
  size_t ni = (size_t)ws->n_ids + 1, nv = (size_t)ws->n_vids + 1;
  ws->in_set = calloc(ni, sizeof *ws->in_set);
  ws->seen = calloc(ni, sizeof *ws->seen);
  ws->pos = calloc(ni, sizeof *ws->pos);
  ws->vstamp = calloc(nv, sizeof *ws->vstamp);
  ws->vidx = calloc(nv, sizeof *ws->vidx);
  if (!ws->in_set || !ws->seen || !ws->pos || !ws->vstamp || !ws->vidx) {
    fsl_kernel_ws_free(ws);
    return fsl_errorf(FSL_ERR_NOMEM, "out of memory (kernel workspace, %d nodes)", ws->n_ids);
  }
  *out = ws;
  return FSL_OK;
}

/** Frees a workspace from fsl_kernel_ws_new (NULL is fine). */
void fsl_kernel_ws_free(fsl_kernel_ws *ws) {
  if (!ws) return;
  free(ws->in_set);
  free(ws->seen);
  free(ws->pos);
  free(ws->vstamp);
  free(ws->vidx);
  free(ws->tp);
  free(ws->nodes);
  free(ws->ins);
  free(ws->outs);
  free(ws->flag);
  free(ws->flag2);
  free(ws->stack);
  free(ws);
}

/* Grows the per-position arrays (tp, nodes, flag) to hold n. */
static bool reserve_set(fsl_kernel_ws *ws, int n) {
  if (n <= ws->cap_set) return true;
  int nc = ws->cap_set ? ws->cap_set : 16;
  while (nc < n) {
    if (nc > (1 << 28)) return false;
    nc *= 2;
  }
  int *tp = realloc(ws->tp, sizeof *tp * (size_t)nc);
  if (!tp) return false;
  ws->tp = tp;
  fsl_node **nd = realloc(ws->nodes, sizeof *nd * (size_t)nc);
  if (!nd) return false;
  ws->nodes = nd;
  bool *fl = realloc(ws->flag, sizeof *fl * (size_t)nc);
  if (!fl) return false;
  ws->flag = fl;
  fl = realloc(ws->flag2, sizeof *fl * (size_t)nc);
  if (!fl) return false;
  ws->flag2 = fl;
  ws->cap_set = nc;
  return true;
}

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* Advances a stamp generation; on wrap-around clears the stamps. */
static unsigned next_gen(unsigned *gen, unsigned *arr, size_t n) {
  if (++*gen == 0) {
    memset(arr, 0, n * sizeof *arr);
    *gen = 1;
  }
  return *gen;
}

static inline bool in_set(const fsl_kernel_ws *ws, const fsl_node *n) {
  return n && n->id >= 0 && n->id < ws->n_ids && ws->in_set[n->id] == ws->set_gen;
}

static int64_t numel0(const fsl_value *v) {
  int64_t e = v ? fsl_value_numel(v) : 0;
  return e < 0 ? 0 : e;
}

/* Numel, or -1 when unknown (never equal to a real numel). */
static int64_t numel_or(const fsl_value *v) {
  if (!v || !fsl_value_has_shape(v)) return -1;
  return fsl_value_numel(v);
}

static bool is_reduction(fsl_op op) {
  return fsl_op_is_primitive(op) && fsl_op_get(op)->kind == FSL_KIND_REDUCE;
}

/* ---- convexity ---- */

/* true when some path leaves the set and re-enters it. */
static bool leaves_and_reenters(fsl_kernel_ws *ws, int n, int maxtopo, bool *oom) {
  unsigned sg = next_gen(&ws->seen_gen, ws->seen, (size_t)ws->n_ids + 1);
  int sp = 0;
  for (int p = 0; p < n; p++) {
    const fsl_node *nd = ws->nodes[p];
    for (int j = 0; j < nd->n_out; j++) {
      const fsl_value *v = nd->out[j];
      if (!v) continue;
      for (int c = 0; c < v->n_cons; c++) {
        fsl_node *x = v->cons[c];
        if (in_set(ws, x) || ws->topo[x->id] >= maxtopo || ws->seen[x->id] == sg) continue;
        ws->seen[x->id] = sg;
        if (!fsl_grow((void **)&ws->stack, &ws->cap_stack, sp + 1, sizeof *ws->stack)) {
          *oom = true;
          return false;
        }
        ws->stack[sp++] = x;
      }
    }
  }
  while (sp > 0) {
    const fsl_node *nd = ws->stack[--sp];
    for (int j = 0; j < nd->n_out; j++) {
      const fsl_value *v = nd->out[j];
      if (!v) continue;
      for (int c = 0; c < v->n_cons; c++) {
        fsl_node *x = v->cons[c];
        if (in_set(ws, x)) return true;
        if (ws->topo[x->id] >= maxtopo || ws->seen[x->id] == sg) continue;
        ws->seen[x->id] = sg;
        if (!fsl_grow((void **)&ws->stack, &ws->cap_stack, sp + 1, sizeof *ws->stack)) {
          *oom = true;
          return false;
        }
        ws->stack[sp++] = x;
      }
    }
  }
  return false;
}

/* ---- legality ---- */

/* Position in the set of v's producer, or -1 when produced outside. */
static int prod_pos(const fsl_kernel_ws *ws, const fsl_value *v) {
  return v && v->producer && in_set(ws, v->producer) ? ws->pos[v->producer->id] : -1;
}

static bool pro_flag(const fsl_kernel_ws *ws, const fsl_node *x) { return ws->flag2[ws->pos[x->id]]; }

bool fsl_kernel_int8_widening(const fsl_node *nd) {
  if (nd->n_in < 1 || !nd->in[0] || nd->n_out != 1 || !nd->out[0]) return false;
  fsl_dtype from = nd->in[0]->dtype, to = nd->out[0]->dtype;
  bool one = fsl_value_has_shape(nd->in[0]) && fsl_value_numel(nd->in[0]) == 1;
  switch (nd->op) {
  case FSL_OP_cast: return one || (to == FSL_DT_I32 && (from == FSL_DT_U8 || from == FSL_DT_I8));
  case FSL_OP_sub: return to == FSL_DT_I32 && nd->n_in == 2 && nd->in[1] && from == FSL_DT_I32;
  case FSL_OP_expand: return one;
  default: return false;
  }
}

static int check_linear(fsl_kernel_ws *ws, int n, int n_out, const fsl_node *lin, const char **why) {
  int64_t le = numel_or(lin->out[0]);
  bool *epi = ws->flag;
  for (int p = 0; p < n; p++) {
    const fsl_node *nd = ws->nodes[p];
    epi[p] = nd == lin;
    if (nd == lin) continue;
    for (int i = 0; i < nd->n_in && !epi[p]; i++) {
      int q = prod_pos(ws, nd->in[i]);
      if (q >= 0 && epi[q]) epi[p] = true;
    }
    if (epi[p]) {
      for (int j = 0; j < nd->n_out; j++)
        if (numel_or(nd->out[j]) != le) {
          *why = "an epilogue node changes the linear op's output space";
          return KV_PRUNE;
        }
    }
  }
  /* prologue: views whose in-set consumers are the linear op or other
   * prologue views: reshapes (a linear operand's buffer read with other
   * dims), and on a device whose generated matmul reads them in place
   * (fsl_device.linear_views: fsl_linear_split_views) permutes, expands and
   * slices too; before an int32 linear op on a device whose library reads
   * 8-bit operands (fsl_device.linear_int8), their widening to int32 and
   * per-tensor zero points */
  int lp = ws->pos[lin->id];
  bool int8 = (ws->prologue & FSL_PROLOGUE_INT8) && lin->out[0] && lin->out[0]->dtype == FSL_DT_I32;
  for (int p = lp - 1; p >= 0; p--) {
    const fsl_node *nd = ws->nodes[p];
    bool view = nd->op == FSL_OP_reshape ||
                ((ws->prologue & FSL_PROLOGUE_VIEWS) &&
                 (nd->op == FSL_OP_permute || nd->op == FSL_OP_expand || nd->op == FSL_OP_slice)) ||
                (int8 && fsl_kernel_int8_widening(nd));
    bool pro = view && nd->n_out == 1 && nd->out[0];
    for (int c = 0; pro && c < nd->out[0]->n_cons; c++) {
      const fsl_node *x = nd->out[0]->cons[c];
      if (!in_set(ws, x)) continue;
      pro = x == lin || (ws->pos[x->id] < lp && pro_flag(ws, x));
    }
    ws->flag2[p] = pro;
  }
  for (int p = 0; p < n; p++) {
    if (p >= lp) ws->flag2[p] = false;
    if (!ws->flag2[p]) continue;
    for (int c = 0; c < ws->nodes[p]->out[0]->n_cons; c++)
      if (!in_set(ws, ws->nodes[p]->out[0]->cons[c]) || ws->nodes[p]->out[0]->is_output) {
        *why = "a prologue view is read outside the kernel";
        return KV_ILLEGAL;
      }
  }
  for (int i = 0; i < lin->n_in; i++) {
    int q = prod_pos(ws, lin->in[i]);
    if (q >= 0 && !ws->flag2[q]) {
      *why = "a node other than a view (reshape, permute, expand, slice) feeds the linear op";
      return KV_PRUNE;
    }
  }
  for (int p = 0; p < lp; p++) {
    /* off-epilogue nodes other than the prologue feed only the epilogue */
    const fsl_node *nd = ws->nodes[p];
    if (ws->flag2[p]) continue;
    for (int j = 0; j < nd->n_out; j++)
      for (int c = 0; nd->out[j] && c < nd->out[j]->n_cons; c++) {
        const fsl_node *x = nd->out[j]->cons[c];
        if (in_set(ws, x) && ws->pos[x->id] < lp && ws->flag2[ws->pos[x->id]]) {
          *why = "a node feeds the linear op's prologue";
          return KV_ILLEGAL;
        }
      }
  }
  for (int k = 0; k < n_out; k++) {
    const fsl_value *v = ws->outs[k];
    int q = prod_pos(ws, v);
    if (q >= 0 && !epi[q]) {
      *why = "a node off the epilogue is read outside the kernel";
      return KV_ILLEGAL;
    }
    if (numel_or(v) != le) {
      *why = "a kernel output is not in the linear op's output space";
      return KV_ILLEGAL;
    }
  }
  return KV_LEGAL;
}

static int check_reduce(fsl_kernel_ws *ws, int n, int n_out, const char **why) {
  int64_t kept = -2, rows[16];
  int n_rows = 0;
  bool many_rows = false;
  for (int p = 0; p < n; p++) {
    const fsl_node *nd = ws->nodes[p];
    if (!is_reduction(nd->op)) continue;
    int64_t k = numel_or(nd->out[0]), r = numel_or(nd->in[0]);
    if (kept == -2) kept = k;
    else if (k != kept) {
      *why = "reductions do not share their kept space";
      return KV_PRUNE;
    }
    bool have = false;
    for (int i = 0; i < n_rows; i++) have |= rows[i] == r;
    if (!have) {
      if (n_rows < (int)FSL_ARRAY_LEN(rows)) rows[n_rows++] = r;
      else many_rows = true;
    }
  }
  if (many_rows) {
    *why = "too many row spaces";
    return KV_ILLEGAL;
  }
  bool *after = ws->flag;
  for (int p = 0; p < n; p++) {
    const fsl_node *nd = ws->nodes[p];
    fsl_kind kd = fsl_op_get(nd->op)->kind;
    after[p] = kd == FSL_KIND_REDUCE;
    for (int i = 0; i < nd->n_in && !after[p]; i++) {
      int q = prod_pos(ws, nd->in[i]);
      if (q >= 0 && after[q]) after[p] = true;
    }
    if (kd == FSL_KIND_MOVEMENT || kd == FSL_KIND_REDUCE || !after[p]) continue;
    int64_t e = numel_or(nd->out[0]);
    bool ok = e == kept && e >= 0;
    for (int i = 0; i < n_rows && !ok; i++) ok = e == rows[i] && e >= 0;
    if (!ok) {
      *why = "a node after a reduction is in neither the kept nor a row space";
      return KV_ILLEGAL;
    }
  }
  for (int k = 0; k < n_out; k++) {
    int64_t e = numel_or(ws->outs[k]);
    bool ok = e == kept && e >= 0;
    for (int i = 0; i < n_rows && !ok; i++) ok = e == rows[i] && e >= 0;
    if (!ok) {
      *why = "a kernel output is in neither the kept nor a row space";
      return KV_ILLEGAL;
    }
  }
  return KV_LEGAL;
}

static bool same_shape(const fsl_value *a, const fsl_value *b) {
  if (!fsl_value_has_shape(a) || !fsl_value_has_shape(b) || a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i]) return false;
  return true;
}

/* Decides the kind of the sorted set in ws; verdict KV_*. */
static int classify(fsl_kernel_ws *ws, int n, int n_out, fsl_kernel_kind *kind, const char **why) {
  int n_opq = 0, n_lin = 0, n_red = 0, n_gat = 0;
  const fsl_node *lin = NULL;
  for (int p = 0; p < n; p++) {
    const fsl_node *nd = ws->nodes[p];
    const fsl_op_info *oi = fsl_op_get(nd->op);
    if (!oi->primitive || oi->kind == FSL_KIND_OPAQUE) n_opq++;
    else if (oi->kind == FSL_KIND_LINEAR) n_lin++, lin = nd;
    else if (oi->kind == FSL_KIND_REDUCE) n_red++;
    else if (oi->kind == FSL_KIND_GATHER) n_gat++;
  }
  if (n_opq > 0) {
    if (n == 1) {
      *kind = FSL_KERNEL_OPAQUE;
      return KV_LEGAL;
    }
    *why = "an opaque op runs alone";
    return KV_PRUNE;
  }
  if (n_lin > 1) {
    *why = "two linear ops";
    return KV_PRUNE;
  }
  if (n_lin == 1) {
    if (n_red > 0) {
      *why = "a linear op with a reduction";
      return KV_PRUNE;
    }
    if (n_gat > 0) {
      *why = "a gather in a linear kernel";
      return KV_PRUNE;
    }
    *kind = FSL_KERNEL_LINEAR;
    if (!lin->n_out || !lin->out[0]) {
      *why = "a linear op without output";
      return KV_PRUNE;
    }
    return check_linear(ws, n, n_out, lin, why);
  }
  if (n_red > 0) {
    *kind = FSL_KERNEL_REDUCE;
    return check_reduce(ws, n, n_out, why);
  }
  *kind = FSL_KERNEL_LOOP;
  for (int k = 1; k < n_out; k++)
    if (!same_shape(ws->outs[0], ws->outs[k])) {
      *why = "kernel outputs of different shapes";
      return KV_ILLEGAL;
    }
  if (n_out > 0 && !fsl_value_has_shape(ws->outs[0])) {
    *why = "an output of unknown shape";
    return KV_ILLEGAL;
  }
  return KV_LEGAL;
}

/* ---- hash, flops ---- */

static uint64_t hash_i64(uint64_t h, int64_t x) { return fsl_hash(h, &x, sizeof x); }

static uint64_t hash_str(uint64_t h, const char *s) {
  return s ? fsl_hash(h, s, strlen(s) + 1) : hash_i64(h, -1);
}

/* Constants up to this many bytes are hashed with their data (a code
 * generator may inline them). */
#define SMALL_CONST_BYTES 64

static uint64_t kernel_hash(const fsl_kernel_ws *ws, const fsl_kernel *k) {
  uint64_t h = FSL_HASH_INIT;
  h = hash_i64(h, k->kind);
  h = hash_i64(h, k->n_nodes);
  h = hash_i64(h, k->n_in);
  for (int i = 0; i < k->n_in; i++) {
    const fsl_value *v = k->in[i];
    h = fsl_value_type_hash(h, v);
    h = hash_i64(h, v->data ? 1 : 0);
    int64_t nb = fsl_value_nbytes(v);
    if (v->data && nb >= 0 && nb <= SMALL_CONST_BYTES) h = fsl_hash(h, v->data, (size_t)nb);
  }
  for (int p = 0; p < k->n_nodes; p++) {
    const fsl_node *nd = k->nodes[p];
    h = hash_i64(h, nd->op);
    if (!fsl_op_is_primitive(nd->op)) {
      h = hash_str(h, nd->domain);
      h = hash_str(h, nd->op_type);
    }
    h = hash_i64(h, nd->n_in);
    h = hash_i64(h, nd->n_out);
    for (int i = 0; i < nd->n_attrs; i++) h = fsl_attr_hash(h, &nd->attrs[i]);
    for (int i = 0; i < nd->n_in; i++) {
      const fsl_value *v = nd->in[i];
      if (!v) {
        h = hash_i64(h, -1);
        continue;
      }
      int q = prod_pos(ws, v);
      if (q >= 0) {
        int j = 0;
        while (j < v->producer->n_out && v->producer->out[j] != v) j++;
        h = hash_i64(h, 1);
        h = hash_i64(h, q);
        h = hash_i64(h, j);
      } else {
        h = hash_i64(h, 2);
        h = hash_i64(h, ws->vidx[v->id]);
      }
    }
    for (int j = 0; j < nd->n_out; j++) h = nd->out[j] ? fsl_value_type_hash(h, nd->out[j]) : hash_i64(h, -1);
  }
  h = hash_i64(h, k->n_out);
  for (int i = 0; i < k->n_out; i++) {
    const fsl_value *v = k->out[i];
    int q = prod_pos(ws, v), j = 0;
    while (j < v->producer->n_out && v->producer->out[j] != v) j++;
    h = hash_i64(h, q);
    h = hash_i64(h, j);
  }
  return h;
}

/* FLOPs of one node: elementwise numel of the output, reductions numel of
 * the input, matmul 2*batch*M*N*K, conv 2*N*M*prod(out spatial)*(C/group)*
 * prod(kernel), movement and gather 0, opaque ops numel of their outputs. */
static double node_flops(const fsl_node *nd) {
  const fsl_op_info *oi = fsl_op_get(nd->op);
  const fsl_value *o = nd->n_out > 0 ? nd->out[0] : NULL;
  if (!oi->primitive || oi->kind == FSL_KIND_OPAQUE) {
    double f = 0;
    for (int j = 0; j < nd->n_out; j++) f += (double)numel0(nd->out[j]);
    return f;
  }
  switch (oi->kind) {
  case FSL_KIND_ELEMENTWISE: return (double)numel0(o);
  case FSL_KIND_REDUCE: return nd->n_in > 0 ? (double)numel0(nd->in[0]) : 0;
  case FSL_KIND_LINEAR:
    if (nd->n_in < 2 || !nd->in[0] || !nd->in[1] || !o) return 0;
    if (nd->op == FSL_OP_matmul) {
      const fsl_value *a = nd->in[0];
      double kdim = a->rank >= 1 ? (double)(a->dims[a->rank - 1] > 0 ? a->dims[a->rank - 1] : 0) : 0;
      return 2.0 * (double)numel0(o) * kdim;
    } else {
      const fsl_value *w = nd->in[1];
      double m = w->rank >= 1 && w->dims[0] > 0 ? (double)w->dims[0] : 0;
      return m > 0 ? 2.0 * (double)numel0(o) * (double)numel0(w) / m : 0;
    }
  default: return 0;
  }
}

/* ---- the kernel ---- */

/**
 * Checks the node set (any order, duplicates and NULLs ignored) in the
 * workspace; `verdict` receives 0 (legal), 1 (not legal, but a larger set
 * may be) or 2 (not convex, or no superset can be legal: prune).  With
 * `build`, *out receives the kernel when legal (NULL otherwise).  Internal
 * to src/orchestrate.  Errors: FSL_ERR_NOMEM; FSL_ERR_ARG for a node that
 * is not in the workspace's graph.
 */
fsl_status fsl_kernel_ws_make(fsl_kernel_ws *ws, fsl_node *const *nodes, int n, bool build,
                              fsl_kernel **out, const char **why, int *verdict) {
  const char *dummy;
  if (!why) why = &dummy;
  *why = NULL;
  if (out) *out = NULL;
  *verdict = KV_PRUNE;
  if (n < 0) n = 0;
  if (!reserve_set(ws, n > 0 ? n : 1))
    return fsl_errorf(FSL_ERR_NOMEM, "out of memory (kernel of %d nodes)", n);

  /* dedupe, validate, sort by topological position */
  unsigned gen = next_gen(&ws->set_gen, ws->in_set, (size_t)ws->n_ids + 1);
  int m = 0;
  for (int i = 0; i < n; i++) {
    const fsl_node *nd = nodes[i];
    if (!nd) continue;
    if (nd->id < 0 || nd->id >= ws->n_ids || ws->topo[nd->id] < 0 ||
        ws->g->nodes[ws->topo[nd->id]] != nd)
      return fsl_errorf(FSL_ERR_ARG, "kernel: node %d ('%s') is not in the graph", nd->id,
                        nd->name ? nd->name : "");
    if (ws->in_set[nd->id] == gen) continue;
    ws->in_set[nd->id] = gen;
    ws->tp[m++] = ws->topo[nd->id];
  }
  n = m;
  if (n == 0) {
    *why = "empty node set";
    return FSL_OK;
  }
  qsort(ws->tp, (size_t)n, sizeof *ws->tp, cmp_int);
  for (int p = 0; p < n; p++) {
    ws->nodes[p] = ws->g->nodes[ws->tp[p]];
    ws->pos[ws->nodes[p]->id] = p;
  }

  /* inputs (first-use order) and outputs */
  unsigned vg = next_gen(&ws->vgen, ws->vstamp, (size_t)ws->n_vids + 1);
  int n_in = 0, n_out = 0;
  for (int p = 0; p < n; p++) {
    const fsl_node *nd = ws->nodes[p];
    for (int i = 0; i < nd->n_in; i++) {
      fsl_value *v = nd->in[i];
      if (!v || (v->producer && in_set(ws, v->producer))) continue;
      if (v->id < 0 || v->id >= ws->n_vids)
        return fsl_errorf(FSL_ERR_ARG, "kernel: value %d is not in the graph", v->id);
      if (ws->vstamp[v->id] == vg) continue;
      ws->vstamp[v->id] = vg;
      ws->vidx[v->id] = n_in;
      if (!fsl_grow((void **)&ws->ins, &ws->cap_in, n_in + 1, sizeof *ws->ins))
        return fsl_errorf(FSL_ERR_NOMEM, "out of memory (kernel inputs)");
      ws->ins[n_in++] = v;
    }
    for (int j = 0; j < nd->n_out; j++) {
      fsl_value *v = nd->out[j];
      if (!v) continue;
      bool read_out = v->is_output;
      for (int c = 0; c < v->n_cons && !read_out; c++) read_out = !in_set(ws, v->cons[c]);
      if (!read_out) continue;
      if (!fsl_grow((void **)&ws->outs, &ws->cap_out, n_out + 1, sizeof *ws->outs))
        return fsl_errorf(FSL_ERR_NOMEM, "out of memory (kernel outputs)");
      ws->outs[n_out++] = v;
    }
  }

  /* convexity */
  bool oom = false;
  if (n > 1 && leaves_and_reenters(ws, n, ws->tp[n - 1], &oom)) {
    *why = "not convex: a path leaves the set and re-enters it";
    return FSL_OK;
  }
  if (oom) return fsl_errorf(FSL_ERR_NOMEM, "out of memory (convexity search)");

  fsl_kernel_kind kind = FSL_KERNEL_LOOP;
  *verdict = classify(ws, n, n_out, &kind, why);
  if (*verdict != KV_LEGAL || !build || !out) return FSL_OK;

  fsl_kernel *k = calloc(1, sizeof *k);
  if (!k) return fsl_errorf(FSL_ERR_NOMEM, "out of memory (kernel)");
  k->kind = kind;
  k->n_nodes = n;
  k->n_in = n_in;
  k->n_out = n_out;
  k->nodes = malloc(sizeof *k->nodes * (size_t)n);
  k->in = malloc(sizeof *k->in * (size_t)(n_in > 0 ? n_in : 1));
  k->out = malloc(sizeof *k->out * (size_t)(n_out > 0 ? n_out : 1));
  if (!k->nodes || !k->in || !k->out) {
    fsl_kernel_free(k);
    return fsl_errorf(FSL_ERR_NOMEM, "out of memory (kernel)");
  }
  memcpy(k->nodes, ws->nodes, sizeof *k->nodes * (size_t)n);
  if (n_in) memcpy(k->in, ws->ins, sizeof *k->in * (size_t)n_in);
  if (n_out) memcpy(k->out, ws->outs, sizeof *k->out * (size_t)n_out);
  for (int p = 0; p < n; p++) k->flops += node_flops(k->nodes[p]);
  for (int i = 0; i < n_in; i++) k->bytes += (double)(fsl_value_nbytes(k->in[i]) > 0 ? fsl_value_nbytes(k->in[i]) : 0);
  for (int i = 0; i < n_out; i++) k->bytes += (double)(fsl_value_nbytes(k->out[i]) > 0 ? fsl_value_nbytes(k->out[i]) : 0);
  k->hash = kernel_hash(ws, k);
  *out = k;
  return FSL_OK;
}

/** See orchestrate.h.  Besides FSL_ERR_NOMEM, FSL_ERR_ARG for missing
 *  arguments or a node that is not in g. */
void fsl_kernel_ws_set_prologue(fsl_kernel_ws *ws, unsigned flags) { ws->prologue = flags; }

fsl_status fsl_kernel_make(const fsl_graph *g, const int *topo, fsl_node *const *nodes, int n,
                           fsl_kernel **out, const char **why) {
  if (out) *out = NULL;
  if (why) *why = NULL;
  if (!g || !topo || !out || (n > 0 && !nodes))
    return fsl_errorf(FSL_ERR_ARG, "fsl_kernel_make: expected a graph, its topo index, nodes and out");
  fsl_kernel_ws *ws;
  FSL_TRY(fsl_kernel_ws_new(g, topo, &ws));
  fsl_kernel_ws_set_prologue(ws, FSL_PROLOGUE_VIEWS | FSL_PROLOGUE_INT8); /* any plan's kernels, whatever its device */
  int verdict;
  fsl_status st = fsl_kernel_ws_make(ws, nodes, n, true, out, why, &verdict);
  fsl_kernel_ws_free(ws);
  return st;
}

/** Frees a kernel: its nodes, in and out arrays (each malloc'd) and itself. */
void fsl_kernel_free(fsl_kernel *k) {
  if (!k) return;
  free(k->nodes);
  free(k->in);
  free(k->out);
  free(k);
}

/** Frees every kernel of the set and its array; the set is left empty. */
void fsl_kernel_set_free(fsl_kernel_set *s) {
  if (!s) return;
  for (int i = 0; i < s->n; i++) fsl_kernel_free(s->k[i]);
  free(s->k);
  s->k = NULL;
  s->n = s->cap = 0;
}
