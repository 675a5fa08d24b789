/*
 * linchain.c — the epilogue chain of a LINEAR kernel: the elementwise,
 * reshape and permute nodes after its matmul/conv that a backend computes
 * inside the linear op (oneDNN post-ops, the store of a generated matmul
 * or convolution), and the closed prefix it can take.  The backends' split
 * (codegen/linsplit.h) and the cost model (cost.c) read the same chain, so
 * the cost of a LINEAR candidate follows what runs.
 */
#include "orchestrate/orchestrate.h"

int fsl_linear_node_index(const fsl_kernel *k) {
  int li = -1, n = 0;
  for (int i = 0; i < k->n_nodes; i++)
    if (k->nodes[i] && fsl_op_is_primitive(k->nodes[i]->op) && fsl_op_get(k->nodes[i]->op)->kind == FSL_KIND_LINEAR) {
      li = i;
      n++;
    }
  return n == 1 ? li : -1;
}

int fsl_linear_chain(const fsl_kernel *k, int li, fsl_node **chain, int cap) {
  if (li < 0 || li >= k->n_nodes || cap <= 0) return 0;
  const fsl_node *lin = k->nodes[li];
  int n = 0;
  for (int i = li + 1; i < k->n_nodes && n < cap; i++) {
    fsl_node *c = k->nodes[i];
    bool reads = false;
    for (int j = 0; j < c->n_in && !reads; j++) {
      const fsl_value *v = c->in[j];
      if (!v) continue;
      reads = v == lin->out[0];
      for (int t = 0; t < n && !reads; t++) reads = chain[t]->out[0] == v;
    }
    if (!reads) continue;
    bool chains = fsl_op_is_elementwise(c->op) || c->op == FSL_OP_reshape || c->op == FSL_OP_permute;
    if (!chains || c->n_out != 1 || !c->out[0]) break;
    chain[n++] = c;
  }
  return n;
}

bool fsl_linear_chain_closed(const fsl_node *lin, fsl_node *const *chain, int n) {
  if (n <= 0) return true;
  for (int j = -1; j < n - 1; j++) {
    const fsl_value *v = j < 0 ? lin->out[0] : chain[j]->out[0];
    if (v->is_output) return false;
    for (int c = 0; c < v->n_cons; c++) {
      bool inside = false;
      for (int t = j + 1; t < n && !inside; t++) inside = chain[t] == v->cons[c];
      if (!inside) return false;
    }
  }
  return true;
}
