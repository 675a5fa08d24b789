/*
 * cost.c — the analytic roofline cost of a kernel (DESIGN.md section 5).
 *
 *   time = max(bytes / bandwidth, linear_flops / peak_flops
 *                                 + elem_work / elem_flops) + launch_s
 *
 * Linear flops are those of the kernel's matmul/conv node (2 * M * N * K
 * per matmul, 2 * out * (C_in/group * kernel volume) per conv).  The rest
 * is elementwise work in units of one multiply or add (what calibrate.c's
 * elem_flops measures): each node costs its element count (output for
 * elementwise and gather nodes, input for reductions) times a weight for
 * its op, the cost column of src/ir/ops.def (1 for arithmetic, comparisons
 * and selects, 4 for division and square roots, 16 for exp, log, tanh,
 * erf, sigmoid, pow and trigonometric functions, which generated code
 * evaluates as polynomials of about that many vector operations; 2 for
 * gathers and arg-reductions, which add index arithmetic).  Movement views
 * cost nothing beyond the bytes their kernel reads, but a sliding window
 * multiplies the work of what the kernel computes before it (eval_counts).  Device numbers come
 * from a backend's calibration through device.c, or fsl_device_default.
 */
#include "orchestrate/orchestrate.h"

/* FLOPs of one matmul or conv node (multiply and add counted separately);
 * 0 for other ops or unknown shapes. */
static double linear_flops(const fsl_node *n) {
  if (n->n_in < 2 || n->n_out < 1 || !n->in[0] || !n->in[1] || !n->out[0]) return 0;
  const fsl_value *x = n->in[0], *w = n->in[1], *y = n->out[0];
  int64_t out = fsl_value_numel(y);
  if (out <= 0) return 0;
  if (n->op == FSL_OP_matmul) {
    if (x->rank < 1) return 0;
    int64_t k = x->dims[x->rank - 1];
    return k > 0 ? 2.0 * (double)out * (double)k : 0;
  }
  if (n->op == FSL_OP_conv) {
    /* w: [C_out, C_in/group, k...]: one output element reads numel(w)/C_out weights */
    int64_t wn = fsl_value_numel(w);
    if (w->rank < 1 || w->dims[0] <= 0 || wn <= 0) return 0;
    return 2.0 * (double)out * ((double)wn / (double)w->dims[0]);
  }
  return 0;
}

/* Elementwise work of one non-linear node, in units (ops.def's cost column). */
static double elem_work(const fsl_node *n) {
  const fsl_op_info *oi = fsl_op_get(n->op);
  const fsl_value *o = n->n_out > 0 ? n->out[0] : NULL;
  double out = o ? (double)fsl_value_numel(o) : 0;
  if (out < 0) out = 0;
  switch (oi->kind) {
  case FSL_KIND_ELEMENTWISE: return out * oi->cost;
  case FSL_KIND_REDUCE: {
    double in = n->n_in > 0 && n->in[0] ? (double)fsl_value_numel(n->in[0]) : 0;
    return (in > 0 ? in : 0) * oi->cost;
  }
  case FSL_KIND_GATHER: return out * oi->cost;
  case FSL_KIND_MOVEMENT: case FSL_KIND_LINEAR: return 0;
  default: {  /* opaque: one unit per output element */
    double f = 0;
    for (int j = 0; j < n->n_out; j++)
      if (n->out[j] && fsl_value_numel(n->out[j]) > 0) f += (double)fsl_value_numel(n->out[j]);
    return f;
  }
  }
}

/* How many times generated code evaluates each element of node i's output
 * per run (dup[i] >= 1).  A fused kernel computes a value where it is
 * read: a sliding window reads each element up to kernel-volume times, so
 * everything the kernel computes before it runs that many times more (ONNX
 * MaxPool 13x13 after a SiLU: the sigmoid runs 169 times per element).
 * Broadcasts (expand) are not counted: the code generator computes a
 * reduction's kept-space values once per row and hoists values invariant
 * along the inner axis.  Duplication stops at a reduce, whose result is
 * computed once per kept element. */
static void eval_counts(const fsl_kernel *k, double *dup) {
  for (int i = k->n_nodes - 1; i >= 0; i--) {
    const fsl_node *n = k->nodes[i];
    dup[i] = 1;
    if (!n || n->n_out < 1 || !n->out[0] || fsl_op_get(n->op)->kind == FSL_KIND_REDUCE) continue;
    double in_numel = (double)fsl_value_numel(n->out[0]);
    for (int j = i + 1; j < k->n_nodes; j++) {
      const fsl_node *c = k->nodes[j];
      bool reads = false;
      for (int a = 0; c && a < c->n_in; a++) reads = reads || c->in[a] == n->out[0];
      if (!reads) continue;
      double f = 1;
      if (c->op == FSL_OP_window && c->n_out > 0 && c->out[0] && in_numel > 0)
        f = (double)fsl_value_numel(c->out[0]) / in_numel;
      if (dup[j] * f > dup[i]) dup[i] = dup[j] * f;
    }
  }
}

double fsl_kernel_cost(fsl_kernel *k, const fsl_device *d) {
  if (!k) return 0;
  fsl_device def;
  if (!d) {
    fsl_device_default(&def);
    d = &def;
  }
  double lin = 0, work = 0;
  double dup_small[32], *dup = k->n_nodes <= 32 ? dup_small : malloc(sizeof(double) * (size_t)k->n_nodes);
  if (dup) eval_counts(k, dup);
  for (int i = 0; i < k->n_nodes; i++) {
    if (!k->nodes[i]) continue;
    if (fsl_op_get(k->nodes[i]->op)->kind == FSL_KIND_LINEAR) lin += linear_flops(k->nodes[i]);
    else work += elem_work(k->nodes[i]) * (dup ? dup[i] : 1);
  }
  if (dup != dup_small) free(dup);
  double mem = d->bandwidth > 0 ? k->bytes / d->bandwidth : 0;
  double compute = (d->peak_flops > 0 ? lin / d->peak_flops : 0) + (d->elem_flops > 0 ? work / d->elem_flops : 0);
  double t = (mem > compute ? mem : compute) + (d->launch_s > 0 ? d->launch_s : 0);
  k->cost_s = t;
  return t;
}
