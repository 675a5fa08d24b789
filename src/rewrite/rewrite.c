/*
 * rewrite.c — the rewrite driver: sweeps over the nodes, applying the
 * first rule whose source matches there with a closed match (the rewrite
 * then removes what it replaces, so it never duplicates work), until a
 * sweep changes nothing.
 */
#include "rewrite/rewrite.h"
#include "passes/passes.h"

#define MAX_SWEEPS 16

/* The rewrites written in C, in the order they run (fired[n_rules + i]). */
static const struct {
  const char *name;
  fsl_status (*run)(fsl_graph *g, int *applied);
} coded[FSL_RW_N_CODED] = {{FSL_RW_SINK_NAME, fsl_rewrite_sink}, {FSL_RW_LINMERGE_NAME, fsl_rewrite_linmerge}};

const char *fsl_rw_coded_name(int i) { return i >= 0 && i < FSL_RW_N_CODED ? coded[i].name : NULL; }

static bool touches(const fsl_rw_match *m, const bool *touched, int n_touched) {
  for (int i = 0; i < m->n_nodes; i++)
    if (m->nodes[i]->id < n_touched && touched[m->nodes[i]->id]) return true;
  return false;
}

static fsl_status sweep(fsl_graph *g, const fsl_ruleset *rs, int *fired, int *applied) {
  int n_touched = g->next_node_id;
  bool *touched = calloc((size_t)n_touched + 1, sizeof *touched);
  if (!touched) return fsl_errorf(FSL_ERR_NOMEM, "rewrite: out of memory");
  int n = g->n_nodes; /* nodes appended by this sweep wait for the next one */
  fsl_rw_match m;
  for (int i = 0; i < n; i++) {
    fsl_node *nd = g->nodes[i];
    if (nd->id < n_touched && touched[nd->id]) continue;
    for (int k = 0; k < rs->n_rules; k++) {
      const fsl_rule *r = &rs->rules[k];
      if (r->cost || r->from[0]->op != nd->op || !fsl_rw_match_at(r, nd, &m)) continue;
      if (!fsl_rw_match_is_closed(&m) || touches(&m, touched, n_touched)) continue;
      fsl_status st = fsl_rw_apply(g, &m);
      if (st == FSL_ERR_UNSUPPORTED) continue;
      if (st != FSL_OK) {
        free(touched);
        return st;
      }
      for (int j = 0; j < m.n_nodes; j++)
        if (m.nodes[j]->id < n_touched) touched[m.nodes[j]->id] = true;
      fired[k]++;
      (*applied)++;
      break;
    }
  }
  free(touched);
  return FSL_OK;
}

fsl_status fsl_rewrite(fsl_graph *g, const fsl_ruleset *rs, fsl_rewrite_stats *stats) {
  if (!g || !rs) return fsl_errorf(FSL_ERR_ARG, "fsl_rewrite: NULL argument");
  double t0 = fsl_now_s();
  int *fired = calloc((size_t)rs->n_rules + FSL_RW_N_CODED, sizeof *fired);
  if (!fired) return fsl_errorf(FSL_ERR_NOMEM, "rewrite: out of memory");
  int total = 0;
  fsl_status st = FSL_OK;
  for (int s = 0; s < MAX_SWEEPS && st == FSL_OK; s++) {
    int applied = 0;
    st = sweep(g, rs, fired, &applied);
    /* once the rules are done, the rewrites written in C, one per sweep
     * (linmerge.c then sees what sink.c built, its leftovers removed) */
    for (int c = 0; c < FSL_RW_N_CODED && st == FSL_OK && !applied; c++) {
      st = coded[c].run(g, &applied);
      fired[rs->n_rules + c] += applied;
    }
    if (st == FSL_OK && applied) st = fsl_graph_toposort(g);
    if (st == FSL_OK && applied) st = fsl_pass_dce(g);
    total += applied;
    if (!applied) break;
  }
  if (st == FSL_OK && total) st = fsl_pass_cse(g);
  if (st == FSL_OK && total) st = fsl_pass_dce(g);
  if (st == FSL_OK) st = fsl_graph_verify(g);
  if (st != FSL_OK || !stats) {
    free(fired);
    return st == FSL_OK ? st : fsl_error_context(st, "rewrite");
  }
  stats->n_applied = total;
  stats->n_rules = rs->n_rules;
  stats->fired = fired;
  stats->seconds = fsl_now_s() - t0;
  return FSL_OK;
}
