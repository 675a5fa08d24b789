/*
 * regions.c — the graph cut into the regions whose BLPs the optimal
 * strategy solves one by one (Korch, ASPLOS'24, section 5: a whole model's
 * LP relaxation is weak), what each region reads and must write, a
 * structural hash of a region, and a cache of region costs keyed by that
 * hash (what the rewrite search reuses between neighbouring graphs).
 */
#include "orchestrate/orchestrate.h"

#include <stdlib.h>
#include <string.h>

#define MAX_CUT_VALUES 3
/* Constants up to this many bytes are hashed with their data, as in a
 * kernel's hash (kernel.c): a code generator may inline them. */
#define SMALL_CONST_BYTES 64

/* Whether v is read by a matmul/conv, directly or through reshapes (a
 * linear kernel takes no other prologue, so v must be materialised). */
static bool feeds_linear(const fsl_value *v, int depth) {
  for (int c = 0; c < v->n_cons; c++) {
    const fsl_node *u = v->cons[c];
    if (u->op == FSL_OP_matmul || u->op == FSL_OP_conv) return true;
    if (u->op == FSL_OP_reshape && depth > 0 && u->out[0] && feeds_linear(u->out[0], depth - 1)) return true;
  }
  return false;
}

/*
 * A cut goes after topological position i when at most MAX_CUT_VALUES
 * computed values (not constants or graph inputs) cross it and the value
 * node i produces has two or more consumers, one of them a matmul/conv
 * (through reshapes at most): a fan-out point such as a residual block's
 * input or a transformer layer's output (with, say, an attention mask
 * computed once and read by every layer), which has to be materialised
 * anyway: a linear kernel takes no prologue, and fusing across would mean
 * recomputation.
 */
fsl_status fsl_regions_cut(const fsl_graph *g, const int *topo, int **region, int *n_regions) {
  int n = g->n_nodes;
  int *last = malloc(((size_t)g->n_values + 1) * sizeof *last);   /* value id -> last consumer pos */
  int *delta = calloc((size_t)n + 2, sizeof *delta);               /* live-count changes per boundary */
  int *reg = malloc(((size_t)g->next_node_id + 1) * sizeof *reg);
  bool *cderiv = calloc((size_t)g->n_values + 1, sizeof *cderiv);
  if (!last || !delta || !reg || !cderiv) {
    free(last); free(delta); free(reg); free(cderiv);
    return fsl_errorf(FSL_ERR_NOMEM, "plan: out of memory");
  }
  for (int v = 0; v < g->n_values; v++) last[v] = -1;
  for (int i = 0; i < n; i++)
    for (int k = 0; k < g->nodes[i]->n_in; k++) {
      const fsl_value *v = g->nodes[i]->in[k];
      if (v && topo[g->nodes[i]->id] > last[v->id]) last[v->id] = topo[g->nodes[i]->id];
    }
  for (int o = 0; o < g->n_outputs; o++) last[g->outputs[o]->id] = n; /* live to the end */
  /* values computed from constants only (e.g. a broadcast weight shared by
   * every layer) do not count: they are cheap and live everywhere */
  for (int i = 0; i < n; i++) {
    const fsl_node *nd = g->nodes[i];
    bool c = nd->n_in > 0;
    for (int k = 0; k < nd->n_in && c; k++)
      c = nd->in[k] && (nd->in[k]->data || cderiv[nd->in[k]->id]);
    for (int k = 0; k < nd->n_out; k++)
      if (nd->out[k]) cderiv[nd->out[k]->id] = c;
  }
  /* value produced at p, last read at q: crosses boundaries p .. q-1 */
  for (int i = 0; i < n; i++)
    for (int k = 0; k < g->nodes[i]->n_out; k++) {
      const fsl_value *v = g->nodes[i]->out[k];
      if (!v || last[v->id] <= i || cderiv[v->id]) continue;
      delta[i]++;
      delta[last[v->id]]--;
    }
  int live = 0, r = 0;
  for (int i = 0; i < n; i++) {
    reg[g->nodes[i]->id] = r;
    live += delta[i];
    /* boundary after position i */
    if (live <= MAX_CUT_VALUES && i + 1 < n) {
      const fsl_node *nd = g->nodes[i];
      bool fanout = false;
      for (int k = 0; k < nd->n_out; k++)
        if (nd->out[k] && last[nd->out[k]->id] > i && nd->out[k]->n_cons >= 2 && feeds_linear(nd->out[k], 4))
          fanout = true;
      if (fanout) r++;
    }
  }
  free(last);
  free(delta);
  free(cderiv);
  *region = reg;
  *n_regions = r + 1;
  return FSL_OK;
}

/* Whether region r must write v (a value it computes): a graph output, or
 * read by a later region. */
static bool read_after(const fsl_value *v, const int *region, int r) {
  if (v->is_output) return true;
  for (int c = 0; c < v->n_cons; c++)
    if (region[v->cons[c]->id] > r) return true;
  return false;
}

void fsl_region_io(const fsl_graph *g, const int *region, int r, bool *avail, bool *need) {
  memset(avail, 0, ((size_t)g->n_values + 1) * sizeof *avail);
  memset(need, 0, ((size_t)g->n_values + 1) * sizeof *need);
  for (int i = 0; i < g->n_nodes; i++) {
    const fsl_node *nd = g->nodes[i];
    int rn = region[nd->id];
    for (int k = 0; k < nd->n_out; k++) {
      const fsl_value *v = nd->out[k];
      if (!v) continue;
      if (rn < r) avail[v->id] = true;
      if (rn == r) need[v->id] = read_after(v, region, r);
    }
  }
}

static uint64_t hash_i64(uint64_t h, int64_t x) { return fsl_hash(h, &x, sizeof x); }

/* Chains value v, read by a node of region r, into h: (1, its producer's
 * position in the region, output slot) when the region computes it, else
 * (2, type, constness, a small constant's bytes, its first-use number
 * among the region's inputs).  first[v] / first_region[v]: v's number and
 * the region that numbered it. */
static uint64_t hash_operand(uint64_t h, const fsl_value *v, const int *region, int r, const int *local, int *first,
                             int *first_region, int *n_first) {
  if (!v) return hash_i64(h, -1);
  if (v->producer && region[v->producer->id] == r) {
    int j = 0;
    while (j < v->producer->n_out && v->producer->out[j] != v) j++;
    h = hash_i64(h, 1);
    h = hash_i64(h, local[v->producer->id]);
    return hash_i64(h, j);
  }
  if (first_region[v->id] != r) {
    first_region[v->id] = r;
    first[v->id] = (*n_first)++;
  }
  h = hash_i64(h, 2);
  h = fsl_value_type_hash(h, v);
  h = hash_i64(h, v->data ? 1 : 0);
  int64_t nb = fsl_value_nbytes(v);
  if (v->data && nb >= 0 && nb <= SMALL_CONST_BYTES) h = fsl_hash(h, v->data, (size_t)nb);
  return hash_i64(h, first[v->id]);
}

fsl_status fsl_region_hashes(const fsl_graph *g, const int *region, int n_regions, uint64_t *hash) {
  int *local = malloc(((size_t)g->next_node_id + 1) * sizeof *local);   /* node id -> position in its region */
  int *first = malloc(((size_t)g->n_values + 1) * sizeof *first);       /* value id -> first-use number */
  int *first_region = malloc(((size_t)g->n_values + 1) * sizeof *first_region);
  int *count = calloc((size_t)n_regions + 1, sizeof *count);            /* nodes per region */
  int *n_first = calloc((size_t)n_regions + 1, sizeof *n_first);        /* inputs numbered per region */
  if (!local || !first || !first_region || !count || !n_first) {
    free(local); free(first); free(first_region); free(count); free(n_first);
    return fsl_errorf(FSL_ERR_NOMEM, "plan: out of memory");
  }
  for (int v = 0; v <= g->n_values; v++) first_region[v] = -1;
  for (int r = 0; r < n_regions; r++) hash[r] = FSL_HASH_INIT;
  /* nodes in topological order: a region's producers precede its readers */
  for (int i = 0; i < g->n_nodes; i++) {
    const fsl_node *nd = g->nodes[i];
    int r = region[nd->id];
    local[nd->id] = count[r]++;
    uint64_t h = hash[r];
    h = hash_i64(h, nd->op);
    if (!fsl_op_is_primitive(nd->op)) {
      h = fsl_hash(h, nd->domain ? nd->domain : "", nd->domain ? strlen(nd->domain) + 1 : 1);
      h = fsl_hash(h, nd->op_type ? nd->op_type : "", nd->op_type ? strlen(nd->op_type) + 1 : 1);
    }
    h = hash_i64(h, nd->n_in);
    h = hash_i64(h, nd->n_out);
    for (int k = 0; k < nd->n_attrs; k++) h = fsl_attr_hash(h, &nd->attrs[k]);
    for (int k = 0; k < nd->n_in; k++) h = hash_operand(h, nd->in[k], region, r, local, first, first_region, &n_first[r]);
    for (int k = 0; k < nd->n_out; k++) {
      const fsl_value *v = nd->out[k];
      if (!v) {
        h = hash_i64(h, -1);
        continue;
      }
      h = fsl_value_type_hash(h, v);
      /* read by a later region or a graph output: the region must write it */
      h = hash_i64(h, read_after(v, region, r));
    }
    hash[r] = h;
  }
  for (int r = 0; r < n_regions; r++) hash[r] = hash_i64(hash[r], count[r]);
  free(local); free(first); free(first_region); free(count); free(n_first);
  return FSL_OK;
}

/* ---- the cache: an open-addressing map from region hash to seconds ---- */
struct fsl_region_cache {
  uint64_t *key; /* 0: empty (a hash of 0 is stored as 1) */
  double *cost;
  size_t cap, n;
};

fsl_region_cache *fsl_region_cache_new(void) { return calloc(1, sizeof(fsl_region_cache)); }

void fsl_region_cache_free(fsl_region_cache *c) {
  if (!c) return;
  free(c->key);
  free(c->cost);
  free(c);
}

size_t fsl_region_cache_size(const fsl_region_cache *c) { return c ? c->n : 0; }

bool fsl_region_cache_get(const fsl_region_cache *c, uint64_t h, double *cost_s) {
  if (!c || !c->cap) return false;
  h = h ? h : 1;
  for (size_t j = h & (c->cap - 1);; j = (j + 1) & (c->cap - 1)) {
    if (!c->key[j]) return false;
    if (c->key[j] == h) {
      *cost_s = c->cost[j];
      return true;
    }
  }
}

bool fsl_region_cache_put(fsl_region_cache *c, uint64_t h, double cost_s) {
  if (!c) return false;
  h = h ? h : 1;
  if (2 * (c->n + 1) > c->cap) {
    size_t nc = c->cap ? 2 * c->cap : 256;
    uint64_t *nk = calloc(nc, sizeof *nk);
    double *nv = malloc(nc * sizeof *nv);
    if (!nk || !nv) {
      free(nk);
      free(nv);
      return false;
    }
    for (size_t i = 0; i < c->cap; i++)
      if (c->key[i])
        for (size_t j = c->key[i] & (nc - 1);; j = (j + 1) & (nc - 1))
          if (!nk[j]) {
            nk[j] = c->key[i];
            nv[j] = c->cost[i];
            break;
          }
    free(c->key);
    free(c->cost);
    c->key = nk;
    c->cost = nv;
    c->cap = nc;
  }
  for (size_t j = h & (c->cap - 1);; j = (j + 1) & (c->cap - 1)) {
    if (c->key[j] == h) {
      c->cost[j] = cost_s;
      return true;
    }
    if (!c->key[j]) {
      c->key[j] = h;
      c->cost[j] = cost_s;
      c->n++;
      return true;
    }
  }
}
