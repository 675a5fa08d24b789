/*
 * search.c — the cost-guided search over the rules marked `cost`
 * (substitutions whose benefit depends on what the orchestrator makes of
 * them: merging sibling matmuls or convolutions trades kernels against
 * fused epilogues).  The cost of a graph is the predicted time of its
 * greedy plan (src/orchestrate) on the default device.
 */
#include "rewrite/rewrite.h"
#include "orchestrate/orchestrate.h"
#include "passes/passes.h"

#define DEFAULT_EVALS 256
#define DEFAULT_SECONDS 10.0
#define MIN_GAIN 1e-3 /* a kept rewrite makes the plan at least 0.1% faster */

static fsl_status cost_of(const fsl_graph *g, const fsl_device *dev, double *cost) {
  fsl_plan p;
  FSL_TRY(fsl_plan_build(g, FSL_STRATEGY_GREEDY, dev, &p));
  *cost = p.predicted_s;
  fsl_plan_free(&p);
  return FSL_OK;
}

static void add_fired(fsl_rewrite_stats *to, const fsl_rewrite_stats *from) {
  to->n_applied += from->n_applied;
  for (int i = 0; i < to->n_rules && from->fired; i++) to->fired[i] += from->fired[i];
}

/* Rule r at node index i of cur, tried on a clone: the clone (with the
 * other rules applied after it) and its cost, or NULL when the rewrite
 * does not apply there. */
static fsl_status try_at(fsl_graph *cur, int i, const fsl_rule *r, const fsl_ruleset *rs, const fsl_device *dev,
                         fsl_graph **out, double *cost, fsl_rewrite_stats *sub) {
  *out = NULL;
  fsl_graph *g = fsl_graph_clone(cur);
  if (!g) return fsl_errorf(FSL_ERR_NOMEM, "rewrite search: out of memory");
  fsl_rw_match m;
  fsl_status st = fsl_rw_match_at(r, g->nodes[i], &m) ? fsl_rw_apply(g, &m) : FSL_ERR_UNSUPPORTED;
  if (st == FSL_OK) st = fsl_graph_toposort(g);
  if (st == FSL_OK) st = fsl_pass_dce(g);
  if (st == FSL_OK) st = fsl_rewrite(g, rs, sub);
  if (st == FSL_OK) st = cost_of(g, dev, cost);
  if (st != FSL_OK) {
    fsl_graph_free(g);
    return st == FSL_ERR_UNSUPPORTED ? FSL_OK : st;
  }
  *out = g;
  return FSL_OK;
}

fsl_status fsl_rewrite_search(fsl_graph **gp, const fsl_ruleset *rs, const fsl_rewrite_search_opts *o,
                              fsl_rewrite_stats *stats) {
  if (!gp || !*gp || !rs || !stats) return fsl_errorf(FSL_ERR_ARG, "fsl_rewrite_search: NULL argument");
  double t0 = fsl_now_s();
  int max_evals = o && o->max_evals > 0 ? o->max_evals : DEFAULT_EVALS;
  double max_s = o && o->max_seconds > 0 ? o->max_seconds : DEFAULT_SECONDS;
  FSL_TRY(fsl_rewrite(*gp, rs, stats));
  fsl_device dev;
  fsl_device_default(&dev);
  fsl_graph *cur = *gp;
  double cur_cost;
  fsl_status st = cost_of(cur, &dev, &cur_cost);
  int evals = 0;
  bool improved = st == FSL_OK;
  while (improved && st == FSL_OK) {
    improved = false;
    for (int i = 0; i < cur->n_nodes && !improved && st == FSL_OK; i++) {
      for (int k = 0; k < rs->n_rules && !improved && st == FSL_OK; k++) {
        const fsl_rule *r = &rs->rules[k];
        fsl_rw_match m;
        if (!r->cost || r->from[0]->op != cur->nodes[i]->op || !fsl_rw_match_at(r, cur->nodes[i], &m) ||
            !fsl_rw_match_is_closed(&m))
          continue;
        if (evals >= max_evals || fsl_now_s() - t0 > max_s) goto out;
        fsl_graph *next;
        double cost;
        fsl_rewrite_stats sub = {0};
        st = try_at(cur, i, r, rs, &dev, &next, &cost, &sub);
        evals++;
        if (st == FSL_OK && next && cost < cur_cost * (1.0 - MIN_GAIN)) {
          next->owns_base = true; /* the chain of kept graphs owns its bases, down to the caller's */
          cur = next;
          cur_cost = cost;
          stats->fired[k]++;
          stats->n_applied++;
          add_fired(stats, &sub);
          improved = true;
        } else {
          fsl_graph_free(next);
        }
        free(sub.fired);
      }
    }
  }
out:
  if (st != FSL_OK) {
    /* the caller's graph is the chain's root: detach it, free the rest */
    fsl_graph *c = cur;
    while (c != *gp && c->base != *gp) c = c->base;
    if (c != *gp) {
      c->owns_base = false;
      fsl_graph_free(cur);
    }
    free(stats->fired);
    stats->fired = NULL;
    return fsl_error_context(st, "rewrite search");
  }
  *gp = cur;
  stats->seconds = fsl_now_s() - t0;
  return FSL_OK;
}
