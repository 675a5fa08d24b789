/*
 * plan.c — a strategy's plan: builds it (candidates -> cost -> BLP for
 * optimal, a rule-based baseline otherwise), verifies it and prints it.
 * DESIGN.md section 5.
 */
#include "orchestrate/baselines.h"
#include "orchestrate/profcache.h"

#include <math.h>

uint64_t fsl_plan_hash(const fsl_plan *p) {
  uint64_t h = fsl_hash(FSL_HASH_INIT, &p->kernels.n, sizeof p->kernels.n);
  for (int i = 0; i < p->kernels.n; i++) {
    const fsl_kernel *k = p->kernels.k[i];
    int32_t head[2] = {(int32_t)k->kind, k->n_nodes};
    h = fsl_hash(h, head, sizeof head);
    for (int j = 0; j < k->n_nodes; j++) h = fsl_hash(h, &k->nodes[j]->id, sizeof k->nodes[j]->id);
  }
  return h;
}

const char *fsl_strategy_name(fsl_strategy s) {
  switch (s) {
  case FSL_STRATEGY_UNFUSED: return "unfused";
  case FSL_STRATEGY_OPFUSE: return "opfuse";
  case FSL_STRATEGY_GREEDY: return "greedy";
  case FSL_STRATEGY_OPTIMAL: return "optimal";
  default: return "?";
  }
}

static const char *kind_name(fsl_kernel_kind k) {
  switch (k) {
  case FSL_KERNEL_LOOP: return "loop";
  case FSL_KERNEL_REDUCE: return "reduce";
  case FSL_KERNEL_LINEAR: return "linear";
  case FSL_KERNEL_OPAQUE: return "opaque";
  default: return "?";
  }
}

/* ---- measured costs ---- */

#define PROFILE_BATCH 128

/* Profiling state of one plan build: the cache and every kernel time known
 * so far, by canonical hash (NaN: not measurable). */
typedef struct prof {
  const fsl_profiler *pr;   /* NULL: analytic costs only */
  fsl_profcache *cache;
  const fsl_graph *g;
  bool measure_failed;      /* a batch failed: measure nothing more */
  bool warned_write;
  uint64_t *keys;           /* open addressing, cap a power of two */
  double *vals;
  bool *used;
  size_t cap, n;
  int n_cached, n_measured, n_analytic;
  double seconds;
} prof;

static void prof_warn(const char *what) {
  fprintf(stderr, "fissile: warning: %s; %s\n", fsl_last_error(), what);
  fsl_error_clear();
}

static size_t prof_slot(const prof *p, uint64_t h) {
  size_t i = (size_t)(h * 0x9e3779b97f4a7c15ULL) & (p->cap - 1);
  while (p->used[i] && p->keys[i] != h) i = (i + 1) & (p->cap - 1);
  return i;
}

/* Whether the time of hash h is known; *v receives it. */
static bool prof_known(const prof *p, uint64_t h, double *v) {
  if (!p->cap) return false;
  size_t i = prof_slot(p, h);
  if (!p->used[i]) return false;
  *v = p->vals[i];
  return true;
}

static fsl_status prof_set(prof *p, uint64_t h, double v) {
  if (2 * (p->n + 1) > p->cap) {
    prof old = *p;
    p->cap = old.cap ? 2 * old.cap : 1024;
    p->keys = malloc(p->cap * sizeof *p->keys);
    p->vals = malloc(p->cap * sizeof *p->vals);
    p->used = calloc(p->cap, sizeof *p->used);
    if (!p->keys || !p->vals || !p->used) {
      free(p->keys); free(p->vals); free(p->used);
      p->keys = old.keys; p->vals = old.vals; p->used = old.used; p->cap = old.cap;
      return fsl_errorf(FSL_ERR_NOMEM, "plan: out of memory");
    }
    for (size_t i = 0; i < old.cap; i++)
      if (old.used[i]) {
        size_t j = prof_slot(p, old.keys[i]);
        p->used[j] = true;
        p->keys[j] = old.keys[i];
        p->vals[j] = old.vals[i];
      }
    free(old.keys); free(old.vals); free(old.used);
  }
  size_t i = prof_slot(p, h);
  if (!p->used[i]) p->n++;
  p->used[i] = true;
  p->keys[i] = h;
  p->vals[i] = v;
  return FSL_OK;
}

/* Opens the profile cache; without one, costs stay analytic (a warning). */
static void prof_open(prof *p, const fsl_profiler *pr, const fsl_graph *g) {
  memset(p, 0, sizeof *p);
  p->g = g;
  if (!pr || !pr->measure) return;
  if (fsl_profcache_open(pr->cache_path, &p->cache) != FSL_OK) {
    prof_warn("profiling off, using analytic costs");
    return;
  }
  p->pr = pr;
}

static void prof_close(prof *p) {
  fsl_profcache_close(p->cache);
  free(p->keys);
  free(p->vals);
  free(p->used);
  memset(p, 0, sizeof *p);
}

/* Stores one measured batch; a failure only costs the cache entries. */
static void prof_store(prof *p, fsl_kernel *const *ks, int n, const double *secs) {
  uint64_t *h = malloc(sizeof *h * (size_t)(n > 0 ? n : 1));
  fsl_status st = h ? FSL_OK : fsl_errorf(FSL_ERR_NOMEM, "profile cache: out of memory");
  for (int i = 0; h && i < n; i++) h[i] = ks[i]->hash;
  if (st == FSL_OK) st = fsl_profcache_put(p->cache, p->pr->device, p->pr->device_name, n, h, secs);
  free(h);
  if (st != FSL_OK && !p->warned_write) prof_warn("measured times are used for this plan only");
  else if (st != FSL_OK) fsl_error_clear();
  if (st != FSL_OK) p->warned_write = true;
}

/*
 * Makes the time of every kernel of ks[0..n) known: from earlier in this
 * build, from the cache, or measured in batches (one representative per
 * hash) and stored batch by batch.  Opaque kernels (run by the reference
 * interpreter) stay analytic.  Only out-of-memory is an error.
 */
static fsl_status prof_kernels(prof *p, fsl_kernel *const *ks, int n) {
  if (!p->pr) return FSL_OK;
  fsl_kernel **todo = malloc(sizeof *todo * (size_t)(n > 0 ? n : 1));
  double *secs = malloc(sizeof *secs * (size_t)(n > 0 ? n : 1));
  if (!todo || !secs) {
    free(todo);
    free(secs);
    return fsl_errorf(FSL_ERR_NOMEM, "plan: out of memory");
  }
  int nt = 0;
  fsl_status st = FSL_OK;
  double v;
  for (int i = 0; i < n && st == FSL_OK && p->pr; i++) {
    fsl_kernel *k = ks[i];
    if (prof_known(p, k->hash, &v)) continue;
    bool found = false;
    if (k->kind == FSL_KERNEL_OPAQUE || p->measure_failed) {
      p->n_analytic++;
      st = prof_set(p, k->hash, NAN);
      continue;
    }
    if (fsl_profcache_get(p->cache, p->pr->device, k->hash, &found, &v) != FSL_OK) {
      /* a database that breaks while in use: no more profiling */
      prof_warn("profiling off, using analytic costs for the rest");
      p->measure_failed = true;
      p->n_analytic++;
      st = prof_set(p, k->hash, NAN);
      continue;
    }
    if (found) {
      if (isnan(v)) p->n_analytic++;
      else p->n_cached++;
      st = prof_set(p, k->hash, v);
    } else {
      /* marks the hash (NaN) so that a duplicate is not queued twice */
      todo[nt++] = k;
      st = prof_set(p, k->hash, NAN);
    }
  }
  int batch = p->pr && p->pr->batch > 0 ? p->pr->batch : PROFILE_BATCH;
  double t0 = fsl_now_s();
  if (nt > 0) fsl_progress_emit("profile", "kernels measured", 0, nt, 0, false);
  for (int b = 0; b < nt && st == FSL_OK; b += batch) {
    int nb = nt - b < batch ? nt - b : batch;
    if (p->measure_failed) {
      p->n_analytic += nb;
      continue;
    }
    fsl_status ms = p->pr->measure(p->pr->ctx, p->g, todo + b, nb, secs);
    if (ms == FSL_ERR_NOMEM) {
      st = ms;
      break;
    }
    if (ms != FSL_OK) {
      prof_warn("profiling stopped, the remaining kernels keep their analytic cost");
      p->measure_failed = true;
      p->n_analytic += nb;
      continue;
    }
    for (int i = 0; i < nb && st == FSL_OK; i++) {
      if (!(secs[i] > 0 && isfinite(secs[i]))) secs[i] = NAN;
      if (isnan(secs[i])) p->n_analytic++;
      else p->n_measured++;
      st = prof_set(p, todo[b + i]->hash, secs[i]);
    }
    if (st == FSL_OK) prof_store(p, todo + b, nb, secs);
    if (b + nb < nt) fsl_progress_emit("profile", "kernels measured", b + nb, nt, fsl_now_s() - t0, false);
  }
  if (nt > 0) fsl_progress_emit("profile", "kernels measured", nt, nt, fsl_now_s() - t0, true);
  p->seconds += fsl_now_s() - t0;
  free(todo);
  free(secs);
  return st;
}

/* Cost of k: its measured time when known, else the roofline (cost.c);
 * stored in k->cost_s. */
static double prof_cost(const prof *p, fsl_kernel *k, const fsl_device *d) {
  double t = fsl_kernel_cost(k, d), v;
  if (p && prof_known(p, k->hash, &v) && !isnan(v)) k->cost_s = t = v;
  return t;
}

/* ---- the optimal strategy, region by region ---- */

/* Total solver time for one model (the target: orchestration <=
 * 10 s), shared by the regions in order, each getting its node share of
 * what is left; the environment variable FSL_SOLVE_BUDGET (seconds)
 * overrides it.  A region whose share is used up keeps its best selection
 * so far (at worst the solver's greedy one; the plan then falls back to
 * the greedy baseline when that is cheaper). */
#define SOLVE_BUDGET_S 8.0

/* The graph is cut into regions whose BLPs are solved independently
 * (fsl_regions_cut, regions.c); candidates that span a cut are dropped,
 * and the crossing values are a region's required outputs and the next
 * regions' inputs. */

/* Region of every candidate (kreg[k]; -1 when its nodes span regions). */
static void candidate_regions(const fsl_kernel_set *cands, const int *reg, int *kreg) {
  for (int k = 0; k < cands->n; k++) {
    const fsl_kernel *kk = cands->k[k];
    kreg[k] = reg[kk->nodes[0]->id];
    for (int i = 1; i < kk->n_nodes; i++)
      if (reg[kk->nodes[i]->id] != reg[kk->nodes[0]->id]) kreg[k] = -1;
  }
}

/* Solves region r's BLP over the candidates of cands with kreg[k] == r
 * (costs set), sub[] and avail/need (g->n_values + 1 each) as scratch;
 * the chosen kernels go to *chosen (owned by the caller). */
static fsl_status solve_region(const fsl_graph *g, const fsl_kernel_set *cands, const int *reg, const int *kreg,
                               int r, const fsl_solve_options *base, fsl_kernel **sub, bool *avail, bool *need,
                               fsl_kernel_set *chosen, fsl_solve_result *res) {
  int n_sub = 0;
  for (int k = 0; k < cands->n; k++)
    if (kreg[k] == r) sub[n_sub++] = cands->k[k];
  fsl_region_io(g, reg, r, avail, need);
  fsl_kernel_set cs = {.g = g, .n = n_sub, .cap = n_sub, .k = sub};
  fsl_solve_options sopt = *base;
  sopt.avail = avail;
  sopt.need = need;
  sopt.no_recompute = true;
  *chosen = (fsl_kernel_set){.g = g};
  return fsl_solve(&cs, &sopt, chosen, res);
}

/* Solves every region's BLP and concatenates the choices in region order. */
static fsl_status solve_regions(const fsl_graph *g, const fsl_kernel_set *cands, const fsl_device *d, prof *pf,
                                fsl_kernel_set *out, bool *optimal) {
  int *topo = fsl_graph_topo_index(g), *reg = NULL, nr = 0;
  if (!topo) return fsl_errorf(FSL_ERR_NOMEM, "plan: out of memory");
  fsl_status st = fsl_regions_cut(g, topo, &reg, &nr);
  bool *avail = calloc((size_t)g->n_values + 1, sizeof *avail);
  bool *need = calloc((size_t)g->n_values + 1, sizeof *need);
  fsl_kernel **sub = malloc(((size_t)cands->n + 1) * sizeof *sub);
  int *kreg = malloc(((size_t)cands->n + 1) * sizeof *kreg);
  if (st == FSL_OK && (!avail || !need || !sub || !kreg)) st = fsl_errorf(FSL_ERR_NOMEM, "plan: out of memory");
  *optimal = true;
  double budget = getenv("FSL_SOLVE_BUDGET") ? atof(getenv("FSL_SOLVE_BUDGET")) : SOLVE_BUDGET_S;
  double t_start = fsl_now_s();
  int nodes_left = g->n_nodes;
  if (st == FSL_OK) candidate_regions(cands, reg, kreg);
  /* costs of the candidates the BLPs see: measured when profiling (else and
   * where a measurement fails, the roofline) */
  int n_in_region = 0;
  for (int k = 0; st == FSL_OK && k < cands->n; k++)
    if (kreg[k] >= 0) sub[n_in_region++] = cands->k[k];
  if (st == FSL_OK) st = prof_kernels(pf, sub, n_in_region);
  for (int k = 0; st == FSL_OK && k < n_in_region; k++) prof_cost(pf, sub[k], d);
  for (int r = 0; st == FSL_OK && r < nr; r++) {
    int n_nodes = 0;
    for (int i = 0; i < g->n_nodes; i++) n_nodes += reg[g->nodes[i]->id] == r;
    /* this region's share of what is left of the budget, by node count:
     * time that earlier regions did not need goes to the later ones */
    double left = budget - (fsl_now_s() - t_start);
    double share = left > 0 ? left * n_nodes / (nodes_left > 0 ? nodes_left : 1) : 0;
    nodes_left -= n_nodes;
    fsl_solve_options sopt = {.time_limit_s = share > 1e-6 ? share : 1e-6, .max_cuts = 100};
    fsl_solve_result res = {0};
    fsl_kernel_set chosen;
    st = solve_region(g, cands, reg, kreg, r, &sopt, sub, avail, need, &chosen, &res);
    if (st != FSL_OK) break;
    *optimal = *optimal && res.optimal;
    for (int i = 0; i < chosen.n && st == FSL_OK; i++) {
      if (out->n == out->cap) {
        int nc = out->cap ? 2 * out->cap : 64;
        fsl_kernel **nk = realloc(out->k, (size_t)nc * sizeof *nk);
        if (!nk) { st = fsl_errorf(FSL_ERR_NOMEM, "plan: out of memory"); break; }
        out->k = nk;
        out->cap = nc;
      }
      out->k[out->n++] = chosen.k[i];
      chosen.k[i] = NULL;
    }
    for (int i = 0; i < chosen.n; i++) fsl_kernel_free(chosen.k[i]);
    free(chosen.k);
  }
  free(topo); free(reg); free(avail); free(need); free(sub); free(kreg);
  return st;
}

static double set_cost(fsl_kernel_set *ks, const fsl_device *d, const prof *pf) {
  double c = 0;
  for (int i = 0; i < ks->n; i++) c += prof_cost(pf, ks->k[i], d);
  return c;
}

/* Replaces `ks` by the kernels of baseline strategy `s` when those cost
 * less (*replaced then true). */
static fsl_status keep_cheaper_baseline(const fsl_graph *g, fsl_strategy s, const fsl_device *d, prof *pf,
                                        fsl_kernel_set *ks, bool *replaced) {
  fsl_kernel_set b = {.g = g};
  fsl_status st = fsl_baseline(g, s, fsl_device_prologue(d), &b);
  if (st == FSL_OK) st = prof_kernels(pf, b.k, b.n);
  if (st == FSL_OK && set_cost(&b, d, pf) < set_cost(ks, d, pf)) {
    fsl_kernel_set tmp = *ks;
    *ks = b;
    b = tmp;
    *replaced = true;
  }
  fsl_kernel_set_free(&b);
  return st;
}

/* Adds the kernels of the opfuse and greedy plans to the candidates, so
 * that the BLP can pick any of them (those crossing a region cut are
 * dropped by solve_regions like any other candidate). */
static fsl_status add_baseline_candidates(const fsl_graph *g, unsigned prologue, fsl_kernel_set *cands) {
  const fsl_strategy base[2] = {FSL_STRATEGY_OPFUSE, FSL_STRATEGY_GREEDY};
  fsl_status st = FSL_OK;
  for (int b = 0; b < 2 && st == FSL_OK; b++) {
    fsl_kernel_set ks = {.g = g};
    st = fsl_baseline(g, base[b], prologue, &ks);
    if (st == FSL_OK && !fsl_grow((void **)&cands->k, &cands->cap, cands->n + ks.n, sizeof *cands->k))
      st = fsl_errorf(FSL_ERR_NOMEM, "plan: out of memory");
    for (int i = 0; st == FSL_OK && i < ks.n; i++) {
      ks.k[i]->id = cands->n;
      cands->k[cands->n++] = ks.k[i];
      ks.k[i] = NULL;
    }
    fsl_kernel_set_free(&ks);
  }
  return st;
}

/* The optimal strategy's candidates: grown from the nodes marked in seeds
 * (NULL: all), plus the opfuse and greedy plans' kernels. */
static fsl_status optimal_candidates(const fsl_graph *g, const fsl_device *d, const bool *seeds,
                                     fsl_kernel_set *cands) {
  fsl_candidate_options copt = {.max_nodes = 24, .max_per_seed = 64, .prologue = fsl_device_prologue(d),
                                .seeds = seeds};
  fsl_status st = fsl_candidates(g, &copt, cands);
  if (st == FSL_OK) st = add_baseline_candidates(g, fsl_device_prologue(d), cands);
  return st;
}

/* Branch-and-bound nodes per region BLP when costing for the rewrite
 * search: a bound that stops CBC at the same point on every machine (the
 * search's answer must not depend on the clock); regions of real models
 * solve at the root or within a few dozen nodes. */
#define REGION_COST_BB_NODES 2000
#define REGION_COST_SECONDS 30.0

fsl_status fsl_plan_region_cost(const fsl_graph *g, const fsl_device *d, fsl_region_cache *cache, double *cost_s,
                                fsl_region_cost_stats *stats) {
  if (!g || !cache || !cost_s) return fsl_errorf(FSL_ERR_ARG, "fsl_plan_region_cost: NULL argument");
  fsl_device def;
  if (!d) {
    fsl_device_default(&def);
    d = &def;
  }
  *cost_s = 0;
  int *topo = fsl_graph_topo_index(g), *reg = NULL, nr = 0;
  if (!topo) return fsl_errorf(FSL_ERR_NOMEM, "plan: out of memory");
  fsl_status st = fsl_regions_cut(g, topo, &reg, &nr);
  uint64_t *hash = st == FSL_OK ? malloc(((size_t)nr + 1) * sizeof *hash) : NULL;
  double *rcost = st == FSL_OK ? malloc(((size_t)nr + 1) * sizeof *rcost) : NULL;
  bool *miss = st == FSL_OK ? calloc((size_t)nr + 1, sizeof *miss) : NULL;
  bool *seeds = st == FSL_OK ? calloc((size_t)g->n_nodes + 1, sizeof *seeds) : NULL;
  if (st == FSL_OK && (!hash || !rcost || !miss || !seeds)) st = fsl_errorf(FSL_ERR_NOMEM, "plan: out of memory");
  if (st == FSL_OK) st = fsl_region_hashes(g, reg, nr, hash);
  int n_miss = 0;
  for (int r = 0; st == FSL_OK && r < nr; r++)
    if (!fsl_region_cache_get(cache, hash[r], &rcost[r])) {
      miss[r] = true;
      n_miss++;
    }
  if (st == FSL_OK && n_miss > 0) {
    /* candidates grown only from the regions not seen before (the rest
     * are dropped anyway), plus the baselines' kernels, as the optimal
     * strategy has them */
    for (int i = 0; i < g->n_nodes; i++) seeds[i] = miss[reg[g->nodes[i]->id]];
    fsl_kernel_set cands = {.g = g};
    st = optimal_candidates(g, d, seeds, &cands);
    bool *avail = calloc((size_t)g->n_values + 1, sizeof *avail);
    bool *need = calloc((size_t)g->n_values + 1, sizeof *need);
    fsl_kernel **sub = malloc(((size_t)cands.n + 1) * sizeof *sub);
    int *kreg = malloc(((size_t)cands.n + 1) * sizeof *kreg);
    if (st == FSL_OK && (!avail || !need || !sub || !kreg)) st = fsl_errorf(FSL_ERR_NOMEM, "plan: out of memory");
    if (st == FSL_OK) candidate_regions(&cands, reg, kreg);
    for (int k = 0; st == FSL_OK && k < cands.n; k++)
      if (kreg[k] >= 0 && miss[kreg[k]]) fsl_kernel_cost(cands.k[k], d);
    for (int r = 0; st == FSL_OK && r < nr; r++) {
      if (!miss[r]) continue;
      fsl_solve_options sopt = {.time_limit_s = REGION_COST_SECONDS, .max_cuts = 100,
                                .max_bb_nodes = REGION_COST_BB_NODES};
      fsl_solve_result res = {0};
      fsl_kernel_set chosen;
      st = solve_region(g, &cands, reg, kreg, r, &sopt, sub, avail, need, &chosen, &res);
      if (st != FSL_OK) break;
      rcost[r] = res.objective_s;
      fsl_kernel_set_free(&chosen);
      if (!fsl_region_cache_put(cache, hash[r], rcost[r])) st = fsl_errorf(FSL_ERR_NOMEM, "plan: out of memory");
    }
    fsl_kernel_set_free(&cands);
    free(avail); free(need); free(sub); free(kreg);
  }
  for (int r = 0; st == FSL_OK && r < nr; r++) *cost_s += rcost[r];
  if (stats) {
    stats->regions += nr;
    stats->solved += st == FSL_OK ? n_miss : 0;
    stats->cached += st == FSL_OK ? nr - n_miss : 0;
  }
  free(topo); free(reg); free(hash); free(rcost); free(miss); free(seeds);
  return st;
}

fsl_status fsl_plan_build(const fsl_graph *g, fsl_strategy s, const fsl_device *d, fsl_plan *out) {
  return fsl_plan_build_opt(g, s, d, NULL, out);
}

fsl_status fsl_plan_build_opt(const fsl_graph *g, fsl_strategy s, const fsl_device *d, const fsl_plan_options *opt,
                              fsl_plan *out) {
  if (!out) return fsl_errorf(FSL_ERR_ARG, "fsl_plan_build: NULL plan");
  memset(out, 0, sizeof *out);
  if (!g) return fsl_errorf(FSL_ERR_ARG, "fsl_plan_build: NULL graph");
  if ((unsigned)s >= FSL_STRATEGY_COUNT)
    return fsl_errorf(FSL_ERR_ARG, "fsl_plan_build: unknown strategy %d (expected unfused, opfuse, greedy or optimal)",
                      (int)s);
  fsl_device def;
  if (!d) {
    fsl_device_default(&def);
    d = &def;
  }
  double t0 = fsl_now_s();
  out->g = g;
  out->strategy = s;
  out->kernels.g = g;
  prof pf;
  prof_open(&pf, opt ? opt->profiler : NULL, g);
  fsl_status st;
  if (s == FSL_STRATEGY_OPTIMAL) {
    fsl_kernel_set cands = {.g = g};
    st = optimal_candidates(g, d, NULL, &cands);
    if (st == FSL_OK) st = solve_regions(g, &cands, d, &pf, &out->kernels, &out->optimal);
    fsl_kernel_set_free(&cands);
    /* The opfuse and greedy plans are feasible points of the whole-graph
     * BLP; the solver's choice is optimal only within regions (and only
     * when it was proven in time).  Keep the cheapest of the three: the
     * optimal strategy never predicts more than a baseline. */
    bool replaced = false;
    if (st == FSL_OK) st = keep_cheaper_baseline(g, FSL_STRATEGY_GREEDY, d, &pf, &out->kernels, &replaced);
    if (st == FSL_OK) st = keep_cheaper_baseline(g, FSL_STRATEGY_OPFUSE, d, &pf, &out->kernels, &replaced);
    if (replaced) out->optimal = false;
  } else {
    st = fsl_baseline(g, s, fsl_device_prologue(d), &out->kernels);
  }
  /* fused plans recompute the constant broadcasts they read (unfused: one node per kernel) */
  if (st == FSL_OK && s != FSL_STRATEGY_UNFUSED)
    st = fsl_plan_sink_const_views(g, fsl_device_prologue(d), &out->kernels, NULL);
  if (st == FSL_OK) st = prof_kernels(&pf, out->kernels.k, out->kernels.n);
  if (st != FSL_OK) {
    prof_close(&pf);
    fsl_error_context(st, "%s plan", fsl_strategy_name(s));
    fsl_plan_free(out);
    return st;
  }
  out->kernels.g = g;
  double v;
  for (int i = 0; i < out->kernels.n; i++) {
    out->kernels.k[i]->id = i;
    out->predicted_s += prof_cost(&pf, out->kernels.k[i], d);
    if (prof_known(&pf, out->kernels.k[i]->hash, &v) && !isnan(v)) out->n_plan_measured++;
  }
  out->profiled = pf.pr != NULL;
  out->n_cost_cached = pf.n_cached;
  out->n_cost_measured = pf.n_measured;
  out->n_cost_analytic = pf.n_analytic;
  out->profile_s = pf.seconds;
  prof_close(&pf);
  st = fsl_plan_verify(out);
  if (st != FSL_OK) {
    fsl_error_context(st, "%s plan", fsl_strategy_name(s));
    fsl_plan_free(out);
    return st;
  }
  out->orchestrate_s = fsl_now_s() - t0;
  return FSL_OK;
}

void fsl_plan_free(fsl_plan *p) {
  if (!p) return;
  fsl_kernel_set_free(&p->kernels);
  memset(p, 0, sizeof *p);
}

/* ---- verification ---- */

static bool value_of(const fsl_graph *g, const fsl_value *v) {
  return v && v->id >= 0 && v->id < g->n_values && g->values[v->id] == v;
}

static const char *vname(const fsl_value *v) { return v && v->name ? v->name : "?"; }

/* true when the value lists a and b hold the same set; `mark` (per value id,
 * all 0 on entry and exit) is scratch. */
static bool same_values(fsl_value *const *a, int na, fsl_value *const *b, int nb, int *mark) {
  bool same = true;
  for (int i = 0; i < na; i++) mark[a[i]->id] = 1;
  for (int i = 0; i < nb && same; i++) same = mark[b[i]->id] == 1;
  for (int i = 0; i < nb && same; i++) mark[b[i]->id] = 2;
  for (int i = 0; i < na && same; i++) same = mark[a[i]->id] == 2;
  for (int i = 0; i < na; i++) mark[a[i]->id] = 0;
  for (int i = 0; i < nb; i++) mark[b[i]->id] = 0;
  return same;
}

/* Checks kernel ki of p against its re-derivation from its nodes and marks
 * what it writes in `written`. */
static fsl_status verify_kernel(const fsl_plan *p, int ki, const int *topo, bool *written, int *mark) {
  const fsl_graph *g = p->g;
  const fsl_kernel *k = p->kernels.k[ki];
  if (!k || k->n_nodes <= 0 || !k->nodes)
    return fsl_errorf(FSL_ERR_INVALID, "plan kernel k%d: expected at least one node", ki);
  for (int i = 0; i < k->n_nodes; i++) {
    const fsl_node *n = k->nodes[i];
    if (!n || n->id < 0 || n->id >= g->next_node_id || topo[n->id] < 0 || topo[n->id] >= g->n_nodes ||
        g->nodes[topo[n->id]] != n)
      return fsl_errorf(FSL_ERR_INVALID, "plan kernel k%d: node %d is not a node of the graph", ki, i);
  }
  for (int i = 0; i < k->n_in; i++)
    if (!value_of(g, k->in[i])) return fsl_errorf(FSL_ERR_INVALID, "plan kernel k%d: input %d is not a value of the graph", ki, i);
  for (int i = 0; i < k->n_out; i++)
    if (!value_of(g, k->out[i])) return fsl_errorf(FSL_ERR_INVALID, "plan kernel k%d: output %d is not a value of the graph", ki, i);
  fsl_kernel *re = NULL;
  const char *why = NULL;
  FSL_TRY(fsl_kernel_make(g, topo, k->nodes, k->n_nodes, &re, &why));
  fsl_status st = FSL_OK;
  if (!re) {
    st = fsl_errorf(FSL_ERR_INVALID, "plan kernel k%d (%s, first node %s '%s'): not a legal kernel: %s", ki,
                    kind_name(k->kind), fsl_op_name(k->nodes[0]->op), k->nodes[0]->name ? k->nodes[0]->name : "",
                    why ? why : "rejected");
    return st;
  }
  bool same_nodes = re->n_nodes == k->n_nodes;
  for (int i = 0; same_nodes && i < k->n_nodes; i++) same_nodes = re->nodes[i] == k->nodes[i];
  if (!same_nodes) {
    st = fsl_errorf(FSL_ERR_INVALID, "plan kernel k%d (%s): its nodes are duplicated or not in topological order", ki,
                    kind_name(k->kind));
  } else if (re->kind != k->kind) {
    st = fsl_errorf(FSL_ERR_INVALID, "plan kernel k%d: declared %s but its nodes form a %s kernel", ki,
                    kind_name(k->kind), kind_name(re->kind));
  } else if (!same_values(k->in, k->n_in, re->in, re->n_in, mark)) {
    st = fsl_errorf(FSL_ERR_INVALID, "plan kernel k%d (%s): its input list differs from what its nodes read", ki,
                    kind_name(k->kind));
  } else if (!same_values(k->out, k->n_out, re->out, re->n_out, mark)) {
    st = fsl_errorf(FSL_ERR_INVALID, "plan kernel k%d (%s): its output list differs from what its nodes must write",
                    ki, kind_name(k->kind));
  }
  for (int i = 0; st == FSL_OK && i < re->n_in; i++)
    if (!written[re->in[i]->id])
      st = fsl_errorf(FSL_ERR_INVALID,
                      "plan kernel k%d (%s) reads '%s', which is neither a graph input, a constant nor written by an "
                      "earlier kernel", ki, kind_name(k->kind), vname(re->in[i]));
  for (int i = 0; st == FSL_OK && i < re->n_out; i++) written[re->out[i]->id] = true;
  fsl_kernel_free(re);
  return st;
}

fsl_status fsl_plan_verify(const fsl_plan *p) {
  if (!p || !p->g) return fsl_errorf(FSL_ERR_ARG, "fsl_plan_verify: NULL plan or graph");
  const fsl_graph *g = p->g;
  if (p->kernels.n < 0 || (p->kernels.n > 0 && !p->kernels.k))
    return fsl_errorf(FSL_ERR_INVALID, "plan: corrupt kernel list");
  size_t nv = (size_t)(g->n_values > 0 ? g->n_values : 1);
  bool *written = calloc(nv, sizeof *written);
  int *mark = calloc(nv, sizeof *mark);
  int *topo = fsl_graph_topo_index(g);
  fsl_status st = FSL_OK;
  if (!written || !mark || (!topo && g->n_nodes > 0)) {
    st = fsl_errorf(FSL_ERR_NOMEM, "out of memory");
    goto done;
  }
  for (int i = 0; i < g->n_values; i++)
    if (g->values[i] && (g->values[i]->data || g->values[i]->is_input)) written[i] = true;
  for (int i = 0; i < g->n_inputs; i++)
    if (value_of(g, g->inputs[i])) written[g->inputs[i]->id] = true;
  for (int ki = 0; st == FSL_OK && ki < p->kernels.n; ki++) st = verify_kernel(p, ki, topo, written, mark);
  for (int i = 0; st == FSL_OK && i < g->n_outputs; i++) {
    const fsl_value *v = g->outputs[i];
    if (!value_of(g, v)) st = fsl_errorf(FSL_ERR_INVALID, "plan: graph output %d is not a value of the graph", i);
    else if (!written[v->id])
      st = fsl_errorf(FSL_ERR_INVALID, "plan: graph output '%s' is written by no kernel", vname(v));
  }
done:
  free(written);
  free(mark);
  free(topo);
  return st;
}

/* ---- DOT ---- */

static void dot_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; s && *s; s++) {
    if (*s == '"' || *s == '\\') fputc('\\', f);
    if (*s == '\n') fputs("\\n", f);
    else fputc(*s, f);
  }
  fputc('"', f);
}

/* Index of the node in kernel k that produces v, or -1. */
static int producer_in(const fsl_kernel *k, const fsl_value *v) {
  if (!v || !v->producer) return -1;
  for (int i = 0; i < k->n_nodes; i++)
    if (k->nodes[i] == v->producer) return i;
  return -1;
}

/* Prints an edge from wherever v comes from to node `to` (a DOT id);
 * writer[v->id] is the last kernel so far that wrote v (-1 none). */
static void dot_edge(FILE *f, const fsl_plan *p, const fsl_value *v, int ki, const int *writer, const char *to) {
  const fsl_graph *g = p->g;
  if (!value_of(g, v)) return;
  if (v->data && !v->producer) return;  /* constants omitted */
  const fsl_kernel *k = ki >= 0 ? p->kernels.k[ki] : NULL;
  if (k && producer_in(k, v) >= 0) {
    fprintf(f, "  k%d_n%d -> %s [label=", ki, v->producer->id, to);
  } else if (writer[v->id] >= 0) {
    fprintf(f, "  k%d_n%d -> %s [label=", writer[v->id], v->producer->id, to);
  } else if (v->is_input) {
    fprintf(f, "  in%d -> %s [label=", v->id, to);
  } else {
    return;
  }
  dot_str(f, vname(v));
  fputs("];\n", f);
}

void fsl_plan_print_dot(const fsl_plan *p, FILE *f) {
  if (!p || !p->g || !f) return;
  const fsl_graph *g = p->g;
  int *writer = malloc(sizeof(int) * (size_t)(g->n_values > 0 ? g->n_values : 1));
  if (!writer) return;
  for (int i = 0; i < g->n_values; i++) writer[i] = -1;
  fputs("digraph plan {\n  rankdir=TB;\n  node [shape=box, fontsize=10];\n  edge [fontsize=8];\n", f);
  fputs("  label=", f);
  char title[256];
  snprintf(title, sizeof title, "%s plan: %d kernels, predicted %.1f us", fsl_strategy_name(p->strategy),
           p->kernels.n, p->predicted_s * 1e6);
  dot_str(f, title);
  fputs(";\n", f);
  for (int i = 0; i < g->n_inputs; i++) {
    const fsl_value *v = g->inputs[i];
    if (!value_of(g, v)) continue;
    fprintf(f, "  in%d [shape=ellipse, label=", v->id);
    dot_str(f, vname(v));
    fputs("];\n", f);
  }
  for (int ki = 0; ki < p->kernels.n; ki++) {
    const fsl_kernel *k = p->kernels.k[ki];
    char label[128];
    snprintf(label, sizeof label, "k%d %s %.1f us", ki, kind_name(k->kind), k->cost_s * 1e6);
    fprintf(f, "  subgraph cluster_k%d {\n    label=", ki);
    dot_str(f, label);
    fputs(";\n", f);
    for (int i = 0; i < k->n_nodes; i++) {
      fprintf(f, "    k%d_n%d [label=", ki, k->nodes[i]->id);
      dot_str(f, fsl_op_name(k->nodes[i]->op));
      fputs("];\n", f);
    }
    fputs("  }\n", f);
    for (int i = 0; i < k->n_nodes; i++) {
      const fsl_node *n = k->nodes[i];
      char to[48];
      snprintf(to, sizeof to, "k%d_n%d", ki, n->id);
      for (int j = 0; j < n->n_in; j++) dot_edge(f, p, n->in[j], ki, writer, to);
    }
    for (int i = 0; i < k->n_out; i++)
      if (value_of(g, k->out[i])) writer[k->out[i]->id] = ki;
  }
  for (int i = 0; i < g->n_outputs; i++) {
    const fsl_value *v = g->outputs[i];
    if (!value_of(g, v)) continue;
    fprintf(f, "  out%d [shape=ellipse, label=", i);
    dot_str(f, vname(v));
    fputs("];\n", f);
    char to[32];
    snprintf(to, sizeof to, "out%d", i);
    dot_edge(f, p, v, -1, writer, to);
  }
  fputs("}\n", f);
  free(writer);
}
