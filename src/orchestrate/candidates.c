/*
 * candidates.c — enumeration of candidate kernels (orchestrate.h; DESIGN.md
 * section 5; Korch, ASPLOS'24, section 4).
 *
 * Candidates of a primitive graph, in this order:
 *   1. every node alone (always legal: a primitive is a LOOP, REDUCE or
 *      LINEAR kernel by itself, a non-primitive node an OPAQUE one);
 *   2. every ONNX op whole (the primitives sharing an origin), when legal;
 *   3. per seed node, a greedy growth: repeatedly add the first adjacent
 *      node (in topological order) that keeps the set legal and convex,
 *      recording every step (this reaches whole softmax / layer norm /
 *      matmul + epilogue chains and pieces crossing op boundaries);
 *   4. per seed node, a breadth-first enumeration over set sizes of the
 *      connected sets whose first node (topologically) is the seed, adding
 *      one adjacent node at a time; sets that are not convex, or that no
 *      superset can make legal (two linear ops, a linear op and a reduction,
 *      an opaque op with others, an epilogue leaving the linear output's
 *      space, reductions with different kept spaces), are not grown.
 * Sizes are capped by max_nodes; each seed yields at most max_per_seed
 * legal sets (phases 3 and 4 together) and evaluates at most
 * EVALS_PER_LEGAL times as many sets, so the work is linear in the graph
 * size.  Candidates are deduplicated by node set (not by canonical hash,
 * which would merge the same subgraph at different places).
 */
#include "orchestrate/kernel_ws.h"

#define DEFAULT_MAX_NODES 24
#define DEFAULT_MAX_PER_SEED 64
#define EVALS_PER_LEGAL 16

/* A hash table of node sets (sorted topo positions), open addressing. */
typedef struct set_table {
  int cap;          /* power of two, or 0 */
  int n;
  int *slot;        /* index + 1 of the set, 0 empty */
  uint64_t *key;
} set_table;

/* A set of the current seed: pool[off .. off+len); pruned sets are kept
 * only to avoid evaluating them twice. */
typedef struct set_rec {
  int off, len;
  bool pruned;
} set_rec;

typedef struct enum_ctx {
  const fsl_graph *g;
  const int *topo;
  fsl_kernel_ws *ws;
  fsl_kernel_set *out;
  set_table global;          /* -> out->k index */
  int max_nodes, max_per_seed;
  /* per seed */
  set_table local;           /* -> sets index */
  int *pool; int n_pool, cap_pool;     /* sorted topo positions of sets */
  set_rec *sets; int n_sets, cap_sets;
  int seed_legal, seed_evals;
  /* scratch */
  fsl_node **nodes; int cap_nodes;
  int *adj; int cap_adj;
  int *tmp; int cap_tmp;
} enum_ctx;

static fsl_status nomem(void) { return fsl_errorf(FSL_ERR_NOMEM, "out of memory (candidate kernels)"); }

static uint64_t set_hash(const int *tp, int n) {
  return fsl_hash(FSL_HASH_INIT, tp, sizeof *tp * (size_t)n);
}

static void table_clear(set_table *t) {
  if (t->cap) memset(t->slot, 0, sizeof *t->slot * (size_t)t->cap);
  t->n = 0;
}

static void table_free(set_table *t) {
  free(t->slot);
  free(t->key);
  memset(t, 0, sizeof *t);
}

/* Inserts (key -> idx) without checking for presence; grows at load 1/2. */
static bool table_put(set_table *t, uint64_t key, int idx) {
  if (2 * (t->n + 1) > t->cap) {
    int nc = t->cap ? t->cap * 2 : 1024;
    int *ns = calloc((size_t)nc, sizeof *ns);
    uint64_t *nk = calloc((size_t)nc, sizeof *nk);
    if (!ns || !nk) {
      free(ns);
      free(nk);
      return false;
    }
    for (int i = 0; i < t->cap; i++) {
      if (!t->slot[i]) continue;
      size_t h = (size_t)t->key[i] & (size_t)(nc - 1);
      while (ns[h]) h = (h + 1) & (size_t)(nc - 1);
      ns[h] = t->slot[i];
      nk[h] = t->key[i];
    }
    free(t->slot);
    free(t->key);
    t->slot = ns;
    t->key = nk;
    t->cap = nc;
  }
  size_t h = (size_t)key & (size_t)(t->cap - 1);
  while (t->slot[h]) h = (h + 1) & (size_t)(t->cap - 1);
  t->slot[h] = idx + 1;
  t->key[h] = key;
  t->n++;
  return true;
}

/* Is the kernel's node set exactly g->nodes[tp[0..n)]? */
static bool kernel_is(const enum_ctx *c, const fsl_kernel *k, const int *tp, int n) {
  if (k->n_nodes != n) return false;
  for (int i = 0; i < n; i++)
    if (k->nodes[i] != c->g->nodes[tp[i]]) return false;
  return true;
}

static bool global_has(const enum_ctx *c, uint64_t key, const int *tp, int n) {
  const set_table *t = &c->global;
  if (!t->cap) return false;
  for (size_t h = (size_t)key & (size_t)(t->cap - 1); t->slot[h]; h = (h + 1) & (size_t)(t->cap - 1))
    if (t->key[h] == key && kernel_is(c, c->out->k[t->slot[h] - 1], tp, n)) return true;
  return false;
}

static bool local_has(const enum_ctx *c, uint64_t key, const int *tp, int n) {
  const set_table *t = &c->local;
  if (!t->cap) return false;
  for (size_t h = (size_t)key & (size_t)(t->cap - 1); t->slot[h]; h = (h + 1) & (size_t)(t->cap - 1)) {
    int s = t->slot[h] - 1;
    if (t->key[h] != key || c->sets[s].len != n) continue;
    if (!memcmp(c->pool + c->sets[s].off, tp, sizeof *tp * (size_t)n)) return true;
  }
  return false;
}

static fsl_status add_kernel(enum_ctx *c, fsl_kernel *k, uint64_t key) {
  fsl_kernel_set *s = c->out;
  if (!fsl_grow((void **)&s->k, &s->cap, s->n + 1, sizeof *s->k) || !table_put(&c->global, key, s->n)) {
    fsl_kernel_free(k);
    return nomem();
  }
  k->id = s->n;
  s->k[s->n++] = k;
  return FSL_OK;
}

/*
 * Evaluates the set g->nodes[tp[0..n)] (tp sorted): *verdict as
 * fsl_kernel_ws_make; a legal set not yet among the candidates is added.
 */
static fsl_status evaluate(enum_ctx *c, const int *tp, int n, int *verdict) {
  if (!fsl_grow((void **)&c->nodes, &c->cap_nodes, n, sizeof *c->nodes)) return nomem();
  for (int i = 0; i < n; i++) c->nodes[i] = c->g->nodes[tp[i]];
  uint64_t key = set_hash(tp, n);
  bool have = global_has(c, key, tp, n);
  fsl_kernel *k = NULL;
  FSL_TRY(fsl_kernel_ws_make(c->ws, c->nodes, n, !have, &k, NULL, verdict));
  if (k) return add_kernel(c, k, key);
  return FSL_OK;
}

/* A node that may join a multi-node kernel. */
static bool joinable(const fsl_node *nd) {
  const fsl_op_info *oi = fsl_op_get(nd->op);
  return oi->primitive && oi->kind != FSL_KIND_OPAQUE;
}

static bool contains(const int *tp, int n, int x) {
  int lo = 0, hi = n - 1;
  while (lo <= hi) {
    int mid = (lo + hi) / 2;
    if (tp[mid] == x) return true;
    if (tp[mid] < x) lo = mid + 1;
    else hi = mid - 1;
  }
  return false;
}

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* Joinable neighbours (producers of inputs, consumers of outputs) of the set,
 * with topo position > min_topo, sorted and unique, into c->adj. */
static fsl_status neighbours(enum_ctx *c, const int *tp, int n, int min_topo, int *n_adj) {
  int m = 0;
  for (int i = 0; i < n; i++) {
    const fsl_node *nd = c->g->nodes[tp[i]];
    for (int j = 0; j < nd->n_in; j++) {
      const fsl_value *v = nd->in[j];
      if (!v || !v->producer) continue;
      int t = c->topo[v->producer->id];
      if (t <= min_topo || !joinable(v->producer) || contains(tp, n, t)) continue;
      if (!fsl_grow((void **)&c->adj, &c->cap_adj, m + 1, sizeof *c->adj)) return nomem();
      c->adj[m++] = t;
    }
    for (int j = 0; j < nd->n_out; j++) {
      const fsl_value *v = nd->out[j];
      if (!v) continue;
      for (int k = 0; k < v->n_cons; k++) {
        int t = c->topo[v->cons[k]->id];
        if (t <= min_topo || !joinable(v->cons[k]) || contains(tp, n, t)) continue;
        if (!fsl_grow((void **)&c->adj, &c->cap_adj, m + 1, sizeof *c->adj)) return nomem();
        c->adj[m++] = t;
      }
    }
  }
  if (m > 1) qsort(c->adj, (size_t)m, sizeof *c->adj, cmp_int);
  int u = 0;
  for (int i = 0; i < m; i++)
    if (u == 0 || c->adj[u - 1] != c->adj[i]) c->adj[u++] = c->adj[i];
  *n_adj = u;
  return FSL_OK;
}

/* tmp = tp[0..n) with x inserted in order. */
static fsl_status with_node(enum_ctx *c, const int *tp, int n, int x) {
  if (!fsl_grow((void **)&c->tmp, &c->cap_tmp, n + 1, sizeof *c->tmp)) return nomem();
  int j = 0;
  for (int i = 0; i < n; i++) {
    if (x >= 0 && tp[i] > x) {
      c->tmp[j++] = x;
      x = -1;
    }
    c->tmp[j++] = tp[i];
  }
  if (x >= 0) c->tmp[j++] = x;
  return FSL_OK;
}

/* Stores tmp[0..n) as a new set of this seed (pool may move). */
static fsl_status store_set(enum_ctx *c, int n, uint64_t key, bool pruned) {
  if (!fsl_grow((void **)&c->pool, &c->cap_pool, c->n_pool + n, sizeof *c->pool)) return nomem();
  if (!fsl_grow((void **)&c->sets, &c->cap_sets, c->n_sets + 1, sizeof *c->sets)) return nomem();
  memcpy(c->pool + c->n_pool, c->tmp, sizeof *c->tmp * (size_t)n);
  c->sets[c->n_sets] = (set_rec){c->n_pool, n, pruned};
  c->n_pool += n;
  if (!table_put(&c->local, key, c->n_sets)) return nomem();
  c->n_sets++;
  return FSL_OK;
}

static bool seed_done(const enum_ctx *c) {
  return c->seed_legal >= c->max_per_seed || c->seed_evals >= c->max_per_seed * EVALS_PER_LEGAL;
}

/* Phase 3: greedy growth from the seed (both directions). */
static fsl_status greedy(enum_ctx *c, int seed) {
  int cur[256], n = 1;
  cur[0] = seed;
  int cap = c->max_nodes < (int)FSL_ARRAY_LEN(cur) ? c->max_nodes : (int)FSL_ARRAY_LEN(cur);
  while (n < cap && !seed_done(c)) {
    int n_adj;
    FSL_TRY(neighbours(c, cur, n, -1, &n_adj));
    bool grown = false;
    for (int a = 0; a < n_adj && !grown && !seed_done(c); a++) {
      FSL_TRY(with_node(c, cur, n, c->adj[a]));
      uint64_t key = set_hash(c->tmp, n + 1);
      if (local_has(c, key, c->tmp, n + 1)) continue;
      int verdict;
      c->seed_evals++;
      FSL_TRY(evaluate(c, c->tmp, n + 1, &verdict));
      FSL_TRY(store_set(c, n + 1, key, verdict == KV_PRUNE));
      if (verdict != KV_LEGAL) continue;
      c->seed_legal++;
      memcpy(cur, c->tmp, sizeof *cur * (size_t)(n + 1));
      n++;
      grown = true;
    }
    if (!grown) break;
  }
  return FSL_OK;
}

/* Phase 4: breadth-first over sizes, the seed first in topological order. */
static fsl_status bfs(enum_ctx *c, int seed) {
  /* the frontier is the range [lo, hi) of sets of the current size */
  c->tmp[0] = seed;
  int lo = c->n_sets;
  FSL_TRY(store_set(c, 1, set_hash(c->tmp, 1), false));
  int hi = c->n_sets;
  for (int size = 2; size <= c->max_nodes && lo < hi && !seed_done(c); size++) {
    for (int s = lo; s < hi && !seed_done(c); s++) {
      if (c->sets[s].pruned) continue;
      int n_adj;
      FSL_TRY(neighbours(c, c->pool + c->sets[s].off, size - 1, seed, &n_adj));
      for (int a = 0; a < n_adj && !seed_done(c); a++) {
        FSL_TRY(with_node(c, c->pool + c->sets[s].off, size - 1, c->adj[a]));
        uint64_t key = set_hash(c->tmp, size);
        if (local_has(c, key, c->tmp, size)) continue;
        int verdict;
        c->seed_evals++;
        FSL_TRY(evaluate(c, c->tmp, size, &verdict));
        if (verdict == KV_LEGAL) c->seed_legal++;
        FSL_TRY(store_set(c, size, key, verdict == KV_PRUNE));
      }
    }
    lo = hi;
    hi = c->n_sets;
  }
  return FSL_OK;
}

/* Phase 2: every ONNX op whole. */
static fsl_status whole_ops(enum_ctx *c) {
  const fsl_graph *g = c->g;
  int n = g->n_nodes;
  int *idx = malloc(sizeof *idx * (size_t)(n > 0 ? n : 1));
  if (!idx) return nomem();
  for (int i = 0; i < n; i++) idx[i] = i;
  /* stable sort by origin (insertion into buckets: origins are ids) */
  int max_origin = -1;
  for (int i = 0; i < n; i++)
    if (g->nodes[i]->origin > max_origin) max_origin = g->nodes[i]->origin;
  int *count = calloc((size_t)max_origin + 2, sizeof *count);
  if (!count) {
    free(idx);
    return nomem();
  }
  for (int i = 0; i < n; i++)
    if (g->nodes[i]->origin >= 0) count[g->nodes[i]->origin + 1]++;
  for (int o = 0; o <= max_origin; o++) count[o + 1] += count[o];
  int m = 0;
  for (int i = 0; i < n; i++)
    if (g->nodes[i]->origin >= 0) idx[count[g->nodes[i]->origin]++] = i, m++;
  free(count);
  fsl_status st = FSL_OK;
  for (int a = 0; a < m && st == FSL_OK;) {
    int b = a + 1;
    while (b < m && g->nodes[idx[b]]->origin == g->nodes[idx[a]]->origin) b++;
    if (b - a > 1 && b - a <= c->max_nodes) {
      bool ok = true;
      for (int i = a; i < b; i++) ok &= joinable(g->nodes[idx[i]]);
      int verdict;
      if (ok) st = evaluate(c, idx + a, b - a, &verdict);
    }
    a = b;
  }
  free(idx);
  return st;
}

/** See orchestrate.h and the top of this file.  `opt` may be NULL (fields
 *  <= 0 take the defaults 24 and 64).  The singletons come first, in the
 *  graph's order; k->id is the index in `out`.  Errors: FSL_ERR_NOMEM,
 *  FSL_ERR_INVALID if a node is not a legal kernel alone (a bug). */
fsl_status fsl_candidates(const fsl_graph *g, const fsl_candidate_options *opt, fsl_kernel_set *out) {
  if (!g || !out) return fsl_errorf(FSL_ERR_ARG, "fsl_candidates: expected a graph and an output set");
  memset(out, 0, sizeof *out);
  out->g = g;
  enum_ctx c;
  memset(&c, 0, sizeof c);
  c.g = g;
  c.out = out;
  c.max_nodes = opt && opt->max_nodes > 0 ? opt->max_nodes : DEFAULT_MAX_NODES;
  c.max_per_seed = opt && opt->max_per_seed > 0 ? opt->max_per_seed : DEFAULT_MAX_PER_SEED;
  int *topo = fsl_graph_topo_index(g);
  if (!topo) return nomem();
  c.topo = topo;
  fsl_status st = fsl_kernel_ws_new(g, topo, &c.ws);
  if (st == FSL_OK) fsl_kernel_ws_set_prologue(c.ws, opt ? opt->prologue : 0);
  /* 1. singletons */
  for (int i = 0; i < g->n_nodes && st == FSL_OK; i++) {
    int verdict;
    st = evaluate(&c, &i, 1, &verdict);
    if (st == FSL_OK && verdict != KV_LEGAL)
      st = fsl_node_errorf(g->nodes[i], FSL_ERR_INVALID, "not a legal kernel by itself");
  }
  /* 2. whole ONNX ops */
  if (st == FSL_OK) st = whole_ops(&c);
  /* 3. and 4. growth from every seed */
  for (int i = 0; i < g->n_nodes && st == FSL_OK; i++) {
    if (!joinable(g->nodes[i]) || c.max_nodes < 2 || (opt && opt->seeds && !opt->seeds[i])) continue;
    c.n_sets = c.n_pool = 0;
    c.seed_legal = c.seed_evals = 0;
    table_clear(&c.local);
    if (!fsl_grow((void **)&c.tmp, &c.cap_tmp, 2, sizeof *c.tmp)) st = nomem();
    if (st == FSL_OK) st = greedy(&c, i);
    if (st == FSL_OK && !seed_done(&c)) {
      /* the canonical enumeration keeps its own local table: greedy sets
       * may grow backwards and must not block canonical ones */
      c.n_sets = c.n_pool = 0;
      table_clear(&c.local);
      st = bfs(&c, i);
    }
  }
  fsl_kernel_ws_free(c.ws);
  table_free(&c.global);
  table_free(&c.local);
  free(c.pool);
  free(c.sets);
  free(c.nodes);
  free(c.adj);
  free(c.tmp);
  free(topo);
  if (st != FSL_OK) fsl_kernel_set_free(out);
  return st;
}
