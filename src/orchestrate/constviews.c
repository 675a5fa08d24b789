/*
 * constviews.c — a plan's kernels recompute the broadcasts of constants
 * they read, instead of reading them materialised.
 *
 * A view of a constant (an expand of a per-tensor scale, a reshape of a
 * bias) costs nothing where it is computed: the kernel reads the small
 * constant.  Unshare (passes/unshare.c) gives every reader node its own
 * copy, but the plan may still put that copy in another kernel than its
 * reader's (the BLP sees no difference where the reader's kernel could
 * not take it in a candidate it enumerated, e.g. past the candidate size
 * cap): the view's kernel then writes the full-size tensor and the
 * reader's kernel reads it back, both of them as many bytes as the
 * activation.  resnet18 QDQ's MaxPool kernel wrote the dequantization
 * scale of its output, 64x56x56 floats of one value, for the residual
 * add's kernel to read with a stride of 12 KiB per channel.
 *
 * So, once the strategy has chosen its kernels: the kernel that reads a
 * one-node view of constants (a movement primitive whose inputs are all
 * constants, read by one node) written by another kernel takes the view
 * in, when the kernel stays legal and of its kind for the device; the writer drops the view
 * once no kernel reads it (and drops out of the plan if the view was all
 * it computed).  The nodes, the kernels' other values and the execution
 * order stay as they were; the costs are taken afterwards.
 */
#include "orchestrate/kernel_ws.h"

static bool const_view_node(const fsl_node *n) {
  const fsl_op_info *oi = fsl_op_get(n->op);
  if (!oi->primitive || oi->kind != FSL_KIND_MOVEMENT || n->n_out != 1 || !n->out[0] || n->n_in < 1) return false;
  for (int i = 0; i < n->n_in; i++)
    if (!n->in[i] || !n->in[i]->data) return false;
  return true;
}

static bool reads(const fsl_kernel *k, const fsl_value *v) {
  for (int i = 0; i < k->n_in; i++)
    if (k->in[i] == v) return true;
  return false;
}

/* Kernel k with node p added (add) or removed; NULL when that is not a
 * legal kernel of k's kind. */
static fsl_status remake(fsl_kernel_ws *ws, const fsl_kernel *k, fsl_node *p, bool add, fsl_kernel **out) {
  *out = NULL;
  fsl_node **nodes = malloc(sizeof *nodes * (size_t)(k->n_nodes + 1));
  if (!nodes) return fsl_errorf(FSL_ERR_NOMEM, "plan: out of memory");
  int n = 0;
  for (int i = 0; i < k->n_nodes; i++)
    if (k->nodes[i] != p) nodes[n++] = k->nodes[i];
  if (add) nodes[n++] = p;
  const char *why;
  int verdict;
  fsl_status st = fsl_kernel_ws_make(ws, nodes, n, true, out, &why, &verdict);
  free(nodes);
  if (st == FSL_OK && *out && (*out)->kind != k->kind) {
    fsl_kernel_free(*out);
    *out = NULL;
  }
  return st;
}

/* Puts nk in place of ks's kernel i (keeping its id). */
static void replace_kernel(fsl_kernel_set *ks, int i, fsl_kernel *nk) {
  nk->id = ks->k[i]->id;
  fsl_kernel_free(ks->k[i]);
  ks->k[i] = nk;
}

fsl_status fsl_plan_sink_const_views(const fsl_graph *g, unsigned prologue, fsl_kernel_set *ks, int *n_sunk) {
  if (n_sunk) *n_sunk = 0;
  int *topo = fsl_graph_topo_index(g);
  fsl_kernel_ws *ws = NULL;
  fsl_status st = topo ? fsl_kernel_ws_new(g, topo, &ws) : fsl_errorf(FSL_ERR_NOMEM, "plan: out of memory");
  if (st == FSL_OK) fsl_kernel_ws_set_prologue(ws, prologue);
  for (int i = 0; st == FSL_OK && i < ks->n; i++) {
    for (int o = 0; st == FSL_OK && o < ks->k[i]->n_out; o++) {
      fsl_value *v = ks->k[i]->out[o];
      fsl_node *p = v->producer;
      /* one reader node (unshare's copies): a view read by several nodes
       * would be written by every kernel that computes it for one of them
       * (a kernel writes each value a node outside it reads) */
      if (v->is_output || v->n_cons != 1 || !p || !const_view_node(p)) continue;
      bool all = true;
      for (int j = 0; st == FSL_OK && j < ks->n; j++) {
        if (j == i || !reads(ks->k[j], v)) continue;
        fsl_kernel *nk;
        st = remake(ws, ks->k[j], p, true, &nk);
        if (!nk) {
          all = false;
          continue;
        }
        replace_kernel(ks, j, nk);
        if (n_sunk) (*n_sunk)++;
      }
      if (st != FSL_OK || !all) continue;
      /* no kernel reads v now (its one reader took it): its writer drops the view */
      fsl_kernel *k = ks->k[i], *nk = NULL;
      if (k->n_nodes == 1) {
        fsl_kernel_free(k);
        memmove(ks->k + i, ks->k + i + 1, sizeof *ks->k * (size_t)(ks->n - i - 1));
        ks->n--;
        i--;
        break;
      }
      st = remake(ws, k, p, false, &nk);
      if (nk) {
        replace_kernel(ks, i, nk);
        o = -1; /* its outputs changed: scan them again */
      }
    }
  }
  fsl_kernel_ws_free(ws);
  free(topo);
  return st;
}
