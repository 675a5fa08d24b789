/*
 * dce.c — dead-code elimination: keep only the nodes that (transitively)
 * feed a graph output.  One backward walk over the topologically ordered
 * node list; removal keeps the order of the survivors.
 */
#include "passes/passes.h"

fsl_status fsl_pass_dce(fsl_graph *g) {
  bool *live = calloc((size_t)g->n_values + 1, sizeof *live);
  bool *keep = calloc((size_t)g->next_node_id + 1, sizeof *keep);
  if (!live || !keep) {
    free(live);
    free(keep);
    return fsl_errorf(FSL_ERR_NOMEM, "DCE: out of memory");
  }
  for (int i = 0; i < g->n_outputs; i++) {
    const fsl_value *v = g->outputs[i];
    if (v && v->id >= 0 && v->id < g->n_values) live[v->id] = true;
  }
  int dead = 0;
  for (int i = g->n_nodes - 1; i >= 0; i--) {
    fsl_node *n = g->nodes[i];
    bool used = false;
    for (int k = 0; k < n->n_out && !used; k++) {
      const fsl_value *v = n->out[k];
      used = v && v->id >= 0 && v->id < g->n_values && live[v->id];
    }
    if (!used) {
      dead++;
      continue;
    }
    keep[n->id] = true;
    for (int k = 0; k < n->n_in; k++) {
      const fsl_value *v = n->in[k];
      if (v && v->id >= 0 && v->id < g->n_values) live[v->id] = true;
    }
  }
  if (dead) fsl_graph_remove_nodes(g, keep);
  free(live);
  free(keep);
  return FSL_OK;
}
