/*
 * search.c — the cost-guided search over the rules marked `cost`
 * (substitutions whose benefit depends on what the orchestrator makes of
 * them: merging sibling matmuls or convolutions trades kernels against
 * fused epilogues).  The cost of a graph is the predicted time of its
 * optimal plan (src/orchestrate) on the default device, region by region
 * (fsl_plan_region_cost): a rewrite changes one or two of the regions the
 * optimal strategy solves independently, and the others' optima come from
 * a cache keyed by region hash that lives for one search.
 *
 * The search is TASO's (Jia et al., SOSP'19, Algorithm 2): a priority
 * queue of candidate graphs ordered by cost; the cheapest is taken out and
 * every closed match of every cost rule in it makes a neighbour; a
 * neighbour is queued when it costs less than alpha times the best cost
 * seen (alpha > 1 lets the search pass through a slightly worse graph to a
 * better one: backtracking with relaxation), and the best graph seen is
 * the answer.  Graphs are told apart by a structural hash, so a graph
 * reached twice (two rewrites applied in either order) is costed once.
 *
 * Memory: a neighbour is a clone (fsl_graph_clone) that shares what its
 * parent owns (constants, names, attributes), so a graph lives while it is
 * queued, is the best, or has a live child; the queue holds at most
 * MAX_QUEUE graphs (the costliest is dropped).  The answer's chain of
 * parents down to the caller's graph is handed over with owns_base set.
 */
#include "rewrite/rewrite.h"
#include "orchestrate/orchestrate.h"
#include "passes/passes.h"

#include <math.h>

#include <stdlib.h>

#define DEFAULT_EVALS 256
#define DEFAULT_SECONDS 10.0
/* TASO's is 1.05 (SOSP'19, section 6).  With a linear op's constant
 * post-ops at its own rate (cost.c constant_post_ops) the fire module's
 * path to one merged conv passes a graph 5-10% costlier than the start;
 * at 1.1 the bench models' searches end on the same graphs as at 1.05
 * (yolox_nano, minilm_l3, resnet18, segformer_b0; docs/rewrite.md) */
#define DEFAULT_ALPHA 1.1
#define MAX_ALPHA 4.0
#define MIN_GAIN 1e-3 /* a new best graph is at least 0.1% cheaper than the last */
#define MAX_QUEUE 64
#define CONST_SAMPLES 64 /* elements of a constant that its hash reads */

/* ---- a structural hash of a graph, blind to value and node ids ---- */

/* A constant: its type and CONST_SAMPLES elements spread over it (a
 * collision only makes the search skip a graph, never changes one). */
static uint64_t hash_const(const fsl_value *v) {
  uint64_t h = fsl_value_type_hash(fsl_hash(FSL_HASH_INIT, "const", 5), v);
  int64_t n = fsl_value_numel(v), nb = fsl_value_nbytes(v);
  if (n <= 0 || nb <= 0) return h;
  size_t es = (size_t)(nb / n);
  int64_t step = n > CONST_SAMPLES ? n / CONST_SAMPLES : 1;
  for (int64_t i = 0; i < n; i += step) h = fsl_hash(h, (const char *)v->data + (size_t)i * es, es);
  return fsl_hash(h, (const char *)v->data + (size_t)(n - 1) * es, es);
}

/* Every value hashed from what computes it (op, attributes, operands'
 * hashes; commutative operands in either order), the graph from its
 * outputs' hashes in order and the sum of its nodes' (two equal
 * computations count twice).  0 on out of memory. */
static uint64_t graph_hash(const fsl_graph *g) {
  int n_ids = 0;
  for (int i = 0; i < g->n_values; i++)
    if (g->values[i]->id >= n_ids) n_ids = g->values[i]->id + 1;
  uint64_t *vh = calloc((size_t)n_ids + 1, sizeof *vh);
  if (!vh) return 0;
  for (int i = 0; i < g->n_values; i++) {
    const fsl_value *v = g->values[i];
    if (!v->producer && v->data) vh[v->id] = hash_const(v);
    else if (!v->producer) vh[v->id] = fsl_hash(FSL_HASH_INIT, &v->id, sizeof v->id); /* inputs: by id */
  }
  for (int i = 0; i < g->n_inputs; i++) {
    uint64_t h = fsl_value_type_hash(fsl_hash(FSL_HASH_INIT, "input", 5), g->inputs[i]);
    vh[g->inputs[i]->id] = fsl_hash(h, &i, sizeof i);
  }
  uint64_t sum = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const fsl_node *n = g->nodes[i];
    int32_t head[3] = {(int32_t)n->op, n->n_in, n->n_out};
    uint64_t h = fsl_hash(FSL_HASH_INIT, head, sizeof head), ah = 0;
    for (int k = 0; k < n->n_attrs; k++) ah += fsl_attr_hash(FSL_HASH_INIT, &n->attrs[k]); /* in any order */
    h = fsl_hash(h, &ah, sizeof ah);
    uint64_t in[2];
    if (fsl_rw_commutative(n->op) && n->n_in == 2 && n->in[0] && n->in[1]) {
      in[0] = vh[n->in[0]->id];
      in[1] = vh[n->in[1]->id];
      if (in[0] > in[1]) in[0] ^= in[1], in[1] ^= in[0], in[0] ^= in[1];
      h = fsl_hash(h, in, sizeof in);
    } else {
      for (int k = 0; k < n->n_in; k++) {
        uint64_t x = n->in[k] ? vh[n->in[k]->id] : 0;
        h = fsl_hash(h, &x, sizeof x);
      }
    }
    for (int k = 0; k < n->n_out; k++) {
      uint64_t x = fsl_value_type_hash(fsl_hash(h, &k, sizeof k), n->out[k]);
      vh[n->out[k]->id] = x;
      sum += x;
    }
  }
  uint64_t h = fsl_hash(FSL_HASH_INIT, &sum, sizeof sum);
  for (int i = 0; i < g->n_outputs; i++) h = fsl_hash(h, &vh[g->outputs[i]->id], sizeof(uint64_t));
  free(vh);
  return h ? h : 1;
}

/* ---- the graphs seen: an open-addressing set of hashes ---- */
typedef struct seen_set {
  uint64_t *slot; /* 0: empty */
  size_t cap, n;
} seen_set;

/* Whether h was seen before; adds it.  -1 on out of memory. */
static int seen_add(seen_set *s, uint64_t h) {
  if (2 * (s->n + 1) > s->cap) {
    size_t nc = s->cap ? 2 * s->cap : 256;
    uint64_t *ns = calloc(nc, sizeof *ns);
    if (!ns) return -1;
    for (size_t i = 0; i < s->cap; i++)
      if (s->slot[i])
        for (size_t j = s->slot[i] & (nc - 1);; j = (j + 1) & (nc - 1))
          if (!ns[j]) {
            ns[j] = s->slot[i];
            break;
          }
    free(s->slot);
    s->slot = ns;
    s->cap = nc;
  }
  for (size_t j = h & (s->cap - 1);; j = (j + 1) & (s->cap - 1)) {
    if (s->slot[j] == h) return 1;
    if (!s->slot[j]) {
      s->slot[j] = h;
      s->n++;
      return 0;
    }
  }
}

/* ---- candidates ---- */
typedef struct cand {
  fsl_graph *g;
  double cost;
  struct cand *parent; /* g is a clone of parent->g (NULL: the caller's graph) */
  int refs;            /* queued, the best, being expanded, and one per live child */
  int *fired;          /* per rule: applications from the caller's graph to g */
  int n_applied;
} cand;

/* Drops one reference; a candidate nothing holds is freed, then its parent
 * loses the reference the child held (the caller's graph is never freed). */
static void release(cand *c) {
  while (c && --c->refs == 0) {
    cand *p = c->parent;
    if (p) fsl_graph_free(c->g);
    free(c->fired);
    free(c);
    c = p;
  }
}

/* The queue: at most MAX_QUEUE candidates sorted by cost (ties: the one
 * queued first comes first, so the search is the same on every run). */
typedef struct queue {
  cand *c[MAX_QUEUE];
  int n;
} queue;

static void push(queue *q, cand *c) {
  if (q->n == MAX_QUEUE) {
    if (c->cost >= q->c[q->n - 1]->cost) return; /* costlier than everything kept */
    release(q->c[--q->n]);
  }
  int i = q->n;
  while (i > 0 && q->c[i - 1]->cost > c->cost) i--;
  memmove(&q->c[i + 1], &q->c[i], sizeof *q->c * (size_t)(q->n - i));
  q->c[i] = c;
  q->n++;
  c->refs++;
}

static cand *pop(queue *q) {
  cand *c = q->c[0];
  memmove(&q->c[0], &q->c[1], sizeof *q->c * (size_t)--q->n);
  return c; /* the queue's reference passes to the caller */
}

/* Rule r at node index i of parent's graph, on a clone (with fsl_rewrite's
 * rules applied after it): the new candidate, not yet costed, with its
 * hash; *out NULL when the rewrite does not apply there. */
static fsl_status neighbour(cand *parent, int i, int k, const fsl_ruleset *rs, cand **out, uint64_t *hash) {
  *out = NULL;
  cand *c = calloc(1, sizeof *c);
  int *fired = calloc((size_t)rs->n_rules + FSL_RW_N_CODED, sizeof *fired);
  fsl_graph *g = c && fired ? fsl_graph_clone(parent->g) : NULL;
  if (!g) {
    free(c);
    free(fired);
    return fsl_errorf(FSL_ERR_NOMEM, "rewrite search: out of memory");
  }
  fsl_rw_match m;
  fsl_rewrite_stats sub = {0};
  fsl_status st = fsl_rw_match_at(&rs->rules[k], g->nodes[i], &m) ? fsl_rw_apply(g, &m) : FSL_ERR_UNSUPPORTED;
  if (st == FSL_OK) st = fsl_graph_toposort(g);
  if (st == FSL_OK) st = fsl_pass_dce(g);
  if (st == FSL_OK) st = fsl_rewrite(g, rs, &sub);
  if (st == FSL_OK && !(*hash = graph_hash(g))) st = fsl_errorf(FSL_ERR_NOMEM, "rewrite search: out of memory");
  if (st != FSL_OK) {
    fsl_graph_free(g);
    free(c);
    free(fired);
    free(sub.fired);
    return st == FSL_ERR_UNSUPPORTED ? FSL_OK : st;
  }
  memcpy(fired, parent->fired, sizeof *fired * ((size_t)rs->n_rules + FSL_RW_N_CODED));
  fired[k]++;
  for (int r = 0; r < rs->n_rules + FSL_RW_N_CODED && sub.fired; r++) fired[r] += sub.fired[r];
  free(sub.fired);
  c->g = g;
  c->parent = parent;
  c->fired = fired;
  c->n_applied = parent->n_applied + 1 + sub.n_applied;
  parent->refs++;
  *out = c;
  return FSL_OK;
}

double fsl_rewrite_search_alpha(const fsl_rewrite_search_opts *o) {
  if (o && o->alpha >= 1.0) return o->alpha < MAX_ALPHA ? o->alpha : MAX_ALPHA;
  const char *e = getenv("FSL_REWRITE_ALPHA");
  char *end;
  double a = e && *e ? strtod(e, &end) : 0;
  if (e && *e && !*end && a >= 1.0) return a < MAX_ALPHA ? a : MAX_ALPHA;
  return DEFAULT_ALPHA;
}

fsl_status fsl_rewrite_search(fsl_graph **gp, const fsl_ruleset *rs, const fsl_rewrite_search_opts *o,
                              fsl_rewrite_stats *stats) {
  if (!gp || !*gp || !rs || !stats) return fsl_errorf(FSL_ERR_ARG, "fsl_rewrite_search: NULL argument");
  double t0 = fsl_now_s();
  int max_evals = !o || o->max_evals == 0 ? DEFAULT_EVALS : o->max_evals < 0 ? 0 : o->max_evals;
  double max_s = !o || o->max_seconds == 0 ? DEFAULT_SECONDS : o->max_seconds < 0 ? HUGE_VAL : o->max_seconds;
  double alpha = fsl_rewrite_search_alpha(o);
  FSL_TRY(fsl_rewrite(*gp, rs, stats));
  fsl_device dev;
  fsl_device_default(&dev);
  fsl_region_cache *rc = fsl_region_cache_new();
  fsl_region_cost_stats rstats = {0};
  queue q = {.n = 0};
  seen_set seen = {0};
  cand *root = calloc(1, sizeof *root), *best = root;
  if (root) root->refs = 1; /* the best */
  fsl_status st = rc && root && (root->fired = calloc((size_t)rs->n_rules + FSL_RW_N_CODED, sizeof *root->fired))
                      ? FSL_OK
                      : fsl_errorf(FSL_ERR_NOMEM, "rewrite search: out of memory");
  uint64_t h0 = st == FSL_OK ? graph_hash(*gp) : 0;
  if (st == FSL_OK && (!h0 || seen_add(&seen, h0) < 0)) st = fsl_errorf(FSL_ERR_NOMEM, "rewrite search: out of memory");
  if (st == FSL_OK) {
    root->g = *gp;
    root->cost = NAN; /* costed with the first neighbour: a graph no cost rule matches costs nothing */
    push(&q, root);
  }
  int evals = 0, expanded = 0;
  bool out_of_budget = false;
  while (st == FSL_OK && q.n && !out_of_budget) {
    cand *cur = pop(&q);
    expanded++;
    for (int i = 0; i < cur->g->n_nodes && st == FSL_OK && !out_of_budget; i++) {
      for (int k = 0; k < rs->n_rules && st == FSL_OK; k++) {
        const fsl_rule *r = &rs->rules[k];
        fsl_rw_match m;
        if (!r->cost || r->from[0]->op != cur->g->nodes[i]->op || !fsl_rw_match_at(r, cur->g->nodes[i], &m) ||
            !fsl_rw_match_is_closed(&m))
          continue;
        if (evals >= max_evals || fsl_now_s() - t0 > max_s) {
          out_of_budget = true;
          break;
        }
        cand *next;
        uint64_t h;
        st = neighbour(cur, i, k, rs, &next, &h);
        if (st != FSL_OK || !next) continue;
        int was_seen = seen_add(&seen, h);
        if (was_seen < 0) st = fsl_errorf(FSL_ERR_NOMEM, "rewrite search: out of memory");
        if (st == FSL_OK && !was_seen && isnan(root->cost))
          st = fsl_plan_region_cost(root->g, &dev, rc, &root->cost, &rstats);
        if (st == FSL_OK && !was_seen) {
          st = fsl_plan_region_cost(next->g, &dev, rc, &next->cost, &rstats);
          evals++;
        }
        next->refs = 1; /* while it is looked at here */
        if (st == FSL_OK && !was_seen) {
          /* queued when within alpha of the best so far (alpha = 1: only a new best) */
          bool keep = next->cost < alpha * best->cost * (1.0 - MIN_GAIN);
          if (next->cost < best->cost * (1.0 - MIN_GAIN)) {
            next->refs++;
            release(best);
            best = next;
          }
          if (keep) push(&q, next);
        }
        release(next);
      }
    }
    release(cur);
  }
  while (q.n) release(pop(&q));
  free(seen.slot);
  fsl_region_cache_free(rc);
  stats->n_evals = evals;
  stats->n_expanded = expanded;
  stats->n_regions_solved = rstats.solved;
  stats->n_regions_cached = rstats.cached;
  if (st != FSL_OK) {
    release(best); /* frees every clone: the caller's graph stays */
    free(stats->fired);
    stats->fired = NULL;
    return fsl_error_context(st, "rewrite search");
  }
  /* hand the best graph over with its chain of parents, each owning the next */
  for (int r = 0; r < rs->n_rules + FSL_RW_N_CODED && stats->fired; r++) stats->fired[r] += best->fired[r];
  stats->n_applied += best->n_applied;
  *gp = best->g;
  for (cand *c = best; c; c = c->parent) c->g->owns_base = c->parent != NULL;
  while (best) { /* free the candidates, not their graphs */
    cand *p = best->parent;
    free(best->fired);
    free(best);
    best = p;
  }
  stats->seconds = fsl_now_s() - t0;
  return FSL_OK;
}
